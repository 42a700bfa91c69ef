"""verify_ledger(records_into=RecordSink): every raw record file's records are
copied by verify straight into one caller-owned array and hashed there, so recompute's ledger side
is one array of exactly the checked bytes (no buffer per segment, no join); a segment that fails
leaves nothing in it, GAP records are left out of recompute's pairing as before. Ledgers from
tests/v2_reference.py over the records of samples/sample.pcap (a raw file in two blocks, a
compacted Parquet segment, a raw file in unaligned blocks)."""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest
from conftest import SAMPLES, load_keys
from v2_reference import capture_records, parquet_bytes, write_v2_ledger

from ledgertool.digest.record import FLAG_GAP, RecordSink, record_dtype
from ledgertool.reconcile.recompute import reconcile
from ledgertool.verify.ledger import check_here, verify_ledger

SEG = 100
DTYPE = record_dtype(16)


def _ledger(directory, keydir, records: bytes | None = None):
    dk, sk, _ = load_keys(keydir)
    recs = records if records is not None else capture_records(SAMPLES / "sample.pcap", dk)
    segs = [recs[i : i + SEG * 48] for i in range(0, len(recs), SEG * 48)]
    w = write_v2_ledger(
        directory,
        sk,
        segs,
        digest_key_id=dk.key_id("siphash-1-3-128", 16),
        leaf_records=32,
        block_records=[[1, 99], None, [50, 44]],
    )
    w.path(1, "parquet").write_bytes(parquet_bytes(segs[1], 16, 1))  # segment 1 compacted
    w.path(1, "rec").unlink()
    return segs


@pytest.fixture(scope="module")
def v2(tmp_path_factory, keydir):
    d = tmp_path_factory.mktemp("into") / "L"
    return d, _ledger(d, keydir)


def _verify_into(directory, trust, sink: RecordSink):
    """verify_ledger into `sink`; per segment handed over: (index, frames, whether its records were
    the sink's own memory before it was taken)."""
    seen = []

    def take(seg):
        shared = np.shares_memory(np.frombuffer(seg.records, np.uint8), sink.room(0))
        seen.append((seg.index, seg.frames, shared))
        sink.take(seg.records)

    return verify_ledger(directory, trust, on_segment=take, records_into=sink), seen


def test_records_into_holds_exactly_the_checked_records(v2, keydir):
    d, segs = v2
    sink = RecordSink(DTYPE)
    res, seen = _verify_into(d, load_keys(keydir)[2], sink)
    assert res.ok and res.records == 294
    # the raw files' records were written by verify into the sink's tail; the Parquet one copied
    # there
    assert seen == [(0, 100, True), (1, 100, False), (2, 94, True)]
    assert sink.n == 294 and sink.records().tobytes() == b"".join(segs)
    assert [int(s) for s in sink.records()["seq"][[0, 99, 100, 293]]] == [0, 99, 100, 293]


def test_records_into_grows_once_for_the_segments_ahead(v2, keydir, monkeypatch):
    """A sink smaller than the ledger grows when a segment asks for more room than is left, by the
    segment and (ahead) the link's segments after it at its seal's count: once, not by doubling."""
    d, segs = v2
    monkeypatch.setattr(RecordSink, "BATCH", 16)
    sink = RecordSink(DTYPE, 16)
    res, seen = _verify_into(d, None, sink)
    assert res.records == 294 and [s[2] for s in seen] == [True, False, True]
    # segment 0 (5128 bytes: 4872 after the header, room for 101 records) asked for 2 x 100 ahead:
    # 301 records; segment 1's copy (100) and segment 2 (room for 95) fit in them
    assert (d / "link=link0" / "seg-00000000.rec").stat().st_size == 5128
    assert len(sink.room(0)) + sink.n == 301
    assert sink.records().tobytes() == b"".join(segs)


def test_a_segment_that_fails_leaves_nothing_in_the_sink(v2, keydir, tmp_path):
    d, segs = v2
    trust = load_keys(keydir)[2]
    for bad, kept in ((2, [0, 1]), (0, [1, 2])):
        work = tmp_path / f"bad{bad}"
        shutil.copytree(d, work)
        rec = work / "link=link0" / f"seg-{bad:08d}.rec"
        raw = bytearray(rec.read_bytes())
        raw[256 + 4 + 40] ^= 1  # a digest byte of the segment's first record
        rec.write_bytes(bytes(raw))
        sink = RecordSink(DTYPE)
        res, seen = _verify_into(work, trust, sink)
        assert [p.kind.value for p in res.problems] == ["merkle_mismatch"]
        assert [s[0] for s in seen] == kept
        # the failed segment's copy in the tail was never taken (segment 0's was overwritten by 1's)
        assert sink.records().tobytes() == b"".join(segs[i] for i in kept)


def test_records_into_needs_on_segment_and_the_default_checker(v2):
    d, _ = v2
    with pytest.raises(ValueError, match="records_into"):
        verify_ledger(d, None, records_into=RecordSink(DTYPE))
    with pytest.raises(ValueError, match="records_into"):
        verify_ledger(
            d, None, on_segment=lambda s: None, checker=check_here, records_into=RecordSink(DTYPE)
        )


def test_take_copies_bytes_that_are_not_the_tail():
    sink = RecordSink(DTYPE, 4)
    a = np.zeros(3, DTYPE)
    a["seq"] = [7, 8, 9]
    got = sink.take(a.tobytes())
    assert sink.n == 3 and list(got["seq"]) == [7, 8, 9] and not np.shares_memory(got, a)
    tail = sink.room(2)
    tail[:2]["seq"] = [10, 11]
    got = sink.take(tail[:2])  # written in place: counted, not copied
    assert np.shares_memory(got, tail) and list(sink.records()["seq"]) == [7, 8, 9, 10, 11]
    with pytest.raises(ValueError, match="whole 48-byte records"):
        sink.take(b"x" * 47)


def test_recompute_leaves_gap_records_out_of_the_one_array(tmp_path, keydir):
    """GAP records (here record 5 of segment 0 and record 10 of segment 2) are not frames: they
    are left out of the pairing, so the two capture frames whose records they replaced are
    capture-only."""
    dk, _, trust = load_keys(keydir)
    recs = bytearray(capture_records(SAMPLES / "sample.pcap", dk))
    for k, drops in ((5, 3), (210, 4)):
        struct.pack_into("<HHI", recs, k * 48 + 24, FLAG_GAP, 0, drops)
    d = tmp_path / "L"
    _ledger(d, keydir, bytes(recs))
    ver = verify_ledger(d, trust)
    assert ver.ok and ver.drops_declared == 7
    res = reconcile(SAMPLES / "sample.pcap", d, dk, trust=trust)
    assert (res.frames, res.ledger_records, res.matched, res.ledger_only, res.capture_only) == (
        294,
        292,
        292,
        0,
        2,
    )
    assert sorted(int(e["index"]) for e in res.examples_capture_only) == [5, 210]
