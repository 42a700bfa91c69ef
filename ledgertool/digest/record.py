"""The fixed-size on-disk record the engine writes per frame, and its flags.

docs/ledger-format.md, "Records": 32 fixed bytes (seq, ts_ns, wire_len, cap_len, flags,
linktype, aux; little-endian, packed) followed by the digest. The sizes and flag bits are the
LT_RECORD_FIXED / LT_FLAG_* constants of native/include/ledgertool.h, read through the binding.
"""

from __future__ import annotations

import numpy as np

from .._binding import lib
from ..algorithms import Algorithm

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
