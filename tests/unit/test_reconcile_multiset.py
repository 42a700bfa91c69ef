"""multiset.once_each (native lt_once_each): only digests found exactly once on each side are
paired outside DuckDB; repeats, one-sided digests and 64-bit prefix collisions are left to the
exact pairing. Checked against a Counter-based reference on random multisets."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from conftest import emptied_duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool.digest.record import record_dtype
from ledgertool.reconcile.details import DETAILS_ORDER
from ledgertool.reconcile.multiset import (
    in_order,
    matched_tally,
    once_each,
    paired_masks,
    window_mask,
)
from ledgertool.reconcile.pairing import load_rows, pair_records, pair_tables, tally_tables
from ledgertool.reconcile.query import open_duckdb


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
    return all(lc[x] == cc[x] == 1 for x, m in zip(ledger, lm) if m) and all(
        lc[x] == cc[x] == 1 for x, m in zip(capture, cm) if m
    )


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
    far = np.array([0, 10**9 * s], np.int64)
    t = matched_tally(["a"], np.array([0, 0]), far, far, None, s)
    assert [(r["second"], r["matched"]) for r in t.per_second] == [
        (0, 1)
    ] and t.frames_in_window == 1


# ---- the ordered fast path (multiset.in_order, native lt_pair_in_order) ----


def _sided(digests: list[bytes], ts: list[int]) -> np.ndarray:
    arr = _recs(digests)
    arr["ts_ns"] = ts
    return arr


def _ranks(arr: np.ndarray, key) -> list[tuple[bytes, int]]:
    """Each row's (digest, k): it is the k-th occurrence of its digest in the order `key` of
    rows: the occurrence numbers of the ordered walk (native/src/multiset.c)."""
    order = sorted(range(len(arr)), key=key)
    seen: Counter = Counter()
    out: list = [None] * len(arr)
    for i in order:
        dg = bytes(arr["digest"][i])
        seen[dg] += 1
        out[i] = (dg, seen[dg])
    return out


@st.composite
def _ordered_sides(draw):
    """A ledger and a capture of the same frames with the differences a real capture shows:
    drops (ledger-only), inserts (capture-only), repeats of the same bytes, neighbours swapped;
    non-decreasing times with ties on each side; one or two links; now and then a side out of
    order (the fast path then pairs nothing)."""
    base = draw(st.lists(_pool, max_size=60))
    ledger = [
        x for x in base if not draw(st.booleans()) or draw(st.integers(0, 9))
    ]  # ~5 % kept out
    capture = list(base)
    for _ in range(draw(st.integers(0, 6))):  # drops from the capture
        if capture:
            del capture[draw(st.integers(0, len(capture) - 1))]
    for _ in range(draw(st.integers(0, 6))):  # inserts into either side
        side = ledger if draw(st.booleans()) else capture
        side.insert(draw(st.integers(0, len(side))), draw(_pool))
    for _ in range(draw(st.integers(0, 3))):  # neighbours swapped in the capture
        if len(capture) > 1:
            k = draw(st.integers(0, len(capture) - 2))
            capture[k], capture[k + 1] = capture[k + 1], capture[k]
    lts = sorted(draw(st.lists(st.integers(0, 20), min_size=len(ledger), max_size=len(ledger))))
    cts = sorted(draw(st.lists(st.integers(0, 20), min_size=len(capture), max_size=len(capture))))
    codes = np.zeros(len(ledger), np.int32)
    if draw(st.booleans()):  # two links
        codes = np.array(
            draw(st.lists(st.integers(0, 1), min_size=len(ledger), max_size=len(ledger))), np.int32
        )
    if draw(st.integers(0, 9)) == 0 and len(cts) > 1:  # a capture out of time order
        cts[0], cts[-1] = cts[-1] + 1, cts[0]
    return _sided(ledger, lts), codes, _sided(capture, cts)


@settings(max_examples=400, deadline=None)
@given(_ordered_sides())
def test_in_order_pairs_only_kth_with_kth_occurrences(sides):
    """The proof's premise (native/src/multiset.c): for each digest the occurrence numbers of
    the ledger rows the walk pairs and of the capture rows it pairs are one set K within
    1..min(l, c), numbered in the exact pairing's time orders."""
    ledger, codes, capture = sides
    lm, cm = in_order(ledger, codes, capture)
    lr = _ranks(ledger, lambda i: (ledger["ts_ns"][i], codes[i], ledger["seq"][i]))
    cr = _ranks(capture, lambda i: (capture["ts_ns"][i], capture["seq"][i]))
    lk = Counter(r for r, m in zip(lr, lm) if m)
    ck = Counter(r for r, m in zip(cr, cm) if m)
    assert lk == ck and max(lk.values(), default=1) == 1
    lc, cc = (
        Counter(bytes(x) for x in ledger["digest"]),
        Counter(bytes(x) for x in capture["digest"]),
    )
    assert all(k <= min(lc[dg], cc[dg]) for dg, k in lk)


def _exact_only(names, codes, ledger, capture, window):
    """recompute's pairing with every row through DuckDB (no fast path): the tally and the
    differing rows of table j in --details order."""
    con = emptied_duckdb()
    from_ns, to_ns, tol = window
    lo = None if from_ns is None else from_ns - tol
    hi = None if to_ns is None else to_ns + tol
    lw, cw = window_mask(ledger["ts_ns"], lo, hi), window_mask(capture["ts_ns"], lo, hi)
    load_rows(con, "k", np.array(names, dtype=object)[codes[lw]], ledger[lw], capture[cw])
    pair_tables(con, [("k", None)], [], [], from_ns, to_ns, tol)
    return tally_tables(con, from_ns, to_ns, 100), _differing(con)


def _differing(con) -> list[tuple]:
    return con.execute(f"""SELECT status, digest, link, seq, l_ts, index, c_ts FROM j
        WHERE status <> 'matched' ORDER BY {DETAILS_ORDER}""").fetchall()


def _fast_and_exact(ledger, codes, capture, window):
    """pair_records (fast paths, then DuckDB) and the all-DuckDB pairing of the same two links'
    rows: (fast tally, exact tally, fast --details rows, exact --details rows)."""
    names = ["link0", "link1"]
    want, want_rows = _exact_only(names, codes, ledger, capture, window)
    con = emptied_duckdb()
    got = pair_records(con, "k", [], [], (names, codes, ledger), capture, window, 100)
    got_rows = _differing(con)
    return got, want, got_rows, want_rows


@settings(max_examples=60, deadline=None)
@given(_ordered_sides(), st.sampled_from([(None, None, 0), (3, 15, 0), (3, 15, 2), (None, 10, 1)]))
def test_pair_records_with_the_fast_path_equals_the_exact_pairing(sides, window):
    """The whole reconciliation (counts, per link and second, examples, and which rows are
    ledger-only or capture-only, in --details order) with the ordered walk and once_each taking
    their pairs out equals the pairing of every row in DuckDB."""
    got, want, got_rows, want_rows = _fast_and_exact(*sides, window)
    assert got_rows == want_rows
    assert (got.frames_in_window, got.matched, got.ledger_only, got.capture_only) == (
        want.frames_in_window,
        want.matched,
        want.ledger_only,
        want.capture_only,
    )
    assert got.per_link == [r for r in want.per_link]
    assert got.per_second == want.per_second
    assert got.examples_ledger_only == want.examples_ledger_only
    assert got.examples_capture_only == want.examples_capture_only


def test_in_order_resynchronises_after_drops_and_inserts():
    """A capture in the ledger's order with a few drops, inserts, a repeat and a swap in the
    middle: the walk pairs all but the rows near the differences (a resynchronisation, not the
    whole rest left to the general pairing), and a capture out of order gets no pairs at all."""
    rng = np.random.default_rng(16)
    n = 40_000
    pool = [rng.bytes(32) for _ in range(n)]
    ledger = _sided(pool, list(range(n)))
    dropped = {12_000, 12_001, 18_000, 24_000, 30_000}
    cap = [x for i, x in enumerate(pool) if i not in dropped]
    cap.insert(20_000, rng.bytes(32))  # an insert
    cap.insert(22_000, pool[22_000])  # the same bytes once more
    cap[26_000], cap[26_001] = cap[26_001], cap[26_000]
    capture = _sided(cap, list(range(len(cap))))
    lm, cm = in_order(ledger, None, capture)
    assert n - 12 <= lm.sum() == cm.sum() < n - 5
    assert not lm[sorted(dropped)].any() and lm[-1] and cm[-1]
    lm, cm = paired_masks(ledger, np.zeros(n, np.int32), capture, ordered=True)
    # the rest paired by once_each, but for the repeated bytes: the walk paired ledger 22000 with
    # the first capture copy (index 21998, another time), while the exact pairing pairs it with
    # the copy of its own time (index 22000), so all three go to the exact pairing
    assert lm.sum() == n - 6 and cm.sum() == n - 6
    assert not lm[22_000] and not cm[21_998] and not cm[22_000]
    capture["ts_ns"][0] = n + 1  # the first frame stamped last: array order is not pairing order
    lm, cm = in_order(ledger, None, capture)
    assert not lm.any() and not cm.any()


def test_pair_records_all_paired_skips_duckdb_with_the_same_table_j():
    """Every row paired by the walk: no exact pairing runs, and table j (read for --details and
    merged across a cluster's partitions) is empty with the column types _pair gives it."""
    ledger = _sided([d(i) for i in range(50)], list(range(50)))
    capture = _sided([d(i) for i in range(50)], list(range(50)))
    con, ref = open_duckdb(), open_duckdb()
    try:
        t = pair_records(
            con,
            "k",
            [],
            [],
            (["link0"], np.zeros(50, np.int32), ledger),
            capture,
            (None, None, 0),
            10,
        )
        assert (t.matched, t.ledger_only, t.capture_only, t.frames_in_window) == (50, 0, 0, 50)
        assert t.per_link == [{"link": "link0", "matched": 50, "ledger_only": 0, "capture_only": 0}]
        e = ledger[:0]
        load_rows(ref, "k", np.array([], dtype=object), e, e)
        pair_tables(ref, [("k", None)], [], [], None, None, 0)
        assert (
            con.sql("SELECT * FROM j").to_arrow_table().schema
            == ref.sql("SELECT * FROM j").to_arrow_table().schema
        )
        assert con.execute("SELECT count(*) FROM j").fetchone() == (0,)
    finally:
        con.close()
        ref.close()


# ---- per-second counts of a time-ordered ledger ----


@settings(max_examples=400, deadline=None)
@given(
    st.integers(-(2**62), 2**62),
    st.lists(st.integers(0, 6 * 10**9) | st.integers(0, 10**12), max_size=200),
    st.booleans(),
)
def test_sorted_per_second_equals_the_histogram(base, offsets, ties):
    """The binary search at second boundaries (for a ledger the ordered walk found in time order)
    counts what the pass over every row counts, negative times and ties included; it declines
    (None) only when the seconds spanned are many next to the rows."""
    from ledgertool.reconcile.multiset import _per_second, _sorted_per_second

    ts = np.array(sorted(base + o for o in offsets), np.int64)
    if ties and len(ts):
        ts[: len(ts) // 2] = ts[0]
    got = _sorted_per_second(ts)
    span = (int(ts[-1]) // 10**9 - int(ts[0]) // 10**9) if len(ts) else 0
    assert (got[0] is None) == (span > max(len(ts) // 16, 64))
    if got[0] is not None:
        want = _per_second(ts // 10**9)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
        assert sum(got[1].tolist()) == len(ts)


@settings(max_examples=60, deadline=None)
@given(_ordered_sides(), st.sampled_from([(None, None, 0), (3, 15, 0), (3, 15, 2), (None, 10, 1)]))
def test_pair_records_over_several_seconds_equals_the_exact_pairing(sides, window):
    """As test_pair_records_with_the_fast_path_equals_the_exact_pairing, with the times spread
    over up to three seconds (0.1 s steps from 0.95 s), so the per-second rows of an ordered
    ledger come from the binary search."""
    ledger, codes, capture = sides
    for arr in (ledger, capture):
        arr["ts_ns"] = arr["ts_ns"] * 100_000_000 + 950_000_000
    window = tuple(
        None if v is None else v * 100_000_000 + (950_000_000 if k < 2 else 0)
        for k, v in enumerate(window)
    )
    got, want, got_rows, want_rows = _fast_and_exact(ledger, codes, capture, window)
    assert got_rows == want_rows
    assert (
        got.frames_in_window,
        got.matched,
        got.ledger_only,
        got.capture_only,
        got.per_link,
        got.per_second,
        got.examples_ledger_only,
        got.examples_capture_only,
    ) == (
        want.frames_in_window,
        want.matched,
        want.ledger_only,
        want.capture_only,
        want.per_link,
        want.per_second,
        want.examples_ledger_only,
        want.examples_capture_only,
    )
