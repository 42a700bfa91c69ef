"""capture:engine with 1 and 2 workers, alternating, 7 runs each after a warm-up: a synthetic pcap
of N frames of SIZE bytes (page cache), reader -> strip -> siphash-1-3-128 -> records, no sealing.
Usage: python scripts/engine_workers.py 1000000 [64]"""
import sys
import tempfile
import time
from pathlib import Path

from ledgertool.algorithms import ALGORITHMS
from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.digest.engine import DigestEngine
from ledgertool.source.file import CaptureReader

alg = ALGORITHMS["siphash-1-3-128"]; frames = int(sys.argv[1]); size = int(sys.argv[2]) if len(sys.argv) > 2 else 64
with tempfile.TemporaryDirectory() as d:
    pcap = Path(d) / "x.pcap"; write_synthetic_pcap(pcap, frames, size)
    def run(w):
        t = time.perf_counter()
        with CaptureReader(pcap) as r:
            e = DigestEngine(r, alg, 0, bytes(16), workers=w); seq = 0
            while True:
                _, n, _ = e.fill(seq)
                if n == 0: break
                seq += n
        assert seq == frames
        return frames / (time.perf_counter() - t) / 1e6
    for w in (1, 2): run(w)
    res = {1: [], 2: []}
    for _ in range(7):
        for w in (1, 2): res[w].append(run(w))
    for w in (1, 2):
        r = sorted(res[w]); print(f"  workers {w}: median {r[3]:6.2f}  best {r[-1]:6.2f} Mframes/s  ({' '.join(f'{x:.1f}' for x in res[w])})")
    m1, m2 = sorted(res[1])[3], sorted(res[2])[3]; print(f"  2/1 workers: {m2/m1:.2f}x (medians)")
