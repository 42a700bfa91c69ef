"""`records:FILE` and `records:-`: records a hardware pipeline computed, checked block by block
and handed to `capture` as the digest engine's records are (docs/devices.md, "Feeding records").

The input is whole records of the ledger's layout concatenated (docs/ledger-format.md "Records",
schemas/record.json), nothing before, between or after them. It is read in blocks of about
1 MiB (a pipe may return less: a record cut by a short read is completed by the next read) and
checked with numpy over the whole block: the first seq is the link's next seq and each record's
seq is the one before it + 1 (a GAP record takes one seq, like a frame), and no flag bit is
outside the documented set. A record that breaks a rule stops the source: the records before it
are handed out first, the error comes on the next `fill`, so `capture` seals them and says how many.

An input that starts with `LTSTREAM` is an authenticated record stream (ledgertool.source.stream,
docs/devices.md "Authenticated record streams"): checked block by block with the binding `bind`
gives (ledger, digest key, link, device, window tier), its records renumbered into the link's
sequence, its window records taken with `take_windows`. With a device required or a window tier,
plain records are refused.
"""

from __future__ import annotations

import os
import select
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import fsio
from ..algorithms import ALGORITHMS, Algorithm
from ..digest.record import FLAG_GAP, FLAGS_DEFINED, RECORD_FIXED, record_dtype
from ..errors import LedgerError, LedgerFormatError
from ..plural import plural
from .stream import MAGIC, StreamBinding, StreamParser, source_tail

if TYPE_CHECKING:  # imported where used (start-up: docs/benchmarks.md)
    import numpy as np

RECORDS_PREFIX = "records:"
STDIN_NAME = "-"
CHUNK_BYTES = 1 << 20  # one read: large enough that the per-block numpy work dominates nothing
POLL_S = 0.1  # a quiet pipe hands back control this often: signals, --duration, --segment-seconds


def is_records(source) -> bool:
    return isinstance(source, str) and source.startswith(RECORDS_PREFIX)


def seal_source_name(source: str) -> str:
    """The seals' `source` field for a records source: the file name without its directory."""
    name = source[len(RECORDS_PREFIX) :]
    return source if name == STDIN_NAME else RECORDS_PREFIX + os.path.basename(name)


def _other_sizes(record_size: int) -> dict[int, list[str]]:
    """Record sizes of the other ledger algorithms -> their names (the hint for a size mismatch)."""
    sizes: dict[int, list[str]] = {}
    for a in ALGORITHMS.values():
        size = RECORD_FIXED + a.digest_size
        if a.ledger_ok and size != record_size:
            sizes.setdefault(size, []).append(a.name)
    return sizes


@dataclass(frozen=True)
class RecordsInfo:
    """How a records source was read (the `info()` of a capture reader)."""

    path: str
    records: int  # whole records handed out

    def truncation_note(self) -> str | None:
        return None  # a cut last record is refused, never a note (RecordsReader.fill)


class RecordsReader:
    """The records of `records:FILE` (a file or a named pipe) or `records:-` (standard input) for a
    ledger of `algorithm`, continuing link `link`.

    `fill(first_seq, max_records)` has the digest engine's contract for a live source: (records,
    count, captured bytes), `records` a view valid until the next call; count 0 when nothing
    arrived within POLL_S, and with `ended` at the end of the input. Raises
    LedgerFormatError naming the input and the record (index and byte offset) for a cut record, a
    seq that does not continue the link, or an undocumented flag bit; StorageError when reading
    fails. A regular file is checked to be whole records before anything is handed out."""

    def __init__(self, source: str, algorithm: Algorithm, link: str):
        name = source[len(RECORDS_PREFIX) :]
        if not name:
            raise LedgerFormatError(
                f"{source}: no file named (records:FILE, or records:- for standard input)"
            )
        self.path = "standard input" if name == STDIN_NAME else name
        self.algorithm = algorithm
        self.link = link
        self.record_size = RECORD_FIXED + algorithm.digest_size
        self.dtype = record_dtype(algorithm.digest_size)
        self.ended = False
        self._file = self._open(name)
        # room for whole blocks plus the cut record a short read can leave behind
        self._buf = bytearray(
            max(CHUNK_BYTES // self.record_size, 1) * self.record_size + self.record_size
        )
        self._start = 0  # the bytes not handed out yet are _buf[_start:_have]
        self._have = 0
        self._eof = False
        self._read = 0  # records handed out so far
        self._error: LedgerError | None = (
            None  # a bad record, raised once the ones before it are out
        )
        # an authenticated stream (source.stream) once its magic is seen; None: not decided yet
        self._stream: StreamParser | None = None
        self._binding: StreamBinding | None = None
        self._on_header = None
        self.authenticated: bool | None = self._is_stream_file

    def _open(self, name: str):
        if name == STDIN_NAME:
            if os.isatty(0):
                raise LedgerFormatError(
                    "standard input is a terminal: records:- reads records from a pipe"
                )
            f = open(0, "rb", buffering=0, closefd=False)
        else:
            try:
                f = open(name, "rb", buffering=0)
            except FileNotFoundError:
                raise LedgerFormatError(f"{name}: file not found (expected records)") from None
            except IsADirectoryError:
                raise LedgerFormatError(f"{name}: is a directory (expected records)") from None
            except OSError as e:
                raise fsio.storage_error(e, name, "read records") from None
        st = os.fstat(f.fileno())
        self._is_stream_file = None  # decided from the first bytes of a pipe
        if stat.S_ISREG(st.st_mode):
            self._is_stream_file = os.pread(f.fileno(), len(MAGIC), 0) == MAGIC
        if stat.S_ISREG(st.st_mode) and not self._is_stream_file and st.st_size % self.record_size:
            if name != STDIN_NAME:
                f.close()
            raise self._size_error(st.st_size)
        return f

    def _size_error(self, size: int) -> LedgerFormatError:
        rs, whole = self.record_size, size // self.record_size
        fits = [
            f"{'/'.join(names)} ({s} B)" for s, names in _other_sizes(rs).items() if size % s == 0
        ]
        hint = f"; whole records of {fits[0]}?" if fits else ""
        return LedgerFormatError(
            f"{self.path}: {size} bytes is not a whole number of {rs}-byte "
            f"{self.algorithm.name} records: record {whole} is cut at byte {whole * rs}{hint}"
        )

    def bind(self, binding: StreamBinding, on_header=None) -> None:
        """What checks an authenticated stream (the ledger, its digest key, the link; see
        source.stream) and `on_header(seal_source_tail)`, called once the stream header verified,
        before any record is handed out."""
        self._binding, self._on_header = binding, on_header

    def take_windows(self) -> list:
        """Window records of an authenticated stream verified so far and not taken yet."""
        return self._stream.take_windows() if self._stream is not None else []

    def info(self) -> RecordsInfo:
        return RecordsInfo(self.path, self._read)

    def close(self) -> None:
        if self._file.fileno() != 0:
            self._file.close()

    def at_end(self) -> bool:
        """Whether every record of the input was handed out and the input ended after them (the
        engine's `at_end`). Looks ahead without handing anything out: only for a caller that stops
        reading here. A quiet pipe, or input whose next bytes are not a good record, is not at its
        end."""
        if self.ended:
            return True
        if self._error is not None:
            return False
        try:
            if self.authenticated:
                return self._stream_at_end()
            if self._have == self._start:
                self._refill()
        except LedgerError:
            return False
        return self._have == self._start and self._eof

    def _stream_at_end(self) -> bool:
        parser = self._stream
        if parser is None:
            return False
        while True:
            parser.feed(memoryview(self._buf)[self._start : self._have])
            self._start = self._have = 0
            if parser.take(0, 0) is not None:  # verified records not handed out
                return False
            # closed is not the end: bytes after the close block in a later read are refused
            # (take raises), so the input must be seen to end first
            if self._eof:
                return parser.closed  # else cut short
            if not self._read_some() and not self._eof:
                return False  # quiet

    # ---- reading ---------------------------------------------------------------------------------

    def _refill(self) -> None:
        """Move the bytes not handed out to the front and read until one whole record is there, the
        end, or POLL_S without data. A pipe returns what it has (a short read); the rest of a cut
        record comes with a later read."""
        rest = self._have - self._start
        if self._start:
            self._buf[:rest] = self._buf[self._start : self._have]
            self._start, self._have = 0, rest
        view = memoryview(self._buf)
        while not self._eof and self._have < self.record_size:
            try:
                if not select.select([self._file], [], [], POLL_S)[0]:
                    return  # nothing yet: the caller gets no records and may stop
                got = self._file.readinto(view[self._have :])
            except OSError as e:
                raise fsio.storage_error(e, self.path, "read records") from None
            if got is None:  # a non-blocking pipe that select called ready too early
                continue
            if got == 0:
                self._eof = True
            else:
                self._have += got

    def fill(self, first_seq: int, max_records: int | None = None) -> tuple[memoryview, int, int]:
        """Up to `max_records` more checked records numbered from `first_seq` (see the class)."""
        import numpy as np

        if self._error is not None:
            raise self._error
        if self.authenticated is None:
            if self._have - self._start < len(MAGIC):
                self._refill()
            if self._have - self._start < len(MAGIC) and not self._eof:
                return memoryview(b""), 0, 0  # a quiet pipe: not decided yet
            start = bytes(self._buf[self._start : self._start + len(MAGIC)])
            self.authenticated = start == MAGIC
        if self.authenticated:
            return self._fill_stream(first_seq, max_records)
        b = self._binding
        if b is not None and (b.device_id is not None or b.window is not None):
            if self._have == self._start and not self._eof:
                self._refill()
            if self._have == self._start and not self._eof:
                return memoryview(b""), 0, 0  # a quiet pipe: not decided yet
            if self._have == self._start:
                self.ended = True  # nothing at all: nothing to refuse (creating a ledger)
                return memoryview(b""), 0, 0
            raise LedgerFormatError(
                f"{self.path}: plain records, not an authenticated stream (LTSTREAM)"
                + (
                    f" from device {b.device_id}; only that device's streams are taken"
                    if b.device_id is not None
                    else "; a ledger with a window tier takes its window records from one"
                )
            )
        if self._have - self._start < self.record_size:
            self._refill()
        rs = self.record_size
        n = (self._have - self._start) // rs
        if max_records is not None:
            n = min(n, max_records)
        if n == 0:
            if not self._eof:  # a quiet pipe: nothing whole within POLL_S, not the end
                return memoryview(b""), 0, 0
            if self._have > self._start:  # the end came inside a record
                raise self._record_error(
                    self._read,
                    f"is cut at byte {self._read * rs + self._have - self._start}: "
                    f"{self._have - self._start} of {rs} bytes (a torn last record)",
                )
            self.ended = True
            return memoryview(b""), 0, 0
        arr = np.frombuffer(self._buf, dtype=self.dtype, count=n, offset=self._start)
        n = self._check(arr, first_seq)
        if n == 0:  # the first record of the block is the bad one: nothing before it to hand out
            raise self._error
        arr = arr[:n]
        frames = (arr["flags"] & FLAG_GAP) == 0
        # what the engine counts: captured bytes
        nbytes = int(arr["cap_len"][frames].sum(dtype=np.uint64))
        out = memoryview(self._buf)[self._start : self._start + n * rs]
        self._start += n * rs
        self._read += n
        return out, n, nbytes

    def _fill_stream(self, first_seq: int, max_records: int | None) -> tuple[memoryview, int, int]:
        """fill() for an authenticated stream: records only from blocks whose tag verified."""
        import numpy as np

        if self._stream is None:
            if self._binding is None:
                raise LedgerFormatError(f"{self.path}: an authenticated stream needs its ledger")
            self._stream = StreamParser(self.path, self._binding)
        parser = self._stream
        while True:
            parser.feed(memoryview(self._buf)[self._start : self._have])
            self._start = self._have = 0
            had_header = parser.header is not None
            arr = parser.take(first_seq, max_records)
            if not had_header and parser.header is not None and self._on_header:
                h = parser.header
                self._on_header(source_tail(h.device_id, h.stream_no))
            if arr is not None:
                frames = (arr["flags"] & FLAG_GAP) == 0
                nbytes = int(arr["cap_len"][frames].sum(dtype=np.uint64))
                self._read += len(arr)
                return memoryview(arr.view(np.uint8)), len(arr), nbytes
            if self._eof:
                parser.finish()
                self.ended = True
                return memoryview(b""), 0, 0
            got = self._read_some()
            if not got and not self._eof:
                return memoryview(b""), 0, 0  # a quiet pipe

    def _read_some(self) -> int:
        """One read of what the input has (POLL_S at most); bytes read, 0 at the end or when
        quiet."""
        if not select.select([self._file], [], [], POLL_S)[0]:
            return 0
        try:
            got = self._file.readinto(memoryview(self._buf))
        except OSError as e:
            raise fsio.storage_error(e, self.path, "read records") from None
        if got == 0:
            self._eof = True
        self._have = got or 0
        return self._have

    def _check(self, arr: np.ndarray, first_seq: int) -> int:
        """How many leading records of `arr` fit; the first that does not becomes the pending
        error."""
        import numpy as np

        want = np.arange(first_seq, first_seq + len(arr), dtype=np.uint64)
        bad = (arr["seq"] != want) | ((arr["flags"] & ~np.uint16(FLAGS_DEFINED)) != 0)
        if not bad.any():
            return len(arr)
        k = int(np.argmax(bad))
        seq, flags = int(arr["seq"][k]), int(arr["flags"][k])
        if seq != first_seq + k:
            other = self._other_size(first_seq + k) if k == 1 and self._read == 0 else None
            # the wrong layout altogether: refused before any record is sealed
            if other is not None:
                self._error = other
                return 0
            self._error = self._seq_error(self._read + k, seq, first_seq + k)
        else:
            self._error = self._record_error(
                self._read + k,
                f"has flags 0x{flags:04x}: bits 0x{flags & ~FLAGS_DEFINED & 0xFFFF:04x} are not "
                'record flags (docs/ledger-format.md "Record flags"; bits 7-14 are reserved)',
            )
        return k

    def _seq_error(self, index: int, seq: int, want: int) -> LedgerFormatError:
        if index == 0:
            why = (
                f"seq {seq}, but link {self.link} continues at seq {want}: the first record must "
                "carry it"
            )
        elif seq < want:
            why = (
                f"seq {seq} after seq {want - 1}: the sequence restarts or repeats (each record "
                "is the one before + 1)"
            )
        else:
            why = (
                f"seq {seq} after seq {want - 1}: {plural(seq - want, 'seq number')} "
                f"{'is' if seq - want == 1 else 'are'} "
                "missing (frames a device "
                "dropped are declared by one GAP record, which takes one seq)"
            )
        return self._record_error(index, why)

    def _other_size(self, want: int) -> LedgerFormatError | None:
        """Record 1 of the input does not continue record 0: the error saying so when the input
        reads as another ledger algorithm's records (their record 1 carries seq `want`), else
        None."""
        import numpy as np

        base = self._start
        for size, names in _other_sizes(self.record_size).items():
            if (
                base + size + 8 <= self._have
                and int(np.frombuffer(self._buf, dtype="<u8", count=1, offset=base + size)[0])
                == want
            ):
                return LedgerFormatError(
                    f"{self.path}: record 1 (byte {self.record_size}) does not continue record 0, "
                    f"but byte {size} does: these are {size}-byte records ({'/'.join(names)}), not "
                    f"the ledger's {self.record_size}-byte {self.algorithm.name} records"
                )
        return None

    def _record_error(self, index: int, why: str) -> LedgerFormatError:
        return LedgerFormatError(
            f"{self.path}: record {index} (byte {index * self.record_size}) {why}"
        )
