"""Wall time of `ledgertool --version` / `--help` start-up, and of the fixed cost of `capture` and
`verify` (the 294-frame samples/sample.pcapng into a new v2 ledger, and that ledger verified), best
of N runs (docs/benchmarks.md, "CLI start-up"), beside the bare interpreter's, and the child's CPU
time (user + system), which a machine busy with other work inflates less than the wall time. Run
it with the tree to measure on PYTHONPATH:

    PYTHONPATH=. python scripts/cli_startup.py [--runs 10] [--no-ledger]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = (["--version"], ["--help"], ["verify", "--help"], ["capture", "--help"])
ENTRY = "from ledgertool.cli import main; main()"
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "sample.pcapng"


def best_of(argv: list[str], runs: int, before_each=None) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest of `runs` runs of `python argv` (stdout discarded);
    `before_each(i)` returns the argv tail of run i (a new ledger for each capture)."""
    wall = cpu = float("inf")
    for i in range(runs):
        tail = before_each(i) if before_each else []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, *argv, *tail],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if r.returncode:
            sys.exit(f"{' '.join(argv + tail)}: exit {r.returncode}\n{r.stderr}")
        wall = min(wall, time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = min(cpu, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall, cpu


def ledger_cases(work: Path):
    """(name, argv, before_each) of `capture` into a new ledger per run and `verify` of one."""
    keys = work / "keys"
    subprocess.run(
        [sys.executable, "-c", ENTRY, "keys", "generate", str(keys)],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    capture = [
        "-c",
        ENTRY,
        "capture",
        str(SAMPLE),
        "--signing-key",
        str(keys / "signing.key"),
        "--digest-key",
        str(keys / "digest.key"),
        "--quiet",
        "--ledger",
    ]
    yield "ledgertool capture (294 frames)", capture, lambda i: [str(work / f"L{i}")]
    yield (
        "ledgertool verify (294 records)",
        ["-c", ENTRY, "verify", str(work / "L0"), "--trust", str(keys / "verifier.pub"), "--quiet"],
        None,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-ledger", action="store_true", help="skip the capture and verify cases")
    args = ap.parse_args()
    print(f"{'command':<34} {'wall':>8} {'CPU':>8}")
    cases = [("python -c pass", ["-c", "pass"], None)]
    cases += [("ledgertool " + " ".join(c), ["-c", ENTRY, *c], None) for c in CASES]
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        if not args.no_ledger:
            cases += list(ledger_cases(Path(tmp)))
        for name, argv, before_each in cases:
            wall, cpu = best_of(argv, args.runs, before_each)
            print(f"{name:<34} {wall:>6.3f} s {cpu:>6.3f} s")


if __name__ == "__main__":
    main()
