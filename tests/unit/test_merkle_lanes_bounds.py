"""The sixteen-lane SHA-256 leaves at their edges, against hashlib: every tail shape of the message
(window-record sizes of every residue mod 64, so the 128-byte padded tail too), loads that stay in
the caller's bytes (the records end at a page no process may read), and the record-file walk over
many block layouts, in memory and read from a file (its in-window runs and its stage), with the
lanes forced to 16 and to 1."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import mmap
import os

import pytest
from conftest import load_keys
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from v2_reference import rec_bytes, synthetic_records, write_ledger_json

from ledgertool._binding import ffi, lib
from ledgertool.digest.engine import merkle_leaves
from ledgertool.ledger.reader import OpenRecordFile
from ledgertool.ledger.recfile import parse_record_file


@contextlib.contextmanager
def _lanes(n: int):
    if lib.lt_merkle_lanes_force(n) != lib.LT_OK:
        pytest.skip(f"this CPU cannot hash {n} leaves side by side")
    try:
        assert lib.lt_merkle_lanes() == n
        yield
    finally:
        lib.lt_merkle_lanes_force(0)


def _reference(records: bytes, record_size: int, leaf_records: int) -> bytes:
    block = record_size * leaf_records
    return b"".join(
        hashlib.sha256(b"\x00" + records[i : i + block]).digest()
        for i in range(0, len(records), block)
    )


# leaf_records 1 takes any window-record size from 164 bytes: 164..291 is every residue of the
# message (0x00 || record) mod 64 twice over, so every tail the lanes pad (64 or 128 bytes, the
# 0x80 at each offset) and 0, 1 or 2 blocks hashed in place
WINDOW_SIZES = range(lib.LT_WINDOW_HEADER + 3 * 28, lib.LT_WINDOW_HEADER + 3 * 28 + 128)


@pytest.mark.parametrize("lanes", [16, 4, 1])
def test_every_tail_shape_gives_hashlibs_leaves(lanes):
    with _lanes(lanes):
        for size in WINDOW_SIZES:
            records = hashlib.shake_256(size.to_bytes(2, "little")).digest(size * 35)
            assert merkle_leaves(records, size, 1) == _reference(records, size, 1), size


def _guarded(nbytes: int):
    """A writable buffer of nbytes whose next byte is on a page no access may touch (a load past
    the records faults, SIGSEGV, instead of reading whatever lies there)."""
    page = mmap.PAGESIZE
    pages = -(-nbytes // page) + 1
    m = mmap.mmap(-1, pages * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    guard = base + (pages - 1) * page
    assert libc.mprotect(guard, page, 0) == 0  # PROT_NONE, os.strerror(ctypes.get_errno())
    start = (pages - 1) * page - nbytes
    return m, start, base, libc, guard


@pytest.mark.parametrize("lanes", [16, 4])
@pytest.mark.parametrize(
    "record_size, leaf_records, count",
    [
        (48, 1, 16),
        (48, 1, 32),
        (48, 1, 37),
        (64, 1, 16),
        (64, 2, 33),
        (48, 4, 64),
        (64, 16, 16 * 16),
        (164, 1, 16),  # 165-byte messages: the last block hashed in place ends at the guard
        (190, 1, 16),  # 63 + 2 * 64: two blocks in place, nothing after them
        (191, 1, 17),
        (227, 1, 20),
    ],
)
def test_lanes_read_no_byte_past_the_records(lanes, record_size, leaf_records, count):
    data = hashlib.shake_256(bytes([record_size % 256, count % 256])).digest(record_size * count)
    m, start, base, libc, guard = _guarded(len(data))
    try:
        m[start : start + len(data)] = data
        out = ffi.new("uint8_t[]", 32 * count)
        ptr = ffi.cast("uint8_t *", base + start)
        with _lanes(lanes):
            rc = lib.lt_merkle_leaves(ptr, record_size, count, leaf_records, out, len(out))
        assert rc == lib.LT_OK
        leaves = -(-count // leaf_records)
        assert bytes(ffi.buffer(out, 32 * leaves)) == _reference(data, record_size, leaf_records)
    finally:
        libc.mprotect(guard, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE)
        m.close()


@pytest.fixture(scope="module")
def signing_key(keydir):
    return load_keys(keydir)[1]


# block counts around the walk's sizes: the stage (4096 records), the read window (256 KiB: 5461 or
# 4096 records), sixteen and four leaves, and blocks that do not start on a leaf boundary
EDGES = [1, 15, 16, 17, 63, 64, 65, 1023, 1024, 4095, 4096, 4097, 5456, 5461, 5462, 8191, 8193]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    digest_size=st.sampled_from([16, 32]),
    leaf_log=st.sampled_from([0, 1, 2, 4, 8, 9, 10, 11]),
    blocks=st.lists(st.sampled_from(EDGES) | st.integers(1, 9000), min_size=1, max_size=5),
    lanes=st.sampled_from([16, 1]),
)
@example(digest_size=16, leaf_log=0, blocks=[5461, 5462, 17, 8193], lanes=16)  # past the window
@example(digest_size=32, leaf_log=0, blocks=[4095, 4097, 15, 16, 4096], lanes=16)
@example(digest_size=16, leaf_log=8, blocks=[4096, 4095, 4097, 8192], lanes=16)  # 16 leaves
@example(digest_size=32, leaf_log=9, blocks=[8193, 2047, 2049], lanes=16)  # four leaves a run
@example(digest_size=32, leaf_log=10, blocks=[4096, 4096, 1, 8191], lanes=16)  # a window a run
@example(digest_size=16, leaf_log=11, blocks=[8192, 8193], lanes=16)  # wider than the window
def test_the_walk_gives_hashlibs_leaves_for_any_block_layout(
    tmp_path_factory, signing_key, digest_size, leaf_log, blocks, lanes
):
    """lt_rec_leaves (stage only), lt_rec_records (the copy, block by block) and lt_rec_file with
    and without a copy (the read window's runs of whole leaves, hashed where they were read) all
    give hashlib's leaves for the segment, whatever the blocks and however many lanes."""
    leaf = 1 << leaf_log
    record_size = 32 + digest_size
    d = tmp_path_factory.mktemp("W")
    led = write_ledger_json(
        d,
        algorithm="blake3-keyed-256" if digest_size == 32 else "siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=digest_size,
        leaf_records=leaf,
    )
    recs = synthetic_records(sum(blocks), 5, digest_size, seed=len(blocks) + leaf_log)
    raw = rec_bytes(led, "link0", 3, 5, recs, signing_key, blocks)
    want = _reference(recs, record_size, leaf)
    path = d / "seg-00000003.rec"
    path.write_bytes(raw)
    with _lanes(lanes):
        for keep in (False, True):
            got = parse_record_file(raw, path.name, record_size, leaf, 5, keep_records=keep)
            assert (got.count, got.leaves == want) == (sum(blocks), True), ("bytes", keep)
            fd = os.open(path, os.O_RDONLY)
            try:
                got = parse_record_file(
                    OpenRecordFile(fd, len(raw)), path, record_size, leaf, 5, keep_records=keep
                )
            finally:
                os.close(fd)
            assert (got.count, got.leaves == want) == (sum(blocks), True), ("file", keep)
            assert got.facts.seq_contiguous
