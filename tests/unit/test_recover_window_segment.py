"""`recover` of a window log's open segment: a capture killed mid-run leaves the window records
it had emitted in an open window segment; recover seals its authenticated prefix (whole blocks
whose device MAC verifies) like a link's, with the seal stating the windows' sums, so the ledger
verifies and the recovered windows compare with the capture."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLES, load_keys
from test_reconcile import write_pcap

from ledgertool.algorithms import get_algorithm
from ledgertool.capture.run import capture_file
from ledgertool.digest.reference import read_pcap
from ledgertool.digest.window import WindowAccumulator, WindowKeys, WindowRecord
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.recover import recover_ledger
from ledgertool.ledger.sealer import load_seal
from ledgertool.ledger.writer import LinkWriter
from ledgertool.reconcile.against_windows import reconcile_windows
from ledgertool.reconcile.recompute import _capture_records
from ledgertool.verify.ledger import verify_ledger

MS = 1_000_000
HOUR = 3600 * 10**9
LOG = layout.window_log("link0")


def _windows(path: Path, ledger: Path, dk) -> list[WindowRecord]:
    """The window records the device would write for the capture at `path`."""
    head = load_ledger(ledger)
    recs, _ = _capture_records(path, dk, get_algorithm(head.algorithm), head.strip, None, 1)
    keys = WindowKeys.derive(dk.master, head.algorithm, head.ledger_id, "link0", MS)
    acc = WindowAccumulator(keys, head.digest_size, window_ns=MS, cells=head.window.cells)
    return acc.add(recs) + acc.finish()


@pytest.fixture()
def left_open(tmp_path, keydir):
    """A windows-only ledger of sample.pcap (one sealed window segment), then the windows of the
    same frames an hour later appended in three blocks (2, 2, 2 windows) to an open window segment
    that was never sealed: the crash."""
    dk, sk, trust = load_keys(keydir)
    lg = tmp_path / "L"
    capture_file(
        SAMPLES / "sample.pcap", lg, digest_key=dk, signing_key=sk, tiers=("windows",), window_ns=MS
    )
    rows = [(ts + HOUR, w, x) for ts, _c, w, x in read_pcap((SAMPLES / "sample.pcap").read_bytes())]
    write_pcap(tmp_path / "later.pcap", rows)
    later = _windows(tmp_path / "later.pcap", lg, dk)
    assert len(later) == 6
    w = LinkWriter.open(lg, load_ledger(lg), LOG, sk, source="test", segment_records=1000)
    try:
        for k in range(0, 6, 2):
            w.append_windows(later[k : k + 2])
        w._segment.close()  # the crash: the file stays as written
    finally:
        w.close()
    path = layout.open_segment_path(lg, LOG, 1)
    assert path.exists()
    return {"ledger": lg, "later": later, "dk": dk, "sk": sk, "trust": trust, "dir": tmp_path}


def test_an_open_window_segment_fails_nothing_but_is_a_warning(left_open):
    v = verify_ledger(left_open["ledger"], left_open["trust"])
    assert v.ok and any(w.kind == "open_segment" for w in v.warnings), v.warnings


def test_recover_seals_the_open_window_segment_and_it_verifies(left_open):
    s = left_open
    rec = recover_ledger(s["ledger"], s["sk"])
    ((log, got),) = rec.sealed
    assert log == LOG and (got.records, got.blocks) == (6, 3)
    seal = load_seal(layout.seal_path(s["ledger"], LOG, 1))
    assert (seal.frames, seal.records) == (294, 6)
    assert (int(seal.first_ts_ns), int(seal.last_ts_ns)) == (
        s["later"][0].start_ns,
        s["later"][-1].start_ns,
    )
    assert int(seal.first_seq) == 6  # window ordinals continue the log's
    v = verify_ledger(s["ledger"], s["trust"])
    assert v.ok, [p.to_json() for p in v.problems]
    assert v.windows[0].windows == 12 and v.windows[0].frames == 588
    assert str(layout.checkpoint_path(s["ledger"], LOG)) in rec.checkpoints
    # the recovered windows are the capture's: the later capture matches every window of it
    both = s["dir"] / "both.pcap"
    rows = list(read_pcap((SAMPLES / "sample.pcap").read_bytes()))
    write_pcap(
        both, [(ts, w, x) for ts, _c, w, x in rows] + [(ts + HOUR, w, x) for ts, _c, w, x in rows]
    )
    res = reconcile_windows(both, s["ledger"], s["dk"], trust=s["trust"])
    assert res.ok and len(res.windows) == 12, [
        (w.index, w.status, w.ledger_frames, w.capture_frames) for w in res.differing
    ]


def test_a_damaged_block_costs_only_the_windows_from_it_on(left_open):
    s = left_open
    path = layout.open_segment_path(s["ledger"], LOG, 1)
    offsets = [b.offset for b in segments.read_open_segment(path).blocks]
    raw = bytearray(path.read_bytes())
    raw[offsets[2] + 4 + 40] ^= 1  # a byte of the fifth window's wire_bytes
    path.write_bytes(bytes(raw))
    rec = recover_ledger(s["ledger"], s["sk"])
    ((_, got),) = rec.sealed
    assert (got.records, got.blocks) == (4, 2)
    assert [Path(a.moved_to).parent.name for a in rec.set_aside] == [LOG]
    seal = load_seal(layout.seal_path(s["ledger"], LOG, 1))
    assert seal.frames == sum(w.frames for w in s["later"][:4])
    v = verify_ledger(s["ledger"], s["trust"])
    assert v.ok, [p.to_json() for p in v.problems]


def test_a_torn_tail_is_reported_not_sealed(left_open):
    s = left_open
    path = layout.open_segment_path(s["ledger"], LOG, 1)
    with open(path, "ab") as f:
        f.write((1).to_bytes(4, "little") + b"\x07" * 100)
    rec = recover_ledger(s["ledger"], s["sk"])
    ((_, got),) = rec.sealed
    assert got.records == 6 and got.torn_bytes == 104
    assert verify_ledger(s["ledger"], s["trust"]).ok


def test_a_frames_segment_moved_into_the_window_log_is_set_aside(tmp_path, keydir):
    """An open segment of per-frame records under windows=NAME (its header's record kind says
    frames) does not fit the window log: set aside, never sealed as windows."""
    dk, sk, trust = load_keys(keydir)
    lg = tmp_path / "L"
    capture_file(
        SAMPLES / "sample.pcap",
        lg,
        digest_key=dk,
        signing_key=sk,
        tiers=("windows", "frames"),
        window_ns=MS,
        segment_records=100,
    )
    head = load_ledger(lg)
    w = LinkWriter.open(lg, head, "link0", sk, source="test", segment_records=1000)
    try:
        w.append(bytes(head.record_size * 3), 3)
        w._segment.close()
    finally:
        w.close()
    opened = layout.open_segment_path(lg, "link0", 3)
    target = layout.open_segment_path(lg, LOG, 1)
    opened.rename(target)
    rec = recover_ledger(lg, sk)
    assert rec.sealed == [] and not target.exists()
    assert [Path(a.moved_to).parent.name for a in rec.set_aside] == [LOG]
    assert verify_ledger(lg, trust).ok


def test_the_next_capture_recovers_the_open_window_segment_first(left_open, tmp_path):
    s = left_open
    rows = [
        (ts + 2 * HOUR, w, x) for ts, _c, w, x in read_pcap((SAMPLES / "sample.pcap").read_bytes())
    ]
    write_pcap(tmp_path / "latest.pcap", rows)
    res = capture_file(
        tmp_path / "latest.pcap", s["ledger"], digest_key=s["dk"], signing_key=s["sk"]
    )
    assert (
        "recovered open window segment 1: sealed 6 records, discarded 0 torn bytes" in res.warnings
    )
    assert res.windows.segments == (2,)
    v = verify_ledger(s["ledger"], s["trust"])
    assert v.ok and v.windows[0].windows == 18, [p.to_json() for p in v.problems]
