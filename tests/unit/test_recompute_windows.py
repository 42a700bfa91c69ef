"""recompute against the window tier: a capture accumulated into windows with the ledger's keys,
compared per window (frames named from decoded sketches), beyond capacity reported as a count,
and one verdict over a range of windows when the clocks are not shared."""

from __future__ import annotations

import json
import struct
from collections import Counter
from pathlib import Path

import pytest
from conftest import SAMPLES, cli_in_process, load_keys

from ledgertool.algorithms import get_algorithm
from ledgertool.capture.run import capture_file
from ledgertool.ledger.header import load_ledger
from ledgertool.reconcile.against_windows import parse_windows_range, reconcile_windows
from ledgertool.reconcile.recompute import _capture_records
from ledgertool.source import open_source

MS = 1_000_000
HOUR = 3600 * 10**9
SAMPLE = SAMPLES / "sample.pcapng"  # 294 frames over 5.8 ms: six 1 ms windows


def _frames(path: Path) -> list:
    with open_source(path) as r:
        return list(r.frames())


def _write_pcap(path: Path, frames: list[tuple[int, bytes, int]]) -> list[int]:
    """A nanosecond pcap of (ts_ns, data, wire_len) frames, Ethernet; the byte offset of each
    record header."""
    out, offsets = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)], []
    at = 24
    for ts, data, wire in frames:
        offsets.append(at)
        out.append(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), wire) + data)
        at += 16 + len(data)
    path.write_bytes(b"".join(out))
    return offsets


def _ledger(tmp: Path, keydir: Path, capacity: int | None = None) -> Path:
    dk, sk, _ = load_keys(keydir)
    capture_file(
        SAMPLE,
        tmp / "L",
        digest_key=dk,
        signing_key=sk,
        tiers=("windows",),
        window_ns=MS,
        window_capacity=capacity,
    )
    return tmp / "L"


def _valid_report(doc: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SAMPLES.parent / "schemas" / "recompute-report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)


def _digests(path: Path, ledger: Path, dk) -> list[bytes]:
    head = load_ledger(ledger)
    recs, _ = _capture_records(path, dk, get_algorithm(head.algorithm), head.strip, None, 1)
    return [bytes(d) for d in recs["digest"]]


def test_the_same_capture_matches_every_window(tmp_path, keydir, capsys):
    dk, _, trust = load_keys(keydir)
    ledger = _ledger(tmp_path, keydir)
    res = reconcile_windows(SAMPLE, ledger, dk, trust=trust)
    assert res.ok and res.mode == "per_window" and (res.frames, res.ledger_frames) == (294, 294)
    assert [w.status for w in res.windows] == ["match"] * 6
    assert sum(w.capture_frames for w in res.windows) == 294
    assert all(w.ledger_wire_bytes == w.capture_wire_bytes > 0 for w in res.windows)
    rc, out, _ = cli_in_process(
        "recompute",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
    )
    assert rc == 0 and out.startswith("MATCH") and "6 windows" in out
    # without the trust bundle the verdict is unverified: never exit 0
    assert not reconcile_windows(SAMPLE, ledger, dk).ok


def test_removed_and_added_frames_are_named_exactly(tmp_path, keydir, capsys):
    dk, _, trust = load_keys(keydir)
    ledger = _ledger(tmp_path, keydir)
    frames = _frames(SAMPLE)
    digests = _digests(SAMPLE, ledger, dk)
    removed = {7, 120, 121, 250}
    kept = [(f.ts_ns, f.data, f.wire_len) for f in frames if f.index not in removed]
    # two frames of our own, inside windows 1 and 4 of the run (bytes no frame of it has)
    base = frames[0].ts_ns // MS * MS
    added = [
        (base + MS + 500, frames[60].data[:-1] + b"\xee", frames[60].wire_len),
        (base + 4 * MS + 900, frames[200].data[:-2] + b"\xab\xcd", frames[200].wire_len),
    ]
    rows = sorted(kept + added, key=lambda r: r[0])
    path = tmp_path / "changed.pcap"
    offsets = _write_pcap(path, rows)
    new_seq = [rows.index(a) for a in added]
    res = reconcile_windows(path, ledger, dk, trust=trust)
    assert not res.ok and res.frames == 292
    differing = {w.index - base // MS: w for w in res.differing}
    assert all(w.status == "differ" for w in differing.values())
    assert Counter(d for w in differing.values() for d in w.ledger_only) == Counter(
        digests[i] for i in removed
    )
    named = [f for w in differing.values() for f in w.capture_only]
    assert [(f.seq, f.offset, f.ts_ns) for f in named] == [
        (s, offsets[s], rows[s][0]) for s in new_seq
    ]
    assert {k for k, w in differing.items() if w.capture_only} == {1, 4}
    assert all(f.summary for f in named)
    rc, out, _ = cli_in_process(
        "recompute",
        path,
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--json",
    )
    doc = json.loads(out)
    _valid_report(doc)
    assert rc == 1 and doc["against"] == "windows" and doc["windows_differing"] == len(differing)
    got = [f for w in doc["per_window"] for f in w["capture_only"]]
    assert [(f["seq"], f["offset"]) for f in got] == [(str(s), offsets[s]) for s in new_seq]
    assert sorted(d for w in doc["per_window"] for d in w["ledger_only"]) == sorted(
        digests[i].hex() for i in removed
    )


def test_a_window_beyond_capacity_reports_the_count_difference_only(tmp_path, keydir, capsys):
    dk, _, trust = load_keys(keydir)
    ledger = _ledger(tmp_path, keydir, capacity=1)  # 99 cells: far fewer than the changes below
    frames = _frames(SAMPLE)
    base = frames[0].ts_ns // MS
    # every frame of window 2 replaced by a changed copy, and five of them dropped
    rows, cut = [], 0
    for f in frames:
        if f.ts_ns // MS - base == 2:
            cut += 1
            if cut <= 5:
                continue
            rows.append((f.ts_ns, f.data[:-1] + bytes([f.data[-1] ^ 0x5A]), f.wire_len))
        else:
            rows.append((f.ts_ns, f.data, f.wire_len))
    _write_pcap(tmp_path / "many.pcap", rows)
    res = reconcile_windows(tmp_path / "many.pcap", ledger, dk, trust=trust)
    [w] = res.differing
    assert w.index - base == 2 and w.status == "beyond_capacity"
    assert (w.ledger_frames, w.capture_frames, w.frames_difference) == (cut, cut - 5, 5)
    assert w.ledger_only == () and w.capture_only == ()
    rc, out, _ = cli_in_process(
        "recompute",
        tmp_path / "many.pcap",
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
    )
    assert rc == 1 and "beyond capacity" in out and "5 more in the ledger" in out


def test_a_retimed_capture_differs_per_window_and_matches_over_the_range(tmp_path, keydir, capsys):
    dk, _, trust = load_keys(keydir)
    ledger = _ledger(tmp_path, keydir)
    frames = _frames(SAMPLE)
    _write_pcap(tmp_path / "later.pcap", [(f.ts_ns + HOUR, f.data, f.wire_len) for f in frames])
    per = reconcile_windows(tmp_path / "later.pcap", ledger, dk, trust=trust)
    assert not per.ok and len(per.differing) == 12  # six ledger windows, six an hour later
    whole = reconcile_windows(
        tmp_path / "later.pcap", ledger, dk, trust=trust, windows_range=(None, None)
    )
    assert whole.ok and whole.mode == "range" and whole.range_windows == 6
    assert (whole.frames, whole.ledger_frames) == (294, 294)
    base = frames[0].ts_ns // MS
    part = reconcile_windows(
        tmp_path / "later.pcap", ledger, dk, trust=trust, windows_range=(base, base + 4)
    )
    assert not part.ok and part.range_windows == 5 and part.ledger_frames < 294
    rc, out, _ = cli_in_process(
        "recompute",
        tmp_path / "later.pcap",
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--windows-range",
        "all",
        "--json",
    )
    doc = json.loads(out)
    _valid_report(doc)
    assert rc == 0 and doc["mode"] == "range" and doc["range"]["windows"] == 6
    assert doc["frames"] == doc["ledger_frames"] == 294


def test_windows_range_parsing():
    assert parse_windows_range("all") == (None, None)
    assert parse_windows_range("5..9") == (5, 9)
    assert parse_windows_range("..9") == (None, 9)
    from ledgertool.errors import UsageError

    for bad in ("5", "9..5", "a..b"):
        with pytest.raises(UsageError, match="windows_range"):
            parse_windows_range(bad)


def test_a_bad_range_or_a_ledger_without_windows_is_bad_input(tmp_path, keydir, capsys):
    ledger = _ledger(tmp_path, keydir)
    rc, _, err = cli_in_process(
        "recompute",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--windows-range",
        "9..5",
    )
    assert rc == 2 and "--windows-range '9..5': FROM is after TO" in err
    dk, sk, _ = load_keys(keydir)
    capture_file(SAMPLE, tmp_path / "F", digest_key=dk, signing_key=sk)
    rc, _, err = cli_in_process(
        "recompute",
        SAMPLE,
        "--ledger",
        tmp_path / "F",
        "--digest-key",
        keydir / "digest.key",
        "--against",
        "windows",
    )
    assert rc == 2 and "has no window tier" in err


def test_frames_at_copies_the_frames_frames_yields():
    every = _frames(SAMPLE)
    wanted = {0, 15, 16, 17, 200, 293, 400}  # across batches of 16; 400 is past the end
    with open_source(SAMPLE) as r:
        got = r.frames_at(wanted, batch=16)
    assert sorted(got) == [0, 15, 16, 17, 200, 293]
    assert all(got[i] == every[i] for i in got)
