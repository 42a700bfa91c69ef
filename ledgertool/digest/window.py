"""Window records: one fixed-size record per link and time window that commits to the multiset of
the window's frame digests (docs/adr/0012-window-commitments.md; every byte in
docs/ledger-format.md, "Window records").

A record holds the window's facts in the clear (window length and index, frames, wire bytes,
declared drops, late frames) and, masked with a one-time pad, a keyed multiset hash of the
digests and an invertible Bloom lookup table of them. `WindowAccumulator` feeds the engine's
record batches to the native accumulator (native/src/window.c) and hands back the records of the
windows that closed; `WindowRecord` parses and writes the bytes; `WindowKeys` derives the two
16-byte keys from the digest master key, per ledger, link and window length. Subtracting and
decoding two windows is the verifier's business: ledgertool/reconcile/windows.py.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .._binding import check, ffi, lib
from ..errors import DataError
from ..plan import window_cells
from .record import RECORD_FIXED

# numpy is imported where records are handled: a v2 capture of frames alone loads none
if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_WINDOW_NS",
    "WINDOW_HEADER",
    "WindowAccumulator",
    "WindowKeys",
    "WindowRecord",
    "cells_for_capacity",
    "record_size",
    "window_paths",
]

WINDOW_MAGIC = b"LTWN"
WINDOW_VERSION = lib.LT_WINDOW_VERSION
WINDOW_K = lib.LT_WINDOW_K  # cells per digest, one in each third of the table
WINDOW_HEADER = lib.LT_WINDOW_HEADER  # bytes before the first cell
MAX_CELLS = lib.LT_WINDOW_MAX_CELLS
CLEAR = 64  # bytes in the clear; the hash and the cells after them are masked
DEFAULT_WINDOW_NS = 1_000_000_000
DEFAULT_CAPACITY = 64
_HEAD = struct.Struct("<4sBBHII QqQQQQ")  # the 64 clear bytes
_KDF_LABEL = b"ledgertool window v1"
#: the accumulator's CPU paths for its AES (native/src/window.c): every one gives the same records
WINDOW_PATHS = {
    "best": lib.LT_WINDOW_PATH_BEST,
    "portable": lib.LT_WINDOW_PATH_PORTABLE,
    "aesni": lib.LT_WINDOW_PATH_AESNI,
    "vaes-avx512": lib.LT_WINDOW_PATH_VAES,
}


def window_paths() -> list[str]:
    """The accumulator paths this CPU and build run (named as WindowAccumulator takes them)."""
    return [n for n, v in WINDOW_PATHS.items() if n != "best" and lib.lt_window_path_supported(v)]


def cells_for_capacity(capacity: int) -> int:
    """Cells of a table that decodes `capacity` differences with under 1 % failure:
    3 * (ceil(2/3 * capacity) + 32) (UsageError otherwise; ledgertool.plan holds the rule, pure
    math). The extra 32 cells a third keep two elements from sharing all three cells (the failure
    that dominates a small table); docs/adr/0012 has the measured rates."""
    return window_cells(capacity)


def record_size(cells: int, digest_size: int) -> int:
    """Bytes of one window record; ValueError for a table or digest size no record has."""
    size = lib.lt_window_record_size(cells, digest_size) if 0 < cells <= MAX_CELLS else 0
    if not size:
        raise ValueError(f"no window record has {cells} cells of {digest_size}-byte digests")
    return int(size)


@dataclass(frozen=True)
class WindowKeys:
    """The element key (the PRF F of the multiset hash and the table) and the pad key of one
    ledger, link and window length. Held by the device and the verifier, never by the prover."""

    element: bytes
    pad: bytes

    @classmethod
    def derive(
        cls, master: bytes, algorithm: str, ledger_id: str, link: str, window_ns: int
    ) -> WindowKeys:
        """HKDF-SHA256(ikm = the digest master key, salt = empty, info = "ledgertool window v1" 0x00
        algorithm 0x00 ledger_id 0x00 link 0x00 decimal window_ns, 32 bytes): element key the first
        16 bytes, pad key the last 16 (docs/ledger-format.md, "Window keys")."""
        info = b"\x00".join(
            [
                _KDF_LABEL,
                algorithm.encode(),
                ledger_id.encode(),
                link.encode(),
                str(int(window_ns)).encode(),
            ]
        )
        okm = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(bytes(master))
        return cls(okm[:16], okm[16:])

    def __repr__(self) -> str:  # keys stay out of logs and tracebacks
        return "WindowKeys(...)"


@dataclass(frozen=True)
class WindowRecord:
    """One window record as stored: the clear fields, and `masked` (the hash and the cells with
    their pad applied, bytes 64.. of the record)."""

    digest_size: int
    cells: int
    window_ns: int
    index: int
    frames: int
    wire_bytes: int
    drops: int
    late: int
    masked: bytes

    @property
    def start_ns(self) -> int:
        """The window's first nanosecond (since the epoch): index * window_ns."""
        return self.index * self.window_ns

    @property
    def size(self) -> int:
        return CLEAR + len(self.masked)

    @classmethod
    def parse(cls, data: bytes, where: str = "window record", offset: int = 0) -> WindowRecord:
        """The record in `data` (exactly one); DataError naming `where` and the byte offset
        (`offset` + the field's) of the first field that is not a window record's."""
        data = bytes(data)
        if len(data) < WINDOW_HEADER:
            raise DataError(
                f"{where}: {len(data)} bytes at byte {offset}, shorter than a window header"
            )
        magic, version, k, dsize, cells, reserved, wns, index, frames, wire, drops, late = (
            _HEAD.unpack_from(data)
        )
        for ok, at, what in (
            (magic == WINDOW_MAGIC, 0, f"magic {magic!r} is not {WINDOW_MAGIC!r}"),
            (version == WINDOW_VERSION, 4, f"version {version} is not {WINDOW_VERSION}"),
            (k == WINDOW_K, 5, f"k = {k} is not {WINDOW_K}"),
            (dsize in (16, 32), 6, f"digest size {dsize} is not 16 or 32"),
            (0 < cells <= MAX_CELLS and cells % WINDOW_K == 0, 8, f"{cells} cells"),
            (reserved == 0, 12, "reserved bytes are not zero"),
            (0 < wns < 2**63, 16, f"window length {wns} ns"),
        ):
            if not ok:
                raise DataError(f"{where}: byte {offset + at}: {what}")
        if len(data) != record_size(cells, dsize):
            raise DataError(
                f"{where}: byte {offset}: {len(data)} bytes, but {cells} cells of {dsize}-byte "
                f"digests make {record_size(cells, dsize)}"
            )
        return cls(dsize, cells, wns, index, frames, wire, drops, late, data[CLEAR:])

    def serialize(self) -> bytes:
        return (
            _HEAD.pack(
                WINDOW_MAGIC,
                WINDOW_VERSION,
                WINDOW_K,
                self.digest_size,
                self.cells,
                0,
                self.window_ns,
                self.index,
                self.frames,
                self.wire_bytes,
                self.drops,
                self.late,
            )
            + self.masked
        )

    def unmask(self, keys: WindowKeys) -> bytes:
        """The whole record with its pad removed (the hash and cells in the clear): only the
        verifier holds the pad key. The same bytes serialize() would give unmasked."""
        buf = bytearray(self.serialize())
        check(lib.lt_window_unmask(keys.pad, ffi.from_buffer(buf), len(buf)), "lt_window_unmask")
        return bytes(buf)

    def hash_value(self, keys: WindowKeys) -> int:
        """The unmasked keyed multiset hash: sum of F(digest) mod 2^127 - 1 over the frames."""
        return int.from_bytes(self.unmask(keys)[CLEAR : CLEAR + 16], "little")

    @classmethod
    def split(cls, data: bytes, where: str = "window records") -> list[WindowRecord]:
        """Back-to-back records (each its own size, from its header)."""
        out, at = [], 0
        while at < len(data):
            if len(data) - at < WINDOW_HEADER:
                raise DataError(
                    f"{where}: byte {at}: {len(data) - at} bytes left, shorter than a window header"
                )
            cells, dsize = (
                struct.unpack_from("<I", data, at + 8)[0],
                struct.unpack_from("<H", data, at + 6)[0],
            )
            size = lib.lt_window_record_size(cells, dsize) if 0 < cells <= MAX_CELLS else 0
            out.append(cls.parse(data[at : at + size] if size else data[at:], where, at))
            at += size
        return out


class WindowAccumulator:
    """The native accumulator of one link: add the engine's record batches (record_dtype arrays,
    in capture order), get back the records of the windows that closed, `finish` for the last."""

    def __init__(
        self,
        keys: WindowKeys,
        digest_size: int,
        *,
        window_ns: int = DEFAULT_WINDOW_NS,
        cells: int | None = None,
        portable: bool = False,
        path: str = "best",
    ):
        """`path` one of window_paths() (ValueError for one this CPU cannot run), "best" the
        fastest; `portable` True is path "portable"."""
        self.cells = cells_for_capacity(DEFAULT_CAPACITY) if cells is None else cells
        self.digest_size = digest_size
        self.window_ns = window_ns
        self.size = record_size(self.cells, digest_size)
        if not 0 < window_ns < 2**63:
            raise ValueError(f"a window is 1 ns .. 2^63 - 1 ns long, not {window_ns}")
        if portable:
            path = "portable"
        if path not in WINDOW_PATHS or not lib.lt_window_path_supported(WINDOW_PATHS[path]):
            raise ValueError(f"window path {path!r}: this CPU runs {', '.join(window_paths())}")
        out = ffi.new("lt_window_acc **")
        check(
            lib.lt_window_new(
                keys.element, keys.pad, window_ns, self.cells, digest_size, WINDOW_PATHS[path], out
            ),
            "lt_window_new",
        )
        self._acc = ffi.gc(out[0], lib.lt_window_free)
        self.path = ffi.string(lib.lt_window_path_name(self._acc)).decode()
        self._out = bytearray(self.size * 64)
        self._n = ffi.new("size_t *")
        self._used = ffi.new("size_t *")
        self._closed: list[WindowRecord] = []  # by fill_from, for take_closed

    def add(self, records: np.ndarray) -> list[WindowRecord]:
        """Add a batch; the records of the windows it closed, oldest first."""
        import numpy as np

        records = np.ascontiguousarray(records)
        if records.dtype.fields["digest"][0].itemsize != self.digest_size:
            raise ValueError(
                f"records of {records.dtype.fields['digest'][0].itemsize}-byte digests "
                f"for a window of {self.digest_size}-byte ones"
            )
        return self._add(ffi.from_buffer(records), len(records), records.dtype.itemsize)

    def _add(self, view: ffi.CData, count: int, stride: int, at: int = 0) -> list[WindowRecord]:
        """Records [at, count) of the `stride`-byte records at `view` (lt_window_add)."""
        done: list[WindowRecord] = []
        while at < count:
            check(
                lib.lt_window_add(
                    self._acc,
                    view + at * stride,
                    count - at,
                    stride,
                    ffi.from_buffer(self._out),
                    len(self._out),
                    self._n,
                    self._used,
                ),
                "lt_window_add",
            )
            done += self._records(self._n[0])
            at += self._used[0]
        return done

    def fill_from(
        self,
        engine: ffi.CData,
        first_seq: int,
        dst: ffi.CData,
        want: int,
        n: ffi.CData,
        nbytes: ffi.CData,
        record_size: int,
        scratch: bool = False,
    ) -> int:
        """lt_engine_fill of the native `engine` (DigestEngine.fill with `window`), the records
        also added here, each digest pass's while it is in cache (lt_engine_fill_window); its
        status. The windows they closed are kept for `take_closed`. `scratch`: the records are
        wanted only here, and only the first pass's stay in `dst` (lt_engine_fill_window)."""
        if record_size != RECORD_FIXED + self.digest_size:
            raise ValueError(
                f"records of {record_size - RECORD_FIXED}-byte digests "
                f"for a window of {self.digest_size}-byte ones"
            )
        st = lib.lt_engine_fill_window(
            engine,
            first_seq,
            dst,
            want,
            n,
            nbytes,
            self._acc,
            ffi.from_buffer(self._out),
            len(self._out),
            self._n,
            self._used,
            scratch,
        )
        if n[0]:
            self._closed += self._records(self._n[0])
            # the accumulator's output filled up: the rest as lt_window_add's caller would
            self._closed += self._add(dst, n[0], record_size, self._used[0])
        return st

    def take_closed(self) -> list[WindowRecord]:
        """The windows closed by the records `fill_from` added since the last call, oldest first."""
        closed, self._closed = self._closed, []
        return closed

    def finish(self) -> list[WindowRecord]:
        """The open window's record (none when nothing was added since the last)."""
        check(
            lib.lt_window_finish(self._acc, ffi.from_buffer(self._out), len(self._out), self._n),
            "lt_window_finish",
        )
        return self._records(self._n[0])

    def _records(self, n: int) -> list[WindowRecord]:
        return [
            WindowRecord.parse(self._out[i * self.size : (i + 1) * self.size]) for i in range(n)
        ]
