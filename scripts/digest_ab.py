"""Interleaved A/B of two builds of the native library in one process: both .so files are loaded
with ctypes (RTLD_LOCAL), and lt_digest_many on the same 16384 frames alternates between them, best
of --runs each, so load from other processes hits both alike. Usage (the "before" build made in a
copy of an older commit with `python native/build_ffi.py`):
  python scripts/digest_ab.py BEFORE.so AFTER.so [--paths avx512-mb,avx2-mb] [--runs 60]
Batches: every frame 60, 64 or 1500 bytes (lockstep groups), IMIX-like 60/590/1514 in 7:4:1 and
uniform random 40..100 bytes (the lane scheme); siphash-1-3-128, frames from a 128 KiB buffer."""
import argparse
import ctypes
import os
import random
import time

ap = argparse.ArgumentParser()
ap.add_argument("before")
ap.add_argument("after")
ap.add_argument("--paths", default="avx512-mb,avx2-mb")
ap.add_argument("--runs", type=int, default=60)
a = ap.parse_args()
libs = {"before": ctypes.CDLL(os.path.abspath(a.before), mode=os.RTLD_LOCAL),
        "after": ctypes.CDLL(os.path.abspath(a.after), mode=os.RTLD_LOCAL)}
for lib in libs.values():
    lib.lt_cpu_path_force.argtypes = [ctypes.c_int, ctypes.c_char_p]
SIPHASH_1_3_128 = 1  # LT_ALG_SIPHASH_1_3_128
rng = random.Random(7)
n = 16384
buf = ctypes.create_string_buffer(rng.randbytes(2048 * 64), 2048 * 64)
ptrs = (ctypes.c_void_p * n)(*[ctypes.addressof(buf) + (i % 64) * 2048 for i in range(n)])
out = ctypes.create_string_buffer(n * 16)
key = ctypes.create_string_buffer(16)
shapes = {"all 60 B": [60] * n, "all 64 B": [64] * n, "all 1500 B": [1500] * n,
          "IMIX 60/590/1514 7:4:1": [rng.choice([60] * 7 + [590] * 4 + [1514]) for _ in range(n)],
          "random 40..100 B": [rng.randint(40, 100) for _ in range(n)]}
print("| path | batch | before M frames/s | after M frames/s | after / before |\n|---|---|---:|---:|---:|")
for path in a.paths.split(","):
    for lib in libs.values():
        if lib.lt_cpu_path_force(SIPHASH_1_3_128, path.encode()) != 0:
            raise SystemExit(f"CPU path {path} is not available in both builds")
    for name, lens in shapes.items():
        cl = (ctypes.c_uint32 * n)(*lens)
        best = {k: float("inf") for k in libs}
        for _ in range(a.runs):
            for k, lib in libs.items():
                t = time.perf_counter()
                lib.lt_digest_many(SIPHASH_1_3_128, key, ptrs, cl, ctypes.c_size_t(n), out, ctypes.c_size_t(16))
                best[k] = min(best[k], time.perf_counter() - t)
        print(f"| {path} | {name} | {n / best['before'] / 1e6:.1f} | {n / best['after'] / 1e6:.1f} | "
              f"{best['before'] / best['after']:.2f} |")
