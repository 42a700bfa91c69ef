"""What a `recompute` run is asked to do, as one value: its mode, decided once from the options
given, with every combination of options that does not go together refused in one place.

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

from ..errors import UsageError

__all__ = ["Given", "Mode", "Request", "Window", "recompute_mode", "run"]


class Mode(enum.Enum):
    DIGESTS = "digests"
    FRAMES = "frames"
    CLUSTER = "cluster"
    WINDOWS = "windows"
    PAIRS = "pairs"


@dataclass(frozen=True)
class Window:
    """A time window [from_ns, to_ns) (None: open) and the tolerance at its edges, ns."""

    from_ns: int | None = None
    to_ns: int | None = None
    tolerance_ns: int = 0

    def given(self) -> bool:
        return any((self.from_ns, self.to_ns, self.tolerance_ns))

    def kwargs(self) -> dict:
        return {"from_ns": self.from_ns, "to_ns": self.to_ns, "tolerance_ns": self.tolerance_ns}


@dataclass(frozen=True)
class Given:
    """Which of recompute's options were given (their values only where the mode depends on
    them): what `recompute_mode` decides from."""

    sources: int = 0
    ledger: bool = False
    pairs: bool = False
    links: bool = False
    trust: bool = False
    checkpoint: bool = False
    digest_keys: int = 1
    algorithm: bool = False
    strip: bool = False
    out: bool = False
    cluster: bool = False
    insecure_cluster: bool = False
    details: bool = False
    against: str | None = None
    windows_range: bool = False


def recompute_mode(
    given: Given,
    windows_only: Callable[[], bool],
    window: Callable[[], Window],
) -> Mode:
    """The mode of a recompute run, or UsageError (exit 2) for options that do not go together,
    named as the user gave them. `windows_only()`: whether the ledger keeps window records and no
    per-frame records (asked only when --against is not given); `window()`: the parsed --from,
    --to and --tolerance (asked only where a mode refuses them)."""
    if given.insecure_cluster and not given.cluster:
        raise UsageError("--insecure-cluster goes with --cluster tcp://HOST:PORT")
    if given.pairs:
        if any(
            (given.sources, given.ledger, given.links, given.checkpoint)
            + (given.algorithm, given.strip, given.out)
        ):
            raise UsageError(
                "--pairs FILE names every ledger, its captures, links and checkpoint: drop CAPTURE, "
                "--ledger, --link, --checkpoint, --algorithm, --strip and --out"
            )
        return Mode.PAIRS
    if not given.sources:
        raise UsageError("recompute needs CAPTURE (one or more), or --pairs FILE.toml")
    if not given.ledger:
        _check_digests(given)
        return Mode.DIGESTS
    if given.algorithm or given.strip or given.out:
        raise UsageError(
            "with --ledger, algorithm and strip mode come from the ledger; drop "
            "--algorithm/--strip/--out"
        )
    if _against_windows(given, windows_only):
        if given.cluster or given.details or window().given():
            raise UsageError(
                "recompute against windows takes no --cluster, --details, --from, --to "
                "or --tolerance (use --windows-range for a range of windows)"
            )
        return Mode.WINDOWS
    return Mode.CLUSTER if given.cluster else Mode.FRAMES


def _check_digests(given: Given) -> None:
    """recompute without a ledger: what it needs and what it does not take."""
    if not (given.algorithm and given.strip and given.out):
        raise UsageError(
            "recompute needs --ledger DIR, or --algorithm, --strip and --out FILE.parquet"
        )
    if given.sources > 1 or given.cluster:
        raise UsageError("without --ledger, recompute takes one CAPTURE and no --cluster")
    if given.digest_keys != 1:
        raise UsageError("without --ledger, recompute takes one --digest-key")
    if given.trust or given.checkpoint:
        raise UsageError("--trust and --checkpoint go with --ledger")


def _against_windows(given: Given, windows_only: Callable[[], bool]) -> bool:
    """Whether a run with a ledger compares with the window records: asked for, or the ledger
    keeps no per-frame records but a window tier."""
    if given.against not in (None, "frames", "windows"):
        raise UsageError(f"--against {given.against!r}: frames or windows")
    if given.windows_range:
        if given.against == "frames":
            raise UsageError("--windows-range goes with --against windows")
        return True
    if given.against is not None:
        return given.against == "windows"
    return windows_only()


@dataclass(frozen=True)
class Request:
    """A recompute run against a ledger (FRAMES, CLUSTER or WINDOWS), with what its mode takes:
    the window, links, --details, DuckDB's memory limit, digest workers, the windows range, and
    `exact` (pair every frame; no fast verdict)."""

    mode: Mode
    window: Window = Window()
    links: tuple[str, ...] | None = None
    details: Path | None = None
    memory_limit: str = "4GB"
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
    client=None,
):
    """The report of `request` over `source` (one capture or several) and `ledger` (a path, URL or
    an OpenLedger, opened once by the caller) with digest `keys`: ReconcileResult for FRAMES and
    CLUSTER (on `client`'s cluster), WindowsResult for WINDOWS."""
    verify = {"trust": trust, "checkpoint": checkpoint, "checkpoint_name": checkpoint_name}
    links = list(request.links) if request.links else None
    if request.mode is Mode.WINDOWS:
        from .against_windows import reconcile_windows

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
        from .cluster import reconcile_on_cluster  # (the cluster extra: imported only here)

        return reconcile_on_cluster(client, source, ledger, keys, **common)
    if request.mode is Mode.FRAMES:
        from .recompute import reconcile

        return reconcile(source, ledger, keys, progress=progress, workers=request.workers, **common)
    raise ValueError(f"run takes a request against a ledger, not {request.mode}")
