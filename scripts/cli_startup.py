"""Wall time of `ledgertool --version` / `--help` start-up, and of the fixed cost of `capture` and
`verify` (the 294-frame samples/sample.pcapng into a new v2 ledger, and that ledger verified), best
of N runs (docs/benchmarks.md, "CLI start-up"), beside the bare interpreter's, and the child's CPU
time (user + system), which a machine busy with other work inflates less than the wall time. Run
it with the tree to measure on PYTHONPATH:

    PYTHONPATH=. python scripts/cli_startup.py [--runs 10] [--no-ledger] [--against DIR]

`--against DIR` measures a second tree (another checkout or worktree, with its native library
built; its .venv's interpreter if it has one) in the same run, the two alternating run by run, so
that both see the same load. The children run as an installed ledgertool does, with their
bytecode cached (pip writes it at install): PYTHONDONTWRITEBYTECODE is dropped from their
environment, so that the first run writes what the others read; `--keep-env` keeps it (every run
then compiles the sources that have no cached bytecode, ~0.1-0.2 s more).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = (["--version"], ["--help"], ["verify", "--help"], ["capture", "--help"])
ENTRY = "from ledgertool.cli import main; main()"
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "sample.pcapng"


class Tree:
    """A tree to measure: its interpreter and the environment its children run in."""

    def __init__(self, root: Path, keep_env: bool) -> None:
        venv = root / ".venv" / "bin" / "python"
        self.root = root
        self.python = str(venv) if venv.exists() else sys.executable
        self.env = dict(os.environ, PYTHONPATH=str(root))
        if not keep_env:
            self.env.pop("PYTHONDONTWRITEBYTECODE", None)

    def run(self, argv: list[str]) -> tuple[float, float]:
        """(wall, CPU) seconds of one run of `python argv`, stdout discarded."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(
            [self.python, *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.root,  # `python -c` puts the working directory first on sys.path
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode:
            sys.exit(f"{self.root}: {' '.join(argv)}: exit {r.returncode}\n{r.stderr}")
        return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def best_of(trees: list[Tree], argv: list[str], runs: int, before_each=None) -> list[tuple]:
    """(wall, CPU) of the fastest of `runs` runs of `python argv` in each tree, the trees taking
    turns; `before_each(tree, i)` returns the argv tail of run i (a new ledger for each capture)."""
    best = [(float("inf"), float("inf")) for _ in trees]
    for i in range(runs):
        for k, tree in enumerate(trees):
            tail = before_each(k, i) if before_each else []
            wall, cpu = tree.run([*argv, *tail])
            best[k] = (min(best[k][0], wall), min(best[k][1], cpu))
    return best


def ledger_cases(trees: list[Tree], work: Path):
    """(name, argv, before_each) of `capture` into a new ledger per run and `verify` of one."""
    keys = work / "keys"
    trees[0].run(["-c", ENTRY, "keys", "generate", str(keys)])
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
    yield "ledgertool capture (294 frames)", capture, lambda k, i: [str(work / f"L{k}-{i}")]
    yield (
        "ledgertool verify (294 records)",
        ["-c", ENTRY, "verify", str(work / "L0-0"), "--trust", str(keys / "verifier.pub"), "-q"],
        None,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-ledger", action="store_true", help="skip the capture and verify cases")
    ap.add_argument("--against", type=Path, help="a second tree, measured in the same run")
    ap.add_argument("--keep-env", action="store_true", help="keep PYTHONDONTWRITEBYTECODE")
    args = ap.parse_args()
    here = Path(os.environ.get("PYTHONPATH", ".").split(os.pathsep)[0]).resolve()
    trees = [Tree(here, args.keep_env)]
    if args.against:
        trees.append(Tree(args.against.resolve(), args.keep_env))
    for t in trees:
        print(f"tree {t.root} ({t.python})")
    print(f"{'command':<34}" + "".join(f" {'wall':>8} {'CPU':>8}" for _ in trees))
    cases = [("python -c pass", ["-c", "pass"], None)]
    cases += [("ledgertool " + " ".join(c), ["-c", ENTRY, *c], None) for c in CASES]
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        if not args.no_ledger:
            cases += list(ledger_cases(trees, Path(tmp)))
        for name, argv, before_each in cases:
            best = best_of(trees, argv, args.runs, before_each)
            print(f"{name:<34}" + "".join(f" {w:>6.3f} s {c:>6.3f} s" for w, c in best))


if __name__ == "__main__":
    main()
