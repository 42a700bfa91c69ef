"""capture: frames from a capture file or a live interface -> digests -> segments -> sealed,
signed, chained ledger.

The native engine does read + strip + digest + record; CaptureRun drives it in phases (open, loop,
finish) and hands every record to a LinkWriter (ledgertool.ledger.writer), which rotates segments by
record count and by wall-clock age and seals each one; torn open segments left by a crash are sealed
first (ledgertool.ledger.recover). A `records:` source (ledgertool.source.records) hands over
records a hardware pipeline computed in place of the engine's. A live source (`iface:NAME`,
ledgertool.source.live) runs until SIGINT/SIGTERM, --duration or --frames; frames the kernel dropped
arrive as GAP records and are counted as drops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import math
import os
import re
import signal
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from .. import fsio
from .._binding import ffi
from ..algorithms import Algorithm, get_algorithm, get_strip_mode
from ..digest.engine import DigestEngine, usable_cores
from ..digest.record import FLAG_GAP, FLAG_NO_TIMESTAMP
from ..digest.strip import StripFallbacks
from ..digest.window import DEFAULT_CAPACITY, DEFAULT_WINDOW_NS
from ..errors import (
    KeyFileError,
    LedgerError,
    LedgerLockedError,
    Setting,
    StorageError,
    UsageError,
)
from ..keyfiles import DigestKey, SigningKey
from ..ledger import layout
from ..ledger.devstate import DeviceState, LedgerMarks
from ..ledger.header import (
    DEFAULT_LEAF_HASH,
    DEFAULT_LEDGER_FORMAT,
    DEFAULT_LINK,
    TIERS,
    LedgerHeader,
    create_ledger,
    load_ledger,
)
from ..ledger.index import segment_files
from ..ledger.layout import LEDGER_FILE, LOCK_FILE
from ..ledger.lock import writer_lock
from ..ledger.recover import (
    RecoveredSegment,
    SetAside,
    kept_for_recovery,
    recover_open_segments,
)
from ..ledger.rotations import (
    current_digest_key_id,
    current_signer_check,
    digest_key_ids,
)
from ..ledger.sealer import SealResult, load_seal
from ..ledger.writer import LinkWriter
from ..plan import window_cells
from ..plural import plural
from ..source import is_bypass, is_live, is_workload, open_source, open_sources
from ..source.file import CaptureReader
from ..source.live import LiveOptions, LiveStats
from ..source.records import RecordsReader, is_records, seal_source_name
from ..source.stream import StreamBinding, parse_source_tail
from .windows import NoFrameLog, WindowTier, WindowTierResult
from .workers import (
    FanoutWitness,
    LiveWorkers,
    gap_records,
    merge_worker_records,
    split_by_worker,
)

if TYPE_CHECKING:  # imported where used (start-up: docs/benchmarks.md)
    import numpy as np

DEFAULT_SEGMENT_RECORDS = 1_000_000
#: a new ledger's tiers unless asked: per-frame records only, for now. With the window tier a
#: capture refuses frames in or before a window already sealed for the link, so appending a
#: capture file to a ledger it was captured into already (tests, replays) would stop working
#: by default; `--tiers windows,frames` asks for both
DEFAULT_TIERS = ("frames",)
#: the most records per segment: they are held in memory until sealed (3 GiB of 48-byte records);
#: verify reads leaf sidecars up to the same count
MAX_SEGMENT_RECORDS = 1 << 26
# errors of a write that `recover` can finish once they are fixed (the data written before stays)
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS)
_KEY_ID = re.compile(r"[0-9a-f]{32}")

Progress = Callable[[int, int, int], None]  # (frames so far, bytes so far, records sealed so far)


def signed_source_name(source, live: bool = False) -> str:
    """What each seal's `source` signs for a capture file or a workload spec: its name without
    directory (`workload:SPEC.toml` for a spec), so that an operator's paths never enter signed,
    never-rewritten evidence; a name's bytes that are not UTF-8 as `\\xNN` (a seal is UTF-8
    JSON). A live source is its interface (`iface:eth0`) as given."""
    text = str(source)
    if not live:
        prefix = "workload:" if is_workload(text) else ""
        text = prefix + Path(text[len(prefix) :]).name
    return os.fsencode(text).decode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class CaptureStatus:
    """A snapshot for live displays (`monitor` callback of capture_file)."""

    frames: int
    bytes: int
    drops: int
    elapsed_s: float
    segments_sealed: int
    open_segment: int | None  # index of the segment being written, None between segments
    open_records: int  # records in it so far
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
    recovered: list[RecoveredSegment] = field(default_factory=list)
    first_seq: int = 0
    next_seq: int = 0
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    interrupted: bool = False
    created: bool = False
    stop_reason: str = "end of capture"  # or "signal", "duration", "frames"
    live: dict | None = (
        None  # live sources: kernel/ring counters (ledgertool.source.live.LiveStats)
    )
    foreign_frames: int | None = (
        None  # several live workers: frames a socket outside the fanout group took
    )
    # frames whose strip mode hashed more (docs/strip-modes.md)
    strip_fallbacks: StripFallbacks = StripFallbacks()
    tiers: tuple[str, ...] = ("frames",)
    windows: WindowTierResult | None = None  # the window tier's records, when the ledger has one

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def gbit_per_s(self) -> float:
        return self.bytes * 8 / self.elapsed_s / 1e9 if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict:
        return {
            "ok": True,
            "source": self.source,
            "ledger": self.ledger,
            "link": self.link,
            "algorithm": self.algorithm,
            "strip": self.strip,
            "frames": self.frames,
            "bytes": self.bytes,
            "drops": self.drops,
            # sequence numbers as decimal strings, as in every JSON document
            # (docs/cli.md#json-integers)
            "first_seq": str(self.first_seq),
            "next_seq": str(self.next_seq),
            "segments": [s.index for s in self.segments],
            "recovered_segments": [
                {"segment": s.index, "records": s.records, "torn_bytes_discarded": s.torn_bytes}
                for s in self.recovered
            ],
            "elapsed_s": round(self.elapsed_s, 6),
            "frames_per_s": round(self.frames_per_s, 1),
            "gbit_per_s": round(self.gbit_per_s, 6),
            "warnings": self.warnings,
            "interrupted": self.interrupted,
            "created": self.created,
            "stop_reason": self.stop_reason,
            "strip_fallbacks": self.strip_fallbacks.to_json(),
            "tiers": list(self.tiers),
            **({"windows": self.windows.to_json()} if self.windows is not None else {}),
            **({"live": self.live} if self.live is not None else {}),
        }


def _damage_note(info) -> str | None:
    """The reader's warning about damaged blocks it read past (files only; other sources have
    none)."""
    note = getattr(info, "damage_note", None)
    return note() if note is not None else None


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


def _check_ledger_place(ledger_dir: Path) -> None:
    """An existing DIR must be a ledger or empty: never write a ledger among a user's files (as
    `keys generate` refuses to). FileTypeError for a file, UsageError for a directory of other
    files."""
    try:
        mode = os.stat(ledger_dir).st_mode
    except OSError as e:
        raise fsio.storage_error(e, ledger_dir, "read ledger directory") from None
    if not stat.S_ISDIR(mode):
        raise fsio.wrong_kind(ledger_dir, mode, "a ledger directory (a new, empty or existing one)")
    if os.path.lexists(ledger_dir / LEDGER_FILE):
        return
    try:
        # a lock: a first capture that failed
        others = sorted(set(os.listdir(ledger_dir)) - {LOCK_FILE})
    except OSError as e:
        raise fsio.storage_error(e, ledger_dir, "list ledger directory") from None
    if others:
        raise UsageError(
            f"{ledger_dir}: is a directory of {len(others)} other file(s) (no {LEDGER_FILE}), not "
            "a ledger; refusing to write a ledger among them: give a new or empty directory"
        )


def capture_file(
    source: str | Path,
    ledger_dir: Path,
    *,
    digest_key: DigestKey | None,
    signing_key: SigningKey,
    algorithm: str | None = None,
    strip: str | None = None,
    link: str = DEFAULT_LINK,
    segment_records: int = DEFAULT_SEGMENT_RECORDS,
    leaf_records: int | None = None,
    leaf_hash: str | None = None,
    progress: Progress | None = None,
    segment_seconds: float | None = None,
    duration: float | None = None,
    max_frames: int | None = None,
    live: LiveOptions | None = None,
    monitor: Callable[[CaptureStatus], None] | None = None,
    workers: int = 0,
    accept_forgery_risk: bool = False,
    digest_key_id: str | None = None,
    on_interrupt: Callable[[int], None] | None = None,
    ledger_format: int | None = None,
    device_state: DeviceState | None = None,
    tiers: tuple[str, ...] | None = None,
    window_ns: int | None = None,
    window_capacity: int | None = None,
    device_id: str | None = None,
) -> CaptureResult:
    """Capture every frame of a pcap/pcapng file, or a live interface (`iface:NAME`), into the
    ledger at `ledger_dir`.

    A segment is sealed after `segment_records` records or, with `segment_seconds`, once it has
    been open that long (wall clock). The capture ends at the end of the file, on SIGINT/SIGTERM,
    after `duration` seconds or after `max_frames` frames. A live interface then drains its ring
    (except after `max_frames`), declares the last drops and ends; `live` sets its ring.

    A `records:FILE` / `records:-` source (ledgertool.source.records) is records a hardware pipeline
    computed, sealed like the engine's; GAP records among them count as drops. It needs no digest
    key: an existing ledger's current digest key id is taken (and `digest_key_id`, or `digest_key`'s
    id, checked against it); a new ledger takes `digest_key_id` or `digest_key`'s id. A record that
    does not fit (cut, seq not continuing the link, undocumented flag bits) is LedgerFormatError,
    after the records before it are sealed. Every other source needs `digest_key`. An
    authenticated record stream (ledgertool.source.stream) needs `digest_key` (the master its
    tags are keyed from) and an existing ledger; records are sealed only from blocks whose tag
    verified, and each seal's source names the device and stream. `device_id`: take only that
    device's authenticated stream (plain records are refused).

    `workers` threads digest each batch (0: every usable core); records never depend on it. For a
    live interface `workers` is the number of receive rings (0: one), each read and digested by its
    own thread; their records are merged per segment by (ts_ns, worker, order in the worker).
    Segment k is sealed (Parquet, Merkle root, signatures) on a background thread while segment k +
    1 is digested; seals still chain in order, at most one seal is in flight, and a sealing error is
    raised here.

    Creates the ledger (ledger format `ledger_format`, 1 or 2, default 2; algorithm default
    siphash-1-3-128, strip default frame) or appends to it in its own format, continuing its seal
    chain and sequence numbers; every segment written is sealed before return, also on
    SIGINT/SIGTERM: the first one calls `on_interrupt` with the number of records the open segment
    holds (they are sealed before return); a second SIGINT raises KeyboardInterrupt without sealing
    it (the open segment stays for `ledgertool recover`). Raises CaptureFormatError for an
    unreadable or corrupt capture (frames before a corrupt structure are sealed first and counted in
    the message), UsageError for a new ledger of an algorithm with a `risk_opt_in` (aes-128-gmac)
    unless `accept_forgery_risk`, KeyFileError when the digest key is not an existing ledger's
    current one (a key retired by a digest-key rotation is named as such) or the signing key is not
    its current one, AlgorithmError for an unknown algorithm. Holds the ledger's writer lock for the
    whole run (LedgerLockedError naming the holder while another writer has it); StorageError naming
    the file when the file system fails (full, read-only, I/O error): what was written before stays,
    and `ledgertool recover` seals it.

    `tiers` ("frames", "windows" or both), `window_ns` and `window_capacity` are a new ledger's
    (default: frames only; with the window tier 1 s windows, capacity 64; a records: source or a v1
    ledger: frames only) and fixed for it: an existing ledger refuses others (UsageError). The
    window tier feeds every record batch to a window accumulator and seals its window records in the
    link's window log (ledgertool.capture.windows); a first frame in or before the link's last
    sealed window is UsageError before anything is written.

    `device_state`: the signing key's protected state (ledger.devstate; the CLI keeps it beside
    the key file, docs/api.md). With it,
    RollbackRefusedError before anything is captured when the link's storage is behind or beside
    what the key signed; every seal and checkpoint is remembered, and an open segment nothing of
    which authenticates is set aside instead of refused.
    """
    layout.check_link_name(link)
    if not 1 <= segment_records <= MAX_SEGMENT_RECORDS:
        # the open segment's records are held in memory until sealed (ledger.writer)
        raise UsageError(Setting("segment_records"), f" must be 1..{MAX_SEGMENT_RECORDS}")
    # (not `<= 0` alone: NaN compares false with everything and would never stop or seal)
    for name, value in (("segment_seconds", segment_seconds), ("duration", duration)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(Setting(name), f" must be a positive number of seconds, got {value}")
    if algorithm is not None and not algorithm.strip():
        raise UsageError(
            Setting("algorithm"), " is empty: name one (`ledgertool algorithms` lists them)"
        )
    if strip is not None and not strip.strip():
        raise UsageError(Setting("strip"), " is empty: name one (frame, l3, payload or rdma)")
    if max_frames is not None and max_frames < 1:
        raise UsageError(Setting("frames"), " must be at least 1")
    if workers < 0:
        raise UsageError(Setting("workers"), " must be 0 (every core) or more")
    if ledger_format not in (None, 1, 2):
        raise UsageError(Setting("ledger_format"), " must be 1 or 2 (ledger format v1 or v2)")
    if not is_records(source) and digest_key is None:
        raise UsageError(
            "digesting frames needs the digest key (only records computed elsewhere go without it)"
        )
    if digest_key_id is not None and not is_records(source):
        raise UsageError(
            "a digest key id is taken only for records computed elsewhere; frames are digested "
            "with the digest key, whose id the ledger records"
        )
    if device_id is not None and not (is_records(source) and _KEY_ID.fullmatch(device_id)):
        raise UsageError(
            Setting("device_id"), " is 32 lowercase hex digits, for records: sources only"
        )
    if digest_key_id is not None and not _KEY_ID.fullmatch(digest_key_id):
        raise UsageError(f"digest key id {digest_key_id!r} is not 32 lowercase hex digits")
    if tiers is not None:
        if not tiers or any(t not in TIERS for t in tiers):
            raise UsageError(
                Setting("tiers"), f" must be some of {', '.join(TIERS)}, not {','.join(tiers)!r}"
            )
        tiers = tuple(t for t in TIERS if t in tiers)
    if window_ns is not None and not 0 < window_ns <= 2**53 - 1:
        raise UsageError(Setting("window"), " must be 1 ns .. 2^53 - 1 ns")
    if window_capacity is not None:
        window_cells(window_capacity)  # UsageError for a capacity no table has
    ledger_dir = Path(ledger_dir)
    new_dir = not ledger_dir.exists()
    if not new_dir:
        _check_ledger_place(ledger_dir)
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
            opts = CaptureOptions(
                algorithm=algorithm,
                strip=strip,
                link=link,
                segment_records=segment_records,
                segment_seconds=segment_seconds,
                leaf_records=leaf_records,
                leaf_hash=leaf_hash,
                duration=duration,
                max_frames=max_frames,
                live=live,
                workers=workers,
                accept_forgery_risk=accept_forgery_risk,
                progress=progress,
                monitor=monitor,
                digest_key_id=digest_key_id,
                on_interrupt=on_interrupt,
                ledger_format=ledger_format,
                device_state=device_state,
                tiers=tiers,
                window_ns=window_ns,
                window_capacity=window_capacity,
                device_id=device_id,
            )
            return CaptureRun(source, ledger_dir, digest_key, signing_key, opts, held).run()
        except StorageError as e:
            if (
                e.errno in _WRITE_ERRNOS
                and e.path
                and Path(e.path).parent == layout.link_dir(ledger_dir, link)
            ):
                e.args = (f"{e}; {kept_for_recovery(ledger_dir, link, signing_key)}",)
            raise
        finally:
            if new_dir and not (ledger_dir / LEDGER_FILE).exists():
                _remove_new_dir(ledger_dir)  # nothing was recorded: leave nothing behind


@dataclass(frozen=True)
class CaptureOptions:
    """What capture_file was asked for (checked there, before the ledger is locked)."""

    algorithm: str | None = None
    strip: str | None = None
    link: str = DEFAULT_LINK
    segment_records: int = DEFAULT_SEGMENT_RECORDS
    segment_seconds: float | None = None
    leaf_records: int | None = None
    leaf_hash: str | None = None  # a new ledger's leaf construction (None: DEFAULT_LEAF_HASH)
    duration: float | None = None
    max_frames: int | None = None
    live: LiveOptions | None = None
    workers: int = 0
    accept_forgery_risk: bool = False
    progress: Progress | None = None
    monitor: Callable[[CaptureStatus], None] | None = None
    digest_key_id: str | None = None  # records: sources only
    on_interrupt: Callable[[int], None] | None = None
    ledger_format: int | None = None  # of a new ledger (None: DEFAULT_LEDGER_FORMAT, 2)
    device_state: DeviceState | None = None  # the signing key's protected state
    tiers: tuple[str, ...] | None = (
        None  # of a new ledger (None: the default); checked for an existing one
    )
    window_ns: int | None = None
    window_capacity: int | None = None
    device_id: str | None = None  # records: sources only: the device whose stream is required


# the settings an existing ledger keeps (_check_ledger): the option that asks for another value,
# and what the setting is
_FIXED_SETTINGS = {
    "algorithm": ("--algorithm", "digest algorithm"),
    "strip": ("--strip", "strip mode"),
    "leaf_records": ("--leaf-records", "records per Merkle leaf"),
    "leaf_hash": ("--leaf-hash", "Merkle leaf construction"),
    "version": ("--ledger-format", "format"),
}


# a record's bytes up to its flags (seq, ts_ns, wire_len, cap_len, flags: docs/ledger-format.md)
RECORD_FLAGS_END = 26


def _utc(ns: int) -> str:
    """A ts_ns as UTC time to the nanosecond: 2026-01-01T00:00:00.000000000Z."""
    try:
        t = datetime.fromtimestamp(ns // 10**9, UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ns} ns since the epoch"
    return f"{t:%Y-%m-%dT%H:%M:%S}.{ns % 10**9:09d}Z"


def _shown_window(ns: int | None) -> str:
    """A window length as --window takes it, exactly: 1s, 100ms, 250us, 7ns."""
    if ns is None:
        return "none"
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"


def _shown_param(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(value)
    return "none" if value is None else str(value)


def _gap_records_only(records: memoryview, n: int, dtype: np.dtype, first_seq: int) -> np.ndarray:
    """The GAP records among `n` records, renumbered from `first_seq` to stay contiguous."""
    import numpy as np

    arr = np.frombuffer(records, dtype=dtype, count=n)
    arr = arr[(arr["flags"] & FLAG_GAP) != 0].copy()
    arr["seq"] = np.arange(first_seq, first_seq + len(arr), dtype=np.uint64)
    return arr


class CaptureRun:
    """One capture_file run with the ledger's writer lock held and DIR existing, in phases:

    open    check or create the ledger, open the source, recover the link's open segments, continue
            its chain (LinkWriter), start the engines, catch SIGINT/SIGTERM;
    loop    fill records into the LinkWriter until the source ends or a stop (a signal, the
            duration, the frame count) drains it: one reader, or several live workers merged;
    finish  seal the open segment, sign the closing checkpoint;
    close   in every case: stop the workers, finish a seal in flight, restore the signals, close
            the source; then the report (counters, live statistics, warnings).

    An error while reading seals what was read before it (`_fail`).
    """

    # set by _open
    ledger: LedgerHeader
    alg: Algorithm
    strip_id: int
    result: CaptureResult
    reader: CaptureReader | RecordsReader  # the first of `readers`
    engine: DigestEngine | RecordsReader  # a records: source is its own engine
    genesis_key_id: str  # a new ledger's digest key id

    def __init__(
        self,
        source: str | Path,
        ledger_dir: Path,
        digest_key: DigestKey | None,
        signing_key: SigningKey,
        opts: CaptureOptions,
        held: contextlib.ExitStack | None = None,
    ):
        self.source = source
        self._held = held if held is not None else contextlib.ExitStack()  # closed by the caller
        self.marks: LedgerMarks | None = None
        self.ledger_dir = ledger_dir
        self.digest_key = digest_key
        self.signing_key = signing_key
        self.opts = opts
        self.live_source = is_live(source)
        self.records_source = is_records(source)
        self.declares_drops = self.live_source or self.records_source  # ERF files: _open_readers
        # A live ring hands out frames block by block to one reader: one thread digests them.
        # Several live workers are several rings in one fanout group, one thread each
        # (ledgertool.capture.workers).
        self.live_workers = (opts.workers or 1) if self.live_source else 0
        self.digest_threads = 1 if self.live_source else (opts.workers or usable_cores())
        self.readers: list = []
        self.witness: FanoutWitness | None = None
        self.workers: LiveWorkers | None = None
        self.writer: LinkWriter | NoFrameLog | None = None
        self.windows: WindowTier | None = None  # the window tier, when the ledger has one
        self.frames_tier = True
        self._engines: list[DigestEngine] = []
        self.stopping = False
        self._signal: int | None = None
        self._old_handlers: dict = {}
        self._t0 = 0.0
        self._reader_info = None
        self._live_stats: LiveStats | None = None
        # (segment, ts_ns) of the last record the link sealed before this run, until the run's
        # first record was compared with it
        self._resumed_at: tuple[int, int] | None = None

    def run(self) -> CaptureResult:
        """open, loop, finish; close in every case (see the class); CaptureResult as
        capture_file."""
        try:
            self._open()
        except BaseException:
            self._abandon()
            raise
        try:
            if self.workers is not None:
                self._loop_workers()
            else:
                self._loop()
            self._finish()
        finally:
            self._close()
        return self._report()

    # ---- open ------------------------------------------------------------------------------------

    def _open(self) -> None:
        opts = self.opts
        pins = None
        if self.live_workers > 1:
            pins = LiveWorkers.check_pins(
                opts.live.pin_cpu if opts.live else None, self.live_workers
            )
        exists = self._check_ledger()
        # Open the capture before creating anything, so a bad file leaves no empty ledger behind.
        self._open_readers()
        if not exists:
            self.ledger = create_ledger(
                self.ledger_dir,
                algorithm=self.alg.name,
                strip=opts.strip or "frame",
                digest_key_id=self.genesis_key_id,
                digest_size=self.alg.digest_size,
                leaf_records=opts.leaf_records,
                version=opts.ledger_format or DEFAULT_LEDGER_FORMAT,
                tiers=self.new_tiers,
                window_ns=opts.window_ns or DEFAULT_WINDOW_NS,
                capacity=opts.window_capacity or DEFAULT_CAPACITY,
                leaf_hash=opts.leaf_hash or DEFAULT_LEAF_HASH,
            )
        self.frames_tier = self.ledger.frames_tier
        self.result = CaptureResult(
            str(self.source),
            str(self.ledger_dir),
            opts.link,
            self.alg.name,
            self.ledger.strip,
            created=not exists,
            tiers=self.ledger.tiers,
        )
        if not exists and self.alg.creation_warning:
            self.result.warnings.append(self.alg.creation_warning)
        if self.records_source and opts.workers:
            # nothing to spread over threads: the records arrive digested, and one reader checks
            # them
            self.result.warnings.append(
                f"{opts.workers} workers asked for, none used: a {self.source} source is "
                "not digested here (its records were computed elsewhere)"
            )
        if opts.device_state is not None:
            self.marks = self._held.enter_context(opts.device_state.ledger(self.ledger.ledger_id))
        self._recover(fresh=not exists)
        source_name = (
            seal_source_name(self.source)
            if self.records_source
            else signed_source_name(self.source, live=self.live_source)
        )
        # a windows-only capture keeps no per-frame records: no per-frame writer, sealer or thread
        self.writer = (
            LinkWriter.open(
                self.ledger_dir,
                self.ledger,
                opts.link,
                self.signing_key,
                source=source_name,
                segment_records=opts.segment_records,
                segment_seconds=opts.segment_seconds,
                marks=self.marks,
            )
            if self.frames_tier
            else NoFrameLog(opts.segment_records, opts.segment_seconds)
        )
        self.result.first_seq = self.writer.next_seq
        last_ts = getattr(self.writer, "last_sealed_ts_ns", None)  # a window-only ledger: none
        if last_ts is not None:
            self._resumed_at = (self.writer.next_index - 1, last_ts)
        if self.ledger.window is not None:
            self.windows = WindowTier(
                self.ledger_dir,
                self.ledger,
                opts.link,
                self.signing_key,
                self.digest_key,
                source=source_name,
                segment_seconds=opts.segment_seconds,
                marks=self.marks,
            )
        if self.records_source:
            self._bind_stream(source_name)
        self.engine = self.reader if self.records_source else self._start_engines()
        if self.live_workers > 1:
            self.workers = LiveWorkers(self._engines, max_frames=opts.max_frames, pin_cpus=pins)
        # Signals can only be caught on the main thread; elsewhere the caller owns interruption.
        if threading.current_thread() is threading.main_thread():
            self._old_handlers = {
                s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)
            }
        self._t0 = time.perf_counter()

    def _device_windows(self) -> None:
        """The window records a device's authenticated stream carried (verified), into the
        window log; a records: source's frames are never windowed here."""
        if self.records_source and self.windows is not None:
            self.windows.add_records(self.reader.take_windows())

    def _bind_stream(self, source_name: str) -> None:
        """Give the records reader what checks an authenticated stream: the ledger, the digest
        master key, the link, the device required, the streams the link already sealed (from the
        sources of its seals and its window log's; a stream number at or below a device's last is
        a replay) and the window tier's parameters and last sealed window."""
        sealed: dict[str, int] = {}
        logs = [self.opts.link] + ([layout.window_log(self.opts.link)] if self.windows else [])
        files = [k for log in logs for k in segment_files(self.ledger_dir, log).values()]
        for kinds in files:
            if "seal.json" in kinds:
                got = parse_source_tail(load_seal(kinds["seal.json"], self.ledger_dir).source)
                if got is not None:
                    sealed[got[0]] = max(sealed.get(got[0], -1), got[1])
        binding = StreamBinding(
            ledger_id=self.ledger.ledger_id,
            master=self.digest_key.master if self.digest_key is not None else None,
            link=self.opts.link,
            record_bytes=self.reader.record_size,
            device_id=self.opts.device_id,
            sealed_streams=sealed,
            window=None
            if self.ledger.window is None
            else (self.ledger.window.window_ns, self.ledger.window.cells, self.alg.digest_size),
            last_window=None if self.windows is None else self.windows.last_sealed,
        )

        def named(tail: str) -> None:
            self.writer.source = source_name + tail
            if self.windows is not None:
                self.windows.writer.source = source_name + tail

        self.reader.bind(binding, named)

    def _new_tiers(self) -> tuple[str, ...]:
        """A new ledger's tiers: as asked, else DEFAULT_TIERS (frames only for a v1 ledger or a
        records: source, whose records come without the key that window records need)."""
        opts = self.opts
        v1 = (opts.ledger_format or DEFAULT_LEDGER_FORMAT) == 1
        tiers = opts.tiers or (("frames",) if v1 or self.records_source else DEFAULT_TIERS)
        if "windows" in tiers and v1:
            raise UsageError(Setting("tiers"), " windows needs a v2 ledger (ledger format v2)")
        if "windows" in tiers and self.records_source and self.digest_key is None:
            raise UsageError(
                Setting("tiers"),
                f" windows with a {self.source} source takes the device's window records from "
                "an authenticated stream, checked with the digest key: give it",
            )
        if "windows" not in tiers and (
            opts.window_ns is not None or opts.window_capacity is not None
        ):
            raise UsageError("a window length or capacity is for a ledger with the windows tier")
        return tiers

    def _check_tiers(self, ledger: LedgerHeader) -> None:
        """An existing ledger keeps its tiers and window parameters (UsageError for others)."""
        opts, win = self.opts, ledger.window
        asked = (
            ("tiers", opts.tiers, ledger.tiers),
            ("window length", opts.window_ns, win.window_ns if win else None),
            ("window capacity", opts.window_capacity, win.capacity if win else None),
        )
        for what, val, have in asked:
            if val is not None and val != have:
                shown = _shown_window if what == "window length" else _shown_param
                raise UsageError(
                    f"{self.ledger_dir}: ledger has {what} {shown(have)}, not "
                    f"{shown(val)} (fixed when the ledger was created)"
                )
        if win is not None and self.records_source and self.digest_key is None:
            raise UsageError(
                f"{self.ledger_dir}: ledger has a window tier: a {self.source} source brings its "
                "window records in an authenticated stream, checked with the digest key: give it"
            )

    def _start_engines(self) -> DigestEngine:
        """One digest engine per reader (`_engines`); the first."""
        subkey = self.digest_key.subkey(self.alg.name, self.alg.key_size)
        # one reader fills the writer's buffers (_loop): the engine's own 3 MB buffer, which live
        # workers fill, would only be zeroed page by page
        own = self.live_workers > 1
        self._engines = [
            DigestEngine(
                r, self.alg, self.strip_id, subkey, workers=self.digest_threads, buffer=own
            )
            for r in self.readers
        ]
        return self._engines[0]

    def _check_ledger(self) -> bool:
        """Load and check an existing ledger against the options and keys, or check the options of a
        new one (created once the source is open). Whether the ledger exists."""
        opts, ledger_dir = self.opts, self.ledger_dir
        if not os.path.lexists(ledger_dir / LEDGER_FILE):
            self.alg = get_algorithm(opts.algorithm or "siphash-1-3-128")
            self.strip_id = get_strip_mode(opts.strip or "frame")
            if self.alg.risk_opt_in and not opts.accept_forgery_risk:
                raise UsageError(
                    f"{self.alg.name} uses a fixed IV: whoever holds two of the ledger's (frame, "
                    "tag) pairs, as the prover normally does, can forge every tag without the key; "
                    "use blake3-keyed-128 or hmac-sha256-128, or create it anyway with "
                    f"{self.alg.risk_opt_in} "
                    '(docs/algorithms.md, "GMAC with a fixed IV")'
                )
            self.genesis_key_id = self._new_key_id()
            self.new_tiers = self._new_tiers()
            return False
        ledger = load_ledger(ledger_dir)
        self._check_tiers(ledger)
        for opt, val in (
            ("algorithm", opts.algorithm),
            ("strip", opts.strip),
            ("leaf_records", opts.leaf_records),
            ("leaf_hash", opts.leaf_hash),
            ("version", opts.ledger_format),
        ):
            if val is not None and val != getattr(ledger, opt):
                option, what = _FIXED_SETTINGS[opt]
                raise UsageError(
                    f"{ledger_dir}: ledger uses {opt} {getattr(ledger, opt)!r}, not {val!r} "
                    f"({option}: a ledger never changes its {what})"
                )
        self.alg = get_algorithm(ledger.algorithm)
        self.strip_id = get_strip_mode(ledger.strip)
        # new segments use the newest digest key (a rotation retires the older ones); their
        # headers and seals carry its id, ledger.json keeps the genesis id
        self.ledger = ledger.for_digest_key(self._current_key_id(ledger))
        current_signer_check(ledger_dir, self.ledger, self.signing_key)
        return True

    def _new_key_id(self) -> str:
        """A new ledger's digest key id: the digest key's, or for records computed elsewhere the id
        given (KeyFileError when both are given and differ, UsageError when neither is)."""
        given = self.opts.digest_key_id
        if self.digest_key is None:
            if given is None:
                raise UsageError(
                    "a new ledger records the id of its digest key: for records computed elsewhere "
                    "give the digest key or its id"
                )
            return given
        kid = self.digest_key.key_id(self.alg.name, self.alg.key_size)
        if given is not None and given != kid:
            raise KeyFileError(
                f"{self.digest_key.path or 'digest key'}: digest key id {kid} ({self.alg.name}) is "
                f"not the digest key id {given} given for the records"
            )
        return kid

    def _current_key_id(self, ledger: LedgerHeader) -> str:
        """The digest key id new segments of an existing ledger carry (the newest rotation's or the
        genesis id), checked against the digest key and the id given, where there are any."""
        if self.digest_key is not None:
            kid = current_digest_key_id(self.ledger_dir, ledger, self.digest_key)
        else:
            kid = digest_key_ids(self.ledger_dir, ledger)[-1]
        given = self.opts.digest_key_id
        if given is not None and given != kid:
            raise KeyFileError(
                f"digest key id {given} given for the records is not the current digest key of "
                f"ledger {self.ledger_dir} (key id {kid})"
            )
        return kid

    def _open_readers(self) -> None:
        source, live, n = self.source, self.opts.live, self.live_workers
        if self.records_source:
            self.readers = [RecordsReader(source, self.alg, self.opts.link)]
        elif n <= 1:
            self.readers = [open_source(source, live)]
        elif is_bypass(source):
            # AF_XDP sockets on consecutive queues, or RX queues of a DPDK port; each worker thread
            # pins itself
            self.readers = open_sources(
                source, dataclasses.replace(live or LiveOptions(), pin_cpu=None), n
            )
        else:
            # one fanout group for every ring: the first makes it (a random id unless
            # --fanout-group), the others join it; each worker thread pins itself
            wopts = dataclasses.replace(live or LiveOptions(), pin_cpu=None, fanout=True)
            for _ in range(n):
                self.readers.append(open_source(source, wopts))
                wopts = dataclasses.replace(wopts, fanout_group=self.readers[0].fanout_group)
            self.witness = FanoutWitness(self.readers[0].iface, self.readers[0].fanout_group)
            self.witness.start(self.readers)
        self.reader = self.readers[0]
        # an ERF file's loss counters arrive as GAP records, as a live source's drops do
        info = getattr(self.reader, "info", None)
        if info is not None and getattr(info(), "format", None) == "ERF":
            self.declares_drops = True
            for r in self.readers:
                r.declare_losses()

    def _recover(self, fresh: bool = False) -> None:
        """Seal what a killed run left open in the link's logs (`fresh`: the ledger was created
        by this run, in a directory that held nothing else: there is nothing to recover)."""
        discarded: list[dict] = []
        aside: list[SetAside] = []
        # a windows-only ledger has no per-frame log to recover
        logs, said = [self.opts.link] if self.frames_tier and not fresh else [], []
        if self.ledger.window is not None and not fresh:  # a killed run left it open too
            logs.append(layout.window_log(self.opts.link))
        for log in logs:
            got = recover_open_segments(
                self.ledger_dir,
                self.ledger,
                log,
                self.signing_key,
                discarded,
                marks=self.marks,
                set_aside=aside,
            )
            if log == self.opts.link:
                self.result.recovered = got
            for r in got:
                what = "window segment" if log != self.opts.link else "segment"
                said.append(
                    f"recovered open {what} {r.index}: sealed {plural(r.records, 'record')}, "
                    f"discarded {plural(r.torn_bytes, 'torn byte')}"
                )
        if self.marks is not None:
            self.result.warnings += self.marks.notes
        self.result.warnings += said
        for d in discarded:
            self.result.warnings.append(
                f"recovery discarded {d['path']} ({plural(d['bytes'], 'byte')}: {d['why']})"
            )
        for a in aside:
            self.result.warnings.append(
                f"recovery set aside {a.path} as {a.moved_to} ({plural(a.bytes, 'byte')} "
                f"not sealed: {a.why})"
            )

    def _abandon(self) -> None:
        """Opening failed: release what was opened (nothing was read yet)."""
        if self.writer is not None:
            self.writer.close()
        self._close_readers()

    def _close_readers(self) -> None:
        for r in self.readers:
            r.close()
        if self.witness is not None:
            self.witness.close()

    # ---- loop ------------------------------------------------------------------------------------

    def _on_signal(self, signum, _frame) -> None:
        if self._signal is not None and signum == signal.SIGINT:
            # a second Ctrl-C: stop waiting for the seal; the open segment stays for `recover`
            raise KeyboardInterrupt
        first = self._signal is None
        self._signal = signum
        if first and self.opts.on_interrupt is not None:
            self.opts.on_interrupt(self.writer.open_records if self.writer is not None else 0)

    def _stop_reason(self, frames_reached: bool) -> str | None:
        """Why the capture should stop now: a signal, the duration, the frame count; None to go
        on."""
        if self._signal is not None:
            self.result.interrupted = True
            return "signal"
        if self.opts.duration is not None and time.perf_counter() - self._t0 >= self.opts.duration:
            return "duration"
        return "frames" if frames_reached else None

    def _source_ended(self) -> bool:
        """A file, workload or records input of which every frame was read has ended, whatever
        limit (--duration, --frames) was reached at the same time (a live source never ends)."""
        if self.live_source or not self.engine.at_end():
            return False
        self._device_windows()  # window records the look past the last frame verified
        return True

    def _loop(self) -> None:
        """One reader (a file, a workload or one live ring) fills the open segment batch by
        batch."""
        opts, result, w = self.opts, self.result, self.writer
        while True:
            if not self.stopping:
                reason = self._stop_reason(
                    opts.max_frames is not None and result.frames >= opts.max_frames
                )
                if reason:
                    if reason in ("duration", "frames") and self._source_ended():
                        reason = "end of capture"
                    result.stop_reason = reason
                    if not self.live_source:
                        break
                    # drain what the ring holds, except after the frame count (that many, no more)
                    self.reader.request_stop(drain=reason != "frames")
                    self.stopping = True
            ask = w.room()
            if opts.max_frames is not None and not self.stopping:
                ask = min(ask, opts.max_frames - result.frames)
            # the writer thread writes this batch while the engine digests the next one
            batch = None if self.records_source else w.batch_buffer(self.engine.batch_bytes)
            # the window tier fed inside the engine, each pass while in cache (not after a frame
            # count's stop: the frames then in hand are dropped, below)
            acc = (
                self.windows.acc
                if self.windows and batch is not None and not self.stopping
                else None
            )
            try:
                # idle: a quiet pipe returns no frame now and then, so --duration and signals act
                records, n, nbytes = (
                    self.engine.fill(
                        w.next_seq,
                        ask,
                        batch,
                        idle=True,
                        window=acc,
                        # the window tier alone keeps no record, and a file declares no drops:
                        # only the first record is read back (check_start)
                        window_only=not self.frames_tier and not self.declares_drops,
                    )
                    if batch is not None
                    else self.engine.fill(w.next_seq, ask)
                )
            # corrupt structure: seal what was read, report where reading stopped
            except LedgerError as e:
                self._device_windows()
                self._fail(e)
            self._device_windows()
            if n and self.stopping and result.stop_reason == "frames":
                # the frame count reached: frames the engine still had in hand are not recorded;
                # only the final GAP records (drops before the stop) are kept
                arr = _gap_records_only(records, n, self.engine.dtype, w.next_seq)
                records, n, nbytes = memoryview(arr.tobytes()), len(arr), 0
                batch = None  # not in the writer's buffer: written before append returns
            if n == 0:
                if self.engine.ended:
                    break
            else:
                self._record(records, n, nbytes, batch, windowed=acc is not None)
            w.rotate_if_due()
            if opts.monitor:
                opts.monitor(
                    self._status(
                        result.frames, result.bytes, result.drops, w.open_index, w.open_records
                    )
                )

    def _record(
        self,
        records: memoryview,
        n: int,
        nbytes: int,
        batch: ffi.CData | None = None,
        windowed: bool = False,
    ) -> None:
        """One reader's batch into the open segment (`batch`: the writer's buffer that holds it)
        and into the window tier (`windowed`: the engine added it to the accumulator already);
        GAP records are counted as drops, not frames."""
        if self.windows is not None and not self.records_source:
            # before anything of the batch is written; the first record's ts_ns read as bytes: a
            # windowed file capture loads no numpy (a tenth of a second of CPU)
            self.windows.check_start(int.from_bytes(records[8:16], "little", signed=True))
            if windowed:
                self.windows.add_filled()
            else:
                import numpy as np

                self.windows.add(np.frombuffer(records, dtype=self.engine.dtype, count=n))
        if self._resumed_at is not None and n:
            self._check_time_order(records[:RECORD_FLAGS_END])
        if self.frames_tier:
            self.writer.append(records, n, batch)
        frames = n
        if self.declares_drops:  # GAP records: frames dropped, declared in aux
            import numpy as np

            arr = np.frombuffer(records, dtype=self.engine.dtype, count=n)
            gaps = (arr["flags"] & FLAG_GAP) != 0
            if gaps.any():
                frames -= int(gaps.sum())
                self.result.drops += int(arr["aux"][gaps].sum())
        self.result.frames += frames
        self.result.bytes += nbytes
        if self.opts.progress:
            self.opts.progress(self.result.frames, self.result.bytes, self.writer.sealed_records)

    def _status(
        self, frames: int, nbytes: int, drops: int, open_segment: int | None, open_records: int
    ) -> CaptureStatus:
        return CaptureStatus(
            frames,
            nbytes,
            drops,
            time.perf_counter() - self._t0,
            len(self.writer.sealed),
            open_segment,
            open_records,
            self.stopping,
        )

    def _loop_workers(self) -> None:
        """Several live workers (docs/capture.md "Workers and fanout"): each thread fills its own
        buffer; at a segment boundary (segment_records in total, segment_seconds, the end) the
        buffers are merged by (ts_ns, worker, order in the worker), renumbered and sealed. Records
        past segment_records are carried, still per worker, into the next segment's merge."""
        import numpy as np

        lw, w, witness, result = self.workers, self.writer, self.witness, self.result
        carry = [np.empty(0, dtype=self.engine.dtype)] * self.live_workers
        carried = 0
        seg_opened: float | None = None  # perf_counter when the pooled records began
        lw.start()
        while True:
            if not self.stopping:
                self._stop_workers_if_due()
            lw.wake.wait(0.05)
            lw.wake.clear()
            if witness is not None:
                witness.poll()
            ended = lw.ended
            if witness is not None and ended and lw.error is None and result.foreign_frames is None:
                gap = self._foreign_gap()
                carry[0] = np.concatenate((carry[0], gap))
                carried += len(gap)
            pooled = lw.buffered + carried
            now = time.perf_counter()
            if pooled and seg_opened is None:
                seg_opened = now
            while pooled and (ended or w.due(pooled, seg_opened, now)):
                parts = [np.concatenate((c, p)) for c, p in zip(carry, lw.take())]
                merged, wid = merge_worker_records(parts, w.next_seq)
                cut = min(len(merged), w.segment_records)
                carry = split_by_worker(merged[cut:], wid[cut:], self.live_workers)
                carried = len(merged) - cut
                self._write_merged(merged[:cut])
                pooled = carried
                seg_opened = now if carried else None
            if self.opts.monitor:
                self.opts.monitor(
                    self._status(
                        lw.frames, lw.bytes, lw.drops, w.next_index if pooled else None, pooled
                    )
                )
            if ended and not pooled and not lw.buffered:
                break
        result.bytes = lw.bytes
        if lw.error is not None:
            self._fail(lw.error)  # what was read before the error is sealed (as with one worker)

    def _stop_workers_if_due(self) -> None:
        reason = self._stop_reason(self.workers.frames_reached.is_set())
        if reason is None and self.workers.error is not None:
            reason = "error"
        if not reason:
            return
        if reason != "error":
            self.result.stop_reason = reason
        if self.witness is not None:
            self.witness.stop()  # before the rings stop: see FanoutWitness
        # every ring drains, except after the frame count (that many, no more) or an error
        for r in self.readers:
            r.request_stop(drain=reason not in ("frames", "error"))
        self.stopping = True

    def _foreign_gap(self) -> np.ndarray:
        """Frames of the interface that no ring of ours received went to a foreign fanout member:
        declared in a GAP record, like the kernel's drops, and reported."""
        import numpy as np

        self.result.foreign_frames = self.witness.foreign_frames(self.readers)
        if not self.result.foreign_frames:
            return np.empty(0, dtype=self.engine.dtype)
        return gap_records(
            self.engine.dtype, self.result.foreign_frames, self.reader.info().linktype
        )

    def _write_merged(self, recs: np.ndarray) -> None:
        """Several live workers: one merged, renumbered segment, written whole and handed to the
        sealer."""
        if self.windows is not None:
            if len(recs):
                self.windows.check_start(int(recs["ts_ns"][0]))
            self.windows.add(recs)
        if self._resumed_at is not None and len(recs):
            self._check_time_order(recs[:1].tobytes())
        gaps = (recs["flags"] & FLAG_GAP) != 0
        self.result.frames += len(recs) - int(gaps.sum())
        self.result.drops += int(recs["aux"][gaps].sum())
        if self.frames_tier:
            self.writer.append(recs.tobytes(), len(recs))
            self.writer.seal()
        else:
            self.writer.next_seq += len(recs)  # the merge numbers the next segment from here

    def _check_time_order(self, first: bytes | memoryview) -> None:
        """The run's first record against the last one the link sealed: a warning when its time is
        earlier (appended all the same: records stay in capture order, docs/capture.md)."""
        (segment, last), self._resumed_at = self._resumed_at, None
        ts = int.from_bytes(first[8:16], "little", signed=True)
        if int.from_bytes(first[24:26], "little") & FLAG_NO_TIMESTAMP or ts >= last:
            return
        self.result.warnings.append(
            f"{self.ledger_dir}: link {self.opts.link}: timestamps go backwards: this capture's "
            f"first record is at {_utc(ts)} (ts_ns {ts}), before the last record the link sealed, "
            f"at {_utc(last)} (ts_ns {last}, segment {segment}); appended all the same, in capture "
            "order"
        )

    def _fail(self, e: BaseException) -> NoReturn:
        """Reading stopped at `e`: seal what was read before it and sign a checkpoint over it (a
        new ledger that recorded nothing is removed), then raise `e`, saying how many frames were
        sealed."""
        w = self.writer
        w.end_segment()
        w.drain()
        if self.windows is not None:
            self.windows.finish()
        if self.result.created and not w.sealed and not (self.windows and self.windows.sealed):
            # nothing was recorded: leave nothing behind
            _remove_new_ledger(self.ledger_dir, self.opts.link)
        elif w.sealed or self.result.recovered:
            w.checkpoint()
        if isinstance(e, LedgerError):
            where = w.sealed_range()
            e.args = (
                f"{e}; {plural(self.result.frames, 'frame')} before it "
                f"{'was' if self.result.frames == 1 else 'were'} sealed"
                + (f" in {where}" if where else ""),
            )
        raise e

    # ---- finish, close, report -------------------------------------------------------------------

    def _finish(self) -> None:
        """Seal the open segment and sign the checkpoint over the link's whole chain."""
        w = self.writer
        w.end_segment()
        w.drain()
        if self.windows is not None:
            self.windows.finish()
        if self.opts.progress:  # the line's last state: every record sealed
            self.opts.progress(self.result.frames, self.result.bytes, w.sealed_records)
        if layout.link_dir(self.ledger_dir, self.opts.link).is_dir():
            try:
                w.checkpoint()
            except LedgerError as e:  # an older seal is missing or unreadable: nothing was signed
                e.args = (
                    f"{e}; this capture's {plural(self.result.frames, 'frame')} "
                    f"{'was' if self.result.frames == 1 else 'were'} sealed "
                    f"({w.sealed_range() or 'no segment'}), the checkpoint was not signed",
                )
                raise

    def _close(self) -> None:
        # every worker thread is out of its reader before the readers close
        if self.workers is not None:
            for r in self.readers:
                r.request_stop(drain=False)
            self.workers.join()
        self.writer.close()
        if self.windows is not None:
            self.windows.close()
        for s, h in self._old_handlers.items():
            signal.signal(s, h)
        self._reader_info = self.reader.info()
        self.result.strip_fallbacks = sum(
            (e.strip_fallbacks() for e in self._engines), StripFallbacks()
        )
        if self.live_source:
            self._live_stats = _sum_stats([r.stats() for r in self.readers])
        self._close_readers()

    def _report(self) -> CaptureResult:
        result = self.result
        result.elapsed_s = time.perf_counter() - self._t0
        result.next_seq = self.writer.next_seq
        result.segments = self.writer.sealed
        if self.windows is not None:
            result.windows = self.windows.result()
        if self._live_stats is not None:
            self._report_live(self._live_stats)
        for note in (self._reader_info.truncation_note(), _damage_note(self._reader_info)):
            if note:
                result.warnings.append(note)
        return result

    def _report_live(self, live_stats: LiveStats) -> None:
        """Kernel/ring counters into the result, and a warning for every frame not recorded."""
        result, source, witness = self.result, self.source, self.witness
        result.live = live_stats.to_json()
        # kernel-bypass sources (ledgertool.source.bypass)
        result.warnings.extend(getattr(live_stats, "notes", ()))
        foreign = result.foreign_frames or 0
        if self.workers is not None:
            result.live["workers"] = self.live_workers
            result.live["worker_frames"] = list(self.workers.per_worker_frames)
            if witness is not None:
                result.live["fanout"] = {
                    "group": witness.group,
                    "witness_frames": witness.frames,
                    "foreign_frames": result.foreign_frames,
                }
        if foreign:
            result.warnings.append(
                f"FANOUT: {plural(foreign, 'frame')} on {source} went to a socket outside this "
                f"capture's PACKET_FANOUT group {witness.group} (another process joined it) and "
                "are not in the ledger; they are declared in a GAP record as dropped "
                "(docs/capture.md)"
            )
        kernel_drops = result.drops - foreign
        if kernel_drops and hasattr(live_stats, "drop_advice"):  # AF_XDP, DPDK
            result.warnings.append(live_stats.drop_advice(str(source), kernel_drops))
        elif kernel_drops:
            result.warnings.append(
                f"{plural(kernel_drops, 'frame')} DROPPED by the kernel ring on {source} (declared "
                "as GAP records in the ledger; the ring was full "
                f"{plural(live_stats.freeze_count, 'time')}): raise --ring-mb or "
                "lower the load (docs/capture.md)"
            )
        unrecorded = live_stats.kernel_packets - result.frames - live_stats.drops_declared
        if result.stop_reason == "frames" and unrecorded > 0:
            result.warnings.append(
                f"{source}: {plural(unrecorded, 'frame')} arrived after the last recorded frame "
                f"(--frames) and {'was' if unrecorded == 1 else 'were'} not recorded"
            )
        elif unrecorded != 0:
            result.warnings.append(
                f"{source}: kernel saw {plural(live_stats.kernel_packets, 'frame')}, ledger has "
                f"{plural(live_stats.frames, 'frame')} + "
                f"{plural(live_stats.drops_declared, 'declared drop')}"
            )
