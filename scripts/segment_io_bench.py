"""The open-segment writer alone, through the page cache and with O_DIRECT (docs/benchmarks.md,
"Direct I/O for segment files").

    python scripts/segment_io_bench.py --workdir DIR [--records 4000000] [--rounds 7]

Writes `--records` 48-byte records (SipHash-sized) in appends of 65,536 to a new open segment under
DIR (put it on the storage to measure), finishes and closes it (fsync), and removes it; the two
ways alternate (LEDGERTOOL_SEGMENT_IO=buffered, then direct) `--rounds` times. Prints CPU per
record (user + system of every thread of this process, getrusage) and wall per record for each run,
then the best (lowest) of each way.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np

from ledgertool.digest.record import record_dtype
from ledgertool.ledger import segment as segments
from ledgertool.ledger.openmac import OpenSegmentKey

BATCH = 65_536


def _cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def _one(path: Path, key: OpenSegmentKey, batch: bytes, appends: int, mode: str) -> dict:
    os.environ[segments.SEGMENT_IO_ENV] = mode
    header = segments.SegmentHeader(
        "0" * 31 + "1", "link0", 0, "siphash-1-3-128", "frame", "ab" * 16, 48, 16, 64, 0,
        time.time_ns(), key.key_id,
    )  # fmt: skip
    (u0, s0), t0 = _cpu(), time.perf_counter()
    w = segments.SegmentWriter(path, header, key)
    for _ in range(appends):
        w.append(batch, BATCH)
    w.finish()
    w.close()
    (u1, s1), t1 = _cpu(), time.perf_counter()
    path.unlink()
    n = appends * BATCH
    return {
        "mode": mode,
        "direct": w.direct,
        "user_ns": (u1 - u0) / n * 1e9,
        "sys_ns": (s1 - s0) / n * 1e9,
        "wall_ns": (t1 - t0) / n * 1e9,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    recs = np.zeros(BATCH, dtype=record_dtype(16))
    recs["seq"] = np.arange(BATCH)
    recs["digest"] = [rng.bytes(16) for _ in range(BATCH)]
    key = OpenSegmentKey(rng.bytes(32), "cd" * 16)
    best: dict[str, dict] = {}
    for _ in range(a.rounds):
        for mode in ("buffered", "direct"):
            r = _one(
                a.workdir / f"bench-{mode}.open", key, recs.tobytes(), a.records // BATCH, mode
            )
            cpu = r["user_ns"] + r["sys_ns"]
            print(
                f"{mode:8s} (O_DIRECT {'on' if r['direct'] else 'off'}): {cpu:6.2f} ns CPU a "
                f"record (user {r['user_ns']:.2f}, system {r['sys_ns']:.2f}), "
                f"{r['wall_ns']:.2f} ns wall",
                flush=True,
            )
            if mode not in best or cpu < best[mode]["user_ns"] + best[mode]["sys_ns"]:
                best[mode] = r
    for mode, r in best.items():
        print(
            f"best {mode}: {r['user_ns'] + r['sys_ns']:.2f} ns CPU a record "
            f"(user {r['user_ns']:.2f}, system {r['sys_ns']:.2f})"
        )


if __name__ == "__main__":
    main()
