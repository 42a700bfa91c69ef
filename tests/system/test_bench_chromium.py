"""The bench dashboard renders in headless Chromium (skipped without it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledgertool.cli.app import app

ALGS = ["siphash-1-3-128", "siphash-2-4-64"]


SIZES = [64, 1500, 65536]


THREADS = [1, 2]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("bench")
    csv_path, html_path = d / "bench.csv", d / "dash.html"
    result = CliRunner().invoke(app, [
        "bench", "--algorithm", ALGS[0], "--algorithm", ALGS[1], "--sizes", ",".join(map(str, SIZES)),
        "--threads", ",".join(map(str, THREADS)), "--min-time", "0.002", "--repeats", "2",
        "--capture-frames", "3000", "--reference-frames", "300", "--paths", "default", "--capture-workers", "1",
        "--csv", str(csv_path), "--html", str(html_path), "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    return {"dir": d, "csv": csv_path, "html": html_path, "json": json.loads(result.stdout)}


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
            self.plots.append({"kind": a["data-kind"], "algorithm": a["data-algorithm"], "series": [], "refs": [],
                               "circles": 0, "bars": 0})
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


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium_cmd(binary: str, profile: Path) -> list[str]:
    return [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
            "--hide-scrollbars"]


def test_dashboard_renders_in_headless_chromium(run, tmp_path) -> None:
    binary = _chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (apt-get install chromium); the HTML is still checked by "
                    "test_html_has_plots_and_table")
    from PIL import Image as PIL  # Pillow comes with matplotlib (test extras)
    shot = tmp_path / "dashboard.png"
    url = run["html"].resolve().as_uri()
    subprocess.run(_chromium_cmd(binary, tmp_path / "profile") + ["--window-size=1300,1900", f"--screenshot={shot}", url],
                   capture_output=True, timeout=120, check=False)
    assert shot.is_file() and shot.stat().st_size > 10_000, "chromium wrote no screenshot"
    dom = subprocess.run(_chromium_cmd(binary, tmp_path / "profile2") + ["--dump-dom", url],
                         capture_output=True, text=True, timeout=120, check=False).stdout
    assert _parse(dom).plots and len(_parse(dom).plots) == 2 * len(ALGS) + 1
    img = PIL.open(shot).convert("RGB")
    assert img.size == (1300, 1900)
    colors = img.getcolors(maxcolors=1 << 20)
    count = {rgb: n for n, rgb in colors}

    def near(hexcolor: str) -> int:
        want = tuple(int(hexcolor[i:i + 2], 16) for i in (1, 3, 5))
        return sum(n for rgb, n in count.items() if all(abs(a - b) <= 12 for a, b in zip(rgb, want)))

    # the first series (blue), the second (orange) and both dashed reference lines are drawn
    for color in ("#1f77b4", "#ff7f0e", "#d62728", "#9467bd"):
        assert near(color) > 200, f"{color} hardly appears in the screenshot: plots not drawn?"
    assert len(count) > 50  # text, anti-aliased lines: not a blank page
