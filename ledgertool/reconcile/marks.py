"""What recompute's first reading keeps so that a capture that differs is read again only where
it differs (docs/adr/0011, "Marks: a second reading that touches only what differs").

The first reading hashes each side in parts (msethash). Besides the hashes it keeps, per ledger
segment read by the native walk, each record's part at 16 bits (2 bytes a record: the part's
refinement, recompute.MARK_BITS) and the segment's Merkle leaves as that walk hashed them (32
bytes a leaf, verified against the seal's root), and per capture frame its part at 16 bits. When
some parts differ, recompute's second reading (recompute._gather_marked) reads those parts' ledger
records one by one as they are now (`ledger_rows` unchecked) and digests only those parts' capture
frames (lt_engine_fill_select, every frame still read and counted); once both hash as the first
reading did in those parts, their sub-parts' sums name the rows to pair, and those ledger rows are
read again through the leaves that hold them, each hashed and compared with the leaf kept
(`ledger_rows` checked): a leaf equal to a verified one is the bytes the first reading checked.

Anything that does not meet the first reading (a leaf that differs, a file that no longer frames
the records, a segment that was not read by the native walk) makes the caller read both sides in
full, the ledger verified again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from .._binding import ffi, lib
from ..errors import FileTypeError, LedgerFormatError, StorageError
from ..ledger.reader import LedgerReader, OpenRecordFile
from .msethash import parts_where

__all__ = ["Marks", "SegmentMarks", "ledger_rows"]

_HEADER = lib.LT_REC_HEADER_SIZE
_MAC = lib.LT_REC_MAC_SIZE
_MAX_BLOCK = lib.LT_REC_MAX_BLOCK_RECORDS


@dataclass(frozen=True)
class SegmentMarks:
    """One segment as the first reading's native walk saw it: where it is, its record size, the
    native leaf spec (leaf records with the construction's flag) and leaf size, each record's part
    and the leaves (verified against the seal's root)."""

    link: str
    index: int
    record_size: int
    spec: int
    leaf_records: int
    ids: np.ndarray
    leaves: bytes


@dataclass
class Marks:
    """The first reading's marks: the ledger's segments (None once a segment was read another way:
    a v1 or compacted one, or bytes from a URL) and each capture batch's parts, in frame order."""

    segments: list[SegmentMarks] | None = field(default_factory=list)
    capture: list[np.ndarray] = field(default_factory=list)

    def capture_frames(self) -> int:
        """The capture frames marked."""
        return sum(len(ids) for ids in self.capture)

    def capture_where(self, wanted: np.ndarray, bits: int) -> np.ndarray:
        """The indexes (ascending) of the capture frames whose part at `bits` `wanted` marks."""
        out, at = [], 0
        for ids in self.capture:
            out.append(parts_where(ids, wanted, bits) + np.uint64(at))
            at += len(ids)
        return np.concatenate(out) if out else np.zeros(0, np.uint64)


def ledger_rows(
    reader: LedgerReader, seg: SegmentMarks, rows: np.ndarray, check: bool = True
) -> bytes | None:
    """The records `rows` (ascending record indexes) of `seg` (bytes of whole records, in that
    order), read again from its raw record file. `check`: each run of leaves that holds one is
    read and hashed, and must equal the leaves kept (the records are then those the first
    reading verified); otherwise each record alone, as it is now (for finding, not reporting).
    None when a leaf differs, the file is gone or no longer frames them, or it is not a local file
    (the caller reads the ledger again in full)."""
    if not len(rows):
        return b""
    try:
        src = reader.open_record_file(seg.link, seg.index)
    except (LedgerFormatError, StorageError, FileTypeError):
        return None
    try:
        if not isinstance(src, OpenRecordFile) or int(rows[-1]) >= len(seg.ids):
            return None
        # the blocks up to the last record wanted, or to the end of its leaf
        last = int(rows[-1]) + 1
        upto = min(len(seg.ids), -(-last // seg.leaf_records) * seg.leaf_records) if check else last
        blocks = _blocks(src, seg.record_size, upto)
        if blocks is None:
            return None
        if check:
            return _checked_rows(src, blocks, seg, rows)
        return _rows(src, blocks, seg.record_size, rows)
    except OSError:
        return None
    finally:
        reader.close_record_file(src)


def _checked_rows(
    src: OpenRecordFile, blocks: list[tuple[int, int, int]], seg: SegmentMarks, rows: np.ndarray
) -> bytes | None:
    """`rows` of the open file through the leaves that hold them, read a run of consecutive leaves
    at a time and hashed in one call (whole leaves but for the segment's last, which ends the
    last run), each compared with the leaf kept; None as ledger_rows."""
    size, lr, count = seg.record_size, seg.leaf_records, len(seg.ids)
    of_row = rows // lr  # ascending, as rows are
    leaves = of_row[np.concatenate(([True], of_row[1:] != of_row[:-1]))]
    cut = np.flatnonzero(np.diff(leaves) != 1) + 1
    raw = []
    for run in np.split(leaves, cut):
        got = _records(src, blocks, size, int(run[0]) * lr, min((int(run[-1]) + 1) * lr, count))
        if got is None:
            return None
        raw.append(got)
    held = b"".join(raw)
    n = len(held) // size
    hashed = ffi.new("uint8_t[]", 32 * len(leaves))
    if lib.lt_merkle_leaves(ffi.from_buffer(held), size, n, seg.spec, hashed, len(hashed)):
        return None
    if ffi.buffer(hashed)[:] != np.frombuffer(seg.leaves, "V32")[leaves].tobytes():
        return None
    at = np.searchsorted(leaves, of_row) * lr + rows % lr  # each row's place in `held`
    return np.frombuffer(held, np.uint8).reshape(-1, size)[at].tobytes()


def _rows(
    src: OpenRecordFile, blocks: list[tuple[int, int, int]], size: int, rows: np.ndarray
) -> bytes | None:
    """`rows` of the open file, one read each (lt_pread_records), unchecked; None when one is
    cut short."""
    firsts = np.array([b[0] for b in blocks], np.int64)
    offs = np.array([b[2] for b in blocks], np.int64)
    which = np.searchsorted(firsts, rows, side="right") - 1
    at = np.ascontiguousarray(offs[which] + (rows - firsts[which]) * size, np.uint64)
    out = ffi.new("uint8_t[]", max(len(rows) * size, 1))
    done = ffi.new("size_t *")
    st = lib.lt_pread_records(src.fd, ffi.from_buffer("uint64_t[]", at), len(rows), size, out, done)
    return bytes(ffi.buffer(out, len(rows) * size)) if st == lib.LT_OK else None


def _blocks(src: OpenRecordFile, size: int, upto: int) -> list[tuple[int, int, int]] | None:
    """(first record, records, byte offset of the records) of the file's blocks until they hold
    `upto` records, from each block's count; None when a count is out of bounds or a block runs
    past the file."""
    out, first, at = [], 0, _HEADER
    while first < upto:
        head = os.pread(src.fd, 4, at)
        if len(head) < 4:
            return None
        n = int.from_bytes(head, "little")
        if not 1 <= n <= _MAX_BLOCK or at + 4 + n * size + _MAC > src.size:
            return None
        out.append((first, n, at + 4))
        first, at = first + n, at + 4 + n * size + _MAC
    return out


def _records(
    src: OpenRecordFile, blocks: list[tuple[int, int, int]], size: int, lo: int, hi: int
) -> bytearray | None:
    """The bytes of records lo..hi (framing stripped) through the blocks that hold them."""
    buf = bytearray((hi - lo) * size)
    view, covered = memoryview(buf), 0
    for first, n, off in blocks:
        a, b = max(lo, first), min(hi, first + n)
        if a >= b:
            continue
        want = (b - a) * size
        got = os.preadv(src.fd, [view[(a - lo) * size : (b - lo) * size]], off + (a - first) * size)
        if got != want:
            return None
        covered += b - a
    return buf if covered == hi - lo else None
