"""bench: measured throughput of the native hot path, next to the pure-Python reference path.

Two kinds of rows (schemas/bench.csv.schema.json, docs/benchmarks.md):
  digest   one algorithm on static buffers of one message size, in `threads` pthreads at once, each
           thread digesting its own private copy of the buffer (isolation; no reader, no records);
           frames/s is the aggregate of all threads
  capture  the whole path on a synthetic pcap in page cache, per algorithm and worker count:
           `engine` = read + digest + record, `sealed` = engine + segments + Merkle + signatures
           (+ Parquet in v1) with SHA-256 leaves, `sealed-blake3` the same with BLAKE3 leaf
           entries (v2; ADR 0013), `windows` = engine + the window tier alone (--tiers windows),
           `python-reference` = pure-Python pcap reader + pure-Python SipHash on a prefix of the
           frames
Each figure is the median of `repeats` timed runs after calibration and one untimed warm-up run,
with the best (shortest) run beside it, and the CPU time (user + system of every thread, and of
children) of the runs beside the wall time: median and least.
The coefficient of variation (sample standard deviation / mean) of the per-repeat rates is kept;
a row whose cv exceeds the noise threshold (default 5 %) is flagged `noisy`. frames/s, Gbit/s
(message bytes only, no wire overhead) and ns/frame (1e9 / aggregate frames/s) are reported.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from .. import fsio
from .._binding import bench_error, ffi, lib
from ..algorithms import Algorithm, get_algorithm
from ..capture.run import capture_file
from ..digest.engine import DigestEngine, cpu_path, cpu_paths, force_cpu_path
from ..digest.reference import read_pcap, siphash
from ..keyfiles import DigestKey, SigningKey
from ..source.file import CaptureReader
from .rows import SEALED_BENCHMARKS, BenchRow

DEFAULT_NOISY_CV = 0.05
_BUF_SLACK = 64 * 1024  # messages step 64 bytes through a buffer this much larger than one message


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


# --------------------------------------------------------------------------- measuring


def spread(rates: list[float]) -> float:
    """Coefficient of variation (sample stdev / mean) of per-repeat rates; 0 for fewer than 2."""
    if len(rates) < 2:
        return 0.0
    mean = statistics.fmean(rates)
    return statistics.stdev(rates) / mean if mean > 0 else 0.0


@dataclass(frozen=True)
class Timing:
    """Seconds of `repeats` timed runs: wall median and best, CPU median and least, and the cv of
    the per-repeat rates (wall)."""

    median: float
    best: float
    cpu_median: float
    cpu_best: float
    cv: float


def _cpu_seconds() -> float:
    """User + system CPU time so far of this process (every thread) and its waited-for children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _measure(run: Callable[[], tuple[float, float]], frames: int, repeats: int) -> Timing:
    """Warm up once, then time `repeats` runs; `run` returns its (wall, CPU) seconds."""
    run()  # warm-up: caches, page cache, CPU frequency
    runs = [run() for _ in range(repeats)]
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    return Timing(
        statistics.median(walls),
        min(walls),
        statistics.median(cpus),
        min(cpus),
        spread([frames / t for t in walls if t > 0]),
    )


def _timed(
    fn: Callable[[], object], after: Callable[[], object] | None = None
) -> Callable[[], tuple[float, float]]:
    """`fn` timed; `after` (untimed) cleans up behind it."""

    def run() -> tuple[float, float]:
        c0, t0 = _cpu_seconds(), time.perf_counter()
        fn()
        wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        if after is not None:
            after()
        return wall, cpu

    return run


def _row(
    benchmark: str,
    alg: str,
    size: int,
    threads: int,
    frames: int,
    t: Timing,
    repeats: int,
    noisy_cv: float,
    cpu_path: str,
) -> BenchRow:
    return BenchRow(
        benchmark,
        alg,
        size,
        threads,
        frames,
        t.median,
        repeats,
        t.cv,
        t.cv > noisy_cv,
        cpu_path=cpu_path,
        best_seconds=t.best,
        cpu_seconds=t.cpu_median,
        best_cpu_seconds=t.cpu_best,
    )


#: messages per batch call in the digest rows: what the engine hands lt_dctx_run_many per pass
DIGEST_BATCH = 256


def bench_digest(
    algorithm: str,
    size: int,
    threads: int = 1,
    min_time: float = 0.2,
    repeats: int = 5,
    noisy_cv: float = DEFAULT_NOISY_CV,
    path: str | None = None,
    batch: int = DIGEST_BATCH,
) -> BenchRow:
    """Isolation: `threads` threads each digest `size`-byte messages from a private static buffer,
    `batch` messages per call of the engine's batch entry (multi-buffer code where the CPU path
    has it; 0 = one call per message), on CPU path `path` (None: the CPUID choice).

    The per-thread message count is calibrated so one timed run lasts about `min_time` seconds."""
    alg = get_algorithm(algorithm, for_ledger=False)
    force_cpu_path(alg, path)
    try:
        return _bench_digest(alg, size, threads, min_time, repeats, noisy_cv, batch)
    finally:
        force_cpu_path(alg, None)


def _bench_digest(
    alg, size: int, threads: int, min_time: float, repeats: int, noisy_cv: float, batch: int
) -> BenchRow:
    buf = os.urandom(size + _BUF_SLACK)
    key = os.urandom(alg.key_size)
    ns = ffi.new("uint64_t *")
    sink = ffi.new("uint8_t[16]")

    def once(count: int) -> float:
        rc = lib.lt_bench_digest_batch(
            alg.native_id, key, buf, len(buf), size, count, threads, batch, ns, ffi.NULL, sink
        )
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

    def timed() -> tuple[float, float]:  # the native clock for wall, as calibrated; CPU around it
        c0 = _cpu_seconds()
        wall = once(count)
        return wall, _cpu_seconds() - c0

    t = _measure(timed, count * threads, repeats)
    return _row(
        "digest", alg.name, size, threads, count * threads, t, repeats, noisy_cv, cpu_path(alg)
    )


def digest_paths(alg_name: str, which: str) -> list[str | None]:
    """CPU paths to measure for an algorithm: "default" (the CPUID choice), "best" (the best
    multi-buffer path and the best single-message one), "all", or a comma list (paths this CPU
    lacks or the algorithm does not have are skipped)."""
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
    rec = np.dtype(
        [
            ("sec", "<u4"),
            ("usec", "<u4"),
            ("cap", "<u4"),
            ("len", "<u4"),
            ("data", f"V{frame_size}"),
        ]
    )
    arr = np.zeros(frames, dtype=rec)
    idx = np.arange(frames, dtype=np.uint64)
    arr["sec"] = 1_767_225_600 + idx // 1_000_000
    arr["usec"] = idx % 1_000_000
    arr["cap"] = frame_size
    arr["len"] = frame_size
    arr["data"] = rng.integers(0, 256, size=frames * frame_size, dtype=np.uint8).view(
        f"V{frame_size}"
    )
    header = (
        np.array([0xA1B2C3D4], "<u4").tobytes()
        + np.array([2, 4], "<u2").tobytes()
        + np.array([0, 0, 262144, 1], "<u4").tobytes()
    )
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


def bench_capture(
    frames: int,
    size: int,
    algorithm: str = "siphash-1-3-128",
    reference_frames: int = 20_000,
    repeats: int = 5,
    workdir: Path | None = None,
    noisy_cv: float = DEFAULT_NOISY_CV,
    workers: tuple[int, ...] = (1,),
    tcpdump: bool = True,
    ledger_format: int = 2,
    algorithms: tuple[str, ...] | None = None,
    leaf_hashes: tuple[str, ...] = ("sha256",),
) -> list[BenchRow]:
    """Whole path on a synthetic pcap read from page cache (the warm-up run pulls it in): for each
    algorithm of `algorithms` (default: `algorithm`) and each worker count, the native engine alone
    and the full capture with sealing (into a ledger of format `ledger_format`: 1 seals Parquet,
    2 the raw record files), once per leaf construction of `leaf_hashes` (rows.SEALED_BENCHMARKS;
    blake3 needs format 2), and the window tier alone (format 2), side by side; then the
    pure-Python reference (SipHash) and `tcpdump -r FILE -w /dev/null` (libpcap reading only) as a
    baseline when tcpdump is installed."""
    if not leaf_hashes or any(h not in SEALED_BENCHMARKS for h in leaf_hashes):
        raise ValueError(f"bench: leaf hashes {leaf_hashes!r}: each one of sha256, blake3")
    if ledger_format != 2 and "blake3" in leaf_hashes:
        raise ValueError("bench: blake3 leaf entries need ledger format 2")
    algs = [get_algorithm(a) for a in (algorithms or (algorithm,))]
    with tempfile.TemporaryDirectory(prefix="ledgertool-bench-", dir=workdir) as tmp:
        tmp = Path(tmp)
        pcap = tmp / f"bench-{size}.pcap"
        write_synthetic_pcap(pcap, frames, size)
        dk = DigestKey.generate()
        sk = SigningKey.generate("hybrid")
        runs = iter(range(1_000_000))

        def engine_only(alg: Algorithm, nworkers: int) -> None:
            seq = digest_capture(pcap, alg, dk.subkey(alg.name, alg.key_size), nworkers)
            if seq != frames:
                raise RuntimeError(f"bench: engine read {seq} of {frames} frames")

        def full_capture(
            alg: Algorithm,
            nworkers: int,
            tiers: tuple[str, ...] = ("frames",),
            leaf_hash: str = "sha256",
        ) -> None:
            res = capture_file(
                pcap,
                tmp / f"ledger-{next(runs)}",
                digest_key=dk,
                signing_key=sk,
                algorithm=alg.name,
                segment_records=1_000_000,
                workers=nworkers,
                ledger_format=ledger_format,
                accept_forgery_risk=True,
                tiers=tiers,
                leaf_hash=leaf_hash,
            )  # a throwaway ledger nobody relies on
            if res.frames != frames:
                raise RuntimeError(f"bench: capture recorded {res.frames} of {frames} frames")

        def remove_ledgers() -> None:  # untimed; the runs would otherwise fill $TMPDIR
            for p in tmp.glob("ledger-*"):
                shutil.rmtree(p)

        runs_spec = []
        for alg in algs:
            for w in workers:
                runs_spec.append(
                    ("capture:engine", lambda a=alg, w=w: engine_only(a, w), frames, w, alg)
                )
                runs_spec += [
                    (
                        SEALED_BENCHMARKS[h],
                        lambda a=alg, w=w, h=h: full_capture(a, w, leaf_hash=h),
                        frames,
                        w,
                        alg,
                    )
                    for h in leaf_hashes
                ]
                # the window tier is written to v2 ledgers only; window logs keep SHA-256 leaves
                # whatever the frames tier uses, so it is measured once
                if ledger_format == 2:
                    runs_spec.append(
                        (
                            "capture:windows",
                            lambda a=alg, w=w: full_capture(a, w, ("windows",)),
                            frames,
                            w,
                            alg,
                        )
                    )
        ref_alg = next(
            (a for a in algs if a.name.startswith("siphash")), get_algorithm("siphash-1-3-128")
        )
        ref_n = min(frames, reference_frames)
        runs_spec.append(
            (
                "capture:python-reference",
                _reference(pcap, ref_alg, dk, size, ref_n),
                ref_n,
                1,
                ref_alg,
            )
        )
        tcpdump_bin = shutil.which("tcpdump") if tcpdump else None
        if tcpdump_bin:
            runs_spec.append(
                (
                    "capture:tcpdump",
                    lambda: subprocess.run(
                        [tcpdump_bin, "-r", str(pcap), "-w", "/dev/null"],
                        check=True,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    ),
                    frames,
                    1,
                    algs[0],
                )
            )
        rows = []
        for name, fn, n, threads, alg in runs_spec:
            path = {"capture:python-reference": "python", "capture:tcpdump": "libpcap"}.get(
                name
            ) or cpu_path(alg)
            ledgers = name in SEALED_BENCHMARKS.values() or name == "capture:windows"
            after = remove_ledgers if ledgers else None
            timing = _measure(_timed(fn, after), n, repeats)
            rows.append(_row(name, alg.name, size, threads, n, timing, repeats, noisy_cv, path))
    return rows


def _reference(
    pcap: Path, alg: Algorithm, dk: DigestKey, size: int, ref_n: int
) -> Callable[[], None]:
    """The pure-Python reader and SipHash over the first `ref_n` frames of `pcap`."""
    data = pcap.read_bytes()[: 24 + ref_n * (16 + size)]
    c, d = (1, 3) if alg.name.startswith("siphash-1-3") else (2, 4)
    subkey = dk.subkey(alg.name, alg.key_size)

    def reference() -> None:
        n = 0
        for _ts, _cap, _wire, frame in read_pcap(data):
            siphash(subkey, frame, c, d, alg.digest_size)
            n += 1
        if n != ref_n:
            raise RuntimeError(f"bench: reference read {n} of {ref_n} frames")

    return reference


def tsc_ghz() -> float:
    """Measured TSC rate in GHz (0 where the CPU has none)."""
    return lib.lt_tsc_hz(50) / 1e9


def stamp(rows: list[BenchRow]) -> list[BenchRow]:
    now = datetime.now(UTC).isoformat(timespec="seconds")
    host, model, cores, ghz = socket.gethostname(), cpu_model(), usable_cores(), tsc_ghz()
    for r in rows:
        r.time, r.host, r.cpu_model, r.cores, r.tsc_ghz = now, host, model, cores, ghz
    return rows
