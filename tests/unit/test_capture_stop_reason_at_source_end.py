"""`capture`'s stop_reason when --duration or --frames is reached just as a file, workload or
records input has been read to its end: every frame was read, so the source ended (`end of
capture`, and no "stopped by" line); with a frame left unread the limit stopped it. The clock of the
capture loop is made to jump past --duration once the first batch was read, so both cases are
deterministic."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, capture_cli, cli

from ledgertool.capture import run as capture_run
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.record import record_dtype
from ledgertool.source.records import RecordsReader

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from device_spec import Device, Frame  # noqa: E402

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
WORKLOAD = Path(__file__).resolve().parents[2] / "samples/workloads/rocev2-allreduce.toml"  # 1,152


@pytest.fixture()
def late_after_first_batch(monkeypatch):
    """--duration expires as soon as a fill has handed out records (before the next is asked);
    `["on"] = False` sets the clock back for another capture."""
    late = {"on": False}

    def clock():
        return time.perf_counter() + (3600.0 if late["on"] else 0.0)

    monkeypatch.setattr(capture_run, "time", types.SimpleNamespace(perf_counter=clock))
    for cls in (DigestEngine, RecordsReader):
        real = cls.fill

        def fill(self, *a, _real=real, **k):
            got = _real(self, *a, **k)
            late["on"] = late["on"] or got[1] > 0
            return got

        monkeypatch.setattr(cls, "fill", fill)
    return late


@pytest.mark.parametrize(
    ("source", "frames", "extra"),
    [
        (SAMPLE, 294, ()),
        (f"workload:{WORKLOAD}", 1152, ("--strip", "rdma")),
    ],
)
def test_duration_reached_as_the_source_ends_is_the_end(
    tmp_path, keydir, late_after_first_batch, source, frames, extra
):
    r = capture_cli(source, tmp_path / "L", keydir, "--duration", "1", "--json", *extra)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert (rep["frames"], rep["stop_reason"]) == (frames, "end of capture")
    late_after_first_batch["on"] = False
    t = capture_cli(source, tmp_path / "T", keydir, "--duration", "1", *extra)
    assert t.returncode == 0, t.stderr
    assert f"captured {frames:,} frames" in t.stdout and "stopped by" not in t.stdout


def test_duration_reached_with_frames_left_says_duration(tmp_path, keydir, late_after_first_batch):
    # one batch is one segment of 100 records: 194 frames are left unread
    args = ("--duration", "1", "--segment-records", "100")
    r = capture_cli(SAMPLE, tmp_path / "L", keydir, *args, "--json")
    rep = json.loads(r.stdout)
    assert (r.returncode, rep["frames"], rep["stop_reason"]) == (0, 100, "duration")
    late_after_first_batch["on"] = False
    t = capture_cli(SAMPLE, tmp_path / "T", keydir, *args)
    assert f"stopped by --duration: any frames of {SAMPLE} after that point" in t.stdout


@pytest.mark.parametrize(("n", "reason"), [(294, "end of capture"), (293, "frames"), (1, "frames")])
def test_frames_equal_to_the_whole_file_is_the_end(tmp_path, keydir, n, reason):
    r = capture_cli(SAMPLE, tmp_path / "L", keydir, "--frames", str(n), "--json")
    rep = json.loads(r.stdout)
    assert (r.returncode, rep["frames"], rep["stop_reason"]) == (0, n, reason)
    t = capture_cli(SAMPLE, tmp_path / "T", keydir, "--frames", str(n))
    assert ("stopped by --frames" in t.stdout) == (reason == "frames"), t.stdout


def _records(n: int) -> bytes:
    arr = np.zeros(n, dtype=record_dtype(16))  # siphash-1-3-128, the default algorithm
    arr["seq"] = np.arange(n)
    arr["ts_ns"] = 1_767_225_600_000_000_000 + 1000 * np.arange(n)
    arr["cap_len"] = arr["wire_len"] = 60
    arr["linktype"] = 1
    return arr.tobytes()


@pytest.mark.parametrize(("n", "reason"), [(40, "end of capture"), (41, "frames")])
def test_plain_records_read_to_their_end(tmp_path, keydir, n, reason):
    src = tmp_path / "dev.records"
    src.write_bytes(_records(n))
    r = capture_cli(f"records:{src}", tmp_path / "L", keydir, "--frames", "40", "--json")
    rep = json.loads(r.stdout)
    assert (r.returncode, rep["frames"], rep["stop_reason"]) == (0, 40, reason), r.stderr


@pytest.mark.parametrize(("n", "reason"), [(40, "end of capture"), (41, "frames")])
def test_authenticated_stream_read_to_its_close_block(tmp_path, keydir, n, reason):
    empty = tmp_path / "empty.records"
    empty.write_bytes(b"")
    lg = tmp_path / "L"
    assert capture_cli(f"records:{empty}", lg, keydir).returncode == 0
    ledger_id = json.loads((lg / "ledger.json").read_text())["ledger_id"]
    master = bytes.fromhex((keydir / "digest.key").read_text().strip())
    d = Device(master, ledger_id, "ab" * 16, link="link0", lanes=1, stream_no=1)
    for i in range(n):
        d.frame(0, 1_767_225_600_000_000_000 + 1000 * i, Frame(60, 60, 0, 1, bytes(16)))
    src = tmp_path / "dev.lts"
    src.write_bytes(d.close())
    r = capture_cli(f"records:{src}", lg, keydir, "--frames", "40", "--json")
    rep = json.loads(r.stdout)
    assert (r.returncode, rep["frames"], rep["stop_reason"]) == (0, 40, reason), r.stderr
    v = cli("verify", lg, "--trust", keydir / "verifier.pub")
    assert v.returncode == 0, v.stdout + v.stderr
