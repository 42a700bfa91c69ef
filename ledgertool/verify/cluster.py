"""verify on a Dask cluster (docs/cluster.md): each sealed segment's reads and checks (seal, both
signatures, digest key id, the Parquet file's SHA-256, record checks, Merkle root) run as one
task on a worker, which reads the segment's files through its own LedgerReader of the same
directory; the per-link reduction (ledgertool.verify.chain) runs on the client over the results
in index order. The tasks return the verdict only (no decoded records), so `query` and
`recompute`, which read the bytes they verified, stay single-machine.

Needs the `cluster` extra (`pip install 'ledgertool[cluster]'`: dask, distributed); nothing else
in ledgertool imports this module.
"""

from __future__ import annotations

import hashlib
import logging
import re
import socket
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import dask
from distributed import CancelledError, Client, Future, KilledWorker, LocalCluster
from distributed import TimeoutError as DaskTimeoutError
from distributed.security import Security

from ..errors import ClusterError, LedgerFormatError, Setting, UsageError
from ..ledger.header import LedgerHeader
from ..ledger.reader import LedgerReader, LinkListing
from ..ledger.remote import ledger_reader
from ..seal.rotation import Schedule
from .chain import SegmentCheck
from .checks import SegmentPlace
from .ledger import check_segment

__all__ = [
    "ClusterAddress",
    "ClusterChecker",
    "LedgerContext",
    "SegmentBatch",
    "check_segments_task",
    "checked_segment",
    "checked_segments",
    "cluster_threads",
    "connect",
    "ordered_results",
    "parse_address",
    "scheduler_security",
    "segment_part",
    "task_batches",
    "verdict_only",
]

_LOCAL = re.compile(r"local:([0-9]{1,4})")
_TCP = re.compile(r"(tcp|tls)://[^\s/]+:[0-9]{1,5}")
# the Dask configuration a tls:// scheduler needs on the client (docs/cluster.md)
TLS_CONFIG = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert")
CONNECT_TIMEOUT_S = 30
MAX_LOCAL_WORKERS = 1024
# segments per task (task_batches): ~4 tasks per worker thread balance a link's work; at most 8
# segments a task (8 M records at the default 1 M a segment: ~0.4 s of checks, ~400 MB for
# recompute)
TASKS_PER_THREAD = 4
BATCH_SEGMENTS = 8
# Dask starts workers with MALLOC_TRIM_THRESHOLD_=65536, which also turns off glibc's adaptive
# mmap threshold: every segment's buffers are then fresh zeroed pages (19x the page faults, +60 %
# CPU per record here); None leaves glibc's default (docs/cluster.md)
WORKER_TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


@dataclass(frozen=True)
class ClusterAddress:
    """Where to run: a running scheduler (`scheduler`, ``tls://host:port``, or ``tcp://host:port``
    with `plain_tcp`, knowingly) or a LocalCluster of `local_workers` worker processes started for
    this run."""

    scheduler: str | None = None
    local_workers: int | None = None
    plain_tcp: bool = False  # a tcp:// scheduler accepted (--insecure-cluster): anyone may use it


def parse_address(text: str, plain_tcp: bool = False) -> ClusterAddress:
    """``tls://HOST:PORT``, ``tcp://HOST:PORT`` or ``local:N`` (1 <= N <= 1024); UsageError
    otherwise. `plain_tcp` accepts a tcp:// scheduler (connect refuses it without)."""
    if (m := _LOCAL.fullmatch(text)) and 1 <= int(m.group(1)) <= MAX_LOCAL_WORKERS:
        return ClusterAddress(local_workers=int(m.group(1)))
    if _TCP.fullmatch(text):
        return ClusterAddress(scheduler=text, plain_tcp=plain_tcp)
    raise UsageError(
        f"cluster address {text!r} is neither tls://HOST:PORT or tcp://HOST:PORT (a "
        "Dask scheduler) nor local:N (N worker processes on this machine, "
        f"1..{MAX_LOCAL_WORKERS})"
    )


def scheduler_security(address: ClusterAddress) -> Security | None:
    """The credentials to reach `address.scheduler`: Dask's TLS configuration for tls://, None for
    tcp:// accepted with `plain_tcp`. UsageError for tcp:// without it (Dask's plain protocol
    lets anyone who reaches the scheduler run code in its workers and read the tasks, recompute's
    digest subkey among them), and for tls:// without a client certificate configured."""
    if address.scheduler.startswith("tcp://"):
        if not address.plain_tcp:
            raise UsageError(
                f"{address.scheduler}: a tcp:// scheduler is Dask's plain protocol, which lets "
                "anyone who reaches it run code in its workers and read the tasks (the digest key "
                "among them): use a tls:// scheduler with Dask's TLS configuration "
                "(docs/cluster.md), or ",
                Setting("plain_tcp"),
                " on a network only you can reach",
            )
        return None
    sec = Security()
    if not (sec.tls_ca_file and sec.tls_client_cert):
        raise UsageError(
            f"{address.scheduler}: a tls:// scheduler needs Dask's TLS configuration "
            f"on this machine: {' and '.join(TLS_CONFIG)} (and .client.key unless "
            "the certificate file holds it; docs/cluster.md)"
        )
    return sec


@contextmanager
def connect(address: ClusterAddress) -> Iterator[Client]:
    """A Dask client on the cluster at `address`, closed (with the LocalCluster it started, if
    any) on exit. ClusterError when the scheduler cannot be reached; UsageError for a scheduler
    address without the credentials it needs (scheduler_security)."""
    if address.local_workers is not None:
        # one single-threaded worker process each (the checks hold the GIL in Python parts),
        # listening on loopback only; no dashboard, and the scheduler's health/metrics server on a
        # free port (its default, 8787, may be another cluster's). Loopback is every local user's:
        # TLS with a certificate drawn for this run (Security.temporary, held in memory and handed
        # to the workers by the nanny, never on a command line) admits only this run's processes.
        try:
            with dask.config.set({WORKER_TRIM: None}):
                cluster = LocalCluster(
                    n_workers=address.local_workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                    security=Security.temporary(),
                    scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                )
        except (RuntimeError, OSError, DaskTimeoutError) as e:
            raise ClusterError(
                f"cannot start a local cluster of {address.local_workers} worker processes: {e}"
            ) from None
        with cluster, Client(cluster) as client:
            yield client
        return
    security = scheduler_security(address)
    try:
        client = Client(address.scheduler, timeout=CONNECT_TIMEOUT_S, security=security)
    except (OSError, DaskTimeoutError) as e:
        raise ClusterError(f"cannot reach the Dask scheduler at {address.scheduler}: {e}") from None
    with client:
        yield client


@dataclass(frozen=True)
class LedgerContext:
    """What every task of one ledger needs besides its segment: where the ledger is (the same
    path on every worker), its header as the client read it, and the key schedule."""

    directory: str
    ledger: LedgerHeader
    sched: Schedule | None


def checked_segment(ctx: LedgerContext, part: LinkListing, index: int) -> SegmentCheck:
    """One segment's reads and checks, on a worker, with the decoded records. LedgerFormatError
    when the ledger.json found there is not the one the client verifies (a worker that sees
    another directory at that path, or one edited since)."""
    return next(checked_segments(ctx, part, [index]))


def verdict_only(check: SegmentCheck) -> SegmentCheck:
    """`check` without its decoded records (what the client's reduction needs)."""
    if check.records is None:
        return check
    return replace(check, records=replace(check.records, table=None, records=None))


def check_segment_task(ctx: LedgerContext, part: LinkListing, index: int) -> SegmentCheck:
    """One segment's reads and checks, on a worker: the verdict, without the decoded records."""
    return verdict_only(checked_segment(ctx, part, index))


@dataclass(frozen=True)
class SegmentBatch:
    """What one task returns for consecutive segments of a link: the checks of the first ones,
    in index order, and the error (a LedgerError, say) that the next one raised, if any: the
    client yields the checks, then raises it, as the single-machine loop would."""

    checks: list
    error: Exception | None = None


def checked_segments(
    ctx: LedgerContext, part: LinkListing, indexes: Sequence[int]
) -> Iterator[SegmentCheck]:
    """`checked_segment` for each of `indexes` in order, through one reader of the worker's
    ledger directory (its ledger.json compared once)."""
    reader = ledger_reader(ctx.directory)
    if hashlib.sha256(reader.read_header_bytes()).hexdigest() != ctx.ledger.sha256:
        raise LedgerFormatError(
            f"{ctx.directory}: the ledger.json worker {socket.gethostname()} reads is not the "
            "one verified (another directory at that path there, or edited since)"
        )
    for index in indexes:
        yield check_segment(
            reader,
            part,
            SegmentPlace(ctx.ledger, part.link, index, reader.link_dir(part.link), ctx.sched),
        )


def check_segments_task(
    ctx: LedgerContext, part: LinkListing, indexes: Sequence[int]
) -> SegmentBatch:
    """Consecutive segments' reads and checks, on a worker: their verdicts, without records."""
    checks = []
    try:
        for check in checked_segments(ctx, part, indexes):
            checks.append(verdict_only(check))
    except Exception as e:  # noqa: BLE001 -- raised on the client, after the checks before it
        return SegmentBatch(checks, e)
    return SegmentBatch(checks)


def task_batches(places: list[SegmentPlace], threads: int) -> list[list[SegmentPlace]]:
    """`places` cut into runs of consecutive segments, one task each: about TASKS_PER_THREAD
    tasks per worker thread (the cluster's per-task cost, ~6 ms of worker and client CPU, is paid
    per run, not per segment), at most BATCH_SEGMENTS segments a task (a task's records in memory,
    and what a lost worker costs again)."""
    size = max(1, min(BATCH_SEGMENTS, -(-len(places) // (TASKS_PER_THREAD * max(1, threads)))))
    return [places[i : i + size] for i in range(0, len(places), size)]


def cluster_threads(client: Client) -> int:
    """The worker threads of `client`'s cluster now (tasks run one per thread)."""
    return sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values())


class ClusterChecker:
    """A SegmentChecker (ledgertool.verify.ledger) that runs a link's segments as tasks on
    `client`'s cluster, a run of consecutive segments per task (task_batches): all of a link's
    tasks are submitted at once, their results taken in index order."""

    def __init__(self, client: Client):
        self.client = client

    def __call__(
        self, reader: LedgerReader, listing: LinkListing, places: list[SegmentPlace]
    ) -> Iterator[SegmentCheck]:
        if not places:
            return iter(())
        first = places[0]
        ctx = LedgerContext(str(reader.directory), first.ledger, first.sched)
        # task keys are the scheduler's: unique per ledger and link of this run
        run = uuid.uuid4().hex
        futures = []
        for batch in task_batches(places, cluster_threads(self.client)):
            indexes = [p.index for p in batch]
            futures.append(
                (
                    indexes,
                    self.client.submit(
                        check_segments_task,
                        ctx,
                        segment_part(listing, indexes),
                        indexes,
                        pure=False,
                        key=f"ledgertool-verify-{run}-{first.link}-{indexes[0]}",
                    ),
                )
            )
        return ordered_results(futures, reader.directory, listing.link)


def segment_part(listing: LinkListing, indexes: int | Sequence[int]) -> LinkListing:
    """The part of a link's listing that the reads of segment(s) `indexes` consult: their files,
    and the non-regular files in their place (never read)."""
    want = {indexes} if isinstance(indexes, int) else set(indexes)
    return LinkListing(
        listing.link,
        {i: listing.segments.get(i, frozenset()) for i in sorted(want)},
        strays=tuple(s for s in listing.strays if s.shadows in want),
    )


def ordered_results(
    futures: list[tuple[list[int], Future]], directory: Path, link: str
) -> Iterator[SegmentCheck]:
    """Each task's checks in order (a task: a SegmentBatch for segments `indexes`); a task the
    cluster lost is the run's ClusterError (never a partial verdict); a LedgerError a task raised
    is raised here, after the checks before it, as verify raises it."""
    try:
        for indexes, future in futures:
            where = (
                f"segment {indexes[0]}"
                if len(indexes) == 1
                else f"segments {indexes[0]}-{indexes[-1]}"
            )
            try:
                batch = future.result()
            except KilledWorker as e:
                raise ClusterError(
                    f"{directory}: link {link} {where}: the cluster lost its check "
                    f"(workers died running it: {e}); no verdict"
                ) from None
            except (CancelledError, OSError, DaskTimeoutError) as e:
                raise ClusterError(
                    f"{directory}: link {link} {where}: the cluster did not return its "
                    f"check ({type(e).__name__}: {e}); no verdict"
                ) from None
            yield from batch.checks
            if batch.error is not None:
                raise batch.error
    finally:
        for _, future in futures:
            future.release()
