"""Verification and reconciliation at scale: capture N generated 64-byte frames, verify the ledger,
then recompute the frames against it.

Usage:  python scripts/scale_bench.py 1000000 10000000 100000000 [--memory-limit 4GB] [--workdir DIR]
                                      [--no-verify] [--no-recompute]

For each N, a workload spec (two IPv4 UDP flows of 64-byte frames, as samples/workloads/
worst-case-64.toml) is written; `ledgertool capture workload:SPEC` builds a ledger and
`ledgertool verify L --trust verifier.pub` checks it (segments of 1,000,000 records: N / 10^6
segments), and `ledgertool recompute workload:SPEC --ledger L` reconciles the same frames against it
(DuckDB with a memory limit, spilling to a temporary directory). Each command runs as a child process; its wall
time and peak RSS (getrusage of the child) are printed as one markdown table row per command
(docs/benchmarks.md, "Verification at scale", "Reconciliation at scale").
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """version = 1
name = "scale-{n}"
seed = 64
start_ns = 1767225600000000000
interframe_ps = 1680

[[flows]]
name = "a-to-b"
src_mac = "02:00:5e:00:00:0a"
dst_mac = "02:00:5e:00:00:0b"
src_ip = "192.0.2.100"
dst_ip = "192.0.2.101"
protocol = "udp"
src_port = 1024
dst_port = 1025
frames = {a}
size = 64

[[flows]]
name = "b-to-a"
src_mac = "02:00:5e:00:00:0b"
dst_mac = "02:00:5e:00:00:0a"
src_ip = "192.0.2.101"
dst_ip = "192.0.2.100"
protocol = "udp"
src_port = 1025
dst_port = 1024
frames = {b}
size = 64
"""


_CHILD = ("import atexit, resource, sys; atexit.register(lambda: sys.stderr.write("
          "'MAXRSS %d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)); "
          "from ledgertool.cli.app import main; main()")


def run(args: list[str]) -> tuple[dict, float, int]:
    """Run `ledgertool ARGS --json` as a child; return (report, wall seconds, peak RSS bytes).
    The child reports its own peak RSS (getrusage RUSAGE_SELF, DuckDB included) at exit."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, *args, "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    rss_kib = int(proc.stderr.rsplit("MAXRSS ", 1)[1].split()[0])
    return json.loads(proc.stdout), wall, rss_kib * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("frames", type=int, nargs="+")
    ap.add_argument("--memory-limit", default="4GB")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--no-verify", action="store_true", help="skip the verify step")
    ap.add_argument("--no-recompute", action="store_true", help="skip the recompute step")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ledgertool-scale-", dir=a.workdir))
    try:
        subprocess.run([sys.executable, "-c", "from ledgertool.cli.app import main; main()", "keys", "generate",
                        str(work / "keys")], check=True, capture_output=True)
        print("| frames | step | wall s | frames/s | peak RSS MiB | result |")
        print("|---:|---|---:|---:|---:|---|")
        for n in a.frames:
            spec = work / f"scale-{n}.toml"
            spec.write_text(SPEC.format(n=n, a=n // 2, b=n - n // 2))
            ledger = work / f"ledger-{n}"
            rep, wall, rss = run(["capture", f"workload:{spec}", "--ledger", str(ledger),
                                  "--digest-key", str(work / "keys/digest.key"),
                                  "--signing-key", str(work / "keys/signing.key")])
            print(f"| {n:,} | capture (digest + seal) | {wall:.1f} | {n / wall:,.0f} | {rss / 2**20:,.0f} | "
                  f"{len(rep['segments'])} segments |", flush=True)
            if not a.no_verify:
                rep, wall, rss = run(["verify", str(ledger), "--trust", str(work / "keys/verifier.pub")])
                print(f"| {n:,} | verify | {wall:.1f} | {rep['records'] / wall:,.0f} | {rss / 2**20:,.0f} | "
                      f"{'OK' if rep['ok'] else 'FAIL'}: {rep['segments']} segments, {rep['records']:,} records |",
                      flush=True)
            if a.no_recompute:
                shutil.rmtree(ledger)
                continue
            rep, wall, rss = run(["recompute", f"workload:{spec}", "--ledger", str(ledger),
                                  "--trust", str(work / "keys/verifier.pub"),
                                  "--digest-key", str(work / "keys/digest.key"), "--memory-limit", a.memory_limit])
            print(f"| {n:,} | recompute + reconcile | {wall:.1f} | {n / wall:,.0f} | {rss / 2**20:,.0f} | "
                  f"matched {rep['matched']:,}, ledger-only {rep['ledger_only']}, capture-only {rep['capture_only']} |",
                  flush=True)
            shutil.rmtree(ledger)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
