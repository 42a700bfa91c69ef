"""The batch digest engine and the other native digest entry points (one message, Merkle
hashes, CPU paths, published-vector entry points).

Everything per frame happens in C (native/src); Python opens a run over a source's reader, pulls
batches of fixed-size records (digest/record.py; docs/ledger-format.md, "Records") and hands them
to segments. Native status codes become exceptions in ledgertool/_binding.py.
"""

from __future__ import annotations

import hashlib
import os
import sys
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from .._binding import c_string, check, engine_error, ffi, lib
from ..algorithms import Algorithm
from ..errors import Setting, UsageError
from .record import RECORD_FIXED, record_dtype, record_size
from .strip import StripFallbacks

if TYPE_CHECKING:  # imported where used (start-up: docs/benchmarks.md)
    import numpy as np

    from .window import WindowAccumulator

# Largest Merkle leaf (records): a proof carries one whole leaf block, 4 MiB at 64-byte records.
MERKLE_MAX_LEAF_RECORDS = lib.LT_MERKLE_MAX_LEAF_RECORDS


class FrameReader(Protocol):
    """What the engine needs of a source (ledgertool.source: a file, the workload generator, a live
    interface): its native lt_reader and how its read errors are raised."""

    path: str

    @property
    def handle(self): ...

    def raise_error(self, status: int) -> None: ...


class DigestEngine:
    """Reader -> strip -> keyed digest -> fixed-size records, in batches (native).

    `subkey` is the HKDF subkey for `algorithm` (keys.DigestKey.subkey). Records are numbered
    by the caller-supplied first sequence number of each batch.
    """

    def __init__(
        self,
        reader: FrameReader,
        algorithm: Algorithm,
        strip_id: int,
        subkey: bytes,
        batch_records: int = 65536,
        *,
        workers: int = 1,
        batch: int = 0,
        buffer: bool = True,
    ):
        """`workers`: threads that digest each pass (records never depend on it); `batch`: frames
        per reader call and digest pass (0: the native default, larger with several workers);
        `buffer` False: the engine's own record buffer (`fill` without `out`) is allocated at the
        first such call, not here (a caller that always gives `out` never pays for it)."""
        self.reader = reader
        self.algorithm = algorithm
        self.record_size = record_size(algorithm)
        cfg = ffi.new("lt_engine_config *")
        cfg.algorithm = algorithm.native_id
        cfg.strip = strip_id
        key = ffi.new("uint8_t[]", subkey)  # the engine keeps its own (expanded) copy
        cfg.key = key
        cfg.key_len = len(subkey)
        if not 1 <= workers <= lib.LT_ENGINE_MAX_WORKERS:
            raise UsageError(
                Setting("workers"), f" must be 1..{lib.LT_ENGINE_MAX_WORKERS}, got {workers}"
            )
        if not 0 <= batch <= lib.LT_ENGINE_BATCH_MAX:
            raise UsageError(
                f"engine batch must be 0..{lib.LT_ENGINE_BATCH_MAX} frames, got {batch}"
            )
        cfg.workers = workers
        cfg.batch = batch
        self.workers = workers
        err = ffi.new("char[512]")
        out = ffi.new("lt_engine **")
        st = lib.lt_engine_new(reader.handle, cfg, out, err, 512)
        ffi.memmove(key, bytes(len(subkey)), len(subkey))
        if st != lib.LT_OK:
            raise engine_error(st, c_string(err))
        self._e = ffi.gc(out[0], lib.lt_engine_free)
        self._cap = batch_records
        self.batch_bytes = batch_records * self.record_size  # of one full batch (`fill`'s `out`)
        # the records of a `fill` given no `out`
        self._buf = ffi.new("uint8_t[]", self.batch_bytes) if buffer else None
        self._n = ffi.new("size_t *")
        self._bytes = ffi.new("uint64_t *")
        self.ended = (
            False  # the source reported its end (a live source may return 0 records before)
        )

    @cached_property
    def dtype(self) -> np.dtype:
        """The numpy view of one record (record_dtype), built when first asked for: a capture from
        a file never asks, and loads no numpy."""
        return record_dtype(self.algorithm.digest_size)

    def fill(
        self,
        first_seq: int,
        max_records: int | None = None,
        out: np.ndarray | ffi.CData | None = None,
        idle: bool = False,
        window: WindowAccumulator | None = None,
        window_only: bool = False,
    ) -> tuple[memoryview, int, int]:
        """Digest up to `max_records` more frames (default: one batch).

        Returns (records, count, captured_bytes): `records` is a view of count*record_size bytes
        valid until the next call. count == 0 means end of capture for a file; a live source also
        returns 0 when nothing arrived within its poll interval (`ended` tells them apart), and so
        does a quiet stream (a pipe) when `idle` is true - otherwise it is waited on here.
        `out`: the records are written at its start instead of into the engine's buffer, and
        `records` is a view of it - no copy for a caller that keeps them. Either a writable,
        contiguous numpy array of `self.dtype` (at most len(out) records) or a cffi uint8_t[] the
        caller owns, e.g. a writer's batch buffer (at most len(out) // record_size records).
        `window`: every record returned is also added to that accumulator, each digest pass's
        right after it was digested, while it is in cache (lt_engine_fill_window; the windows
        they closed: window.take_closed()). `window_only`: the records are wanted only by
        `window` (a capture of the window tier alone): with one digest thread most are digested
        into an area of the buffer that stays in cache, and `records` holds only the first one.
        Raises CaptureFormatError on a corrupt structure (every frame before it was returned by
        earlier calls); ValueError on an `out` array of another dtype or layout.
        """
        want = self._cap if max_records is None else min(self._cap, max_records)
        if self._buf is None and out is None:
            self._buf = ffi.new("uint8_t[]", self.batch_bytes)
        dst = self._buf
        np = sys.modules.get("numpy")  # an array `out` means numpy is loaded (a file capture: not)
        if np is not None and isinstance(out, np.ndarray):
            if out.dtype != self.dtype or not out.flags.c_contiguous or not out.flags.writeable:
                raise ValueError(
                    "out must be a writable contiguous array of the engine's record dtype"
                )
            want = min(want, len(out))
            dst = ffi.from_buffer(out) if len(out) else ffi.NULL
        elif out is not None:
            want = min(want, len(out) // self.record_size)
            dst = out
        wait = not idle and getattr(self.reader, "stream", False)
        while True:  # (a signal handler runs between two waits)
            if window is None:
                st = lib.lt_engine_fill(self._e, first_seq, dst, want, self._n, self._bytes)
            else:
                st = window.fill_from(
                    self._e,
                    first_seq,
                    dst,
                    want,
                    self._n,
                    self._bytes,
                    self.record_size,
                    window_only,
                )
            n = self._n[0]
            if n or st != lib.LT_OK or not wait:
                break
        self.ended = st != lib.LT_OK
        if st not in (lib.LT_OK, lib.LT_EOF):
            self.reader.raise_error(st)
        if st == lib.LT_EOF:
            end_error = getattr(self.reader, "end_error", None)  # file readers: a stream cut short
            if end_error is not None and end_error() is not None:
                raise end_error()
        kept = min(n, 1) if window is not None and window_only else n
        return (
            memoryview(ffi.buffer(dst, kept * self.record_size)) if n else memoryview(b""),
            n,
            self._bytes[0],
        )

    def fill_select(self, first_seq: int, keep, out) -> tuple[int, int, int]:
        """Read the next len(keep) frames (fewer at the end of the capture), numbered from
        `first_seq`, and digest only those whose `keep` byte is not 0 (a contiguous uint8 array)
        into `out` (a writable contiguous array of `self.dtype`, room for every frame kept:
        lt_engine_fill_select). Returns (records written, frames read, their captured bytes);
        (0, 0, 0) at the end.
        Raises CaptureFormatError as `fill`."""
        frames = ffi.new("size_t *")
        st = lib.lt_engine_fill_select(
            self._e,
            first_seq,
            ffi.from_buffer(keep),
            len(keep),
            ffi.from_buffer(out),
            len(out),
            self._n,
            frames,
            self._bytes,
        )
        self.ended = st != lib.LT_OK
        if st not in (lib.LT_OK, lib.LT_EOF):
            self.reader.raise_error(st)
        if st == lib.LT_EOF:
            end_error = getattr(self.reader, "end_error", None)
            if end_error is not None and end_error() is not None:
                raise end_error()
        return self._n[0], frames[0], self._bytes[0]

    def at_end(self) -> bool:
        """Whether every frame of the source was handed out (the source ended after them). Reads
        the next frame, if there is one, without digesting it: only for a caller that stops
        reading here. A quiet stream, or a source whose next read fails, is not at its end."""
        if self.ended:
            return True
        keep = ffi.new("uint8_t[1]")  # 0: read, not digested
        out = ffi.new("uint8_t[]", self.record_size)
        frames = ffi.new("size_t *")
        st = lib.lt_engine_fill_select(self._e, 0, keep, 1, out, 1, self._n, frames, self._bytes)
        if frames[0] or st != lib.LT_EOF:
            return False
        end_error = getattr(self.reader, "end_error", None)  # a stream cut short did not end
        if end_error is not None and end_error() is not None:
            return False
        self.ended = True
        return True

    def strip_fallbacks(self) -> StripFallbacks:
        """Frames of every record filled so far whose strip mode fell back, per reason."""
        st = ffi.new("lt_engine_stats *")
        check(lib.lt_engine_get_stats(self._e, st), "lt_engine_get_stats")
        return StripFallbacks(st.strip_unsupported_linktype, st.strip_non_ip, st.strip_malformed)


def digest_one(algorithm: Algorithm, key: bytes, message: bytes) -> bytes:
    """Native digest of one message (known-answer and reference tests)."""
    out = ffi.new("uint8_t[]", max(algorithm.digest_size, 8))
    check(
        lib.lt_digest(algorithm.native_id, key, message, len(message), out),
        f"native digest failed for {algorithm.name}",
    )
    return bytes(ffi.buffer(out, algorithm.digest_size))


def digest_many(algorithm: Algorithm, key: bytes, messages: list[bytes]) -> list[bytes]:
    """Native digests of many messages through the engine's batch entry (lt_digest_many: the
    multi-buffer code of the selected CPU path where it has one); equal to digest_one on each."""
    n = len(messages)
    size = algorithm.digest_size
    keep = [ffi.from_buffer(m) if m else ffi.new("uint8_t[1]") for m in messages]
    ptrs = ffi.new("const uint8_t *[]", keep) if n else ffi.NULL
    lens = ffi.new("uint32_t[]", [len(m) for m in messages]) if n else ffi.NULL
    out = ffi.new("uint8_t[]", max(n, 1) * size)
    check(
        lib.lt_digest_many(algorithm.native_id, key, ptrs, lens, n, out, size),
        f"native digest_many failed for {algorithm.name}",
    )
    raw = bytes(ffi.buffer(out, n * size))
    return [raw[i * size : (i + 1) * size] for i in range(n)]


#: a ledger's leaf constructions (ledger.json `leaf_hash`; docs/adr/0013-blake3-leaf-entries.md):
#: "sha256" leaf = SHA-256(0x00 || block), "blake3" leaf = SHA-256(0x00 || BLAKE3-256(block))
LEAF_HASHES = ("sha256", "blake3")


def leaf_spec(leaf_records: int, leaf_hash: str) -> int:
    """The native leaf_records argument: the leaf size with the construction's flag."""
    if leaf_hash not in LEAF_HASHES:
        raise ValueError(f"leaf hash {leaf_hash!r} is not one of {', '.join(LEAF_HASHES)}")
    return leaf_records | (lib.LT_LEAF_BLAKE3 if leaf_hash == "blake3" else 0)


def merkle_leaves(records, record_size: int, leaf_records: int, leaf_hash: str = "sha256") -> bytes:
    """RFC 9162 leaf hashes (32 bytes each, concatenated) of each block of `leaf_records` records,
    in C (SHA-NI where the CPU has it; `leaf_hash` "blake3": over each block's BLAKE3-256 entry,
    the entries in SIMD lanes); the GIL is released while hashing.

    ValueError unless record_size is 48 or 64 and leaf_records is a power of two in
    1..MERKLE_MAX_LEAF_RECORDS (the same bounds ledger.json and seals are held to), or
    leaf_records is 1 and record_size a window record's (one window per leaf)."""
    window = leaf_records == 1 and record_size >= lib.LT_WINDOW_HEADER
    if not window and (
        record_size not in (RECORD_FIXED + 16, RECORD_FIXED + 32)
        or not valid_leaf_records(leaf_records)
    ):
        raise ValueError(
            f"record size {record_size!r} / leaf records {leaf_records!r} out of bounds"
        )
    buf = ffi.from_buffer(records)
    count = len(buf) // record_size
    leaves = -(-count // leaf_records)
    out = ffi.new("uint8_t[]", max(leaves, 1) * 32)
    spec = leaf_spec(leaf_records, leaf_hash)
    check(lib.lt_merkle_leaves(buf, record_size, count, spec, out, len(out)), "lt_merkle_leaves")
    return bytes(ffi.buffer(out, leaves * 32))


def valid_leaf_records(n: object) -> bool:
    """A Merkle leaf size the ledger accepts: an int (not a bool), a power of two, 1..2^16."""
    return type(n) is int and 1 <= n <= MERKLE_MAX_LEAF_RECORDS and not n & (n - 1)


def merkle_root(leaf_hashes: bytes) -> bytes:
    """RFC 9162 Merkle tree hash (32 bytes) over concatenated 32-byte leaf hashes, in C (SHA-NI
    where the CPU has it; the GIL is released); the empty tree's hash for no leaves. ValueError
    when the length is not a multiple of 32. Equals `merkle.root_from_leaf_hashes`
    (tests/test_merkle.py)."""
    if len(leaf_hashes) % 32:
        raise ValueError(f"leaf hashes are {len(leaf_hashes)} bytes, not a multiple of 32")
    if not leaf_hashes:
        return hashlib.sha256(b"").digest()
    out = ffi.new("uint8_t[32]")
    check(
        lib.lt_merkle_root(ffi.from_buffer(leaf_hashes), len(leaf_hashes) // 32, out),
        "lt_merkle_root",
    )
    return bytes(ffi.buffer(out, 32))


def usable_cores() -> int:
    """Logical CPUs this process may run on (its affinity mask), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# ---- CPU paths (native dispatch, docs/algorithms.md "CPU paths") ----


def cpu_path(algorithm: Algorithm) -> str:
    """Name of the CPU path the native code uses now for `algorithm` (e.g. "aesni-pclmul")."""
    return c_string(lib.lt_cpu_path(algorithm.native_id))


def cpu_paths(algorithm: Algorithm) -> list[str]:
    """CPU paths this machine can run for `algorithm`, best first (always ends with "portable")."""
    buf = ffi.new("char[256]")
    check(lib.lt_cpu_paths(algorithm.native_id, buf, 256), f"no CPU paths for {algorithm.name}")
    return c_string(buf).split(",")


def force_cpu_path(algorithm: Algorithm, path: str | None) -> None:
    """Use `path` for `algorithm` from now on in this process (None: back to the CPUID choice).

    Engines already created keep their path. For tests and benchmarks; LEDGERTOOL_CPU_PATH does
    the same from the environment. Raises ValueError for a path this CPU cannot run."""
    check(
        lib.lt_cpu_path_force(algorithm.native_id, path.encode() if path else ffi.NULL),
        f"{algorithm.name}: no CPU path {path!r} on this machine (available: "
        f"{', '.join(cpu_paths(algorithm))})",
    )


def merkle_lanes() -> int:
    """How many SHA-256 Merkle leaves are hashed side by side here: 16 (AVX-512 lanes), 4 (SHA-NI
    streams) or 1 (docs/algorithms.md, "CPU paths"); every count gives the same leaves."""
    return int(lib.lt_merkle_lanes())


def cpu_path_note() -> str:
    """Why LEDGERTOOL_CPU_PATH was not (fully) honoured, or ""."""
    return c_string(lib.lt_cpu_path_note())


def gmac_tag(key: bytes, iv: bytes, aad: bytes) -> bytes:
    """AES-128-GCM tag of an empty plaintext with `aad` under a 96-bit `iv` (native, current path;
    for published vectors: the ledger itself always uses the all-zero IV)."""
    if len(key) != 16 or len(iv) != 12:
        raise ValueError("GMAC needs a 16-byte key and a 12-byte IV")
    out = ffi.new("uint8_t[16]")
    check(lib.lt_gmac_aes128(key, iv, aad, len(aad), out), "lt_gmac_aes128")
    return bytes(out)


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """Full 32-byte HMAC-SHA-256 with a key of any length (native, current path; for vectors)."""
    out = ffi.new("uint8_t[32]")
    check(lib.lt_hmac_sha256(key, len(key), message, len(message), out), "lt_hmac_sha256")
    return bytes(out)
