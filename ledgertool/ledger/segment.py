"""Open segments: the append-only record files a capture writes before sealing.

Layout (docs/ledger-format.md): a 256-byte header, then fixed-size little-endian records.
Paths are ledgertool.ledger.layout's.
A crash can leave a torn last record; `read_open_segment` keeps every whole record and
reports the bytes it discards.
"""

from __future__ import annotations

import os
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from .. import fsio
from ..algorithms import ALGORITHMS, STRIP_MODES
from ..digest.engine import MERKLE_MAX_LEAF_RECORDS, valid_leaf_records
from ..digest.record import RECORD_FIXED
from ..errors import LedgerFormatError
from .header import LedgerHeader
from .layout import is_link_name

SEGMENT_MAGIC = b"LTSEGv1\n"
SEGMENT_VERSION = 1
HEADER_SIZE = 256
# magic, version, header size, record size, digest size, ledger id, segment index, leaf records,
# first seq, key id (16 bytes), link (32), algorithm (32), strip (16), created ns
_HEADER = struct.Struct("<8sHHHH16sIIQ16s32s32s16sq")
assert _HEADER.size <= HEADER_SIZE



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

    def encode(self) -> bytes:
        raw = _HEADER.pack(
            SEGMENT_MAGIC, SEGMENT_VERSION, HEADER_SIZE, self.record_size, self.digest_size,
            uuid.UUID(hex=self.ledger_id).bytes, self.index, self.leaf_records, self.first_seq,
            bytes.fromhex(self.key_id), self.link.encode(), self.algorithm.encode(),
            self.strip.encode(), self.created_ns,
        )
        return raw.ljust(HEADER_SIZE, b"\0")

    @classmethod
    def decode(cls, raw: bytes, path: str) -> "SegmentHeader":
        if len(raw) < HEADER_SIZE:
            raise LedgerFormatError(f"{path}: segment header cut at byte {len(raw)} (needs {HEADER_SIZE})")
        (magic, version, hsize, rsize, dsize, lid, index, leaf, first, key_id, link, alg, strip,
         created) = _HEADER.unpack_from(raw)
        if magic != SEGMENT_MAGIC:
            raise LedgerFormatError(f"{path}: not a ledgertool segment (bad magic at byte 0)")
        if version != SEGMENT_VERSION or hsize != HEADER_SIZE:
            raise LedgerFormatError(f"{path}: unsupported segment format version {version} at byte 8")
        if rsize != RECORD_FIXED + dsize or dsize not in (16, 32):
            raise LedgerFormatError(f"{path}: inconsistent record size {rsize} / digest size {dsize} at byte 12")
        if not valid_leaf_records(leaf):
            raise LedgerFormatError(f"{path}: leaf_records {leaf} at byte 36 is not a power of two in "
                                    f"1..{MERKLE_MAX_LEAF_RECORDS}")
        try:
            names = [f.rstrip(b"\0").decode("ascii") for f in (link, alg, strip)]
        except UnicodeDecodeError as e:
            raise LedgerFormatError(f"{path}: segment header name field is not ASCII (byte {64 + e.start} "
                                    "or later)") from None
        if not is_link_name(names[0]):
            raise LedgerFormatError(f"{path}: link name {names[0]!r} at byte 64 is not a valid link name")
        algorithm = ALGORITHMS.get(names[1])
        if algorithm is None or not algorithm.ledger_ok or algorithm.digest_size != dsize:
            raise LedgerFormatError(f"{path}: algorithm {names[1]!r} at byte 96 is not a ledger algorithm with "
                                    f"{dsize}-byte digests")
        if names[2] not in STRIP_MODES:
            raise LedgerFormatError(f"{path}: strip mode {names[2]!r} at byte 128 is not one of "
                                    f"{', '.join(STRIP_MODES)}")
        return cls(uuid.UUID(bytes=lid).hex, names[0], index, names[1], names[2], key_id.hex(), rsize, dsize,
                   leaf, first, created)


def header_mismatch(header: SegmentHeader, ledger: LedgerHeader, link: str, index: int, first_seq: int | None,
                    key_id: str | None) -> str | None:
    """Why an open segment with `header` cannot be sealed as segment `index` of `link` (starting
    at seq `first_seq`, digested with digest key `key_id`; None skips those two checks), or None
    when it can: the first header field that differs from what the ledger needs there. Pure."""
    fields = (("ledger id", header.ledger_id, ledger.ledger_id), ("link", header.link, link),
              ("segment index", header.index, index), ("first seq", header.first_seq, first_seq),
              ("algorithm", header.algorithm, ledger.algorithm), ("strip mode", header.strip, ledger.strip),
              ("record size", header.record_size, ledger.record_size),
              ("digest size", header.digest_size, ledger.digest_size),
              ("leaf records", header.leaf_records, ledger.leaf_records), ("digest key id", header.key_id, key_id))
    for name, got, want in fields:
        if want is not None and got != want:
            return f"its header says {name} {got!r} where the ledger needs {want!r}"
    return None


# ---- writer / reader ------------------------------------------------------------------------

class SegmentWriter:
    """Append-only writer of one open segment. Records are appended in whole batches.

    The file is created with O_CREAT|O_EXCL|O_NOFOLLOW (fsio.create_exclusive), below the ledger
    directory `root` when given, so a planted link is never written through. OSError from the
    file system becomes StorageError naming the segment and saying that the records already
    written are kept for `ledgertool recover`."""

    def __init__(self, path: Path, header: SegmentHeader, root: Path | None = None):
        self.path = path
        self.header = header
        self._fd = -1
        fsio.make_dirs(path.parent, root)
        self._fd = fsio.create_exclusive(path, root=root, what="open segment")
        self.records = 0
        try:
            self._write(header.encode())
        except BaseException:
            os.close(self._fd)
            self._fd = -1
            raise

    def _write(self, data: memoryview | bytes) -> None:
        view = memoryview(data).cast("B")
        try:
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as e:
            raise fsio.storage_error(e, self.path, "append to open segment", _keep_hint(e)) from None

    def append(self, records: memoryview | bytes, count: int) -> None:
        self._write(records)
        self.records += count

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.fsync(fd)
            except OSError as e:
                raise fsio.storage_error(e, self.path, "flush open segment", _keep_hint(e)) from None
            finally:
                os.close(fd)


def _keep_hint(e: OSError) -> str:
    advice = fsio.ADVICE.get(e.errno or 0, "fix the cause")
    return (f"{advice}, then run `ledgertool recover`: the whole records already in this segment are "
            "kept and sealed then")


@dataclass(frozen=True)
class OpenSegment:
    header: SegmentHeader
    records: bytes  # whole records only
    count: int
    torn_bytes: int  # bytes of a cut last record, discarded


def read_open_segment(path: Path, root: Path | None = None) -> OpenSegment:
    """Read an open (unsealed) segment (fsio.read_regular, below the ledger directory `root` when
    given); keep whole records, count the torn tail's bytes. LedgerFormatError for a header that
    does not decode, FileTypeError / StorageError as fsio.read_regular."""
    return parse_open_segment(fsio.read_regular(path, root=root, what="open segment"), path)


def parse_open_segment(raw: bytes, path: Path | str) -> OpenSegment:
    """The open segment in `raw`, the bytes of the file at `path` (read_open_segment; pure)."""
    header = SegmentHeader.decode(raw, str(path))
    body = raw[HEADER_SIZE:]
    count = len(body) // header.record_size
    whole = count * header.record_size
    return OpenSegment(header, body[:whole], count, len(body) - whole)


def now_ns() -> int:
    return time.time_ns()
