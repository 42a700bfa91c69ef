"""verify (or, with --recompute, recompute) on one machine and on a LocalCluster of 1 and 2
worker processes (docs/cluster.md; docs/benchmarks.md, "On a cluster").

Usage:  python scripts/cluster_bench.py N [--segment-records S] [--workers 1,2] [--workdir DIR]
                                        [--recompute] [--reuse] [--exact]

Captures N generated 64-byte frames (the two-flow spec of scripts/scale_bench.py) into a ledger of
segments of S records (`ledgertool capture` as a child process), then, in this process, verifies it
without a cluster and on a LocalCluster of W worker processes for each W (`--cluster local:W`):
the cluster's start, one warm-up run (imports, page cache), then the measured run. Prints one
markdown row per run: wall seconds and records/s, and the CPU seconds the workers and the client
spent (getrusage in each process), so records per worker CPU-second are comparable on a machine
shared with other jobs, where wall times are not. With --recompute the same frames are also written
to a pcap (`workload generate`) and reconciled against the ledger, the pcap cut into 4 chunks per
worker, two partitions per worker; --exact pairs the two sides (by partition on the cluster) without
the fast verdict first (docs/cluster.md), on one machine and on the cluster.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import SPEC  # noqa: E402

from ledgertool.keyfiles import DigestKey, TrustBundle  # noqa: E402
from ledgertool.reconcile.cluster import reconcile_on_cluster  # noqa: E402
from ledgertool.reconcile.recompute import reconcile  # noqa: E402
from ledgertool.verify.cluster import ClusterAddress, ClusterChecker, connect  # noqa: E402
from ledgertool.verify.ledger import verify_ledger  # noqa: E402

_CLI = "from ledgertool.cli.app import main; main()"


def _cli(*args: object) -> tuple[float, dict]:
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", _CLI, *map(str, args)], capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(
            f"ledgertool {' '.join(map(str, args))}: exit {r.returncode}: {r.stderr.strip()}"
        )
    return wall, json.loads(r.stdout) if r.stdout.strip() else {}


def _ledger(work: Path, keys: Path, n: int, seg: int, reuse: bool = False) -> Path:
    spec = work / f"spec-{n}.toml"
    spec.write_text(SPEC.format(n=n, a=n // 2, b=n - n // 2))
    led = work / f"ledger-{n}"
    if reuse and (led / "ledger.json").exists():  # the same bytes for an A/B of two trees
        return led
    # capture would append to a ledger left by an earlier run
    shutil.rmtree(led, ignore_errors=True)
    _cli(
        "capture",
        f"workload:{spec}",
        "--ledger",
        led,
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        keys / "signing.key",
        "--segment-records",
        seg,
        "--json",
    )
    return led


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _row(
    name: str, rep, wall: float, worker_cpu: float, client_cpu: float | None, start: float | None
) -> str:
    client = "-" if client_cpu is None else f"{client_cpu:.2f}"
    started = "-" if start is None else f"{start:.2f}"
    n = rep.ledger_records if hasattr(rep, "ledger_records") else rep.records
    what = (
        f"{rep.matched:,} matched, {rep.ledger_only} ledger-only, {rep.capture_only} capture-only"
        if hasattr(rep, "matched")
        else f"{rep.segments} segments, {rep.records:,} records"
    )
    return (
        f"| {name} | {started} | {wall:.2f} | {n / wall:,.0f} | {worker_cpu:.2f} | "
        f"{n / worker_cpu:,.0f} | {client} | {'OK' if rep.ok else 'FAIL'}: {what} |"
    )


def _runner(a, work: Path, keys: Path, led: Path, trust: TrustBundle):
    """(one-machine run, cluster run) of the command measured: verify, or recompute + reconcile."""
    if not a.recompute:
        return (lambda: verify_ledger(led, trust)), (
            lambda client, w: verify_ledger(led, trust, checker=ClusterChecker(client))
        )
    pcap = work / f"frames-{a.n}.pcap"
    if not pcap.exists():
        spec = work / f"spec-{a.n}.toml"
        _cli("workload", "generate", spec, "--out", pcap, "--json")
    dk = DigestKey.load(keys / "digest.key")
    size = pcap.stat().st_size
    # (without it: the call a tree without `exact` takes)
    exact = {"exact": True} if a.exact else {}
    return (
        (lambda: reconcile(pcap, led, dk, trust=trust, workers=1, **exact)),
        (
            lambda client, w: reconcile_on_cluster(
                client, pcap, led, dk, trust=trust, split_bytes=size // (4 * w) + 1, **exact
            )
        ),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("--segment-records", type=int, default=100_000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument(
        "--recompute", action="store_true", help="recompute + reconcile a pcap of the same frames"
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="keep the ledger an earlier run left in --workdir "
        "(same N and --segment-records): A/B runs of two trees read the same bytes",
    )
    ap.add_argument(
        "--exact",
        action="store_true",
        help="with --recompute: pair exactly, without the fast verdict",
    )
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    keys = work / "keys"
    if not keys.exists():
        _cli("keys", "generate", keys, "--json")
    led = _ledger(work, keys, a.n, a.segment_records, a.reuse)
    trust = TrustBundle.load(keys / "verifier.pub")
    print(
        "| run | cluster start s | wall s | records/s | worker CPU s | records per worker CPU-s | "
        "client CPU s | result |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    here, there = _runner(a, work, keys, led, trust)
    here()
    c0, t0 = _cpu(), time.perf_counter()
    rep = here()
    print(_row("one machine", rep, time.perf_counter() - t0, _cpu() - c0, None, None), flush=True)
    for w in map(int, a.workers.split(",")):
        t0 = time.perf_counter()
        with connect(ClusterAddress(local_workers=w)) as client:
            client.wait_for_workers(w)
            start = time.perf_counter() - t0
            there(client, w)
            before, c0, t0 = client.run(_cpu), _cpu(), time.perf_counter()
            rep = there(client, w)
            wall, client_cpu, after = time.perf_counter() - t0, _cpu() - c0, client.run(_cpu)
        worker_cpu = sum(after[k] - before[k] for k in after)
        print(_row(f"--cluster local:{w}", rep, wall, worker_cpu, client_cpu, start), flush=True)


if __name__ == "__main__":
    main()
