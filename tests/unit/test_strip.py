"""Strip modes (docs/strip-modes.md): the native byte range against an oracle built on scapy's
dissection, property tests on hostile bytes, the corpus, and the whole ledger path.

The oracle never reuses the C logic: header boundaries come from where scapy's dissected layers
start (len(frame) - len(bytes(layer))), the packet end from scapy's IP length fields, and the
RoCE extended-header table from the opcode names scapy.contrib.roce gives.
"""

from __future__ import annotations

import collections
import json
import struct
from pathlib import Path

import pytest
import scapy.layers.all  # noqa: F401
from conftest import CORPUS, SAMPLES, cli, needs_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scapy.config import conf
from scapy.contrib.roce import BTH
from scapy.contrib.roce import opcode as roce_opcode
from scapy.layers.inet import (
    ICMP,
    IP,
    TCP,
    UDP,
    IPOption_NOP,
    IPOption_RR,
    IPOption_Timestamp,
)
from scapy.layers.inet6 import (
    ICMPv6EchoRequest,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    IPv6ExtHdrSegmentRouting,
    _MobilityHeader,
)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import (
    ARP,
    CookedLinux,
    CookedLinuxV2,
    Dot1AD,
    Dot1Q,
    Dot3,
    Ether,
    Loopback,
)
from scapy.packet import NoPayload, Padding, Raw

from ledgertool.algorithms import get_algorithm
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.record import RECORD_FIXED
from ledgertool.digest.strip import MODES, explain, strip_range
from ledgertool.source.file import CaptureReader

MALFORMED, NON_IP, FRAGMENT, UNSUPPORTED = 0x2, 0x4, 0x8, 0x10

# The documented limit on IPv6 extension headers (docs/strip-modes.md): more is a loop, MALFORMED.
MAX_EXT = 16

LINK_LAYERS = (Ether, Dot3, Dot1Q, Dot1AD, CookedLinux, CookedLinuxV2, Loopback)
IPV6_EXT = (
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    IPv6ExtHdrSegmentRouting,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    AH,
    _MobilityHeader,
)

# RoCE: extended transport headers by scapy's opcode name (IBTA Vol. 1 Table 38 names), written
# from the header list of each operation, not from the C table.
RETH, AETH, ATOMICETH, ATOMICACKETH, IMMDT, IETH, DETH = 16, 4, 28, 8, 4, 4, 8
ROCE_EXT_BY_NAME = {
    "SEND_FIRST": 0,
    "SEND_MIDDLE": 0,
    "SEND_LAST": 0,
    "SEND_ONLY": 0,
    "SEND_LAST_WITH_IMMEDIATE": IMMDT,
    "SEND_ONLY_WITH_IMMEDIATE": IMMDT,
    "RDMA_WRITE_FIRST": RETH,
    "RDMA_WRITE_MIDDLE": 0,
    "RDMA_WRITE_LAST": 0,
    "RDMA_WRITE_LAST_WITH_IMMEDIATE": IMMDT,
    "RDMA_WRITE_ONLY": RETH,
    "RDMA_WRITE_ONLY_WITH_IMMEDIATE": RETH + IMMDT,
    "RDMA_READ_REQUEST": RETH,
    "RDMA_READ_RESPONSE_FIRST": AETH,
    "RDMA_READ_RESPONSE_MIDDLE": 0,
    "RDMA_READ_RESPONSE_LAST": AETH,
    "RDMA_READ_RESPONSE_ONLY": AETH,
    "ACKNOWLEDGE": AETH,
    "ATOMIC_ACKNOWLEDGE": AETH + ATOMICACKETH,
    "COMPARE_SWAP": ATOMICETH,
    "FETCH_ADD": ATOMICETH,
    "SEND_LAST_WITH_INVALIDATE": IETH,
    "SEND_ONLY_WITH_INVALIDATE": IETH,
}
ROCE_OPS = {
    "RC": list(ROCE_EXT_BY_NAME),
    "UC": [
        n
        for n in ROCE_EXT_BY_NAME
        if n.startswith(("SEND_", "RDMA_WRITE")) and "INVALIDATE" not in n
    ],
    "UD": ["SEND_ONLY", "SEND_ONLY_WITH_IMMEDIATE"],
}


# scapy.contrib.roce names 0x00-0x14; the two "with Invalidate" codes are from IBTA Table 38.
_INVALIDATE = {"SEND_LAST_WITH_INVALIDATE": 0x16, "SEND_ONLY_WITH_INVALIDATE": 0x17}


def roce_code(transport: str, name: str) -> int:
    if name in _INVALIDATE:
        return _INVALIDATE[name]
    return roce_opcode(transport, name)[0]


def roce_ext(transport: str, name: str) -> int:
    return ROCE_EXT_BY_NAME[name] + (DETH if transport == "UD" else 0)


# ---------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------


class Expect:
    """What the oracle predicts: a range (start, end) and flags, or only flags (range=None)."""

    def __init__(self, rng, flags, why=""):
        self.range, self.flags, self.why = rng, flags, why

    def __repr__(self):
        return f"Expect({self.range}, {self.flags:#x}, {self.why!r})"


def _start(frame: bytes, layer) -> int:
    """Where a dissected layer starts: everything after it (incl. padding) is in its bytes."""
    if isinstance(layer, NoPayload):
        return len(frame)
    return len(frame) - len(bytes(layer))


def _layers(pkt):
    out, layer = [], pkt
    while not isinstance(layer, NoPayload):
        out.append(layer)
        if (
            isinstance(layer, (Ether, Dot1Q, Dot1AD))
            and layer.type == 0x9100
            and isinstance(layer.payload, Raw)
        ):
            # scapy binds 0x8100 and 0x88A8 only; 0x9100 (pre-standard QinQ) is one more
            # 802.1Q-style tag. Dissect it here rather than with bind_layers, which would change how
            # every other test builds Ether()/Dot1Q() frames.
            out.extend(_layers(Dot1Q(bytes(layer.payload))))
            break
        layer = layer.payload
    return out


def oracle(frame: bytes, linktype: int, mode: str, wire_len: int | None = None) -> Expect | None:
    """scapy's view of what `mode` hashes; None when scapy cannot tell."""
    if mode == "frame":
        return Expect((0, len(frame)), 0)
    cls = conf.l2types.get(linktype)
    if cls is None:
        return None
    try:
        pkt = cls(frame)
        if bytes(pkt) != frame:
            return None
    except Exception:
        return None
    cut = wire_len is not None and len(frame) < wire_len
    layers = _layers(pkt)
    i = 0
    while i < len(layers) and isinstance(layers[i], LINK_LAYERS):
        i += 1
    if i == len(layers):
        return None
    ip = layers[i]
    if i and isinstance(layers[i - 1], Loopback) and isinstance(ip, Raw):
        # scapy binds only some AF_INET6 values (24/28/30 by BSD flavour) to IPv6; the family says
        # it
        fam = layers[i - 1].type
        fam = fam if fam < 256 else int.from_bytes(fam.to_bytes(4, "big"), "little")
        if fam in (2, 24, 28, 30):
            ip = (IP if fam == 2 else IPv6)(bytes(ip))
            layers = layers[:i] + _layers(ip)
    if not isinstance(ip, (IP, IPv6)):
        if i == 0:  # raw link types: scapy found no IP
            return None
        if getattr(layers[i - 1], "type", getattr(layers[i - 1], "proto", None)) in (
            0x0800,
            0x86DD,
        ):
            return Expect(None, MALFORMED, "link layer says IP, scapy could not dissect it (cut)")
        return Expect((_start(frame, ip), len(frame)), NON_IP, "non-IP")
    l3 = _start(frame, ip)
    if ip.version != (4 if isinstance(ip, IP) else 6):
        return Expect(None, MALFORMED, "IP version does not match the link type")
    if isinstance(ip, IP):
        if ip.ihl < 5:
            return Expect(None, MALFORMED, "IHL < 5")
        end = len(frame) if ip.len == 0 else l3 + ip.len
        if ip.len and ip.len < ip.ihl * 4:
            return Expect(None, MALFORMED, "total length < IHL")
    else:
        end = len(frame) if ip.plen == 0 else l3 + 40 + ip.plen
    if end > len(frame) and not cut:
        return Expect(None, MALFORMED, "IP length past capture")
    stop = min(end, len(frame))
    if mode == "l3":
        return Expect((l3, stop), 0, "IP packet")

    flags = 0
    j = i + 1
    nonfirst = False
    if isinstance(ip, IP):
        if ip.flags.MF or ip.frag:
            flags |= FRAGMENT
        nonfirst = ip.frag > 0
    else:
        while j < len(layers) and isinstance(layers[j], IPV6_EXT):
            h = layers[j]
            if j - i > MAX_EXT:
                return Expect(None, MALFORMED, "too many extension headers")
            if isinstance(h, AH) and h.payloadlen < 1:
                return None  # scapy mis-sizes a zero-length AH; checked by hand in the corpus test
            j += 1
            if isinstance(h, IPv6ExtHdrFragment):
                if h.offset or h.m:
                    flags |= FRAGMENT
                if h.offset:
                    nonfirst = True
                    break
    upper = layers[j] if j < len(layers) else NoPayload()
    if isinstance(upper, Raw) and isinstance(layers[j - 1], AH) and layers[j - 1].nh in (6, 17):
        # scapy leaves AH's payload raw
        upper = (TCP if layers[j - 1].nh == 6 else UDP)(bytes(upper))
    ustart = _start(frame, upper)
    if ustart > stop:
        return Expect(None, MALFORMED, "headers past the packet")
    if nonfirst:
        return Expect((ustart, stop), flags, "non-first fragment")
    proto = ip.proto if isinstance(ip, IP) else None
    if isinstance(upper, TCP):
        if upper.dataofs < 5:
            return Expect(None, MALFORMED | flags, "TCP data offset < 5")
        if flags and ustart + upper.dataofs * 4 > stop:
            return Expect((ustart, stop), flags, "first fragment without the whole TCP header")
        pstart = _start(frame, upper.payload)
        if pstart > stop:
            return None if flags else Expect(None, MALFORMED, "TCP header past the packet")
        return Expect((pstart, stop), flags, "TCP payload")
    if isinstance(upper, UDP):
        ulen = upper.len
        if not flags and ulen and (ulen < 8 or ustart + ulen > end):
            return Expect(None, MALFORMED, "UDP length inconsistent")
        pstart = _start(frame, upper.payload)
        if mode == "rdma" and upper.dport == 4791 and not flags:
            bth = upper.payload
            if not isinstance(bth, BTH):
                return None
            name = _roce_name(bth.opcode)
            if name is None:
                return Expect(None, MALFORMED, "unknown RoCE opcode")
            transport, op = name
            pay = pstart + 12 + roce_ext(transport, op)
            icrc = end - 4
            return Expect((pay, min(icrc, stop)), 0, f"RoCE {transport} {op} payload")
        return Expect((pstart, stop), flags, "UDP payload")
    if (
        proto in (6, 17)
        or isinstance(upper, (Raw, Padding))
        and _upper_nh(ip, layers, j) in (6, 17)
    ):
        # scapy did not dissect the L4 header (cut): the C side says MALFORMED, checked elsewhere
        return None
    return Expect((ustart, stop), flags, f"after IP: {upper.name}")


def _upper_nh(ip, layers, j):
    prev = layers[j - 1]
    return getattr(prev, "nh", getattr(prev, "proto", None))


def _roce_name(code: int):
    for transport, names in ROCE_OPS.items():
        for n in names:
            if roce_code(transport, n) == code:
                return transport, n
    if code == 0x81:
        return ("CNP", "SEND_FIRST")  # BTH only; the 16 reserved bytes are the payload
    return None


def check(
    frame: bytes, linktype: int, mode: str, wire_len: int | None = None
) -> tuple[Expect, object]:
    exp = oracle(frame, linktype, mode, wire_len)
    got = strip_range(frame, linktype, mode, wire_len)
    assert got.end <= len(frame)
    if exp is None:
        return exp, got
    assert got.flags & exp.flags == exp.flags, (mode, exp, got)
    if exp.range is not None:
        assert (got.offset, got.end) == exp.range, (mode, exp, got)
        assert got.flags == exp.flags, (mode, exp, got)
    return exp, got


# ---------------------------------------------------------------------------------------------
# Crafted frames
# ---------------------------------------------------------------------------------------------

PAYLOAD = bytes(range(37))

CRAFTED = {
    "eth-ipv4-udp": Ether() / IP() / UDP(sport=1000, dport=2000) / PAYLOAD,
    "eth-ipv4-tcp-opts": Ether()
    / IP()
    / TCP(options=[("MSS", 1460), ("SAckOK", b""), ("WScale", 7), ("Timestamp", (1, 2))])
    / PAYLOAD,
    "eth-ipv4-options-tcp": Ether()
    / IP(options=[IPOption_RR(routers=["1.2.3.4", "5.6.7.8"]), IPOption_NOP()])
    / TCP()
    / PAYLOAD,
    "eth-ipv4-options-ts": Ether()
    / IP(options=[IPOption_Timestamp(flg=0, timestamp=[1, 2, 3])])
    / UDP()
    / PAYLOAD,
    "vlan": Ether() / Dot1Q(vlan=100, prio=3, dei=1) / IP() / TCP() / PAYLOAD,
    "qinq-88a8": Ether() / Dot1AD(vlan=10) / Dot1Q(vlan=200) / IP() / UDP() / PAYLOAD,
    "qinq-8100x2": Ether() / Dot1Q(vlan=10) / Dot1Q(vlan=200) / IPv6() / TCP() / PAYLOAD,
    "qinq-9100": Ether(type=0x9100) / Dot1Q(vlan=7) / IP() / UDP() / PAYLOAD,
    "padding-short": Ether() / IP() / UDP() / b"ab" / Padding(bytes(16)),
    "padding-tcp": Ether() / IP() / TCP() / Padding(b"\x00" * 6),
    "icmp": Ether() / IP() / ICMP(type=8) / PAYLOAD,
    "icmpv6": Ether() / IPv6() / ICMPv6EchoRequest(data=PAYLOAD),
    "arp": Ether() / ARP(),
    "ipv6-udp": Ether() / IPv6() / UDP() / PAYLOAD,
    "ipv6-hbh-dst-rh-tcp": Ether()
    / IPv6()
    / IPv6ExtHdrHopByHop()
    / IPv6ExtHdrDestOpt()
    / IPv6ExtHdrRouting(addresses=["2001:db8::1", "2001:db8::2"])
    / TCP()
    / PAYLOAD,
    "ipv6-srh-udp": Ether()
    / IPv6()
    / IPv6ExtHdrSegmentRouting(addresses=["2001:db8::9"])
    / UDP()
    / PAYLOAD,
    "ipv6-ah-udp": Ether()
    / IPv6()
    / AH(nh=17, payloadlen=4, spi=1, seq=1, icv=b"\x00" * 12)
    / UDP()
    / PAYLOAD,
    "ipv6-frag-first": Ether() / IPv6() / IPv6ExtHdrFragment(offset=0, m=1, id=5) / UDP() / PAYLOAD,
    "ipv6-frag-nonfirst": Ether()
    / IPv6()
    / IPv6ExtHdrFragment(offset=8, m=0, id=5, nh=17)
    / PAYLOAD,
    "ipv6-frag-atomic": Ether()
    / IPv6()
    / IPv6ExtHdrFragment(offset=0, m=0, id=5)
    / UDP()
    / PAYLOAD,
    "ipv4-frag-first": Ether() / IP(flags="MF", frag=0) / TCP() / PAYLOAD,
    "ipv4-frag-nonfirst": Ether() / IP(flags=0, frag=100, proto=6) / PAYLOAD,
    "ipv4-frag-middle": Ether() / IP(flags="MF", frag=3, proto=17) / PAYLOAD,
    "sll-ipv4": CookedLinux(proto=0x0800) / IP() / TCP() / PAYLOAD,
    "sll2-ipv6": CookedLinuxV2(proto=0x86DD) / IPv6() / UDP() / PAYLOAD,
    "null-ipv4": Loopback(type=2) / IP() / UDP() / PAYLOAD,
}
LINKTYPE = {"sll": 113, "sll2": 276, "null": 0}


def _lt(name: str) -> int:
    return LINKTYPE.get(name.split("-")[0], 1)


@pytest.mark.parametrize("mode", ["frame", "l3", "payload", "rdma"])
@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_frames_match_scapy_oracle(name, mode):
    frame = bytes(CRAFTED[name])
    exp, got = check(frame, _lt(name), mode)
    assert exp is not None and exp.range is not None, exp


def test_crafted_oracle_spot_values():
    """A few answers written out, so the oracle itself is pinned to the spec text."""
    f = bytes(CRAFTED["qinq-88a8"])
    assert strip_range(f, 1, "l3").offset == 22
    assert strip_range(f, 1, "payload").offset == 22 + 20 + 8
    f = bytes(CRAFTED["padding-short"])
    r = strip_range(f, 1, "l3")
    assert (r.offset, r.length) == (14, 20 + 8 + 2)  # the 16 padding bytes are not hashed
    assert (
        f[strip_range(f, 1, "payload").offset :][:2] == b"ab"
        and strip_range(f, 1, "payload").length == 2
    )
    assert strip_range(bytes(CRAFTED["arp"]), 1, "payload").flags == NON_IP
    assert strip_range(bytes(CRAFTED["ipv6-frag-nonfirst"]), 1, "payload").flags == FRAGMENT
    assert strip_range(bytes(CRAFTED["ipv6-frag-atomic"]), 1, "payload").flags == 0


@pytest.mark.parametrize("family", [2, 24, 28, 30])
@pytest.mark.parametrize("order", ["<I", ">I"])
def test_null_loopback_families_either_byte_order(family, order):
    inner = IP() / UDP() / PAYLOAD if family == 2 else IPv6() / UDP() / PAYLOAD
    frame = struct.pack(order, family) + bytes(inner)
    r = strip_range(frame, 0, "payload")
    assert (r.offset, r.end, r.flags) == (4 + (20 if family == 2 else 40) + 8, len(frame), 0)
    assert strip_range(struct.pack(order, 17) + bytes(inner), 0, "l3").flags == NON_IP


@pytest.mark.parametrize("lt", [101, 228, 229])
def test_raw_ip_link_types(lt):
    inner = bytes(IPv6() / TCP() / PAYLOAD if lt == 229 else IP() / TCP() / PAYLOAD)
    r = strip_range(inner, lt, "payload")
    assert (r.offset, r.end, r.flags) == (len(inner) - len(PAYLOAD), len(inner), 0)
    assert strip_range(inner, lt, "l3").offset == 0
    bad = bytes(IP() / TCP()) if lt == 229 else bytes(IPv6() / TCP())
    if lt != 101:  # a raw IP link whose packet is not the promised version
        assert strip_range(bad, lt, "l3").flags == MALFORMED


def _roce_frame(transport, name, ext_len, payload, ipv6=False):
    code = roce_code(transport, name)
    ipl = IPv6() if ipv6 else IP()
    return (
        Ether()
        / ipl
        / UDP(sport=49152, dport=4791, chksum=0)
        / BTH(opcode=code, dqpn=17, psn=5)
        / Raw(bytes([0xEE]) * ext_len + payload)
    )


@pytest.mark.parametrize("transport,name", [(t, n) for t, ns in ROCE_OPS.items() for n in ns])
def test_rocev2_every_opcode_strips_bth_eths_and_icrc(transport, name):
    payload = bytes(range(200, 232))
    pkt = _roce_frame(transport, name, roce_ext(transport, name), payload)
    frame = bytes(pkt)
    assert frame[-4:] == bytes(pkt)[-4:]  # scapy appended the ICRC after the payload
    exp, got = check(frame, 1, "rdma")
    assert frame[got.offset : got.end] == payload
    # payload mode keeps BTH, ETHs and ICRC
    assert strip_range(frame, 1, "payload").offset == 14 + 20 + 8


def test_rocev2_ipv6_padding_and_cnp():
    payload = b"P" * 20
    pkt = _roce_frame("RC", "RDMA_WRITE_FIRST", RETH, payload, ipv6=True)
    frame = bytes(pkt) + b"\x00" * 6  # trailer after the IPv6 packet
    r = strip_range(frame, 1, "rdma")
    assert frame[r.offset : r.end] == payload and r.flags == 0
    cnp = bytes(Ether() / IP() / UDP(dport=4791, chksum=0) / BTH(opcode=0x81) / Raw(bytes(16)))
    r = strip_range(cnp, 1, "rdma")
    assert r.length == 16 and r.flags == 0


def test_rocev2_unknown_opcode_and_short_are_malformed():
    frame = bytes(Ether() / IP() / UDP(dport=4791, chksum=0) / BTH(opcode=0x40) / Raw(b"x" * 20))
    r = strip_range(frame, 1, "rdma")
    assert r.flags == MALFORMED and r.offset == 14 + 20 + 8 + 12 and r.end == len(frame)
    frame = bytes(Ether() / IP() / UDP(dport=4791) / (b"\x00" * 6))
    r = strip_range(frame, 1, "rdma")
    assert r.flags == MALFORMED and r.offset == 14 + 20 + 8
    # a non-RoCE frame in rdma mode is hashed like payload
    f = bytes(CRAFTED["eth-ipv4-tcp-opts"])
    assert strip_range(f, 1, "rdma") == strip_range(f, 1, "payload")


def test_malformed_headers_hash_from_last_valid_offset():
    ok = bytearray(bytes(Ether() / IP() / TCP() / PAYLOAD))
    bad_ihl = bytearray(ok)
    bad_ihl[14] = 0x44
    for mode in ("l3", "payload"):
        r = strip_range(bytes(bad_ihl), 1, mode)
        assert (r.offset, r.end, r.flags) == (14, len(ok), MALFORMED)
    bad_doff = bytearray(ok)
    bad_doff[14 + 20 + 12] = 0x30
    r = strip_range(bytes(bad_doff), 1, "payload")
    assert (r.offset, r.end, r.flags) == (34, len(ok), MALFORMED)
    long_ip = bytearray(ok)
    long_ip[16:18] = (len(ok) - 14 + 10).to_bytes(2, "big")
    assert strip_range(bytes(long_ip), 1, "payload").flags == MALFORMED
    # ... unless the frame was cut by the snaplen: then the rest was simply not captured
    r = strip_range(bytes(long_ip), 1, "payload", wire_len=len(ok) + 10)
    assert (r.offset, r.end, r.flags) == (54, len(ok), 0)
    # IPv6 extension header running past the packet
    v6 = bytes(Ether() / IPv6() / IPv6ExtHdrDestOpt(len=30) / UDP() / PAYLOAD)
    v6 = v6[: 14 + 4] + (len(v6) - 54).to_bytes(2, "big") + v6[20:]
    r = strip_range(v6, 1, "payload")
    assert (r.offset, r.flags) == (54, MALFORMED)
    # a chain of too many extension headers
    chain = IPv6()
    for _ in range(20):
        chain = chain / IPv6ExtHdrDestOpt()
    r = strip_range(bytes(Ether() / chain / UDP()), 1, "payload")
    assert r.flags == MALFORMED
    # frame shorter than the Ethernet header
    r = strip_range(b"\x01" * 8, 1, "l3", wire_len=60)
    assert (r.offset, r.length, r.flags) == (0, 8, MALFORMED)


def test_tso_and_jumbo_use_captured_bytes():
    tso = bytearray(bytes(Ether() / IP() / TCP() / (b"x" * 3000)))
    tso[16:18] = b"\x00\x00"
    r = strip_range(bytes(tso), 1, "payload")
    assert (r.offset, r.end, r.flags) == (54, len(tso), 0)
    jumbo = bytearray(bytes(Ether() / IPv6() / IPv6ExtHdrHopByHop() / UDP(len=0) / (b"y" * 100)))
    jumbo[18:20] = b"\x00\x00"
    r = strip_range(bytes(jumbo), 1, "payload")
    assert (r.offset, r.end, r.flags) == (14 + 40 + 8 + 8, len(jumbo), 0)


def test_unsupported_linktype_and_frame_identity():
    r = strip_range(b"\x80\x00" + bytes(40), 105, "payload")
    assert (r.offset, r.length, r.flags) == (0, 42, UNSUPPORTED)
    assert strip_range(b"\x80\x00" + bytes(40), 105, "frame").flags == 0
    with pytest.raises(ValueError):
        strip_range(b"", 1, 9)


def test_modes_registry_and_explain():
    assert set(MODES) == {"frame", "l3", "payload", "rdma"}
    frame = bytes(CRAFTED["vlan"])
    text = explain(frame, 1, "payload")
    assert "[58, 95)" in text and "802.1Q" in text and "TCP" in text
    assert "NON_IP" in explain(bytes(CRAFTED["arp"]), 1, "l3")
    assert "MALFORMED" in explain(b"\x00" * 5, 1, "payload")


# ---------------------------------------------------------------------------------------------
# Properties: hostile bytes never read past caplen, never crash
# ---------------------------------------------------------------------------------------------

LINKTYPES = [0, 1, 101, 108, 113, 228, 229, 276, 105, 127]
MODE_NAMES = ["frame", "l3", "payload", "rdma"]
SEEDS = [bytes(p) for p in CRAFTED.values()] + [
    bytes(_roce_frame("RC", "RDMA_WRITE_ONLY_WITH_IMMEDIATE", 20, b"z" * 9)),
    bytes(_roce_frame("UD", "SEND_ONLY", 8, b"z" * 9, ipv6=True)),
]


@settings(max_examples=400, deadline=None)
@given(
    data=st.binary(max_size=300),
    lt=st.sampled_from(LINKTYPES),
    mode=st.sampled_from(MODE_NAMES),
    extra=st.integers(0, 70000),
)
def test_random_bytes_stay_in_bounds(data, lt, mode, extra):
    for wl in (len(data), len(data) + extra):
        r = strip_range(data, lt, mode, wire_len=wl)
        assert r.offset + r.length <= len(data)
        if mode == "frame":
            assert (r.offset, r.length, r.flags) == (0, len(data), 0)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.sampled_from(SEEDS),
    cut=st.integers(0, 400),
    muts=st.lists(st.tuples(st.integers(0, 399), st.integers(0, 255)), max_size=6),
    lt=st.sampled_from([1, 1, 1, 0, 113, 276, 101]),
    mode=st.sampled_from(MODE_NAMES),
)
def test_mutated_and_truncated_frames_stay_in_bounds(seed, cut, muts, lt, mode):
    b = bytearray(seed)
    for pos, val in muts:
        if pos < len(b):
            b[pos] = val
    frame = bytes(b[:cut])
    for wl in (len(frame), len(seed)):
        r = strip_range(frame, lt, mode, wire_len=wl)
        assert r.offset + r.length <= len(frame)
        if mode == "frame":
            assert (r.offset, r.length) == (0, len(frame))


# ---------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------

STRIP_FILES = [
    "zeek__http-vlan-0.pcap",
    "zeek__vlan-pcp-dei.pcapng",
    "tcpdump__802.1ad_QinQ.pcap",
    "zeek__http-qinq-0.pcap",
    "zeek__vntag.pcap",
    "zeek__mixed-vlan-mpls.pcap",
    "zeek__snap-arp.pcapng",
    "sv__detect-ipopts_input.pcap",
    "tcpdump__ipv4_invalid_hdr_length.pcap",
    "zeek__ipv4_fragmented-1.pcap",
    "zeek__ipv4_fragmented-syn.pcap",
    "tcpreplay__test_fragroute.pcap",
    "libpcap__ipv6_ext_headers.pcap",
    "zeek__ipv6-fragmented-dns.pcap",
    "zeek__ipv6-hbh-routing0.pcap",
    "zeek__ipv6-mobility-dst-opts.pcap",
    "zeek__ipv6_zero_len_ah.pcap",
    "tcpdump__ipv6-routing-header.pcap",
    "sv__defrag-eth-vlan-ipv6-tcp.pcap",
    "zeek__trunc_ip6-ext-trunc.pcap",
    "tcpdump__ipv6_jumbogram_1.pcap",
    "tcpdump__bigtcp-ipv4.pcap",
    "tcpdump__bigtcp-ipv6-hbh.pcap",
    "tcpdump__ipv4_tcp_http_xml_tso.pcap",
    "zeek__tcp-http-with-padding.pcap",
    "zeek__tcp_options.pcap",
    "sv__tcp-opt-invalid-warning.pcap",
    "sv__udp-len-invalid.pcap",
    "sv__udp-trailing-data.pcap",
    "zeek__trunc_trunc-hdr.pcap",
    "zeek__trunc_ip4-trunc.pcap",
]
LINK_FILES = [
    "gopacket__test_loopback.pcap",
    "tcpdump__icmpv6-RFC2894-RR.pcap",
    "tcpdump__tcp-handshake-nano.pcap",
    "gopacketfork__linux_sll_oversized_addr.pcapng",
    "zeek__linux_dlt_sll2.pcap",
    "tcpdump__LINKTYPE_IPV6.pcap",
    "tcpdump__LINKTYPE_IPV6_invalid.pcap",
    "tcpdump__LINKTYPE_RAW_ipv4.pcap",
    "scapy__pfcp_actually_pcapng.pcap",
]


def _corpus_frames(name):
    with CaptureReader(CORPUS / "files" / name) as r:
        yield from r.frames()


def _run_corpus(files):
    stats = collections.Counter()
    per_file = {}
    for name in files:
        path = CORPUS / "files" / name
        assert path.is_file(), name
        flags = collections.defaultdict(collections.Counter)
        for f in _corpus_frames(name):
            for mode in ("l3", "payload"):
                exp, got = check(f.data, f.linktype, mode, f.wire_len)
                flags[mode][got.flags] += 1
                key = (
                    "checked"
                    if exp is not None and exp.range is not None
                    else ("flags_only" if exp is not None else "skipped")
                )
                stats[(mode, key)] += 1
        per_file[name] = flags
    return stats, per_file


@needs_corpus
def test_corpus_strip_files_match_scapy_oracle():
    stats, per_file = _run_corpus(STRIP_FILES)
    for mode in ("l3", "payload"):
        total = sum(v for (m, _), v in stats.items() if m == mode)
        print(
            f"strip files {mode}: {dict((k, v) for (m, k), v in stats.items() if m == mode)} of "
            f"{total}"
        )
        assert stats[(mode, "checked")] >= 0.85 * total
    pl = {n: per_file[n]["payload"] for n in per_file}
    assert pl["tcpdump__ipv4_invalid_hdr_length.pcap"][MALFORMED] == 1
    assert per_file["tcpdump__ipv4_invalid_hdr_length.pcap"]["l3"][MALFORMED] == 1
    assert sum(v for k, v in pl["zeek__trunc_ip6-ext-trunc.pcap"].items() if k & MALFORMED) == 1
    assert pl["zeek__ipv4_fragmented-1.pcap"] == {FRAGMENT: 3}
    assert pl["zeek__ipv6-fragmented-dns.pcap"] == {0: 4, FRAGMENT: 4}
    assert sum(v for k, v in pl["zeek__ipv4_fragmented-syn.pcap"].items() if k & FRAGMENT) == 2
    assert sum(v for k, v in pl["zeek__snap-arp.pcapng"].items() if k & NON_IP) >= 1
    assert sum(v for k, v in pl["zeek__trunc_trunc-hdr.pcap"].items() if k & MALFORMED) == 1
    # AH with payload length 0 is 8 bytes (RFC 4302: (len + 2) * 4); an ICMPv6 echo request follows
    ah = [f for f in _corpus_frames("zeek__ipv6_zero_len_ah.pcap") if f.data[20] == 51]
    assert len(ah) == 1
    r = strip_range(ah[0].data, 1, "payload")
    assert (r.offset, r.flags, ah[0].data[r.offset]) == (14 + 40 + 8, 0, 128)
    for n in (
        "tcpdump__bigtcp-ipv4.pcap",
        "tcpdump__ipv4_tcp_http_xml_tso.pcap",
        "tcpdump__ipv6_jumbogram_1.pcap",
        "tcpdump__bigtcp-ipv6-hbh.pcap",
        "zeek__tcp-http-with-padding.pcap",
        "zeek__tcp_options.pcap",
        "sv__detect-ipopts_input.pcap",
        "zeek__http-qinq-0.pcap",
        "tcpdump__802.1ad_QinQ.pcap",
    ):
        assert not any(k & MALFORMED for k in pl[n]), (n, pl[n])


@needs_corpus
def test_corpus_padding_excluded():
    """zeek__tcp-http-with-padding: 2 trailer bytes after the IP packet are not hashed in l3."""
    trimmed = 0
    for f in _corpus_frames("zeek__tcp-http-with-padding.pcap"):
        r = strip_range(f.data, f.linktype, "l3", f.wire_len)
        ip_len = int.from_bytes(f.data[r.offset + 2 : r.offset + 4], "big")
        assert r.length == ip_len
        trimmed += r.end < len(f.data)
    assert trimmed >= 1


@needs_corpus
def test_corpus_link_types_match_scapy_oracle():
    stats, per_file = _run_corpus(LINK_FILES)
    for mode in ("l3", "payload"):
        total = sum(v for (m, _), v in stats.items() if m == mode)
        print(
            f"link files {mode}: {dict((k, v) for (m, k), v in stats.items() if m == mode)} of "
            f"{total}"
        )
        assert stats[(mode, "checked")] >= 0.85 * total
    sll2 = per_file["zeek__linux_dlt_sll2.pcap"]["payload"]
    assert sll2 == {0: 4, NON_IP: 2}  # 2 IPv4 + 2 IPv6 frames; ARP and RARP are not IP
    assert not any(
        k & (MALFORMED | UNSUPPORTED) for k in per_file["gopacket__test_loopback.pcap"]["payload"]
    )
    assert per_file["tcpdump__LINKTYPE_IPV6_invalid.pcap"]["l3"][MALFORMED] == 1


@needs_corpus
def test_corpus_every_file_every_mode_in_bounds():
    """Every frame of every corpus file, every mode: the engine's range stays within caplen."""
    n = 0
    for path in sorted((CORPUS / "files").iterdir()):
        try:
            with CaptureReader(path) as r:
                for f in r.frames():
                    for mode in MODE_NAMES:
                        g = strip_range(f.data, f.linktype, mode, f.wire_len)
                        assert g.end <= f.caplen
                        n += 1
        except Exception as e:  # noqa: BLE001 - corrupt files are the reader's business
            if "CaptureFormatError" not in type(e).__name__:
                raise
    assert n > 4 * 7000


# ---------------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------------

SAMPLE = SAMPLES / "sample.pcapng"


@pytest.mark.parametrize("mode", ["l3", "payload", "rdma"])
def test_cli_capture_verify_recompute_with_strip(mode, tmp_path, keydir):
    led = tmp_path / "L"
    r = cli(
        "capture",
        SAMPLE,
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--strip",
        mode,
        "--segment-records",
        "100",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["strip"] == mode
    r = cli("verify", led, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    r = cli(
        "recompute",
        SAMPLE,
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--json",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["matched"] == doc["frames"] == 294 and doc["ledger_only"] == doc["capture_only"] == 0


def _digests(path: Path, mode: str) -> list[tuple[int, bytes]]:
    """(flags, digest) of every record the native engine writes for `path` in `mode`."""
    alg = get_algorithm("siphash-1-3-128")
    size = RECORD_FIXED + alg.digest_size
    with CaptureReader(path) as reader:
        eng = DigestEngine(reader, alg, MODES[mode].native_id, bytes(range(16)))
        buf, n, _ = eng.fill(0)
        raw = bytes(buf)
    return [
        (
            int.from_bytes(raw[k * size + 24 : k * size + 26], "little"),
            raw[k * size + RECORD_FIXED : (k + 1) * size],
        )
        for k in range(n)
    ]


def test_l3_digest_of_tagged_and_untagged_copy_is_equal(tmp_path):
    from scapy.utils import wrpcap

    ip = IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1, dport=2) / b"same packet"
    frames = [
        Ether() / ip,
        Ether() / Dot1Q(vlan=5) / ip,
        Ether() / Dot1AD(vlan=1) / Dot1Q(vlan=2) / ip,
        Ether() / ip / Padding(bytes(12)),
    ]
    p = tmp_path / "t.pcap"
    wrpcap(str(p), frames)
    for mode in ("l3", "payload"):
        recs = _digests(p, mode)
        assert len(recs) == 4 and len({d for _, d in recs}) == 1 and {fl for fl, _ in recs} == {0}
    assert len({d for _, d in _digests(p, "frame")}) == 4


def test_engine_flags_and_digests_equal_strip_range(tmp_path):
    """The engine digests exactly strip_range's bytes and records its flags (+ TRUNCATED)."""
    from ledgertool.digest.engine import digest_one

    alg = get_algorithm("siphash-1-3-128")
    key = bytes(range(16))
    with CaptureReader(SAMPLE) as r:
        frames = list(r.frames())
    for mode in MODE_NAMES:
        recs = _digests(SAMPLE, mode)
        assert len(recs) == len(frames)
        for f, (flags, digest) in zip(frames, recs):
            g = strip_range(f.data, f.linktype, mode, f.wire_len)
            assert digest == digest_one(alg, key, f.data[g.offset : g.end])
            assert flags == g.flags | (1 if f.caplen < f.wire_len else 0)
    rd, pl = _digests(SAMPLE, "rdma"), _digests(SAMPLE, "payload")
    assert sum(a != b for a, b in zip(rd, pl)) == 33  # the RoCE frames differ, nothing else
