"""Live frame sources and replay: AF_PACKET TPACKET_V3 capture (`iface:NAME`) and PF_PACKET
transmission of a capture file (docs/capture.md).

`LiveReader` has the face of `file.CaptureReader` (handle, info, raise_error, close), so the
digest engine and `capture.capture_file` treat an interface like a file. What differs:

- `DigestEngine.fill` returns 0 records when nothing arrived within the poll interval; that is not
  the end. The end comes after `request_stop()`: the reader drains (or not), declares the last
  drops and then reports end of capture.
- Frames the kernel ring had no room for arrive as GAP records (flag GAP, aux = count).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from .._binding import (
    c_string,
    ffi,
    interface_error,
    lib,
    live_read_error,
    replay_open_error,
    replay_run_error,
)
from ..errors import Setting, UsageError
from .file import ReaderInfo

IFACE_PREFIX = "iface:"  # SOURCE of a live interface (ledgertool.source)


def iface_name(source: str) -> str:
    name = source[len(IFACE_PREFIX) :]
    if not name or len(name) > 15 or "/" in name or any(c.isspace() for c in name):
        raise UsageError(
            f"source {source!r}: expected iface:NAME with an interface name of 1-15 characters"
        )
    return name


@dataclass(frozen=True)
class LiveOptions:
    """Ring and socket settings of a live capture (docs/capture.md, "Tuning")."""

    ring_mb: float = 64.0  # receive ring size, MiB
    block_kb: int = 0  # ring block size, KiB (0: ring/8 clamped to 64 KiB..1 MiB)
    block_ms: int = 10  # block retire timeout, ms: the longest a frame waits in an open block
    poll_ms: int = 100  # longest wait for a block before the engine returns to Python
    fanout: bool = False  # join a PACKET_FANOUT hash group (several workers; one ring needs none)
    fanout_group: int = 0  # the group id to join (0: a new group with a random id)
    promisc: bool = True
    pin_cpu: int | None = None

    def check(self) -> None:
        if not (self.ring_mb * 1024 >= 8):
            raise UsageError(Setting("ring_mb"), " must be at least 0.0078125 (8 KiB)")
        if self.block_ms < 1 or self.poll_ms < 1:
            raise UsageError(Setting("block_ms"), " must be at least 1")
        if self.pin_cpu is not None and self.pin_cpu < 0:
            raise UsageError(Setting("pin_cpu"), " must be a CPU number >= 0")
        if not 0 <= self.fanout_group <= 0xFFFF:
            raise UsageError(
                Setting("fanout_group"), " must be a 16-bit group id (1..65535; 0: random)"
            )


@dataclass(frozen=True)
class LiveStats:
    """Counters of a live reader (cumulative): see lt_live_stats in ledgertool.h."""

    kernel_packets: int
    kernel_drops: int
    freeze_count: int
    frames: int
    gaps: int
    drops_declared: int
    blocks: int
    vlan_restored: int
    ring_bytes: int
    block_bytes: int
    block_count: int

    def to_json(self) -> dict:
        return asdict(self)


class LiveReader:
    """A TPACKET_V3 ring on one interface, as an lt_reader (native/src/capture_afpacket.c)."""

    def __init__(self, source: str, options: LiveOptions | None = None):
        self._r = None
        self.path = source
        self.iface = iface_name(source)
        self.options = options or LiveOptions()
        self.options.check()
        cfg = ffi.new("lt_live_config *")
        self._name = ffi.new("char[]", self.iface.encode())
        cfg.ifname = self._name
        cfg.ring_kb = max(8, int(self.options.ring_mb * 1024))
        cfg.block_kb = self.options.block_kb
        cfg.block_ms = self.options.block_ms
        cfg.poll_ms = self.options.poll_ms
        cfg.fanout = int(self.options.fanout)
        cfg.fanout_group = self.options.fanout_group
        cfg.promisc = int(self.options.promisc)
        cfg.pin_cpu = -1 if self.options.pin_cpu is None else self.options.pin_cpu
        err = ffi.new("char[512]")
        out = ffi.new("lt_reader **")
        st = lib.lt_reader_open_live(cfg, out, err, 512)
        if st != lib.LT_OK:
            raise interface_error(
                st, c_string(err) or f"{source}: cannot open (status {st})", self.iface
            )
        self._r = out[0]
        self.stopping = False

    @property
    def handle(self):
        return self._r

    def request_stop(self, drain: bool = True) -> None:
        """End the capture: with `drain`, frames already in the ring are still handed out."""
        if self._r is not None and not self.stopping:
            lib.lt_live_request_stop(self._r, int(drain))
            self.stopping = True

    def stats(self) -> LiveStats:
        s = ffi.new("lt_live_stats *")
        lib.lt_live_get_stats(self._r, s)
        return LiveStats(*(int(getattr(s, f)) for f in LiveStats.__dataclass_fields__))

    @property
    def fanout_group(self) -> int:
        """The PACKET_FANOUT group id this ring joined; 0 for none."""
        g = ffi.new("uint32_t *")
        lib.lt_live_get_fanout(self._r, g)
        return int(g[0])

    def sync_stats(self) -> LiveStats:
        """Read the kernel counters now (not while a worker thread reads this ring) and return
        them."""
        st = lib.lt_live_sync_stats(self._r)
        if st != lib.LT_OK:
            self.raise_error(st)
        return self.stats()

    def info(self) -> ReaderInfo:
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        return ReaderInfo(
            path=self.path,
            format="live (AF_PACKET TPACKET_V3)",
            version="",
            snaplen=i.snaplen,
            linktype=i.linktype,
            file_size=0,
            frames=i.frames,
            sections=0,
            interfaces=1,
            skipped_blocks=0,
            truncated=False,
            truncated_offset=0,
            truncated_bytes=0,
            message=c_string(i.message),
        )

    def raise_error(self, status: int) -> None:
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        raise live_read_error(status, c_string(i.message), self.path, self.iface)

    def close(self) -> None:
        if getattr(self, "_r", None) is not None:
            lib.lt_reader_close(self._r)
            self._r = None

    def __enter__(self) -> LiveReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - safety net
        self.close()


# ---- replay ---------------------------------------------------------------------------------

REPLAY_MODES = {
    "timing": lib.LT_REPLAY_TIMING,
    "pps": lib.LT_REPLAY_PPS,
    "mbps": lib.LT_REPLAY_MBPS,
    "topspeed": lib.LT_REPLAY_TOPSPEED,
}


@dataclass
class ReplayResult:
    """What a replay sent (JSON: schemas/replay-report.schema.json)."""

    file: str
    iface: str
    mode: str
    rate: float | None
    loops: int
    frames_in_file: int
    frames_sent: int
    bytes_sent: int
    skipped_too_large: int
    skipped_too_short: int
    skipped_linktype: int
    send_errors: int
    retries: int
    elapsed_s: float
    interrupted: bool

    @property
    def frames_per_s(self) -> float:
        return self.frames_sent / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mbit_per_s(self) -> float:
        return self.bytes_sent * 8 / self.elapsed_s / 1e6 if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict:
        d = asdict(self)
        d = {
            "ok": True,
            **d,
            "elapsed_s": round(self.elapsed_s, 6),
            "frames_per_s": round(self.frames_per_s, 1),
            "mbit_per_s": round(self.mbit_per_s, 3),
        }
        return d


def replay(
    path,
    iface: str,
    *,
    mode: str = "timing",
    rate: float | None = None,
    loops: int = 1,
    batch: int = 0,
    progress=None,
    interval: float = 0.2,
) -> ReplayResult:
    """Send every Ethernet frame of a capture on `iface`, `loops` times (native/src/replay.c).

    The send loop runs on a worker thread with the GIL released; this thread polls counters for
    `progress` and turns KeyboardInterrupt into a clean stop (result.interrupted).
    """
    if mode not in REPLAY_MODES:
        raise UsageError(f"unknown replay mode {mode!r}")
    if mode in ("pps", "mbps") and not (rate and rate > 0):
        raise UsageError(Setting(mode), " needs a positive rate")
    if loops < 1:
        raise UsageError(Setting("loops"), " must be at least 1")
    cfg = ffi.new("lt_replay_config *")
    cpath = ffi.new("char[]", str(path).encode())
    cif = ffi.new("char[]", iface.encode())
    cfg.path, cfg.ifname = cpath, cif
    cfg.mode = REPLAY_MODES[mode]
    cfg.rate = float(rate or 0)
    cfg.loops = loops
    cfg.batch = batch
    err = ffi.new("char[512]")
    out = ffi.new("lt_replay **")
    st = lib.lt_replay_open(cfg, out, err, 512)
    if st != lib.LT_OK:
        raise replay_open_error(st, c_string(err), str(path), iface)
    p = out[0]
    run_err = ffi.new("char[512]")
    status = {}

    def worker():
        status["rc"] = lib.lt_replay_run(p, run_err, 512)

    def snapshot(interrupted=False) -> ReplayResult:
        s = ffi.new("lt_replay_stats *")
        lib.lt_replay_get_stats(p, s)
        return ReplayResult(
            str(path),
            iface,
            mode,
            rate,
            loops,
            s.frames_in_file,
            s.frames_sent,
            s.bytes_sent,
            s.skipped_too_large,
            s.skipped_too_short,
            s.skipped_linktype,
            s.send_errors,
            s.retries,
            s.elapsed_ns / 1e9,
            bool(s.stopped) or interrupted,
        )

    t = threading.Thread(target=worker, name="ledgertool-replay", daemon=True)
    interrupted = False
    try:
        t.start()
        while t.is_alive():
            try:
                t.join(interval)
                if progress and t.is_alive():
                    progress(snapshot())
            except KeyboardInterrupt:
                lib.lt_replay_stop(p)
                interrupted = True
        res = snapshot(interrupted)
    finally:
        if t.is_alive():  # pragma: no cover - only on an exception in progress()
            lib.lt_replay_stop(p)
            t.join()
        lib.lt_replay_close(p)
    if status.get("rc", lib.LT_OK) != lib.LT_OK:
        raise replay_run_error(c_string(run_err), iface)
    return res
