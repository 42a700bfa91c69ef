"""An open segment is the storage holder's file, of any size it likes (a hole costs it nothing):
verify reports its framing (whole records, blocks, the bytes past them) from a walk that reads
the header, each block's count field and at most one page, never the whole file
(ledger.segment.survey_open_segment). The walk gives parse_open_segment's counts, byte for byte
(a property over framings whole, torn, padded and garbage), and a 192 MiB hole past one block
costs verify no more memory than the ledger without it."""

from __future__ import annotations

import io
import json
import struct
import tracemalloc
from pathlib import Path

import pytest
from conftest import cli
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool.errors import LedgerFormatError
from ledgertool.ledger.segment import (
    HEADER_SIZE,
    MAX_BLOCK_RECORDS,
    PAGE_SIZE,
    SegmentHeader,
    parse_open_segment,
    survey_open_segment,
)
from ledgertool.verify.ledger import verify_ledger

fsspec = pytest.importorskip("fsspec")

_MAC = 32


def _seg(ledger: Path, index: int, kind: str) -> Path:
    return ledger / "link=link0" / f"seg-{index:08d}.{kind}"


def _continuing_header(ledger: Path) -> tuple[bytes, int]:
    """The header of an open segment 3 that continues the chain after sealed segment 2 (segment
    2's raw record file header with the index and first seq moved on), and its record size."""
    raw = _seg(ledger, 2, "rec").read_bytes()
    header = bytearray(raw[:HEADER_SIZE])
    last = int(json.loads(_seg(ledger, 2, "seal.json").read_bytes())["last_seq"])
    struct.pack_into("<I", header, 32, 3)
    struct.pack_into("<Q", header, 40, last + 1)
    (rsize,) = struct.unpack_from("<H", header, 12)
    return bytes(header), rsize


def _block(count: int, rsize: int, fill: int = 0xA5) -> bytes:
    return struct.pack("<I", count) + bytes([fill]) * (count * rsize) + bytes(_MAC)


def _header(rsize: int, version: int) -> bytes:
    """A header that decodes: segment 0 of link0, with `rsize`-byte records."""
    return SegmentHeader(
        "ab" * 16,
        "link0",
        0,
        "siphash-1-3-128" if rsize == 48 else "blake3-keyed-256",
        "frame",
        "cd" * 16,
        rsize,
        rsize - 32,
        64,
        0,
        0,
        "ef" * 16 if version == 2 else None,
    ).encode()


@st.composite
def _framings(draw):
    """A v2 open segment's bytes after a real header: whole blocks, then one of: nothing, a cut
    block, a count out of range, zero padding to a page (or past one), garbage."""
    rsize = draw(st.sampled_from([48, 64]))
    header = _header(rsize, 2)
    body = b"".join(
        _block(n, rsize, draw(st.integers(0, 255)))
        for n in draw(st.lists(st.integers(1, 70), max_size=6))
    )
    tail = draw(
        st.one_of(
            st.just(b""),
            st.builds(lambda n, k: _block(n, rsize)[:k], st.integers(1, 70), st.integers(1, 200)),
            st.builds(
                lambda n: struct.pack("<I", n) + bytes(8),
                st.sampled_from([0, MAX_BLOCK_RECORDS + 1, 0xFFFFFFFF]),
            ),
            st.binary(max_size=300),
            st.just(None),  # zeros to the next page boundary (direct I/O padding)
            st.just(bytes(PAGE_SIZE)),  # a whole page of zeros: torn, not padding
        )
    )
    raw = bytes(header) + body
    if tail is None:
        tail = bytes(-len(raw) % PAGE_SIZE)
    return raw + tail


def _shape(seg) -> tuple:
    blocks = seg.blocks if isinstance(seg.blocks, int) else len(seg.blocks)
    return seg.header, seg.count, blocks, seg.torn_bytes, seg.size, seg.padding


@settings(max_examples=300, deadline=None)
@given(raw=_framings())
def test_the_walk_gives_parse_open_segments_counts(raw):
    survey = survey_open_segment(io.BufferedReader(io.BytesIO(raw), 64), len(raw), "x.open")
    assert _shape(survey) == _shape(parse_open_segment(raw, "x.open"))


@settings(max_examples=50, deadline=None)
@given(rsize=st.sampled_from([48, 64]), extra=st.integers(0, 300))
def test_a_v1_open_segments_counts_come_from_its_size(rsize, extra):
    raw = _header(rsize, 1) + bytes(range(256)) * 2 + bytes(extra)
    survey = survey_open_segment(io.BytesIO(raw), len(raw), "x.open")
    assert _shape(survey) == _shape(parse_open_segment(raw, "x.open"))


@pytest.mark.parametrize("size", [0, 100, HEADER_SIZE - 1])
def test_a_cut_header_is_the_same_error(size):
    raw = b"LTSEGv2\n"[:size] + bytes(max(0, size - 8))
    with pytest.raises(LedgerFormatError) as walked:
        survey_open_segment(io.BytesIO(raw), len(raw), "x.open")
    with pytest.raises(LedgerFormatError) as parsed:
        parse_open_segment(raw, "x.open")
    assert str(walked.value) == str(parsed.value) and "header cut" in str(walked.value)


HOLE = 192 << 20  # read whole (as before the walk), this much memory: kept far below a machine's


def _verify_within(ledger, most: int):
    """verify_ledger (keyless) of `ledger`, its peak traced memory held under `most` bytes."""
    tracemalloc.start()
    try:
        res = verify_ledger(ledger, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < most, peak
    return res


def test_a_hole_after_one_block_is_counted_not_read(sample_ledger, keydir):
    """One block of 5 records, then a 192 MiB hole: the warning counts the hole as bytes past the
    block (torn_segment), and verify's peak of traced memory stays far below the hole's size
    (read whole, the file's bytes alone would be 192 MiB of it)."""
    header, rsize = _continuing_header(sample_ledger)
    path = _seg(sample_ledger, 3, "open")
    first = header + _block(5, rsize)
    with open(path, "wb") as f:
        f.write(first)
        f.truncate(len(first) + HOLE)
    res = _verify_within(sample_ledger, HOLE // 8)
    torn = [w for w in res.warnings if w.kind.value == "torn_segment"]
    assert res.ok and len(torn) == 1 and torn[0].segment == 3, res.warnings
    assert f"{path}: open segment with 5 whole records in 1 block and {HOLE} bytes past" in (
        torn[0].detail
    ), torn[0].detail
    r = cli("verify", sample_ledger, "--trust", keydir / "verifier.pub")
    assert r.returncode == 0 and f"{HOLE} bytes past" in r.stdout + r.stderr, r


def test_a_whole_hole_is_a_header_warning_without_reading_it(sample_ledger):
    """A 192 MiB hole named seg-3.open (no header: zeros): a torn_segment warning naming the bad
    magic, and nothing near its size read (the walk stops at the header)."""
    path = _seg(sample_ledger, 3, "open")
    with open(path, "wb") as f:
        f.truncate(HOLE)
    res = _verify_within(sample_ledger, HOLE // 8)
    torn = [w for w in res.warnings if w.kind.value == "torn_segment"]
    assert res.ok and len(torn) == 1 and f"{path}: not a ledgertool segment" in torn[0].detail


def test_a_remote_open_segment_is_walked_as_the_local_one(sample_ledger):
    """The same open segment at a memory:// URL: fsspec's ranged reads give the same warning."""
    header, rsize = _continuing_header(sample_ledger)
    _seg(sample_ledger, 3, "open").write_bytes(
        header + _block(3, rsize) + _block(2, rsize) + b"\x07" * 10
    )
    local = verify_ledger(sample_ledger, None)
    fs = fsspec.filesystem("memory")
    root = "/open_segment_bounded_read"
    for f in sorted(p for p in sample_ledger.rglob("*") if p.is_file()):
        fs.pipe_file(f"{root}/{f.relative_to(sample_ledger).as_posix()}", f.read_bytes())
    try:
        remote = verify_ledger(f"memory://{root.lstrip('/')}", None)
    finally:
        fs.rm(root, recursive=True)
    want = "open segment with 5 whole records in 2 blocks and 10 bytes past them"
    for res in (local, remote):
        torn = [w for w in res.warnings if w.kind.value == "torn_segment"]
        assert res.ok and len(torn) == 1 and want in torn[0].detail, res.warnings
