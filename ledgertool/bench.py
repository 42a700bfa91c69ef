"""bench: measured throughput of the native hot path, next to the pure-Python reference path.

Two kinds of rows (schemas/bench.csv.schema.json):
  digest   one algorithm on static buffers of one frame size (isolation; no reader, no records)
  capture  the whole path on a synthetic pcap in page cache: `engine` = read + digest + record,
           `capture` = engine + segments + Parquet + Merkle + signatures (sealing included),
           `reference` = pure-Python pcap reader + pure-Python SipHash on a prefix of the frames
Each figure is the median of `repeats` runs after one warm-up run; frames/s, Gbit/s (frame bytes
only, no wire overhead) and ns/frame are reported. The machine is noisy: compare ratios in one run.
"""

from __future__ import annotations

import csv
import os
import platform
import socket
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer

from ._native import ffi, lib
from .algorithms import ALGORITHMS, get_algorithm
from .engine import cpu_path
from .errors import UsageError

CSV_FIELDS = ["time", "host", "cpu_model", "cpu_path", "benchmark", "algorithm", "size", "threads", "frames",
              "seconds", "frames_per_s", "gbit_per_s", "ns_per_frame"]


@dataclass
class BenchRow:
    benchmark: str
    algorithm: str
    size: int  # frame bytes
    threads: int
    frames: int
    seconds: float
    time: str = ""
    host: str = ""
    cpu_model: str = ""
    cpu_path: str = "portable"  # native CPU path (engine.cpu_path), "python" for the reference rows

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def gbit_per_s(self) -> float:
        return self.frames_per_s * self.size * 8 / 1e9

    @property
    def ns_per_frame(self) -> float:
        return self.seconds * 1e9 / self.frames if self.frames else 0.0

    def to_csv(self) -> dict:
        d = asdict(self)
        d.update(frames_per_s=round(self.frames_per_s, 1), gbit_per_s=round(self.gbit_per_s, 4),
                 ns_per_frame=round(self.ns_per_frame, 3), seconds=round(self.seconds, 6))
        return {k: d[k] for k in CSV_FIELDS}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_synthetic_pcap(path: Path, frames: int, frame_size: int, seed: int = 1) -> int:
    """A classic µs pcap of `frames` random `frame_size`-byte Ethernet frames (deterministic).
    Returns the file size in bytes."""
    rng = np.random.default_rng(seed)
    rec = np.dtype([("sec", "<u4"), ("usec", "<u4"), ("cap", "<u4"), ("len", "<u4"), ("data", f"V{frame_size}")])
    arr = np.zeros(frames, dtype=rec)
    idx = np.arange(frames, dtype=np.uint64)
    arr["sec"] = 1_767_225_600 + idx // 1_000_000
    arr["usec"] = idx % 1_000_000
    arr["cap"] = frame_size
    arr["len"] = frame_size
    arr["data"] = rng.integers(0, 256, size=frames * frame_size, dtype=np.uint8).view(f"V{frame_size}")
    header = np.array([0xA1B2C3D4], "<u4").tobytes() + np.array([2, 4], "<u2").tobytes() + \
        np.array([0, 0, 262144, 1], "<u4").tobytes()
    with open(path, "wb") as f:
        f.write(header)
        f.write(arr.tobytes())
    return path.stat().st_size


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    return statistics.median(_timed(fn) for _ in range(repeats))


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_digest(algorithm: str, size: int, target_s: float = 0.2, repeats: int = 3) -> BenchRow:
    """Isolation: one core digests `size`-byte messages from a static buffer."""
    alg = get_algorithm(algorithm, for_ledger=False)
    buf = os.urandom(max(size, 1) + 64 * 1024)
    key = os.urandom(alg.key_size)
    ns = ffi.new("uint64_t *")
    sink = ffi.new("uint8_t[16]")
    count = 1000
    while True:  # calibrate to ~target_s
        lib.lt_bench_digest(alg.native_id, key, buf, len(buf), size, count, ns, sink)
        if ns[0] > target_s * 1e9 / 4 or count > 1 << 30:
            break
        count *= 4
    count = max(1, int(count * target_s * 1e9 / max(ns[0], 1)))
    times = []
    for _ in range(repeats):
        lib.lt_bench_digest(alg.native_id, key, buf, len(buf), size, count, ns, sink)
        times.append(ns[0] / 1e9)
    return BenchRow("digest", alg.name, size, 1, count, statistics.median(times), cpu_path=cpu_path(alg))


def bench_capture(frames: int, size: int, algorithm: str = "siphash-1-3-128", reference_frames: int = 20_000,
                  repeats: int = 3, workdir: Path | None = None) -> list[BenchRow]:
    """Whole path on a synthetic pcap: native engine, full capture with sealing, Python reference."""
    from .capture import capture_file
    from .engine import CaptureReader, DigestEngine
    from .keys import DigestKey, SigningKey
    from .reference import read_pcap, siphash

    alg = get_algorithm(algorithm)
    with tempfile.TemporaryDirectory(prefix="ledgertool-bench-", dir=workdir) as tmp:
        tmp = Path(tmp)
        pcap = tmp / f"bench-{size}.pcap"
        write_synthetic_pcap(pcap, frames, size)
        dk = DigestKey.generate()
        sk = SigningKey.generate("hybrid")
        subkey = dk.subkey(alg.name, alg.key_size)

        def engine_only() -> None:
            with CaptureReader(pcap) as r:
                e = DigestEngine(r, alg, 0, subkey)
                seq = 0
                while True:
                    _, n, _ = e.fill(seq)
                    if n == 0:
                        break
                    seq += n
            assert seq == frames

        runs = iter(range(1000))

        def full_capture() -> None:
            res = capture_file(pcap, tmp / f"ledger-{next(runs)}", digest_key=dk, signing_key=sk,
                               segment_records=1_000_000)
            assert res.frames == frames

        path = cpu_path(alg)
        rows = [BenchRow("capture:engine", alg.name, size, 1, frames, _median_time(engine_only, repeats),
                         cpu_path=path),
                BenchRow("capture:sealed", alg.name, size, 1, frames, _median_time(full_capture, repeats),
                         cpu_path=path)]
        ref_n = min(frames, reference_frames)
        data = pcap.read_bytes()[: 24 + ref_n * (16 + size)]
        c, d = (1, 3) if alg.name.startswith("siphash-1-3") else (2, 4)

        def reference() -> None:
            n = 0
            for _ts, _cap, _wire, frame in read_pcap(data):
                siphash(subkey, frame, c, d, alg.digest_size)
                n += 1
            assert n == ref_n

        rows.append(BenchRow("capture:python-reference", alg.name, size, 1, ref_n, _median_time(reference, 1),
                             cpu_path="python"))
    return rows


def stamp(rows: list[BenchRow]) -> list[BenchRow]:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    host, model = socket.gethostname(), cpu_model()
    for r in rows:
        r.time, r.host, r.cpu_model = now, host, model
    return rows


def append_csv(path: Path, rows: list[BenchRow]) -> None:
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new:
            w.writeheader()
        for r in rows:
            w.writerow(r.to_csv())


def bench_command(
    algorithm: Annotated[Optional[list[str]], typer.Option("--algorithm", help="Algorithm(s) to measure [default: all].")] = None,
    sizes: Annotated[str, typer.Option(help="Frame sizes in bytes, comma-separated.")] = "64,512,1500,9000",
    threads: Annotated[str, typer.Option(help="Thread counts (this release measures 1).")] = "1",
    capture_frames: Annotated[int, typer.Option(help="Frames in the synthetic pcap for the whole-path rows (0: skip).")] = 1_000_000,
    capture_size: Annotated[int, typer.Option(help="Frame size of the synthetic pcap, bytes.")] = 64,
    reference_frames: Annotated[int, typer.Option(help="Frames the pure-Python reference path digests.")] = 20_000,
    repeats: Annotated[int, typer.Option(help="Timed repeats per figure (median reported).", min=1)] = 3,
    csv_file: Annotated[Optional[Path], typer.Option("--csv", help="Append rows to this CSV.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON only.")] = False,
) -> None:
    """Throughput per algorithm and frame size (isolation) and through the whole capture path."""
    import json
    import sys

    from rich.console import Console
    from rich.table import Table

    if {t.strip() for t in threads.split(",")} != {"1"}:
        raise UsageError("--threads: this release measures one thread only")
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--sizes {sizes!r}: expected comma-separated byte counts") from None
    algs = algorithm or list(ALGORITHMS)
    rows = [bench_digest(a, s, repeats=repeats) for a in algs for s in size_list]
    if capture_frames > 0:
        rows += bench_capture(capture_frames, capture_size, reference_frames=reference_frames, repeats=repeats)
    stamp(rows)
    if csv_file:
        append_csv(csv_file, rows)
    if as_json:
        sys.stdout.write(json.dumps({"rows": [r.to_csv() for r in rows]}, indent=2) + "\n")
        return
    ref = next((r for r in rows if r.benchmark == "capture:python-reference"), None)
    t = Table("benchmark", "algorithm", "size B", "threads", "Mframes/s", "Gbit/s", "ns/frame", "x Python ref",
              title=f"ledgertool bench on {rows[0].cpu_model if rows else '?'}")
    for r in rows:
        ratio = f"{r.frames_per_s / ref.frames_per_s:,.0f}" if ref and r.benchmark.startswith("capture") else ""
        t.add_row(r.benchmark, r.algorithm, str(r.size), str(r.threads), f"{r.frames_per_s / 1e6:.2f}",
                  f"{r.gbit_per_s:.2f}", f"{r.ns_per_frame:.1f}", ratio)
    Console(width=None if sys.stdout.isatty() else 160).print(t)
