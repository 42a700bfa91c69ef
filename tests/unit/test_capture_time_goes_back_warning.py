"""A capture appended to a link whose last sealed record is later than the capture's first record
is taken (records stay in capture order) with a warning naming the link and both times, in the
summary on stderr and in the JSON report's `warnings`; no warning when time goes on."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import capture_cli, cli

from ledgertool.digest.record import record_dtype

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


def _pcap(path: Path, seconds: list[int], usec: int = 0) -> Path:
    """A pcap of 60-byte Ethernet frames at T0 + each of `seconds` (and `usec` microseconds)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for i, s in enumerate(seconds):
        frame = bytes(12) + b"\x08\x00" + i.to_bytes(46, "big")
        out.append(struct.pack("<IIII", T0 + s, usec, len(frame), len(frame)) + frame)
    path.write_bytes(b"".join(out))
    return path


def _warning(led: Path, first_s: int, last_s: int, segment: int) -> str:
    first, last = (T0 + first_s) * 10**9, (T0 + last_s) * 10**9
    return (
        f"{led}: link link0: timestamps go backwards: this capture's first record is at "
        f"2026-01-01T00:{first_s // 60:02d}:{first_s % 60:02d}.000000000Z (ts_ns {first}), before "
        f"the last record the link sealed, at 2026-01-01T00:{last_s // 60:02d}:{last_s % 60:02d}"
        f".000000000Z (ts_ns {last}, segment {segment}); appended all the same, in capture order"
    )


def test_an_earlier_capture_appended_is_taken_with_a_warning(tmp_path, keydir):
    led = tmp_path / "L"
    late = _pcap(tmp_path / "late.pcap", [100, 101, 102])
    early = _pcap(tmp_path / "early.pcap", [10, 11, 12, 200])
    assert capture_cli(late, led, keydir).stderr == ""
    r = capture_cli(early, led, keydir, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["warnings"] == [_warning(led, 10, 102, 0)]
    assert (rep["frames"], rep["first_seq"], rep["segments"]) == (4, "3", [1])
    assert r.stderr.splitlines() == [f"warning: {_warning(led, 10, 102, 0)}"]
    # the text summary says it too; the last sealed record is now the early capture's last (200 s)
    r = capture_cli(_pcap(tmp_path / "again.pcap", [150]), led, keydir)
    assert r.returncode == 0 and f"warning: {_warning(led, 150, 200, 1)}\n" in r.stderr
    v = cli("verify", led, "--trust", keydir / "verifier.pub")
    assert v.returncode == 0, v.stdout


@pytest.mark.parametrize("next_s", [102, 103])
def test_no_warning_when_time_goes_on_or_stays(tmp_path, keydir, next_s):
    led = tmp_path / "L"
    assert capture_cli(_pcap(tmp_path / "a.pcap", [100, 101, 102]), led, keydir).returncode == 0
    r = capture_cli(_pcap(tmp_path / "b.pcap", [next_s, 300]), led, keydir, "--json")
    assert (r.returncode, json.loads(r.stdout)["warnings"], r.stderr.count("warning")) == (0, [], 0)


def test_a_later_first_microsecond_is_not_earlier(tmp_path, keydir):
    led = tmp_path / "L"
    assert capture_cli(_pcap(tmp_path / "a.pcap", [100]), led, keydir).returncode == 0
    r = capture_cli(_pcap(tmp_path / "b.pcap", [100], usec=1), led, keydir, "--json")
    assert json.loads(r.stdout)["warnings"] == []


def _records(path: Path, first_seq: int, seconds: list[int]) -> str:
    arr = np.zeros(len(seconds), dtype=record_dtype(16))  # siphash-1-3-128
    arr["seq"] = np.arange(first_seq, first_seq + len(seconds))
    arr["ts_ns"] = [(T0 + s) * 10**9 for s in seconds]
    arr["cap_len"] = arr["wire_len"] = 60
    arr["linktype"] = 1
    path.write_bytes(arr.tobytes())
    return f"records:{path}"


def test_records_computed_elsewhere_are_compared_too(tmp_path, keydir):
    led = tmp_path / "L"
    assert capture_cli(_records(tmp_path / "a.rec", 0, [100, 101]), led, keydir).returncode == 0
    r = capture_cli(_records(tmp_path / "b.rec", 2, [50, 60]), led, keydir, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["warnings"] == [_warning(led, 50, 101, 0)]
