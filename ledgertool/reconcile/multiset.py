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


def _word64(arr: np.ndarray, at: int) -> np.ndarray:
    """Digest bytes [at, at + 8) of each record of `arr` (record_dtype) as one uint64 (a view)."""
    if not len(arr):
        return np.zeros(0, "<u8")
    arr = np.ascontiguousarray(arr)
    off = arr.dtype.fields["digest"][1] + at
    return np.ndarray((len(arr),), "<u8", buffer=arr, offset=off, strides=(arr.dtype.itemsize,))


def _same_digests(ledger: np.ndarray, lrows: np.ndarray, capture: np.ndarray, crows: np.ndarray) -> np.ndarray:
    """Whether ledger row lrows[k]'s digest equals capture row crows[k]'s, whose first 8 bytes are
    known to be equal: the other 8-byte words compared."""
    size = ledger.dtype.fields["digest"][0].itemsize
    equal = np.ones(len(lrows), bool)
    for at in range(8, size, 8):
        equal &= _word64(ledger, at)[lrows] == _word64(capture, at)[crows]
    return equal


def once_each(ledger: np.ndarray, capture: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over `ledger` and `capture` (record_dtype arrays) of the rows whose digest
    occurs exactly once in each: those rows pair one to one (matched). A row outside both masks
    may still be matched; the exact pairing decides it."""
    nl = len(ledger)
    lmask, cmask = np.zeros(nl, bool), np.zeros(len(capture), bool)
    keys = np.concatenate([_word64(ledger, 0), _word64(capture, 0)])
    if len(keys) < 2:
        return lmask, cmask
    order = np.argsort(keys)
    k = keys[order]
    same = k[1:] == k[:-1]
    # runs of exactly two equal first words: rows i and i+1 equal, i-1 and i+2 not
    starts = np.flatnonzero(same & np.concatenate([[True], ~same[:-1]]) & np.concatenate([~same[1:], [True]]))
    a, b = order[starts], order[starts + 1]
    first, second = np.minimum(a, b), np.maximum(a, b)
    cross = (first < nl) & (second >= nl)  # one ledger row and one capture row
    first, second = first[cross], second[cross] - nl
    equal = _same_digests(ledger, first, capture, second)
    lmask[first[equal]] = True
    cmask[second[equal]] = True
    return lmask, cmask


def window_mask(ts: np.ndarray, lo: int | None, hi: int | None) -> np.ndarray:
    """Rows with `lo` <= ts < `hi` (either bound None: open), as recompute's window SQL."""
    mask = np.ones(len(ts), bool)
    if lo is not None:
        mask &= ts >= lo
    if hi is not None:
        mask &= ts < hi
    return mask
