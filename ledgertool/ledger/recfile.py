"""Raw record files, `seg-N.rec`: the sealed segments of ledger format v2 before compaction
(docs/ledger-format.md, "Sealed segment: raw record file"). Byte for byte an open-segment v2 file:
its 256-byte header, then blocks (u32 count, the records, a 32-byte MAC), nothing after the last
block. The seal does not pin the file: a reader authenticates it by recomputing the seal's signed
Merkle root over the records it yields (ledgertool.verify.checks); the MACs are the device's and
are ignored here (a verifier has no key, and nothing in them is signed).

The block walk, the copy into one contiguous record buffer and the leaf hashes are one native
call (lt_rec_records, bounded: every count in 1..65536, every block whole, no trailing byte); a
local file is read by that call with pread(2), never mapped (lt_rec_file): a file the storage holder
truncates meanwhile is a LedgerFormatError naming the byte, and a read the disk fails (EIO) a
StorageError naming the file and the byte, where a map of it could wait in the kernel for ever.
numpy and pyarrow are imported where records are kept: plain `verify` hashes the leaves from its
read stage and loads neither.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import fsio
from .._binding import ffi, lib
from ..digest.engine import leaf_spec
from ..digest.record import RecordSink
from ..errors import LedgerFormatError
from .reader import OpenRecordFile
from .segment import HEADER_SIZE, RESERVED_OFFSET, TIER_OFFSET, SegmentHeader

if TYPE_CHECKING:
    import pyarrow as pa

_WHY = {
    lib.LT_REC_HEADER_CUT: "file cut inside its {size}-byte header",
    lib.LT_REC_BAD_COUNT: "block {block} at byte {offset}: record count {count} is not in 1..65536",
    lib.LT_REC_BLOCK_CUT: "block {block} at byte {offset} ({count} records) runs past the end of "
    "the file",
    lib.LT_REC_TRAILING: "{left} bytes after the last whole block (block {block} would start at "
    "byte {offset})",
}


@dataclass(frozen=True)
class RecordFacts:
    """What verify checks per record, counted in C while the records were copied: GAP records,
    their declared drops, the first and last ts_ns, and whether seq runs first_seq, first_seq +
    1, ..."""

    gaps: int
    drops: int
    first_ts_ns: int
    last_ts_ns: int
    seq_contiguous: bool


@dataclass(frozen=True)
class RecordFile:
    """A raw record file, framing stripped: its decoded header, the records of all its blocks as
    one buffer (`count` records of the layout the caller gave; None when not kept), their Merkle
    leaf hashes and the number of blocks. Not authenticated by itself."""

    header: SegmentHeader
    records: pa.Buffer | None
    count: int
    blocks: int
    leaves: bytes
    facts: RecordFacts


def parse_record_file(
    raw: pa.Buffer | bytes | OpenRecordFile,
    path: Path | str,
    record_size: int,
    leaf_records: int,
    first_seq: int = 0,
    *,
    keep_records: bool = True,
    leaf_hash: str = "sha256",
    into: RecordSink | None = None,
    ahead: int = 0,
) -> RecordFile:
    """The raw record file in `raw` (the bytes of the file at `path`, or that file open: then read
    by the walk, and a file that shrinks meanwhile is a LedgerFormatError naming the byte that is
    gone; StorageError naming the byte when the storage fails a read), decoded with the seal's
    signed `record_size` and `leaf_records`; `facts.seq_contiguous` says whether the records' seq
    run from `first_seq` (a u64). LedgerFormatError, one line naming the file and the byte offset
    (and block), when the header does not decode or is not a v2 header, or the blocks do not frame
    the file exactly; ValueError for a layout out of bounds. With `keep_records` False the records
    are not copied out (`records` is None): the leaves are hashed where they lie in `raw`
    (lt_rec_leaves), the same leaves and facts, for a reader that wants neither records nor table.

    `into` (with `keep_records`): the records are copied into the free tail of that RecordSink
    (`into.room`, `ahead` passed on: the records expected after these) instead of a fresh buffer,
    and the leaves are hashed from that copy, so `records` (a view of the sink's array) is exactly
    the bytes hashed; nothing is counted in `into.n` (the caller takes them, `into.take`, once the
    segment passed its checks). A sink whose records are not `record_size` bytes is not used."""
    mapped = isinstance(raw, OpenRecordFile)
    if not mapped or keep_records:
        import pyarrow as pa
    if not mapped:
        raw = raw if isinstance(raw, pa.Buffer) else pa.py_buffer(raw)
    size = raw.size
    if size < HEADER_SIZE:
        raise LedgerFormatError(
            f"{path}: {_WHY[lib.LT_REC_HEADER_CUT].format(size=HEADER_SIZE)} ({size} bytes)"
        )
    spec = leaf_spec(leaf_records, leaf_hash) if leaf_records else 0
    max_leaves = -(-((size - HEADER_SIZE) // record_size) // leaf_records) if leaf_records else 0
    leaves = ffi.new("uint8_t[]", max(max_leaves, 1) * 32)
    info = ffi.new("lt_rec_info *")
    out = None
    if keep_records and into is not None and into.dtype.itemsize == record_size:
        # room for every record the file can frame: (size - header) // record_size bounds them
        tail = into.room(max((size - HEADER_SIZE) // record_size, 1), ahead)
        out = pa.py_buffer(tail.view("u1"))
    elif keep_records:
        out = pa.allocate_buffer(max(size - HEADER_SIZE, 1))
    out_ptr = ffi.from_buffer(out, require_writable=True) if out is not None else ffi.NULL
    hashing = getattr(into, "mset", None) if out is not None and into is not None else None
    runs = None
    if mapped:  # the header is read with the walk: no byte of the file is read in Python
        rc, head, runs = _walk_file(
            raw, path, record_size, first_seq, out, out_ptr, spec, leaves, info, hashing, into
        )
    else:
        head = raw[:HEADER_SIZE].to_pybytes()
        if keep_records:
            rc = lib.lt_rec_records(
                ffi.from_buffer(raw),
                size,
                record_size,
                first_seq,
                out_ptr,
                out.size,
                spec,
                leaves,
                len(leaves),
                info,
            )
        else:
            rc = lib.lt_rec_leaves(
                ffi.from_buffer(raw), size, record_size, first_seq, spec, leaves, len(leaves), info
            )
    header = _checked_walk(rc, info, head, path, size, record_size, leaf_records)
    count = int(info.records)
    n_leaves = -(-count // leaf_records)
    if hashing is not None and mapped:
        _count_seconds(into, runs, out.slice(0, count * record_size))
        into.hashed = (out.address, count * record_size) if count else None
        if runs[4] is not None:  # recompute keeps each record's part and the leaves
            into.marks = (runs[4][:count], bytes(ffi.buffer(leaves, n_leaves * 32)), spec)
    elif hashing is not None:  # read into memory (a URL): the consumer hashes these itself
        into.hashed = None
    facts = RecordFacts(
        int(info.gaps),
        int(info.drops),
        int(info.first_ts_ns),
        int(info.last_ts_ns),
        bool(info.seq_contiguous),
    )
    return RecordFile(
        header,
        out.slice(0, count * record_size) if out is not None else None,
        count,
        int(info.blocks),
        bytes(ffi.buffer(leaves, n_leaves * 32)),
        facts,
    )


def _walk_file(raw, path, record_size, first_seq, out, out_ptr, spec, leaves, info, hashing, into):
    """The native walk of an open raw record file (lt_rec_file, or lt_rec_file_mset with
    recompute's hashing sink): (return code, the header's bytes, the hashing sink's seconds runs
    (secs, counts, nruns, cap) or None). LedgerFormatError when the file shrank meanwhile,
    StorageError naming the byte when a read fails."""
    size, runs = raw.size, None
    head = ffi.new("uint8_t[]", HEADER_SIZE)
    if hashing is not None:  # recompute's fast verdict (reconcile.msethash.HashingSink)
        import numpy as np

        cap = 1024 + (size - HEADER_SIZE) // record_size // 16
        secs, counts, nruns = (
            np.empty(cap, np.int64),
            np.empty(cap, np.uint64),
            ffi.new("size_t *"),
        )
        key, part_key, part_bits, acc, count = hashing.native_args()
        ids = (  # one a record the file can hold
            np.empty(max((size - HEADER_SIZE) // record_size, 1), np.uint16)
            if getattr(into, "keep_marks", False)
            else None
        )
        runs = (secs, counts, nruns, cap, ids)
        rc = lib.lt_rec_file_mset(
            raw.fd,
            size,
            record_size,
            first_seq,
            head,
            out_ptr,
            out.size,
            spec,
            leaves,
            len(leaves),
            key,
            part_key,
            part_bits,
            acc,
            count,
            ffi.from_buffer("int64_t[]", secs),
            ffi.from_buffer("uint64_t[]", counts),
            cap,
            nruns,
            ffi.NULL if ids is None else ffi.from_buffer("uint16_t[]", ids),
            info,
        )
    else:
        rc = lib.lt_rec_file(
            raw.fd,
            size,
            record_size,
            first_seq,
            head,
            out_ptr,
            out.size if out else 0,
            spec,
            leaves,
            len(leaves),
            info,
        )
    if rc == lib.LT_ERR_IO and info.error == lib.LT_REC_SHRUNK:
        raise LedgerFormatError(
            f"{path}: the file shrank while it was read: byte {info.error_offset} of {size} "
            "is gone (truncated by another program?)"
        )
    if rc == lib.LT_ERR_IO:
        err = ffi.errno
        raise fsio.storage_error(
            OSError(err, os.strerror(err)),
            path,
            f"read byte {info.error_offset} of the raw record file",
        )
    head = bytes(ffi.buffer(head))
    return rc, head, runs


def _checked_walk(rc, info, head: bytes, path, size: int, record_size: int, leaf_records: int):
    """The header the walk read, decoded and held to a link's raw record file, and the walk's
    return code turned into its error (one line naming the file, the byte and the block)."""
    header = SegmentHeader.decode(head, str(path))
    if header.version != 2:
        raise LedgerFormatError(
            f"{path}: a v{header.version} segment header (byte 0); a raw record file has a v2 one"
        )
    check_reserved(head, path)
    if header.tier != "frames":  # a window log's segment where a link's belongs
        raise LedgerFormatError(
            f"{path}: record kind byte {TIER_OFFSET} is {head[TIER_OFFSET]:#04x} "
            f"({header.tier} records); a link's raw record file holds per-frame records"
        )
    if rc == lib.LT_ERR_CORRUPT:
        raise LedgerFormatError(
            f"{path}: "
            + _WHY[info.error].format(
                size=HEADER_SIZE,
                block=info.blocks,
                offset=info.error_offset,
                count=info.error_count,
                left=size - info.error_offset,
            )
        )
    if rc == lib.LT_ERR_NOMEM:
        raise MemoryError(f"{path}: no memory for a leaf of {leaf_records} records")
    if rc != lib.LT_OK:
        raise ValueError(
            f"record size {record_size!r} / leaf records {leaf_records!r} out of bounds"
        )
    return header


def _count_seconds(into, runs, kept) -> None:
    """Hand the hashing sink the per-second counts of the records just walked: the native walk's
    runs, or (time jumping between seconds too often for them) counted from the same copy."""
    import numpy as np

    secs, counts, nruns, cap, _ = runs
    if nruns[0] <= cap:
        into.add_runs(secs[: nruns[0]], counts[: nruns[0]])
    else:
        into.count_seconds(np.frombuffer(kept, into.dtype))


def check_reserved(head: bytes, path) -> None:
    """LedgerFormatError when a sealed segment's header has a non-zero reserved byte (bytes
    169..255, after the record kind: docs/ledger-format.md): a reader refuses what it does not
    understand. The native
    walk hands its header here, so both read paths check it."""
    nonzero = next((i for i in range(RESERVED_OFFSET, HEADER_SIZE) if head[i]), None)
    if nonzero is not None:
        last = HEADER_SIZE - 1
        raise LedgerFormatError(
            f"{path}: reserved header byte {nonzero} is {head[nonzero]:#04x}, "
            f"not zero (bytes {RESERVED_OFFSET}..{last} are reserved); not a "
            "raw record file this version reads"
        )
