"""The bench dashboard renders in headless Chromium (skipped without it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from test_bench import (  # noqa: F401  (shared with the in-process tests)
    ALGS,
    SIZES,
    THREADS,
    _Dom,
    _parse,
    run,
)


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium_cmd(binary: str, profile: Path) -> list[str]:
    return [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--hide-scrollbars",
    ]


def test_dashboard_renders_in_headless_chromium(run, tmp_path) -> None:
    binary = _chromium()
    if binary is None:
        pytest.skip(
            "no chromium binary on PATH (apt-get install chromium); the HTML is still checked by "
            "test_html_has_plots_and_table"
        )
    from PIL import Image as PIL  # Pillow comes with matplotlib (test extras)

    shot = tmp_path / "dashboard.png"
    url = run["html"].resolve().as_uri()
    subprocess.run(
        _chromium_cmd(binary, tmp_path / "profile")
        + ["--window-size=1300,1900", f"--screenshot={shot}", url],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert shot.is_file() and shot.stat().st_size > 10_000, "chromium wrote no screenshot"
    dom = subprocess.run(
        _chromium_cmd(binary, tmp_path / "profile2") + ["--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    assert _parse(dom).plots and len(_parse(dom).plots) == 2 * len(ALGS) + 1
    img = PIL.open(shot).convert("RGB")
    assert img.size == (1300, 1900)
    colors = img.getcolors(maxcolors=1 << 20)
    count = {rgb: n for n, rgb in colors}

    def near(hexcolor: str) -> int:
        want = tuple(int(hexcolor[i : i + 2], 16) for i in (1, 3, 5))
        return sum(
            n for rgb, n in count.items() if all(abs(a - b) <= 12 for a, b in zip(rgb, want))
        )

    # the first series (blue), the second (orange) and both dashed reference lines are drawn
    for color in ("#1f77b4", "#ff7f0e", "#d62728", "#9467bd"):
        assert near(color) > 200, f"{color} hardly appears in the screenshot: plots not drawn?"
    assert len(count) > 50  # text, anti-aliased lines: not a blank page
