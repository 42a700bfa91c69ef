"""recompute's pairing past its memory budget (reconcile.partstore): both sides' rows go to bucket
files by their part and pair a bucket at a time (in memory, or through DuckDB's pairing for a
bucket past the budget), and the report and the --details lines must be those of pairing every
row at once, with a window and a tolerance, for every way a ledger can differ from the traffic
(tests/test_recompute_partitioned.py's edits). Ledgers from tests/v2_reference.py over the records
of samples/sample.pcap."""

from __future__ import annotations

import json

import numpy as np
from conftest import load_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_recompute_partitioned import KINDS, PCAP, _edit, _write, base  # noqa: F401 (a fixture)

from ledgertool.reconcile import partstore
from ledgertool.reconcile import recompute as rc
from ledgertool.reconcile.partstore import PartStore
from ledgertool.reconcile.recompute import reconcile


def _report(res) -> str:
    doc = res.to_json()
    for k in ("elapsed_s", "details_file"):
        doc.pop(k, None)
    return json.dumps(doc, sort_keys=True)


BUCKET_BITS = 4


def _run(d, keydir, details, budget, **kw):
    """reconcile with `budget` bytes kept before the rows spill (None: the default's), and the
    buckets it paired (bucket files read whole / through DuckDB). Past a budget the rows spill to
    16 buckets a side, not 256: each bucket paired through DuckDB costs ~30 ms of SQL however
    few its rows, and the sample's ~300 rows would leave most of 256 buckets with one or two."""
    dk, _, trust = load_keys(keydir)
    seen = {"groups": 0, "oversized": 0}
    groups, oversized = PartStore.groups, PartStore.oversized

    def count_groups(self, wanted=None):
        for g in groups(self, wanted):
            seen["groups"] += 1
            yield g

    def count_oversized(self, wanted=None):
        out = oversized(self, wanted)
        seen["oversized"] = max(seen["oversized"], len(out))
        return out

    saved = rc.keep_budget, PartStore.groups, PartStore.oversized, partstore.BUCKET_BITS
    try:
        if budget is not None:
            rc.keep_budget = lambda limit: budget
            partstore.BUCKET_BITS = BUCKET_BITS
        PartStore.groups, PartStore.oversized = count_groups, count_oversized
        res = reconcile(PCAP, d, dk, trust=trust, details=details, **kw)
    finally:
        rc.keep_budget, PartStore.groups, PartStore.oversized, partstore.BUCKET_BITS = saved
    return res, details.read_text(), seen


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(0, 300), st.integers(0, 300)),
        min_size=0,
        max_size=4,
    ),
    window=st.tuples(
        st.integers(-1, 300), st.integers(-1, 300), st.sampled_from([0, 10**4, 10**6])
    ),
    budget=st.sampled_from([0, 8_000]),
)
def test_a_pairing_bucket_by_bucket_reports_what_pairing_everything_reports(
    tmp_path_factory, keydir, base, edits, window, budget
):
    recs = base
    for kind, k, j in edits:
        recs = _edit(recs, kind, k, j)
    d = tmp_path_factory.mktemp("bucketed") / "L"
    _write(d, keydir, recs)
    lo, hi, tol = window
    ts = np.sort(base["ts_ns"])
    kw = {
        "from_ns": None if lo < 0 else int(ts[lo % len(ts)]),
        "to_ns": None if hi < 0 else int(ts[hi % len(ts)]) + 1,
        "tolerance_ns": tol,
        "exact": True,
    }
    if kw["from_ns"] is not None and kw["to_ns"] is not None and kw["from_ns"] >= kw["to_ns"]:
        kw["from_ns"], kw["to_ns"] = kw["to_ns"] - 1, kw["from_ns"] + 1
    whole, whole_details, seen = _run(d, keydir, d.parent / "whole.jsonl", None, **kw)
    assert seen == {"groups": 1, "oversized": 0}  # everything at once
    bucketed, bucketed_details, seen = _run(d, keydir, d.parent / "bucketed.jsonl", budget, **kw)
    assert _report(bucketed) == _report(whole)
    assert bucketed_details == whole_details
    many = 10 if lo < 0 and hi < 0 else 0  # (a narrow window keeps few rows, in few buckets)
    if budget == 0:  # every bucket passes the budget: DuckDB pairs each
        assert seen["groups"] == 0 and seen["oversized"] >= many
    else:  # ~20 rows a side (~1 KB) in each of the 16 buckets: each read whole
        assert seen["groups"] >= many and seen["oversized"] == 0


def test_a_differing_capture_past_the_budget_pairs_only_its_differing_parts_buckets(
    tmp_path, keydir, base
):
    """The fast verdict's first pass lets go of its rows past the budget; the second reading keeps
    the differing parts' rows, which spill to buckets: only those buckets are paired."""
    d = tmp_path / "L"
    _write(d, keydir, _edit(_edit(base, "digest", 40, 0), "drop", 200, 0))
    whole, whole_details, _ = _run(d, keydir, tmp_path / "whole.jsonl", None)
    bucketed, bucketed_details, seen = _run(d, keydir, tmp_path / "bucketed.jsonl", 0)
    assert (bucketed.matched, bucketed.ledger_only, bucketed.capture_only) == (292, 1, 2)
    assert _report(bucketed) == _report(whole) and bucketed_details == whole_details
    assert 1 <= seen["oversized"] <= 3  # the buckets of 3 differing parts at most
