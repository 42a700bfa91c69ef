"""The one progress display of the command line: library `Progress` updates (ledgertool.progress)
drawn as a rich line on stderr, with the total, a bar and an ETA where the total is known.

Shown only when stderr is a terminal and the command was not asked to be quiet (`--quiet`, or
`--json`); stdout is never touched, so results are the same bytes with or without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..progress import Progress, ProgressFn
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


def stats_text(p: Progress, elapsed_s: float) -> str:
    """'12 of 40 segments, 1,234,567 records, 3.1 M records/s': what one update says beside the bar.
    Bytes are shown in binary units with a Gbit/s rate; a count beside them gets its own rate."""
    if p.unit == "%":
        return f"{p.done}%"
    done = _count(p.done, p.unit)
    unit = "" if p.unit == _BYTES else f" {p.unit}"
    text = f"{done} of {_count(p.total, p.unit)}{unit}" if p.total is not None else f"{done}{unit}"
    if p.items is not None:
        text += f", {_count(p.items, p.items_unit)}" + (
            "" if p.items_unit == _BYTES else f" {p.items_unit}"
        )
    if elapsed_s > 0.2:
        counts = [(p.done, p.unit)] + ([(p.items, p.items_unit)] if p.items is not None else [])
        for n, u in counts:
            if u == _BYTES:
                text += f", {n * 8 / elapsed_s / 1e9:.2f} Gbit/s"
            elif u == p.items_unit or p.items is None or p.items_unit == _BYTES:
                text += f", {rate(n / elapsed_s)}{u}/s"
    return text + (f" ({p.current})" if p.current else "")


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
        BarColumn(bar_width=24),
        TextColumn("{task.fields[stats]}", markup=False),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
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
            bar.update(
                task_id,
                completed=p.done,
                total=p.total,
                stats=stats_text(p, time.perf_counter() - t0),
            )

        yield update


@contextmanager
def frames_display(
    console: SafeConsole, label: str, quiet: bool
) -> Iterator[Callable[..., None] | None]:
    """`capture`'s (frames, bytes[, sealed records]) callback on the same display, no total (a
    capture's frame count is known only at its end): frames, frames/s and Gbit/s; with sealed
    records, their count and rate lead (the whole path, sealing included) and the frames read follow."""
    with progress_display(console, quiet) as show:
        if show is None:
            yield None
            return

        def update(frames: int, nbytes: int, sealed: int | None = None) -> None:
            if sealed is None:
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
