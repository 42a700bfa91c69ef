"""What a segment costs a sealed capture beyond its records: the same frames captured into
segments of two sizes, CPU of the whole command (every thread), per extra segment.

Usage:  python scripts/segment_cost_bench.py [--frames 4000000] [--small 100000] [--rounds 7]
                                             [--workdir DIR]

`ledgertool capture workload:SPEC` (two flows of 64-byte frames, scripts/scale_bench.py) into a new
ledger with `--segment-records SMALL` and with `--segment-records FRAMES` (one segment),
alternating, ROUNDS rounds, in DIR (the storage to measure). A segment's own cost (open, close and
fsync, the seal and checkpoint: two hybrid signatures, the atomic writes and the device's protected
state) is the difference of the best CPU times over the difference of the segment counts; user and
system time and minor page faults are split the same way. Divide by the records a segment holds for
its cost a frame (at the default 1,000,000 records, 1 ms a segment is 1 ns a frame)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale_bench import SPEC, capture_args  # noqa: E402  (the 64-byte two-flow workload)

_CLI = "from ledgertool.cli.app import main; main()"


def run(args: list[str]) -> tuple[float, float, int]:
    """`ledgertool ARGS` as a child: (user s, system s, minor faults), every thread (wait4)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"ledgertool {' '.join(args)} failed: {proc.stderr.read().decode()}")
    return usage.ru_utime, usage.ru_stime, usage.ru_minflt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=4_000_000)
    ap.add_argument("--small", type=int, default=100_000, help="records a segment, the small size")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--workdir", type=Path, default=None)
    a = ap.parse_args()
    if not 0 < a.small < a.frames:
        raise SystemExit("--small must be between 0 and --frames")
    work = Path(tempfile.mkdtemp(prefix="ledgertool-segcost-", dir=a.workdir))
    try:
        keys = work / "keys"
        run(["keys", "generate", str(keys)])
        spec = work / "spec.toml"
        spec.write_text(SPEC.format(n=a.frames, a=a.frames // 2, b=a.frames - a.frames // 2))
        sizes = (a.small, a.frames)
        best: dict[int, tuple[float, float, int]] = {}
        for _ in range(a.rounds):
            for size in sizes:
                ledger = work / "L"
                shutil.rmtree(ledger, ignore_errors=True)
                got = run(
                    capture_args(spec, ledger, keys, "--segment-records", str(size), "--quiet")
                )
                if size not in best or sum(got[:2]) < sum(best[size][:2]):
                    best[size] = got
        extra = -(-a.frames // a.small) - 1
        (su, ss, sf), (bu, bs, bf) = best[a.small], best[a.frames]
        print(
            f"{a.frames:,} frames in segments of {a.small:,} and {a.frames:,} records, best of "
            f"{a.rounds}: {(su + ss - bu - bs) / extra * 1e3:.2f} ms of CPU a segment (user "
            f"{(su - bu) / extra * 1e3:.2f}, system {(ss - bs) / extra * 1e3:.2f}), "
            f"{(sf - bf) / extra:,.0f} minor faults a segment"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
