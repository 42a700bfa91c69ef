"""multiset.once_each: only digests found exactly once on each side are paired outside DuckDB;
repeats, one-sided digests and 64-bit prefix collisions are left to the exact pairing."""

from __future__ import annotations

import numpy as np

from ledgertool.digest.record import record_dtype
from ledgertool.reconcile.multiset import once_each, window_mask


def _recs(digests: list[bytes]) -> np.ndarray:
    arr = np.zeros(len(digests), record_dtype(16))
    arr["digest"] = [np.void(d) for d in digests]
    arr["seq"] = np.arange(len(digests))
    return arr


def d(first: int, second: int = 0) -> bytes:
    return first.to_bytes(8, "little") + second.to_bytes(8, "little")


def test_once_each_pairs_only_digests_once_on_each_side():
    ledger = _recs([d(1), d(2), d(3), d(3), d(4), d(5, 1), d(6), d(7)])
    capture = _recs([d(7), d(3), d(2), d(3), d(5, 2), d(8), d(6), d(6), d(1)])
    lm, cm = once_each(ledger, capture)
    # 1, 2 and 7 once on each side; 3 twice on both (left to the exact pairing, which matches
    # both); 4 and 8 one-sided; 5: same first 8 bytes, different digests; 6: once against twice
    assert lm.tolist() == [True, True, False, False, False, False, False, True]
    assert cm.tolist() == [True, False, True, False, False, False, False, False, True]


def test_once_each_empty_and_one_sided():
    empty = _recs([])
    lm, cm = once_each(empty, _recs([d(1)]))
    assert lm.tolist() == [] and cm.tolist() == [False]
    lm, cm = once_each(_recs([d(1), d(1)]), empty)
    assert lm.tolist() == [False, False]


def test_window_mask_half_open():
    ts = np.array([5, 10, 15, 20], np.int64)
    assert window_mask(ts, 10, 20).tolist() == [False, True, True, False]
    assert window_mask(ts, None, 15).tolist() == [True, True, False, False]
    assert window_mask(ts, None, None).all()
