"""Progress that tells the truth: the bench's plan counts seconds of work, not runs (a capture run
of many frames weighs what it takes), and a progress line's figures are left out, not cut, where
the terminal is narrow."""

from __future__ import annotations

from ledgertool.cli.bench import CAPTURE_FRAME_S, BenchPlan
from ledgertool.cli.progress import stats_text
from ledgertool.progress import SECONDS_OF_WORK, Progress


def test_bench_plan_weighs_a_capture_run_by_its_frames():
    plan = BenchPlan.of(4, [64], 0.05, 3, 10_000_000, ("a", "b"), (1, 2))
    digest_s = 0.05 * 3 + 0.05
    capture_s = 10_000_000 * (2 * 2 + 1) * 3 * CAPTURE_FRAME_S + 0.5
    p = plan.progress(4, "capture 64 B frames")  # the four digest runs done, as estimated
    assert p.unit == SECONDS_OF_WORK and (p.items, p.items_unit) == (4, "of 5 runs")
    assert p.done == round(4 * digest_s * 1000)
    assert p.total == round((4 * digest_s + capture_s) * 1000)
    assert p.done / p.total < 0.01  # four of five runs, yet under 1 % of the time


def test_bench_plan_takes_measured_times_and_rescales_the_captures():
    plan = BenchPlan([1.0, 10.0, 10.0], captures_from=1)
    plan.started -= 2.0  # the first run took 2 s
    plan.ran(0)
    assert plan.estimates[0] >= 2.0
    plan.started -= 5.0  # the first capture run took half its estimate
    plan.ran(1)
    assert 5.0 <= plan.estimates[1] < 5.5 and 5.0 <= plan.estimates[2] < 5.5


def test_seconds_of_work_read_as_seconds_and_runs():
    p = Progress("bench", 12_400, 98_000, SECONDS_OF_WORK, 3, "of 40 runs", "x")
    assert stats_text(p, 5.0) == "12 of ~98 s, 3 of 40 runs (x)"


def test_figures_that_do_not_fit_are_left_out_whole():
    p = Progress("capture", 40 << 20, 80 << 20, "bytes", 1_234_567, "frames")
    full = stats_text(p, 2.0)
    assert full.startswith("40.0 MiB of 80.0 MiB, 1,234,567 frames, ") and "Gbit/s" in full
    short = stats_text(p, 2.0, 36)
    assert short == "40.0 MiB of 80.0 MiB, 0.17 Gbit/s", short
    assert stats_text(p, 2.0, 5) == "40.0 MiB of 80.0 MiB"  # the first part always stays


def test_compact_reports_segments_done_of_the_total(sample_ledger):
    from ledgertool.ledger.compact import compact_ledger

    seen = []
    res = compact_ledger(sample_ledger, progress=seen.append)
    assert len(res.compacted) == 3
    assert [(p.phase, p.done, p.total, p.unit) for p in seen][-1] == ("compact", 3, 3, "segments")
    assert [p.done for p in seen] == [0, 1, 1, 2, 2, 3]
    assert seen[-1].items == 294 and seen[-1].current == "link link0 segment 2"
