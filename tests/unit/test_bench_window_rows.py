"""bench's capture:windows rows (`capture --tiers windows` beside capture:engine and
capture:sealed) and the window tier's ratio to the engine; none for a v1 ledger, which has no
window tier."""

from __future__ import annotations

import pytest

from ledgertool.bench.measure import bench_capture
from ledgertool.bench.rows import capture_ratios


@pytest.mark.parametrize(("fmt", "windows"), [(2, True), (1, False)])
def test_windows_rows_beside_the_sealed_ones_for_v2_ledgers_only(tmp_path, fmt, windows):
    rows = bench_capture(
        1500, 64, repeats=2, workdir=tmp_path, workers=(1,), tcpdump=False, ledger_format=fmt
    )
    kinds = [r.benchmark for r in rows]
    want = ["capture:engine", "capture:sealed"] + ["capture:windows"] * windows
    assert kinds == want + ["capture:python-reference"]
    by = {r.benchmark: r for r in rows}
    assert all(by[k].frames == 1500 and by[k].threads == 1 for k in want)
    (ratio,) = capture_ratios(rows)
    if not windows:
        assert ratio.windows_cpu_ns is None and ratio.windows_cpu is None
        return
    w, e = by["capture:windows"].best_cpu_ns_per_frame, by["capture:engine"].best_cpu_ns_per_frame
    assert w > 0 and e > 0
    assert ratio.windows_cpu_ns == pytest.approx(w, abs=1e-3)
    assert ratio.windows_cpu == pytest.approx(w / e, rel=2e-3)
    assert list(tmp_path.iterdir()) == []  # the throwaway ledgers and the pcap are gone
