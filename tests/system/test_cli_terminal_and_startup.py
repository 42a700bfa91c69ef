"""What the CLI does as a process: progress on a terminal's stderr only (a pty), what `--help` and
`--version` load at start-up, and the bench dashboard in headless Chromium."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_output import (  # noqa: F401  (shared with the in-process tests)
    CLI,
    LINERATE_CSV,
    SAMPLE,
    _keys,
    ledger,
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_tty(*args, timeout: float = 120) -> tuple[int, bytes, str]:
    """Run `ledgertool ARGS` with stderr on a pseudo-terminal and stdout on a pipe, as a user at a
    terminal who redirects the results: (exit code, stdout bytes, stderr text without escapes)."""
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="160", TERM="xterm")
    p = subprocess.Popen(
        [*CLI, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(slave)
    err = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            err += chunk
        elif p.poll() is not None:
            break
    out = p.stdout.read()
    rc = p.wait(timeout=10)
    os.close(master)
    return rc, out, ANSI.sub("", err.decode(errors="replace"))


def _progress_cases(ledger: Path, keydir: Path, tmp_path: Path) -> dict[str, tuple[list, str]]:
    """command -> (arguments, the final progress text with its total)."""
    trust = keydir / "verifier.pub"
    size = SAMPLE.stat().st_size
    kib = f"{size / 1024:.1f} KiB"
    return {
        "verify": (["verify", ledger, "--trust", trust], "verify ━"),
        "query": (
            ["query", ledger, "SELECT count(*) AS n FROM records", "--trust", trust],
            "3 of 3 segments, 294 records",
        ),
        "recompute": (
            [
                "recompute",
                SAMPLE,
                "--digest-key",
                keydir / "digest.key",
                "--ledger",
                ledger,
                "--trust",
                trust,
            ],
            f"{kib} of {kib}, 294 frames",
        ),
        "bench": (
            [
                "bench",
                "--algorithm",
                "siphash-1-3-128",
                "--paths",
                "default",
                "--sizes",
                "64,1500",
                "--threads",
                "1",
                "--min-time",
                "0.001",
                "--repeats",
                "1",
                "--capture-frames",
                "0",
            ],
            "of 2 runs",  # and seconds of estimated work: the ETA is one of time
        ),
    }


@pytest.mark.parametrize("cmd", ["verify", "query", "recompute", "bench"])
def test_progress_on_terminal_stderr_only(ledger, keydir, tmp_path, cmd):
    args, shown = _progress_cases(ledger, keydir, tmp_path)[cmd]
    rc, out, err = run_on_tty(*args)
    assert rc == 0, err
    assert shown in err, err
    if cmd == "verify":
        assert "3 of 3 segments, 294 records" in err and "ETA" in err
    # --quiet: nothing drawn, the same stdout
    rc_q, out_q, err_q = run_on_tty(*args, "--quiet")
    assert rc_q == 0, err_q
    assert "ETA" not in err_q and " of " not in err_q.replace("checkpoint you hold", "")
    # a pipe: nothing drawn either; stdout byte-identical in all three (bench: the same table shape)
    piped = subprocess.run([*CLI, *map(str, args)], capture_output=True)
    assert piped.returncode == 0 and "ETA" not in piped.stderr.decode()
    if cmd == "bench":  # timings differ run to run: compare what does not
        assert out.count(b"\n") == out_q.count(b"\n") == piped.stdout.count(b"\n")
    else:
        assert out == out_q == piped.stdout
    assert b"ETA" not in out and b" of " not in out


def test_recompute_out_progress_has_the_capture_size(keydir, tmp_path):
    size = SAMPLE.stat().st_size
    rc, out, err = run_on_tty(
        "recompute",
        SAMPLE,
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
        "--out",
        tmp_path / "d.parquet",
    )
    assert rc == 0, err
    assert f"{size / 1024:.1f} KiB of {size / 1024:.1f} KiB, 294 frames" in err
    assert out.startswith(b"wrote 294 digests")


HEAVY = (
    "numpy",
    "pyarrow",
    "duckdb",
    "cffi",
    "scapy",
    "pydantic",
    "ledgertool._native",
    "rich.table",
    "ledgertool.bench.measure",
)


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["-h"],
        ["verify", "--help"],
        ["capture", "-h"],
        ["keys", "provision", "--help"],
        ["bench", "--help"],
    ],
)
def test_help_and_version_load_nothing_heavy(argv):
    """What `--help` and `--version` import (docs/benchmarks.md, "CLI start-up"): the help text
    is typer's and rich's console only; typer's pydantic coercion is not built for options not
    given."""
    code = (
        "import sys, io, contextlib\nfrom ledgertool.cli import main\n"
        f"sys.argv = ['ledgertool', *{argv!r}]\n"
        "buf = io.StringIO()\ntry:\n    with contextlib.redirect_stdout(buf):\n        main()\n"
        "except SystemExit:\n    pass\n"
    )
    # main() leaves with os._exit: report the modules from an atexit-free hook instead
    code = code.replace(
        "from ledgertool.cli import main",
        "import os\nfrom ledgertool.cli import main\n"
        "_exit = os._exit\nos._exit = lambda c: (sys.__stderr__.write('MODULES ' + ' '.join("
        "sorted(sys.modules)) + '\\n'), sys.__stderr__.flush(), _exit(c))",
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    line = next((ln for ln in r.stderr.splitlines() if ln.startswith("MODULES ")), None)
    # --version returns without os._exit
    loaded = set(line.split()[1:]) if line else set(sys.modules)
    if line is None:
        assert argv == ["--version"]
        code2 = (
            code + "\nsys.__stderr__.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
        )
        r = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True)
        loaded = set(
            next(ln for ln in r.stderr.splitlines() if ln.startswith("MODULES ")).split()[1:]
        )
        assert "typer" not in loaded and "rich" not in loaded
    assert not [m for m in HEAVY if m in loaded], sorted(m for m in HEAVY if m in loaded)


def test_dashboard_fits_1400px_in_chromium(tmp_path):
    import shutil

    binary = next(
        (
            shutil.which(n)
            for n in ("chromium", "chromium-browser", "google-chrome")
            if shutil.which(n)
        ),
        None,
    )
    if binary is None:
        pytest.skip("no chromium on PATH")
    import numpy as np
    from PIL import Image

    from ledgertool.bench.dashboard import write_html
    from ledgertool.bench.rows import read_csv

    html_file = write_html(read_csv(LINERATE_CSV), tmp_path / "d.html")
    shot = tmp_path / "d.png"
    subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,9000",
            f"--screenshot={shot}",
            html_file.as_uri(),
        ],
        capture_output=True,
        timeout=120,
    )
    gray = np.asarray(Image.open(shot).convert("L"))
    used = np.where((gray < 235).any(axis=0))[0]
    # the page has a 24 px margin: content that overflowed the window would reach its right edge
    assert used.max() <= 1400 - 20, used.max()
    assert (gray[:, :30] < 235).any()  # something was drawn at all
