"""Best-of-N isolation runs of a keyed digest per CPU path and size, and (for blake3-keyed-128) the
`blake3` package on the same sizes in the same process. Usage:
  python scripts/blake3_best_of.py 1500,4096,9000,65536,1048576 [runs=25] [paths=all]
  ALG=hmac-sha256-128 python scripts/blake3_best_of.py 1500,9000 15 sha-ni
Each run digests ~12 MiB through lt_bench_digest_batch (batches of 256, one thread), the call the
`bench` digest rows make; the package row is blake3.blake3(msg, key=k).digest(16), one Python call
per message. Prints GB/s (10^9 bytes/s) and M frames/s of the best run."""
import os
import sys
import time

import blake3
from ledgertool._binding import ffi, lib

import ledgertool
from ledgertool.algorithms import ALGORITHMS
from ledgertool.bench.measure import _BUF_SLACK
from ledgertool.digest.engine import cpu_paths, force_cpu_path

sizes = [int(x) for x in sys.argv[1].split(",")]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 25
alg = ALGORITHMS[os.environ.get("ALG", "blake3-keyed-128")]
paths = sys.argv[3].split(",") if len(sys.argv) > 3 else cpu_paths(alg)
print("#", alg.name, ledgertool.__file__)
for s in sizes:
    buf = os.urandom(s + _BUF_SLACK)
    key = os.urandom(alg.key_size)
    count = max(8, (12 << 20) // s)
    ns = ffi.new("uint64_t *")
    sink = ffi.new("uint8_t[16]")
    for p in paths:
        force_cpu_path(alg, p)
        best = 0.0
        for _ in range(N):
            rc = lib.lt_bench_digest_batch(alg.native_id, key, buf, len(buf), s, count, 1, 256, ns, ffi.NULL, sink)
            assert rc == 0, rc
            best = max(best, count * s / ns[0])
        force_cpu_path(alg, None)
        print(f"{s:8d} {p:12s} best {best:6.2f} GB/s {best * 1e9 / s / 1e6:8.3f} Mf/s", flush=True)
    if alg.name != "blake3-keyed-128":
        continue
    msg, h, best = buf[:s], blake3.blake3, 0.0
    for _ in range(N):
        t = time.perf_counter_ns()
        for _ in range(count):
            h(msg, key=key).digest(16)
        best = max(best, count * s / (time.perf_counter_ns() - t))
    print(f"{s:8d} {'blake3-pkg':12s} best {best:6.2f} GB/s {best * 1e9 / s / 1e6:8.3f} Mf/s", flush=True)
