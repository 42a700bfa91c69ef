"""Wall time of `ledgertool --version` / `--help` start-up, best of N runs (docs/benchmarks.md,
"CLI start-up"), beside the bare interpreter's, and the child's CPU time (user + system), which
a machine busy with other work inflates less than the wall time. Run it with the tree to measure on PYTHONPATH:

    PYTHONPATH=. python scripts/cli_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

CASES = (["--version"], ["--help"], ["verify", "--help"], ["capture", "--help"])
ENTRY = "from ledgertool.cli import main; main()"


def best_of(argv: list[str], runs: int) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of `runs` runs of `python argv` (stdout discarded)."""
    wall = cpu = float("inf")
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, *argv], stdout=subprocess.DEVNULL, check=True)
        wall = min(wall, time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = min(cpu, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    runs = ap.parse_args().runs
    print(f"{'command':<34} {'wall':>8} {'CPU':>8}")
    for name, argv in [("python -c pass", ["-c", "pass"])] + [("ledgertool " + " ".join(c), ["-c", ENTRY, *c])
                                                             for c in CASES]:
        wall, cpu = best_of(argv, runs)
        print(f"{name:<34} {wall:>6.3f} s {cpu:>6.3f} s")


if __name__ == "__main__":
    main()
