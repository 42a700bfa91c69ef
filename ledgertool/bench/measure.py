"""bench: measured throughput of the native hot path, next to the pure-Python reference path.

Two kinds of rows (schemas/bench.csv.schema.json, docs/benchmarks.md):
  digest   one algorithm on static buffers of one message size, in `threads` pthreads at once, each
           thread digesting its own private copy of the buffer (isolation; no reader, no records);
           frames/s is the aggregate of all threads
  capture  the whole path on a synthetic pcap in page cache (one thread, as capture runs today):
           `engine` = read + digest + record, `sealed` = engine + segments + Parquet + Merkle +
           signatures, `python-reference` = pure-Python pcap reader + pure-Python SipHash on a
           prefix of the frames
Each figure is the median of `repeats` timed runs after calibration and one untimed warm-up run.
The coefficient of variation (sample standard deviation / mean) of the per-repeat rates is kept;
a row whose cv exceeds the noise threshold (default 5 %) is flagged `noisy`. frames/s, Gbit/s
(message bytes only, no wire overhead) and ns/frame (1e9 / aggregate frames/s) are reported.
"""

from __future__ import annotations

import csv
import io
import math
import os
import platform
import re
import socket
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Callable, Optional

import numpy as np
import typer

from .. import fsio
from .._binding import bench_error, ffi, lib
from ..algorithms import ALGORITHMS, Algorithm, get_algorithm
from ..cli.render import table_console
from ..digest.engine import DigestEngine, cpu_path
from ..errors import FileTypeError, StorageError, UsageError
from ..source.file import CaptureReader

CSV_FIELDS = ["time", "host", "cpu_model", "cpu_path", "cores", "benchmark", "algorithm", "size", "threads",
              "frames", "repeats", "seconds", "frames_per_s", "gbit_per_s", "ns_per_frame", "cv", "noisy",
              "tsc_ghz", "cycles_per_frame", "cycles_per_byte"]
#: Columns a CSV must have to be read back (the first published schema had exactly these).
CSV_REQUIRED = ["time", "host", "cpu_model", "cpu_path", "benchmark", "algorithm", "size", "threads", "frames",
                "seconds", "frames_per_s", "gbit_per_s", "ns_per_frame"]
BENCHMARKS = ("digest", "capture:engine", "capture:sealed", "capture:python-reference", "capture:tcpdump")
#: Line rates for the "cores needed" figures: bits/s on the wire, each frame costing 20 more bytes
#: (preamble, start delimiter, inter-frame gap); 64-byte frames at 400G are 595.2 Mframes/s.
LINE_RATES = (("400G", 400e9), ("800G", 800e9), ("1.6T", 1.6e12))
WIRE_OVERHEAD = 20

DEFAULT_SIZES = "64,512,1500,4096,9000,64KiB,1MiB,32MiB"
DEFAULT_NOISY_CV = 0.05
MAX_SIZE = 256 * 1024 * 1024
MAX_THREADS = 1024  # LT_BENCH_MAX_THREADS
_BUF_SLACK = 64 * 1024  # messages step 64 bytes through a buffer this much larger than one message


@dataclass
class BenchRow:
    """One measured figure. `frames` counts messages of all threads in one timed run; `seconds` is
    the median wall time of such a run."""

    benchmark: str
    algorithm: str
    size: int  # message (frame) bytes
    threads: int
    frames: int
    seconds: float
    repeats: int = 1
    cv: float = 0.0
    noisy: bool = False
    time: str = ""
    host: str = ""
    cpu_model: str = ""
    cpu_path: str = "portable"  # native CPU path (engine.cpu_path), "python" for the reference rows
    cores: int = 0  # logical CPUs this process may run on; 0 = unknown (older CSV)
    tsc_ghz: float = 0.0  # measured TSC rate the cycle figures use; 0 = unknown

    @property
    def cycles_per_frame(self) -> float:
        """Core cycles per frame (all threads' time), counted at the TSC rate: an invariant TSC ticks
        at the nominal clock, so under turbo the real core cycles are somewhat higher."""
        return self.ns_per_frame * self.threads * self.tsc_ghz

    @property
    def cycles_per_byte(self) -> float:
        return self.cycles_per_frame / self.size if self.size else 0.0

    def cores_needed(self, bits_per_s: float) -> float:
        """Cores at this row's per-thread rate to keep up with a link of `bits_per_s` of
        `size`-byte frames."""
        per_thread = self.frames_per_s / self.threads if self.threads else 0.0
        line_fps = bits_per_s / ((self.size + WIRE_OVERHEAD) * 8)
        return line_fps / per_thread if per_thread > 0 else math.inf

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def gbit_per_s(self) -> float:
        return self.frames_per_s * self.size * 8 / 1e9

    @property
    def ns_per_frame(self) -> float:
        return 1e9 / self.frames_per_s if self.frames_per_s > 0 else 0.0

    def to_csv(self) -> dict:
        d = asdict(self)
        d.update(frames_per_s=round(self.frames_per_s, 1), gbit_per_s=round(self.gbit_per_s, 4),
                 ns_per_frame=round(self.ns_per_frame, 3), seconds=float(f"{self.seconds:.9g}"),
                 cv=round(self.cv, 5), noisy="true" if self.noisy else "false",
                 tsc_ghz=round(self.tsc_ghz, 4), cycles_per_frame=round(self.cycles_per_frame, 2),
                 cycles_per_byte=round(self.cycles_per_byte, 4))
        return {k: d[k] for k in CSV_FIELDS}

    def to_json(self) -> dict:
        d = self.to_csv()
        d["noisy"] = self.noisy
        return d


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> int:
    """Logical CPUs this process may run on (its affinity mask), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- option parsing

_SIZE_RE = re.compile(r"^(?P<num>[0-9]+)\s*(?P<unit>b|kib|mib|gib)?$")
_SIZE_UNIT = {None: 1, "b": 1, "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def parse_sizes(text: str) -> list[int]:
    """"64,1500,9000,64KiB,32MiB" -> byte counts (binary suffixes B, KiB, MiB, GiB only)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = _SIZE_RE.match(part.lower())
        if m is None:
            raise UsageError(f"--sizes: bad size {part!r}; expected bytes like 64, 9000, 64KiB, 32MiB")
        n = int(m["num"]) * _SIZE_UNIT[m["unit"]]
        if not 1 <= n <= MAX_SIZE:
            raise UsageError(f"--sizes: {part!r} is outside 1 B .. {MAX_SIZE // 1024**2} MiB")
        out.append(n)
    if not out:
        raise UsageError("--sizes: no sizes given")
    return out


def parse_threads(text: str) -> list[int]:
    """"1,2,4" -> [1, 2, 4]."""
    try:
        out = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"--threads {text!r}: expected comma-separated thread counts, e.g. 1,2") from None
    if not out or any(not 1 <= t <= MAX_THREADS for t in out):
        raise UsageError(f"--threads {text!r}: each count must be 1..{MAX_THREADS}")
    return out


def human_size(n: int) -> str:
    """64 -> "64 B", 65536 -> "64 KiB", 33554432 -> "32 MiB"; sizes not a whole KiB stay in bytes."""
    for div, unit in ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------- measuring


def spread(rates: list[float]) -> float:
    """Coefficient of variation (sample stdev / mean) of per-repeat rates; 0 for fewer than 2."""
    if len(rates) < 2:
        return 0.0
    mean = statistics.fmean(rates)
    return statistics.stdev(rates) / mean if mean > 0 else 0.0


def _measure(run: Callable[[], float], frames: int, repeats: int) -> tuple[float, float]:
    """Warm up once, then time `repeats` runs; `run` returns its elapsed seconds.
    Returns (median seconds, cv of the per-repeat rates)."""
    run()  # warm-up: caches, page cache, CPU frequency
    times = [run() for _ in range(repeats)]
    return statistics.median(times), spread([frames / t for t in times if t > 0])


def _timed(fn: Callable[[], object]) -> Callable[[], float]:
    def run() -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return run


#: messages per batch call in the digest rows: what the engine hands lt_dctx_run_many per pass
DIGEST_BATCH = 256


def bench_digest(algorithm: str, size: int, threads: int = 1, min_time: float = 0.2, repeats: int = 5,
                 noisy_cv: float = DEFAULT_NOISY_CV, path: str | None = None, batch: int = DIGEST_BATCH) -> BenchRow:
    """Isolation: `threads` threads each digest `size`-byte messages from a private static buffer,
    `batch` messages per call of the engine's batch entry (multi-buffer code where the CPU path
    has it; 0 = one call per message), on CPU path `path` (None: the CPUID choice).

    The per-thread message count is calibrated so one timed run lasts about `min_time` seconds."""
    from ..digest.engine import force_cpu_path

    alg = get_algorithm(algorithm, for_ledger=False)
    force_cpu_path(alg, path)
    try:
        return _bench_digest(alg, size, threads, min_time, repeats, noisy_cv, batch)
    finally:
        force_cpu_path(alg, None)


def _bench_digest(alg, size: int, threads: int, min_time: float, repeats: int, noisy_cv: float,
                  batch: int) -> BenchRow:
    buf = os.urandom(size + _BUF_SLACK)
    key = os.urandom(alg.key_size)
    ns = ffi.new("uint64_t *")
    sink = ffi.new("uint8_t[16]")

    def once(count: int) -> float:
        rc = lib.lt_bench_digest_batch(alg.native_id, key, buf, len(buf), size, count, threads, batch, ns,
                                       ffi.NULL, sink)
        if rc != lib.LT_OK:
            raise bench_error(rc, f"{alg.name}, {size} B, {threads} thread(s)")
        return ns[0] / 1e9

    count = 1
    while True:  # calibrate: grow until a run takes a quarter of the target
        elapsed = once(count)
        if elapsed >= min_time / 4 or count >= 1 << 34:
            break
        count *= 8 if elapsed < min_time / 64 else 2
    count = max(1, round(count * min_time / max(elapsed, 1e-9)))
    median, cv = _measure(lambda: once(count), count * threads, repeats)
    return BenchRow("digest", alg.name, size, threads, count * threads, median, repeats, cv, cv > noisy_cv,
                    cpu_path=cpu_path(alg))


def digest_paths(alg_name: str, which: str) -> list[str | None]:
    """CPU paths to measure for an algorithm: "default" (the CPUID choice), "best" (the best
    multi-buffer path and the best single-message one), "all", or a comma list (paths this CPU
    lacks or the algorithm does not have are skipped)."""
    from ..digest.engine import cpu_paths

    avail = cpu_paths(get_algorithm(alg_name, for_ledger=False))
    if which == "default":
        return [None]
    if which == "all":
        return list(avail)
    if which == "best":
        mb = [p for p in avail if p.endswith("-mb")]
        single = [p for p in avail if not p.endswith("-mb")]
        return mb[:1] + single[:1]
    want = [p.strip() for p in which.split(",") if p.strip()]
    return [p for p in want if p in avail]


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
    with fsio.atomic_file(path, what="pcap file") as f:
        f.write(header)
        f.write(arr.tobytes())
    return path.stat().st_size


def digest_capture(path, algorithm: Algorithm, subkey: bytes, workers: int = 1) -> int:
    """Run the whole hot path (reader, strip `frame`, batch digest, records) over a capture file and
    discard the records; returns the frames read. For `ledgertool bench` (capture:engine) and
    scripts/hotpath_account.py: what capture costs before segments and sealing."""
    frames = 0
    with CaptureReader(path) as r:
        e = DigestEngine(r, algorithm, 0, subkey, workers=workers)
        while True:
            _, n, _ = e.fill(frames)
            if n == 0:
                return frames
            frames += n


def bench_capture(frames: int, size: int, algorithm: str = "siphash-1-3-128", reference_frames: int = 20_000,
                  repeats: int = 5, workdir: Path | None = None,
                  noisy_cv: float = DEFAULT_NOISY_CV, workers: tuple[int, ...] = (1,),
                  tcpdump: bool = True) -> list[BenchRow]:
    """Whole path on a synthetic pcap read from page cache (the warm-up run pulls it in):
    native engine alone (once per worker count), full capture with sealing (all workers), the
    pure-Python reference, and `tcpdump -r FILE -w /dev/null` (libpcap reading only) as a
    baseline when tcpdump is installed."""
    import shutil
    import subprocess

    from ..capture.run import capture_file
    from ..digest.reference import read_pcap, siphash
    from ..keyfiles import DigestKey, SigningKey

    alg = get_algorithm(algorithm)
    with tempfile.TemporaryDirectory(prefix="ledgertool-bench-", dir=workdir) as tmp:
        tmp = Path(tmp)
        pcap = tmp / f"bench-{size}.pcap"
        write_synthetic_pcap(pcap, frames, size)
        dk = DigestKey.generate()
        sk = SigningKey.generate("hybrid")
        subkey = dk.subkey(alg.name, alg.key_size)

        def engine_only(nworkers: int = 1) -> None:
            seq = digest_capture(pcap, alg, subkey, nworkers)
            if seq != frames:
                raise RuntimeError(f"bench: engine read {seq} of {frames} frames")

        runs = iter(range(1_000_000))

        def full_capture() -> None:
            res = capture_file(pcap, tmp / f"ledger-{next(runs)}", digest_key=dk, signing_key=sk,
                               segment_records=1_000_000, workers=max(workers))
            if res.frames != frames:
                raise RuntimeError(f"bench: capture recorded {res.frames} of {frames} frames")

        ref_n = min(frames, reference_frames)
        data = pcap.read_bytes()[: 24 + ref_n * (16 + size)]
        c, d = (1, 3) if alg.name.startswith("siphash-1-3") else (2, 4)

        def reference() -> None:
            n = 0
            for _ts, _cap, _wire, frame in read_pcap(data):
                siphash(subkey, frame, c, d, alg.digest_size)
                n += 1
            if n != ref_n:
                raise RuntimeError(f"bench: reference read {n} of {ref_n} frames")

        tcpdump_bin = shutil.which("tcpdump") if tcpdump else None

        def tcpdump_read() -> None:
            subprocess.run([tcpdump_bin, "-r", str(pcap), "-w", "/dev/null"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        runs_spec = [("capture:engine", lambda w=w: engine_only(w), frames, w, cpu_path(alg)) for w in workers]
        runs_spec += [("capture:sealed", full_capture, frames, max(workers), cpu_path(alg)),
                      ("capture:python-reference", reference, ref_n, 1, "python")]
        if tcpdump_bin:
            runs_spec.append(("capture:tcpdump", tcpdump_read, frames, 1, "libpcap"))
        rows = []
        for name, fn, n, threads, path in runs_spec:
            median, cv = _measure(_timed(fn), n, repeats)
            rows.append(BenchRow(name, alg.name, size, threads, n, median, repeats, cv, cv > noisy_cv,
                                 cpu_path=path))
    return rows


def tsc_ghz() -> float:
    """Measured TSC rate in GHz (0 where the CPU has none)."""
    return lib.lt_tsc_hz(50) / 1e9


def stamp(rows: list[BenchRow]) -> list[BenchRow]:
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    host, model, cores, ghz = socket.gethostname(), cpu_model(), usable_cores(), tsc_ghz()
    for r in rows:
        r.time, r.host, r.cpu_model, r.cores, r.tsc_ghz = now, host, model, cores, ghz
    return rows


# --------------------------------------------------------------------------- CSV


def append_csv(path: Path, rows: list[BenchRow]) -> None:
    """Append rows; the header is written to a new or empty file only. A file whose header is not
    this schema's is refused (appending would misalign its columns). The file is rewritten whole
    (fsio.write_atomic: old rows, then the new ones), so an interrupted run leaves the old file."""
    old = fsio.read_regular(path, follow=True, what="bench CSV") if os.path.lexists(path) else b""
    if old:
        header = next(csv.reader(io.StringIO(old.decode("utf-8", errors="replace"))), [])
        if header != CSV_FIELDS:
            raise UsageError(f"{path}: its header is not the current bench CSV schema "
                             f"(schemas/bench.csv.schema.json); write to a new file")
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    if not old:
        w.writeheader()
    for r in rows:
        w.writerow(r.to_csv())
    fsio.write_atomic(path, old + buf.getvalue().encode(), what="bench CSV")


def from_record(rec: dict) -> BenchRow:
    """A row from one CSV record (strings); columns added after the first schema are optional."""
    return BenchRow(
        benchmark=rec["benchmark"], algorithm=rec["algorithm"], size=int(rec["size"]),
        threads=int(rec["threads"]), frames=int(rec["frames"]), seconds=float(rec["seconds"]),
        repeats=int(rec.get("repeats") or 1), cv=float(rec.get("cv") or 0.0),
        noisy=str(rec.get("noisy") or "false").strip().lower() == "true",
        time=rec["time"], host=rec["host"], cpu_model=rec["cpu_model"], cpu_path=rec["cpu_path"],
        cores=int(rec.get("cores") or 0), tsc_ghz=float(rec.get("tsc_ghz") or 0.0),
    )


def read_csv(path: Path) -> list[BenchRow]:
    """Rows of a bench CSV (this schema, or the first one without cores/repeats/cv/noisy).

    `seconds` and `frames` are taken as written; UsageError naming the file and line otherwise."""
    try:
        raw = fsio.read_regular(path, follow=True, what="bench CSV")
    except (StorageError, FileTypeError) as e:
        raise UsageError(str(e)) from None
    rows = []
    with io.StringIO(raw.decode("utf-8", errors="replace"), newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in CSV_REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise UsageError(f"{path}: not a bench CSV (missing columns: {', '.join(missing)})")
        for rec in reader:
            line = reader.line_num
            try:
                row = from_record(rec)
            except (TypeError, ValueError) as e:
                raise UsageError(f"{path}: line {line}: bad value ({e})") from None
            if row.benchmark not in BENCHMARKS or row.size < 0 or row.threads < 1 or row.frames < 1 \
                    or not (math.isfinite(row.seconds) and row.seconds > 0):
                raise UsageError(f"{path}: line {line}: not a valid bench row")
            rows.append(row)
    if not rows:
        raise UsageError(f"{path}: no bench rows")
    return rows


# --------------------------------------------------------------------------- command


def table_cells(r: BenchRow, rows: list[BenchRow]) -> list[str]:
    """One rendered row: rates, cycles (at the TSC rate), cores needed per line rate, noise, and
    the speed-up over the pure-Python reference of the same frame size."""
    ref = next((x for x in rows if x.benchmark == "capture:python-reference" and x.size == r.size
                and x.host == r.host), None)
    ratio = f"{r.frames_per_s / ref.frames_per_s:,.0f}" if ref and r.benchmark.startswith("capture") else ""
    cv = f"{r.cv * 100:.1f}%" + (" noisy" if r.noisy else "")
    cyc = r.tsc_ghz > 0
    return [r.benchmark, r.algorithm, r.cpu_path, human_size(r.size), str(r.threads), f"{r.frames_per_s / 1e6:.2f}",
            f"{r.gbit_per_s:.2f}", f"{r.ns_per_frame:.1f}", f"{r.cycles_per_frame:,.0f}" if cyc else "?",
            f"{r.cycles_per_byte:.2f}" if cyc else "?",
            *(f"{r.cores_needed(bps):,.1f}" for _, bps in LINE_RATES), cv, ratio]


def markdown_table(rows: list[BenchRow]) -> str:
    """The bench table as GitHub Markdown (docs/benchmarks.md)."""
    head = ["benchmark", "algorithm", "path", "size", "threads", "Mframes/s", "Gbit/s", "ns/frame", "cycles/frame",
            "cycles/B", *(f"cores {n}" for n, _ in LINE_RATES), "cv", "x Python"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(table_cells(r, rows)) + " |" for r in rows]
    return "\n".join(out) + "\n"


def bench_command(
    algorithm: Annotated[Optional[list[str]], typer.Option("--algorithm", help="Algorithm(s) to measure (default: all).")] = None,
    sizes: Annotated[str, typer.Option(help="Message sizes, comma-separated: bytes or KiB/MiB (1 B .. 256 MiB).")] = DEFAULT_SIZES,
    threads: Annotated[str, typer.Option(help="Thread counts, comma-separated; each thread digests its own buffer.")] = "1,2",
    min_time: Annotated[float, typer.Option("--min-time", help="Seconds per timed run (calibrated).", min=0.0001)] = 0.2,
    capture_frames: Annotated[int, typer.Option(help="Frames in the synthetic pcap for the whole-path rows (0: skip).")] = 1_000_000,
    capture_size: Annotated[str, typer.Option("--capture-size", "--capture-sizes", help="Frame size(s) of the synthetic pcaps, bytes, comma-separated (14 .. 65535).")] = "64",
    capture_workers: Annotated[str, typer.Option("--capture-workers", help="Worker counts for the capture:engine rows, comma-separated (capture:sealed uses the largest) (default: 1 and every usable core).")] = "",
    paths: Annotated[str, typer.Option("--paths", help="CPU paths per algorithm for the digest rows: best (best multi-buffer + best single-message), default (the CPUID choice), all, or a comma list.")] = "best",
    batch: Annotated[int, typer.Option("--batch", help="Messages per batch call in the digest rows (0: one call per message).", min=0, max=4096)] = DIGEST_BATCH,
    tcpdump: Annotated[bool, typer.Option("--tcpdump/--no-tcpdump", help="Add a `tcpdump -r FILE -w /dev/null` baseline row when tcpdump is installed.")] = True,
    reference_frames: Annotated[int, typer.Option(help="Frames the pure-Python reference path digests.", min=1)] = 20_000,
    repeats: Annotated[int, typer.Option(help="Timed repeats per figure (median reported; cv needs >= 2).", min=1)] = 5,
    noisy_cv: Annotated[float, typer.Option("--noisy-cv", help="Flag a row noisy when cv of its repeats exceeds this.", min=0.0)] = DEFAULT_NOISY_CV,
    csv_file: Annotated[Optional[Path], typer.Option("--csv", help="Append rows to this CSV.")] = None,
    from_csv: Annotated[Optional[Path], typer.Option("--from-csv", help="Measure nothing: render rows of this CSV.")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="Write a self-contained HTML dashboard here.")] = None,
    png: Annotated[Optional[Path], typer.Option("--png", help="Write the dashboard plots as PNG files into this directory (needs matplotlib).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON only.")] = False,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Also write the table as Markdown to this file.")] = None,
) -> None:
    """Throughput per algorithm x message size x threads (isolation) and through the whole capture path."""
    import json
    import sys

    from rich.table import Table

    from ..cli.render import SafeConsole, styled

    if from_csv is not None:
        if csv_file is not None:
            raise UsageError("--from-csv renders an existing CSV; drop --csv (nothing is measured)")
        rows = read_csv(from_csv)
    else:
        size_list = parse_sizes(sizes)
        thread_list = parse_threads(threads)
        algs = [get_algorithm(a, for_ledger=False).name for a in (algorithm or list(ALGORITHMS))]
        if png is not None:
            from .dashboard import require_matplotlib
            require_matplotlib()
        cap_sizes = parse_sizes(capture_size)
        if any(not 14 <= c <= 65535 for c in cap_sizes):
            raise UsageError("--capture-size: frame sizes must be 14 .. 65535 bytes")
        cap_workers = parse_threads(capture_workers) if capture_workers else sorted({1, usable_cores()})
        rows = [bench_digest(a, s, t, min_time=min_time, repeats=repeats, noisy_cv=noisy_cv, path=p, batch=batch)
                for a in algs for p in digest_paths(a, paths) for s in size_list for t in thread_list]
        if capture_frames > 0:
            for cs in cap_sizes:
                rows += bench_capture(capture_frames, cs, reference_frames=reference_frames,
                                      repeats=repeats, noisy_cv=noisy_cv, workers=tuple(cap_workers),
                                      tcpdump=tcpdump)
        # what the CSV holds, so a dashboard re-rendered --from-csv is identical to this one
        rows = [from_record(r.to_csv()) for r in stamp(rows)]
        if csv_file:
            append_csv(csv_file, rows)
    written = []
    if markdown is not None:
        fsio.write_atomic(markdown, markdown_table(rows).encode(), what="Markdown table")
        written.append(markdown)
    if html is not None:
        from .dashboard import write_html
        written.append(write_html(rows, html))
    if png is not None:
        from .dashboard import write_pngs
        written += write_pngs(rows, png)
    if as_json:
        sys.stdout.write(json.dumps({"rows": [r.to_json() for r in rows]}, indent=2) + "\n")
        return
    t = Table("benchmark", "algorithm", "path", "size", "threads", "Mframes/s", "Gbit/s", "ns/frame", "cyc/frame",
              "cyc/B", *(f"cores {n}" for n, _ in LINE_RATES), "cv", "x Python ref",
              title=f"ledgertool bench on {rows[0].cpu_model if rows else '?'}")
    for r in rows:
        t.add_row(*table_cells(r, rows))
    table_console().print(t)
    noisy = sum(r.noisy for r in rows)
    if noisy:
        SafeConsole(stderr=True, soft_wrap=True).print(styled(
            (f"{noisy} of {len(rows)} rows noisy", "yellow"),
            f" (cv of repeats > {noisy_cv:.0%}): the machine was busy; rerun or raise --min-time/--repeats"))
    for p in written:
        SafeConsole(stderr=True, soft_wrap=True).print(f"wrote {p}")
