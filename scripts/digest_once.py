"""One isolation run for instruction counting: COUNT messages of SIZE bytes through lt_dctx_run_many
(batches of 4096) on one CPU path, nothing else. Under callgrind (valgrind has no AVX-512, so the
avx2-mb and portable paths only), instructions per frame = Collected / COUNT:
  valgrind --tool=callgrind --toggle-collect='lt_siphash_many_avx2' \\
      python scripts/digest_once.py siphash-1-3-128 avx2-mb 64 65536
(call the interpreter binary itself, not a pyenv shim script, or valgrind traces the shell)."""
import sys

from ledgertool._binding import ffi, lib

from ledgertool.algorithms import ALGORITHMS
from ledgertool.bench.measure import _BUF_SLACK
from ledgertool.digest.engine import force_cpu_path

alg = ALGORITHMS[sys.argv[1]]
force_cpu_path(alg, sys.argv[2])
size, count = int(sys.argv[3]), int(sys.argv[4])
buf = bytes(range(256)) * ((size + _BUF_SLACK) // 256 + 1)
ns = ffi.new("uint64_t *")
sink = ffi.new("uint8_t[16]")
if lib.lt_bench_digest_batch(alg.native_id, bytes(alg.key_size), buf, len(buf), size, count, 1, 4096, ns, ffi.NULL,
                             sink) != lib.LT_OK:
    raise SystemExit("lt_bench_digest_batch failed")
