"""capture: frames from a capture file or a live interface -> digests -> segments -> sealed,
signed, chained ledger.

The native engine does read + strip + digest + record; this module rotates segments by record
count and by wall-clock age, seals each one, and recovers torn open segments left by a crash
before appending. A live source (`iface:NAME`, ledgertool.source.live) runs until SIGINT/SIGTERM,
--duration or --frames; frames the kernel dropped arrive as GAP records and are counted as drops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import stat
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .. import fsio
from ..algorithms import get_algorithm, get_strip_mode
from ..digest.engine import DigestEngine, usable_cores
from ..digest.record import FLAG_GAP
from ..errors import (
    LedgerError,
    LedgerFormatError,
    LedgerLockedError,
    StorageError,
    UsageError,
)
from ..keyfiles import DigestKey, SigningKey
from ..ledger import layout
from ..ledger import segment as segments
from ..ledger.checkpoints import link_tree, write_checkpoint
from ..ledger.header import (
    DEFAULT_LEAF_RECORDS,
    DEFAULT_LINK,
    LedgerHeader,
    create_ledger,
    load_ledger,
)
from ..ledger.index import link_state, links, segment_files
from ..ledger.layout import LEDGER_FILE, LOCK_FILE, checkpoint_path
from ..ledger.lock import writer_lock
from ..ledger.rotations import (
    current_digest_key_id,
    current_signer_check,
    digest_key_ids,
)
from ..seal.document import SealResult, seal_records
from ..source import is_bypass, is_live, is_workload, open_source, open_sources
from ..source.live import LiveOptions, LiveStats
from .workers import (
    FanoutWitness,
    LiveWorkers,
    gap_records,
    merge_worker_records,
    split_by_worker,
)

DEFAULT_SEGMENT_RECORDS = 1_000_000
# errors of a write that `recover` can finish once they are fixed (the data written before stays)
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS)

Progress = Callable[[int, int], None]  # (frames so far, bytes so far)


@dataclass(frozen=True)
class CaptureStatus:
    """A snapshot for live displays (`monitor` callback of capture_file)."""

    frames: int
    bytes: int
    drops: int
    elapsed_s: float
    segments_sealed: int
    open_segment: int | None  # index of the segment being written, None between segments
    open_records: int         # records in it so far
    stopping: bool


@dataclass
class CaptureResult:
    """Summary of one capture run (JSON: schemas/capture-report.schema.json)."""

    source: str
    ledger: str
    link: str
    algorithm: str
    strip: str
    frames: int = 0
    bytes: int = 0  # captured bytes hashed
    wire_bytes: int = 0
    drops: int = 0
    segments: list[SealResult] = field(default_factory=list)
    recovered: list[SealResult] = field(default_factory=list)
    first_seq: int = 0
    next_seq: int = 0
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    interrupted: bool = False
    created: bool = False
    stop_reason: str = "end of capture"  # or "signal", "duration", "frames"
    live: dict | None = None  # live sources: kernel/ring counters (ledgertool.source.live.LiveStats)
    foreign_frames: int | None = None  # several live workers: frames a socket outside the fanout group took

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def gbit_per_s(self) -> float:
        return self.bytes * 8 / self.elapsed_s / 1e9 if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict:
        return {
            "ok": True, "source": self.source, "ledger": self.ledger, "link": self.link,
            "algorithm": self.algorithm, "strip": self.strip, "frames": self.frames,
            "bytes": self.bytes, "drops": self.drops, "first_seq": self.first_seq,
            "next_seq": self.next_seq,
            "segments": [s.index for s in self.segments],
            "recovered_segments": [{"segment": s.index, "records": s.records,
                                    "torn_bytes_discarded": s.torn_bytes} for s in self.recovered],
            "elapsed_s": round(self.elapsed_s, 6), "frames_per_s": round(self.frames_per_s, 1),
            "gbit_per_s": round(self.gbit_per_s, 6), "warnings": self.warnings,
            "interrupted": self.interrupted, "created": self.created, "stop_reason": self.stop_reason,
            **({"live": self.live} if self.live is not None else {}),
        }


def _remove_tmp_files(ledger_dir: Path, directory: Path, discarded: list[dict] | None) -> None:
    """Remove the leftovers of interrupted atomic writes (``*.tmp``, fsio) in `directory`; a link
    or other non-regular file by that name is refused (FileTypeError), never followed."""
    if not directory.is_dir():
        return
    for tmp in sorted(directory.glob("*" + fsio.TMP_SUFFIX)):
        st = tmp.lstat()
        if not stat.S_ISREG(st.st_mode):
            raise fsio.wrong_kind(tmp, st.st_mode, "a regular file (leftover of an interrupted write)")
        fsio.unlink(tmp, root=ledger_dir)
        if discarded is not None:
            discarded.append({"path": str(tmp), "bytes": st.st_size, "why": "temporary file of an interrupted write"})


def recover_open_segments(ledger_dir: Path, ledger: LedgerHeader, link: str, signing_key: SigningKey,
                          discarded: list[dict] | None = None) -> list[SealResult]:
    """Seal every open segment left by a crash (whole records kept, torn bytes reported).

    Also removes leftovers of interrupted atomic writes (``*.tmp``) and every open segment that
    cannot be sealed where it stands: its header was cut (no whole record), does not decode, or
    does not fit the ledger there (another ledger, link, index, first seq, parameters or a digest
    key that is not the current one). Each is listed in `discarded` when given (path, bytes, why):
    nothing is removed without being reported. A link or FIFO in the ledger is FileTypeError.
    """
    out = []

    def discard(path: Path, size: int, why: str, *also: Path) -> None:
        for p in (path, *also):
            fsio.unlink(p, root=ledger_dir, missing_ok=True)
        if discarded is not None:
            discarded.append({"path": str(path), "bytes": size, "why": why})

    _remove_tmp_files(ledger_dir, layout.link_dir(ledger_dir, link), discarded)
    key_id = digest_key_ids(ledger_dir, ledger)[-1]
    for index, files in sorted(segment_files(ledger_dir, link).items()):
        if "open" not in files:
            continue
        if "seal.json" in files:  # crashed between sealing and removing the open file
            fsio.unlink(files["open"], root=ledger_dir)
            continue
        partial = [files["parquet"]] if "parquet" in files else []  # of a seal that was not finished
        try:
            seg = segments.read_open_segment(files["open"], ledger_dir)
        except LedgerFormatError as e:
            size = files["open"].lstat().st_size
            why = ("segment header cut" if size < segments.HEADER_SIZE else
                   f"segment header does not decode ({str(e).removeprefix(str(files['open']) + ': ')}): "
                   "its records cannot be attributed")
            discard(files["open"], size, why, *partial)
            continue
        if seg.count == 0:  # crashed before the first whole record: nothing to seal
            discard(files["open"], seg.torn_bytes, "open segment without a whole record", *partial)
            continue
        state = link_state(ledger_dir, ledger, link)
        misfit = (f"the file is segment {index}" if index != state.next_index else
                  segments.header_mismatch(seg.header, ledger, link, state.next_index, state.next_seq, key_id))
        if misfit:
            discard(files["open"], segments.HEADER_SIZE + len(seg.records) + seg.torn_bytes,
                    f"open segment does not continue the chain at segment {state.next_index}, seq "
                    f"{state.next_seq}: {misfit}; its {seg.count} records cannot be sealed there", *partial)
            continue
        # the records were digested with the key the segment header names: the seal says so
        _, res = seal_records(
            ledger_dir=ledger_dir, ledger=ledger.for_digest_key(seg.header.key_id), link=link, index=index,
            first_seq=seg.header.first_seq,
            records=seg.records, prev_hash=state.prev_hash, signing_key=signing_key,
            parquet=layout.parquet_path(ledger_dir, link, index),
            seal_file=layout.seal_path(ledger_dir, link, index), torn_bytes=seg.torn_bytes,
            source="recovered open segment",
        )
        fsio.unlink(files["open"], root=ledger_dir)
        out.append(res)
    return out


@dataclass
class RecoverResult:
    """What `recover_ledger` did (JSON: `ledgertool recover --json`)."""

    ledger: str
    sealed: list[tuple[str, SealResult]] = field(default_factory=list)
    discarded: list[dict] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)

    @property
    def torn_bytes(self) -> int:
        return sum(r.torn_bytes for _, r in self.sealed) + sum(d["bytes"] for d in self.discarded)

    def to_json(self) -> dict:
        return {"ok": True, "ledger": self.ledger,
                "sealed": [{"link": link, "segment": r.index, "records": r.records,
                            "torn_bytes_discarded": r.torn_bytes} for link, r in self.sealed],
                "discarded": self.discarded, "bytes_discarded": self.torn_bytes,
                "checkpoints": self.checkpoints}


def recover_ledger(ledger_dir: Path, signing_key: SigningKey) -> RecoverResult:
    """Seal the torn open segments of every link after a crash and re-sign the checkpoints.

    Holds the ledger's writer lock (LedgerLockedError while a capture or another writer runs);
    StorageError naming the file when the file system fails (nothing is removed before what
    replaces it is durable, so rerunning after the fix is safe)."""
    ledger_dir = Path(ledger_dir)
    ledger = load_ledger(ledger_dir)
    with writer_lock(ledger_dir, "recover"):
        current_signer_check(ledger_dir, ledger, signing_key)
        res = RecoverResult(str(ledger_dir))
        _remove_tmp_files(ledger_dir, ledger_dir, res.discarded)
        for link in links(ledger_dir):
            for r in recover_open_segments(ledger_dir, ledger, link, signing_key, res.discarded):
                res.sealed.append((link, r))
            res.checkpoints.append(str(write_checkpoint(ledger_dir, ledger, link, signing_key)))
    return res


def _sum_stats(stats: list[LiveStats]) -> LiveStats:
    """Counters of several rings added up (ring_bytes and block_count: all rings together)."""
    if len(stats) == 1:
        return stats[0]
    if hasattr(stats[0], "combine"):  # kernel-bypass sources (ledgertool.source.bypass.BypassStats)
        return stats[0].combine(stats)
    sums = {f: sum(getattr(s, f) for s in stats) for f in LiveStats.__dataclass_fields__}
    sums["block_bytes"] = stats[0].block_bytes
    return LiveStats(**sums)


def _remove_new_ledger(ledger_dir: Path, link: str) -> None:
    fsio.unlink(ledger_dir / LEDGER_FILE, root=ledger_dir, missing_ok=True)
    try:
        layout.link_dir(ledger_dir, link).rmdir()
    except OSError:
        pass


def _remove_new_dir(ledger_dir: Path) -> None:
    """Undo creating DIR for a capture that recorded nothing (its writer lock is held)."""
    fsio.unlink(ledger_dir / LOCK_FILE, root=ledger_dir, missing_ok=True)
    try:
        ledger_dir.rmdir()
    except OSError:
        pass


def capture_file(
    source: str | Path, ledger_dir: Path, *, digest_key: DigestKey, signing_key: SigningKey,
    algorithm: str | None = None, strip: str | None = None, link: str = DEFAULT_LINK,
    segment_records: int = DEFAULT_SEGMENT_RECORDS, leaf_records: int | None = None,
    progress: Progress | None = None, segment_seconds: float | None = None, duration: float | None = None,
    max_frames: int | None = None, live: LiveOptions | None = None,
    monitor: Callable[[CaptureStatus], None] | None = None, workers: int = 0,
    accept_forgery_risk: bool = False,
) -> CaptureResult:
    """Capture every frame of a pcap/pcapng file, or a live interface (`iface:NAME`), into the
    ledger at `ledger_dir`.

    A segment is sealed after `segment_records` records or, with `segment_seconds`, once it has
    been open that long (wall clock). The capture ends at the end of the file, on SIGINT/SIGTERM,
    after `duration` seconds or after `max_frames` frames. A live interface then drains its ring
    (except after `max_frames`), declares the last drops and ends; `live` sets its ring.

    `workers` threads digest each batch (0: every usable core); records never depend on it. For a
    live interface `workers` is the number of receive rings (0: one), each read and digested by its
    own thread; their records are merged per segment by (ts_ns, worker, order in the worker). Segment
    k is sealed (Parquet, Merkle root, signatures) on a background thread while segment k + 1 is
    digested; seals still chain in order, at most one seal is in flight, and a sealing error is
    raised here.

    Creates the ledger (algorithm default siphash-1-3-128, strip default frame) or appends to it,
    continuing its seal chain and sequence numbers; every segment written is sealed before return,
    also on SIGINT/SIGTERM. Raises CaptureFormatError for an unreadable or corrupt capture (frames
    before a corrupt structure are sealed first and counted in the message), UsageError for a new
    ledger of an algorithm with a `risk_opt_in` (aes-128-gmac) unless `accept_forgery_risk`,
    KeyFileError when the
    digest key is not an existing ledger's current one (a key retired by a digest-key rotation is
    named as such) or the signing key is not its current one, AlgorithmError for an unknown algorithm.
    Holds the ledger's writer lock for the whole run (LedgerLockedError naming the holder while
    another writer has it); StorageError naming the file when the file system fails (full,
    read-only, I/O error): what was written before stays, and `ledgertool recover` seals it.
    """
    layout.check_link_name(link)
    if segment_records < 1:
        raise UsageError("--segment-records must be at least 1")
    if segment_seconds is not None and segment_seconds <= 0:
        raise UsageError("--segment-seconds must be positive")
    if duration is not None and duration <= 0:
        raise UsageError("--duration must be positive")
    if max_frames is not None and max_frames < 1:
        raise UsageError("--frames must be at least 1")
    if workers < 0:
        raise UsageError("--workers must be 0 (every core) or more")
    ledger_dir = Path(ledger_dir)
    new_dir = not ledger_dir.exists()
    fsio.make_dirs(ledger_dir)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(writer_lock(ledger_dir, "capture"))
        except LedgerLockedError:
            raise
        except BaseException:
            if new_dir:
                _remove_new_dir(ledger_dir)
            raise
        try:
            return _capture_locked(
                source, ledger_dir, digest_key=digest_key, signing_key=signing_key, algorithm=algorithm,
                strip=strip, link=link, segment_records=segment_records, leaf_records=leaf_records,
                progress=progress, segment_seconds=segment_seconds, duration=duration, max_frames=max_frames,
                live=live, monitor=monitor, workers=workers, accept_forgery_risk=accept_forgery_risk)
        except StorageError as e:
            if e.errno in _WRITE_ERRNOS and e.path and Path(e.path).parent == layout.link_dir(ledger_dir, link):
                e.args = (f"{e}; every record written before the error is kept: once that is fixed, "
                          f"`ledgertool recover {ledger_dir}` seals it",)
            raise
        finally:
            if new_dir and not (ledger_dir / LEDGER_FILE).exists():
                _remove_new_dir(ledger_dir)  # nothing was recorded: leave nothing behind


def _capture_locked(
    source: str | Path, ledger_dir: Path, *, digest_key: DigestKey, signing_key: SigningKey,
    algorithm: str | None = None, strip: str | None = None, link: str = DEFAULT_LINK,
    segment_records: int = DEFAULT_SEGMENT_RECORDS, leaf_records: int | None = None,
    progress: Progress | None = None, segment_seconds: float | None = None, duration: float | None = None,
    max_frames: int | None = None, live: LiveOptions | None = None,
    monitor: Callable[[CaptureStatus], None] | None = None, workers: int = 0, accept_forgery_risk: bool = False,
) -> CaptureResult:
    """capture_file with the writer lock held and DIR existing."""
    live_source = is_live(source)
    # A live ring hands out frames block by block to one reader: one thread digests them. Several
    # live workers are several rings in one fanout group, one thread each (ledgertool.capture.workers).
    live_workers = (workers or 1) if live_source else 0
    workers = 1 if live_source else (workers or usable_cores())
    pins = None
    if live_workers > 1:
        pins = LiveWorkers.check_pins(live.pin_cpu if live else None, live_workers)
    exists = os.path.lexists(ledger_dir / LEDGER_FILE)
    if exists:
        ledger = load_ledger(ledger_dir)
        for opt, val in (("algorithm", algorithm), ("strip", strip), ("leaf_records", leaf_records)):
            if val is not None and val != getattr(ledger, opt):
                raise UsageError(f"{ledger_dir}: ledger uses {opt} {getattr(ledger, opt)!r}, not {val!r} "
                                 "(a ledger never changes algorithm or strip mode)")
        alg = get_algorithm(ledger.algorithm)
        strip_id = get_strip_mode(ledger.strip)
        # new segments use the newest digest key (a rotation retires the older ones); their
        # headers and seals carry its id, ledger.json keeps the genesis id
        ledger = ledger.for_digest_key(current_digest_key_id(ledger_dir, ledger, digest_key))
        current_signer_check(ledger_dir, ledger, signing_key)
    else:
        alg = get_algorithm(algorithm or "siphash-1-3-128")
        strip_id = get_strip_mode(strip or "frame")
        if alg.risk_opt_in and not accept_forgery_risk:
            raise UsageError(f"{alg.name} uses a fixed IV: whoever holds two of the ledger's (frame, tag) pairs, "
                             "as the prover normally does, can forge every tag without the key; use "
                             f"blake3-keyed-128 or hmac-sha256-128, or create it anyway with {alg.risk_opt_in} "
                             "(docs/algorithms.md, \"GMAC with a fixed IV\")")
    # Open the capture before creating anything, so a bad file leaves no empty ledger behind.
    witness: FanoutWitness | None = None
    if live_workers > 1:
        if is_bypass(source):
            # AF_XDP sockets on consecutive queues, or RX queues of a DPDK port; each worker thread
            # pins itself
            readers = open_sources(source, dataclasses.replace(live or LiveOptions(), pin_cpu=None), live_workers)
        else:
            # one fanout group for every ring: the first makes it (a random id unless --fanout-group),
            # the others join it; each worker thread pins itself
            wopts = dataclasses.replace(live or LiveOptions(), pin_cpu=None, fanout=True)
            readers = []
            try:
                for _ in range(live_workers):
                    readers.append(open_source(source, wopts))
                    wopts = dataclasses.replace(wopts, fanout_group=readers[0].fanout_group)
                witness = FanoutWitness(readers[0].iface, readers[0].fanout_group)
                witness.start(readers)
            except BaseException:
                for r in readers:
                    r.close()
                if witness is not None:
                    witness.close()
                raise
    else:
        readers = [open_source(source, live)]
    reader = readers[0]

    def close_readers() -> None:
        for r in readers:
            r.close()
        if witness is not None:
            witness.close()
    if not exists:
        ledger = create_ledger(ledger_dir, algorithm=alg.name, strip=strip or "frame",
                               digest_key_id=digest_key.key_id(alg.name, alg.key_size),
                               digest_size=alg.digest_size, leaf_records=leaf_records or DEFAULT_LEAF_RECORDS)
    result = CaptureResult(str(source), str(ledger_dir), link, alg.name, ledger.strip, created=not exists)
    if not exists and alg.creation_warning:
        result.warnings.append(alg.creation_warning)
    discarded: list[dict] = []
    try:
        result.recovered = recover_open_segments(ledger_dir, ledger, link, signing_key, discarded)
    except BaseException:
        close_readers()
        raise
    for r in result.recovered:
        result.warnings.append(f"recovered open segment {r.index}: sealed {r.records} records, "
                               f"discarded {r.torn_bytes} torn bytes")
    for d in discarded:
        result.warnings.append(f"recovery discarded {d['path']} ({d['bytes']} bytes: {d['why']})")

    state = link_state(ledger_dir, ledger, link)
    # the link's chain in memory: each seal extends it and a checkpoint over it is signed right away,
    # so a link never has seals without a checkpoint for longer than one signature
    tree = link_tree(ledger_dir, link)
    if not tree.complete:  # a checkpoint over this chain would cover a gap: nothing is captured
        close_readers()
        raise LedgerFormatError(f"{tree.stopped}: the seal chain of link {link} is broken; nothing was captured "
                                "(`ledgertool verify` names what is wrong)")
    result.first_seq = seq = state.next_seq
    index, prev_hash = state.next_index, state.prev_hash
    try:
        engines = [DigestEngine(r, alg, strip_id, digest_key.subkey(alg.name, alg.key_size), workers=workers)
                   for r in readers]
    except LedgerError:
        close_readers()
        raise
    engine = engines[0]
    lw = LiveWorkers(engines, max_frames=max_frames, pin_cpus=pins) if live_workers > 1 else None

    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum

    # Signals can only be caught on the main thread; elsewhere the caller owns interruption.
    main_thread = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if main_thread else {}
    writer: segments.SegmentWriter | None = None
    t0 = time.perf_counter()
    seg_opened = 0.0
    stopping = False
    source_name = str(source) if (live_source or is_workload(source)) else Path(source).name

    # Sealing runs on one background thread (pyarrow, hashing and the native calls release the
    # GIL), so segment k is sealed while k + 1 is digested. One thread keeps the chain in order;
    # waiting for seal k - 1 before handing over seal k bounds memory and surfaces errors early.
    sealer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledgertool-seal")
    chain = {"prev": prev_hash}
    pending: list[Future] = []

    def seal_job(path: Path, seg_index: int) -> SealResult:
        seg = segments.read_open_segment(path, ledger_dir)
        if not os.path.lexists(checkpoint_path(ledger_dir, link)):
            # before a link's first seal (or in a ledger older than per-seal checkpoints): a checkpoint
            # of the chain as it stands, so a link never holds a seal without a checkpoint
            write_checkpoint(ledger_dir, ledger, link, signing_key, tree, top=False)
        _doc, res = seal_records(
            ledger_dir=ledger_dir, ledger=ledger, link=link, index=seg_index, first_seq=seg.header.first_seq,
            records=seg.records, prev_hash=chain["prev"], signing_key=signing_key,
            parquet=layout.parquet_path(ledger_dir, link, seg_index),
            seal_file=layout.seal_path(ledger_dir, link, seg_index), source=source_name,
        )
        fsio.unlink(path, root=ledger_dir)
        chain["prev"] = res.seal_hash
        tree.seal_hashes.append(res.seal_hash)
        tree.records.append(res.records)
        write_checkpoint(ledger_dir, ledger, link, signing_key, tree, top=False)
        return res

    def stop_reason(frames_reached: bool) -> str | None:
        """Why the capture should stop now: a signal, --duration, --frames; None to go on."""
        if stop["signal"] is not None:
            result.interrupted = True
            return "signal"
        if duration is not None and time.perf_counter() - t0 >= duration:
            return "duration"
        return "frames" if frames_reached else None

    def drain() -> None:
        """Wait for the seal in flight; its result joins result.segments (in chain order)."""
        while pending:
            result.segments.append(pending.pop(0).result())

    def seal_open() -> None:
        nonlocal writer, index
        assert writer is not None
        writer.close()
        path, seg_index = writer.path, index
        writer = None
        index += 1
        drain()
        pending.append(sealer.submit(seal_job, path, seg_index))

    def write_sealed(recs: np.ndarray) -> None:
        """Several live workers: write one merged, renumbered segment and hand it to the sealer."""
        nonlocal writer, seq
        hdr = segments.SegmentHeader(
            ledger.ledger_id, link, index, alg.name, ledger.strip, ledger.digest_key_id,
            ledger.record_size, ledger.digest_size, ledger.leaf_records, seq, segments.now_ns())
        writer = segments.SegmentWriter(layout.open_segment_path(ledger_dir, link, index), hdr, ledger_dir)
        writer.append(recs.tobytes(), len(recs))
        gaps = (recs["flags"] & FLAG_GAP) != 0
        result.frames += len(recs) - int(gaps.sum())
        result.drops += int(recs["aux"][gaps].sum())
        seq += len(recs)
        seal_open()

    def run_workers() -> None:
        """Several live workers (docs/capture.md "Workers and fanout"): each thread fills its own
        buffer; at a segment boundary (segment_records in total, segment_seconds, the end) the
        buffers are merged by (ts_ns, worker, order in the worker), renumbered and sealed. Records
        past segment_records are carried, still per worker, into the next segment's merge."""
        nonlocal stopping
        assert lw is not None
        carry = [np.empty(0, dtype=engine.dtype)] * live_workers
        carried = 0
        seg_opened = None
        lw.start()
        while True:
            if not stopping:
                reason = stop_reason(lw.frames_reached.is_set())
                if reason is None and lw.error is not None:
                    reason = "error"
                if reason:
                    if reason != "error":
                        result.stop_reason = reason
                    if witness is not None:
                        witness.stop()  # before the rings stop: see FanoutWitness
                    # every ring drains, except after --frames (that many, no more) or an error
                    for r in readers:
                        r.request_stop(drain=reason not in ("frames", "error"))
                    stopping = True
            lw.wake.wait(0.05)
            lw.wake.clear()
            if witness is not None:
                witness.poll()
            ended = lw.ended
            if witness is not None and ended and lw.error is None and result.foreign_frames is None:
                # frames of the interface that no ring of ours received went to a foreign fanout
                # member: declared in a GAP record, like the kernel's drops, and reported
                result.foreign_frames = witness.foreign_frames(readers)
                if result.foreign_frames:
                    gap = gap_records(engine.dtype, result.foreign_frames, reader.info().linktype)
                    carry[0] = np.concatenate((carry[0], gap))
                    carried += len(gap)
            pooled = lw.buffered + carried
            now = time.perf_counter()
            if pooled and seg_opened is None:
                seg_opened = now
            while pooled and (pooled >= segment_records or ended or
                              (segment_seconds is not None and now - seg_opened >= segment_seconds)):
                parts = [np.concatenate((c, p)) for c, p in zip(carry, lw.take())]
                merged, wid = merge_worker_records(parts, seq)
                cut = min(len(merged), segment_records)
                carry = split_by_worker(merged[cut:], wid[cut:], live_workers)
                carried = len(merged) - cut
                write_sealed(merged[:cut])
                pooled = carried
                seg_opened = now if carried else None
            if monitor:
                monitor(CaptureStatus(lw.frames, lw.bytes, lw.drops, time.perf_counter() - t0,
                                      len(result.segments), index if pooled else None, pooled, stopping))
            if ended and not pooled and not lw.buffered:
                break
        result.bytes = lw.bytes
        if lw.error is not None:
            # what was read before the error is sealed (as with one worker), then it is reported
            drain()
            if result.segments:
                write_checkpoint(ledger_dir, ledger, link, signing_key, tree)
            result.next_seq = seq
            e = lw.error
            if isinstance(e, LedgerError):
                e.args = (f"{e}; {result.frames} frames before it were sealed"
                          + (f" in segments {result.segments[0].index}..{result.segments[-1].index}"
                             if result.segments else ""),)
            raise e

    try:
        if lw is not None:
            run_workers()
        while lw is None:  # one reader: a file, a workload or one live ring
            if not stopping:
                reason = stop_reason(max_frames is not None and result.frames >= max_frames)
                if reason:
                    result.stop_reason = reason
                    if not live_source:
                        break
                    # drain what the ring holds, except after --frames (that many, no more)
                    reader.request_stop(drain=reason != "frames")
                    stopping = True
            if writer is None:
                hdr = segments.SegmentHeader(
                    ledger.ledger_id, link, index, alg.name, ledger.strip, ledger.digest_key_id,
                    ledger.record_size, ledger.digest_size, ledger.leaf_records, seq,
                    segments.now_ns())
                want = segment_records
            ask = want
            if max_frames is not None and not stopping:
                ask = min(ask, max_frames - result.frames)
            try:
                records, n, nbytes = engine.fill(seq, ask)
            except LedgerError as e:
                # Corrupt structure: seal what was read, then report where reading stopped.
                if writer is not None and writer.records:
                    seal_open()
                elif writer is not None:
                    writer.close()
                    fsio.unlink(writer.path, root=ledger_dir)
                    writer = None
                drain()
                if result.created and not result.segments:
                    _remove_new_ledger(ledger_dir, link)  # nothing was recorded: leave nothing behind
                elif result.segments or result.recovered:
                    write_checkpoint(ledger_dir, ledger, link, signing_key, tree)
                result.next_seq = seq
                e.args = (f"{e}; {result.frames} frames before it were sealed"
                          + (f" in segments {result.segments[0].index}..{result.segments[-1].index}"
                             if result.segments else ""),)
                raise
            if n and stopping and result.stop_reason == "frames":
                # --frames N reached: frames the engine still had in hand are not recorded; only the
                # final GAP records (drops before the stop) are kept, renumbered to stay contiguous.
                arr = np.frombuffer(records, dtype=engine.dtype, count=n)
                arr = arr[(arr["flags"] & FLAG_GAP) != 0].copy()
                arr["seq"] = np.arange(seq, seq + len(arr), dtype=np.uint64)
                records, n, nbytes = memoryview(arr.tobytes()), len(arr), 0
            if n == 0:
                if engine.ended or not live_source:
                    break
            else:
                if writer is None:
                    writer = segments.SegmentWriter(layout.open_segment_path(ledger_dir, link, index), hdr,
                                                    ledger_dir)
                    seg_opened = time.perf_counter()
                writer.append(records, n)
                seq += n
                want -= n
                frames = n
                if live_source:  # GAP records: frames the kernel dropped, declared in aux
                    arr = np.frombuffer(records, dtype=engine.dtype, count=n)
                    gaps = (arr["flags"] & FLAG_GAP) != 0
                    if gaps.any():
                        frames -= int(gaps.sum())
                        result.drops += int(arr["aux"][gaps].sum())
                result.frames += frames
                result.bytes += nbytes
                if progress:
                    progress(result.frames, result.bytes)
            if want == 0 or (segment_seconds is not None and writer is not None
                             and time.perf_counter() - seg_opened >= segment_seconds):
                seal_open()
            if monitor:
                monitor(CaptureStatus(result.frames, result.bytes, result.drops, time.perf_counter() - t0,
                                      len(result.segments), index if writer is not None else None,
                                      writer.records if writer is not None else 0, stopping))
        if writer is not None and writer.records:
            seal_open()
        elif writer is not None:
            writer.close()
            fsio.unlink(writer.path, root=ledger_dir)
        drain()
        if layout.link_dir(ledger_dir, link).is_dir():
            try:
                write_checkpoint(ledger_dir, ledger, link, signing_key, tree)
            except LedgerError as e:  # an older seal is missing or unreadable: nothing was signed
                sealed = (f"segments {result.segments[0].index}..{result.segments[-1].index}" if result.segments
                          else "no segment")
                e.args = (f"{e}; this capture's {result.frames} frames were sealed ({sealed}), the checkpoint "
                          "was not signed",)
                raise
    finally:
        if lw is not None:  # every worker thread is out of its reader before the readers close
            for r in readers:
                r.request_stop(drain=False)
            lw.join()
        try:
            if pending:  # an error elsewhere is on its way out: still finish the seal in flight
                try:
                    drain()
                except Exception:  # noqa: BLE001 - the first error is the one reported
                    pass
        finally:
            sealer.shutdown(wait=True)
        for s, h in old.items():
            signal.signal(s, h)
        reader_info = reader.info()
        live_stats = _sum_stats([r.stats() for r in readers]) if live_source else None
        close_readers()
    result.elapsed_s = time.perf_counter() - t0
    result.next_seq = seq
    if live_stats is not None:
        result.live = live_stats.to_json()
        result.warnings.extend(getattr(live_stats, "notes", ()))  # kernel-bypass sources (ledgertool.source.bypass)
        foreign = result.foreign_frames or 0
        if lw is not None:
            result.live["workers"] = live_workers
            result.live["worker_frames"] = list(lw.per_worker_frames)
            if witness is not None:
                result.live["fanout"] = {"group": witness.group, "witness_frames": witness.frames,
                                         "foreign_frames": result.foreign_frames}
        if foreign:
            result.warnings.append(
                f"FANOUT: {foreign} frames on {source} went to a socket outside this capture's PACKET_FANOUT "
                f"group {witness.group} (another process joined it) and are not in the ledger; they are declared "
                "in a GAP record as dropped (docs/capture.md)")
        kernel_drops = result.drops - foreign
        if kernel_drops and hasattr(live_stats, "drop_advice"):  # AF_XDP, DPDK
            result.warnings.append(live_stats.drop_advice(str(source), kernel_drops))
        elif kernel_drops:
            result.warnings.append(
                f"{kernel_drops} frames DROPPED by the kernel ring on {source} (declared as GAP records in "
                f"the ledger; the ring was full {live_stats.freeze_count} times): raise --ring-mb or "
                "lower the load (docs/capture.md)")
        unrecorded = live_stats.kernel_packets - result.frames - live_stats.drops_declared
        if result.stop_reason == "frames" and unrecorded > 0:
            result.warnings.append(f"{source}: {unrecorded} frames arrived after the last recorded frame "
                                   "(--frames) and were not recorded")
        elif unrecorded != 0:
            result.warnings.append(
                f"{source}: kernel saw {live_stats.kernel_packets} frames, ledger has {live_stats.frames} "
                f"frames + {live_stats.drops_declared} declared drops")
    note = reader_info.truncation_note()
    if note:
        result.warnings.append(note)
    return result
