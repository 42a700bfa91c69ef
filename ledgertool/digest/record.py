"""The fixed-size on-disk record the engine writes per frame, and its flags.

docs/ledger-format.md, "Records": 32 fixed bytes (seq, ts_ns, wire_len, cap_len, flags,
linktype, aux; little-endian, packed) followed by the digest. The sizes and flag bits are the
LT_RECORD_FIXED / LT_FLAG_* constants of native/include/ledgertool.h, read through the binding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._binding import lib
from ..algorithms import Algorithm

if TYPE_CHECKING:  # imported where used (start-up: docs/benchmarks.md)
    import numpy as np

RECORD_FIXED = lib.LT_RECORD_FIXED  # bytes before the digest in every record

# Record flags (u16).
FLAG_TRUNCATED = lib.LT_FLAG_TRUNCATED
FLAG_MALFORMED = lib.LT_FLAG_MALFORMED
FLAG_NON_IP = lib.LT_FLAG_NON_IP
FLAG_FRAGMENT = lib.LT_FLAG_FRAGMENT
FLAG_UNSUPPORTED_LINKTYPE = lib.LT_FLAG_UNSUPPORTED_LINKTYPE
FLAG_NO_TIMESTAMP = lib.LT_FLAG_NO_TIMESTAMP
FLAG_CAPLEN_GT_SNAPLEN = lib.LT_FLAG_CAPLEN_GT_SNAPLEN
FLAG_GAP = lib.LT_FLAG_GAP  # not a frame: declares `aux` frames dropped by the engine

FLAG_NAMES = {
    FLAG_TRUNCATED: "TRUNCATED",
    FLAG_MALFORMED: "MALFORMED",
    FLAG_NON_IP: "NON_IP",
    FLAG_FRAGMENT: "FRAGMENT",
    FLAG_UNSUPPORTED_LINKTYPE: "UNSUPPORTED_LINKTYPE",
    FLAG_NO_TIMESTAMP: "NO_TIMESTAMP",
    FLAG_CAPLEN_GT_SNAPLEN: "CAPLEN_GT_SNAPLEN",
    FLAG_GAP: "GAP",
}
# every documented flag bit; bits 7-14 are reserved (docs/ledger-format.md "Record flags")
FLAGS_DEFINED = sum(FLAG_NAMES)


def record_size(algorithm: Algorithm) -> int:
    """Bytes of one record of `algorithm` on disk (RECORD_FIXED + its digest size)."""
    return lib.lt_record_size(algorithm.native_id)


def record_dtype(digest_size: int) -> np.dtype:
    """numpy view of one on-disk record: 32 fixed bytes + digest, little-endian, packed.

    The digest is raw bytes (void, ``V{digest_size}``), not a numpy string (``S``): ``S`` values
    drop their trailing zero bytes when they become Python bytes, so about one digest in 256 would
    come out a byte short. ``bytes(rec["digest"])`` is always `digest_size` bytes; compare a
    digest column with ``np.void(want)``."""
    import numpy as np

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


class RecordSink:
    """One growable record array (record_dtype) that producers fill in place: the engine batch
    after batch (recompute's capture side), or verify segment after segment (the checked records of
    each raw record file copied straight into it, ledgertool.ledger.recfile). Nothing is copied out
    of a producer's buffer and nothing joined afterwards. `n` records are filled; the array starts
    at `hint` records (untouched pages cost no memory) and, when a producer asks for more room
    than is left, grows to at least twice its length (the records filled are copied over; views
    taken before still see the old array, which holds the same bytes)."""

    BATCH = 65536  # DigestEngine's batch: room() gives at least this much by default
    #: at most this many records reserved ahead: a hint from a file's size overestimates the
    #: frames of large frames (1500 B: ~24x), and one reservation past RAM + swap is refused
    MAX_HINT = 1 << 24

    def __init__(self, dtype: np.dtype, hint: int = 0):
        import numpy as np

        self._buf = np.empty(max(min(hint, self.MAX_HINT), self.BATCH), dtype)
        self.n = 0

    @property
    def dtype(self) -> np.dtype:
        return self._buf.dtype

    def room(self, need: int = BATCH, ahead: int = 0) -> np.ndarray:
        """The free tail (a writable view of at least `need` records, which the producer fills
        and the consumer then counts in `n`, or takes with `take`). When fewer are left the array
        grows to the larger of twice its length and `n + need + ahead` (`ahead`: records the
        producer expects to ask for after these, so that one growth makes room for them too;
        capped like the hint)."""
        import numpy as np

        if len(self._buf) - self.n < need:
            want = self.n + need + min(max(ahead, 0), self.MAX_HINT)
            grown = np.empty(max(2 * len(self._buf), want), self._buf.dtype)
            grown[: self.n] = self._buf[: self.n]
            self._buf = grown
        return self._buf[self.n :]

    def take(self, records) -> np.ndarray:
        """Count `records` (a bytes-like object of whole records) as filled and return them as a
        view of the array: when they are the free tail's first bytes (a producer wrote them there,
        e.g. verify through room()), nothing is copied; any other bytes (records decoded elsewhere,
        a v1 Parquet segment's) are copied to the tail first. ValueError when `records` is not a
        whole number of records."""
        import numpy as np

        mem = memoryview(records).cast("B")
        size = self._buf.dtype.itemsize
        if len(mem) % size:
            raise ValueError(f"{len(mem)} bytes are not whole {size}-byte records")
        count = len(mem) // size
        tail = self._buf[self.n :]
        if not (
            count <= len(tail) and count and _address(mem) == tail.__array_interface__["data"][0]
        ):
            tail = self.room(count)
            tail[:count] = np.frombuffer(mem, self._buf.dtype)
        self.n += count
        return self._buf[self.n - count : self.n]

    def records(self) -> np.ndarray:
        """The records filled so far (a view)."""
        return self._buf[: self.n]

    def clear(self) -> None:
        """Forget the records filled and give their memory back (the array is one batch again)."""
        import numpy as np

        self._buf = np.empty(self.BATCH, self._buf.dtype)
        self.n = 0


def _address(mem: memoryview) -> int:
    """The address of a contiguous buffer's first byte."""
    import numpy as np

    return np.frombuffer(mem, np.uint8).__array_interface__["data"][0] if len(mem) else 0
