"""Single-machine `recompute` on one core: reconcile(CAPTURE, LEDGER, --workers 1) run R times in
this process; prints wall and CPU seconds per run and records per CPU-second, the best run last,
and with --prof a cProfile table of the last run (docs/benchmarks.md, "recompute").

Usage:  python scripts/recompute_one_worker.py LEDGER CAPTURE KEYDIR [--runs R] [--prof]
(KEYDIR: digest.key and verifier.pub of the ledger.)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import time
from pathlib import Path

from ledgertool.keyfiles import DigestKey, TrustBundle
from ledgertool.reconcile.recompute import reconcile


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ledger", type=Path)
    ap.add_argument("capture", type=Path)
    ap.add_argument("keys", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--prof", action="store_true")
    a = ap.parse_args()
    dk, trust = DigestKey.load(a.keys / "digest.key"), TrustBundle.load(a.keys / "verifier.pub")
    best = None
    pr = cProfile.Profile()
    for i in range(a.runs):
        if a.prof and i == a.runs - 1:
            pr.enable()
        c0, t0 = time.process_time(), time.perf_counter()
        r = reconcile(a.capture, a.ledger, dk, trust=trust, workers=1)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        pr.disable()
        best = cpu if best is None else min(best, cpu)
        print(
            f"run {i + 1}: wall {wall:.2f} s, CPU {cpu:.2f} s, {r.frames / cpu:,.0f} records per "
            f"CPU-s (ok {r.ok}: {r.matched:,} matched, {r.ledger_only:,} ledger-only, "
            f"{r.capture_only:,} capture-only)"
        )
    print(
        f"best: CPU {best:.2f} s for {r.frames:,} records: {r.frames / best:,.0f} records per "
        f"CPU-s; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    if a.prof:
        pstats.Stats(pr).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
