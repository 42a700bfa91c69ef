"""CPU per frame of the window accumulator alone (lt_window_add, 1 s windows, capacity 64), on the
engine's records of a 64-byte pcap, each 16,384-record batch copied into one buffer first so that
it is in cache as the engine leaves it (the copy is not timed); best of --rounds
(docs/adr/0012-window-commitments.md, "Measured"):

    python scripts/window_acc_bench.py [--frames 2000000] [--rounds 21] [--against OTHER.so]

--against loads another build's ledgertool/_native.abi3.so beside this one and times both in the
same process, alternating, on the same records (and checks that their window records are
identical): a before/after of a native change without the load of the machine between two runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ledgertool import _binding as this
from ledgertool.algorithms import get_algorithm
from ledgertool.bench.measure import cpu_model, write_synthetic_pcap
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.record import record_dtype
from ledgertool.digest.window import cells_for_capacity
from ledgertool.source.file import CaptureReader

BATCH = 16384  # the engine's digest pass


def load_other(path: str):
    """Another build of the native module; cffi registers a module under the name it was built
    as (ledgertool._native), so this one's entries are put back."""
    saved = {k: v for k, v in sys.modules.items() if k.startswith("ledgertool._native")}
    spec = importlib.util.spec_from_file_location("other_build._native", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules.update(saved)
    if mod.lib is this.lib:
        raise SystemExit(f"{path} is this build's module")
    return mod


def records(frames: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "a.pcap"
        write_synthetic_pcap(pcap, frames, 64)
        parts, seq = [], 0
        with CaptureReader(pcap) as r:
            e = DigestEngine(r, get_algorithm("siphash-1-3-128"), 0, bytes(16))
            while True:
                view, n, _ = e.fill(seq)
                if n == 0:
                    break
                parts.append(np.frombuffer(view, record_dtype(16)).copy())
                seq += n
    return np.concatenate(parts)


def accumulate(mod, recs: np.ndarray) -> tuple[float, bytes]:
    """ns of CPU per frame of lt_window_add (this thread), and the window records."""
    ffi, lib = mod.ffi, mod.lib
    cells, rs = cells_for_capacity(64), recs.dtype.itemsize
    out = ffi.new("lt_window_acc **")
    if lib.lt_window_new(bytes(range(16)), bytes(range(16, 32)), 10**9, cells, 16, 0, out):
        raise SystemExit("lt_window_new failed")
    acc, size = out[0], lib.lt_window_record_size(cells, 16)
    buf, k, used = ffi.new("uint8_t[]", size * 64), ffi.new("size_t *"), ffi.new("size_t *")
    src, hot = ffi.from_buffer(recs), ffi.new("uint8_t[]", BATCH * rs)
    got, ns = bytearray(), 0
    for at in range(0, len(recs), BATCH):
        n, done = min(BATCH, len(recs) - at), 0
        ffi.memmove(hot, src + at * rs, n * rs)
        while done < n:
            t = time.thread_time_ns()
            lib.lt_window_add(acc, hot + done * rs, n - done, rs, buf, size * 64, k, used)
            ns += time.thread_time_ns() - t
            got += ffi.buffer(buf, k[0] * size)
            done += used[0]
    lib.lt_window_finish(acc, buf, size * 64, k)
    got += ffi.buffer(buf, k[0] * size)
    lib.lt_window_free(acc)
    return ns / len(recs), bytes(got)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--against", help="another build's _native.abi3.so")
    args = ap.parse_args()
    builds = {"this build": this}
    if args.against:
        builds["--against"] = load_other(args.against)
    recs = records(args.frames)
    times: dict[str, list[float]] = {name: [] for name in builds}
    outs: dict[str, bytes] = {}
    for _ in range(args.rounds):  # alternating, so that the machine's load hits each alike
        for name, mod in builds.items():
            ns, outs[name] = accumulate(mod, recs)
            times[name].append(ns)
    print(
        f"CPU: {cpu_model()}; window accumulator alone, {args.frames:,} 64-byte frames, "
        f"1 s windows, capacity 64, {BATCH:,}-record batches in cache, best of {args.rounds}"
    )
    for name, ts in times.items():
        ts.sort()
        print(f"{name:12s} {ts[0]:5.2f} ns/frame (median {ts[len(ts) // 2]:.2f})")
    if len(outs) == 2:
        same = len(set(outs.values())) == 1
        print("window records: " + ("identical" if same else "DIFFER"))


if __name__ == "__main__":
    main()
