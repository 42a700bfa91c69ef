"""Ledger format v2, writer side (docs/ledger-format.md, "Open segment file"): the native segment
writer's blocks, MACs, leaves and counters against a pure-Python computation from the spec
(hashlib, hmac, tests/rfc9162_reference.py), v2 ledgers sealed as raw record files, and the crash
cases of recovery."""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
import time
from pathlib import Path

import numpy as np
import pytest
import rfc9162_reference as rfc
from conftest import SAMPLES, load_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgertool._binding import ffi, lib
from ledgertool.canonical import canonical_json
from ledgertool.capture.run import capture_file
from ledgertool.digest.record import FLAG_GAP, record_dtype
from ledgertool.errors import OpenSegmentRefusedError
from ledgertool.keyfiles import seal_message
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger import writer as writer_mod
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.openmac import OpenSegmentKey
from ledgertool.ledger.recover import recover_ledger
from ledgertool.ledger.writer import LinkWriter

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
LABEL = b"ledgertool open-segment leaves v2\0"


# ---- a reader written from the spec, not from ledgertool ---------------------------------------


def spec_blocks(raw: bytes, record_size: int) -> list[tuple[int, bytes, bytes]]:
    """(count, records, mac) of every block after the 256-byte header; the file must end at a
    block's end."""
    out, pos = [], 256
    while pos < len(raw):
        (count,) = struct.unpack_from("<I", raw, pos)
        end = pos + 4 + count * record_size + 32
        assert 1 <= count <= 65536 and end <= len(raw), f"block at byte {pos}"
        out.append((count, raw[pos + 4 : end - 32], raw[end - 32 : end]))
        pos = end
    return out


def spec_chunks(records: bytes, record_size: int, leaf_records: int) -> list[bytes]:
    step = record_size * leaf_records
    return [records[i : i + step] for i in range(0, len(records), step)]


def spec_check_file(
    raw: bytes, secret: bytes, record_size: int, leaf_records: int
) -> tuple[list[int], bytes]:
    """Check every block MAC of an open-segment v2 file by the spec (hmac, hashlib); return the
    block sizes and the records with the framing stripped."""
    chain = hmac.digest(secret, b"ledgertool open-segment header v2\0" + raw[:256], "sha256")
    sizes, records = [], b""
    for i, (count, recs, mac) in enumerate(spec_blocks(raw, record_size)):
        leaves = b"".join(
            hashlib.sha256(b"\0" + c).digest() for c in spec_chunks(recs, record_size, leaf_records)
        )
        chain = hmac.digest(secret, LABEL + chain + struct.pack("<QI", i, count) + leaves, "sha256")
        assert mac == chain, f"block {i}"
        sizes.append(count)
        records += recs
    return sizes, records


def spec_root(records: bytes, record_size: int, leaf_records: int) -> bytes:
    return rfc.mth(spec_chunks(records, record_size, leaf_records))


def _records(n: int, digest_size: int, first_seq: int, rng: np.random.Generator) -> bytes:
    arr = np.zeros(n, dtype=record_dtype(digest_size))
    arr["seq"] = np.arange(first_seq, first_seq + n, dtype=np.uint64)
    arr["ts_ns"] = np.sort(rng.integers(1, 1 << 62, n))
    arr["flags"] = np.where(rng.random(n) < 0.1, FLAG_GAP, 0)
    arr["aux"] = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    arr["digest"] = [rng.bytes(digest_size) for _ in range(n)]
    return arr.tobytes()


def _writer(
    path: Path, key: OpenSegmentKey, digest_size: int, leaf_records: int
) -> segments.SegmentWriter:
    header = segments.SegmentHeader(
        "0" * 31 + "1",
        "link0",
        0,
        "siphash-1-3-128" if digest_size == 16 else "blake3-keyed-256",
        "frame",
        "ab" * 16,
        32 + digest_size,
        digest_size,
        leaf_records,
        7,
        time.time_ns(),
        key.key_id,
    )
    return segments.SegmentWriter(path, header, key)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=st.lists(st.integers(0, 700), min_size=1, max_size=8),
    leaf=st.sampled_from([1, 4, 64, 256]),
    digest_size=st.sampled_from([16, 32]),
    seed=st.integers(0, 2**32 - 1),
)
def test_native_writer_equals_the_spec(tmp_path_factory, batches, leaf, digest_size, seed):
    """Random batches of random sizes: the file's MACs, the blocks' alignment to the leaves, the
    root and the counters are what a pure-Python computation from the spec gives."""
    if not sum(batches):
        batches = batches + [1]
    rng = np.random.default_rng(seed)
    key = OpenSegmentKey(rng.bytes(32), "cd" * 16)
    path = tmp_path_factory.mktemp("seg") / "seg-00000000.open"
    w = _writer(path, key, digest_size, leaf)
    rs, total = 32 + digest_size, sum(batches)
    recs = _records(total, digest_size, 7, rng)
    at = 0
    for n in batches:
        w.append(memoryview(recs)[at * rs : (at + n) * rs], n)  # a view of the caller's buffer
        at += n
    c = w.finish()
    w.close()
    sizes, body = spec_check_file(path.read_bytes(), key.secret, rs, leaf)
    assert body == recs and c.blocks == len(sizes)
    # leaf alignment: a block starts on a leaf boundary, or completes the leaf a short block left
    # open
    pos, prev_short = 0, False
    for n in sizes:
        assert pos % leaf == 0 or prev_short
        if pos % leaf:
            assert (pos + n) % leaf == 0 or pos + n == total or n < leaf - pos % leaf
        pos += n
        prev_short = pos % leaf != 0
    arr = np.frombuffer(recs, dtype=record_dtype(digest_size))
    gaps = (arr["flags"] & FLAG_GAP) != 0
    t = c.totals
    assert t.merkle_root == spec_root(recs, rs, leaf)
    assert c.leaves == b"".join(
        hashlib.sha256(b"\0" + ch).digest() for ch in spec_chunks(recs, rs, leaf)
    )
    assert (t.records, t.frames, t.drops) == (
        total,
        int((~gaps).sum()),
        int(arr["aux"][gaps].sum()),
    )
    assert (c.first_seq, t.last_seq, t.first_ts_ns, t.last_ts_ns) == (
        7,
        6 + total,
        int(arr["ts_ns"][0]),
        int(arr["ts_ns"][-1]),
    )


def test_whole_leaves_make_aligned_blocks(tmp_path):
    """Appends of 600, 100, 1000 records at leaf 256: 512 (2 leaves) | 88 (short); 100 (still in
    leaf 2); 68 (completes it) | 768 (3 leaves) | 164 (short, the last leaf)."""
    rng = np.random.default_rng(1)
    key = OpenSegmentKey(rng.bytes(32), "cd" * 16)
    w = _writer(tmp_path / "s.open", key, 16, 256)
    recs = _records(1700, 16, 7, rng)
    for a, b in ((0, 600), (600, 700), (700, 1700)):
        w.append(recs[a * 48 : b * 48], b - a)
    c = w.finish()
    w.close()
    sizes, _ = spec_check_file((tmp_path / "s.open").read_bytes(), key.secret, 48, 256)
    assert sizes == [512, 88, 100, 68, 768, 164]
    assert c.blocks == 6 and len(c.leaves) == 7 * 32


@pytest.mark.parametrize("leaf,digest_size", [(1, 16), (4, 32), (256, 16), (4096, 16)])
def test_blocks_written_piece_by_piece_equal_the_spec(tmp_path, leaf, digest_size):
    """Blocks of whole leaves larger than one piece (segment_writer.c PIECE_BYTES: counted, hashed
    and written about 192 KiB at a time, the MAC with the last piece): 70,000 records and a
    65,536-record batch make full 65,536-record blocks of many pieces, and a leaf larger than a
    piece; the file, root and counters are still the spec's."""
    rng = np.random.default_rng(leaf)
    key = OpenSegmentKey(rng.bytes(32), "cd" * 16)
    path = tmp_path / "seg-00000000.open"
    w = _writer(path, key, digest_size, leaf)
    rs = 32 + digest_size
    recs = _records(70_000 + 65_536 + 3, digest_size, 7, rng)
    w.append(memoryview(recs)[: 3 * rs], 3)
    w.append(memoryview(recs)[3 * rs : 70_003 * rs], 70_000)
    w.append(memoryview(recs)[70_003 * rs :], 65_536)
    c = w.finish()
    w.close()
    sizes, body = spec_check_file(path.read_bytes(), key.secret, rs, leaf)
    assert body == recs and sum(sizes) == len(recs) // rs and c.blocks == len(sizes)
    assert 65_536 in sizes  # a full block: many pieces
    arr = np.frombuffer(recs, dtype=record_dtype(digest_size))
    gaps = (arr["flags"] & FLAG_GAP) != 0
    t = c.totals
    assert t.merkle_root == spec_root(recs, rs, leaf)
    assert (t.records, t.frames, t.drops, c.first_seq, t.last_seq) == (
        len(arr),
        int((~gaps).sum()),
        int(arr["aux"][gaps].sum()),
        7,
        6 + len(arr),
    )
    assert (t.first_ts_ns, t.last_ts_ns) == (int(arr["ts_ns"][0]), int(arr["ts_ns"][-1]))


def test_native_hmac_equals_python_hmac(tmp_path):
    """One block of one leaf: its MAC is hmac.digest over the spec's bytes (key longer and shorter
    than the SHA-256 block: the C pads)."""
    for secret in (bytes(range(32)), bytes(range(100))):
        key = OpenSegmentKey(secret, "cd" * 16)
        path = tmp_path / f"{len(secret)}.open"
        w = _writer(path, key, 16, 64)
        recs = _records(64, 16, 7, np.random.default_rng(2))
        w.append(recs, 64)
        w.finish()
        w.close()
        raw = path.read_bytes()
        c0 = hmac.digest(secret, b"ledgertool open-segment header v2\0" + raw[:256], "sha256")
        want = hmac.digest(
            secret,
            LABEL + c0 + struct.pack("<QI", 0, 64) + hashlib.sha256(b"\0" + recs).digest(),
            "sha256",
        )
        assert raw[-32:] == want


def test_writer_refuses_more_than_the_segment_bound(tmp_path):
    key = OpenSegmentKey(bytes(32), "cd" * 16)
    w = _writer(tmp_path / "s.open", key, 16, 64)
    # the C bound, before any byte is read (count * record_size would pass 2^32 here)
    err = ffi.new("int *")
    assert (
        lib.lt_segment_writer_append(
            w._native, ffi.from_buffer(bytes(48)), segments.MAX_SEGMENT_RECORDS + 1, err
        )
        == lib.LT_ERR_ARG
    )
    with pytest.raises(ValueError, match="1 records need 48 bytes, got 47"):
        w.append(bytes(47), 1)
    w.close()
    assert (tmp_path / "s.open").stat().st_size == 256  # nothing but the header was written


# ---- v2 ledgers -------------------------------------------------------------------------------


def _seal_checks(ledger: Path, index: int, trust) -> dict:
    """The v2 seal of segment `index` checked by the spec: format and members, signatures over the
    canonical body, and its merkle_root recomputed from the .rec with hashlib."""
    lg = load_ledger(ledger)
    seal = json.loads(layout.seal_path(ledger, "link0", index).read_bytes())
    assert seal["format"] == "ledgertool-seal-v2" and not {
        "parquet_file",
        "parquet_sha256",
        "parquet_bytes",
    } & set(seal)
    body = {k: v for k, v in seal.items() if k != "signatures"}
    assert trust.verify(seal_message(canonical_json(body)), seal["signatures"]) == []
    raw = layout.records_path(ledger, "link0", index).read_bytes()
    header = segments.SegmentHeader.decode(raw, "rec")
    assert (header.index, header.first_seq, header.leaf_records) == (
        index,
        int(seal["first_seq"]),
        lg.leaf_records,
    )
    records = b"".join(r for _, r, _ in spec_blocks(raw, lg.record_size))
    assert len(records) == seal["records"] * lg.record_size
    assert spec_root(records, lg.record_size, lg.leaf_records).hex() == seal["merkle_root"]
    arr = np.frombuffer(records, dtype=record_dtype(lg.digest_size))
    assert (seal["last_seq"], seal["first_ts_ns"], seal["frames"]) == (
        str(arr["seq"][-1]),
        str(arr["ts_ns"][0]),
        int(((arr["flags"] & FLAG_GAP) == 0).sum()),
    )
    return seal


def test_v2_ledger_seals_the_raw_record_files(tmp_path, keydir):
    dk, sk, trust = load_keys(keydir)
    ledger = tmp_path / "L"
    capture_file(
        SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100, ledger_format=2
    )
    lg = load_ledger(ledger)
    assert (lg.version, lg.leaf_records) == (2, 256)
    assert json.loads((ledger / "ledger.json").read_bytes())["format"] == "ledgertool-ledger-v2"
    names = sorted(p.name for p in layout.link_dir(ledger, "link0").iterdir())
    assert names == ["checkpoint"] + [
        f"seg-0000000{i}.{k}" for i in range(3) for k in ("leaves", "rec", "seal.json")
    ]
    seals = [_seal_checks(ledger, i, trust) for i in range(3)]
    assert [s["records"] for s in seals] == [100, 100, 94]
    # appending continues the chain in the ledger's own format
    capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=1000)
    assert _seal_checks(ledger, 3, trust)["first_seq"] == "294"
    with pytest.raises(Exception, match="ledger uses version 2, not 1"):
        capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, ledger_format=1)


def _left_open(ledger: Path, sk, counts: tuple[int, ...]) -> Path:
    """An open segment of `counts` appends, left as a crash leaves it."""
    lg = load_ledger(ledger)
    rng = np.random.default_rng(5)
    w = LinkWriter.open(ledger, lg, "link0", sk, source="test", segment_records=100_000)
    try:
        seq = w.next_seq
        for n in counts:
            w.append(_records(n, lg.digest_size, seq, rng), n)
            seq += n
        w._segment.close()  # the crash: the file stays as written
    finally:
        w.close()
    return layout.open_segment_path(ledger, "link0", w.next_index)


@pytest.fixture()
def v2_ledger(tmp_path, keydir) -> Path:
    dk, sk, _ = load_keys(keydir)
    ledger = tmp_path / "L"
    capture_file(
        SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100, ledger_format=2
    )
    return ledger


def test_v2_recover_truncates_to_the_authenticated_prefix(v2_ledger, keydir):
    _, sk, trust = load_keys(keydir)
    path = _left_open(v2_ledger, sk, (300, 50))
    whole = path.stat().st_size
    with open(path, "ab") as f:
        f.write((9).to_bytes(4, "little") + b"\x07" * 30)  # a torn block
    rec = recover_ledger(v2_ledger, sk)
    (got,) = [r for _, r in rec.sealed]
    assert (got.index, got.records, got.torn_bytes, got.tail_blocks) == (3, 350, 34, 1)
    assert not path.exists() and layout.records_path(v2_ledger, "link0", 3).stat().st_size == whole
    seal = _seal_checks(v2_ledger, 3, trust)
    assert (seal["torn_bytes_discarded"], seal["source"]) == (34, "recovered open segment")


def test_v2_rewritten_block_is_refused(v2_ledger, keydir):
    _, sk, _ = load_keys(keydir)
    path = _left_open(v2_ledger, sk, (256, 10))
    raw = bytearray(path.read_bytes())
    raw[256 + 4 + 32] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(
        OpenSegmentRefusedError,
        match=r"block 0 \(byte 256\) fails authentication .*MAC does not verify",
    ):
        recover_ledger(v2_ledger, sk)
    assert path.exists() and not layout.seal_path(v2_ledger, "link0", 3).exists()


def test_v2_seal_written_but_not_renamed(v2_ledger, keydir):
    """The crash between writing seg-N.seal.json and renaming seg-N.open to seg-N.rec: recovery
    renames it when its records' root is the seal's, and leaves a changed one in place."""
    _, sk, trust = load_keys(keydir)
    rec, opened = (
        layout.records_path(v2_ledger, "link0", 2),
        layout.open_segment_path(v2_ledger, "link0", 2),
    )
    rec.rename(opened)
    assert recover_ledger(v2_ledger, sk).sealed == []
    assert rec.exists() and not opened.exists()
    _seal_checks(v2_ledger, 2, trust)
    raw = bytearray(rec.read_bytes())
    raw[256 + 4 + 40] ^= 1  # a digest byte of record 0: the MACs are not checked here, the root is
    opened.write_bytes(bytes(raw))
    rec.unlink()
    with pytest.raises(
        OpenSegmentRefusedError,
        match=r"seg-00000002.open: its records are not the ones "
        r"seg-00000002.seal.json signed",
    ):
        recover_ledger(v2_ledger, sk)
    assert opened.exists() and not rec.exists()


@pytest.mark.parametrize("fmt", [1, 2])
def test_progress_counts_sealed_records(tmp_path, keydir, fmt):
    """The capture progress callback gets the records sealed so far, not only those digested: its
    last call, after the final seal, has all 294."""
    dk, sk, _ = load_keys(keydir)
    calls: list[tuple[int, int, int]] = []
    capture_file(
        SAMPLE,
        tmp_path / "L",
        digest_key=dk,
        signing_key=sk,
        segment_records=100,
        ledger_format=fmt,
        progress=lambda *a: calls.append(a),
    )
    assert calls[-1][0] == 294 and calls[-1][2] == 294
    assert all(s <= f for f, _, s in calls) and [s for _, _, s in calls] == sorted(
        s for _, _, s in calls
    )


@pytest.mark.parametrize("fmt", [1, 2])
def test_open_segment_fsync_runs_on_the_sealer_thread(tmp_path, keydir, monkeypatch, fmt):
    """Sealing a full segment does not stall the capture thread on its writeback: the open file's
    fsync runs on the sealer thread, before that segment's seal is written (it is durable first)."""
    import os
    import threading

    dk, sk, _ = load_keys(keydir)
    events: list[tuple[str, str]] = []
    real_fsync = os.fsync

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(".open"):
            events.append(("fsync", threading.current_thread().name))
        return real_fsync(fd)

    real_seal_committed, real_seal_records = writer_mod.seal_committed, writer_mod.seal_records
    monkeypatch.setattr(
        writer_mod,
        "seal_committed",
        lambda **kw: (events.append(("seal", "")), real_seal_committed(**kw))[1],
    )
    monkeypatch.setattr(
        writer_mod,
        "seal_records",
        lambda **kw: (events.append(("seal", "")), real_seal_records(**kw))[1],
    )
    monkeypatch.setattr(os, "fsync", fsync)
    res = capture_file(
        SAMPLE,
        tmp_path / "L",
        digest_key=dk,
        signing_key=sk,
        segment_records=100,
        ledger_format=fmt,
    )
    assert res.frames == 294
    assert [e[0] for e in events] == ["fsync", "seal"] * 3
    assert {t for kind, t in events if kind == "fsync"} and all(
        t.startswith("ledgertool-seal") for kind, t in events if kind == "fsync"
    )


def test_open_segment_name_made_durable_at_close(tmp_path, monkeypatch):
    """Creating an open segment does not fsync its directory (that would wait for the journal
    commit of the previous segment's fsync, running on the sealer thread); close fsyncs the file,
    then the directory, so a closed segment's name and records are durable together."""
    import os

    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(
        os,
        "fsync",
        lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd))[1],
    )
    key = OpenSegmentKey(bytes(range(32)), "cd" * 16)
    path = tmp_path / "seg-00000000.open"
    w = _writer(path, key, 16, 4)
    assert synced == []
    w.append(_records(10, 16, 7, np.random.default_rng(1)), 10)
    w.finish()
    w.close()
    assert synced == [str(path), str(tmp_path)]


def _batches(
    w: LinkWriter, sizes: tuple[int, ...], digest_size: int, rng: np.random.Generator
) -> list:
    """Append batches of `sizes` records through the writer's batch buffers (as capture does);
    the buffers handed out, in order."""
    handed = []
    for n in sizes:
        raw = _records(n, digest_size, w.next_seq, rng)
        buf = w.batch_buffer(max(sizes) * len(raw) // n)  # one size, as the engine's batches
        ffi.memmove(buf, raw, len(raw))
        handed.append(buf)
        w.append(memoryview(ffi.buffer(buf, len(raw))), n, buf)
        assert len(w._writing) <= writer_mod.BATCH_BUFFERS
    return handed


def test_batches_are_written_on_the_writer_thread(tmp_path, keydir, monkeypatch):
    """capture hands each digested batch to the writer thread (leaves, MACs, write(2) run there, the
    GIL released) and digests the next one meanwhile; the records sealed are the ones digested."""
    import threading

    dk, sk, trust = load_keys(keydir)
    threads: list[str] = []
    real_append = segments.SegmentWriter.append
    monkeypatch.setattr(
        segments.SegmentWriter,
        "append",
        lambda self, r, n: (
            threads.append(threading.current_thread().name),
            real_append(self, r, n),
        )[1],
    )
    res = capture_file(
        SAMPLE, tmp_path / "L", digest_key=dk, signing_key=sk, segment_records=100, ledger_format=2
    )
    # 100, 100, 94: one batch each (the segment's room)
    assert res.frames == 294 and len(threads) == 3
    assert all(t.startswith("ledgertool-append") for t in threads), threads
    assert [_seal_checks(tmp_path / "L", i, trust)["records"] for i in range(3)] == [100, 100, 94]


def test_batch_buffers_are_reused_and_bound_what_is_in_flight(tmp_path, keydir, monkeypatch):
    """Backpressure: with every batch buffer in flight, the next batch_buffer waits for the oldest
    write (nothing is dropped); the buffers are reused, never one per batch; the file holds every
    record of every batch in order."""
    _, sk, _ = load_keys(keydir)
    dk, _, _ = load_keys(keydir)
    ledger = tmp_path / "L"
    capture_file(
        SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=1000, ledger_format=2
    )
    lg = load_ledger(ledger)
    real_append = segments.SegmentWriter.append
    monkeypatch.setattr(
        segments.SegmentWriter,
        "append",
        lambda self, r, n: (time.sleep(0.02), real_append(self, r, n))[1],
    )  # a slow disk
    w = LinkWriter.open(ledger, lg, "link0", sk, source="test", segment_records=100_000)
    try:
        sizes = (300, 256, 7, 1000, 300, 300, 300, 50)
        handed = _batches(w, sizes, lg.digest_size, np.random.default_rng(3))
        assert len({id(b) for b in handed}) == writer_mod.BATCH_BUFFERS == w._buffers
        assert w.open_records == sum(sizes) and w.room() == 100_000 - sum(sizes)
        w.end_segment()
        w.drain()
    finally:
        w.close()
    assert [s.records for s in w.sealed] == [sum(sizes)]
    raw = layout.records_path(ledger, "link0", 1).read_bytes()
    blocks = spec_blocks(raw, lg.record_size)
    got = np.frombuffer(b"".join(r for _, r, _ in blocks), dtype=record_dtype(lg.digest_size))
    assert got["seq"].tolist() == list(range(294, 294 + sum(sizes)))


def test_failed_write_on_the_writer_thread_is_raised_and_recovered(v2_ledger, keydir):
    """A write that fails on the writer thread (here EFBIG past RLIMIT_FSIZE) is raised by the
    capture thread's next call as StorageError naming the open segment; the whole blocks written
    before it are sealed by recover, and collecting the failed batch's traceback (a reference
    cycle through the Future) does not crash the interpreter."""
    import gc
    import resource
    import signal

    from ledgertool.errors import StorageError

    _, sk, trust = load_keys(keydir)
    lg = load_ledger(v2_ledger)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    w = LinkWriter.open(v2_ledger, lg, "link0", sk, source="test", segment_records=100_000)
    try:
        resource.setrlimit(
            resource.RLIMIT_FSIZE, (256 + 2 * (4 + 512 * lg.record_size + 32), limit[1])
        )
        with pytest.raises(
            StorageError, match=r"seg-00000003\.open: cannot append to open segment: File too large"
        ):
            _batches(w, (512,) * 8, lg.digest_size, np.random.default_rng(4))
            w.end_segment()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
        signal.signal(signal.SIGXFSZ, old)
        w.close()
    gc.collect()
    rec = recover_ledger(v2_ledger, sk)
    (got,) = [r for _, r in rec.sealed]
    assert (got.index, got.records) == (3, 1024)
    assert _seal_checks(v2_ledger, 3, trust)["records"] == 1024
