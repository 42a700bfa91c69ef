"""Deterministic workloads: TOML spec -> validated flows -> header templates -> native generator.

The spec format is described in docs/workloads.md and by schemas/workload.schema.json; this module
checks a spec against the same rules (without a run-time jsonschema dependency; tests check that
the two agree) and reports the first problem as one line naming the file and the key, e.g.
``spec.toml: flows[1].vlan: 5000 is above the maximum 4094``.

Python builds one header template per flow (Ethernet .. L4 header, plus BTH/RETH/AETH for RoCEv2)
once; native/src/workload_gen.c fills in everything per frame (sizes, lengths, checksums, ICRC,
payload, timestamps). `ledgertool.source.open_source` is what `capture` and `recompute` call:
``workload:SPEC.toml`` opens the generator, anything else a capture file.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import struct
import time
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import fsio
from .._binding import c_string, ffi, lib, pcap_write_error, workload_error
from ..algorithms import get_algorithm
from ..digest.engine import DigestEngine
from ..errors import (
    FileTypeError,
    LedgerFormatError,
    Setting,
    StorageError,
    UsageError,
    WorkloadSpecError,
)
from ..plan import SIMPLE_IMIX
from .file import CaptureReader

WORKLOAD_PREFIX = "workload:"
MAX_SPEC_BYTES = 1 << 20  # a spec is a few flows of TOML
DEFAULT_START_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
DEFAULT_INTERFRAME_PS = 1_000_000  # 1 µs
ROCEV2_PORT = 4791
MAX_FRAME = lib.LT_WL_MAX_FRAME  # captured bytes (FCS excluded)
FCS = 4
MIN_CAPTURED = 60  # 64-byte minimum frame without its FCS

KIND = {"udp": lib.LT_WL_UDP, "tcp": lib.LT_WL_TCP, "rocev2": lib.LT_WL_ROCEV2}

#: RC opcodes (IBTA vol. 1, 9.2 "Base transport header", table 37): value and extension header.
OPCODES: dict[str, tuple[int, str | None]] = {
    "SEND_FIRST": (0x00, None),
    "SEND_MIDDLE": (0x01, None),
    "SEND_LAST": (0x02, None),
    "SEND_ONLY": (0x04, None),
    "RDMA_WRITE_FIRST": (0x06, "reth"),
    "RDMA_WRITE_MIDDLE": (0x07, None),
    "RDMA_WRITE_LAST": (0x08, None),
    "RDMA_WRITE_ONLY": (0x0A, "reth"),
    "ACKNOWLEDGE": (0x11, "aeth"),
}
#: Opcodes that ask for an acknowledgement (BTH A bit): the last packet of a message.
ACKREQ = {"SEND_LAST", "SEND_ONLY", "RDMA_WRITE_LAST", "RDMA_WRITE_ONLY"}

U16, U24, U32, U64 = (1 << 16) - 1, (1 << 24) - 1, (1 << 32) - 1, (1 << 64) - 1

# ---- validation (mirrors schemas/workload.schema.json) ---------------------------------------

_TOP = {
    "version": ("int", 1, 1),
    "name": ("str",),
    "description": ("str",),
    "seed": ("int", 0, U64),
    "start_ns": ("int", 0, (1 << 63) - 1),
    "interframe_ns": ("int", 0, 10**12),
    "interframe_ps": ("int", 0, 10**15),
    "flows": ("flows",),
}
_FLOW = {
    "name": ("str",),
    "src_mac": ("mac",),
    "dst_mac": ("mac",),
    "vlan": ("int", 1, 4094),
    "vlan_pcp": ("int", 0, 7),
    "outer_vlan": ("int", 1, 4094),
    "src_ip": ("str",),
    "dst_ip": ("str",),
    "ttl": ("int", 1, 255),
    "dscp": ("int", 0, 63),
    "ip_id": ("int", 0, U16),
    "protocol": ("enum", ("udp", "tcp", "rocev2")),
    "src_port": ("int", 0, U16),
    "dst_port": ("int", 0, U16),
    "tcp_seq": ("int", 0, U32),
    "tcp_ack": ("int", 0, U32),
    "opcode": ("enum", tuple(OPCODES)),
    "dest_qp": ("int", 0, U24),
    "psn": ("int", 0, U24),
    "pkey": ("int", 0, U16),
    "va": ("int", 0, U64),
    "rkey": ("int", 0, U32),
    "dma_length": ("int", 0, U32),
    "frames": ("int", 1, 10**12),
    "size": ("dist", 64, MAX_FRAME + FCS),
    "payload": ("dist", 0, 16000),
}
_FLOW_REQUIRED = ("name", "src_mac", "dst_mac", "src_ip", "dst_ip", "protocol", "frames")


class _Bad(Exception):
    def __init__(self, key: str, msg: str):
        super().__init__(f"{key}: {msg}")
        self.key = key


def _check_int(key: str, v, lo: int, hi: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(key, f"expected an integer, got {_show(v)}")
    if v < lo:
        raise _Bad(key, f"{v} is below the minimum {lo}")
    if v > hi:
        raise _Bad(key, f"{v} is above the maximum {hi}")


def _show(v) -> str:
    return f"{type(v).__name__} {v!r}" if not isinstance(v, (dict, list)) else type(v).__name__


def _check_value(key: str, v, rule: tuple) -> None:
    kind = rule[0]
    if kind == "int":
        _check_int(key, v, rule[1], rule[2])
    elif kind == "str":
        if not isinstance(v, str) or not v:
            raise _Bad(key, f"expected a non-empty string, got {_show(v)}")
    elif kind == "mac":
        parts = v.split(":") if isinstance(v, str) else []
        if len(parts) != 6 or not all(
            len(p) == 2 and all(c in "0123456789abcdefABCDEF" for c in p) for p in parts
        ):
            raise _Bad(key, f"expected a MAC address like 02:00:5e:00:00:01, got {_show(v)}")
    elif kind == "enum":
        if v not in rule[1]:
            raise _Bad(key, f"{_show(v)} is not one of {', '.join(rule[1])}")
    elif kind == "dist":
        lo, hi = rule[1], rule[2]
        if key.endswith(".size") and v == "imix":
            return
        if isinstance(v, list):
            if not 1 <= len(v) <= 1024:
                raise _Bad(key, "expected 1 to 1024 [value, weight] pairs")
            for i, pair in enumerate(v):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise _Bad(f"{key}[{i}]", f"expected a [value, weight] pair, got {_show(pair)}")
                _check_int(f"{key}[{i}][0]", pair[0], lo, hi)
                _check_int(f"{key}[{i}][1]", pair[1], 1, 1_000_000)
        else:
            alt = ' or "imix"' if key.endswith(".size") else ""
            if isinstance(v, int) and not isinstance(v, bool):
                _check_int(key, v, lo, hi)
            else:
                raise _Bad(
                    key, f"expected an integer{alt} or a list of [value, weight], got {_show(v)}"
                )


def _validate(doc: dict) -> None:
    for k, v in doc.items():
        if k not in _TOP:
            raise _Bad(k, "unknown key (see docs/workloads.md)")
        if k != "flows":
            _check_value(k, v, _TOP[k])
    for k in ("version", "seed", "flows"):
        if k not in doc:
            raise _Bad(k, "required key is missing")
    if "interframe_ns" in doc and "interframe_ps" in doc:
        raise _Bad("interframe_ps", "give interframe_ns or interframe_ps, not both")
    flows = doc["flows"]
    if not isinstance(flows, list) or not flows:
        raise _Bad("flows", "expected at least one [[flows]] table")
    if len(flows) > 65536:
        raise _Bad("flows", f"{len(flows)} flows; at most 65536")
    for i, f in enumerate(flows):
        p = f"flows[{i}]"
        if not isinstance(f, dict):
            raise _Bad(p, "expected a table")
        for k, v in f.items():
            if k not in _FLOW:
                raise _Bad(f"{p}.{k}", "unknown key (see docs/workloads.md)")
            _check_value(f"{p}.{k}", v, _FLOW[k])
        for k in _FLOW_REQUIRED:
            if k not in f:
                raise _Bad(f"{p}.{k}", "required key is missing")
        if ("size" in f) == ("payload" in f):
            raise _Bad(
                f"{p}.size", "give exactly one of size (frame bytes) or payload (payload bytes)"
            )


# ---- the parsed spec -----------------------------------------------------------------------


@dataclass(frozen=True)
class SizeEntry:
    frame_len: int  # captured bytes (FCS excluded)
    payload_len: int  # seed-derived bytes after the header template
    pad: int  # RoCEv2 pad bytes (zeros) after the payload
    weight: int


@dataclass(frozen=True)
class Flow:
    index: int
    name: str
    protocol: str
    src_mac: str
    dst_mac: str
    vlan: int | None
    outer_vlan: int | None
    src_ip: str
    dst_ip: str
    ip_version: int
    src_port: int
    dst_port: int
    frames: int
    sizes: tuple[SizeEntry, ...]
    header: bytes  # template: Ethernet .. L4 header (.. BTH + RETH/AETH)
    l3_offset: int
    l4_offset: int
    dmalen_offset: int  # 0: none
    opcode: str | None = None
    dest_qp: int | None = None
    psn: int | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    path: str
    name: str
    seed: int
    start_ns: int
    interframe_ps: int
    flows: tuple[Flow, ...]

    @property
    def total_frames(self) -> int:
        return sum(f.frames for f in self.flows)


def _mac(text: str) -> bytes:
    return bytes(int(x, 16) for x in text.split(":"))


def _flow_endpoints(p: str, f: dict):
    """The flow's addresses and ports, its protocol's keys checked (_Bad naming the key)."""
    proto = f["protocol"]
    try:
        src = ipaddress.ip_address(f["src_ip"])
    except ValueError:
        raise _Bad(f"{p}.src_ip", f"{f['src_ip']!r} is not an IPv4 or IPv6 address") from None
    try:
        dst = ipaddress.ip_address(f["dst_ip"])
    except ValueError:
        raise _Bad(f"{p}.dst_ip", f"{f['dst_ip']!r} is not an IPv4 or IPv6 address") from None
    if src.version != dst.version:
        raise _Bad(f"{p}.dst_ip", f"IPv{dst.version} address but src_ip is IPv{src.version}")
    if "outer_vlan" in f and "vlan" not in f:
        raise _Bad(f"{p}.outer_vlan", "QinQ needs the inner tag `vlan` too")
    roce_keys = ("opcode", "dest_qp", "psn", "pkey", "va", "rkey", "dma_length")
    if proto != "rocev2":
        for k in roce_keys:
            if k in f:
                raise _Bad(f"{p}.{k}", f"only for protocol rocev2, not {proto}")
    if proto != "tcp":
        for k in ("tcp_seq", "tcp_ack"):
            if k in f:
                raise _Bad(f"{p}.{k}", f"only for protocol tcp, not {proto}")
    sport = f.get("src_port", 49152)
    dport = f.get("dst_port", ROCEV2_PORT if proto == "rocev2" else 9)
    if proto == "rocev2":
        if dport != ROCEV2_PORT:
            raise _Bad(f"{p}.dst_port", f"RoCEv2 uses UDP port {ROCEV2_PORT}, not {dport}")
        if "opcode" not in f:
            raise _Bad(f"{p}.opcode", "required for protocol rocev2")
    return src, dst, sport, dport


def _flow_header(f: dict, proto: str, src, dst, sport: int, dport: int):
    """The flow's frame header bytes (Ethernet, IP, TCP/UDP, RoCEv2 BTH and its extension) and
    the offsets of its L3 and L4 headers and of the RETH DMA length (0: none)."""
    # Ethernet (+ 802.1ad S-tag, + 802.1Q C-tag)
    hdr = bytearray(_mac(f["dst_mac"]) + _mac(f["src_mac"]))
    if "outer_vlan" in f:
        hdr += struct.pack("!HH", 0x88A8, f["outer_vlan"])
    if "vlan" in f:
        hdr += struct.pack("!HH", 0x8100, (f.get("vlan_pcp", 0) << 13) | f["vlan"])
    hdr += struct.pack("!H", 0x0800 if src.version == 4 else 0x86DD)
    l3 = len(hdr)
    nh = 6 if proto == "tcp" else 17
    ttl, tos = f.get("ttl", 64), f.get("dscp", 0) << 2
    if src.version == 4:
        hdr += struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            tos,
            0,
            f.get("ip_id", 0),
            0x4000,
            ttl,
            nh,
            0,
            src.packed,
            dst.packed,
        )
    else:
        hdr += struct.pack(
            "!IHBB16s16s", (6 << 28) | (tos << 20), 0, nh, ttl, src.packed, dst.packed
        )
    l4 = len(hdr)
    dmalen = 0
    if proto == "tcp":
        hdr += struct.pack(
            "!HHIIBBHHH",
            sport,
            dport,
            f.get("tcp_seq", 0),
            f.get("tcp_ack", 0),
            5 << 4,
            0x18,
            65535,
            0,
            0,
        )
    else:
        hdr += struct.pack("!HHHH", sport, dport, 0, 0)
    opcode = f.get("opcode")
    if proto == "rocev2":
        code, ext = OPCODES[opcode]
        psn = f.get("psn", 0)
        ackreq = 0x80 if opcode in ACKREQ else 0
        # BTH: opcode | SE M PadCnt TVer | P_Key | resv8a | DestQP | A resv7 | PSN
        hdr += struct.pack("!BBHI", code, 0x40, f.get("pkey", 0xFFFF), f.get("dest_qp", 0))
        hdr += struct.pack("!I", (ackreq << 24) | psn)
        if ext == "reth":
            hdr += struct.pack("!QI", f.get("va", 0), f.get("rkey", 0))
            if opcode == "RDMA_WRITE_ONLY":
                dmalen = len(hdr)
            hdr += struct.pack("!I", f.get("dma_length", 0))
        elif ext == "aeth":
            hdr += struct.pack("!I", 0x1F << 24)  # ACK syndrome, no credit count; MSN 0
    return hdr, l3, l4, dmalen


def _flow_sizes(p: str, f: dict, proto: str, H: int, trailer: int) -> list[SizeEntry]:
    """The flow's frame sizes (`size`, or `payload`) with their weights, each checked against
    the flow's headers (_Bad naming the entry)."""
    sizes: list[SizeEntry] = []
    if "size" in f:
        raw = f["size"]
        pairs = (
            list(SIMPLE_IMIX) if raw == "imix" else ([(raw, 1)] if isinstance(raw, int) else raw)
        )
        for j, (s, w) in enumerate(pairs):
            key = f"{p}.size" if isinstance(raw, (int, str)) else f"{p}.size[{j}][0]"
            plen = s - FCS - H - trailer
            if plen < 0:
                raise _Bad(
                    key,
                    f"a {s}-byte frame cannot hold this flow's {H + trailer + FCS} bytes of "
                    "headers",
                )
            if proto == "rocev2" and plen % 4:
                raise _Bad(
                    key,
                    f"a {s}-byte RoCEv2 frame leaves {plen} payload bytes, not a multiple of 4; "
                    "use payload = ... instead (pads to 4)",
                )
            sizes.append(SizeEntry(s - FCS, plen, 0, w))
    else:
        raw = f["payload"]
        pairs = [(raw, 1)] if isinstance(raw, int) else raw
        for j, (plen, w) in enumerate(pairs):
            key = f"{p}.payload" if isinstance(raw, int) else f"{p}.payload[{j}][0]"
            pad = (-plen) % 4 if proto == "rocev2" else 0
            flen = max(MIN_CAPTURED, H + plen + pad + trailer)
            if flen > MAX_FRAME:
                raise _Bad(
                    key,
                    f"{plen} payload bytes make a {flen + FCS}-byte frame; at most "
                    f"{MAX_FRAME + FCS}",
                )
            sizes.append(SizeEntry(flen, plen, pad, w))
    return sizes


def _build_flow(i: int, f: dict) -> Flow:
    p = f"flows[{i}]"
    proto = f["protocol"]
    src, dst, sport, dport = _flow_endpoints(p, f)
    hdr, l3, l4, dmalen = _flow_header(f, proto, src, dst, sport, dport)
    opcode = f.get("opcode")
    H = len(hdr)
    trailer = 4 if proto == "rocev2" else 0  # ICRC

    sizes = _flow_sizes(p, f, proto, H, trailer)
    return Flow(
        index=i,
        name=f["name"],
        protocol=proto,
        src_mac=f["src_mac"].lower(),
        dst_mac=f["dst_mac"].lower(),
        vlan=f.get("vlan"),
        outer_vlan=f.get("outer_vlan"),
        src_ip=str(src),
        dst_ip=str(dst),
        ip_version=src.version,
        src_port=sport,
        dst_port=dport,
        frames=f["frames"],
        sizes=tuple(sizes),
        header=bytes(hdr),
        l3_offset=l3,
        l4_offset=l4,
        dmalen_offset=dmalen,
        opcode=opcode,
        dest_qp=f.get("dest_qp", 0) if proto == "rocev2" else None,
        psn=f.get("psn", 0) if proto == "rocev2" else None,
    )


def parse_spec(doc: dict, path: str = "<spec>") -> WorkloadSpec:
    """A validated WorkloadSpec from a parsed TOML document; WorkloadSpecError names path and
    key."""
    try:
        _validate(doc)
        flows = tuple(_build_flow(i, f) for i, f in enumerate(doc["flows"]))
    except _Bad as e:
        raise WorkloadSpecError(f"{path}: {e}", path, e.key) from None
    ifg = (
        doc["interframe_ps"]
        if "interframe_ps" in doc
        else doc.get("interframe_ns", DEFAULT_INTERFRAME_PS // 1000) * 1000
    )
    return WorkloadSpec(
        path=path,
        name=doc.get("name", Path(path).stem),
        seed=doc["seed"],
        start_ns=doc.get("start_ns", DEFAULT_START_NS),
        interframe_ps=ifg,
        flows=flows,
    )


def load_spec(path: str | os.PathLike) -> WorkloadSpec:
    """Read and validate a TOML workload spec (docs/workloads.md)."""
    path = os.fspath(path)
    return parse_spec(_read_spec_toml(path), path)


def _read_spec_toml(path: str) -> dict:
    """The TOML document of a spec file (a regular file: a FIFO or device is refused, never
    read)."""
    try:
        raw = fsio.read_regular(path, MAX_SPEC_BYTES, follow=True, what="workload spec")
        return tomllib.loads(raw.decode("utf-8"))
    except (StorageError, FileTypeError, LedgerFormatError) as e:
        raise WorkloadSpecError(str(e), path) from None
    except UnicodeDecodeError as e:
        raise WorkloadSpecError(
            f"{path}: not valid TOML: not UTF-8 at byte {e.start}", path
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise WorkloadSpecError(f"{path}: not valid TOML: {e}", path) from None


# ---- native generator ------------------------------------------------------------------------


def open_workload(spec: WorkloadSpec | str | os.PathLike) -> CaptureReader:
    """A CaptureReader whose frames come from the native generator (format "workload")."""
    if not isinstance(spec, WorkloadSpec):
        spec = load_spec(spec)
    keep = []  # cffi buffers must live until the call returns (C copies them)
    cflows = ffi.new("lt_workload_flow[]", len(spec.flows))
    for c, f in zip(cflows, spec.flows):
        hdr = ffi.new("uint8_t[]", f.header)
        sizes = ffi.new("lt_workload_size[]", len(f.sizes))
        for cs, s in zip(sizes, f.sizes):
            cs.frame_len, cs.payload_len, cs.pad, cs.weight = (
                s.frame_len,
                s.payload_len,
                s.pad,
                s.weight,
            )
        keep += [hdr, sizes]
        c.header, c.header_len, c.kind = hdr, len(f.header), KIND[f.protocol]
        c.l3_offset, c.l4_offset, c.dmalen_offset = f.l3_offset, f.l4_offset, f.dmalen_offset
        c.frames, c.sizes, c.nsizes = f.frames, sizes, len(f.sizes)
    cs = ffi.new("lt_workload_spec *")
    cs.seed, cs.start_ns, cs.interframe_ps = spec.seed, spec.start_ns, spec.interframe_ps
    cs.flows, cs.nflows = cflows, len(spec.flows)
    err = ffi.new("char[512]")
    out = ffi.new("lt_reader **")
    st = lib.lt_reader_open_workload(cs, out, err, 512)
    if st != lib.LT_OK:
        raise workload_error(c_string(err), spec.path)
    return CaptureReader.from_handle(out[0], f"{WORKLOAD_PREFIX}{spec.path}")


@dataclass
class GenerateResult:
    """Summary of `workload generate` (JSON: schemas/workload-generate-report.schema.json)."""

    spec: str
    out: str
    frames: int = 0
    bytes: int = 0  # file size
    elapsed_s: float = 0.0
    flows: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "ok": True,
            "spec": self.spec,
            "out": self.out,
            "frames": self.frames,
            "bytes": self.bytes,
            "elapsed_s": round(self.elapsed_s, 6),
            "flows": self.flows,
        }


def write_pcap(reader: CaptureReader, out: str | os.PathLike) -> int:
    """Write every remaining frame of `reader` to `out` as a nanosecond pcap (native fast path).

    A regular file is written in a private temporary directory next to it and renamed into place
    (fsio.atomic_path), so a failed write never destroys what `out` held and a link planted at a
    temporary name is never written through; a device or pipe (e.g. /dev/null) is written
    directly. CaptureFormatError / StorageError naming `out`."""
    out = os.fspath(out)
    if os.path.exists(out) and not os.path.isfile(out):
        return _write_pcap_to(reader, out, out)
    with fsio.atomic_path(out, what="pcap file") as target:
        return _write_pcap_to(reader, str(target), out)


def _write_pcap_to(reader: CaptureReader, target: str, out: str) -> int:
    err = ffi.new("char[512]")
    n = ffi.new("uint64_t *")
    st = lib.lt_reader_write_pcap(reader.handle, target.encode(), n, err, 512)
    if st != lib.LT_OK:
        raise pcap_write_error(c_string(err).replace(target, out), out, reader.path)
    return int(n[0])


def estimated_pcap_bytes(spec: WorkloadSpec) -> int:
    """Expected size of the generated pcap: header + per frame (16-byte record header + mean
    size)."""
    total = 24
    for f in spec.flows:
        weight = sum(s.weight for s in f.sizes) or 1
        mean = sum(s.frame_len * s.weight for s in f.sizes) / weight
        total += int(f.frames * (16 + mean))
    return total


def _check_room(spec: WorkloadSpec, out: Path) -> None:
    """Refuse a pcap that cannot fit on the target file system (a typo in `frames` can ask for
    TBs)."""
    if out.exists() and not out.is_file():
        return  # a device such as /dev/null
    need = estimated_pcap_bytes(spec)
    free = shutil.disk_usage(out.parent if str(out.parent) else ".").free
    if need > free:
        raise UsageError(
            f"{out}: the spec's {sum(f.frames for f in spec.flows):,} frames need about "
            f"{need / 1e9:,.1f} GB, only {free / 1e9:,.1f} GB are free there"
        )


def generate_pcap(
    spec_path: str | os.PathLike, out: str | os.PathLike, *, force: bool = False
) -> GenerateResult:
    """`ledgertool workload generate`: every frame of the spec into a nanosecond pcap."""
    spec = load_spec(spec_path)
    out = Path(out)
    if out.exists() and not force:
        raise UsageError(f"{out}: exists; refusing to overwrite (use ", Setting("force"), ")")
    _check_room(spec, out)
    t0 = time.perf_counter()
    with open_workload(spec) as reader:
        frames = write_pcap(reader, out)
    size = out.stat().st_size if out.is_file() else 0
    res = GenerateResult(spec.path, str(out), frames, size, time.perf_counter() - t0)
    res.flows = [{"name": f.name, "protocol": f.protocol, "frames": f.frames} for f in spec.flows]
    return res


@dataclass
class BenchResult:
    spec: str
    frames: int
    bytes: int
    generate_s: float
    digest_s: float | None = None

    def to_json(self) -> dict:
        doc = {
            "spec": self.spec,
            "frames": self.frames,
            "bytes": self.bytes,
            "generate_s": round(self.generate_s, 6),
            "generate_frames_per_s": round(self.frames / self.generate_s, 1),
            "generate_gbit_per_s": round(self.bytes * 8 / self.generate_s / 1e9, 3),
        }
        if self.digest_s is not None:
            doc.update(
                {
                    "generate_and_digest_s": round(self.digest_s, 6),
                    "generate_and_digest_frames_per_s": round(self.frames / self.digest_s, 1),
                }
            )
        return doc


def bench_generator(
    spec_path: str | os.PathLike, frames: int | None = None, size: int | None = None
) -> BenchResult:
    """Time the generator alone (drained in batches of 1024 frames, nothing written), then the
    generator feeding the digest engine (siphash-1-3-128, strip frame) for comparison; the byte
    count comes from the second run. `frames` scales every flow so the total is about that many;
    `size` replaces every flow's size distribution with that one frame size (FCS included)."""
    spec = load_spec(spec_path)
    if size is not None:
        doc = _read_spec_toml(spec.path)
        for f in doc["flows"]:
            f.pop("payload", None)
            f["size"] = size
        spec = parse_spec(doc, spec.path)
    if frames:
        scale = frames / spec.total_frames
        spec = WorkloadSpec(
            spec.path,
            spec.name,
            spec.seed,
            spec.start_ns,
            spec.interframe_ps,
            tuple(_scaled(f, scale) for f in spec.flows),
        )
    batch = 1024
    buf = ffi.new("lt_frame[]", batch)
    n = ffi.new("size_t *")
    total = 0
    with open_workload(spec) as reader:
        t0 = time.perf_counter()
        while lib.lt_reader_next(reader.handle, buf, batch, n) == lib.LT_OK:
            total += n[0]
        gen_s = time.perf_counter() - t0
    alg = get_algorithm("siphash-1-3-128")
    nbytes = seq = 0
    with open_workload(spec) as reader:
        eng = DigestEngine(reader, alg, 0, bytes(alg.key_size))
        t0 = time.perf_counter()
        while True:
            _, k, b = eng.fill(seq)
            if k == 0:
                break
            seq += k
            nbytes += b
        dig_s = time.perf_counter() - t0
    return BenchResult(spec.path, total, nbytes, gen_s, dig_s)


def _scaled(f: Flow, scale: float) -> Flow:
    return replace(f, frames=max(1, round(f.frames * scale)))
