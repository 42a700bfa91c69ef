"""`ledgertool bench`: options, the measuring runs (ledgertool.bench.measure), and the rendered
table, CSV, Markdown, HTML and PNG outputs (ledgertool.bench.rows, ledgertool.bench.dashboard)."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ..errors import UsageError
from ..progress import SECONDS_OF_WORK, Progress
from .progress import progress_display
from .render import SafeConsole, styled, table_console

DEFAULT_SIZES = "64,512,1500,4096,9000,64KiB,1MiB,32MiB"
DEFAULT_NOISY_CV = 0.05  # bench.measure.DEFAULT_NOISY_CV
DIGEST_BATCH = 256  # bench.measure.DIGEST_BATCH
MAX_SIZE = 256 * 1024 * 1024
MAX_THREADS = 1024  # LT_BENCH_MAX_THREADS

_SIZE_RE = re.compile(r"^(?P<num>[0-9]+)\s*(?P<unit>b|kib|mib|gib)?$")
_SIZE_UNIT = {None: 1, "b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3}


#: what one frame of a whole-path capture run is estimated to take, per configuration, until the
#: first capture run is measured (about 1 M frames/s: sealing included, on a slow machine)
CAPTURE_FRAME_S = 1e-6


class BenchPlan:
    """The bench's progress in seconds of work, so that its ETA is one of time: each run's
    duration is estimated (a digest run: --min-time x --repeats; a capture run: its frames x its
    configurations x CAPTURE_FRAME_S, rescaled by the first one measured) and replaced by the
    measured one once it ran."""

    def __init__(self, estimates: list[float], captures_from: int) -> None:
        self.estimates = estimates
        self.captures_from = captures_from
        self.t0 = time.perf_counter()
        self.started = self.t0

    @classmethod
    def of(cls, digests, caps, min_time, repeats, frames, algs, workers) -> BenchPlan:
        per_digest = max(min_time, 0.01) * max(repeats, 1) + 0.05
        configs = (len(algs) * len(workers) + 1) * max(repeats, 1)
        per_capture = frames * configs * CAPTURE_FRAME_S + 0.5
        return cls([per_digest] * digests + [per_capture] * len(caps), digests)

    def ran(self, i: int) -> None:
        now = time.perf_counter()
        took, self.started = now - self.started, now
        if i == self.captures_from and self.estimates[i] > 0:  # the first capture run: rescale
            scale = took / self.estimates[i]
            for k in range(i + 1, len(self.estimates)):
                self.estimates[k] *= scale
        self.estimates[i] = took

    def progress(self, i: int, current: str) -> Progress:
        done = sum(self.estimates[:i])
        total = sum(self.estimates)
        return Progress(
            "bench",
            round(done * 1000),
            max(round(total * 1000), 1),
            SECONDS_OF_WORK,
            i,
            f"of {len(self.estimates)} runs",
            current,
        )


def parse_sizes(text: str) -> list[int]:
    """ "64,1500,9000,64KiB,32MiB" -> byte counts (binary suffixes B, KiB, MiB, GiB only)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = _SIZE_RE.match(part.lower())
        if m is None:
            raise UsageError(
                f"--sizes: bad size {part!r}; expected bytes like 64, 9000, 64KiB, 32MiB"
            )
        n = int(m["num"]) * _SIZE_UNIT[m["unit"]]
        if not 1 <= n <= MAX_SIZE:
            raise UsageError(f"--sizes: {part!r} is outside 1 B .. {MAX_SIZE // 1024**2} MiB")
        out.append(n)
    if not out:
        raise UsageError("--sizes: no sizes given")
    return out


def parse_threads(text: str) -> list[int]:
    """ "1,2,4" -> [1, 2, 4]."""
    try:
        out = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise UsageError(
            f"--threads {text!r}: expected comma-separated thread counts, e.g. 1,2"
        ) from None
    if not out or any(not 1 <= t <= MAX_THREADS for t in out):
        raise UsageError(f"--threads {text!r}: each count must be 1..{MAX_THREADS}")
    return out


def parse_leaf_hashes(text: str, ledger_format: str) -> tuple[str, ...]:
    """ "blake3, sha256" -> ("sha256", "blake3"): the leaf constructions the sealed rows are
    measured with, each once, in the order of engine.LEAF_HASHES; blake3 only into v2 ledgers."""
    from ..digest.engine import LEAF_HASHES

    given = {p.strip() for p in text.split(",") if p.strip()}
    out = tuple(h for h in LEAF_HASHES if h in given)
    if not given or given - set(out):
        raise UsageError(
            f"--leaf-hash {text!r}: expected a comma-separated list of {', '.join(LEAF_HASHES)}"
        )
    if "blake3" in out and ledger_format != "v2":
        raise UsageError("--leaf-hash blake3 needs --ledger-format v2 (v1 ledgers keep sha256)")
    return out


def bench_command(
    algorithm: Annotated[
        list[str] | None,
        typer.Option("--algorithm", help="Algorithm(s) to measure (default: all)."),
    ] = None,
    sizes: Annotated[
        str,
        typer.Option(
            metavar="SIZE,...",
            help="Message sizes, comma-separated: bytes or KiB/MiB (1 B .. 256 MiB).",
        ),
    ] = DEFAULT_SIZES,
    threads: Annotated[
        str,
        typer.Option(
            metavar="N,...",
            help="Thread counts, comma-separated; each thread digests its own buffer.",
        ),
    ] = "1,2",
    min_time: Annotated[
        float, typer.Option("--min-time", help="Seconds per timed run (calibrated).", min=0.0001)
    ] = 0.2,
    capture_frames: Annotated[
        int, typer.Option(help="Frames in the synthetic pcap for the whole-path rows (0: skip).")
    ] = 1_000_000,
    capture_size: Annotated[
        str,
        typer.Option(
            "--capture-size",
            "--capture-sizes",
            metavar="BYTES,...",
            help="Frame size(s) of the synthetic pcaps, bytes, comma-separated (14 .. 65535).",
        ),
    ] = "64",
    capture_workers: Annotated[
        str,
        typer.Option(
            "--capture-workers",
            metavar="N,...",
            help="Worker counts for the capture:engine, :sealed and :windows rows, comma-separated "
            "(default: 1 and every usable core).",
        ),
    ] = "",
    ledger_format: Annotated[
        str,
        typer.Option(
            "--ledger-format",
            metavar="v1|v2",
            help="Ledger format the capture:sealed rows write: v1 (Parquet sealed in the capture) "
            "or v2 (raw record files; also the capture:windows rows, which v1 has not).",
        ),
    ] = "v2",
    leaf_hash: Annotated[
        str,
        typer.Option(
            "--leaf-hash",
            metavar="sha256,blake3",
            help="Leaf construction(s) of the sealed rows, comma-separated: sha256 "
            "(capture:sealed) and/or blake3 (capture:sealed-blake3, v2 only).",
        ),
    ] = "sha256",
    paths: Annotated[
        str,
        typer.Option(
            "--paths",
            metavar="best|default|all|PATH,...",
            help="CPU paths per algorithm for the digest rows: best (best multi-buffer + best "
            "single-message), default (the CPUID choice), all, or a comma list.",
        ),
    ] = "best",
    batch: Annotated[
        int,
        typer.Option(
            "--batch",
            help="Messages per batch call in the digest rows (0: one call per message).",
            min=0,
            max=4096,
        ),
    ] = DIGEST_BATCH,
    tcpdump: Annotated[
        bool,
        typer.Option(
            "--tcpdump/--no-tcpdump",
            help="Add a `tcpdump -r FILE -w /dev/null` baseline row when tcpdump is installed.",
        ),
    ] = True,
    reference_frames: Annotated[
        int, typer.Option(help="Frames the pure-Python reference path digests.", min=1)
    ] = 20_000,
    repeats: Annotated[
        int, typer.Option(help="Timed repeats per figure (median reported; cv needs >= 2).", min=1)
    ] = 5,
    noisy_cv: Annotated[
        float,
        typer.Option(
            "--noisy-cv", help="Flag a row noisy when cv of its repeats exceeds this.", min=0.0
        ),
    ] = DEFAULT_NOISY_CV,
    csv_file: Annotated[Path | None, typer.Option("--csv", help="Append rows to this CSV.")] = None,
    from_csv: Annotated[
        Path | None, typer.Option("--from-csv", help="Measure nothing: render rows of this CSV.")
    ] = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML dashboard here.")
    ] = None,
    png: Annotated[
        Path | None,
        typer.Option(
            "--png",
            help="Write the dashboard plots as PNG files into this directory (needs matplotlib).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON only.")] = False,
    markdown: Annotated[
        Path | None,
        typer.Option("--markdown", help="Also write the table as Markdown to this file."),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="No progress on stderr (shown only on a terminal)."),
    ] = False,
) -> None:
    """Throughput per algorithm x message size x threads (isolation) and through the whole
    capture path."""
    # numpy, cffi and pyarrow load with these: only when the command runs, not for --help

    from .. import fsio
    from ..algorithms import ALGORITHMS, get_algorithm
    from ..bench import dashboard
    from ..bench.measure import bench_capture, bench_digest, digest_paths, stamp, usable_cores
    from ..bench.rows import (
        append_csv,
        capture_ratios,
        from_record,
        markdown_table,
        read_csv,
    )

    if from_csv is not None:
        if csv_file is not None:
            raise UsageError("--from-csv renders an existing CSV; drop --csv (nothing is measured)")
        rows = read_csv(from_csv)
    else:
        size_list = parse_sizes(sizes)
        thread_list = parse_threads(threads)
        algs = [get_algorithm(a, for_ledger=False).name for a in (algorithm or list(ALGORITHMS))]
        # the capture rows: every algorithm a ledger may use (64-bit digests are digest rows only)
        cap_algs = tuple(a for a in algs if ALGORITHMS[a].ledger_ok) or ("siphash-1-3-128",)
        if png is not None:
            dashboard.require_matplotlib()
        cap_sizes = parse_sizes(capture_size)
        if any(not 14 <= c <= 65535 for c in cap_sizes):
            raise UsageError("--capture-size: frame sizes must be 14 .. 65535 bytes")
        cap_workers = (
            parse_threads(capture_workers) if capture_workers else sorted({1, usable_cores()})
        )
        if ledger_format not in ("v1", "v2"):
            raise UsageError(f"--ledger-format must be v1 or v2, not {ledger_format!r}")
        leaf_hashes = parse_leaf_hashes(leaf_hash, ledger_format)
        runs = [
            (a, p, s, t)
            for a in algs
            for p in digest_paths(a, paths)
            for s in size_list
            for t in thread_list
        ]
        caps = cap_sizes if capture_frames > 0 else []
        rows = []
        plan = BenchPlan.of(
            len(runs), caps, min_time, repeats, capture_frames, cap_algs, cap_workers
        )
        with progress_display(SafeConsole(stderr=True, soft_wrap=True), quiet or as_json) as show:
            for i, (a, p, s, t) in enumerate(runs):
                if show:
                    show(plan.progress(i, f"{a} {s} B x{t}"))
                rows.append(
                    bench_digest(
                        a,
                        s,
                        t,
                        min_time=min_time,
                        repeats=repeats,
                        noisy_cv=noisy_cv,
                        path=p,
                        batch=batch,
                    )
                )
                plan.ran(i)
            for i, cs in enumerate(caps, len(runs)):
                if show:
                    show(plan.progress(i, f"capture {cs} B frames"))
                rows += bench_capture(
                    capture_frames,
                    cs,
                    reference_frames=reference_frames,
                    repeats=repeats,
                    noisy_cv=noisy_cv,
                    workers=tuple(cap_workers),
                    tcpdump=tcpdump,
                    ledger_format=int(ledger_format[1]),
                    algorithms=cap_algs,
                    leaf_hashes=leaf_hashes,
                )
                plan.ran(i)
            if show:
                show(plan.progress(len(runs) + len(caps), "done"))
        # what the CSV holds, so a dashboard re-rendered --from-csv is identical to this one
        rows = [from_record(r.to_csv()) for r in stamp(rows)]
    ratios = capture_ratios(rows)
    written = []
    if from_csv is None and csv_file:
        append_csv(csv_file, rows)
        written.append(csv_file)  # announced like every other output file
    if markdown is not None:
        fsio.write_atomic(markdown, markdown_table(rows).encode(), what="Markdown table")
        written.append(markdown)
    if html is not None:
        written.append(dashboard.write_html(rows, html))
    if png is not None:
        written += dashboard.write_pngs(rows, png)
    if as_json:
        doc = {"rows": [r.to_json() for r in rows], "capture_ratios": [c.to_json() for c in ratios]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    _print_tables(rows, ratios, noisy_cv)
    for p in written:
        SafeConsole(stderr=True, soft_wrap=True).print(f"wrote {p}")


def _print_tables(rows, ratios, noisy_cv: float) -> None:
    """bench's tables: the rows, the capture:sealed, :sealed-blake3 and :windows / capture:engine
    ratios, and how many rows were noisy (on stderr)."""
    from rich.table import Table

    from ..bench.rows import RATIO_HEAD, TABLE_HEAD, ratio_cells, table_cells

    t = Table(*TABLE_HEAD, title=f"ledgertool bench on {rows[0].cpu_model if rows else '?'}")
    for r in rows:
        t.add_row(*table_cells(r, rows))
    table_console().print(t)
    if ratios:
        t = Table(
            *RATIO_HEAD,
            title="capture:sealed, :sealed-blake3 and :windows ÷ capture:engine (best of)",
        )
        for c in ratios:
            t.add_row(*ratio_cells(c))
        table_console().print(t)
    noisy = sum(r.noisy for r in rows)
    if noisy:
        SafeConsole(stderr=True, soft_wrap=True).print(
            styled(
                (f"{noisy} of {len(rows)} rows noisy", "yellow"),
                f" (cv of repeats > {noisy_cv:.0%}): the machine was busy; rerun or raise "
                "--min-time/--repeats",
            )
        )
