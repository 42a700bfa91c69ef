"""recompute's second reading of a capture that differs, found by the first reading's marks
(ledgertool/reconcile/marks.py, docs/adr/0011 "A difference costs what it touches"): each ledger
record's and capture frame's part and each segment's Merkle leaves are kept by the first reading;
the second reads only the leaves that hold a differing part's records (hashed again against the
leaves kept) and digests only the frames of those parts (lt_engine_fill_select). It must keep
exactly the rows the full second reading keeps (so the report is the exact one), fall back to the
full reading when the ledger changed between the readings, and the native pieces must agree with
their references. Ledgers from tests/v2_reference.py over the records of samples/sample.pcap."""

from __future__ import annotations

import json
import os
import uuid

import numpy as np
import pytest
import v2_reference
from conftest import SAMPLES, load_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from v2_reference import capture_records, write_v2_ledger

from ledgertool.algorithms import get_algorithm, get_strip_mode
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.record import FLAG_GAP, record_dtype
from ledgertool.ledger.opened import open_ledger
from ledgertool.reconcile import marks as mk
from ledgertool.reconcile import recompute as rc
from ledgertool.reconcile.msethash import (
    MultisetHash,
    accelerated,
    new_key,
    part_ids,
    parts_where,
)
from ledgertool.reconcile.recompute import reconcile
from ledgertool.source import open_source

pytestmark = pytest.mark.skipif(not accelerated(), reason="the fast verdict runs where AES-NI does")

PCAP = SAMPLES / "sample.pcap"
DTYPE = record_dtype(16)
SEG = 100
ALG = get_algorithm("siphash-1-3-128")
ALL = 294  # frames of samples/sample.pcap


@pytest.fixture(scope="module")
def base(keydir):
    return np.frombuffer(capture_records(PCAP, load_keys(keydir)[0]), DTYPE).copy()


def _write(directory, keydir, recs: np.ndarray, leaf_records=32, split=None, leaf_hash="sha256"):
    dk, sk, _ = load_keys(keydir)
    recs = recs.copy()
    recs["seq"] = np.arange(len(recs))
    raw = recs.tobytes()
    segs = [raw[i : i + SEG * 48] for i in range(0, len(raw), SEG * 48)]
    blocks = None
    if split:  # each segment's records in blocks of `split` records (the last shorter)
        blocks = [
            [min(split, len(s) // 48 - k) for k in range(0, len(s) // 48, split)] for s in segs
        ]
    write_v2_ledger(
        directory,
        sk,
        segs,
        digest_key_id=dk.key_id("siphash-1-3-128", 16),
        leaf_records=leaf_records,
        block_records=blocks,
        leaf_hash=leaf_hash,
    )


def _edit(recs: np.ndarray, kind: str, k: int, j: int) -> np.ndarray:
    recs = recs.copy()
    k, j = k % len(recs), j % len(recs)
    if kind == "drop":
        return np.delete(recs, k)
    if kind == "dup_far":
        dup = recs[k : k + 1].copy()
        dup["ts_ns"] = recs["ts_ns"][j]
        return np.insert(recs, j, dup)
    if kind == "digest":
        d = bytearray(bytes(recs["digest"][k]))
        d[k % 16] ^= 1 << (k % 8)
        recs["digest"][k] = np.void(bytes(d))
        return recs
    if kind == "time":
        recs["ts_ns"][k] += 3600 * 10**9
        return recs
    if kind == "gap":
        recs["flags"][k], recs["aux"][k] = FLAG_GAP, 2
        return recs
    raise AssertionError(kind)


KINDS = ["drop", "dup_far", "digest", "time", "gap"]


def _report(res) -> str:
    doc = res.to_json()
    doc.pop("elapsed_s", None)
    return json.dumps(doc, sort_keys=True)


def _count_readings(monkeypatch, calls: list, after_hashing) -> None:
    """recompute with `after_hashing()` called once its first reading has hashed both sides (the
    files rewritten between the two readings), and each second reading it takes appended to
    `calls`: "marked" (where the sums differ) or "full" (everything again)."""
    real_hash, real_marked, real_full = rc._hash_sides, rc._gather_marked, rc._gather_parts

    def hash_then(*a, **k):
        out = real_hash(*a, **k)
        after_hashing()
        return out

    monkeypatch.setattr(rc, "_hash_sides", hash_then)
    monkeypatch.setattr(
        rc, "_gather_marked", lambda *a, **k: calls.append("marked") or real_marked(*a, **k)
    )
    monkeypatch.setattr(
        rc, "_gather_parts", lambda *a, **k: calls.append("full") or real_full(*a, **k)
    )


def _side(d, keydir):
    dk, _, trust = load_keys(keydir)
    opened = open_ledger(d)
    return dk, opened.header, rc.LedgerSide(opened, trust, None, "checkpoint", None, None)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(0, 300), st.integers(0, 300)),
        min_size=1,
        max_size=4,
    ),
    bits=st.sampled_from([1, 3, 6, 12, 16]),
    leaf_records=st.sampled_from([1, 4, 32, 256]),
    split=st.sampled_from([None, 1, 7, 50]),
    leaf_hash=st.sampled_from(["sha256", "blake3"]),
)
def test_the_marked_reading_keeps_exactly_the_rows_the_full_reading_keeps(
    tmp_path_factory, keydir, base, monkeypatch, edits, bits, leaf_records, split, leaf_hash
):
    recs = base
    for kind, k, j in edits:
        recs = _edit(recs, kind, k, j)
    d = tmp_path_factory.mktemp("marks") / "L"
    _write(d, keydir, recs, leaf_records, split, leaf_hash)
    dk, header, side = _side(d, keydir)
    with monkeypatch.context() as m:
        m.setattr(rc, "PART_BITS", bits)
        hashed = rc._hash_sides(PCAP, side, header, ALG, dk, None, 0)
        wanted = np.zeros(1 << bits, bool)
        wanted[hashed.lhash.differing_parts(hashed.chash)] = True
        tmp = str(tmp_path_factory.mktemp("t"))
        got = rc._gather_marked(wanted, hashed, PCAP, side, (header, ALG, dk), None, ("4GB", tmp))
        full = rc._part_store(hashed, ALG, "4GB", tmp)
        assert rc._gather_parts(full, wanted, hashed, PCAP, side, header, ALG, dk, (None, 0))
    assert got is not None
    marked, sub = got
    key = hashed.lhash.part_key

    def sub_part(rows):
        return part_ids(rows, key, rc.MARK_BITS).astype(np.int64)

    # the sub-parts kept refine the differing parts, and are exactly those whose digests differ
    assert all(wanted[p >> (rc.MARK_BITS - bits)] for p in np.flatnonzero(sub))
    lrows, crows = full.ledger.records(), full.capture.records()
    lsub = sub_part(lrows)
    csub = sub_part(crows)
    differ = {
        int(p)
        for p in np.union1d(lsub, csub)
        if sorted(bytes(r) for r in lrows["digest"][lsub == p])
        != sorted(bytes(r) for r in crows["digest"][csub == p])
    }
    assert set(np.flatnonzero(sub).tolist()) == differ
    # the rows kept are the full reading's rows of those sub-parts, in the same order and links
    lkeep, ckeep = sub[lsub], sub[csub]
    assert marked.ledger.records().tobytes() == lrows[lkeep].tobytes()
    assert marked.capture.records().tobytes() == crows[ckeep].tobytes()
    codes = np.repeat([c for c, _ in full.spans], [n for _, n in full.spans])
    kept_codes = np.repeat([c for c, _ in marked.spans], [n for _, n in marked.spans])
    names = {c: link for link, c in full.links.items()}
    kept_names = {c: link for link, c in marked.links.items()}
    assert [kept_names[c] for c in kept_codes] == [names[c] for c in codes[lkeep]]


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(0, 300), st.integers(0, 300)),
        min_size=1,
        max_size=3,
    )
)
def test_the_report_is_the_exact_report_without_a_full_second_reading(
    tmp_path_factory, keydir, base, monkeypatch, edits
):
    recs = base
    for kind, k, j in edits:
        recs = _edit(recs, kind, k, j)
    d = tmp_path_factory.mktemp("marks") / "L"
    _write(d, keydir, recs)
    dk, _, trust = load_keys(keydir)
    full = []
    real = rc._gather_parts
    with monkeypatch.context() as m:
        m.setattr(rc, "_gather_parts", lambda *a, **k: full.append(1) or real(*a, **k))
        res = reconcile(PCAP, d, dk, trust=trust)
    assert full == []
    assert _report(res) == _report(reconcile(PCAP, d, dk, trust=trust, exact=True))


def test_a_ledger_rewritten_between_the_readings_is_paired_in_full(
    tmp_path, keydir, base, monkeypatch
):
    """The first reading hashes one ledger; before the second, the differing record is re-timed
    and the ledger signed again: its leaf no longer equals the one kept, so the marks do not find
    the rows, the full second reading meets other seals, and everything of the new ledger is
    paired (the exact report of the ledger as it is now)."""
    d = tmp_path / "L"
    same_id = uuid.uuid4()  # one ledger id for both writes: only the records and seals differ
    monkeypatch.setattr(v2_reference.uuid, "uuid4", lambda: same_id)
    changed = _edit(base, "digest", 150, 0)
    _write(d, keydir, changed)
    rewritten = changed.copy()
    rewritten["ts_ns"][150] += 10**9
    calls = []
    _count_readings(monkeypatch, calls, lambda: _write(d, keydir, rewritten))
    dk, _, trust = load_keys(keydir)
    res = reconcile(PCAP, d, dk, trust=trust)
    assert calls == ["marked", "full"]
    monkeypatch.undo()
    assert (res.ledger_only, res.capture_only) == (1, 1)
    assert res.examples_ledger_only[0]["ts_ns"] == int(rewritten["ts_ns"][150])
    assert _report(res) == _report(reconcile(PCAP, d, dk, trust=trust, exact=True))


def _first_reading(d, keydir, bits=16):
    dk, header, side = _side(d, keydir)
    old = rc.PART_BITS
    rc.PART_BITS = bits
    try:
        return rc._hash_sides(PCAP, side, header, ALG, dk, None, 0), side
    finally:
        rc.PART_BITS = old


@pytest.mark.parametrize("split", [None, 3, 64])
def test_ledger_rows_are_the_records_of_the_wanted_parts_and_a_changed_leaf_is_refused(
    tmp_path, keydir, base, split
):
    d = tmp_path / "L"
    _write(d, keydir, base, leaf_records=8, split=split)
    hashed, side = _first_reading(d, keydir, bits=4)
    segs = hashed.marks.segments
    assert [s.index for s in segs] == [0, 1, 2]
    wanted = np.zeros(16, bool)
    wanted[5] = True  # ~1/16 of the records: most 8-record leaves hold none
    reader = side.ledger.reader

    def rows_of(seg):
        return np.flatnonzero(wanted[seg.ids >> 12])

    for seg in segs:
        recs = base[seg.index * SEG : (seg.index + 1) * SEG].copy()
        recs["seq"] = np.arange(seg.index * SEG, seg.index * SEG + len(recs))
        ids = part_ids(recs, hashed.lhash.part_key, 16).astype(np.uint16)
        assert np.array_equal(seg.ids, ids)  # the part at 16 bits: its top 4 are the part's
        assert np.array_equal(ids >> 12, part_ids(recs, hashed.lhash.part_key, 4))
        want = recs[wanted[ids >> 12]]
        assert 0 < len(want) < len(recs)
        for check in (True, False):
            assert mk.ledger_rows(reader, seg, rows_of(seg), check) == want.tobytes()
            assert mk.ledger_rows(reader, seg, rows_of(seg)[:0], check) == b""
    # a byte of a wanted record changed in the file: its leaf differs from the one kept
    seg = segs[1]
    row = int(rows_of(seg)[0])
    path = reader.segment_path("link0", 1, "rec")
    raw = bytearray(path.read_bytes())
    block = split or 8  # records before the row's block, each block 4 + records + 32 bytes
    blocks_before = row // block
    at = 256 + blocks_before * (4 + 32) + 4 + row * 48 + 8  # its ts_ns
    raw[at] ^= 1
    path.write_bytes(bytes(raw))
    assert mk.ledger_rows(reader, seg, rows_of(seg)) is None
    # unchecked, the record is read as it is now
    now = np.frombuffer(mk.ledger_rows(reader, seg, rows_of(seg), check=False), DTYPE)
    assert int(now["ts_ns"][0]) == int(base["ts_ns"][SEG + row]) ^ 1
    # a record in no wanted leaf changed instead: the wanted rows are still found
    raw[at] ^= 1
    other = np.flatnonzero(~np.isin(np.arange(SEG) // 8, rows_of(seg) // 8))
    assert len(other)
    r = int(other[0])
    raw[256 + (r // block) * (4 + 32) + 4 + r * 48 + 8] ^= 1
    path.write_bytes(bytes(raw))
    recs = base[SEG : 2 * SEG].copy()
    recs["seq"] = np.arange(SEG, 2 * SEG)
    assert mk.ledger_rows(reader, seg, rows_of(seg)) == recs[wanted[seg.ids >> 12]].tobytes()
    path.unlink()
    assert mk.ledger_rows(reader, seg, rows_of(seg)) is None
    assert mk.ledger_rows(reader, seg, rows_of(seg), check=False) is None


def _engine(strip="frame"):
    reader = open_source(PCAP)
    return reader, DigestEngine(reader, ALG, get_strip_mode(strip), b"\x07" * ALG.key_size)


@settings(max_examples=40, deadline=None)
@given(
    mask=st.lists(st.booleans(), min_size=ALL, max_size=ALL),
    chunk=st.integers(1, 400),
    room=st.integers(1, 50),
    strip=st.sampled_from(["frame", "payload"]),
)
def test_fill_select_digests_exactly_the_frames_marked(mask, chunk, room, strip):
    reader, engine = _engine(strip)
    with reader:
        ref = np.frombuffer(bytes(engine.fill(0, 1000)[0]), DTYPE).copy()
    assert len(ref) == ALL
    keep = np.array(mask, np.uint8)
    reader, engine = _engine(strip)
    got, frames, nbytes = [], 0, 0
    with reader:
        while True:
            ahead = keep[frames : frames + chunk]
            if not len(ahead):
                ahead = np.zeros(1, np.uint8)
            out = np.zeros(room, DTYPE)
            n, f, b = engine.fill_select(frames, ahead, out)
            assert n <= room
            if f == 0:
                break
            assert n == int(ahead[:f].sum())  # every marked frame read was written
            got.append(out[:n].copy())
            frames, nbytes = frames + f, nbytes + b
    got = np.concatenate(got) if got else np.zeros(0, DTYPE)
    assert frames == ALL
    assert nbytes == int(ref["cap_len"].sum())
    assert got.tobytes() == ref[keep.astype(bool)].tobytes()


@pytest.mark.parametrize("bits", [1, 12, 16])
def test_native_parts_of_each_record_are_part_ids(base, bits):
    recs = base.copy()
    recs["flags"][::7] = FLAG_GAP  # skipped, yet given a part
    key, pk = new_key(), (0x0123456789ABCDEF, 0xFEDCBA9876543211)
    with_ids = MultisetHash(key, 16, part_bits=bits, part_key=pk)
    plain = MultisetHash(key, 16, part_bits=bits, part_key=pk)
    ids = np.full(len(recs), 0xFFFF, np.uint16)
    assert with_ids.add(recs, ids) == plain.add(recs) == len(recs) - len(recs[::7])
    assert np.array_equal(ids, part_ids(recs, pk, 16).astype(np.uint16))
    assert np.array_equal(ids >> (16 - bits), part_ids(recs, pk, bits))
    assert np.array_equal(with_ids.sums, plain.sums)
    assert np.array_equal(with_ids.counts, plain.counts)
    assert plain.count == len(recs) - len(recs[::7])


def test_parts_of_more_than_16_bits_do_not_fit_the_marks(base):
    h = MultisetHash(new_key(), 16, part_bits=17, part_key=(1, 3))
    with pytest.raises(ValueError, match="lt_mset_add_parts_ids"):
        h.add(base, np.zeros(len(base), np.uint16))
    with pytest.raises(ValueError, match="uint16"):
        MultisetHash(new_key(), 16, part_bits=8).add(base, np.zeros(len(base), np.uint32))


@settings(max_examples=50, deadline=None)
@given(
    ids=st.lists(st.integers(0, 0xFFFF), max_size=3000),
    wanted=st.sets(st.integers(0, 0xFFFF), max_size=40),
    bits=st.sampled_from([1, 4, 12, 16]),
)
def test_parts_where_is_the_index_of_every_wanted_part(ids, wanted, bits):
    ids = np.array(ids, np.uint16)
    table = np.zeros(1 << bits, bool)
    table[[w for w in wanted if w < 1 << bits]] = True
    want = [i for i, p in enumerate(ids.tolist()) if table[p >> (16 - bits)]]
    assert parts_where(ids, table, bits).tolist() == want
    assert parts_where(ids, table[: max(len(table) // 2, 1)], bits).tolist() == [
        i for i in want if ids[i] >> (16 - bits) < max(len(table) // 2, 1)
    ]


def test_two_captures_read_as_one_are_found_again_frame_for_frame(
    tmp_path, keydir, base, monkeypatch
):
    """Frame indexes continue from one capture to the next: the marks of the second capture's
    frames follow the first's, and the second reading digests exactly those of both."""
    twice = np.concatenate([base, base])
    d = tmp_path / "L"
    _write(d, keydir, _edit(_edit(twice, "digest", ALL + 20, 0), "drop", 7, 0))
    dk, _, trust = load_keys(keydir)
    full = []
    real = rc._gather_parts
    monkeypatch.setattr(rc, "_gather_parts", lambda *a, **k: full.append(1) or real(*a, **k))
    res = reconcile([PCAP, PCAP], d, dk, trust=trust)
    assert full == []
    assert (res.matched, res.ledger_only, res.capture_only) == (2 * ALL - 2, 1, 2)
    monkeypatch.undo()
    assert _report(res) == _report(reconcile([PCAP, PCAP], d, dk, trust=trust, exact=True))


def _flip_frame(pcap_in, pcap_out, k: int) -> None:
    """A copy of a classic pcap with the last byte of frame k flipped."""
    raw = bytearray(pcap_in.read_bytes())
    at = 24
    for _ in range(k):
        at += 16 + int.from_bytes(raw[at + 8 : at + 12], "little")
    raw[at + 16 + int.from_bytes(raw[at + 8 : at + 12], "little") - 1] ^= 0xFF
    pcap_out.write_bytes(bytes(raw))


def test_a_capture_rewritten_between_the_readings_is_paired_in_full(
    tmp_path, keydir, base, monkeypatch
):
    """The frame that differs is changed again in the capture file before the second reading: its
    part no longer hashes as the first reading's did, so the marks give up, the full second
    reading meets other capture parts, and everything is paired as the files are now."""
    d, pcap = tmp_path / "L", tmp_path / "c.pcap"
    pcap.write_bytes(PCAP.read_bytes())
    _write(d, keydir, _edit(base, "digest", 120, 0))
    calls = []
    _count_readings(monkeypatch, calls, lambda: _flip_frame(PCAP, pcap, 120))
    dk, _, trust = load_keys(keydir)
    res = reconcile(pcap, d, dk, trust=trust)
    assert calls == ["marked", "full"]
    monkeypatch.undo()
    assert (res.matched, res.ledger_only, res.capture_only) == (ALL - 1, 1, 1)
    assert _report(res) == _report(reconcile(pcap, d, dk, trust=trust, exact=True))


def test_pread_records_reads_each_record_at_its_offset_and_stops_at_the_end(tmp_path):
    from ledgertool._binding import ffi, lib

    data = bytes(range(256)) * 4
    path = tmp_path / "f"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        offsets = np.array([0, 100, 7, 1024 - 48], np.uint64)
        out, done = ffi.new("uint8_t[]", 4 * 48), ffi.new("size_t *")
        ptr = ffi.from_buffer("uint64_t[]", offsets)
        assert lib.lt_pread_records(fd, ptr, 4, 48, out, done) == lib.LT_OK
        assert done[0] == 4
        assert bytes(ffi.buffer(out)) == b"".join(data[o : o + 48] for o in offsets.tolist())
        past = np.array([48, 1024 - 47, 0], np.uint64)  # the second ends a byte past the file
        ptr = ffi.from_buffer("uint64_t[]", past)
        assert lib.lt_pread_records(fd, ptr, 3, 48, out, done) == lib.LT_ERR_IO
        assert done[0] == 1
        assert lib.lt_pread_records(fd, ptr, 3, 0, out, done) == lib.LT_ERR_ARG
    finally:
        os.close(fd)
