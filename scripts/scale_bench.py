"""Capture, verify and recompute at scale, as a user runs them: CPU time and peak memory.

Usage:  python scripts/scale_bench.py 2000000 10000000 [--memory-limit 4GB] [--workdir DIR]
                                      [--no-verify] [--no-recompute]

For each N, a workload spec (two IPv4 UDP flows of 64-byte frames, as samples/workloads/
worst-case-64.toml) is written; `ledgertool capture workload:SPEC` builds a ledger (segments of
1,000,000 records), `ledgertool verify L --trust verifier.pub` checks it and `ledgertool recompute
workload:SPEC --ledger L` reconciles the same frames against it. Each command runs as a child
process; one markdown row per command gives its wall time, its CPU time (user + system of every
thread, from wait4) and its peak RSS. The CPU a frame costs beyond start-up is the difference of
two sizes' CPU divided by the difference of their frames (docs/benchmarks.md, "How to read the
figures").
"""

from __future__ import annotations

import argparse
import json
import os
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


_CLI = "from ledgertool.cli.app import main; main()"


def capture_args(spec: Path, ledger: Path, keys: Path, *extra: str) -> list[str]:
    """`ledgertool capture workload:SPEC` into `ledger` with the keys in `keys`."""
    return [
        "capture",
        f"workload:{spec}",
        "--ledger",
        str(ledger),
        "--digest-key",
        str(keys / "digest.key"),
        "--signing-key",
        str(keys / "signing.key"),
        *extra,
    ]


def run(args: list[str]) -> tuple[dict, float, float, int]:
    """Run `ledgertool ARGS --json` as a child; return (report, wall s, CPU s, peak RSS bytes).
    CPU and peak RSS are the child's own (wait4: every thread, DuckDB's included)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        argv = [sys.executable, "-c", _CLI, *args, "--json"]
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode not in (0, 1):
            why = err.read().decode().strip()
            raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {why}")
        return json.loads(out.read()), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


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
        keys = work / "keys"
        subprocess.run(
            [sys.executable, "-c", _CLI, "keys", "generate", str(keys)],
            check=True,
            capture_output=True,
        )
        print("| frames | step | wall s | CPU s | peak RSS MiB | result |")
        print("|---:|---|---:|---:|---:|---|")
        for n in a.frames:
            spec = work / f"scale-{n}.toml"
            spec.write_text(SPEC.format(n=n, a=n // 2, b=n - n // 2))
            ledger = work / f"ledger-{n}"
            rep, wall, cpu, rss = run(capture_args(spec, ledger, keys))
            mib = rss / 2**20
            print(
                f"| {n:,} | capture (digest + seal) | {wall:.2f} | {cpu:.2f} | {mib:,.0f} | "
                f"{len(rep['segments'])} segments |",
                flush=True,
            )
            if not a.no_verify:
                rep, wall, cpu, rss = run(
                    ["verify", str(ledger), "--trust", str(keys / "verifier.pub")]
                )
                mib = rss / 2**20
                print(
                    f"| {n:,} | verify | {wall:.2f} | {cpu:.2f} | {mib:,.0f} | "
                    f"{'OK' if rep['ok'] else 'FAIL'}: {rep['segments']} segments, "
                    f"{rep['records']:,} records |",
                    flush=True,
                )
            if a.no_recompute:
                shutil.rmtree(ledger)
                continue
            rep, wall, cpu, rss = run(
                [
                    "recompute",
                    f"workload:{spec}",
                    "--ledger",
                    str(ledger),
                    "--trust",
                    str(keys / "verifier.pub"),
                    "--digest-key",
                    str(keys / "digest.key"),
                    "--memory-limit",
                    a.memory_limit,
                ]
            )
            mib = rss / 2**20
            print(
                f"| {n:,} | recompute + reconcile | {wall:.2f} | {cpu:.2f} | {mib:,.0f} | "
                f"matched {rep['matched']:,}, ledger-only {rep['ledger_only']}, capture-only "
                f"{rep['capture_only']} |",
                flush=True,
            )
            shutil.rmtree(ledger)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
