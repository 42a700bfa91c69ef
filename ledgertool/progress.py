"""How long-running library calls report progress: a typed callback, never printing.

A command line (ledgertool.cli.progress) draws the updates on a terminal; library code only calls
`report(Progress(...))` at points where the work is cheap to count (a segment checked, a batch of
frames digested, a benchmark run finished). Updates may be dropped or rate-limited by the receiver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """One update of a phase of work.

    `done` of `total` counts `unit` (total None: not known in advance, e.g. a generated workload);
    `items` counts something else done so far in `items_unit` (records beside segments, frames
    beside bytes), shown without a total; `current` names the piece of work under way."""

    phase: str
    done: int
    total: int | None
    unit: str
    items: int | None = None
    items_unit: str = ""
    current: str = ""


#: a `unit` whose done and total are milliseconds of estimated work (a plan of runs whose lengths
#: differ: the bench): the display's ETA is then one of time, not of a count of unequal runs
SECONDS_OF_WORK = "ms of work"


#: The callback type every library function with a `progress=` argument takes.
ProgressFn = Callable[[Progress], None]
