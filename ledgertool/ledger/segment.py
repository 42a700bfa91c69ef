"""Open segments: the append-only record files a capture writes before sealing.

Layout (docs/ledger-format.md, "Open segment file"): a 256-byte header, then
  v1  fixed-size little-endian records (no authentication: recovery seals them only from trusted
      storage);
  v2  blocks, each a u32 record count, the records and a 32-byte MAC chained over the previous
      block's (ledger.openmac).
Paths are ledgertool.ledger.layout's. The sealer signs the records a capture holds in memory
(ledger.writer); these files are read only by recovery and by verify's report on them. A crash
can leave a torn last record (v1) or block (v2); parsing keeps every whole one and reports the
bytes past them, apart from the zero padding to a 4 KiB boundary a direct-I/O writer leaves (v2).
"""

from __future__ import annotations

import errno
import fcntl
import hmac
import os
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .. import fsio
from .._binding import check, ffi, lib
from ..algorithms import ALGORITHMS, STRIP_MODES
from ..digest.engine import (
    MERKLE_MAX_LEAF_RECORDS,
    leaf_spec,
    merkle_leaves,
    merkle_root,
    valid_leaf_records,
)
from ..digest.record import FLAG_GAP, RECORD_FIXED, record_dtype
from ..errors import LedgerFormatError, OpenSegmentRefusedError, Setting
from .header import LedgerHeader
from .layout import is_link_name
from .openmac import MAC_SIZE, OpenSegmentKey, chunk_hashes
from .sealer import SegmentTotals

if TYPE_CHECKING:  # imported where used (start-up: docs/benchmarks.md)
    pass

SEGMENT_MAGIC = b"LTSEGv1\n"  # v1: records without authentication (read, never written)
SEGMENT_MAGIC_V2 = b"LTSEGv2\n"  # v2: authenticated blocks
HEADER_SIZE = 256
# magic, version, header size, record size, digest size, ledger id, segment index, leaf records,
# first seq, key id (16 bytes), link (32), algorithm (32), strip (16), created ns; v2 adds the
# MAC key id (16 bytes) at byte 152
_HEADER = struct.Struct("<8sHHHH16sIIQ16s32s32s16sq")
_MAC_KEY_ID = struct.Struct("<16s")
MAC_KEY_ID_OFFSET = _HEADER.size
assert MAC_KEY_ID_OFFSET + _MAC_KEY_ID.size <= HEADER_SIZE
#: v2: byte 168 says what the records are: 0 the engine's per-frame records, 1 window records
#: (docs/ledger-format.md, "Window records"); zero in every segment written before window logs
TIER_OFFSET = MAC_KEY_ID_OFFSET + _MAC_KEY_ID.size
_TIER = struct.Struct("<B")
TIER_CODES = {"frames": 0, "windows": 1}
RESERVED_OFFSET = TIER_OFFSET + _TIER.size  # v2: bytes 169..255, zero
_BLOCK_COUNT = struct.Struct("<I")
BLOCK_PREFIX = _BLOCK_COUNT.size
#: records per v2 block at most: an append is split into blocks this size, so a torn block loses
#: at most this many records and a block count field can never claim more
MAX_BLOCK_RECORDS = lib.LT_SEGMENT_MAX_BLOCK_RECORDS
#: the most records of one segment (the writer keeps 32 bytes of leaf hashes per leaf of them)
MAX_SEGMENT_RECORDS = lib.LT_SEGMENT_MAX_RECORDS
#: the page a segment open under direct I/O is padded to (docs/ledger-format.md)
PAGE_SIZE = 4096


# ---- header ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentHeader:
    ledger_id: str  # uuid hex (32 chars)
    link: str
    index: int
    algorithm: str
    strip: str
    key_id: str  # hex, 32 chars
    record_size: int  # bytes
    digest_size: int  # bytes
    leaf_records: int
    first_seq: int
    created_ns: int
    mac_key_id: str | None = None  # hex, 32 chars: format v2 (authenticated blocks); None: v1
    tier: str = "frames"  # "windows": window records of the link's window log, one per leaf

    @property
    def version(self) -> int:
        return 1 if self.mac_key_id is None else 2

    def encode(self) -> bytes:
        raw = _HEADER.pack(
            SEGMENT_MAGIC if self.version == 1 else SEGMENT_MAGIC_V2,
            self.version,
            HEADER_SIZE,
            self.record_size,
            self.digest_size,
            uuid.UUID(hex=self.ledger_id).bytes,
            self.index,
            self.leaf_records,
            self.first_seq,
            bytes.fromhex(self.key_id),
            self.link.encode(),
            self.algorithm.encode(),
            self.strip.encode(),
            self.created_ns,
        )
        if self.mac_key_id is not None:
            raw += _MAC_KEY_ID.pack(bytes.fromhex(self.mac_key_id)) + _TIER.pack(
                TIER_CODES[self.tier]
            )
        return raw.ljust(HEADER_SIZE, b"\0")

    @classmethod
    def decode(cls, raw: bytes, path: str) -> SegmentHeader:
        if len(raw) < HEADER_SIZE:
            raise LedgerFormatError(
                f"{path}: segment header cut at byte {len(raw)} (needs {HEADER_SIZE})"
            )
        (
            magic,
            version,
            hsize,
            rsize,
            dsize,
            lid,
            index,
            leaf,
            first,
            key_id,
            link,
            alg,
            strip,
            created,
        ) = _HEADER.unpack_from(raw)
        if magic not in (SEGMENT_MAGIC, SEGMENT_MAGIC_V2):
            raise LedgerFormatError(f"{path}: not a ledgertool segment (bad magic at byte 0)")
        if version != (1 if magic == SEGMENT_MAGIC else 2):
            raise LedgerFormatError(
                f"{path}: unsupported segment format version {version} at byte 8"
            )
        if hsize != HEADER_SIZE:
            raise LedgerFormatError(f"{path}: header size {hsize} at byte 10 is not {HEADER_SIZE}")
        tier = raw[TIER_OFFSET] if version == 2 else 0
        if tier not in TIER_CODES.values():
            raise LedgerFormatError(
                f"{path}: record kind {tier} at byte {TIER_OFFSET} is not 0 or 1"
            )
        window_ok = tier == 1 and leaf == 1 and lib.LT_WINDOW_HEADER < rsize
        if (rsize != RECORD_FIXED + dsize and not window_ok) or dsize not in (16, 32):
            raise LedgerFormatError(
                f"{path}: inconsistent record size {rsize} / digest size {dsize} at byte 12"
            )
        if not valid_leaf_records(leaf):
            raise LedgerFormatError(
                f"{path}: leaf_records {leaf} at byte 36 is not a power of two in "
                f"1..{MERKLE_MAX_LEAF_RECORDS}"
            )
        try:
            names = [f.rstrip(b"\0").decode("ascii") for f in (link, alg, strip)]
        except UnicodeDecodeError as e:
            raise LedgerFormatError(
                f"{path}: segment header name field is not ASCII (byte {64 + e.start} or later)"
            ) from None
        if not is_link_name(names[0]):
            raise LedgerFormatError(
                f"{path}: link name {names[0]!r} at byte 64 is not a valid link name"
            )
        algorithm = ALGORITHMS.get(names[1])
        if algorithm is None or not algorithm.ledger_ok or algorithm.digest_size != dsize:
            raise LedgerFormatError(
                f"{path}: algorithm {names[1]!r} at byte 96 is not a ledger algorithm with "
                f"{dsize}-byte digests"
            )
        if names[2] not in STRIP_MODES:
            raise LedgerFormatError(
                f"{path}: strip mode {names[2]!r} at byte 128 is not one of "
                f"{', '.join(STRIP_MODES)}"
            )
        mac_key_id = (
            _MAC_KEY_ID.unpack_from(raw, MAC_KEY_ID_OFFSET)[0].hex() if version == 2 else None
        )
        return cls(
            uuid.UUID(bytes=lid).hex,
            names[0],
            index,
            names[1],
            names[2],
            key_id.hex(),
            rsize,
            dsize,
            leaf,
            first,
            created,
            mac_key_id,
            "windows" if tier == 1 else "frames",
        )


def header_mismatch(
    header: SegmentHeader,
    ledger: LedgerHeader,
    link: str,
    index: int,
    first_seq: int | None,
    key_id: str | None,
) -> str | None:
    """Why an open segment with `header` cannot be sealed as segment `index` of `link` (starting
    at seq `first_seq`, digested with digest key `key_id`; None skips those two checks), or None
    when it can: the first header field that differs from what the ledger needs there. Pure."""
    fields = (
        ("ledger id", header.ledger_id, ledger.ledger_id),
        ("link", header.link, link),
        ("segment index", header.index, index),
        ("first seq", header.first_seq, first_seq),
        ("algorithm", header.algorithm, ledger.algorithm),
        ("strip mode", header.strip, ledger.strip),
        ("record size", header.record_size, ledger.record_size),
        ("digest size", header.digest_size, ledger.digest_size),
        ("leaf records", header.leaf_records, ledger.leaf_records),
        ("digest key id", header.key_id, key_id),
    )
    for name, got, want in fields:
        if want is not None and got != want:
            return f"its header says {name} {got!r} where the ledger needs {want!r}"
    return None


# ---- writer / reader ------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentCommitment:
    """What a segment's seal states, computed from the records themselves: by the writer from the
    memory it was handed (never read back from the file), or by recovery from authenticated
    blocks."""

    first_seq: int  # of the first record
    totals: SegmentTotals  # counters and Merkle root
    blocks: int  # blocks written
    leaves: bytes = field(repr=False)  # the leaf hashes, 32 bytes each (the .leaves sidecar)


def commit_records(
    records: bytes | memoryview, record_size: int, leaf_records: int, leaf_hash: str = "sha256"
) -> SegmentCommitment:
    """The commitment over whole records held in memory (at least one; ValueError otherwise), as
    the C writer computes it (recovery, from records whose blocks authenticated). Blocks: 0
    (unknown)."""
    import numpy as np

    arr = np.frombuffer(records, dtype=record_dtype(record_size - RECORD_FIXED))
    if not len(arr):
        raise ValueError("a segment commitment needs at least one record")
    gaps = (arr["flags"] & FLAG_GAP) != 0
    leaves = merkle_leaves(records, record_size, leaf_records, leaf_hash)
    totals = SegmentTotals(
        len(arr),
        int(len(arr) - gaps.sum()),
        int(arr["aux"][gaps].sum(dtype=np.uint64)),
        int(arr["seq"][-1]),
        int(arr["ts_ns"][0]),
        int(arr["ts_ns"][-1]),
        merkle_root(leaves),
    )
    return SegmentCommitment(int(arr["seq"][0]), totals, 0, leaves)


class SegmentWriter:
    """Append-only writer of one v2 open segment (native/src/segment_writer.c): the records go from
    the caller's buffer to the file once, in blocks aligned to the segment's Merkle leaves, each
    MAC'd over its leaf-chunk hashes; the leaves, the root and the seal's counters come from the
    same memory (`finish`).

    The bytes go to the disk with O_DIRECT, in whole 4 KiB pages staged by the native writer (the
    file then ends in zero padding to a page boundary while open, cut at `close`), or through the
    page cache where the file system refuses O_DIRECT or LEDGERTOOL_SEGMENT_IO is "buffered"
    (`direct` says which): the closed file is the same either way.

    The file is created with O_CREAT|O_EXCL|O_NOFOLLOW (fsio.create_exclusive), below the ledger
    directory `root` when given, so a planted link is never written through. `key` is the ledger's
    open-segment key; its id is in the header (ValueError otherwise). OSError from the file system
    becomes StorageError naming the segment and saying that the records already written are kept
    for `ledgertool recover`."""

    def __init__(
        self,
        path: Path,
        header: SegmentHeader,
        key: OpenSegmentKey,
        root: Path | None = None,
        leaf_hash: str = "sha256",
    ):
        if header.mac_key_id != key.key_id:
            raise ValueError("the open segment's header names another MAC key")
        self.path = path
        self.header = header
        self.records = 0
        fsio.make_dirs(path.parent, root)
        # the name is made durable with the data, in close: a directory fsync here would wait for
        # the journal commit of the previous segment's fsync, which the sealer thread runs now
        self._root = root
        self._fd = fsio.create_exclusive(path, root=root, what="open segment", durable_name=False)
        self._native = ffi.NULL
        #: whether the records go to the disk with O_DIRECT (False: through the page cache)
        self.direct = False
        try:
            self.direct = direct_io_wanted() and _set_direct(self._fd)
            raw = header.encode()
            if not self.direct:
                try:
                    if os.write(self._fd, raw) != len(raw):  # 256 bytes to a new regular file
                        raise OSError(errno.EIO, "short write of the segment header")
                except OSError as e:
                    raise fsio.storage_error(
                        e, self.path, "append to open segment", _keep_hint(e)
                    ) from None
            out = ffi.new("lt_segment_writer **")
            check(
                lib.lt_segment_writer_new(
                    self._fd,
                    key.secret,
                    len(key.secret),
                    key.chain_start(raw),
                    header.record_size,
                    leaf_spec(header.leaf_records, leaf_hash),
                    MAX_SEGMENT_RECORDS,
                    out,
                ),
                "lt_segment_writer_new",
            )
            self._native = ffi.gc(out[0], lib.lt_segment_writer_free)
            if self.direct:  # the header is the first page's start, written now
                self._io(lib.lt_segment_writer_direct, raw, len(raw), what="append to")
        except BaseException:
            os.close(self._fd)
            self._fd = -1
            raise

    def _io(self, fn, *args, what: str) -> None:
        """Call native `fn(writer, *args, &errno)`; LT_ERR_IO: StorageError naming the file."""
        os_errno = ffi.new("int *")
        status = fn(self._native, *args, os_errno)
        if status == lib.LT_ERR_IO:
            e = OSError(os_errno[0], os.strerror(os_errno[0]))
            raise fsio.storage_error(e, self.path, f"{what} open segment", _keep_hint(e))
        check(status, fn.__name__)

    def append(self, records: memoryview | bytes, count: int) -> None:
        """Write `count` whole records (count * record_size bytes of `records`, not copied) as the
        next blocks. ValueError past MAX_SEGMENT_RECORDS; StorageError when the file system fails
        (the writer is then done: what it wrote stays for `ledgertool recover`)."""
        os_errno = ffi.new("int *")
        # released before anything is raised: a traceback kept in a reference cycle (a writer
        # thread's Future) would otherwise hold the export, and the cycle's collection can free
        # the exported memoryview first (a crash in memory_dealloc)
        with ffi.from_buffer(records) as buf:
            if len(buf) < count * self.header.record_size:
                got = len(buf)
                status = None
            else:
                status = lib.lt_segment_writer_append(self._native, buf, count, os_errno)
        if status is None:
            raise ValueError(
                f"{count} records need {count * self.header.record_size} bytes, got {got}"
            )
        if status == lib.LT_ERR_IO:
            e = OSError(
                os_errno[0], os.strerror(os_errno[0]) if os_errno[0] else "an earlier write failed"
            )
            raise fsio.storage_error(e, self.path, "append to open segment", _keep_hint(e))
        check(status, f"lt_segment_writer_append ({count} records)")
        self.records += count

    def finish(self) -> SegmentCommitment:
        """The root over every leaf, the leaves and the counters; no append after it. ValueError
        when no record was appended."""
        root, last, c = (
            ffi.new("uint8_t[32]"),
            ffi.new("uint8_t[32]"),
            ffi.new("lt_segment_counters *"),
        )
        check(lib.lt_segment_writer_finish(self._native, root, last, c), "lt_segment_writer_finish")
        leaves = ffi.new("uint8_t[]", c.leaves * 32)
        check(
            lib.lt_segment_writer_leaves(self._native, leaves, len(leaves)),
            "lt_segment_writer_leaves",
        )
        totals = SegmentTotals(
            c.records, c.frames, c.drops, c.last_seq, c.first_ts_ns, c.last_ts_ns, bytes(root)
        )
        return SegmentCommitment(c.first_seq, totals, c.blocks, bytes(ffi.buffer(leaves)))

    def close(self) -> None:
        """fsync and close the file, then fsync its directory (the file's name; StorageError
        naming it)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                if self.direct and self._native != ffi.NULL:  # the last page's padding cut
                    self._io(lib.lt_segment_writer_trim, what="flush")
                os.fsync(fd)
            except OSError as e:
                raise fsio.storage_error(
                    e, self.path, "flush open segment", _keep_hint(e)
                ) from None
            finally:
                os.close(fd)
            fsio.fsync_dir(self.path.parent, self._root)


#: set to "buffered" in the environment, segment files are written through the page cache even
#: where the file system takes O_DIRECT (docs/capture.md, "How the records reach the disk")
SEGMENT_IO_ENV = "LEDGERTOOL_SEGMENT_IO"


def direct_io_wanted() -> bool:
    """Whether new segment files try O_DIRECT: unless LEDGERTOOL_SEGMENT_IO is "buffered"."""
    return os.environ.get(SEGMENT_IO_ENV, "direct") != "buffered"


def _set_direct(fd: int) -> bool:
    """Set O_DIRECT on `fd` (and clear O_APPEND: the native writer then writes whole pages at
    their offsets, pwrite(2)); False where the file system refuses it (EINVAL: tmpfs before
    Linux 6.6, most FUSE file systems), the file then written through the page cache."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, (flags & ~os.O_APPEND) | os.O_DIRECT)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return False
        raise
    return True


def _keep_hint(e: OSError) -> str:
    advice = fsio.ADVICE.get(e.errno or 0, "fix the cause")
    return f"{advice}, then run `ledgertool recover`"


@dataclass(frozen=True)
class OpenBlock:
    """One whole v2 block as framed in the file (not yet authenticated)."""

    offset: int  # byte offset of its count field in the file
    count: int
    records: bytes
    mac: bytes


@dataclass(frozen=True)
class OpenSegment:
    """An open segment as framed in the file. Nothing here is authenticated: `authenticated_records`
    checks a v2 segment's blocks; a v1 segment has nothing to check."""

    header: SegmentHeader
    raw_header: bytes  # the 256 header bytes (v2: the MAC chain starts from them)
    records: bytes  # whole records (v1) / the records of the whole blocks (v2)
    count: int
    torn_bytes: int  # bytes past the last whole record (v1) / block (v2), never sealed
    size: int  # of the file, bytes
    blocks: tuple[OpenBlock, ...] = ()  # v2
    padding: int = 0  # v2: zero bytes after the last block to a 4 KiB boundary (direct I/O)


def read_open_segment(path: Path, root: Path | None = None) -> OpenSegment:
    """Read an open (unsealed) segment (fsio.read_regular, below the ledger directory `root` when
    given); keep whole records (v1) or blocks (v2), count the bytes past them. LedgerFormatError
    for a header that does not decode, FileTypeError / StorageError as fsio.read_regular."""
    return parse_open_segment(fsio.read_regular(path, root=root, what="open segment"), path)


def parse_open_segment(raw: bytes, path: Path | str) -> OpenSegment:
    """The open segment in `raw`, the bytes of the file at `path` (read_open_segment; pure)."""
    header = SegmentHeader.decode(raw, str(path))
    if header.version == 1:
        body = raw[HEADER_SIZE:]
        count = len(body) // header.record_size
        whole = count * header.record_size
        return OpenSegment(
            header, raw[:HEADER_SIZE], body[:whole], count, len(body) - whole, len(raw)
        )
    framed = list(
        _block_walk(lambda at: _BLOCK_COUNT.unpack_from(raw, at)[0], len(raw), header.record_size)
    )
    blocks = [
        OpenBlock(at, count, raw[at + BLOCK_PREFIX : end - MAC_SIZE], raw[end - MAC_SIZE : end])
        for at, count, end in framed
    ]
    pos = framed[-1][2] if framed else HEADER_SIZE
    # a segment open under direct I/O ends in zeros to a 4 KiB page boundary: padding, not torn
    padding = _padding(len(raw), pos, lambda: raw[pos:])
    return OpenSegment(
        header,
        raw[:HEADER_SIZE],
        b"".join(b.records for b in blocks),
        sum(b.count for b in blocks),
        len(raw) - pos - padding,
        len(raw),
        tuple(blocks),
        padding,
    )


def _block_walk(
    count_at: Callable[[int], int | None], size: int, record_size: int
) -> Iterator[tuple[int, int, int]]:
    """(offset, count, end) of each whole block of an open v2 segment of `size` bytes, from the
    header on; `count_at(offset)` is the u32 count field there, None where it cannot be read (a
    file cut since it was measured). A block stops the framing where it does not fit whole (a torn
    append) or its count is out of range (a torn count field): those bytes are reported, never
    sealed."""
    pos = HEADER_SIZE
    while pos + BLOCK_PREFIX <= size:
        count = count_at(pos)
        if count is None:
            return
        end = pos + BLOCK_PREFIX + count * record_size + MAC_SIZE
        if not 1 <= count <= MAX_BLOCK_RECORDS or end > size:
            return
        yield pos, count, end
        pos = end


def _padding(size: int, pos: int, rest: Callable[[], bytes]) -> int:
    """The bytes after the last whole block (at `pos`) that are a direct-I/O page's zero padding,
    not torn: all zeros (`rest()`, read only when they may be), less than a page, to a page end."""
    if size % PAGE_SIZE == 0 and size - pos < PAGE_SIZE and not any(rest()):
        return size - pos
    return 0


@dataclass(frozen=True)
class OpenSegmentSurvey:
    """An open segment's framing as parse_open_segment finds it (its counts, not its records):
    what verify reports of an open segment (survey_open_segment)."""

    header: SegmentHeader
    count: int  # whole records (v1) / records of the whole blocks (v2)
    blocks: int  # v2: whole blocks; v1: 0
    torn_bytes: int
    size: int
    padding: int = 0


def survey_open_segment(f: BinaryIO, size: int, path: Path | str) -> OpenSegmentSurvey:
    """parse_open_segment's counts of the `size` bytes of a seekable binary file `f`, found
    without holding them: the header, each block's count field (the reads skip the records and
    MACs) and, where it may be the padding, the last page. An open segment is the storage
    holder's file and may be any size (a hole costs nothing): read whole it could fill memory, so
    verify, which needs only these counts, reads at most a header, 4 bytes a block and one page
    (a block is at least 84 bytes of the file, so the walk's time is bounded by the bytes written,
    never by a hole)."""
    header = SegmentHeader.decode(f.read(HEADER_SIZE), str(path))
    rsize = header.record_size
    if header.version == 1:
        count = (size - HEADER_SIZE) // rsize
        return OpenSegmentSurvey(header, count, 0, size - HEADER_SIZE - count * rsize, size)

    def count_at(at: int) -> int | None:
        f.seek(at)
        field_ = f.read(BLOCK_PREFIX)
        return _BLOCK_COUNT.unpack(field_)[0] if len(field_) == BLOCK_PREFIX else None

    pos, count, blocks = HEADER_SIZE, 0, 0
    for _, n, end in _block_walk(count_at, size, rsize):
        count, blocks, pos = count + n, blocks + 1, end

    def rest() -> bytes:
        f.seek(pos)
        return f.read(size - pos)

    padding = _padding(size, pos, rest)
    return OpenSegmentSurvey(header, count, blocks, size - pos - padding, size, padding)


@dataclass(frozen=True)
class AuthenticatedPrefix:
    """The blocks of an open segment that authenticate, from the first (`authenticate_prefix`)."""

    records: bytes = field(repr=False)  # the records of the first `blocks` blocks
    blocks: int
    end: int  # byte offset just past them (the header's end when none authenticates)
    failure: str | None = None  # why the block after them does not authenticate (None: all do)


def authenticate_prefix(
    seg: OpenSegment,
    key: OpenSegmentKey,
    path: Path | str,
    *,
    trust_unauthenticated: bool = False,
    leaf_hash: str = "sha256",
) -> AuthenticatedPrefix:
    """The records of `seg` that may be signed: the whole blocks of a v2 segment up to the first
    that fails the device's MAC chain (`key`: the ledger's open-segment key), with the reason it
    fails (a one-line message naming the file, the block and its byte offset: planted, rewritten,
    moved or reordered; every block fails when the header names another MAC key); a v1 segment's
    records only with `trust_unauthenticated` (the caller trusts the storage), else
    OpenSegmentRefusedError. Pure."""
    if seg.header.version == 1:
        if not trust_unauthenticated:
            raise OpenSegmentRefusedError(
                f"{path}: a v1 open segment ({seg.count} records) carries no authentication by the "
                "device; nothing was sealed: if the storage is trusted, `ledgertool recover` with ",
                Setting("trust_unauthenticated_open_segments"),
                " seals it",
                unauthenticated=True,
            )
        return AuthenticatedPrefix(seg.records, 0, seg.size - seg.torn_bytes - seg.padding)
    if seg.header.mac_key_id != key.key_id:
        return AuthenticatedPrefix(
            b"",
            0,
            HEADER_SIZE,
            (
                f"{path}: the header (byte {MAC_KEY_ID_OFFSET}) names MAC key "
                f"{seg.header.mac_key_id}, not this device's key {key.key_id} for the ledger: not "
                "written by this device"
            ),
        )
    mac = key.chain_start(seg.raw_header)
    for i, block in enumerate(seg.blocks):
        chunks = chunk_hashes(
            block.records, seg.header.record_size, seg.header.leaf_records, leaf_hash
        )
        mac = key.block_mac(mac, i, block.count, chunks)
        if not hmac.compare_digest(mac, block.mac):
            return AuthenticatedPrefix(
                seg.records[: sum(b.count for b in seg.blocks[:i]) * seg.header.record_size],
                i,
                block.offset,
                f"{path}: block {i} (byte {block.offset}) fails authentication by the device's key "
                "(MAC does not verify): planted, rewritten or reordered, a damaged header or "
                "block, or written by an older version",
            )
    return AuthenticatedPrefix(
        seg.records, len(seg.blocks), seg.size - seg.torn_bytes - seg.padding
    )


def now_ns() -> int:
    return time.time_ns()
