"""The one progress display of the command line: library `Progress` updates (ledgertool.progress)
drawn as a rich line on stderr, with the total, a bar and an ETA where the total is known.

Shown only when stderr is a terminal and the command was not asked to be quiet (`--quiet`, or
`--json`); stdout is never touched, so results are the same bytes with or without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..progress import SECONDS_OF_WORK, Progress, ProgressFn
from .render import SafeConsole, printable

_BYTES = "bytes"


def _count(n: int, unit: str) -> str:
    if unit == _BYTES:
        for div, prefix in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if n >= div:
                return f"{n / div:.1f} {prefix}"
        return f"{n} B"
    return f"{n:,}"


def rate(per_s: float) -> str:
    """3 significant digits with a k/M/G prefix and a trailing space: '3.2 k', '17.6 M'."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_s >= div:
            return f"{per_s / div:.3g} {unit}"
    return f"{per_s:.3g} "


def stats_parts(p: Progress, elapsed_s: float) -> list[str]:
    """What one update says beside the bar, most important first: '12 of 40 segments',
    '1,234,567 records', '3.1 M records/s', '(segment 12)'. Bytes are shown in binary units with a
    Gbit/s rate; a count beside them gets its own rate."""
    if p.unit == "%":
        return [f"{p.done}%"]
    if p.unit == SECONDS_OF_WORK:  # a plan of unequal runs: seconds, and the runs as items
        parts = [f"{p.done / 1000:.0f} of ~{(p.total or 0) / 1000:.0f} s"]
        if p.items is not None:
            parts.append(f"{p.items:,} {p.items_unit}")
        return parts + ([f"({p.current})"] if p.current else [])
    done = _count(p.done, p.unit)
    unit = "" if p.unit == _BYTES else f" {p.unit}"
    parts = [
        f"{done} of {_count(p.total, p.unit)}{unit}" if p.total is not None else f"{done}{unit}"
    ]
    if p.items is not None:
        parts.append(
            f"{_count(p.items, p.items_unit)}"
            + ("" if p.items_unit == _BYTES else f" {p.items_unit}")
        )
    if elapsed_s > 0.2:
        counts = [(p.done, p.unit)] + ([(p.items, p.items_unit)] if p.items is not None else [])
        for n, u in counts:
            if u == _BYTES:
                parts.append(f"{n * 8 / elapsed_s / 1e9:.2f} Gbit/s")
            elif u == p.items_unit or p.items is None or p.items_unit == _BYTES:
                parts.append(f"{rate(n / elapsed_s)}{u}/s")
    if p.current:
        parts.append(f"({p.current})")
    return parts


def stats_text(p: Progress, elapsed_s: float, width: int | None = None) -> str:
    """stats_parts joined with ', ' (the current piece after a space); with `width`, each part
    that would make the text longer than that is left out (the first is always kept)."""
    text = ""
    for k, part in enumerate(stats_parts(p, elapsed_s)):
        nxt = part if not k else text + (" " if part.startswith("(") else ", ") + part
        if k and width is not None and len(nxt) > width:
            continue  # a shorter one after it may fit
        text = nxt
    return text


#: columns of the line besides the label and the stats: spinner, bar, elapsed, "ETA", remaining,
#: and the spaces between them
_BAR = 16
_FIXED = 2 + _BAR + 1 + 8 + 4 + 8 + 1


def is_shown(console: SafeConsole, quiet: bool) -> bool:
    return not quiet and console.is_terminal


@contextmanager
def progress_display(console: SafeConsole, quiet: bool) -> Iterator[ProgressFn | None]:
    """Yield a ProgressFn drawing each phase's updates on `console` (stderr), or None when quiet or
    not a terminal, so library code skips counting. Each new phase replaces the previous line."""
    if not is_shown(console, quiet):
        yield None
        return
    from rich.progress import (
        BarColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import (
        Progress as Bar,
    )

    with Bar(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(bar_width=_BAR),
        TextColumn("{task.fields[stats]}", markup=False),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console.rich,
        transient=True,
    ) as bar:
        tasks: dict[str, tuple[object, float]] = {}

        def update(p: Progress) -> None:
            if p.phase not in tasks:
                for task_id, _ in tasks.values():  # the earlier phase is over
                    bar.update(task_id, visible=False)
                tasks[p.phase] = (
                    bar.add_task(printable(p.phase), total=p.total, stats=""),
                    time.perf_counter(),
                )
            task_id, t0 = tasks[p.phase]
            # the line fits the terminal: what does not fit of the stats is left out, not cut
            room = max(10, console.width - _FIXED - len(printable(p.phase)) - 1)
            bar.update(
                task_id,
                completed=p.done,
                total=p.total,
                stats=stats_text(p, time.perf_counter() - t0, room),
            )

        yield update


@contextmanager
def frames_display(
    console: SafeConsole, label: str, quiet: bool, size: tuple[int, int] | None = None
) -> Iterator[Callable[..., None] | None]:
    """`capture`'s (frames, bytes[, sealed records]) callback on the same display. With `size`
    (a capture file's bytes and the bytes each record adds to its captured bytes: file_total), a
    total, a bar and an ETA: bytes read of the file, estimated from the frames and bytes so far;
    without (a pipe, a compressed file, a workload), frames, frames/s and Gbit/s. With sealed
    records, their count and rate lead (the whole path, sealing included)."""
    with progress_display(console, quiet) as show:
        if show is None:
            yield None
            return

        def update(frames: int, nbytes: int, sealed: int | None = None) -> None:
            if size is not None:
                total, overhead = size
                read = min(total, nbytes + frames * overhead)
                done = frames if sealed is None else sealed
                unit = "frames" if sealed is None else "records sealed"
                show(Progress(label, read, total, _BYTES, done, unit))
            elif sealed is None:
                show(Progress(label, frames, None, "frames", nbytes, _BYTES))
            else:
                show(
                    Progress(
                        label,
                        sealed,
                        None,
                        "records sealed",
                        nbytes,
                        _BYTES,
                        current=f"{frames:,} frames read",
                    )
                )

        yield update
