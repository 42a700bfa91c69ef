"""Cost of authenticated open segments (issue 14; docs/adr/0009-authenticated-open-segments.md;
docs/benchmarks.md, "Open-segment MACs"). Measurement only.

  python scripts/open_mac_bench.py [--reps 31] [--records 1048576]

Per record, for 48- and 64-byte records and blocks (appends) of 64, 1,024, 16,384 and 65,536
records, best and median wall ns of --reps rounds over a segment of --records records:
  mac     OpenSegmentKey.block_mac chained over every block (HMAC-SHA-256, OpenSSL)
  sha256  hashlib.sha256 over the same blocks: the reference pass over every byte (same run, so the
          ratio holds under load)
  copy    the records appended to the in-memory segment buffer (LinkWriter's one copy)
  append  SegmentWriter.append to a file in /dev/shm (MAC, writev; page-cache only, no fsync)
Prints Markdown with the CPU model and the load average before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from ledgertool.keyfiles import SigningKey
from ledgertool.ledger.openmac import OpenSegmentKey
from ledgertool.ledger.segment import SegmentHeader, SegmentWriter

BLOCKS = (64, 1024, 16384, 65536)


def _cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")),
                platform.processor())


def _rounds(fn, reps: int, n: int) -> tuple[float, float]:
    times = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t) / n)
    return min(times), statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--records", type=int, default=1 << 20)
    args = ap.parse_args()
    key = OpenSegmentKey.derive(SigningKey.generate("ed25519"), uuid.uuid4().hex)
    print(f"CPU: {_cpu()}; load average before: {os.getloadavg()}\n")
    print("| record B | block records | mac ns/rec best (median) | sha256 ns/rec | copy ns/rec | append ns/rec |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for rsize in (48, 64):
        data = os.urandom(args.records * rsize)
        for block in BLOCKS:
            step = block * rsize
            views = [memoryview(data)[i:i + step] for i in range(0, len(data), step)]

            def mac() -> None:
                m = key.chain_start(bytes(256))
                for i, v in enumerate(views):
                    m = key.block_mac(m, i, len(v) // rsize, v)

            def sha() -> None:
                for v in views:
                    hashlib.sha256(v).digest()

            def copy() -> None:
                buf = bytearray()
                for v in views:
                    buf += v

            def append() -> None:
                with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
                    hdr = SegmentHeader(uuid.uuid4().hex, "link0", 0, "siphash-1-3-128", "frame", "00" * 16,
                                        rsize, rsize - 32, 64, 0, 0, key.key_id)
                    w = SegmentWriter(Path(d) / "seg.open", hdr, key)
                    for v in views:
                        w.append(v, len(v) // rsize)
                    os.close(w._fd)  # page cache only: fsync is not what is measured
                    w._fd = -1

            m = _rounds(mac, args.reps, args.records)
            h = _rounds(sha, args.reps, args.records)
            c = _rounds(copy, args.reps, args.records)
            a = _rounds(append, max(3, args.reps // 4), args.records)
            print(f"| {rsize} | {block:,} | {m[0]:.2f} ({m[1]:.2f}) | {h[0]:.2f} ({h[1]:.2f}) | "
                  f"{c[0]:.2f} ({c[1]:.2f}) | "
                  f"{a[0]:.2f} ({a[1]:.2f}) |")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
