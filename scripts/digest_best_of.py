"""Best-of-N short isolation runs per (algorithm, CPU path, size): on a busy machine the least
disturbed run says more than the median. Usage:
  python scripts/digest_best_of.py siphash-1-3-128 avx512-mb,avx2-mb 64,1500 [runs=25]
Each run digests ~15-30 ms of messages through lt_dctx_run_many (batches of 4096), one thread."""
import os
import sys

from ledgertool._binding import ffi, lib

from ledgertool.algorithms import ALGORITHMS
from ledgertool.bench.measure import _BUF_SLACK
from ledgertool.digest.engine import force_cpu_path

algs = sys.argv[1].split(","); paths = sys.argv[2].split(","); sizes=[int(x) for x in sys.argv[3].split(",")]
N = int(sys.argv[4]) if len(sys.argv) > 4 else 25
for a in algs:
    alg = ALGORITHMS[a]
    for p in paths:
        force_cpu_path(alg, p)
        for s in sizes:
            buf = os.urandom(s + _BUF_SLACK); key = os.urandom(alg.key_size)
            ns = ffi.new("uint64_t *"); sink = ffi.new("uint8_t[16]")
            count = max(2000, int(3e6 // max(s, 64) * 8))  # ~15-30 ms per run
            rates = []
            for _ in range(N):
                assert lib.lt_bench_digest_batch(alg.native_id, key, buf, len(buf), s, count, 1, 4096, ns, ffi.NULL, sink) == 0
                rates.append(count / (ns[0] / 1e9))
            rates.sort()
            print(f"{a:18s} {p:10s} {s:5d} B  best {rates[-1]/1e6:7.2f}  p75 {rates[3*N//4]/1e6:7.2f}  median {rates[N//2]/1e6:7.2f} Mf/s", flush=True)
        force_cpu_path(alg, None)
