"""The fast part of a multiset comparison: digests that occur exactly once on each side.

In a capture that agrees with its ledger almost every digest occurs once in the ledger and once in
the capture; such a pair is matched whatever the order or the pairing rule, so it need not go
through DuckDB's group-by and join (recompute._pair), which cost ~85 % of a single-core
reconciliation of 64-byte frames (docs/benchmarks.md, "recompute per worker"). The rows of
every other digest ("contested": counts that differ, repeats, 64-bit prefix collisions) go to
the exact pairing unchanged; the counts of the two parts add up (merge_tallies), because each
digest is in exactly one part.
"""

from __future__ import annotations

import numpy as np

__all__ = ["once_each", "window_mask"]


def _prefix64(arr: np.ndarray) -> np.ndarray:
    """The first 8 digest bytes of each record of `arr` (record_dtype) as one uint64."""
    if not len(arr):
        return np.zeros(0, "<u8")
    arr = np.ascontiguousarray(arr)
    off = arr.dtype.fields["digest"][1]
    return np.ndarray((len(arr),), "<u8", buffer=arr, offset=off, strides=(arr.dtype.itemsize,))


def _digest_bytes(arr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The digests of `arr`'s records `rows`, as an (n, digest_size) uint8 array."""
    size = arr.dtype.fields["digest"][0].itemsize
    return np.ascontiguousarray(arr["digest"][rows]).view(np.uint8).reshape(-1, size)


def once_each(ledger: np.ndarray, capture: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over `ledger` and `capture` (record_dtype arrays) of the rows whose digest
    occurs exactly once in each: those rows pair one to one (matched). A row outside both masks
    may still be matched; the exact pairing decides it."""
    nl = len(ledger)
    keys = np.concatenate([_prefix64(ledger), _prefix64(capture)])
    order = np.argsort(keys, kind="stable")  # stable: a ledger row comes before the capture row of its key
    k = keys[order]
    if len(k) > 1:
        same = k[1:] == k[:-1]
        starts = np.flatnonzero(same)  # a run of equal prefixes starting at i: rows i, i+1
        # exactly two rows: the one before is different, the one after is different
        before = np.concatenate([[False], same[:-1]])[starts]
        after = np.concatenate([same[1:], [False]])[starts]
        pairs = starts[~before & ~after]
        first, second = order[pairs], order[pairs + 1]
        cross = (first < nl) & (second >= nl)  # one ledger row, one capture row
        first, second = first[cross], second[cross]
        equal = np.all(_digest_bytes(ledger, first) == _digest_bytes(capture, second - nl), axis=1)
        lmask = np.zeros(nl, bool)
        cmask = np.zeros(len(capture), bool)
        lmask[first[equal]] = True
        cmask[second[equal] - nl] = True
        return lmask, cmask
    return np.zeros(nl, bool), np.zeros(len(capture), bool)


def window_mask(ts: np.ndarray, lo: int | None, hi: int | None) -> np.ndarray:
    """Rows with `lo` <= ts < `hi` (either bound None: open), as recompute's window SQL."""
    mask = np.ones(len(ts), bool)
    if lo is not None:
        mask &= ts >= lo
    if hi is not None:
        mask &= ts < hi
    return mask
