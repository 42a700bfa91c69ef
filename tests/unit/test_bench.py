"""bench: option parsing, threaded native measurement, CSV schema, and the HTML/PNG dashboard.

Measurements here are tiny (milliseconds) so the suite stays fast on a noisy 2-core box; they check
shape and bookkeeping, never speed.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import REPO
from typer.testing import CliRunner

from ledgertool.algorithms import get_algorithm
from ledgertool.bench import dashboard
from ledgertool.bench import measure as bench
from ledgertool.bench import rows as bench_rows
from ledgertool.cli import bench as bench_cli
from ledgertool.cli.app import app
from ledgertool.cli.flags import cli_message
from ledgertool.errors import UsageError

CSV_SCHEMA = json.loads((REPO / "schemas" / "bench.csv.schema.json").read_text())
ALGS = ["siphash-1-3-128", "siphash-2-4-64"]
SIZES = [64, 1500, 65536]
THREADS = [1, 2]


# --------------------------------------------------------------------------- pure parts


def test_parse_sizes() -> None:
    assert bench_cli.parse_sizes("64, 1500,9000,64KiB,1MiB,32MiB") == [
        64,
        1500,
        9000,
        65536,
        1 << 20,
        32 << 20,
    ]
    assert bench_cli.parse_sizes("4kib,2B") == [4096, 2]
    for bad in ("", "64,x", "0", "1GiB", "1.5MiB", "64k"):
        with pytest.raises(UsageError):
            bench_cli.parse_sizes(bad)


def test_parse_threads() -> None:
    assert bench_cli.parse_threads("1,2, 4") == [1, 2, 4]
    for bad in ("", "0", "a", "1,-2", "2000"):
        with pytest.raises(UsageError):
            bench_cli.parse_threads(bad)


def test_cli_defaults_match_library() -> None:
    """cli.bench repeats two library defaults so `--help` needs no numpy; they must not drift."""
    assert (bench_cli.DEFAULT_NOISY_CV, bench_cli.DIGEST_BATCH) == (
        bench.DEFAULT_NOISY_CV,
        bench.DIGEST_BATCH,
    )


def test_png_without_matplotlib_names_the_option(monkeypatch) -> None:
    """The library names the setting (`png`); the CLI shows the option, as before the split."""
    import builtins

    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(UsageError) as e:
        dashboard.require_matplotlib()
    assert str(e.value).startswith("png needs matplotlib: pip install 'ledgertool[plots]'")
    assert (
        cli_message(e.value)
        == "--png needs matplotlib: pip install 'ledgertool[plots]' (the HTML dashboard does not)"
    )


def test_spread_and_human_size() -> None:
    assert bench.spread([100.0]) == 0.0
    assert bench.spread([100.0, 100.0, 100.0]) == 0.0
    assert bench.spread([90.0, 110.0]) == pytest.approx(14.142135623730951 / 100)
    assert [bench_rows.human_size(n) for n in (64, 1500, 4096, 65536, 32 << 20)] == [
        "64 B",
        "1500 B",
        "4 KiB",
        "64 KiB",
        "32 MiB",
    ]


def test_line_rate_equivalent() -> None:
    # 595.2 Mframes/s of 64-byte frames is exactly 400G on the wire
    row = bench_rows.BenchRow("digest", "siphash-1-3-128", 64, 1, 400_000_000_000 // 672, 1.0)
    assert dashboard.line_rate_gbit(row) == pytest.approx(400.0, rel=1e-9)
    assert row.ns_per_frame == pytest.approx(1e9 / row.frames_per_s)


def test_bench_digest_threads_aggregate() -> None:
    one = bench.bench_digest("siphash-1-3-128", 64, threads=1, min_time=0.002, repeats=2)
    two = bench.bench_digest("siphash-1-3-128", 64, threads=2, min_time=0.002, repeats=2)
    assert (one.threads, two.threads) == (1, 2)
    assert two.frames % 2 == 0 and two.frames > 0
    assert one.seconds > 0 and two.seconds > 0 and one.repeats == 2
    assert 0.0 <= one.cv and isinstance(one.noisy, bool)
    big = bench.bench_digest("siphash-2-4-128", 1 << 20, threads=2, min_time=0.002, repeats=2)
    assert big.size == 1 << 20 and big.frames >= 2


def test_digest_paths_choice() -> None:
    from ledgertool.digest.engine import cpu_paths

    sip = get_algorithm("siphash-1-3-128")
    avail = cpu_paths(sip)
    best = bench.digest_paths(sip.name, "best")
    assert best[-1] == [p for p in avail if not p.endswith("-mb")][0]
    assert all(p in avail for p in best) and len(best) == (
        2 if any(p.endswith("-mb") for p in avail) else 1
    )
    assert bench.digest_paths(sip.name, "all") == avail
    assert bench.digest_paths(sip.name, "default") == [None]
    assert bench.digest_paths(sip.name, "portable,no-such") == ["portable"]
    mb = bench.bench_digest("siphash-1-3-128", 64, min_time=0.002, repeats=2, path=avail[0])
    assert mb.cpu_path == avail[0] and mb.frames > 0
    row = bench_rows.BenchRow("digest", "siphash-1-3-128", 64, 2, 1000, 1e-3, tsc_ghz=2.0)
    # 1 us/frame aggregate, 2 threads
    assert row.cycles_per_frame == pytest.approx(1e9 / 1e6 * 2 * 2.0)
    assert row.cores_needed(400e9) == pytest.approx(400e9 / 672 / 5e5)


def test_noisy_flag_follows_threshold() -> None:
    row = bench.bench_digest("siphash-1-3-64", 64, min_time=0.001, repeats=3, noisy_cv=0.0)
    assert row.noisy == (row.cv > 0.0)
    row = bench.bench_digest("siphash-1-3-64", 64, min_time=0.001, repeats=3, noisy_cv=10.0)
    assert not row.noisy


# --------------------------------------------------------------------------- one measured run for
# the CLI tests


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("bench")
    csv_path, html_path = d / "bench.csv", d / "dash.html"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "--algorithm",
            ALGS[0],
            "--algorithm",
            ALGS[1],
            "--sizes",
            ",".join(map(str, SIZES)),
            "--threads",
            ",".join(map(str, THREADS)),
            "--min-time",
            "0.002",
            "--repeats",
            "2",
            "--capture-frames",
            "3000",
            "--reference-frames",
            "300",
            "--paths",
            "default",
            "--capture-workers",
            "1",
            "--csv",
            str(csv_path),
            "--html",
            str(html_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return {"dir": d, "csv": csv_path, "html": html_path, "json": json.loads(result.stdout)}


def _csv_rows(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_csv_matches_schema(run) -> None:
    header, rows = _csv_rows(run["csv"])
    assert header == CSV_SCHEMA["x-csv-columns"] == bench_rows.CSV_FIELDS
    from ledgertool.algorithms import get_algorithm
    from ledgertool.digest.engine import cpu_path

    paths = {a: [cpu_path(get_algorithm(a, for_ledger=False))] for a in ALGS}  # --paths default
    digest = sum(len(p) for p in paths.values()) * len(SIZES) * len(THREADS)
    workers = [1]  # engine and sealed per worker count and ledger algorithm (not siphash-2-4-64)
    capture = ["capture:engine", "capture:sealed", "capture:windows"] * len(workers)
    capture += ["capture:python-reference"]
    if shutil.which("tcpdump"):
        capture.append("capture:tcpdump")
    assert len(rows) == digest + len(capture) == len(run["json"]["rows"])
    props = CSV_SCHEMA["properties"]
    for row in rows:
        assert set(row) == set(CSV_SCHEMA["required"])
        for name, value in row.items():
            spec = props[name]
            if "pattern" in spec:
                assert re.fullmatch(spec["pattern"], value), (name, value)
            if "enum" in spec:
                assert value in spec["enum"], (name, value)
    got = {
        (r["algorithm"], r["cpu_path"], int(r["size"]), int(r["threads"]))
        for r in rows
        if r["benchmark"] == "digest"
    }
    assert got == {(a, p, s, t) for a in ALGS for p in paths[a] for s in SIZES for t in THREADS}
    assert [r["benchmark"] for r in rows[digest:]] == capture
    assert [int(r["threads"]) for r in rows[digest : digest + 2 * len(workers) : 2]] == workers
    for r in rows:  # cycles at the measured TSC rate: per frame over all threads' time
        ghz = float(r["tsc_ghz"])
        if ghz > 0:
            assert float(r["cycles_per_frame"]) == pytest.approx(
                float(r["ns_per_frame"]) * int(r["threads"]) * ghz, rel=2e-3, abs=0.02
            )
    for r in rows:
        fps = float(r["frames_per_s"])
        assert fps == pytest.approx(int(r["frames"]) / float(r["seconds"]), rel=1e-3)
        assert float(r["ns_per_frame"]) == pytest.approx(1e9 / fps, rel=1e-3)
        assert float(r["gbit_per_s"]) == pytest.approx(
            fps * int(r["size"]) * 8 / 1e9, rel=1e-3, abs=1e-4
        )
        assert r["noisy"] == ("true" if float(r["cv"]) > 0.05 else "false")


def test_each_output_file_is_announced_on_stderr(tmp_path) -> None:
    """A new user's pass: --html was announced ("wrote PATH"), --csv was written in silence."""
    out_csv, out_html = tmp_path / "b.csv", tmp_path / "b.html"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "--algorithm",
            ALGS[0],
            "--sizes",
            "64",
            "--threads",
            "1",
            "--min-time",
            "0.001",
            "--repeats",
            "1",
            "--capture-frames",
            "0",
            "--paths",
            "default",
            "--csv",
            str(out_csv),
            "--html",
            str(out_html),
        ],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    assert [ln for ln in result.stderr.splitlines() if ln.startswith("wrote ")] == [
        f"wrote {out_csv}",
        f"wrote {out_html}",
    ]
    assert len(bench_rows.read_csv(out_csv)) == 1


def test_csv_appends_without_second_header(run, tmp_path) -> None:
    path = tmp_path / "again.csv"
    shutil.copy(run["csv"], path)
    rows = bench_rows.read_csv(path)
    bench_rows.append_csv(path, rows[:2])
    header, again = _csv_rows(path)
    assert len(again) == len(rows) + 2
    assert path.read_text().count("time,host,") == 1


def test_old_schema_csv_is_read_but_not_appended(run, tmp_path) -> None:
    old = tmp_path / "old.csv"
    _, rows = _csv_rows(run["csv"])
    with open(old, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=bench_rows.CSV_REQUIRED, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    back = bench_rows.read_csv(old)
    assert len(back) == len(rows) and all(r.cores == 0 and not r.noisy for r in back)
    assert "<svg" in dashboard.render_html(back)
    with pytest.raises(UsageError, match="header"):
        bench_rows.append_csv(old, back[:1])


def test_bad_csv_is_usage_error(tmp_path) -> None:
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(UsageError, match="missing columns"):
        bench_rows.read_csv(tmp_path / "x.csv")
    with pytest.raises(UsageError, match="cannot read"):
        bench_rows.read_csv(tmp_path / "none.csv")


# --------------------------------------------------------------------------- dashboard, no browser


class _Dom(HTMLParser):
    """Collects the plot SVGs (kind, algorithm, series, markers, reference lines) and table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.plots: list[dict] = []
        self.table_rows = 0
        self.in_tbody = False
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        if tag in ("script", "link", "img", "iframe") or (tag != "svg" and a.get("src")):
            self.external.append(tag)
        if tag == "svg" and "plot" in (a.get("class") or ""):
            self.plots.append(
                {
                    "kind": a["data-kind"],
                    "algorithm": a["data-algorithm"],
                    "series": [],
                    "refs": [],
                    "circles": 0,
                    "bars": 0,
                }
            )
        elif self.plots and tag == "g" and a.get("class") == "series":
            self.plots[-1]["series"].append(a["data-label"])
        elif self.plots and tag == "polyline" and a.get("class") == "ref":
            self.plots[-1]["refs"].append(a["data-label"])
        elif self.plots and tag == "circle":
            self.plots[-1]["circles"] += 1
        elif self.plots and tag == "rect" and a.get("class") == "bar":
            self.plots[-1]["bars"] += 1
        elif tag == "table":
            self.in_raw = a.get("id") == "raw"  # the raw rows, not the answer table above the plots
        elif tag == "tbody" and getattr(self, "in_raw", False):
            self.in_tbody = True
        elif tag == "tr" and self.in_tbody:
            self.table_rows += 1

    def handle_endtag(self, tag) -> None:
        if tag == "tbody":
            self.in_tbody = False


def _parse(text: str) -> _Dom:
    dom = _Dom()
    dom.feed(text)
    return dom


def test_html_has_plots_and_table(run) -> None:
    text = run["html"].read_text()
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text
    dom = _parse(text)
    assert dom.external == []  # self-contained: no script, stylesheet link or image
    kinds = [(p["kind"], p["algorithm"]) for p in dom.plots]
    assert kinds == [(k, a) for a in sorted(ALGS) for k in ("size", "threads")] + [("capture", "")]
    for p in dom.plots[:-1]:
        if p["kind"] == "size":
            assert p["series"] == ["1 thread", "2 threads"]
            assert p["circles"] == len(SIZES) * len(THREADS)
            assert len(p["refs"]) == 3 and all("÷" in r and "core" in r for r in p["refs"])
        else:
            assert p["series"] == ["64 B", "1500 B", "64 KiB"]
            assert p["circles"] == len(SIZES) * len(THREADS)
            assert len(p["refs"]) == 3 and [r.split()[0] for r in p["refs"]] == [
                "400G",
                "800G",
                "1.6T",
            ]
    assert dom.plots[-1]["bars"] == len(
        [r for r in run["json"]["rows"] if r["benchmark"].startswith("capture:")]
    )
    assert dom.table_rows == len(run["json"]["rows"])


def test_from_csv_rerenders_without_measuring(run, tmp_path, monkeypatch) -> None:
    def boom(*a, **k):
        raise AssertionError("measured")

    monkeypatch.setattr(bench, "bench_digest", boom)
    monkeypatch.setattr(bench, "bench_capture", boom)
    out = tmp_path / "again.html"
    result = CliRunner().invoke(app, ["bench", "--from-csv", str(run["csv"]), "--html", str(out)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert out.read_text() == run["html"].read_text()
    result = CliRunner().invoke(
        app, ["bench", "--from-csv", str(run["csv"]), "--csv", str(tmp_path / "x.csv")]
    )
    assert isinstance(result.exception, UsageError)


def test_noisy_rows_are_marked(run) -> None:
    rows = bench_rows.read_csv(run["csv"])
    rows[0].noisy = True
    rows[0].cv = 0.5
    text = dashboard.render_html(rows)
    assert 'class="warn"' in text and 'class="noisy"' in text and 'fill="#fff" stroke=' in text


def test_png_plots(run, tmp_path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "--from-csv", str(run["csv"]), "--png", str(tmp_path / "png")]
    )
    assert result.exit_code == 0, (result.output, result.exception)
    names = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert names == sorted(
        [f"{a}-{k}.png" for a in ALGS for k in ("size", "threads")] + ["capture.png"]
    )
    for p in (tmp_path / "png").iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


# --------------------------------------------------------------------------- dashboard in a real
# browser


def test_capture_sealed_rows_into_a_v2_ledger(tmp_path, monkeypatch) -> None:
    """`bench --ledger-format v2`: the capture:sealed row captures into a v2 ledger (every frame
    sealed as raw record files: capture_file is called with ledger_format 2)."""
    formats = []
    real = bench.capture_file

    def spy(*a, **k):
        formats.append(k["ledger_format"])
        return real(*a, **k)

    monkeypatch.setattr(bench, "capture_file", spy)
    rows = bench.bench_capture(
        2000, 64, repeats=1, workdir=tmp_path, tcpdump=False, ledger_format=2
    )
    sealed = [r for r in rows if r.benchmark == "capture:sealed"]
    assert (
        len(sealed) == 1 and sealed[0].frames == 2000 and set(formats) == {2} and len(formats) >= 2
    )
