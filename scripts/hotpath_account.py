"""Where a frame's time goes in capture:engine, stage by stage (docs/benchmarks.md, "Where a frame's
time goes"). One command:

  python scripts/hotpath_account.py [--frames 1000000] [--size 64] [--repeats 31] [--rounds 11]
                                    [--algorithm siphash-1-3-128] [--path CPU_PATH]

Input: N IPv4/UDP frames of SIZE bytes in two flows (samples/workloads/worst-case-64.toml scaled
to N frames and SIZE), written once to a nanosecond pcap in a temporary directory and read from
the page cache. Measured, one thread unless said otherwise, best of --repeats full passes:

  stages    lt_engine_profile (native/src/engine.c): the engine's own single-worker loop with the
            clock read between reader, strip + record fields, and digest; strip modes frame and
            payload; digest on and skipped (what the path costs with a free digest)
  isolated  the same digest on SIZE-byte messages from a small static buffer (lt_bench_digest_batch,
            batches of 4096, its largest): the kernel without memory traffic
  engine    capture:engine as `ledgertool bench` measures it: DigestEngine.fill from Python until
            the end of the file, strip frame, 1 worker, then 1 and 2 workers alternating for
            --rounds rounds (medians and best; 2-worker efficiency = rate(2) / (2 x rate(1)))

Prints Markdown tables: ns and TSC cycles per frame (the TSC ticks at the nominal clock: see
docs/benchmarks.md "How to read the figures") and the per-core ceiling 1 / (sum of the stages).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import tomllib
from pathlib import Path

from ledgertool._binding import ffi, lib
from ledgertool.algorithms import ALGORITHMS
from ledgertool.bench.measure import digest_capture
from ledgertool.digest.engine import DigestEngine, cpu_path, force_cpu_path
from ledgertool.source.file import CaptureReader
from ledgertool.source.workload import open_workload, parse_spec, write_pcap

ROOT = Path(__file__).resolve().parent.parent
BATCH = 16384  # LT_ENGINE_BATCH_DEFAULT: frames per reader call and digest pass with one worker


def make_pcap(path: Path, frames: int, size: int) -> None:
    doc = tomllib.loads((ROOT / "samples/workloads/worst-case-64.toml").read_text())
    for i, f in enumerate(doc["flows"]):
        f["frames"] = frames // 2 + (frames % 2 if i == 0 else 0)
        f["size"] = size
    with open_workload(parse_spec(doc, "worst-case-64")) as r:
        write_pcap(r, path)


def profile(pcap: Path, alg, strip: int, digest: bool, key: bytes) -> tuple[list[float], int]:
    with CaptureReader(pcap) as r:
        e = DigestEngine(r, alg, strip, key, batch_records=BATCH)
        out = ffi.new("uint8_t[]", BATCH * e.record_size)
        ns = ffi.new("uint64_t[3]")
        frames = ffi.new("uint64_t *")
        st = lib.lt_engine_profile(e._e, out, BATCH, int(digest), ns, frames)
        if st != lib.LT_OK:
            raise SystemExit(f"lt_engine_profile failed (status {st})")
        return [ns[i] / frames[0] for i in range(3)], int(frames[0])


def engine_rate(pcap: Path, alg, key: bytes, workers: int, frames: int) -> float:
    t = time.perf_counter()
    seq = digest_capture(pcap, alg, key, workers)
    dt = time.perf_counter() - t
    if seq != frames:
        raise SystemExit(f"engine read {seq} of {frames} frames")
    return frames / dt


def isolated_ns(alg, size: int, repeats: int) -> float:
    from ledgertool.bench.measure import _BUF_SLACK

    buf = bytes(range(256)) * ((size + _BUF_SLACK) // 256 + 1)
    ns = ffi.new("uint64_t *")
    sink = ffi.new("uint8_t[16]")
    count = max(4096, int(2e6 // max(size, 64) * 8))
    best = float("inf")
    for _ in range(repeats):
        st = lib.lt_bench_digest_batch(
            alg.native_id,
            bytes(alg.key_size),
            buf,
            len(buf),
            size,
            count,
            1,
            4096,
            ns,
            ffi.NULL,
            sink,
        )
        if st != lib.LT_OK:
            raise SystemExit(f"lt_bench_digest_batch failed (status {st})")
        best = min(best, ns[0] / count)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(
        description="Where a frame's time goes in capture:engine, stage by stage "
        "(docs/benchmarks.md, 'Where a frame's time goes').",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--frames", type=int, default=1_000_000, help="frames in the generated pcap")
    ap.add_argument(
        "--size", type=int, default=64, help="frame size in bytes (60 captured at 64: no FCS)"
    )
    ap.add_argument(
        "--repeats", type=int, default=31, help="passes per stage measurement (best is kept)"
    )
    ap.add_argument(
        "--rounds", type=int, default=11, help="alternating 1- and 2-worker engine rounds"
    )
    ap.add_argument(
        "--algorithm",
        default="siphash-1-3-128",
        choices=sorted(ALGORITHMS),
        help="digest algorithm",
    )
    ap.add_argument(
        "--path",
        default=None,
        help="CPU path to force (default: the CPUID choice; `ledgertool algorithms` lists them)",
    )
    a = ap.parse_args()
    alg = ALGORITHMS[a.algorithm]
    if a.path:
        try:
            force_cpu_path(alg, a.path)
        except ValueError as e:
            ap.error(f"--path: {e}")
    key = bytes(range(alg.key_size))
    ghz = lib.lt_tsc_hz(100) / 1e9
    with tempfile.TemporaryDirectory() as d:
        pcap = Path(d) / "account.pcap"
        make_pcap(pcap, a.frames, a.size)
        pcap.read_bytes()  # into the page cache
        print(
            f"{a.frames:,} frames of {a.size} B (IPv4/UDP), {a.algorithm} on {cpu_path(alg)}, "
            f"TSC {ghz:.2f} GHz, best of {a.repeats}\n"
        )
        best: dict[tuple[str, bool], list[float]] = {}
        # a build without lt_engine_profile (an older commit) gets the engine rows only
        for _ in range(a.repeats if hasattr(lib, "lt_engine_profile") else 0):
            for strip, sid in (("frame", 0), ("payload", 2)):
                for dig in (True, False):
                    st, n = profile(pcap, alg, sid, dig, key)
                    cur = best.setdefault((strip, dig), [float("inf")] * 3)
                    best[(strip, dig)] = [min(x, y) for x, y in zip(cur, st)]
        if best:
            print_stages(best, ghz)
        iso = isolated_ns(alg, a.size, a.repeats)
        print(
            f"\ndigest in isolation ({a.size}-byte messages from a static buffer, batches of "
            f"4096): {iso:.2f} ns/frame = {iso * ghz:.1f} cycles ({1e3 / iso:.1f} M frames/s)\n"
        )
        engine_rows(pcap, alg, key, a, best)


def print_stages(best: dict, ghz: float) -> None:
    print(
        "| strip | digest | read ns | strip + record ns | digest ns | sum ns/frame | sum "
        "cycles/frame | ceiling M frames/s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (strip, dig), st in best.items():
        tot = sum(st) if dig else st[0] + st[1]
        print(
            f"| {strip} | {'on' if dig else 'skipped'} | {st[0]:.2f} | {st[1]:.2f} | "
            f"{st[2]:.2f} | {tot:.2f} | {tot * ghz:.1f} | {1e3 / tot:.1f} |"
            if dig
            else f"| {strip} | skipped | {st[0]:.2f} | {st[1]:.2f} | — | {tot:.2f} | "
            f"{tot * ghz:.1f} | {1e3 / tot:.1f} |"
        )


def engine_rows(pcap: Path, alg, key: bytes, a, best: dict) -> None:
    rates: dict[int, list[float]] = {1: [], 2: []}
    for w in (1, 2):
        engine_rate(pcap, alg, key, w, a.frames)  # warm-up
    for _ in range(a.rounds):
        for w in (1, 2):
            rates[w].append(engine_rate(pcap, alg, key, w, a.frames))
    print(
        "| capture:engine (DigestEngine.fill, strip frame) | median M frames/s | best | ns/frame "
        "(best) |"
    )
    print("|---|---:|---:|---:|")
    for w in (1, 2):
        print(
            f"| {w} worker{'s' if w > 1 else ''} | {statistics.median(rates[w]) / 1e6:.1f} | "
            f"{max(rates[w]) / 1e6:.1f} | {1e9 / max(rates[w]):.2f} |"
        )
    m1, m2 = statistics.median(rates[1]), statistics.median(rates[2])
    print(
        f"\n2 / 1 workers: {m2 / m1:.2f}x (medians), efficiency {m2 / (2 * m1):.0%}; "
        f"best {max(rates[2]) / max(rates[1]):.2f}x"
    )
    if best:
        sf = best[("frame", True)]
        print(
            f"1 worker, strip frame: best {1e9 / max(rates[1]):.2f} ns/frame, stage sum "
            f"{sum(sf):.2f} (each stage's best run; the difference is opening, allocation, the "
            f"Python fill calls and noise)"
        )


if __name__ == "__main__":
    main()
