"""Kernel-bypass live sources: AF_XDP (`xdp:IFACE[:QUEUE]`) and DPDK (`dpdk:PORT`), docs/capture.md
"Kernel bypass".

Each native source is its own optional extension module (ledgertool._source_xdp, linked with libxdp
and libbpf; ledgertool._source_dpdk, linked with DPDK), built only where pkg-config finds those
libraries (native/build_ffi.py), so ledgertool._native and everything else import without them (they
load through ledgertool._binding.optional_module). A source module opens its state and lends two
pointers, which ledgertool._native wraps in an lt_reader (lt_reader_open_source): the digest engine
then calls the source's next() directly.

The readers have the face of `live.LiveReader` (handle, info, raise_error, request_stop, stats,
close), so `capture.capture_file` runs them like an `iface:` source: idle polls return 0
records, drops arrive as GAP records, SIGINT/SIGTERM/--duration drain, --frames stops at once,
and `--workers N` is N readers (XDP: one socket per queue QUEUE..QUEUE+N-1; DPDK: N RX queues
with RSS) merged per segment by ledgertool.capture.workers.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass, field

from .._binding import (
    DPDK,
    XDP,
    c_string,
    ffi,
    interface_error,
    lib,
    live_read_error,
    optional_module,
    plugin_error,
)
from ..errors import Setting, UsageError
from ..plural import plural
from .file import ReaderInfo

XDP_PREFIX = "xdp:"
DPDK_PREFIX = "dpdk:"

XDP_MODES = ("auto", "zero-copy", "copy")
XDP_ATTACH = ("auto", "native", "skb")


@dataclass(frozen=True)
class BypassOptions:
    """Settings of an `xdp:` or `dpdk:` capture (docs/capture.md "Kernel bypass").

    ring_mb: AF_XDP UMEM per socket, MiB (frames of 4096 bytes; it is the receive ring: what
    absorbs a stall of the consumer). rx_desc: DPDK RX descriptors per queue (0: 1024; the mbuf
    pool is sized from it). eal: DPDK EAL arguments, shell-quoted. xdp_mode: zero-copy, copy or
    auto (zero-copy where the driver has it); xdp_attach: native (driver), skb (generic) or auto.
    """

    ring_mb: float = 64.0
    rx_desc: int = 0
    poll_ms: int = 100
    pin_cpu: int | None = None
    promisc: bool = True
    eal: str = ""
    xdp_mode: str = "auto"
    xdp_attach: str = "auto"

    @classmethod
    def coerce(cls, options) -> BypassOptions:
        """Options for a bypass source from whatever capture_file holds (None, LiveOptions)."""
        if isinstance(options, cls):
            return options
        if options is None:
            return cls()
        return cls(
            ring_mb=getattr(options, "ring_mb", 64.0),
            poll_ms=getattr(options, "poll_ms", 100),
            pin_cpu=getattr(options, "pin_cpu", None),
            promisc=getattr(options, "promisc", True),
        )

    def check(self) -> None:
        if not (self.ring_mb * 1024 >= 256):
            raise UsageError(
                Setting("ring_mb"), " must be at least 0.25 (an AF_XDP UMEM of 64 frames)"
            )
        if self.poll_ms < 1:
            raise UsageError("poll interval must be at least 1 ms")
        if self.pin_cpu is not None and self.pin_cpu < 0:
            raise UsageError(Setting("pin_cpu"), " must be a CPU number >= 0")
        if not 0 <= self.rx_desc <= 32768:
            raise UsageError(Setting("rx_desc"), " must be 0 (automatic) .. 32768")
        if self.xdp_mode not in XDP_MODES:
            raise UsageError(Setting("xdp_mode"), f" must be one of {', '.join(XDP_MODES)}")
        if self.xdp_attach not in XDP_ATTACH:
            raise UsageError(Setting("xdp_attach"), f" must be one of {', '.join(XDP_ATTACH)}")


def _addr(mod_ffi, ptr) -> int:
    return int(mod_ffi.cast("uintptr_t", ptr))


# ---- counters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class XdpQueueStats:
    """One AF_XDP socket (lt_xdp_stats, native/bypass/source_xdp.h)."""

    queue: int
    xdp_packets: int
    rx_dropped: int
    rx_ring_full: int
    rx_fill_ring_empty_descs: int
    rx_invalid_descs: int
    frames: int
    gaps: int
    drops_declared: int
    batches: int
    wakeups: int
    umem_frames: int
    frame_size: int
    ring_size: int
    zero_copy: bool
    native: bool


@dataclass(frozen=True)
class DpdkQueueStats:
    """One DPDK RX queue (lt_dpdk_stats, native/bypass/source_dpdk.h)."""

    queue: int
    rx_packets: int
    imissed: int
    rx_nombuf: int
    ierrors: int
    frames: int
    gaps: int
    drops_declared: int
    bursts: int
    multi_segment: int
    pmd_timestamps: int
    lcore: int
    port: int
    mbufs: int
    rx_desc: int
    rss: bool
    driver: str


@dataclass(frozen=True)
class BypassStats:
    """Counters of one or more readers of one bypass capture, in the shape of `live.LiveStats`
    where capture_file looks (kernel_packets, frames, drops_declared) plus per-queue detail.

    kernel_packets: frames sent towards us, counted independently of our own handing out: AF_XDP,
    our XDP program's per-queue counter; DPDK, the PMD's rx packets plus the port's declared
    drops. kernel_drops: the drops the kernel or PMD reported (XSK rx_dropped + rx_ring_full;
    rte_eth_stats imissed + rx_nombuf + ierrors). At the end, frames + drops_declared ==
    kernel_packets unless the run stopped at --frames.
    """

    kind: str  # "xdp" or "dpdk"
    queues: tuple = field(default_factory=tuple)
    rx_queues: int = 0  # xdp: RX queues the interface has (0: unknown)
    source: str = ""

    @property
    def frames(self) -> int:
        return sum(q.frames for q in self.queues)

    @property
    def gaps(self) -> int:
        return sum(q.gaps for q in self.queues)

    @property
    def drops_declared(self) -> int:
        return sum(q.drops_declared for q in self.queues)

    @property
    def kernel_drops(self) -> int:
        if self.kind == "xdp":
            return sum(q.rx_dropped + q.rx_ring_full for q in self.queues)
        return sum(q.imissed + q.rx_nombuf + q.ierrors for q in self.queues)

    @property
    def kernel_packets(self) -> int:
        if self.kind == "xdp":
            return sum(q.xdp_packets for q in self.queues)
        return sum(q.rx_packets for q in self.queues) + self.kernel_drops

    @property
    def zero_copy(self) -> bool:
        return all(q.zero_copy for q in self.queues) if self.kind == "xdp" else True

    @classmethod
    def combine(cls, stats: list[BypassStats]) -> BypassStats:
        """The counters of several workers' readers together (capture_file, --workers N)."""
        return cls(
            stats[0].kind,
            tuple(q for s in stats for q in s.queues),
            stats[0].rx_queues,
            stats[0].source,
        )

    @property
    def notes(self) -> list[str]:
        """Warnings for the capture report: AF_XDP sees only the queues it has sockets on."""
        if self.kind != "xdp" or self.rx_queues <= len(self.queues):
            return []
        qs = sorted(q.queue for q in self.queues)
        return [
            f"{self.source}: sockets on {len(qs)} of the interface's {self.rx_queues} RX queues "
            f"({','.join(map(str, qs))}): frames the NIC puts on the others go to the kernel "
            "stack, unseen and uncounted; use --workers to cover every queue, or steer the traffic "
            "(ethtool -L/-X/-N)"
        ]

    def drop_advice(self, source: str, drops: int) -> str:
        """The capture report's warning when drops were declared."""
        if self.kind == "xdp":
            full = sum(q.rx_ring_full for q in self.queues)
            empty = sum(q.rx_fill_ring_empty_descs for q in self.queues)
            return (
                f"{plural(drops, 'frame')} DROPPED by the AF_XDP "
                f"socket{'s' if len(self.queues) > 1 else ''} on {source} (declared as GAP records "
                f"in the ledger; RX ring full {plural(full, 'time')}, fill ring empty "
                f"{plural(empty, 'time')}): raise --ring-mb (UMEM), add --workers/queues, or lower "
                "the load (docs/capture.md)"
            )
        q0 = self.queues[0]
        return (
            f"{plural(drops, 'frame')} DROPPED on {source} (declared as GAP records in the ledger; "
            f"imissed {sum(q.imissed for q in self.queues)}, rx_nombuf "
            f"{sum(q.rx_nombuf for q in self.queues)}, ierrors "
            f"{sum(q.ierrors for q in self.queues)}; driver {q0.driver}): raise --rx-desc, add "
            "--workers (RX queues), or lower the load (docs/capture.md)"
        )

    def to_json(self) -> dict:
        detail: dict = {"queues": [dataclasses.asdict(q) for q in self.queues]}
        if self.kind == "xdp":
            detail = {
                "mode": "zero-copy" if self.zero_copy else "copy",
                "attach": "native" if all(q.native for q in self.queues) else "skb",
                **detail,
            }
        else:
            q0 = self.queues[0]
            detail = {"driver": q0.driver, "port": q0.port, "rss": q0.rss, **detail}
        return {
            "kernel_packets": self.kernel_packets,
            "kernel_drops": self.kernel_drops,
            "frames": self.frames,
            "gaps": self.gaps,
            "drops_declared": self.drops_declared,
            self.kind: detail,
        }


# ---- readers ----------------------------------------------------------------------------------


class _BypassReader:
    """A source of an optional module wrapped in a _native lt_reader."""

    kind = ""

    def __init__(self, source: str, mod, src, ops, label: str):
        self._r = None
        self.path = source
        self._mod = mod
        self._src = src
        self.label = label
        out = ffi.new("lt_reader **")
        layout = getattr(mod.lib, f"lt_{self.kind}_layout")()
        st = lib.lt_reader_open_source(
            ffi.cast("void *", _addr(mod.ffi, ops)),
            ffi.cast("void *", _addr(mod.ffi, src)),
            lib.LT_FMT_LIVE,
            layout,
            out,
        )
        if st != lib.LT_OK:
            getattr(mod.lib, f"lt_{self.kind}_discard")(src)
            self._src = None
            raise plugin_error(st, source, self.kind)
        self._r = out[0]
        self.stopping = False

    @property
    def handle(self):
        return self._r

    def request_stop(self, drain: bool = True) -> None:
        """End the capture: with `drain`, frames already received are still handed out."""
        if self._r is not None and not self.stopping:
            getattr(self._mod.lib, f"lt_{self.kind}_request_stop")(self._src, int(drain))
            self.stopping = True

    def info(self) -> ReaderInfo:
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        return ReaderInfo(
            path=self.path,
            format=self.label,
            version="",
            snaplen=i.snaplen,
            linktype=1,
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
        raise live_read_error(status, c_string(i.message), self.path, self.path)

    def close(self) -> None:
        if getattr(self, "_r", None) is not None:
            lib.lt_reader_close(self._r)  # frees the source too (its ops->close)
            self._r = None
            self._src = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - safety net
        self.close()


def _raise_open_error(source: str, mod, st: int, err) -> None:
    raise interface_error(st, mod.ffi.string(err).decode(errors="replace"), source)


class XdpReader(_BypassReader):
    """One AF_XDP socket on one RX queue (native/bypass/source_xdp.c)."""

    kind = "xdp"
    rx_queues = 0  # of the interface, set by open_xdp

    def stats(self) -> BypassStats:
        s = self._mod.ffi.new("lt_xdp_stats *")
        self._mod.lib.lt_xdp_get_stats(self._src, s)
        q = XdpQueueStats(
            **{
                f.name: (bool(getattr(s, f.name)) if f.type == "bool" else int(getattr(s, f.name)))
                for f in dataclasses.fields(XdpQueueStats)
            }
        )
        return BypassStats("xdp", (q,), self.rx_queues, self.path)


class DpdkReader(_BypassReader):
    """One DPDK RX queue (native/bypass/source_dpdk.c)."""

    kind = "dpdk"

    def stats(self) -> BypassStats:
        s = self._mod.ffi.new("lt_dpdk_stats *")
        self._mod.lib.lt_dpdk_get_stats(self._src, s)
        vals = {}
        for f in dataclasses.fields(DpdkQueueStats):
            v = getattr(s, f.name)
            vals[f.name] = (
                self._mod.ffi.string(v).decode(errors="replace")
                if f.type == "str"
                else bool(v)
                if f.type == "bool"
                else int(v)
            )
        return BypassStats("dpdk", (DpdkQueueStats(**vals),))


def parse_xdp(source: str) -> tuple[str, int]:
    """`xdp:IFACE[:QUEUE]` -> (IFACE, QUEUE)."""
    rest = source[len(XDP_PREFIX) :]
    name, sep, q = rest.partition(":")
    if not name or len(name) > 15 or "/" in name or any(c.isspace() for c in name):
        raise UsageError(
            f"source {source!r}: expected xdp:IFACE[:QUEUE] with an interface name of 1-15 "
            "characters"
        )
    if sep and not (q.isdigit() and int(q) < 1 << 16):
        raise UsageError(f"source {source!r}: QUEUE must be a number (the first RX queue to bind)")
    return name, int(q) if sep else 0


def open_xdp(source: str, options=None, workers: int = 1) -> list[XdpReader]:
    """One AF_XDP socket per queue QUEUE .. QUEUE + workers - 1 of IFACE. Raises UsageError (no
    such interface, queue out of range) or InterfaceError (permissions, driver, not built)."""
    opts = BypassOptions.coerce(options)
    opts.check()
    ifname, first = parse_xdp(source)
    mod = optional_module(XDP, source)
    xf, xl = mod.ffi, mod.lib
    nq = xl.lt_xdp_rx_queues(ifname.encode())
    if nq > 0 and first + workers > nq:
        if workers > 1:
            raise UsageError(
                f"{source}: ",
                Setting("workers"),
                f" {workers} needs RX queues {first}.."
                f"{first + workers - 1}, but {ifname} has {nq} (0..{nq - 1})",
            )
        raise UsageError(
            f"{source}: queue {first} out of range ({ifname} has {nq} RX "
            f"queue{'s' if nq > 1 else ''}: 0..{nq - 1})"
        )
    name = xf.new("char[]", ifname.encode())
    readers: list[XdpReader] = []
    try:
        for i in range(workers):
            cfg = xf.new("lt_xdp_config *")
            cfg.ifname = name
            cfg.queue = first + i
            cfg.umem_kb = int(opts.ring_mb * 1024)
            cfg.frame_size = 0
            cfg.mode = {
                "auto": xl.LT_XDP_MODE_AUTO,
                "zero-copy": xl.LT_XDP_MODE_ZEROCOPY,
                "copy": xl.LT_XDP_MODE_COPY,
            }[opts.xdp_mode]
            cfg.attach = {
                "auto": xl.LT_XDP_ATTACH_AUTO,
                "native": xl.LT_XDP_ATTACH_NATIVE,
                "skb": xl.LT_XDP_ATTACH_SKB,
            }[opts.xdp_attach]
            cfg.poll_ms = opts.poll_ms
            cfg.pin_cpu = -1 if opts.pin_cpu is None else opts.pin_cpu
            src, ops, err = xf.new("void **"), xf.new("void **"), xf.new("char[512]")
            st = xl.lt_xdp_open(cfg, src, ops, err, 512)
            if st != lib.LT_OK:
                _raise_open_error(source, mod, st, err)
            r = XdpReader(source, mod, src[0], ops[0], "")
            r.rx_queues = max(nq, 0)
            s = r.stats().queues[0]
            r.label = (
                f"live (AF_XDP queue {s.queue}, {'zero-copy' if s.zero_copy else 'copy'} mode, "
                f"{'native' if s.native else 'skb'} XDP)"
            )
            readers.append(r)
    except BaseException:
        for r in readers:
            r.close()
        raise
    return readers


def eal_argv(eal: str, pin_cpu: int | None) -> list[str]:
    """argv for rte_eal_init from --eal: the user's arguments, plus (when they do not set them)
    `--in-memory` (`--no-shconf` with `--no-huge`, which EAL does not combine with --in-memory)
    so that captures in parallel do not share DPDK's runtime files, and `-l CPU` (the --pin CPU or
    the first CPU of this process) so that EAL starts no lcore threads of its own."""
    try:
        args = shlex.split(eal)
    except ValueError as e:
        raise UsageError(Setting("eal"), f": {e}") from None
    names = {a.split("=", 1)[0] for a in args}
    if not names & {"--in-memory", "--no-shconf", "--file-prefix", "--proc-type"}:
        args.append("--no-shconf" if "--no-huge" in names else "--in-memory")
    if not (
        names & {"--lcores"} or any(a[:2] in ("-l", "-c") and not a.startswith("--") for a in args)
    ):
        cpu = pin_cpu if pin_cpu is not None else min(os.sched_getaffinity(0))
        args += ["-l", str(cpu)]
    return ["ledgertool", *args]


def open_dpdk(source: str, options=None, workers: int = 1) -> list[DpdkReader]:
    """Initialise EAL with --eal, configure port PORT with `workers` RX queues (RSS when > 1 and
    the device hashes) and return one reader per queue. Raises UsageError (no such port, too many
    queues, bad --eal) or InterfaceError (EAL or device failure, not built)."""
    opts = BypassOptions.coerce(options)
    opts.check()
    port = source[len(DPDK_PREFIX) :]
    if not port or any(c.isspace() for c in port):
        raise UsageError(
            f"source {source!r}: expected dpdk:PORT (a port number or an ethdev name such as "
            "net_pcap0)"
        )
    argv = eal_argv(opts.eal, opts.pin_cpu)
    mod = optional_module(DPDK, source)
    df, dl = mod.ffi, mod.lib
    keep = [df.new("char[]", a.encode()) for a in argv]
    err = df.new("char[512]")
    st = dl.lt_dpdk_eal_init(
        len(keep), df.new("char *[]", keep), int("--log-level" in " ".join(argv)), err, 512
    )
    if st != lib.LT_OK:
        _raise_open_error(source, mod, st, err)
    cfg = df.new("lt_dpdk_port_config *")
    cport = df.new("char[]", port.encode())
    cfg.port = cport
    cfg.queues = workers
    cfg.mbufs = 0
    cfg.rx_desc = opts.rx_desc
    cfg.promisc = int(opts.promisc)
    handle = df.new("void **")
    st = dl.lt_dpdk_port_open(cfg, handle, err, 512)
    if st != lib.LT_OK:
        _raise_open_error(source, mod, st, err)
    readers: list[DpdkReader] = []
    try:
        for q in range(workers):
            src, ops = df.new("void **"), df.new("void **")
            st = dl.lt_dpdk_open(
                handle[0],
                q,
                opts.poll_ms,
                -1 if opts.pin_cpu is None else opts.pin_cpu,
                src,
                ops,
                err,
                512,
            )
            if st != lib.LT_OK:
                _raise_open_error(source, mod, st, err)
            r = DpdkReader(source, mod, src[0], ops[0], "")
            s = r.stats().queues[0]
            r.label = f"live (DPDK port {s.port} queue {q}, {s.driver}{', RSS' if s.rss else ''})"
            readers.append(r)
    except BaseException:
        for r in readers:
            r.close()
        raise
    finally:
        dl.lt_dpdk_port_release(handle[0])  # the readers hold the port from here on
    return readers


def open_bypass(source: str, options=None, workers: int = 1) -> list:
    """The readers of an `xdp:` or `dpdk:` source, one per worker."""
    if workers < 1:
        raise UsageError(Setting("workers"), " must be at least 1")
    if source.startswith(XDP_PREFIX):
        return open_xdp(source, options, workers)
    return open_dpdk(source, options, workers)
