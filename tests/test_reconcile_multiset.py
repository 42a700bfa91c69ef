"""multiset.once_each (native lt_once_each): only digests found exactly once on each side are
paired outside DuckDB; repeats, one-sided digests and 64-bit prefix collisions are left to the
exact pairing. Checked against a Counter-based reference on random multisets."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool.digest.record import record_dtype
from ledgertool.reconcile.multiset import matched_tally, once_each, window_mask


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


def _reference(ledger: list[bytes], capture: list[bytes]) -> tuple[list[bool], list[bool]]:
    """once_each's contract by counting (collections.Counter): the rows whose first 8 digest bytes
    occur once on each side and whose whole digests are equal."""
    lc, cc = Counter(x[:8] for x in ledger), Counter(x[:8] for x in capture)
    one = {x for x in ledger if lc[x[:8]] == 1 and cc[x[:8]] == 1} & set(capture)
    return [x in one for x in ledger], [x in one for x in capture]


def _sound(ledger: list[bytes], capture: list[bytes], lm, cm) -> bool:
    """Every row marked has a digest found exactly once on each side (so it pairs one to one)."""
    lc, cc = Counter(ledger), Counter(capture)
    return all(lc[x] == cc[x] == 1 for x, m in zip(ledger, lm) if m) and \
        all(lc[x] == cc[x] == 1 for x, m in zip(capture, cm) if m)


# digests drawn from a small pool so that repeats, one-sided digests and shared 8-byte prefixes
# (same first word, other bytes different) are common on both sides
_pool = st.sampled_from([d(f, s) for f in range(6) for s in range(3)])


@settings(max_examples=300, deadline=None)
@given(st.lists(_pool, max_size=40), st.lists(_pool, max_size=40))
def test_native_once_each_equals_counter_reference(ledger, capture):
    lm, cm = once_each(_recs(ledger), _recs(capture))
    assert (lm.tolist(), cm.tolist()) == _reference(ledger, capture)
    assert _sound(ledger, capture, lm, cm) and lm.sum() == cm.sum()


@pytest.mark.parametrize("size", [8, 16, 32])
def test_native_once_each_large_random_multisets(size):
    """Many buckets (more than one scatter bucket from 2^12 ledger rows on): random digests of
    each digest size with duplicates on both sides, in different orders, against the reference."""
    rng = np.random.default_rng(size)
    pool = [rng.bytes(size) for _ in range(30_000)]
    ledger = [pool[i] for i in rng.integers(0, len(pool), 40_000)]
    capture = [pool[i] for i in rng.integers(0, len(pool), 35_000)]
    dt = record_dtype(size)
    la, ca = np.zeros(len(ledger), dt), np.zeros(len(capture), dt)
    la["digest"], ca["digest"] = [np.void(x) for x in ledger], [np.void(x) for x in capture]
    lm, cm = once_each(la, ca)
    want_l, want_c = _reference(ledger, capture)
    assert lm.tolist() == want_l and cm.tolist() == want_c and _sound(ledger, capture, lm, cm)
    assert 1_000 < sum(want_l) < 35_000  # both kinds of rows are there


def test_matched_tally_per_second_dense_and_sparse():
    """Seconds counted by histogram (a few seconds) and by np.unique (far apart) alike."""
    s = 1_000_000_000
    lts = np.array([5 * s, 5 * s + 1, 7 * s, 5 * s + 2, -3 * s], np.int64)
    t = matched_tally(["a", "b"], np.array([0, 1, 1, 0, 0]), lts, lts, None, None)
    assert [(r["second"], r["matched"]) for r in t.per_second] == [(-3, 1), (5, 3), (7, 1)]
    assert [(r["link"], r["matched"]) for r in t.per_link] == [("a", 3), ("b", 2)]
    far = np.array([0, 10 ** 9 * s], np.int64)
    t = matched_tally(["a"], np.array([0, 0]), far, far, None, s)
    assert [(r["second"], r["matched"]) for r in t.per_second] == [(0, 1)] and t.frames_in_window == 1
