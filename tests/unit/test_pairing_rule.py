"""The pairing rule of recompute (docs/cli.md, "Which copy is named when bytes repeat"), written
out here in plain Python and compared with the exact pairing (DuckDB) and with the fast paths in
front of it: for each digest, a ledger record and a capture frame of the same timestamp pair
first (k-th with k-th among those of that time: ledger by link and seq, capture by index); the
occurrences left pair in time order (ledger by time, link, seq; capture by time, index)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_reconcile_multiset import _exact_only, _fast_and_exact, _ordered_sides

NAMES = ["link0", "link1"]


def _rule(ledger: np.ndarray, codes: np.ndarray, capture: np.ndarray):
    """(ledger-only rows as (link, seq), capture-only rows as index) by the rule, every row."""
    lby, cby = defaultdict(list), defaultdict(list)
    for i in range(len(ledger)):
        lby[bytes(ledger["digest"][i])].append(
            (int(ledger["ts_ns"][i]), NAMES[codes[i]], int(ledger["seq"][i]))
        )
    for j in range(len(capture)):
        cby[bytes(capture["digest"][j])].append((int(capture["ts_ns"][j]), int(capture["seq"][j])))
    lonly, conly = [], []
    for dg in set(lby) | set(cby):
        ls, cs = sorted(lby.get(dg, [])), sorted(cby.get(dg, []))
        ltime, ctime = defaultdict(list), defaultdict(list)
        for r in ls:
            ltime[r[0]].append(r)
        for r in cs:
            ctime[r[0]].append(r)
        same_l, same_c = set(), set()
        for t in ltime:
            n = min(len(ltime[t]), len(ctime.get(t, [])))
            same_l.update(ltime[t][:n])
            same_c.update(ctime[t][:n])
        rest_l = [r for r in ls if r not in same_l]
        rest_c = [r for r in cs if r not in same_c]
        n = min(len(rest_l), len(rest_c))
        lonly += [(r[1], r[2]) for r in rest_l[n:]]
        conly += [r[1] for r in rest_c[n:]]
    return sorted(lonly), sorted(conly)


def _named(rows):
    lonly = sorted((r[2], r[3]) for r in rows if r[0] == "ledger_only")
    conly = sorted(r[5] for r in rows if r[0] == "capture_only")
    return lonly, conly


@settings(max_examples=150, deadline=None)
@given(_ordered_sides())
def test_the_exact_pairing_follows_the_rule(sides):
    ledger, codes, capture = sides
    _, rows = _exact_only(NAMES, codes, ledger, capture, (None, None, 0))
    assert _named(rows) == _rule(ledger, codes, capture)


@settings(max_examples=150, deadline=None)
@given(_ordered_sides(), st.integers(0, 3))
def test_the_fast_paths_follow_the_rule_when_times_agree(sides, drop):
    """A capture whose times are the ledger's (the file the ledger was made from, edited): the walk
    pairs most rows, and what is named is still what the rule names."""
    ledger, codes, _ = sides
    capture = ledger[np.arange(len(ledger)) % 4 != drop].copy() if len(ledger) else ledger.copy()
    capture["seq"] = np.arange(len(capture))
    got, _, got_rows, want_rows = _fast_and_exact(ledger, codes, capture, (None, None, 0))
    assert got_rows == want_rows
    assert _named(got_rows) == _rule(ledger, codes, capture)
