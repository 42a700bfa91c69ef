"""Window tier costs, measured in one run (docs/adr/0012, docs/benchmarks.md):

- ns of CPU per frame of the window accumulator (keyed hash + IBLT, default table) on the records
  the engine produced, next to the engine's own ns per frame (capture:engine: reader, strip, digest,
  records) over the same 64-byte pcap; best of 5 each;
- decode time of a window differing at capacity (64 differences, the default table), best of 5;
- the decode failure rate at capacity over many random differences.

    python scripts/window_bench.py [--frames 2000000] [--trials 20000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from ledgertool.algorithms import get_algorithm
from ledgertool.bench.measure import cpu_model, write_synthetic_pcap
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.record import record_dtype
from ledgertool.digest.window import WindowAccumulator, WindowKeys, cells_for_capacity
from ledgertool.reconcile.windows import compare_windows
from ledgertool.source.file import CaptureReader

ALG = get_algorithm("siphash-1-3-128")
KEYS = WindowKeys(bytes(range(16)), bytes(range(16, 32)))


def engine_pass(path: Path, keep: bool) -> tuple[float, np.ndarray | None]:
    parts, frames = [], 0
    with CaptureReader(path) as r:
        e = DigestEngine(r, ALG, 0, bytes(16))
        t = time.process_time()
        while True:
            view, n, _ = e.fill(frames)
            if n == 0:
                break
            if keep:
                parts.append(np.frombuffer(view, record_dtype(16)).copy())
            frames += n
        dt = time.process_time() - t
    return dt / frames * 1e9, (np.concatenate(parts) if keep else None)


def window_pass(recs: np.ndarray, window_ns: int) -> float:
    batch = 16384  # the engine's batch
    acc = WindowAccumulator(KEYS, 16, window_ns=window_ns, cells=cells_for_capacity(64))
    t = time.process_time()
    for at in range(0, len(recs), batch):
        acc.add(recs[at : at + batch])
    acc.finish()
    return (time.process_time() - t) / len(recs) * 1e9


def differing(rng: random.Random, nl: int, nc: int):
    common = [rng.randbytes(16) for _ in range(1000)]
    sides = []
    for extra in (nl, nc):
        ds = common + [rng.randbytes(16) for _ in range(extra)]
        r = np.zeros(len(ds), record_dtype(16))
        r["digest"] = np.frombuffer(b"".join(ds), "V16")
        acc = WindowAccumulator(KEYS, 16, cells=cells_for_capacity(64))
        sides.append((acc.add(r) + acc.finish())[0])
    return sides


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=2_000_000)
    ap.add_argument("--trials", type=int, default=20_000)
    args = ap.parse_args()
    print(f"CPU: {cpu_model()}")
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "b.pcap"
        write_synthetic_pcap(pcap, args.frames, 64)
        _, recs = engine_pass(pcap, True)
        # timestamps 1 us apart, as in the synthetic pcap; 1 s and 1 ms windows
        engine = min(engine_pass(pcap, False)[0] for _ in range(5))
        win = {w: min(window_pass(recs, w) for _ in range(5)) for w in (10**9, 10**6)}
        engine2 = min(engine_pass(pcap, False)[0] for _ in range(5))
    print(
        f"engine (capture:engine, 64 B): {min(engine, engine2):.1f} ns/frame "
        f"(runs {engine:.1f}, {engine2:.1f})"
    )
    for w, ns in win.items():
        print(
            f"window tier, {w / 1e9:g} s windows, capacity 64: {ns:.2f} ns/frame "
            f"= {ns / min(engine, engine2):.1%} of the engine"
        )
    rng = random.Random(1)
    led, cap = differing(rng, 32, 32)
    best = min(_timed(lambda: compare_windows(KEYS, led, cap)) for _ in range(5))
    print(
        f"decode at capacity (32 + 32 differences, {led.cells} cells): {best * 1e3:.3f} ms "
        f"(decoded: {compare_windows(KEYS, led, cap).decoded})"
    )
    for nl, nc in ((32, 32), (64, 0)):
        fails = sum(
            not compare_windows(KEYS, *differing(rng, nl, nc)).decoded for _ in range(args.trials)
        )
        print(
            f"failure at capacity ({nl} ledger-only + {nc} capture-only): {fails}/{args.trials} "
            f"= {fails / args.trials:.3%}"
        )


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
