"""`bench` on a shared machine: the best run beside the median, CPU time beside wall time, and the
capture rows (engine and sealed) for every ledger algorithm given and at every worker count, with
their sealed ÷ engine ratios. Tiny measurements: shape and bookkeeping, never speed."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from ledgertool.bench import dashboard
from ledgertool.bench import measure as bench
from ledgertool.bench import rows as bench_rows
from ledgertool.cli.app import app

CAPTURE_ALGS = ["siphash-1-3-128", "blake3-keyed-128"]
WORKERS = [1, 2]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("bench")
    calls = []
    real = bench.capture_file

    def spy(*a, **k):
        calls.append((k["algorithm"], k["workers"], k["tiers"]))
        return real(*a, **k)

    mp = pytest.MonkeyPatch()
    mp.setattr(bench, "capture_file", spy)
    try:
        result = CliRunner().invoke(
            app,
            [
                "bench",
                "--algorithm",
                CAPTURE_ALGS[0],
                "--algorithm",
                "siphash-2-4-64",
                "--algorithm",
                CAPTURE_ALGS[1],
                "--sizes",
                "64",
                "--threads",
                "1",
                "--min-time",
                "0.002",
                "--repeats",
                "3",
                "--paths",
                "default",
                "--capture-frames",
                "2000",
                "--capture-sizes",
                "64",
                "--capture-workers",
                "1,2",
                "--reference-frames",
                "100",
                "--no-tcpdump",
                "--csv",
                str(d / "b.csv"),
                "--json",
            ],
        )
    finally:
        mp.undo()
    assert result.exit_code == 0, (result.output, result.exception)
    return {"json": json.loads(result.stdout), "csv": d / "b.csv", "calls": calls}


def test_capture_rows_for_every_ledger_algorithm_and_worker_count(run) -> None:
    rows = run["json"]["rows"]
    got = [
        (r["benchmark"], r["algorithm"], r["threads"])
        for r in rows
        if r["benchmark"] in ("capture:engine", "capture:sealed", "capture:windows")
    ]
    # a 64-bit digest cannot make a ledger: digest rows only
    assert got == [
        (b, a, w)
        for a in CAPTURE_ALGS
        for w in WORKERS
        for b in ("capture:engine", "capture:sealed", "capture:windows")
    ]
    assert all(
        r["frames"] == 2000
        for r in rows
        if r["benchmark"].startswith("capture:") and r["benchmark"] != "capture:python-reference"
    )
    # warm-up + 3 timed runs of each sealed and windows row, each a capture with that algorithm,
    # worker count and tier
    tiers = [("frames",), ("windows",)]
    assert sorted(set(run["calls"])) == sorted(
        (a, w, t) for a in CAPTURE_ALGS for w in WORKERS for t in tiers
    )
    assert all(run["calls"].count(c) == 4 for c in set(run["calls"]))
    assert [r["algorithm"] for r in rows if r["benchmark"] == "digest"] == [
        CAPTURE_ALGS[0],
        "siphash-2-4-64",
        CAPTURE_ALGS[1],
    ]


def test_best_is_at_most_the_median_and_cpu_is_measured(run) -> None:
    for r in run["json"]["rows"]:
        assert 0 < r["best_seconds"] <= r["seconds"], r
        assert 0 < r["best_cpu_seconds"] <= r["cpu_seconds"], r
        assert r["best_ns_per_frame"] == pytest.approx(
            r["best_seconds"] * 1e9 / r["frames"], rel=1e-3, abs=1e-3
        )
        assert r["cpu_ns_per_frame"] == pytest.approx(
            r["cpu_seconds"] * 1e9 / r["frames"], rel=1e-3, abs=1e-3
        )
        assert r["best_cpu_ns_per_frame"] <= r["cpu_ns_per_frame"]
    with open(run["csv"], newline="") as f:
        back = list(csv.DictReader(f))
    assert [float(r["best_seconds"]) for r in back] == pytest.approx(
        [r["best_seconds"] for r in run["json"]["rows"]]
    )


def test_ratios_per_algorithm_and_worker_count(run) -> None:
    rows = {(r["benchmark"], r["algorithm"], r["threads"]): r for r in run["json"]["rows"]}
    ratios = run["json"]["capture_ratios"]
    assert [(c["algorithm"], c["size"], c["workers"]) for c in ratios] == [
        (a, 64, w) for a in CAPTURE_ALGS for w in WORKERS
    ]
    for c in ratios:
        eng, sealed = (
            rows["capture:engine", c["algorithm"], c["workers"]],
            rows["capture:sealed", c["algorithm"], c["workers"]],
        )
        assert c["engine_cpu_ns"] == pytest.approx(eng["best_cpu_ns_per_frame"], abs=1e-3)
        assert c["sealed_cpu_ns"] == pytest.approx(sealed["best_cpu_ns_per_frame"], abs=1e-3)
        assert c["cpu"] == pytest.approx(
            sealed["best_cpu_ns_per_frame"] / eng["best_cpu_ns_per_frame"], rel=2e-3
        )
        assert c["wall"] == pytest.approx(
            sealed["best_ns_per_frame"] / eng["best_ns_per_frame"], rel=2e-3
        )
        windows = rows["capture:windows", c["algorithm"], c["workers"]]
        assert c["windows_cpu_ns"] == pytest.approx(windows["best_cpu_ns_per_frame"], abs=1e-3)
        assert c["windows_cpu"] == pytest.approx(
            windows["best_cpu_ns_per_frame"] / eng["best_cpu_ns_per_frame"], rel=2e-3
        )


def test_capture_ratio_known_answer() -> None:
    def row(benchmark: str, seconds: float, cpu: float, threads: int = 1) -> bench_rows.BenchRow:
        return bench_rows.BenchRow(
            benchmark,
            "aes-128-gmac",
            64,
            threads,
            1_000_000,
            seconds * 2,
            best_seconds=seconds,
            cpu_seconds=cpu * 2,
            best_cpu_seconds=cpu,
        )

    rows = [
        row("capture:engine", 0.05, 0.04),
        row("capture:sealed", 0.1, 0.1),
        row("capture:engine", 0.03, 0.05, 2),
    ]
    (only,) = bench_rows.capture_ratios(rows)  # 2 workers: no sealed row, no ratio
    assert (only.workers, only.engine_cpu_ns, only.sealed_cpu_ns, only.cpu, only.wall) == (
        1,
        40.0,
        100.0,
        2.5,
        2.0,
    )


def test_csv_without_the_new_columns_reads_as_unknown(run, tmp_path) -> None:
    """A CSV written before the best-of and CPU columns: read back with those unknown, rendered
    with empty cells, null in JSON; appending to it is refused as for every older schema."""
    old_fields = bench_rows.CSV_FIELDS[: bench_rows.CSV_FIELDS.index("best_seconds")]
    old = tmp_path / "old.csv"
    with open(run["csv"], newline="") as f, open(old, "w", newline="") as out:
        w = csv.DictWriter(out, fieldnames=old_fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(csv.DictReader(f))
    back = bench_rows.read_csv(old)
    assert back and all(
        r.best_seconds is None and r.cpu_seconds is None and r.best_cpu_ns_per_frame is None
        for r in back
    )
    assert all(
        r.to_csv()["best_ns_per_frame"] == "" and r.to_json()["cpu_seconds"] is None for r in back
    )
    assert bench_rows.capture_ratios(back)[0].cpu is None
    assert bench_rows.table_cells(back[0], back)[8:11] == ["", "", ""]
    assert '<table id="ratios">' in dashboard.render_html(back)
    result = CliRunner().invoke(app, ["bench", "--from-csv", str(old), "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    doc = json.loads(result.stdout)
    assert doc["rows"][0]["best_seconds"] is None and len(doc["capture_ratios"]) == len(
        CAPTURE_ALGS
    ) * len(WORKERS)


def test_dashboard_shows_best_cpu_and_ratios(run) -> None:
    rows = bench_rows.read_csv(run["csv"])
    text = dashboard.render_html(rows)
    assert "<th>ns/frame</th>" in text and "<th>CPU ns/frame</th>" in text
    raw = text.split('<table id="raw">', 1)[1]
    assert raw.count("\nbest ") == 2 * len(rows)  # wall and CPU: the median, the best below it
    ratios = text.split('<table id="ratios">', 1)[1].split("</table>", 1)[0]
    assert ratios.count("<tr>") == 1 + len(CAPTURE_ALGS) * len(WORKERS)
    assert all(a in ratios for a in CAPTURE_ALGS)
