"""recompute's fast verdict: a keyed multiset hash of each side's digests (docs/adr/0011).

When a capture agrees with its ledger, every frame is matched and the report needs only counts:
frames per link and per second, from the ledger side. Neither side then has to be kept, sorted
or paired; it is enough to know that the two multisets of digests are equal. MultisetHash gives
each side a 127-bit value, MSet-Add-Hash (Clarke, Devadas, van Dijk, Gassend and Suh,
"Incremental Multiset Hash Functions and Their Application to Memory Integrity Checking",
ASIACRYPT 2003, s3.2): the sum modulo p = 2^127 - 1 of F(digest) over the records, F being
AES-128 under a key drawn at random for one comparison (native lt_mset_add). Equal counts and
equal values mean equal multisets, except with probability below 2^-126 per comparison for
16-byte digests whatever the inputs were, as long as whoever chose them never learns the key
(the ADR has the argument and the bound for 32-byte digests). A side that does not agree sends
recompute to the exact pairing, which then reports what differs.

The hash is a sum, so parts (segments, engine batches, a cluster's tasks) are hashed on their own
and added (`merge`), in any order.

With `part_bits` the records are also split into 2^part_bits parts by a keyed hash of their digest
(`part_ids`), each part with its own sum and count under the same key: when the two sides differ,
the parts that agree hold equal multisets and only the others need pairing (recompute's
partitioned pairing; the ADR's "Parts" has the bound over many parts). Every occurrence of a
digest is in the same part on both sides, so pairing the differing parts alone pairs every digest
exactly as pairing everything would.
"""

from __future__ import annotations

import secrets

import numpy as np

from .._binding import check, ffi, lib
from ..digest.record import FLAG_GAP, RecordSink
from .multiset import second_counts

__all__ = [
    "MSET_P",
    "HashingSink",
    "MultisetHash",
    "accelerated",
    "new_key",
    "new_part_key",
    "parts_where",
]

MSET_P = (1 << 127) - 1  # the modulus of the sum


def accelerated() -> bool:
    """Whether the hash runs on the CPU's AES instructions (AES-NI): a few ns a record. Without
    them the portable constant-time AES costs microseconds a record, more than pairing the sides,
    so recompute does not take the fast verdict then."""
    return bool(lib.lt_mset_accelerated())


def new_key() -> bytes:
    """A fresh 16-byte AES-128 key for one comparison (the operating system's CSPRNG). It must
    never be shown to whoever prepared the two sides."""
    return secrets.token_bytes(16)


def new_part_key() -> tuple[int, int]:
    """A fresh key for the parts' hash (two 64-bit words, the operating system's CSPRNG)."""
    return secrets.randbits(64), secrets.randbits(64)


def part_ids(records: np.ndarray, part_key: tuple[int, int], part_bits: int) -> np.ndarray:
    """The part of each record (record_dtype), as lt_mset_add_parts computes it: the top
    `part_bits` bits of (first 8 digest bytes, little endian, ^ k0) * (k1 | 1) mod 2^64."""
    if part_bits == 0:
        return np.zeros(len(records), np.uint64)
    records = np.ascontiguousarray(records)
    # the first 8 digest bytes of each record, read in place (a strided view: nothing copied)
    first = (
        np.ndarray(
            (len(records),),
            "<u8",
            buffer=records,
            offset=records.dtype.fields["digest"][1],
            strides=(records.dtype.itemsize,),
        )
        if len(records)
        else np.zeros(0, "<u8")
    )
    out = np.bitwise_xor(first, np.uint64(part_key[0]))
    np.multiply(out, np.uint64(part_key[1] | 1), out=out)
    return np.right_shift(out, np.uint64(64 - part_bits), out=out)


def parts_where(ids: np.ndarray, wanted: np.ndarray, bits: int = 16) -> np.ndarray:
    """The indexes (ascending, uint64) of `ids` (parts at 16 bits, a contiguous uint16 array:
    MultisetHash.add's) whose part at `bits` (ids >> (16 - bits)) `wanted` (a bool or uint8 array
    indexed by part) marks; natively (lt_mset_parts_where), without the index conversion numpy's
    fancy indexing makes."""
    wanted = np.ascontiguousarray(wanted).view(np.uint8)
    n = len(ids)
    if not n:
        return np.zeros(0, np.uint64)
    ids = np.ascontiguousarray(ids, np.uint16)
    found = ffi.new("size_t *")
    # room for twice the expected share, then once more for all when that was short
    cap = min(n, 2 * (n * int(np.count_nonzero(wanted)) // max(len(wanted), 1)) + 1024)
    while True:
        out = np.empty(cap, np.uint64)
        check(
            lib.lt_mset_parts_where(
                ffi.from_buffer("uint16_t[]", ids),
                n,
                16 - bits,
                ffi.from_buffer("uint8_t[]", wanted),
                len(wanted),
                ffi.from_buffer("uint64_t[]", out),
                cap,
                found,
            ),
            "lt_mset_parts_where",
        )
        if found[0] <= cap:
            return out[: found[0]]
        cap = found[0]


class MultisetHash:
    """The multiset hash of the digests of records added so far (record_dtype arrays of one
    digest size, a multiple of 16 bytes), with their number. GAP records are left out by default
    (`skip_flags`: the record flags whose records are not frames). `portable` uses the table-free
    AES even where the CPU has AES-NI (the two give the same value; tests compare them).
    `part_bits` > 0 keeps 2^part_bits sums and counts, one per part (`part_ids` under
    `part_key`); `value` and `count` are then those of the whole."""

    def __init__(
        self,
        key: bytes,
        digest_size: int,
        *,
        skip_flags: int = FLAG_GAP,
        portable: bool = False,
        part_bits: int = 0,
        part_key: tuple[int, int] = (0, 0),
    ):
        if len(key) != 16:
            raise ValueError(f"a multiset hash key is 16 bytes, not {len(key)}")
        if digest_size <= 0 or digest_size % 16:
            raise ValueError(f"digest size {digest_size} is not a multiple of 16 bytes")
        if not 0 <= part_bits <= lib.LT_MSET_MAX_PART_BITS:
            raise ValueError(f"{part_bits} part bits: at most {lib.LT_MSET_MAX_PART_BITS}")
        self.key = bytes(key)  # (never printed: a verdict is only as good as this key's secrecy)
        self._key = ffi.new("uint8_t[16]", key)
        self.part_bits = part_bits
        self.part_key = (int(part_key[0]), int(part_key[1]))
        self._pkey = ffi.new("uint64_t[2]", self.part_key)
        # per part: the sum mod p, low word first
        self.sums = np.zeros((1 << part_bits, 2), np.uint64)
        self.counts = np.zeros(1 << part_bits, np.uint64)
        self._acc = ffi.from_buffer("uint64_t[]", self.sums)
        self._count = ffi.from_buffer("uint64_t[]", self.counts)
        self.digest_size = digest_size
        self.skip_flags = skip_flags
        self.portable = portable

    @property
    def value(self) -> int:
        """The sum modulo MSET_P (0 for no records), over every part."""
        if not self.part_bits:
            return int(self._acc[0]) | (int(self._acc[1]) << 64)
        return sum(int(lo) | (int(hi) << 64) for lo, hi in self.sums.tolist()) % MSET_P

    @property
    def count(self) -> int:
        """The records added (those not skipped)."""
        return int(self.counts.sum()) if self.part_bits else int(self._count[0])

    def differing_parts(self, other: MultisetHash) -> np.ndarray:
        """The parts (ascending) whose sum or count differ from `other`'s (the same key and
        parts)."""
        if (other.key, other.part_bits, other.part_key) != (
            self.key,
            self.part_bits,
            self.part_key,
        ):
            raise ValueError("multiset hashes under other keys or parts cannot be compared")
        return np.flatnonzero((self.sums != other.sums).any(axis=1) | (self.counts != other.counts))

    def add(self, records: np.ndarray, ids: np.ndarray | None = None) -> int:
        """Add `records` (a contiguous record_dtype array, or any C-contiguous 1-D record array with
        a `digest` field); returns how many were counted (the others carry a skipped flag).
        `ids` (a writable uint16 array of len(records), part_bits 1..16) gets each record's part
        at 16 bits (`part_ids(records, part_key, 16)`; its part is ids >> (16 - part_bits)),
        skipped records' included."""
        if not len(records):
            return 0
        records = np.ascontiguousarray(records)
        args = (
            self._key,
            self._pkey,
            self.part_bits,
            ffi.from_buffer(records),
            len(records),
            records.dtype.itemsize,
            records.dtype.fields["digest"][1],
            self.digest_size,
            self.skip_flags,
            int(self.portable),
            self._acc,
            self._count,
        )
        if not self.part_bits:
            before = self.count
            check(lib.lt_mset_add_parts(*args), "lt_mset_add_parts")
            return self.count - before
        out = ffi.NULL
        if ids is not None:
            if ids.dtype != np.uint16 or len(ids) != len(records) or not ids.flags.c_contiguous:
                raise ValueError("ids must be a contiguous uint16 array, one entry a record")
            out = ffi.from_buffer("uint16_t[]", ids, require_writable=True)
        added = ffi.new("uint64_t *")  # (summing 2^part_bits counts would cost more)
        check(lib.lt_mset_add_parts_ids(*args, out, added), "lt_mset_add_parts_ids")
        return int(added[0])

    def merge(self, value: int, count: int) -> None:
        """Add the value and count of another part hashed under the same key (one part only)."""
        if self.part_bits:
            raise ValueError("merge adds a whole value: not to a hash kept in parts")
        total = (self.value + value) % MSET_P
        self._acc[0], self._acc[1] = total & (2**64 - 1), total >> 64
        self._count[0] = self.count + count

    def native_args(self) -> tuple:
        """(key, part key, part bits, acc, count) as the native calls that add to this hash take
        them (lt_rec_file_mset)."""
        return self._key, self._pkey, self.part_bits, self._acc, self._count

    def state(self) -> tuple[int, int]:
        """(value, count), for merging elsewhere."""
        return self.value, self.count

    def __repr__(self) -> str:  # the key stays out of logs and tracebacks
        return (
            f"MultisetHash(count={self.count}, value={self.value:#x}, parts={1 << self.part_bits})"
        )


class HashingSink(RecordSink):
    """A RecordSink nothing is taken from (every segment's records are copied to the same place)
    whose raw record files are, as verify copies and hashes them, also added to `mset` and counted
    per second into `seconds` by the same native walk, from the copy while it is in cache
    (ledgertool.ledger.recfile.parse_record_file: lt_rec_file_mset). `hashed` is the address and
    size of the last records added that way, so the consumer adds only the others (a v1 or
    compacted segment's, decoded elsewhere) itself."""

    def __init__(self, dtype: np.dtype, mset: MultisetHash):
        if mset.skip_flags != FLAG_GAP:  # the native walk leaves GAP records out, and only them
            raise ValueError("a HashingSink's multiset hash skips GAP records only")
        super().__init__(dtype)
        self.mset = mset
        self.skip_flags = FLAG_GAP
        self.seconds: dict[int, int] = {}
        self.hashed: tuple[int, int] | None = None
        # with keep_marks, the last native walk's (part of each record, Merkle leaves, native
        # leaf spec): what a second reading needs to find a differing part's rows again and
        # authenticate them (ledgertool.reconcile.marks)
        self.keep_marks = False
        self.marks: tuple[np.ndarray, bytes, int] | None = None

    def add_runs(self, secs: np.ndarray, counts: np.ndarray) -> None:
        """Add the native walk's per-second runs (lt_second_runs) to `seconds`."""
        for sec, n in zip(secs.tolist(), counts.tolist()):
            self.seconds[sec] = self.seconds.get(sec, 0) + n

    def count_seconds(self, records: np.ndarray) -> None:
        """Add the frame records' seconds to `seconds` (the walk's runs did not fit)."""
        second_counts(records, self.skip_flags, into=self.seconds)

    def holds(self, records) -> bool:
        """Whether `records` are the ones the last native walk added."""
        mem = memoryview(records).cast("B")
        return (
            self.hashed is not None
            and len(mem) > 0
            and self.hashed
            == (np.frombuffer(mem, np.uint8).__array_interface__["data"][0], len(mem))
        )
