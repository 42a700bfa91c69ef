"""Bench dashboard: plots of `ledgertool bench` rows as one self-contained HTML file (inline SVG,
no script, no network) and, optionally, the same plots as PNG files (matplotlib).

What is plotted (docs/benchmarks.md, "Running the benchmarks yourself"), per algorithm, from
`digest` rows:

* throughput per thread vs message size: one series per thread count;
* aggregate throughput vs threads: one series per message size;

both in *line-rate equivalent* Gbit/s = frames/s x (size + 20 B wire overhead) x 8 / 1e9, i.e. the
Ethernet line rate whose frame rate at that size this throughput keeps up with. The 400G and 800G
reference lines (and 1.6T) are scaled per core: with N usable cores on the measuring host, each core
must carry rate / N, and t threads must carry rate x t / N. The whole-capture-path rows get a bar
chart, and every row is listed in a table. The page opens with the answer: cores needed for 400G,
800G and 1.6T at 64 B and 1500 B frames, from the measured per-thread rates (`answer_rows`). Only
the latest row per (host, cpu path, benchmark, algorithm, size, threads) is plotted; the table lists
every row, noisy ones marked.

The plot model (`Plot`, `Series`) is pure data; `svg_plot` and `write_pngs` only render it.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

from .. import fsio
from ..errors import Setting, UsageError
from ..plan import WIRE_OVERHEAD_BYTES
from .rows import RATIO_HEAD, BenchRow, capture_ratios, human_size, ns_text, ratio_cells

LINE_RATES = ((400e9, "400G", "#d62728"), (800e9, "800G", "#9467bd"), (1.6e12, "1.6T", "#e6550d"))
#: frame sizes of the headline answer: the worst case and full-size Ethernet frames
ANSWER_SIZES = (64, 1500)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]  # (x, y), sorted by x
    color: str
    reference: bool = False  # a dashed reference line, no markers
    # per point: measured with cv above the threshold
    noisy: list[bool] = field(default_factory=list)


@dataclass
class Plot:
    kind: str  # "size", "threads" or "capture"
    algorithm: str
    title: str
    xlabel: str
    ylabel: str
    series: list[Series]
    xlog: bool = True
    xticks: list[tuple[float, str]] = field(default_factory=list)
    # capture: (label, value, noisy)
    bars: list[tuple[str, float, bool]] = field(default_factory=list)


def line_rate_gbit(row: BenchRow) -> float:
    """Line-rate equivalent Gbit/s: frames/s x (size + 20) x 8 / 1e9."""
    return row.frames_per_s * (row.size + WIRE_OVERHEAD_BYTES) * 8 / 1e9


def latest(rows: list[BenchRow]) -> list[BenchRow]:
    """The last row (CSV order) for each (host, cpu path, benchmark, algorithm, size, threads)."""
    keep: dict[tuple, BenchRow] = {}
    for r in rows:
        keep[(r.host, r.cpu_path, r.benchmark, r.algorithm, r.size, r.threads)] = r
    return list(keep.values())


def _cores(rows: list[BenchRow]) -> int:
    return max((r.cores for r in rows), default=0) or 1


def build_plots(rows: list[BenchRow]) -> list[Plot]:
    """Two plots per algorithm with digest rows, then one capture-path plot when there are such
    rows."""
    rows = latest(rows)
    # Label series by machine only where one algorithm's rows come from several (host, CPU path)
    # pairs; different algorithms naturally run on different paths (the reference on "python").
    multi = {
        a
        for a in {r.algorithm for r in rows}
        if len({(r.host, r.cpu_path) for r in rows if r.algorithm == a and r.benchmark == "digest"})
        > 1
    }
    multi_hosts = len({r.host for r in rows}) > 1

    def tag(r: BenchRow) -> str:
        if r.benchmark == "digest":
            return f" ({r.host}, {r.cpu_path})" if r.algorithm in multi else ""
        return f" ({r.host})" if multi_hosts else ""

    plots: list[Plot] = []
    digest = [r for r in rows if r.benchmark == "digest"]
    cores = _cores(digest)
    for alg in sorted({r.algorithm for r in digest}):
        mine = [r for r in digest if r.algorithm == alg]
        sizes = sorted({r.size for r in mine})
        threads = sorted({r.threads for r in mine})
        series: list[Series] = []
        by_t: dict[tuple, list[BenchRow]] = {}
        for r in mine:
            by_t.setdefault((r.threads, tag(r)), []).append(r)
        for i, ((t, suffix), rs) in enumerate(sorted(by_t.items())):
            rs.sort(key=lambda r: r.size)
            series.append(
                Series(
                    f"{t} thread{'s' if t > 1 else ''}{suffix}",
                    [(r.size, line_rate_gbit(r) / r.threads) for r in rs],
                    PALETTE[i % len(PALETTE)],
                    noisy=[r.noisy for r in rs],
                )
            )
        for rate, name, color in LINE_RATES:
            y = rate / 1e9 / cores
            series.append(
                Series(
                    f"{name} ÷ {cores} core{'s' if cores > 1 else ''}",
                    [(sizes[0], y), (sizes[-1], y)],
                    color,
                    reference=True,
                )
            )
        plots.append(
            Plot(
                "size",
                alg,
                f"{alg}: throughput per thread vs message size",
                "message size (log scale)",
                "line-rate Gbit/s per thread",
                series,
                xticks=[(s, human_size(s)) for s in sizes],
            )
        )
        series = []
        by_s: dict[tuple, list[BenchRow]] = {}
        for r in mine:
            by_s.setdefault((r.size, tag(r)), []).append(r)
        for i, ((s, suffix), rs) in enumerate(sorted(by_s.items())):
            rs.sort(key=lambda r: r.threads)
            series.append(
                Series(
                    f"{human_size(s)}{suffix}",
                    [(r.threads, line_rate_gbit(r)) for r in rs],
                    PALETTE[i % len(PALETTE)],
                    noisy=[r.noisy for r in rs],
                )
            )
        lo, hi = threads[0], threads[-1]
        for rate, name, color in LINE_RATES:
            per = rate / 1e9 / cores
            series.append(
                Series(
                    f"{name} × threads ÷ {cores} cores",
                    [(lo, per * lo), (hi, per * hi)],
                    color,
                    reference=True,
                )
            )
        plots.append(
            Plot(
                "threads",
                alg,
                f"{alg}: aggregate throughput vs threads",
                "threads",
                "line-rate Gbit/s, all threads",
                series,
                xlog=False,
                xticks=[(t, str(t)) for t in threads],
            )
        )
    capture = [r for r in rows if r.benchmark.startswith("capture:")]
    if capture:
        bars = [(f"{_bar_label(r)}{tag(r)}", r.frames_per_s / 1e6, r.noisy) for r in capture]
        plots.append(
            Plot(
                "capture",
                "",
                "whole capture path from a pcap in page cache",
                "Mframes/s (log scale)",
                "",
                [],
                bars=bars,
            )
        )
    return plots


def _bar_label(r: BenchRow) -> str:
    """'engine (siphash-1-3-128, 64 B, 2 workers)'; tcpdump digests nothing, so its bar names the
    tool, not the algorithm column the CSV row carries."""
    if r.benchmark == "capture:tcpdump":
        return f"tcpdump -r FILE -w /dev/null ({human_size(r.size)})"
    workers = (
        ""
        if r.benchmark == "capture:python-reference"
        else f", {r.threads} worker{'s' if r.threads != 1 else ''}"
    )
    return f"{r.benchmark[8:]} ({r.algorithm}, {human_size(r.size)}{workers})"


@dataclass(frozen=True)
class AnswerRow:
    """Cores needed per (line rate, frame size) for one way of digesting, from its best measured
    per-thread rate at each size (None: that size was not measured)."""

    label: str
    cores: tuple[tuple[float | None, ...], ...]  # [size index][line rate index]
    paths: tuple[str, ...]  # the CPU path (or worker count) each size's figure comes from


def _per_thread(r: BenchRow) -> float:
    return r.frames_per_s / r.threads if r.threads else 0.0


#: the capture rows of the headline, as it names them
_ANSWER_CAPTURE = {
    "capture:engine": "digest engine",
    "capture:sealed": "with sealing",
    "capture:sealed-blake3": "with sealing, blake3 leaves",
}


def answer_rows(rows: list[BenchRow]) -> list[AnswerRow]:
    """The headline: for the capture path (capture:engine, and capture:sealed and
    capture:sealed-blake3 with segments, Merkle roots and signatures) and for each algorithm's
    digest alone, the cores that 400G / 800G / 1.6T of 64 B and 1500 B frames need at the fastest
    per-thread rate measured (over CPU paths and thread counts), i.e. assuming cores scale."""
    rows = latest(rows)
    groups: dict[str, list[BenchRow]] = {}
    for r in rows:
        what = _ANSWER_CAPTURE.get(r.benchmark)
        if what is not None:
            groups.setdefault(f"capture path ({what}), {r.algorithm}", []).append(r)
        elif r.benchmark == "digest":
            groups.setdefault(r.algorithm, []).append(r)
    out = []
    for label, rs in sorted(
        groups.items(), key=lambda kv: (not kv[0].startswith("capture"), kv[0])
    ):
        cores, paths = [], []
        for size in ANSWER_SIZES:
            best = max((r for r in rs if r.size == size), key=_per_thread, default=None)
            cores.append(
                tuple(best.cores_needed(bps) if best else None for bps, _, _ in LINE_RATES)
            )
            paths.append(
                ""
                if best is None
                else best.cpu_path
                if best.benchmark == "digest"
                else f"{best.threads} worker{'s' if best.threads != 1 else ''}"
            )
        if any(c is not None for per in cores for c in per):
            out.append(AnswerRow(label, tuple(cores), tuple(paths)))
    return out


# --------------------------------------------------------------------------- SVG


def _nice_log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade covering [lo, hi] (both > 0); fewer when the range is wide."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if b - a <= 3 else (1,)
    ticks = [m * 10.0**e for e in range(a, b + 1) for m in steps]
    return [t for t in ticks if lo <= t <= hi]


def _fmt(v: float) -> str:
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def svg_plot(plot: Plot, width: int = 600, height: int = 360) -> str:
    """One plot as an inline <svg> element with a legend below the axes."""
    if plot.kind == "capture":
        return _svg_bars(plot, width)
    left, right, top = 64, 30, 34
    legend_rows = math.ceil(len(plot.series) / 2)
    bottom = 56 + 18 * legend_rows
    pw, ph = width - left - right, height - top - bottom
    xs = [x for s in plot.series for x, _ in s.points]
    ys = [y for s in plot.series for _, y in s.points if y > 0]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys) / 1.5, max(ys) * 1.5
    if plot.xlog:
        lx0, lx1 = math.log2(x0), math.log2(x1)
        fx = (
            (lambda x: left + (math.log2(x) - lx0) / (lx1 - lx0) * pw)
            if lx1 > lx0
            else (lambda x: left + pw / 2)
        )
    else:
        pad = 0.25 if x1 == x0 else 0.05 * (x1 - x0)
        fx = lambda x: left + (x - x0 + pad) / (x1 - x0 + 2 * pad) * pw  # noqa: E731
    ly0, ly1 = math.log10(y0), math.log10(y1)
    fy = lambda y: top + ph - (math.log10(max(y, y0)) - ly0) / (ly1 - ly0) * ph  # noqa: E731
    e = html.escape
    out = [
        f'<svg class="plot" data-kind="{plot.kind}" data-algorithm="{e(plot.algorithm)}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{e(plot.title)}">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" class="t">{e(plot.title)}</text>',
    ]
    for t in _nice_log_ticks(y0, y1):
        y = fy(t)
        out.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>'
        )
    for x, label in plot.xticks:
        px = fx(x)
        out.append(
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{top + ph}" class="grid"/>'
            f'<text x="{px:.1f}" y="{top + ph + 16}" text-anchor="middle">{e(label)}</text>'
        )
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="frame"/>')
    out.append(
        f'<text x="{left + pw / 2}" y="{top + ph + 34}" text-anchor="middle" '
        f'class="ax">{e(plot.xlabel)}</text>'
    )
    out.append(
        f'<text transform="translate(14 {top + ph / 2}) rotate(-90)" text-anchor="middle" '
        'class="ax">'
        f"{e(plot.ylabel)} (log)</text>"
    )
    for s in plot.series:
        pts = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in s.points)
        if s.reference:
            out.append(
                f'<polyline class="ref" data-label="{e(s.label)}" points="{pts}" '
                f'stroke="{s.color}"/>'
            )
            continue
        out.append(
            f'<g class="series" data-label="{e(s.label)}">'
            f'<polyline points="{pts}" stroke="{s.color}" class="line"/>'
        )
        for i, (x, y) in enumerate(s.points):
            noisy = s.noisy[i] if i < len(s.noisy) else False
            fill = "#fff" if noisy else s.color
            out.append(
                f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3.5" fill="{fill}" '
                f'stroke="{s.color}">'
                f"<title>{e(s.label)}: {_fmt(y)} "
                f"Gbit/s{' (noisy)' if noisy else ''}</title></circle>"
            )
        out.append("</g>")
    for i, s in enumerate(plot.series):
        lx = left + (i % 2) * pw / 2
        ly = top + ph + 50 + 18 * (i // 2)
        dash = ' stroke-dasharray="6 4"' if s.reference else ""
        out.append(
            f'<line x1="{lx:.1f}" x2="{lx + 22:.1f}" y1="{ly - 4}" y2="{ly - 4}" '
            f'stroke="{s.color}" stroke-width="2"{dash}/><text x="{lx + 28:.1f}" '
            f'y="{ly}">{e(s.label)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _svg_bars(plot: Plot, width: int) -> str:
    left, right, top, bar, gap = 330, 130, 34, 22, 8
    height = top + len(plot.bars) * (bar + gap) + 40
    pw = width - left - right
    vals = [v for _, v, _ in plot.bars if v > 0] or [1.0]
    lo, hi = min(vals) / 2, max(vals) * 1.2

    def fx(v: float) -> float:
        return (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * pw

    e = html.escape
    out = [
        '<svg class="plot" data-kind="capture" data-algorithm="" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 '
        f'{width} {height}" role="img" aria-label="{e(plot.title)}">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" class="t">{e(plot.title)}</text>',
    ]
    for i, (label, v, noisy) in enumerate(plot.bars):
        y = top + i * (bar + gap)
        w = max(fx(v), 1.0)
        color = PALETTE[i % len(PALETTE)]
        opacity = ' fill-opacity="0.4"' if noisy else ""
        out.append(
            f'<text x="{left - 8}" y="{y + bar * 0.7:.1f}" text-anchor="end">{e(label)}</text>'
            f'<rect class="bar" x="{left}" y="{y}" width="{w:.1f}" height="{bar}" fill="{color}"'
            f"{opacity}><title>{_fmt(v)} Mframes/s</title></rect>"
            f'<text x="{left + w + 6:.1f}" '
            f'y="{y + bar * 0.7:.1f}">{_fmt(v)}{" (noisy)" if noisy else ""}</text>'
        )
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle" '
        f'class="ax">{e(plot.xlabel)}</text>'
    )
    out.append("</svg>")
    return "\n".join(out)


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;
  margin:24px;color:#222;background:#fafafa}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555}
.warn{background:#fff4ce;border:1px solid #e0c060;padding:6px 10px;display:inline-block}
.plots{display:flex;flex-wrap:wrap;gap:16px}
svg.plot{border:1px solid #ddd;background:#fff} svg text{font:12px sans-serif;fill:#222}
svg text.t{font-weight:bold;font-size:13px} svg text.ax{fill:#444}
svg .grid{stroke:#e6e6e6} svg .frame{fill:none;stroke:#999}
svg .line{fill:none;stroke-width:2} svg .ref{fill:none;stroke-width:1.5;stroke-dasharray:6 4}
table{border-collapse:collapse;background:#fff;font-size:12px}
th,td{border:1px solid #ddd;padding:3px 7px;white-space:nowrap}
th{background:#f0f0f0} th.l{text-align:left;font-weight:normal} #ratios th{white-space:normal}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.nb{white-space:pre-line}
tr.noisy td{background:#fff4ce} #answer-table{font-size:14px} #answer-table td{min-width:5em}
"""

#: the raw table's columns; time and host only when the rows come from more than one run or host
#: (the header says them otherwise), so that it fits a 1400 px window
TABLE_COLUMNS = (
    "time",
    "host",
    "cpu_path",
    "benchmark",
    "algorithm",
    "size",
    "threads",
    "frames",
    "repeats",
    "Mframes/s",
    "Gbit/s",
    "line-rate Gbit/s",
    "ns/frame",
    "CPU ns/frame",
    "cv",
    "noisy",
)


def _table(rows: list[BenchRow]) -> str:
    e = html.escape
    drop = {
        c
        for c, values in (("time", {r.time for r in rows}), ("host", {r.host for r in rows}))
        if len(values) <= 1
    }
    if all(r.cpu_seconds is None for r in rows):  # a CSV written before the CPU columns
        drop.add("CPU ns/frame")
    head = "".join(f"<th>{e(c)}</th>" for c in TABLE_COLUMNS if c not in drop)
    body = []
    for r in rows:
        cells = [
            (r.time, ""),
            (r.host, ""),
            (r.cpu_path, ""),
            (r.benchmark, ""),
            (r.algorithm, ""),
            (human_size(r.size), "n"),
            (str(r.threads), "n"),
            (f"{r.frames:,}", "n"),
            (str(r.repeats), "n"),
            (f"{r.frames_per_s / 1e6:,.2f}", "n"),
            (f"{r.gbit_per_s:,.2f}", "n"),
            (f"{line_rate_gbit(r):,.2f}", "n"),
            (_median_best(r.ns_per_frame, r.best_ns_per_frame), "n nb"),
            (_median_best(r.cpu_ns_per_frame, r.best_cpu_ns_per_frame), "n nb"),
            (f"{r.cv * 100:.1f}%", "n"),
            ("noisy" if r.noisy else "", ""),
        ]
        tds = "".join(
            f'<td class="{c}">{e(v)}</td>' if c else f"<td>{e(v)}</td>"
            for (v, c), name in zip(cells, TABLE_COLUMNS)
            if name not in drop
        )
        body.append(f'<tr class="{"noisy" if r.noisy else "row"}">{tds}</tr>')
    return f'<table id="raw"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _median_best(median: float | None, best: float | None) -> str:
    """'323.3', and 'best 58.8' below it when known (a second line: the table fits 1400 px)."""
    return ns_text(median) if best is None else f"{ns_text(median)}\nbest {ns_text(best)}"


def _ratios(rows: list[BenchRow]) -> str:
    """capture:sealed, capture:sealed-blake3 and capture:windows ÷ capture:engine per algorithm,
    frame size and worker count (best of)."""
    e = html.escape
    ratios = capture_ratios(rows)
    if not ratios:
        return ""
    head = "".join(f"<th>{c}</th>" for c in RATIO_HEAD)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{e(v)}</td>" if i == 0 else f'<td class="n">{e(v)}</td>'
            for i, v in enumerate(ratio_cells(c))
        )
        + "</tr>"
        for c in ratios
    )
    return (
        "<p>What sealing costs on top of digesting: capture:sealed ÷ capture:engine, "
        "the best run of each (CPU time per frame, every thread; and wall time); the same with "
        "BLAKE3 leaf entries, capture:sealed-blake3 ÷ capture:engine (CPU), where measured; and "
        "what the window tier alone costs: capture:windows ÷ capture:engine (CPU).</p>"
        f'<table id="ratios"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _cores_text(n: float | None) -> str:
    if n is None:
        return "not measured"
    return "∞" if math.isinf(n) else f"{n:,.1f}" if n < 100 else f"{n:,.0f}"


def _answer(rows: list[BenchRow]) -> str:
    """The headline table: cores needed per line rate and frame size, capture path first."""
    e = html.escape
    answers = answer_rows(rows)
    if not answers:
        return ""
    sizes = "".join(
        f'<th colspan="{len(LINE_RATES)}">{human_size(s)} frames</th>' for s in ANSWER_SIZES
    )
    rates = "".join(f"<th>{name}</th>" for _ in ANSWER_SIZES for _, name, _ in LINE_RATES)
    body = []
    for a in answers:
        where = " · ".join(f"{human_size(s)}: {p}" for s, p in zip(ANSWER_SIZES, a.paths) if p)
        cells = "".join(f'<td class="n">{_cores_text(c)}</td>' for per in a.cores for c in per)
        body.append(
            f'<tr><th class="l">{e(a.label)}<div class="meta">{e(where)}</div></th>{cells}</tr>'
        )
    return (
        '<h2 id="answer">Cores needed</h2>'
        "<p>Cores (threads at the fastest per-thread rate measured here) that a link of 64-byte "
        "and 1500-byte frames needs, with 20 B of preamble, SFD and inter-frame gap per frame "
        "(400G of 64 B frames is 595.2 Mframes/s). This assumes cores scale linearly; the threads "
        "plots below show how far they did on this host.</p>"
        '<table id="answer-table"><thead><tr><th '
        f'rowspan="2">digesting</th>{sizes}</tr><tr>{rates}</tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table>"
    )


def render_html(rows: list[BenchRow]) -> str:
    """The whole dashboard as one HTML document: no script, no external resource."""
    if not rows:
        raise UsageError("bench dashboard: no rows to render")
    e = html.escape
    plots = build_plots(rows)
    machines: dict[tuple, set[str]] = {}  # one header line per machine, its CPU paths listed once
    for r in rows:
        machines.setdefault((r.host, r.cpu_model, r.cores), set()).add(r.cpu_path)
    times = sorted(r.time for r in rows if r.time)
    noisy = sum(r.noisy for r in rows)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>ledgertool bench dashboard</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>ledgertool bench</h1>",
    ]
    for (host, model, cores), paths in sorted(machines.items()):
        parts.append(
            f'<div class="meta">{e(host)} · {e(model)} · {cores or "?"} usable cores · CPU paths '
            f"{e(', '.join(sorted(paths)))}</div>"
        )
    if times:
        parts.append(
            f'<div class="meta">{len(rows)} rows measured {e(times[0])} … {e(times[-1])}</div>'
        )
    parts.append(_answer(rows))
    if noisy:
        parts.append(
            f'<p class="warn">{noisy} of {len(rows)} rows are <b>noisy</b> (coefficient of '
            "variation of "
            "their repeats above the threshold): the machine was busy. Hollow markers and "
            "highlighted table rows show them.</p>"
        )
    parts.append(
        "<p>Throughput is shown as <b>line-rate equivalent Gbit/s</b> = frames/s × (size + 20 B of "
        "preamble, SFD and inter-frame gap) × 8: the Ethernet line rate whose frame rate at that "
        "size the digest keeps up with. Dashed lines: 400G, 800G and 1.6T scaled per core (÷ the "
        "host's usable cores; × threads in the threads plot). A series above a dashed line keeps "
        "up with its share of that line rate when every core digests.</p>"
    )
    digest_plots = [p for p in plots if p.kind != "capture"]
    for alg in dict.fromkeys(p.algorithm for p in digest_plots):
        parts.append(f'<h2 id="alg-{e(alg)}">{e(alg)}</h2><div class="plots">')
        parts += [svg_plot(p) for p in digest_plots if p.algorithm == alg]
        parts.append("</div>")
    for p in plots:
        if p.kind == "capture":
            parts.append(
                '<h2 id="capture">Whole capture path</h2><div class="plots">'
                + svg_plot(p, 760)
                + "</div>"
            )
            parts.append(_ratios(rows))
    parts.append('<h2 id="rows">All rows</h2>')
    parts.append(_table(rows))
    parts.append(
        '<p class="meta">ns/frame = 1e9 / aggregate frames/s of the median run '
        "(best: the fastest). "
        "CPU ns/frame = CPU time of a run (user + system, every thread) ÷ its frames. "
        "Gbit/s counts message bytes only. "
        "Schema: schemas/bench.csv.schema.json; how to produce: docs/benchmarks.md.</p>"
    )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_html(rows: list[BenchRow], path: Path) -> Path:
    fsio.write_atomic(path, render_html(rows).encode("utf-8"), what="dashboard")
    return path


# --------------------------------------------------------------------------- PNG (optional)


def require_matplotlib():
    """matplotlib.pyplot on the Agg backend; UsageError when it is not installed."""
    try:  # optional dependency (the `plots` extra): imported only when PNGs are asked for
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(
            Setting("png"),
            " needs matplotlib: pip install 'ledgertool[plots]' (the HTML dashboard does not)",
        ) from None
    return plt


def write_pngs(rows: list[BenchRow], outdir: Path) -> list[Path]:
    """The dashboard's plots as PNG files: ALG-size.png, ALG-threads.png, capture.png."""
    plt = require_matplotlib()
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{outdir}: cannot create PNG directory ({exc.strerror})") from None
    written = []
    for p in build_plots(rows):
        if p.kind == "capture":
            fig, ax = plt.subplots(figsize=(9, 0.5 * len(p.bars) + 1.5))
            labels = [b[0] for b in p.bars]
            ax.barh(
                range(len(p.bars)),
                [b[1] for b in p.bars],
                color=[PALETTE[i % len(PALETTE)] for i in range(len(p.bars))],
            )
            ax.set_yticks(range(len(p.bars)), labels)
            ax.invert_yaxis()
            ax.set_xscale("log")
            ax.set_xlabel(p.xlabel)
            name = "capture.png"
        else:
            fig, ax = plt.subplots(figsize=(8, 5))
            for s in p.series:
                x = [pt[0] for pt in s.points]
                y = [pt[1] for pt in s.points]
                if s.reference:
                    ax.plot(x, y, "--", color=s.color, label=s.label)
                else:
                    ax.plot(x, y, "-o", color=s.color, label=s.label)
                    nx = [xx for xx, n in zip(x, s.noisy) if n]
                    ny = [yy for yy, n in zip(y, s.noisy) if n]
                    if nx:
                        ax.plot(nx, ny, "o", color="white", markeredgecolor=s.color)
            if p.xlog:
                ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks([t for t, _ in p.xticks], [label for _, label in p.xticks])
            ax.set_xlabel(p.xlabel)
            ax.set_ylabel(p.ylabel)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
            name = f"{p.algorithm}-{p.kind}.png"
        ax.set_title(p.title)
        fig.tight_layout()
        path = outdir / name
        with fsio.atomic_file(path, what="PNG plot") as f:
            fig.savefig(f, dpi=100, format="png")
        plt.close(fig)
        written.append(path)
    return written
