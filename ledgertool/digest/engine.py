"""The cffi face of the native engine: capture-file readers and the batch digest engine.

Everything per frame happens in C (native/src); Python opens a run, pulls batches of fixed-size
records (docs/ledger-format.md, "Records") and hands them to segments. Status codes from C are
turned into exceptions here and nowhere else.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .._native import ffi, lib
from ..algorithms import Algorithm
from ..errors import CaptureFormatError, UsageError

RECORD_FIXED = lib.LT_RECORD_FIXED  # bytes before the digest in every record
# Largest Merkle leaf (records): a proof carries one whole leaf block, 4 MiB at 64-byte records.
MERKLE_MAX_LEAF_RECORDS = lib.LT_MERKLE_MAX_LEAF_RECORDS

# Record flags (u16, docs/ledger-format.md).
FLAG_TRUNCATED = lib.LT_FLAG_TRUNCATED
FLAG_MALFORMED = lib.LT_FLAG_MALFORMED
FLAG_NON_IP = lib.LT_FLAG_NON_IP
FLAG_FRAGMENT = lib.LT_FLAG_FRAGMENT
FLAG_UNSUPPORTED_LINKTYPE = lib.LT_FLAG_UNSUPPORTED_LINKTYPE
FLAG_NO_TIMESTAMP = lib.LT_FLAG_NO_TIMESTAMP
FLAG_CAPLEN_GT_SNAPLEN = lib.LT_FLAG_CAPLEN_GT_SNAPLEN
FLAG_GAP = lib.LT_FLAG_GAP

FORMAT_NAMES = {
    lib.LT_FMT_PCAP_US: "pcap (µs)",
    lib.LT_FMT_PCAP_NS: "pcap (ns)",
    lib.LT_FMT_PCAP_MODIFIED: "pcap (modified)",
    lib.LT_FMT_PCAPNG: "pcapng",
    lib.LT_FMT_WORKLOAD: "workload",
    lib.LT_FMT_LIVE: "live",
}


def record_dtype(digest_size: int) -> np.dtype:
    """numpy view of one on-disk record: 32 fixed bytes + digest, little-endian, packed.

    The digest is raw bytes (void, ``V{digest_size}``), not a numpy string (``S``): ``S`` values
    drop their trailing zero bytes when they become Python bytes, so about one digest in 256 would
    come out a byte short. ``bytes(rec["digest"])`` is always `digest_size` bytes; compare a
    digest column with ``np.void(want)``."""
    return np.dtype(
        [
            ("seq", "<u8"),
            ("ts_ns", "<i8"),
            ("wire_len", "<u4"),
            ("cap_len", "<u4"),
            ("flags", "<u2"),
            ("linktype", "<u2"),
            ("aux", "<u4"),
            ("digest", f"V{digest_size}"),
        ]
    )


@dataclass(frozen=True)
class Frame:
    """One captured frame (copied out of the map; for tests and the reference path)."""

    index: int
    offset: int  # byte offset of its record/block header in the file
    ts_ns: int  # ns since the Unix epoch
    caplen: int  # bytes captured
    wire_len: int  # bytes on the wire
    linktype: int
    interface_id: int
    rflags: int
    data: bytes


@dataclass(frozen=True)
class ReaderInfo:
    """How a capture file was read. `truncated_*` describe a cut last record."""

    path: str
    format: str
    version: str
    snaplen: int
    linktype: int
    file_size: int
    frames: int
    sections: int
    interfaces: int
    skipped_blocks: int
    truncated: bool
    truncated_offset: int
    truncated_bytes: int
    message: str

    def truncation_note(self) -> str | None:
        if not self.truncated:
            return None
        return (f"{self.path}: truncated last record at byte {self.truncated_offset} "
                f"({self.truncated_bytes} bytes present, not recorded); {self.frames} whole frames read")


class CaptureReader:
    """A pcap/pcapng file opened by the native reader (mmap, format by magic number only).

    Raises CaptureFormatError (exit 2) when the file is missing, unreadable, not a capture or
    corrupt at open. Use as a context manager.
    """

    def __init__(self, path: str | os.PathLike):
        self._r = None
        self.path = os.fspath(path)
        if os.path.isdir(self.path):
            raise CaptureFormatError(f"{self.path}: is a directory, not a capture file", self.path)
        err = ffi.new("char[512]")
        out = ffi.new("lt_reader **")
        st = lib.lt_reader_open(self.path.encode(), out, err, 512)
        if st != lib.LT_OK:
            msg = ffi.string(err).decode(errors="replace") or f"{self.path}: cannot open (status {st})"
            raise CaptureFormatError(msg, self.path)
        self._r = out[0]

    @classmethod
    def from_handle(cls, handle, path: str) -> "CaptureReader":
        """Wrap an already open native reader (e.g. the workload generator, ledgertool.source.workload);
        `path` names the source in messages. The reader takes ownership of the handle."""
        self = cls.__new__(cls)
        self._r = handle
        self.path = path
        return self

    def close(self) -> None:
        if getattr(self, "_r", None) is not None:
            lib.lt_reader_close(self._r)
            self._r = None

    def __enter__(self) -> "CaptureReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - safety net
        self.close()

    @property
    def handle(self):
        return self._r

    def info(self) -> ReaderInfo:
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        return ReaderInfo(
            path=self.path,
            format=FORMAT_NAMES.get(i.format, "unknown"),
            version=f"{i.version_major}.{i.version_minor}",
            snaplen=i.snaplen,
            linktype=1 if i.format == lib.LT_FMT_WORKLOAD else i.linktype,  # generated frames are Ethernet
            file_size=i.file_size,
            frames=i.frames,
            sections=i.sections,
            interfaces=i.interfaces,
            skipped_blocks=i.skipped_blocks,
            truncated=bool(i.truncated),
            truncated_offset=i.truncated_offset,
            truncated_bytes=i.truncated_bytes,
            message=ffi.string(i.message).decode(errors="replace"),
        )

    def raise_error(self, status: int) -> None:
        """Turn a reader error status into CaptureFormatError naming file and byte offset."""
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        msg = ffi.string(i.message).decode(errors="replace") or f"read error (status {status})"
        if not msg.startswith(self.path):
            msg = f"{self.path}: {msg}"
        raise CaptureFormatError(msg, self.path, int(i.error_offset))

    def frames(self, batch: int = 256) -> Iterator[Frame]:
        """Yield every frame (copies the bytes). Raises CaptureFormatError at a corrupt structure,
        after yielding every frame before it, and when the file shrinks while it is read."""
        buf = ffi.new("lt_frame[]", batch)
        n = ffi.new("size_t *")
        index = 0
        while True:
            st = lib.lt_reader_next(self._r, buf, batch, n)
            got = n[0]
            # copied in C, under the reader's SIGBUS guard: the map may shrink under us
            data = ffi.new("uint8_t[]", max(1, sum(buf[k].caplen for k in range(got))))
            if got and lib.lt_reader_copy_frames(self._r, buf, got, data, len(data)) != lib.LT_OK:
                self.raise_error(lib.LT_ERR_IO)
            raw, pos = ffi.buffer(data), 0
            for k in range(got):
                f = buf[k]
                yield Frame(index, f.offset, f.ts_ns, f.caplen, f.wire_len, f.linktype, f.interface_id,
                            f.rflags, raw[pos:pos + f.caplen])
                pos += f.caplen
                index += 1
            if st == lib.LT_EOF:
                return
            if st != lib.LT_OK:
                self.raise_error(st)


class DigestEngine:
    """Reader -> strip -> keyed digest -> fixed-size records, in batches (native).

    `subkey` is the HKDF subkey for `algorithm` (keys.DigestKey.subkey). Records are numbered
    by the caller-supplied first sequence number of each batch.
    """

    def __init__(self, reader: CaptureReader, algorithm: Algorithm, strip_id: int, subkey: bytes,
                 batch_records: int = 65536, *, workers: int = 1, batch: int = 0):
        """`workers`: threads that digest each pass (records never depend on it); `batch`: frames
        per reader call and digest pass (0: the native default, larger with several workers)."""
        self.reader = reader
        self.algorithm = algorithm
        self.record_size = RECORD_FIXED + algorithm.digest_size
        self.dtype = record_dtype(algorithm.digest_size)
        cfg = ffi.new("lt_engine_config *")
        cfg.algorithm = algorithm.native_id
        cfg.strip = strip_id
        key = ffi.new("uint8_t[]", subkey)  # the engine keeps its own (expanded) copy
        cfg.key = key
        cfg.key_len = len(subkey)
        if not 1 <= workers <= lib.LT_ENGINE_MAX_WORKERS:
            raise UsageError(f"--workers must be 1..{lib.LT_ENGINE_MAX_WORKERS}, got {workers}")
        if not 0 <= batch <= lib.LT_ENGINE_BATCH_MAX:
            raise UsageError(f"engine batch must be 0..{lib.LT_ENGINE_BATCH_MAX} frames, got {batch}")
        cfg.workers = workers
        cfg.batch = batch
        self.workers = workers
        err = ffi.new("char[512]")
        out = ffi.new("lt_engine **")
        st = lib.lt_engine_new(reader.handle, cfg, out, err, 512)
        ffi.memmove(key, bytes(len(subkey)), len(subkey))
        if st != lib.LT_OK:
            raise CaptureFormatError(ffi.string(err).decode(errors="replace"))
        self._e = ffi.gc(out[0], lib.lt_engine_free)
        self._cap = batch_records
        self._buf = ffi.new("uint8_t[]", batch_records * self.record_size)
        self._n = ffi.new("size_t *")
        self._bytes = ffi.new("uint64_t *")
        self.ended = False  # the source reported its end (a live source may return 0 records before)

    def fill(self, first_seq: int, max_records: int | None = None) -> tuple[memoryview, int, int]:
        """Digest up to `max_records` more frames (default: one batch).

        Returns (records, count, captured_bytes): `records` is a view of count*record_size bytes
        valid until the next call. count == 0 means end of capture for a file; a live source also
        returns 0 when nothing arrived within its poll interval (`ended` tells them apart).
        Raises CaptureFormatError on a corrupt structure (every frame before it was returned by
        earlier calls).
        """
        want = self._cap if max_records is None else min(self._cap, max_records)
        st = lib.lt_engine_fill(self._e, first_seq, self._buf, want, self._n, self._bytes)
        n = self._n[0]
        self.ended = st != lib.LT_OK
        if st not in (lib.LT_OK, lib.LT_EOF):
            self.reader.raise_error(st)
        return memoryview(ffi.buffer(self._buf, n * self.record_size)), n, self._bytes[0]


def digest_one(algorithm: Algorithm, key: bytes, message: bytes) -> bytes:
    """Native digest of one message (known-answer and reference tests)."""
    out = ffi.new("uint8_t[]", max(algorithm.digest_size, 8))
    st = lib.lt_digest(algorithm.native_id, key, message, len(message), out)
    if st != lib.LT_OK:
        raise ValueError(f"native digest failed for {algorithm.name} (status {st})")
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
    st = lib.lt_digest_many(algorithm.native_id, key, ptrs, lens, n, out, size)
    if st != lib.LT_OK:
        raise ValueError(f"native digest_many failed for {algorithm.name} (status {st})")
    raw = bytes(ffi.buffer(out, n * size))
    return [raw[i * size:(i + 1) * size] for i in range(n)]


def digest_capture(path, algorithm: Algorithm, subkey: bytes, workers: int = 1) -> int:
    """Run the whole hot path (reader, strip `frame`, batch digest, records) over a capture file and
    discard the records; returns the frames read. For benchmarks (`ledgertool bench` capture:engine,
    scripts/hotpath_account.py): what capture costs before segments and sealing."""
    frames = 0
    with CaptureReader(path) as r:
        e = DigestEngine(r, algorithm, 0, subkey, workers=workers)
        while True:
            _, n, _ = e.fill(frames)
            if n == 0:
                return frames
            frames += n


def merkle_leaves(records, record_size: int, leaf_records: int) -> bytes:
    """RFC 9162 leaf hashes (32 bytes each, concatenated) of each block of `leaf_records` records,
    in C (SHA-NI where the CPU has it); the GIL is released while hashing.

    ValueError unless record_size is 48 or 64 and leaf_records is a power of two in
    1..MERKLE_MAX_LEAF_RECORDS (the same bounds ledger.json and seals are held to)."""
    if record_size not in (RECORD_FIXED + 16, RECORD_FIXED + 32) or not valid_leaf_records(leaf_records):
        raise ValueError(f"record size {record_size!r} / leaf records {leaf_records!r} out of bounds")
    buf = ffi.from_buffer(records)
    count = len(buf) // record_size
    leaves = -(-count // leaf_records)
    out = ffi.new("uint8_t[]", max(leaves, 1) * 32)
    st = lib.lt_merkle_leaves(buf, record_size, count, leaf_records, out, len(out))
    if st != lib.LT_OK:
        raise ValueError(f"lt_merkle_leaves failed (status {st})")
    return bytes(ffi.buffer(out, leaves * 32))


def valid_leaf_records(n: object) -> bool:
    """A Merkle leaf size the ledger accepts: an int (not a bool), a power of two, 1..2^16."""
    return type(n) is int and 1 <= n <= MERKLE_MAX_LEAF_RECORDS and not n & (n - 1)


def merkle_root(leaf_hashes: bytes) -> bytes:
    """RFC 9162 Merkle tree hash (32 bytes) over concatenated 32-byte leaf hashes, in C (SHA-NI where
    the CPU has it; the GIL is released); the empty tree's hash for no leaves. ValueError when the
    length is not a multiple of 32. Equals `merkle.root_from_leaf_hashes` (tests/test_merkle.py)."""
    if len(leaf_hashes) % 32:
        raise ValueError(f"leaf hashes are {len(leaf_hashes)} bytes, not a multiple of 32")
    if not leaf_hashes:
        return hashlib.sha256(b"").digest()
    out = ffi.new("uint8_t[32]")
    st = lib.lt_merkle_root(ffi.from_buffer(leaf_hashes), len(leaf_hashes) // 32, out)
    if st != lib.LT_OK:
        raise MemoryError("lt_merkle_root: out of memory") if st == lib.LT_ERR_NOMEM else ValueError(
            f"lt_merkle_root failed (status {st})")
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
    return ffi.string(lib.lt_cpu_path(algorithm.native_id)).decode()


def cpu_paths(algorithm: Algorithm) -> list[str]:
    """CPU paths this machine can run for `algorithm`, best first (always ends with "portable")."""
    buf = ffi.new("char[256]")
    if lib.lt_cpu_paths(algorithm.native_id, buf, 256) != lib.LT_OK:
        raise ValueError(f"no CPU paths for {algorithm.name}")
    return ffi.string(buf).decode().split(",")


def force_cpu_path(algorithm: Algorithm, path: str | None) -> None:
    """Use `path` for `algorithm` from now on in this process (None: back to the CPUID choice).

    Engines already created keep their path. For tests and benchmarks; LEDGERTOOL_CPU_PATH does
    the same from the environment. Raises ValueError for a path this CPU cannot run."""
    st = lib.lt_cpu_path_force(algorithm.native_id, path.encode() if path else ffi.NULL)
    if st != lib.LT_OK:
        raise ValueError(f"{algorithm.name}: no CPU path {path!r} on this machine "
                         f"(available: {', '.join(cpu_paths(algorithm))})")


def cpu_path_note() -> str:
    """Why LEDGERTOOL_CPU_PATH was not (fully) honoured, or ""."""
    return ffi.string(lib.lt_cpu_path_note()).decode()


def gmac_tag(key: bytes, iv: bytes, aad: bytes) -> bytes:
    """AES-128-GCM tag of an empty plaintext with `aad` under a 96-bit `iv` (native, current path;
    for published vectors: the ledger itself always uses the all-zero IV)."""
    if len(key) != 16 or len(iv) != 12:
        raise ValueError("GMAC needs a 16-byte key and a 12-byte IV")
    out = ffi.new("uint8_t[16]")
    lib.lt_gmac_aes128(key, iv, aad, len(aad), out)
    return bytes(out)


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """Full 32-byte HMAC-SHA-256 with a key of any length (native, current path; for vectors)."""
    out = ffi.new("uint8_t[32]")
    lib.lt_hmac_sha256(key, len(key), message, len(message), out)
    return bytes(out)
