"""verify over several ledger directories in one run (one per link or per device): each ledger's
report as `verify_ledger` gives it, and a total.

A ledger that cannot be verified at all (not a ledger, storage in the way) is that ledger's
outcome, not the run's: the others are still verified. A ClusterError is the run's: the cluster
every ledger runs on is in the way. Exit code (docs/cli.md): the worst of the ledgers' (0 no
problems, 1 problems found, 2 not verifiable).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import ClusterError, LedgerError
from ..keyfiles import TrustBundle
from ..progress import Progress, ProgressFn
from .ledger import SegmentChecker, VerifyResult, verify_ledger

__all__ = ["LedgerOutcome", "LedgersResult", "LedgersTotal", "verify_ledgers"]


@dataclass(frozen=True)
class LedgerOutcome:
    """One ledger of the run: its report, or (`error`) why it could not be verified."""

    ledger: str
    result: VerifyResult | None = None
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return 2 if self.result is None else 0 if self.result.ok else 1

    def to_json(self) -> dict:
        if self.result is not None:
            return self.result.to_json()
        return {"ok": False, "ledger": self.ledger, "error": self.error}


@dataclass(frozen=True)
class LedgersResult:
    """Every ledger's outcome, in the order given, and their total."""

    outcomes: tuple[LedgerOutcome, ...]

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def exit_code(self) -> int:
        return max((o.exit_code for o in self.outcomes), default=0)

    @property
    def verified(self) -> list[VerifyResult]:
        return [o.result for o in self.outcomes if o.result is not None]

    def total(self) -> LedgersTotal:
        res = self.verified
        return LedgersTotal(
            len(self.outcomes),
            sum(r.ok for r in res),
            sum(not r.ok for r in res),
            len(self.outcomes) - len(res),
            sum(r.segments for r in res),
            sum(r.records for r in res),
            sum(r.frames for r in res),
            sum(r.drops_declared for r in res),
            sum(len(r.problems) for r in res),
            sum(len(r.warnings) for r in res),
            self.exit_code,
        )

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "ledgers": [o.to_json() for o in self.outcomes],
            "total": asdict(self.total()),
        }


@dataclass(frozen=True)
class LedgersTotal:
    """The sums over the verified ledgers, and how many ledgers ended each way (ok: no problems;
    failed: problems found; error: not verifiable)."""

    ledgers: int
    ok_ledgers: int
    failed_ledgers: int
    error_ledgers: int
    segments: int
    records: int
    frames: int
    drops_declared: int
    problems: int
    warnings: int
    exit_code: int


def verify_ledgers(
    directories: list[Path],
    trust: TrustBundle,
    *,
    checker: SegmentChecker | None = None,
    progress: ProgressFn | None = None,
) -> LedgersResult:
    """`verify_ledger` on each directory in turn, with the same trust bundle and segment checker
    (docs/cli.md, "verify"); `progress` gets each ledger's updates, its phase prefixed with
    "ledger I of N". Raises ClusterError when the cluster fails; every other LedgerError becomes
    that ledger's outcome."""
    outcomes = []
    for i, directory in enumerate(directories, 1):
        each = (
            None if progress is None else _prefixed(progress, f"ledger {i} of {len(directories)}: ")
        )
        try:
            outcomes.append(
                LedgerOutcome(
                    str(directory), verify_ledger(directory, trust, checker=checker, progress=each)
                )
            )
        except ClusterError:
            raise
        except LedgerError as e:
            outcomes.append(LedgerOutcome(str(directory), error=str(e)))
    return LedgersResult(tuple(outcomes))


def _prefixed(progress: ProgressFn, prefix: str) -> ProgressFn:
    return lambda p: progress(
        Progress(prefix + p.phase, p.done, p.total, p.unit, p.items, p.items_unit)
    )
