"""recompute over many (ledger, captures) pairs in one run: one ledger per link or per device,
each reconciled with its own captures (docs/cli.md, "recompute"; docs/cluster.md, many links).

A pairs file (TOML) lists the pairs; a command line is no place for thousands of links:

    [[pair]]
    ledger = "ledgers/link-a"            # a path (relative: to the pairs file's directory) or a URL
    captures = ["caps/link-a-1.pcap", "caps/link-a-2.pcap"]
    link = ["link0"]                      # optional: only these links of the ledger
    trust = "keys/device-a.pub"           # optional: this ledger's trust bundle (default: run's)
    checkpoint = "held/link-a.checkpoint" # optional: a checkpoint this ledger must extend

The digest keys are one pool: each ledger takes the keys whose id its ledger.json or its
digest-key rotation statements name. Every pair's report is the report of a single recompute of
that pair (ledgertool.reconcile.recompute.reconcile, or the cluster's reconcile_on_cluster); the
total sums the counts and is OK only when every pair is. A pair that cannot be reconciled (a
ledger that does not verify, a capture that cannot be opened) is that pair's outcome, not the
run's; a lost cluster is the run's (ClusterError).

The file's strings are the user's: each is a path or URL taken as written (no glob, no
expansion); ledger contents stay the adversary's and are read only through the reconciliation.
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from .. import fsio
from ..algorithms import get_algorithm
from ..errors import ClusterError, KeyFileError, LedgerError, UsageError
from ..keyfiles import DigestKey, TrustBundle
from ..ledger.opened import OpenLedger, open_ledger
from ..progress import Progress, ProgressFn
from ..seal.checkpoint import MAX_NOTE_BYTES
from ..source import WORKLOAD_PREFIX, is_workload
from ..source.file import STDIN
from ..urls import is_url, location
from .result import ReconcileResult
from .segments import digest_key_order
from .sources import source_name

__all__ = [
    "PairOutcome",
    "PairPlan",
    "PairSpec",
    "PairsResult",
    "PairsTotal",
    "plan_pairs",
    "read_pairs",
    "reconcile_pairs",
]

MAX_PAIRS_FILE_BYTES = 64 << 20  # ~300,000 pairs of long paths
_FIELDS = {"ledger", "captures", "link", "trust", "checkpoint"}


@dataclass(frozen=True)
class PairSpec:
    """One [[pair]] of a pairs file, its paths resolved against the file's directory (URLs and
    absolute paths as written). `links` None: every link of the ledger."""

    ledger: str
    captures: tuple[str, ...]
    links: tuple[str, ...] | None = None
    trust: str | None = None
    checkpoint: str | None = None


def _resolve(base: Path, text: str) -> str:
    """A path of the pairs file as the run opens it: relative ones below the file's directory."""
    if is_url(text):
        return text
    if is_workload(text):
        return WORKLOAD_PREFIX + _resolve(base, text[len(WORKLOAD_PREFIX) :])
    return text if os.path.isabs(text) else str(base / text)


def _string(path: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        got = "an empty string" if value == "" else type(value).__name__
        raise UsageError(f"{path}: {key}: expected a non-empty string, got {got}")
    if "\x00" in value:
        raise UsageError(f"{path}: {key}: a NUL character cannot be in a path")
    return value


def _strings(path: str, key: str, value: object, *, allow_empty: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list) or (not value and not allow_empty):
        raise UsageError(f"{path}: {key}: expected a non-empty list of strings")
    return tuple(_string(path, f"{key}[{i}]", v) for i, v in enumerate(value))


def parse_pairs(doc: dict, path: str) -> tuple[PairSpec, ...]:
    """The pairs of a parsed pairs file `doc` (read from `path`, which names it in errors and
    whose directory relative paths are under). UsageError naming the key for anything else:
    another top-level key, a pair without `ledger` or `captures`, an unknown field, a wrong type,
    standard input as a capture."""
    extra = sorted(set(doc) - {"pair"})
    if extra:
        raise UsageError(
            f"{path}: unknown key {extra[0]!r} (a pairs file holds [[pair]] tables only)"
        )
    pairs = doc.get("pair")
    if not isinstance(pairs, list) or not pairs or not all(isinstance(p, dict) for p in pairs):
        raise UsageError(f"{path}: expected one or more [[pair]] tables")
    base = Path(path).parent
    specs = []
    for i, p in enumerate(pairs):
        where = f"pair[{i}]"
        unknown = sorted(set(p) - _FIELDS)
        if unknown:
            raise UsageError(
                f"{path}: {where}.{unknown[0]}: unknown field (fields: "
                f"{', '.join(sorted(_FIELDS))})"
            )
        for need in ("ledger", "captures"):
            if need not in p:
                raise UsageError(f"{path}: {where}: no {need!r}")
        captures = _strings(path, f"{where}.captures", p["captures"])
        if STDIN in captures:
            raise UsageError(
                f"{path}: {where}.captures: standard input ('-') cannot be one pair's capture; "
                "name a file"
            )
        links = _strings(path, f"{where}.link", p["link"]) if "link" in p else None
        opt = {
            k: _resolve(base, _string(path, f"{where}.{k}", p[k]))
            for k in ("trust", "checkpoint")
            if k in p
        }
        specs.append(
            PairSpec(
                _resolve(base, _string(path, f"{where}.ledger", p["ledger"])),
                tuple(_resolve(base, c) for c in captures),
                links,
                **opt,
            )
        )
    return tuple(specs)


def read_pairs(path: str | os.PathLike) -> tuple[PairSpec, ...]:
    """The pairs of the pairs file at `path` (a regular file of UTF-8 TOML; module doc).
    UsageError for a file that is not one, StorageError / FileTypeError when it cannot be read."""
    path = os.fspath(path)
    raw = fsio.read_regular(path, MAX_PAIRS_FILE_BYTES, follow=True, what="pairs file")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: not UTF-8 at byte {e.start}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not valid TOML: {e}") from None
    return parse_pairs(doc, path)


@dataclass(frozen=True)
class PairPlan:
    """A pair ready to run: its digest keys (those of the pool its ledger names, in the order
    given), its trust bundle (None: keyless checks only) and checkpoint (bytes of the note)."""

    spec: PairSpec
    keys: tuple[DigestKey, ...]
    trust: TrustBundle | None = None
    checkpoint: bytes | None = None
    ledger: OpenLedger | None = None  # opened by plan_pairs, handed to the pair's run


def plan_pairs(
    specs: Sequence[PairSpec], keys: Sequence[DigestKey], trust: TrustBundle | None = None
) -> tuple[PairPlan, ...]:
    """Every pair's keys, trust bundle and checkpoint, before anything long runs. Each ledger's
    ledger.json and rotation statements are read (parsed only: each pair's verify checks them)
    for the digest key ids they name. Raises KeyFileError naming the ledger when no key of the
    pool is one of its keys, UsageError for the same key twice in the pool, and the errors of a
    ledger, trust bundle or checkpoint that cannot be read (LedgerFormatError, KeyFileError,
    StorageError), each naming its file."""
    seen: dict[bytes, DigestKey] = {}
    for k in keys:
        if k.master in seen:
            raise UsageError(
                f"{k.path}: the same digest key as {seen[k.master].path} (give each key once)"
            )
        seen[k.master] = k
    bundles: dict[str, TrustBundle] = {}
    ids: dict[tuple[str, int], list[str]] = {}
    plans = []
    for spec in specs:
        opened = open_ledger(spec.ledger)
        ledger_dir, header = opened.location, opened.header
        alg = get_algorithm(header.algorithm)
        kids = ids.setdefault(
            (alg.name, alg.key_size), [k.key_id(alg.name, alg.key_size) for k in keys]
        )
        order = digest_key_order(ledger_dir, header)
        mine = tuple(k for k, kid in zip(keys, kids) if kid in order)
        if not mine:
            raise KeyFileError(
                f"{spec.ledger}: none of the {len(keys)} digest key(s) given is a digest key of "
                f"this ledger (its key ids: {', '.join(order)})"
            )
        bundle = trust
        if spec.trust is not None:
            if spec.trust not in bundles:
                bundles[spec.trust] = TrustBundle.load(Path(spec.trust))
            bundle = bundles[spec.trust]
        note = None
        if spec.checkpoint is not None:
            note = fsio.read_regular(
                spec.checkpoint, MAX_NOTE_BYTES, follow=True, what="checkpoint"
            )
        plans.append(PairPlan(spec, mine, bundle, note, opened))
    return tuple(plans)


@dataclass(frozen=True)
class PairOutcome:
    """One pair of the run: its report, or (`error`, `error_exit`) why it was not reconciled."""

    index: int
    spec: PairSpec
    result: ReconcileResult | None = None
    error: str | None = None
    error_exit: int = 2

    @property
    def source(self) -> str:
        return source_name(self.spec.captures)

    @property
    def exit_code(self) -> int:
        return self.error_exit if self.result is None else 0 if self.result.ok else 1

    def to_json(self) -> dict:
        if self.result is not None:
            return self.result.to_json()
        return {
            "ok": False,
            "ledger": self.spec.ledger,
            "source": self.source,
            "error": self.error,
            "exit_code": self.error_exit,
        }


@dataclass(frozen=True)
class PairsTotal:
    """The sums over the reconciled pairs, and how many pairs ended each way (ok: every frame
    matched a verified ledger over whole captures; failed: reconciled, not ok; error: not
    reconciled)."""

    pairs: int
    ok_pairs: int
    failed_pairs: int
    error_pairs: int
    frames: int
    ledger_records: int
    matched: int
    ledger_only: int
    capture_only: int
    details_written: int
    exit_code: int


@dataclass(frozen=True)
class PairsResult:
    """Every pair's outcome, in the file's order, and their total."""

    outcomes: tuple[PairOutcome, ...]

    @property
    def exit_code(self) -> int:
        """The worst pair's: 0 every pair ok, 1 a discrepancy (or unverified, incomplete, a
        ledger that does not verify), 2 a pair with bad input."""
        return max((o.exit_code for o in self.outcomes), default=0)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def total(self) -> PairsTotal:
        res = [o.result for o in self.outcomes if o.result is not None]
        return PairsTotal(
            len(self.outcomes),
            sum(r.ok for r in res),
            sum(not r.ok for r in res),
            len(self.outcomes) - len(res),
            sum(r.frames for r in res),
            sum(r.ledger_records for r in res),
            sum(r.matched for r in res),
            sum(r.ledger_only for r in res),
            sum(r.capture_only for r in res),
            sum(r.details_written for r in res),
            self.exit_code,
        )

    def to_json(self) -> dict:
        """schemas/recompute-pairs-report.schema.json; each pair's report as recompute-report's."""
        return {
            "ok": self.ok,
            "pairs": [o.to_json() for o in self.outcomes],
            "total": asdict(self.total()),
        }


#: reconcile(captures, ledger, keys, *, trust, checkpoint, checkpoint_name, links, details) ->
#: ReconcileResult, with the run's other settings (window, memory limit, ...) bound by the caller
ReconcileFn = Callable[..., ReconcileResult]


def reconcile_pairs(
    plans: Sequence[PairPlan],
    reconcile_one: ReconcileFn,
    *,
    details: Path | None = None,
    progress: ProgressFn | None = None,
    describe: Callable[[LedgerError], str] = str,
    in_flight: int = 1,
) -> PairsResult:
    """`reconcile_one` on every pair, `in_flight` pairs at a time (threads: for a cluster, whose
    tasks do the work, so that one pair's waits overlap another's; each pair's report does not
    depend on it). `details`: one file of every pair's --details lines, in pair order, each line
    the pair's own with `pair` (its 0-based index) and `ledger` in front; it replaces `details` at
    the end (checked writable first). `progress` gets each pair's updates, the phase prefixed
    with "pair I of N". Raises ClusterError when the cluster fails (nothing is written to
    `details` then; the pairs not started are not run); every other LedgerError is that pair's
    outcome, its message `describe(e)`."""
    if details is not None:
        fsio.check_writable(details, what="details file")
    outcomes: list[PairOutcome] = []
    pool = ThreadPoolExecutor(max(1, in_flight), thread_name_prefix="ledgertool-pair")
    with (
        tempfile.TemporaryDirectory(prefix="ledgertool-pairs-") as tmp,
        (
            fsio.atomic_file(details, what="details file") if details is not None else nullcontext()
        ) as out,
    ):

        def one(i: int, plan: PairPlan) -> PairOutcome:
            path = Path(tmp) / f"details-{i}.jsonl" if details is not None else None
            kw = (
                {}
                if progress is None
                else {"progress": _prefixed(progress, f"pair {i + 1} of {len(plans)}: ")}
            )
            try:
                res = reconcile_one(
                    list(plan.spec.captures),
                    plan.ledger or location(plan.spec.ledger),
                    list(plan.keys),
                    trust=plan.trust,
                    checkpoint=plan.checkpoint,
                    checkpoint_name=plan.spec.checkpoint or "checkpoint",
                    links=list(plan.spec.links) if plan.spec.links else None,
                    details=path,
                    **kw,
                )
            except ClusterError:
                raise
            except LedgerError as e:
                return PairOutcome(i, plan.spec, error=describe(e), error_exit=e.exit_code)
            return PairOutcome(
                i, plan.spec, res if path is None else replace(res, details_file=str(details))
            )

        running = (
            [pool.submit(one, i, plan) for i, plan in enumerate(plans)] if in_flight > 1 else None
        )
        try:
            for i, plan in enumerate(plans):
                o = running[i].result() if running else one(i, plan)
                if o.result is not None and details is not None:
                    _append_details(out, Path(tmp) / f"details-{i}.jsonl", i, plan.spec.ledger)
                outcomes.append(o)
        except BaseException:
            # the pairs not started never run; those running end with the cluster (ClusterError)
            # or on their own, without being waited for here
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
    return PairsResult(tuple(outcomes))


def _append_details(out, one: Path, index: int, ledger: str) -> None:
    """Copy a pair's --details lines (our own JSON, written by the reconciliation) into the
    run's file, each with the pair's index and ledger in front."""
    if not one.exists():
        return
    try:
        with open(one, "rb") as f:
            for line in f:
                out.write(
                    (
                        json.dumps({"pair": index, "ledger": ledger, **json.loads(line)}) + "\n"
                    ).encode()
                )
    except OSError as e:
        raise fsio.storage_error(e, one, "read the details of a pair") from None
    one.unlink()


def _prefixed(progress: ProgressFn, prefix: str) -> ProgressFn:
    return lambda p: progress(
        Progress(prefix + p.phase, p.done, p.total, p.unit, p.items, p.items_unit)
    )
