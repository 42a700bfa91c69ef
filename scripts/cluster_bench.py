"""verify on one machine and on a LocalCluster of 1 and 2 worker processes (docs/cluster.md,
docs/benchmarks.md "verify --cluster").

Usage:  python scripts/cluster_bench.py N [--segment-records S] [--workers 1,2] [--workdir DIR]

Captures N generated 64-byte frames (the two-flow spec of scripts/scale_bench.py) into a ledger of
segments of S records, then runs `ledgertool verify L --trust verifier.pub --json` as a child
process without --cluster and with --cluster local:W for each W, and once more per W on a
one-segment ledger to measure the cluster's start and stop alone. Prints one markdown row per run:
wall seconds, records/s, and records/s per worker with the start-up time taken out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_bench import SPEC  # noqa: E402

_CLI = "from ledgertool.cli.app import main; main()"


def _cli(*args: object) -> tuple[float, dict]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _CLI, *map(str, args)], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"ledgertool {' '.join(map(str, args))}: exit {r.returncode}: {r.stderr.strip()}")
    return wall, json.loads(r.stdout) if r.stdout.strip() else {}


def _ledger(work: Path, keys: Path, n: int, seg: int) -> Path:
    spec = work / f"spec-{n}.toml"
    spec.write_text(SPEC.format(n=n, a=n // 2, b=n - n // 2))
    led = work / f"ledger-{n}"
    _cli("capture", f"workload:{spec}", "--ledger", led, "--digest-key", keys / "digest.key", "--signing-key",
         keys / "signing.key", "--segment-records", seg, "--json")
    return led


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int)
    ap.add_argument("--segment-records", type=int, default=100_000)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    keys = work / "keys"
    if not keys.exists():
        _cli("keys", "generate", keys, "--json")
    led = _ledger(work, keys, a.n, a.segment_records)
    tiny = _ledger(work, keys, 1000, 1000)
    trust = keys / "verifier.pub"
    print("| run | wall s | records/s | start+stop s | records/s per worker (start-up excluded) | result |")
    print("|---|---:|---:|---:|---:|---|")
    wall, rep = _cli("verify", led, "--trust", trust, "--json")
    print(f"| one machine | {wall:.2f} | {rep['records'] / wall:,.0f} | - | {rep['records'] / wall:,.0f} | "
          f"{'OK' if rep['ok'] else 'FAIL'}: {rep['segments']} segments, {rep['records']:,} records |", flush=True)
    for w in map(int, a.workers.split(",")):
        start, _ = _cli("verify", tiny, "--trust", trust, "--json", "--cluster", f"local:{w}")
        wall, rep = _cli("verify", led, "--trust", trust, "--json", "--cluster", f"local:{w}")
        per = rep["records"] / max(wall - start, 1e-9) / w
        print(f"| --cluster local:{w} | {wall:.2f} | {rep['records'] / wall:,.0f} | {start:.2f} | {per:,.0f} | "
              f"{'OK' if rep['ok'] else 'FAIL'}: {rep['segments']} segments, {rep['records']:,} records |", flush=True)


if __name__ == "__main__":
    main()
