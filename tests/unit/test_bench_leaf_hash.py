"""`bench --leaf-hash`: the sealed capture rows once per leaf construction (capture:sealed for
SHA-256 leaves, capture:sealed-blake3 for BLAKE3 leaf entries, ADR 0013), capture:windows once,
and the blake3 sealed path's CPU ratio to the engine in the ratio table, the JSON, the CSV and the
dashboard; CSVs without the new rows still render. Tiny measurements: names, counts and
bookkeeping, never speed."""

from __future__ import annotations

import csv
import json
from dataclasses import fields
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, cli

from ledgertool.bench import dashboard
from ledgertool.bench import measure as bench
from ledgertool.bench import rows as bench_rows
from ledgertool.cli import bench as bench_cli
from ledgertool.errors import UsageError
from ledgertool.ledger.header import load_ledger

SCHEMAS = REPO / "schemas"
ALG = "siphash-1-3-128"
WORKERS = [1, 2]
FRAMES = 1500
REPEATS = 2
CAPTURE_ROWS = ("capture:engine", "capture:sealed", "capture:sealed-blake3", "capture:windows")


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def validate(doc, name: str) -> None:
    jsonschema.Draft202012Validator(
        schema(name), format_checker=jsonschema.FormatChecker()
    ).validate(doc)


# --------------------------------------------------------------------------- the option


def test_parse_leaf_hashes_known_answers() -> None:
    parse = bench_cli.parse_leaf_hashes
    assert parse("sha256", "v2") == ("sha256",)
    assert parse("blake3", "v2") == ("blake3",)
    # each once, in one order whatever the order given
    assert parse("blake3, sha256", "v2") == parse("sha256,blake3,sha256", "v2")
    assert parse("blake3, sha256", "v2") == ("sha256", "blake3")
    assert parse("sha256", "v1") == ("sha256",)
    for bad in ("", ",", "md5", "sha256,md5", "SHA256", "sha-256", "blake3 sha256"):
        with pytest.raises(UsageError, match="--leaf-hash"):
            parse(bad, "v2")
    with pytest.raises(UsageError, match="--ledger-format v2"):
        parse("sha256,blake3", "v1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--leaf-hash", "md5"],
            "ledgertool: error: --leaf-hash 'md5': expected a comma-separated",
        ),
        (["--leaf-hash", "sha256,"], None),  # a trailing comma is only a separator: accepted
        (
            ["--leaf-hash", "blake3", "--ledger-format", "v1"],
            "ledgertool: error: --leaf-hash blake3 needs --ledger-format v2",
        ),
    ],
)
def test_bad_leaf_hash_is_one_line_and_exit_2(args, message) -> None:
    # --capture-frames 0 and one tiny digest row: an accepted option costs milliseconds
    tiny = ["--algorithm", ALG, "--sizes", "64", "--threads", "1", "--paths", "default"]
    tiny += ["--min-time", "0.001", "--repeats", "1", "--capture-frames", "0", "--json"]
    r = cli("bench", *tiny, *args)
    if message is None:
        assert r.returncode == 0, r.stderr
        assert [row["benchmark"] for row in json.loads(r.stdout)["rows"]] == ["digest"]
        return
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(message), r.stderr
    assert "Traceback" not in r.stderr


def test_library_refuses_what_the_cli_refuses(tmp_path) -> None:
    with pytest.raises(ValueError, match="format 2"):
        bench.bench_capture(10, 64, workdir=tmp_path, ledger_format=1, leaf_hashes=("blake3",))
    for bad in ((), ("md5",)):
        with pytest.raises(ValueError, match="leaf hashes"):
            bench.bench_capture(10, 64, workdir=tmp_path, leaf_hashes=bad)
    assert list(tmp_path.iterdir()) == []  # refused before the pcap is written


# --------------------------------------------------------------------------- one tiny run


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """`bench --leaf-hash sha256,blake3` with 1 and 2 workers; every capture_file call is seen,
    with the leaf construction of the ledger it wrote (read back from its ledger.json)."""
    d = tmp_path_factory.mktemp("bench-leaf")
    calls = []
    real = bench.capture_file

    def spy(pcap, ledger_dir, **k):
        res = real(pcap, ledger_dir, **k)
        calls.append((k["workers"], k["tiers"], k["leaf_hash"], load_ledger(ledger_dir).leaf_hash))
        return res

    mp = pytest.MonkeyPatch()
    mp.setattr(bench, "capture_file", spy)
    try:
        r = cli(
            "bench", "--algorithm", ALG, "--sizes", "64", "--threads", "1", "--paths", "default",
            "--min-time", "0.002", "--repeats", REPEATS, "--capture-frames", FRAMES,
            "--capture-workers", ",".join(map(str, WORKERS)), "--reference-frames", 100,
            "--no-tcpdump", "--leaf-hash", "blake3,sha256", "--csv", d / "b.csv", "--json",
        )  # fmt: skip
    finally:
        mp.undo()
    assert r.returncode == 0, r.stderr
    return {"doc": json.loads(r.stdout), "csv": d / "b.csv", "calls": calls, "dir": d}


def test_rows_for_both_constructions_and_windows_once(run) -> None:
    rows = run["doc"]["rows"]
    assert [(r["benchmark"], r["threads"]) for r in rows if r["benchmark"] in CAPTURE_ROWS] == [
        (b, w) for w in WORKERS for b in CAPTURE_ROWS
    ]
    assert all(
        r["frames"] == FRAMES and r["algorithm"] == ALG and r["repeats"] == REPEATS
        for r in rows
        if r["benchmark"] in CAPTURE_ROWS
    )
    assert [r["benchmark"] for r in rows].count("capture:python-reference") == 1
    validate(run["doc"], "bench-report.schema.json")


def test_each_sealed_row_captures_with_its_own_leaf_construction(run) -> None:
    """Warm-up + REPEATS timed captures per row; the blake3 row's ledgers have BLAKE3 leaf entries,
    the sealed and windows rows' SHA-256 leaves (a window log's leaves are SHA-256 always)."""
    want = {}
    for w in WORKERS:
        want[w, ("frames",), "sha256", "sha256"] = REPEATS + 1
        want[w, ("frames",), "blake3", "blake3"] = REPEATS + 1
        want[w, ("windows",), "sha256", "sha256"] = REPEATS + 1
    got = {c: run["calls"].count(c) for c in set(run["calls"])}
    assert got == want


def test_blake3_ratio_from_the_rows_of_the_run(run) -> None:
    rows = {(r["benchmark"], r["threads"]): r for r in run["doc"]["rows"]}
    ratios = run["doc"]["capture_ratios"]
    assert [(c["algorithm"], c["size"], c["workers"]) for c in ratios] == [
        (ALG, 64, w) for w in WORKERS
    ]
    for c in ratios:
        eng = rows["capture:engine", c["workers"]]["best_cpu_ns_per_frame"]
        b3 = rows["capture:sealed-blake3", c["workers"]]["best_cpu_ns_per_frame"]
        sealed = rows["capture:sealed", c["workers"]]["best_cpu_ns_per_frame"]
        assert isinstance(c["sealed_blake3_cpu_ns"], float) and isinstance(
            c["sealed_blake3_cpu"], float
        )  # numbers, not text
        assert c["sealed_blake3_cpu_ns"] == pytest.approx(b3, abs=1e-3)
        assert c["sealed_blake3_cpu"] == pytest.approx(b3 / eng, rel=2e-3)
        assert c["sealed_cpu_ns"] == pytest.approx(
            sealed, abs=1e-3
        )  # the sha256 row's, not blake3's


def test_csv_round_trip_with_the_new_rows(run, tmp_path) -> None:
    with open(run["csv"], newline="") as f:
        raw = list(csv.DictReader(f))
    for rec in raw:
        validate(rec, "bench.csv.schema.json")
    assert [r["benchmark"] for r in raw].count("capture:sealed-blake3") == len(WORKERS)
    back = bench_rows.read_csv(run["csv"])
    assert [r.to_json() for r in back] == run["doc"]["rows"]
    assert [c.to_json() for c in bench_rows.capture_ratios(back)] == run["doc"]["capture_ratios"]
    again = tmp_path / "again.csv"  # written from the rows read back: the same bytes
    bench_rows.append_csv(again, back)
    assert again.read_bytes() == run["csv"].read_bytes()
    r = cli("bench", "--from-csv", run["csv"], "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == run["doc"]


def test_table_and_dashboard_show_the_blake3_sealed_path(run) -> None:
    r = cli("bench", "--from-csv", run["csv"])
    assert r.returncode == 0, r.stderr
    assert "sealed-blake3" in r.stdout
    rows = bench_rows.read_csv(run["csv"])
    page = dashboard.render_html(rows)
    table = page.split('<table id="ratios">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 1 + len(WORKERS)
    assert "<th>sealed-blake3 ÷ engine, CPU</th>" in table
    c = bench_rows.capture_ratios(rows)[0]
    assert f'<td class="n">{bench_rows.ratio_text(c.sealed_blake3_cpu)}</td>' in table
    assert f"sealed-blake3 ({ALG}, 64 B, 1 worker)" in page  # its bar in the capture plot
    labels = [a.label for a in dashboard.answer_rows(rows)]
    assert labels[:3] == [
        f"capture path (digest engine), {ALG}",
        f"capture path (with sealing), {ALG}",
        f"capture path (with sealing, blake3 leaves), {ALG}",
    ]


def _rewrite(src: Path, dst: Path, columns: list[str], keep) -> None:
    with open(src, newline="") as f, open(dst, "w", newline="") as out:
        w = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rec for rec in csv.DictReader(f) if keep(rec))


@pytest.mark.parametrize("columns", ["current", "before best-of and CPU", "first schema"])
def test_csv_without_blake3_rows_still_renders(run, tmp_path, columns) -> None:
    cols = {
        "current": bench_rows.CSV_FIELDS,
        "before best-of and CPU": bench_rows.CSV_FIELDS[
            : bench_rows.CSV_FIELDS.index("best_seconds")
        ],
        "first schema": bench_rows.CSV_REQUIRED,
    }[columns]
    old = tmp_path / "old.csv"
    _rewrite(run["csv"], old, cols, lambda rec: rec["benchmark"] != "capture:sealed-blake3")
    rows = bench_rows.read_csv(old)
    assert "capture:sealed-blake3" not in {r.benchmark for r in rows}
    ratios = bench_rows.capture_ratios(rows)
    assert len(ratios) == len(WORKERS)
    assert all(c.sealed_blake3_cpu_ns is None and c.sealed_blake3_cpu is None for c in ratios)
    assert '<table id="ratios">' in dashboard.render_html(rows)
    r = cli("bench", "--from-csv", old, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    validate(doc, "bench-report.schema.json")
    assert [(c["sealed_blake3_cpu_ns"], c["sealed_blake3_cpu"]) for c in doc["capture_ratios"]] == [
        (None, None)
    ] * len(WORKERS)
    r = cli("bench", "--from-csv", old)  # the rendered tables
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


# --------------------------------------------------------------------------- ratio math


def _row(benchmark: str, best_cpu: float, best_wall: float, workers: int = 1, host: str = "h"):
    """A row of 1 M frames whose best run took `best_wall` s and `best_cpu` s of CPU."""
    return bench_rows.BenchRow(
        benchmark,
        "aes-128-gmac",
        64,
        workers,
        1_000_000,
        best_wall * 2,
        host=host,
        best_seconds=best_wall,
        cpu_seconds=best_cpu * 2,
        best_cpu_seconds=best_cpu,
    )


def test_ratio_known_answers() -> None:
    rows = [
        _row("capture:engine", 0.040, 0.050),
        _row("capture:sealed", 0.100, 0.100),
        _row("capture:sealed-blake3", 0.070, 0.080),
        _row("capture:windows", 0.048, 0.060),
    ]
    (c,) = bench_rows.capture_ratios(rows)
    assert c.to_json() == {
        "algorithm": "aes-128-gmac",
        "size": 64,
        "workers": 1,
        "engine_cpu_ns": 40.0,
        "sealed_cpu_ns": 100.0,
        "cpu": 2.5,
        "wall": 2.0,
        "windows_cpu_ns": 48.0,
        "windows_cpu": 1.2,
        "sealed_blake3_cpu_ns": 70.0,
        "sealed_blake3_cpu": 1.75,
    }
    assert bench_rows.ratio_cells(c) == [
        "aes-128-gmac", "64 B", "1", "40.0", "100.0", "2.50×", "2.00×", "70.0", "1.75×", "48.0",
        "1.20×",
    ]  # fmt: skip


def test_ratio_with_blake3_leaves_only_and_unmatched_rows() -> None:
    rows = [
        _row("capture:engine", 0.030, 0.030),
        _row("capture:sealed-blake3", 0.090, 0.120),  # --leaf-hash blake3: no capture:sealed
        _row("capture:sealed-blake3", 0.200, 0.200, workers=2),  # no engine at 2 workers
        _row("capture:engine", 0.050, 0.050, host="other"),  # another host: no sealed row
    ]
    (c,) = bench_rows.capture_ratios(rows)
    assert (c.workers, c.engine_cpu_ns, c.sealed_cpu_ns, c.cpu, c.wall) == (
        1,
        30.0,
        None,
        None,
        None,
    )
    assert (c.sealed_blake3_cpu_ns, c.sealed_blake3_cpu) == (90.0, 3.0)
    assert (c.windows_cpu_ns, c.windows_cpu) == (None, None)
    # a later run of the same configuration replaces the earlier one's figures
    (c,) = bench_rows.capture_ratios(rows + [_row("capture:sealed-blake3", 0.060, 0.060)])
    assert (c.sealed_blake3_cpu_ns, c.sealed_blake3_cpu) == (60.0, 2.0)
    # a row without CPU columns (an older CSV): the figure and its ratio are unknown
    b3 = _row("capture:sealed-blake3", 0.060, 0.060)
    b3.best_cpu_seconds = None
    (c,) = bench_rows.capture_ratios(rows[:1] + [b3])
    assert (c.sealed_blake3_cpu_ns, c.sealed_blake3_cpu) == (None, None)


# --------------------------------------------------------------------------- one vocabulary


def test_names_agree_across_rows_schemas_and_tables() -> None:
    csv_enum = schema("bench.csv.schema.json")["properties"]["benchmark"]["enum"]
    report = schema("bench-report.schema.json")["properties"]
    row_enum = report["rows"]["items"]["properties"]["benchmark"]["enum"]
    assert list(bench_rows.BENCHMARKS) == csv_enum == row_enum
    assert set(bench_rows.SEALED_BENCHMARKS.values()) <= set(bench_rows.BENCHMARKS)
    assert bench_rows.SEALED_BENCHMARKS["sha256"] == "capture:sealed"  # the name rows had before
    from ledgertool.digest.engine import LEAF_HASHES

    assert tuple(bench_rows.SEALED_BENCHMARKS) == LEAF_HASHES
    ratio = report["capture_ratios"]["items"]
    names = [f.name for f in fields(bench_rows.CaptureRatio)]
    assert names == ratio["required"] == list(ratio["properties"])
    c = bench_rows.CaptureRatio("a", 64, 1, None, None, None, None)
    assert len(bench_rows.ratio_cells(c)) == len(bench_rows.RATIO_HEAD)
