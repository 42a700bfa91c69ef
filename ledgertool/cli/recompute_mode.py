"""recompute's options -> its mode (ledgertool.reconcile.request.Mode), decided once: every
combination of options that does not go together is refused here, in one place, naming the
options as the user gave them (exit 2)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UsageError
from ..reconcile.request import Mode, Window

__all__ = ["Given", "recompute_mode"]


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
    challenge: bool = False


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
                "--pairs FILE names every ledger, its captures, links and checkpoint: drop "
                "CAPTURE, --ledger, --link, --checkpoint, --algorithm, --strip and --out"
            )
        return Mode.PAIRS
    if not given.sources:
        raise UsageError("recompute needs CAPTURE (one or more), or --pairs FILE.toml")
    if given.challenge:
        if not given.ledger or any(
            (given.checkpoint, given.windows_range, given.cluster, given.details, window().given())
        ):
            raise UsageError(
                "--challenge goes with --ledger and --trust (the challenge names its checkpoint "
                "and windows): drop --checkpoint, --windows-range, --cluster, --details, --from, "
                "--to and --tolerance"
            )
        return Mode.CHALLENGE
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
