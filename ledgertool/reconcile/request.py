"""What a `recompute` run is asked to do, as one value: its mode (decided once from the command
line's options, ledgertool.cli.recompute_mode) and what that mode takes.

The modes (docs/cli.md, "recompute"):
  DIGESTS  no ledger: the captures' digests written to Parquet (--algorithm, --strip, --out);
  FRAMES   against a ledger's per-frame records, on this machine (recompute.reconcile);
  CLUSTER  the same report on a Dask cluster (cluster.reconcile_on_cluster);
  WINDOWS  against a link's window records (against_windows.reconcile_windows);
  PAIRS    many ledgers, each with its own captures (pairs.reconcile_pairs).
Within FRAMES and CLUSTER, `exact` chooses the pairing of every frame over the fast verdict (the
report is the same). `run` hands a FRAMES, CLUSTER or WINDOWS request to its function.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .against_windows import reconcile_windows
from .limits import DEFAULT_MEMORY_LIMIT
from .recompute import reconcile

__all__ = ["Mode", "Request", "Window", "run"]


class Mode(enum.Enum):
    DIGESTS = "digests"
    FRAMES = "frames"
    CLUSTER = "cluster"
    WINDOWS = "windows"
    PAIRS = "pairs"
    CHALLENGE = "challenge"


@dataclass(frozen=True)
class Window:
    """A time window [from_ns, to_ns) (None: open) and the tolerance at its edges, ns."""

    from_ns: int | None = None
    to_ns: int | None = None
    tolerance_ns: int = 0

    def given(self) -> bool:
        # 0 is a time (the epoch) like any other: only None means an open side
        return self.from_ns is not None or self.to_ns is not None or self.tolerance_ns != 0

    def kwargs(self) -> dict:
        return {"from_ns": self.from_ns, "to_ns": self.to_ns, "tolerance_ns": self.tolerance_ns}


@dataclass(frozen=True)
class Request:
    """A recompute run against a ledger (FRAMES, CLUSTER or WINDOWS), with what its mode takes:
    the window, links, --details, DuckDB's memory limit, digest workers, the windows range, and
    `exact` (pair every frame; no fast verdict)."""

    mode: Mode
    window: Window = Window()
    links: tuple[str, ...] | None = None
    details: Path | None = None
    memory_limit: str = DEFAULT_MEMORY_LIMIT
    workers: int = 0
    windows_range: tuple[int | None, int | None] | None = None
    exact: bool = False


def run(
    request: Request,
    source,
    ledger,
    keys: Sequence,
    *,
    trust=None,
    checkpoint: bytes | None = None,
    checkpoint_name: str = "checkpoint",
    progress=None,
    on_cluster: Callable | None = None,
):
    """The report of `request` over `source` (one capture or several) and `ledger` (a path, URL or
    an OpenLedger, opened once by the caller) with digest `keys`: ReconcileResult for FRAMES and
    CLUSTER, WindowsResult for WINDOWS. `on_cluster`: for CLUSTER, cluster.reconcile_on_cluster
    bound to its client (the cluster extra is imported by whoever connects to the cluster)."""
    verify = {"trust": trust, "checkpoint": checkpoint, "checkpoint_name": checkpoint_name}
    links = list(request.links) if request.links else None
    if request.mode is Mode.WINDOWS:
        return reconcile_windows(
            source,
            ledger,
            keys,
            windows_range=request.windows_range,
            progress=progress,
            workers=request.workers,
            links=links,
            **verify,
        )
    common = dict(
        links=links,
        details=request.details,
        memory_limit=request.memory_limit,
        exact=request.exact,
        **request.window.kwargs(),
        **verify,
    )
    if request.mode is Mode.CLUSTER:
        return on_cluster(source, ledger, keys, **common)
    if request.mode is Mode.FRAMES:
        return reconcile(source, ledger, keys, progress=progress, workers=request.workers, **common)
    raise ValueError(f"run takes a request against a ledger, not {request.mode}")
