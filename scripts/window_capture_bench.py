"""CPU per frame of `capture --tiers windows` next to the engine alone (capture:engine: reader,
strip, digest, records), and of `--tiers windows,frames` next to the sealed per-frame capture
(`--tiers frames`), the same 64-byte pcap, one digest thread each, best of 5, same run
(docs/adr/0012-window-commitments.md, "Measured"; docs/benchmarks.md, "The window tier"):

    python scripts/window_capture_bench.py [--frames 2000000] [--rounds 5] [--beyond 6000000]

--beyond N also times the engine and `--tiers windows` on N frames and prints the CPU per frame
beyond start-up: (CPU at N - CPU at --frames) / (N - --frames), best of --rounds each.
--startup N prints the CPU of a 1,000-frame `--tiers windows` capture (its start-up: the ledger,
keys, window segment, seal and checkpoints), best and median of N.
--fill times the engine's own loop instead, best of --rounds, interleaved: the engine alone, the
engine feeding a window accumulator with its records kept (as `--tiers windows,frames` does), and
with the records wanted only by the window (`--tiers windows`: DigestEngine.fill's window_only).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from ledgertool._binding import ffi
from ledgertool.algorithms import get_algorithm
from ledgertool.bench.measure import cpu_model, write_synthetic_pcap
from ledgertool.capture.run import capture_file
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.window import WindowAccumulator, WindowKeys
from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys
from ledgertool.source.file import CaptureReader

ALG = get_algorithm("siphash-1-3-128")


def engine_ns(path: Path) -> float:
    frames = 0
    with CaptureReader(path) as r:
        e = DigestEngine(r, ALG, 0, bytes(16), workers=1)
        t = time.process_time()
        while True:
            _, n, _ = e.fill(frames)
            if n == 0:
                break
            frames += n
        return (time.process_time() - t) / frames * 1e9


def fill_ns(path: Path, window_only: bool | None) -> float:
    """The engine's loop into a capture's 3 MB buffer, feeding a window (None: no window)."""
    frames = 0
    buf = ffi.new("uint8_t[]", 65536 * (32 + ALG.digest_size))
    with CaptureReader(path) as r:
        e = DigestEngine(r, ALG, 0, bytes(16), workers=1)
        acc = WindowAccumulator(WindowKeys(bytes(16), bytes(16)), ALG.digest_size)
        t = time.process_time()
        while True:
            if window_only is None:
                _, n, _ = e.fill(frames, None, buf)
            else:
                _, n, _ = e.fill(frames, None, buf, window=acc, window_only=window_only)
                acc.take_closed()
            if n == 0:
                break
            frames += n
        return (time.process_time() - t) / frames * 1e9


def capture_ns(path: Path, keys: Path, out: Path, tiers: tuple[str, ...]) -> float:
    dk, sk = DigestKey.load(keys / "digest.key"), SigningKey.load(keys / "signing.key")
    t = time.process_time()
    res = capture_file(path, out, digest_key=dk, signing_key=sk, workers=1, tiers=tiers)
    return (time.process_time() - t) / res.frames * 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--beyond", type=int, default=0)
    ap.add_argument("--startup", type=int, default=0)
    ap.add_argument("--fill", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pcap = tmp / "f64.pcap"
        write_synthetic_pcap(pcap, args.frames, 64)
        generate_keys(tmp / "keys")
        if args.startup:
            startup(tmp, args.startup)
            return
        if args.fill:
            fill(pcap, args)
            return
        tiers = {"windows": ("windows",), "frames": ("frames",), "both": ("windows", "frames")}
        best: dict[str, list[float]] = {"engine": [], **{t: [] for t in tiers}}
        for k in range(args.rounds):  # interleaved, so that noise hits each alike
            best["engine"].append(engine_ns(pcap))
            for name, t in tiers.items():
                best[name].append(capture_ns(pcap, tmp / "keys", tmp / f"{name}{k}", t))
                shutil.rmtree(tmp / f"{name}{k}")
        eng = min(best["engine"])
        path = WindowAccumulator(WindowKeys(bytes(16), bytes(16)), 16).path
        print(
            f"CPU: {cpu_model()}; {args.frames:,} 64-byte frames, best of {args.rounds}; "
            f"window accumulator path {path}"
        )
        for name, label in (
            ("engine", "capture:engine"),
            ("windows", "capture --tiers windows"),
            ("frames", "capture --tiers frames (sealed)"),
            ("both", "capture --tiers windows,frames"),
        ):
            ns = min(best[name])
            print(f"{label:34s} {ns:6.1f} ns/frame CPU  ({ns / eng:.2f}x engine)")
        both, frames = min(best["both"]), min(best["frames"])
        print(f"windows,frames / frames: {both / frames:.2f}x")
        if args.beyond > args.frames:
            beyond(tmp, args, min(best["engine"]), min(best["windows"]))


def startup(tmp: Path, rounds: int) -> None:
    """CPU of a 1,000-frame `--tiers windows` capture, best and median of `rounds`."""
    small = tmp / "small.pcap"
    write_synthetic_pcap(small, 1000, 64)
    ms = []
    for k in range(rounds + 1):  # the first imports what a capture imports: not counted
        ms.append(capture_ns(small, tmp / "keys", tmp / f"S{k}", ("windows",)) * 1000 / 1e6)
        shutil.rmtree(tmp / f"S{k}")
    ms = sorted(ms[1:])
    print(
        f"CPU: {cpu_model()}; start-up of capture --tiers windows (1,000 frames), best of "
        f"{rounds}: {ms[0]:.2f} ms (median {ms[len(ms) // 2]:.2f})"
    )


def fill(pcap: Path, args: argparse.Namespace) -> None:
    """The engine's loop alone, feeding a window with its records kept, and window only."""
    kinds = {"engine": None, "window, records kept": False, "window only": True}
    ns: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for k, only in kinds.items():
            ns[k].append(fill_ns(pcap, only))
    eng = min(ns["engine"])
    print(f"CPU: {cpu_model()}; the engine's fill, {args.frames:,} 64-byte frames, best of")
    print(f"{args.rounds} (median), interleaved:")
    for k, v in ns.items():
        v.sort()
        print(f"  {k:22s} {v[0]:6.1f} ns/frame ({v[len(v) // 2]:.1f})  +{v[0] - eng:.1f} ns")


def beyond(tmp: Path, args: argparse.Namespace, eng_ns: float, win_ns: float) -> None:
    """CPU per frame beyond start-up of the engine and of `--tiers windows`."""
    big = tmp / "big.pcap"
    write_synthetic_pcap(big, args.beyond, 64)
    e_ns = min(engine_ns(big) for _ in range(args.rounds))
    w_ns = []
    for k in range(args.rounds):
        w_ns.append(capture_ns(big, tmp / "keys", tmp / f"B{k}", ("windows",)))
        shutil.rmtree(tmp / f"B{k}")
    n0, n1 = args.frames, args.beyond
    e = (e_ns * n1 - eng_ns * n0) / (n1 - n0)
    w = (min(w_ns) * n1 - win_ns * n0) / (n1 - n0)
    print(f"beyond start-up ({n1:,} less {n0:,} frames):")
    print(f"  capture:engine {e:.1f} ns/frame, --tiers windows {w:.1f} ({w / e:.2f}x engine)")


if __name__ == "__main__":
    main()
