"""The crafted frames of the conformance kit: one catalogue, crafted with scapy.

Each `Case` is a scapy expression (evaluated in `NAMESPACE`, no builtins beyond those listed),
optional byte edits written over the crafted bytes, and an optional snaplen cut. The kit
(ledgertool.device.conformance) writes every case into the capture of its link type and publishes
the expression with the frame, so a hardware team can see how each frame was made and rebuild it;
tests/test_strip.py dissects the scapy-only cases with its independent oracle.

Addresses are fixed (`Eth`, `IP4`, `IP6`): scapy would otherwise fill in this machine's MAC and
route, and the kit must be the same bytes on every machine. Categories name the strip-mode rule a
case exercises (docs/strip-modes.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

from scapy.contrib.mpls import MPLS  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402
from scapy.contrib.roce import _ops as ROCE_OPS  # noqa: E402
from scapy.layers.inet import (  # noqa: E402
    ICMP,
    IP,
    TCP,
    UDP,
    IPOption_EOL,
    IPOption_NOP,
    IPOption_RR,
    IPOption_Timestamp,
)
from scapy.layers.inet6 import (  # noqa: E402
    MIP6MH_BRR,
    ICMPv6EchoRequest,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    IPv6ExtHdrSegmentRouting,
)
from scapy.layers.ipsec import AH  # noqa: E402
from scapy.layers.l2 import (  # noqa: E402
    ARP,
    LLC,
    SNAP,
    CookedLinux,
    CookedLinuxV2,
    Dot1AD,
    Dot1Q,
    Dot3,
    Ether,
)
from scapy.layers.ppp import PPP, PPPoE  # noqa: E402
from scapy.packet import Packet, Padding, Raw  # noqa: E402

CATEGORIES = (
    "l4",
    "vlan-qinq",
    "ipv4-options",
    "ipv6-extension-chain",
    "fragment",
    "padding",
    "truncation",
    "malformed",
    "tso-jumbo",
    "non-ip",
    "rocev2",
    "link-type",
    "edge",
)

MAC_SRC, MAC_DST = "02:00:00:00:00:01", "02:00:00:00:00:02"
IP4_SRC, IP4_DST = "192.0.2.1", "198.51.100.2"  # RFC 5737 documentation ranges
IP6_SRC, IP6_DST = "2001:db8::1", "2001:db8::2"  # RFC 3849
PAYLOAD = bytes(range(37))
ROCE_PAYLOAD = bytes(range(200, 232))
ROCE_FILL = 28  # 0xEE bytes after each BTH: room for the longest extended headers (AtomicETH)


def Eth(**kw) -> Ether:
    return Ether(dst=MAC_DST, src=MAC_SRC, **kw)


def IP4(**kw) -> IP:
    return IP(src=IP4_SRC, dst=IP4_DST, **kw)


def IP6(**kw) -> IPv6:
    return IPv6(src=IP6_SRC, dst=IP6_DST, **kw)


def ext_chain(n: int) -> Packet:
    """n Destination Options headers in a row (docs/strip-modes.md: more than 16 is a loop)."""
    chain = IPv6ExtHdrDestOpt()
    for _ in range(n - 1):
        chain = chain / IPv6ExtHdrDestOpt()
    return chain


def Arp() -> ARP:
    return ARP(hwsrc=MAC_SRC, psrc=IP4_SRC, hwdst="00:00:00:00:00:00", pdst=IP4_DST)


NAMESPACE = {
    "__builtins__": {},
    "bytes": bytes,
    "range": range,
    "Eth": Eth,
    "IP4": IP4,
    "IP6": IP6,
    "ext_chain": ext_chain,
    "Arp": Arp,
    "PAYLOAD": PAYLOAD,
    "ROCE_PAYLOAD": ROCE_PAYLOAD,
    "Ether": Ether,
    "Dot1Q": Dot1Q,
    "Dot1AD": Dot1AD,
    "Dot3": Dot3,
    "LLC": LLC,
    "SNAP": SNAP,
    "MPLS": MPLS,
    "PPPoE": PPPoE,
    "PPP": PPP,
    "CookedLinux": CookedLinux,
    "CookedLinuxV2": CookedLinuxV2,
    "IP": IP,
    "IPv6": IPv6,
    "TCP": TCP,
    "UDP": UDP,
    "ICMP": ICMP,
    "ICMPv6EchoRequest": ICMPv6EchoRequest,
    "IPOption_RR": IPOption_RR,
    "IPOption_Timestamp": IPOption_Timestamp,
    "IPOption_NOP": IPOption_NOP,
    "IPOption_EOL": IPOption_EOL,
    "IPv6ExtHdrHopByHop": IPv6ExtHdrHopByHop,
    "IPv6ExtHdrDestOpt": IPv6ExtHdrDestOpt,
    "IPv6ExtHdrRouting": IPv6ExtHdrRouting,
    "IPv6ExtHdrSegmentRouting": IPv6ExtHdrSegmentRouting,
    "IPv6ExtHdrFragment": IPv6ExtHdrFragment,
    "AH": AH,
    "MIP6MH_BRR": MIP6MH_BRR,
    "BTH": BTH,
    "Raw": Raw,
    "Padding": Padding,
}
"""What a case's expression may name. README.md of the kit lists the helpers' definitions."""


@dataclass(frozen=True)
class Case:
    """One crafted frame.

    ``frame`` = bytes(eval(scapy)), then each ``(offset, hex)`` of ``edits`` written over it, then
    cut to ``caplen`` bytes when given; ``wire_len`` is the length before the cut."""

    name: str
    category: str
    linktype: int
    scapy: str
    note: str
    edits: tuple[tuple[int, str], ...] = ()
    caplen: int | None = None

    def packet(self) -> Packet:
        return eval(self.scapy, NAMESPACE)  # noqa: S307 - constant expressions of this module only

    @cached_property
    def crafted(self) -> bytes:
        b = bytearray(bytes(self.packet()))
        for off, hx in self.edits:
            b[off : off + len(hx) // 2] = bytes.fromhex(hx)
        return bytes(b)

    @property
    def frame(self) -> bytes:
        """The captured bytes."""
        return self.crafted if self.caplen is None else self.crafted[: self.caplen]

    @property
    def wire_len(self) -> int:
        return len(self.crafted)

    @property
    def scapy_only(self) -> bool:
        """No edits and no cut: scapy's dissection of the frame is its whole description."""
        return not self.edits and self.caplen is None


def _c(name, category, scapy, note, linktype=1, edits=(), caplen=None) -> Case:
    assert category in CATEGORIES, category
    return Case(name, category, linktype, scapy, note, tuple(edits), caplen)


_TCP_OPTS = '[("MSS", 1460), ("SAckOK", b""), ("WScale", 7), ("Timestamp", (1, 2))]'
_ROCE_UDP = "UDP(sport=49152, dport=4791, chksum=0)"


def _roce_cases() -> list[Case]:
    """Every RC, UC and UD opcode of IBTA Vol. 1 Table 38 that docs/strip-modes.md lists, plus
    CNP."""
    names = {
        "RC": list(ROCE_OPS) + ["SEND_LAST_WITH_INVALIDATE", "SEND_ONLY_WITH_INVALIDATE"],
        "UC": [n for n in ROCE_OPS if n.startswith(("SEND_", "RDMA_WRITE"))],
        "UD": ["SEND_ONLY", "SEND_ONLY_WITH_IMMEDIATE"],
    }
    base = {"RC": 0x00, "UC": 0x20, "UD": 0x60}
    invalidate = {"SEND_LAST_WITH_INVALIDATE": 0x16, "SEND_ONLY_WITH_INVALIDATE": 0x17}
    out = []
    for transport, ops in names.items():
        for op in ops:
            code = invalidate[op] if op in invalidate else base[transport] + ROCE_OPS[op]
            out.append(
                _c(
                    f"rocev2-{transport.lower()}-{op.lower().replace('_', '-')}",
                    "rocev2",
                    f"Eth() / IP4() / {_ROCE_UDP} / BTH(opcode={code:#04x}, dqpn=17, psn=5) / "
                    f"Raw(b'\\xee' * {ROCE_FILL} + ROCE_PAYLOAD)",
                    f"RoCEv2 {transport} {op} (opcode {code:#04x}): rdma hashes what follows the "
                    "BTH and this opcode's extended headers, up to the 4-byte ICRC",
                )
            )
    return out


CASES: tuple[Case, ...] = tuple(
    [
        # ---- Ethernet, IPv4/IPv6, L4
        # ---------------------------------------------------------------
        _c(
            "eth-ipv4-udp",
            "l4",
            "Eth() / IP4() / UDP(sport=1000, dport=2000) / PAYLOAD",
            "IPv4 / UDP",
        ),
        _c(
            "eth-ipv4-tcp",
            "l4",
            "Eth() / IP4() / TCP(sport=1000, dport=80) / PAYLOAD",
            "IPv4 / TCP, no options",
        ),
        _c(
            "eth-ipv4-tcp-opts",
            "l4",
            f"Eth() / IP4() / TCP(options={_TCP_OPTS}) / PAYLOAD",
            "TCP options: payload starts at data offset x 4",
        ),
        _c(
            "icmp",
            "l4",
            "Eth() / IP4() / ICMP(type=8) / PAYLOAD",
            "ICMP: payload mode hashes what follows the IP header",
        ),
        _c(
            "icmpv6",
            "l4",
            "Eth() / IP6() / ICMPv6EchoRequest(data=PAYLOAD)",
            "ICMPv6: what follows the IPv6 header",
        ),
        _c("ipv6-udp", "l4", "Eth() / IP6() / UDP() / PAYLOAD", "IPv6 / UDP"),
        _c("ipv6-tcp", "l4", "Eth() / IP6() / TCP() / PAYLOAD", "IPv6 / TCP"),
        _c(
            "ipv4-other-protocol",
            "l4",
            "Eth() / IP4(proto=47) / PAYLOAD",
            "GRE number, not parsed: after the IP header",
        ),
        _c(
            "ipv6-no-next-header",
            "l4",
            "Eth() / IP6(nh=59) / PAYLOAD",
            "IPv6 next header 59: after the IPv6 header",
        ),
        _c(
            "eth-ipv4-udp-9000",
            "edge",
            "Eth() / IP4() / UDP() / Raw(bytes(8972))",
            "a 9014-byte jumbo frame",
        ),
        # ---- VLAN / QinQ
        # ------------------------------------------------------------------------------
        _c(
            "vlan",
            "vlan-qinq",
            "Eth() / Dot1Q(vlan=100, prio=3, dei=1) / IP4() / TCP() / PAYLOAD",
            "one 802.1Q tag",
        ),
        _c(
            "qinq-88a8",
            "vlan-qinq",
            "Eth() / Dot1AD(vlan=10) / Dot1Q(vlan=200) / IP4() / UDP() / PAYLOAD",
            "802.1ad outer tag, 802.1Q inner",
        ),
        _c(
            "qinq-8100x2",
            "vlan-qinq",
            "Eth() / Dot1Q(vlan=10) / Dot1Q(vlan=200) / IP6() / TCP() / PAYLOAD",
            "two 0x8100 tags",
        ),
        _c(
            "qinq-9100",
            "vlan-qinq",
            "Eth(type=0x9100) / Dot1Q(vlan=7) / IP4() / UDP() / PAYLOAD",
            "pre-standard 0x9100 outer tag",
        ),
        _c(
            "vlan-triple",
            "vlan-qinq",
            "Eth() / Dot1AD(vlan=1) / Dot1Q(vlan=2) / Dot1Q(vlan=3) / IP4() / UDP() / PAYLOAD",
            "three tags: tags are stripped to any depth",
        ),
        _c(
            "vlan-arp",
            "vlan-qinq",
            "Eth() / Dot1Q(vlan=5) / Arp()",
            "a tagged ARP frame: NON_IP after the tag",
        ),
        # ---- IPv4 options
        # -----------------------------------------------------------------------------
        _c(
            "eth-ipv4-options-tcp",
            "ipv4-options",
            "Eth() / IP4(options=[IPOption_RR(routers=['192.0.2.7', '192.0.2.8']), "
            "IPOption_NOP()]) / TCP() / PAYLOAD",
            "record-route option: IHL 8",
        ),
        _c(
            "eth-ipv4-options-ts",
            "ipv4-options",
            "Eth() / IP4(options=[IPOption_Timestamp(flg=0, timestamp=[1, 2, 3])]) / UDP() / "
            "PAYLOAD",
            "timestamp option",
        ),
        _c(
            "ipv4-options-ihl15",
            "ipv4-options",
            "Eth() / IP4(options=[IPOption_NOP()] * 39 + [IPOption_EOL()]) / UDP() / PAYLOAD",
            "the largest IPv4 header: IHL 15, 40 option bytes",
        ),
        # ---- IPv6 extension chains
        # --------------------------------------------------------------------
        _c(
            "ipv6-hbh-dst-rh-tcp",
            "ipv6-extension-chain",
            "Eth() / IP6() / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / "
            "IPv6ExtHdrRouting(addresses=['2001:db8::a', '2001:db8::b']) / TCP() / PAYLOAD",
            "hop-by-hop, destination options, routing, then TCP",
        ),
        _c(
            "ipv6-srh-udp",
            "ipv6-extension-chain",
            "Eth() / IP6() / IPv6ExtHdrSegmentRouting(addresses=['2001:db8::9']) / UDP() / PAYLOAD",
            "segment routing header",
        ),
        _c(
            "ipv6-ah-udp",
            "ipv6-extension-chain",
            "Eth() / IP6() / AH(nh=17, payloadlen=4, spi=1, seq=1, icv=bytes(12)) "
            "/ UDP() / PAYLOAD",
            "AH: (len + 2) x 4 bytes (RFC 4302)",
        ),
        _c(
            "ipv6-mobility",
            "ipv6-extension-chain",
            "Eth() / IP6() / MIP6MH_BRR()",
            "mobility header (135), then no next header",
        ),
        _c(
            "ipv6-ext-chain-16",
            "ipv6-extension-chain",
            "Eth() / IP6() / ext_chain(16) / UDP() / PAYLOAD",
            "16 extension headers: the longest chain that is followed",
        ),
        # ---- fragments
        # ----------------------------------------------------------------------------------
        _c(
            "ipv6-frag-first",
            "fragment",
            "Eth() / IP6() / IPv6ExtHdrFragment(offset=0, m=1, id=5) / UDP() / PAYLOAD",
            "first IPv6 fragment: UDP header stripped, FRAGMENT",
        ),
        _c(
            "ipv6-frag-nonfirst",
            "fragment",
            "Eth() / IP6() / IPv6ExtHdrFragment(offset=8, m=0, id=5, nh=17) / PAYLOAD",
            "non-first: the data after the fragment header",
        ),
        _c(
            "ipv6-frag-atomic",
            "fragment",
            "Eth() / IP6() / IPv6ExtHdrFragment(offset=0, m=0, id=5) / UDP() / PAYLOAD",
            "atomic fragment: not flagged",
        ),
        _c(
            "ipv4-frag-first",
            "fragment",
            "Eth() / IP4(flags='MF', frag=0) / TCP() / PAYLOAD",
            "first IPv4 fragment",
        ),
        _c(
            "ipv4-frag-nonfirst",
            "fragment",
            "Eth() / IP4(flags=0, frag=100, proto=6) / PAYLOAD",
            "last fragment: data after the IP header, nothing parsed",
        ),
        _c(
            "ipv4-frag-middle",
            "fragment",
            "Eth() / IP4(flags='MF', frag=3, proto=17) / PAYLOAD",
            "middle fragment",
        ),
        _c(
            "ipv4-frag-first-partial-tcp",
            "fragment",
            "Eth() / IP4(flags='MF', proto=6) / Raw(bytes(range(12)))",
            "first fragment too short for the TCP header: data after the IP header, not MALFORMED",
        ),
        # ---- padding and trailers
        # ---------------------------------------------------------------------
        _c(
            "padding-short",
            "padding",
            "Eth() / IP4() / UDP() / b'ab' / Padding(bytes(16))",
            "padded to 60 bytes: l3 leaves the 16 padding bytes out",
        ),
        _c(
            "padding-tcp",
            "padding",
            "Eth() / IP4() / TCP() / Padding(bytes(6))",
            "empty TCP segment padded to 60",
        ),
        _c(
            "padding-ipv6-trailer",
            "padding",
            "Eth() / IP6() / UDP() / PAYLOAD / Padding(bytes(6))",
            "6 trailer bytes after the IPv6 packet",
        ),
        _c(
            "udp-trailing-data",
            "padding",
            "Eth() / IP4() / UDP(len=18) / PAYLOAD",
            "UDP length 18 inside a longer IP packet: the IP length decides where the data ends",
        ),
        # ---- snaplen cuts
        # -----------------------------------------------------------------------------
        _c(
            "trunc-udp-payload",
            "truncation",
            "Eth() / IP4() / UDP() / PAYLOAD",
            "cut inside the payload: TRUNCATED only",
            caplen=50,
        ),
        _c(
            "trunc-tcp-header",
            "truncation",
            "Eth() / IP4() / TCP() / PAYLOAD",
            "cut inside the TCP header: payload mode MALFORMED",
            caplen=44,
        ),
        _c(
            "trunc-ipv4-header",
            "truncation",
            "Eth() / IP4() / UDP() / PAYLOAD",
            "cut inside the IPv4 header",
            caplen=24,
        ),
        _c(
            "trunc-eth-header",
            "truncation",
            "Eth() / IP4() / UDP() / PAYLOAD",
            "shorter than the Ethernet header: MALFORMED, whole frame",
            caplen=8,
        ),
        _c(
            "trunc-ipv6-ext",
            "truncation",
            "Eth() / IP6() / IPv6ExtHdrHopByHop() / IPv6ExtHdrRouting(addresses=['2001:db8::a']) / "
            "UDP() / PAYLOAD",
            "cut inside the routing header",
            caplen=14 + 40 + 8 + 10,
        ),
        _c(
            "trunc-rocev2-icrc",
            "truncation",
            f"Eth() / IP4() / {_ROCE_UDP} / BTH(opcode=0x04, dqpn=17, psn=5) / Raw(ROCE_PAYLOAD)",
            "RoCEv2 SEND_ONLY with its ICRC cut off: rdma ends at the capture",
            caplen=14 + 20 + 8 + 12 + 32,
        ),
        _c(
            "empty-frame",
            "truncation",
            "Eth() / IP4() / UDP() / b'ab' / Padding(bytes(16))",
            "caplen 0 of a 60-byte frame: a valid empty frame",
            caplen=0,
        ),
        # ---- malformed headers
        # ------------------------------------------------------------------------
        _c(
            "ipv4-ihl-4",
            "malformed",
            "Eth() / IP4() / TCP() / PAYLOAD",
            "IHL 4 < 5",
            edits=[(14, "44")],
        ),
        _c(
            "ipv4-total-length-below-ihl",
            "malformed",
            "Eth() / IP4() / TCP() / PAYLOAD",
            "total length 16 < 20",
            edits=[(16, "0010")],
        ),
        _c(
            "ipv4-length-past-capture",
            "malformed",
            "Eth() / IP4() / TCP() / PAYLOAD",
            "total length 10 bytes past the capture, not a snaplen cut",
            edits=[(16, f"{20 + 20 + 37 + 10:04x}")],
        ),
        _c(
            "tcp-data-offset-below-5",
            "malformed",
            "Eth() / IP4() / TCP() / PAYLOAD",
            "TCP data offset 3",
            edits=[(14 + 20 + 12, "30")],
        ),
        _c(
            "udp-length-below-8",
            "malformed",
            "Eth() / IP4() / UDP(len=4) / PAYLOAD",
            "UDP length 4",
        ),
        _c(
            "udp-length-past-ip",
            "malformed",
            "Eth() / IP4() / UDP(len=200) / PAYLOAD",
            "UDP length past the IP packet",
        ),
        _c(
            "ipv6-ext-past-packet",
            "malformed",
            "Eth() / IP6() / IPv6ExtHdrDestOpt(len=30) / UDP() / PAYLOAD",
            "destination options claim 248 bytes",
        ),
        _c(
            "ipv6-ext-chain-17",
            "malformed",
            "Eth() / IP6() / ext_chain(17) / UDP() / PAYLOAD",
            "17 extension headers: a loop, MALFORMED",
        ),
        _c(
            "ipv4-version-mismatch",
            "malformed",
            "Eth(type=0x0800) / IP6() / UDP() / PAYLOAD",
            "EtherType IPv4, version nibble 6",
        ),
        _c(
            "ipv4-too-short",
            "malformed",
            "Eth(type=0x0800) / Raw(bytes(range(10)))",
            "10 bytes where an IPv4 header belongs",
        ),
        _c(
            "ipv6-too-short",
            "malformed",
            "Eth(type=0x86dd) / Raw(bytes(range(30)))",
            "30 bytes where an IPv6 header belongs",
        ),
        _c(
            "eth-too-short",
            "malformed",
            "Raw(bytes(range(10)))",
            "a 10-byte frame, not cut: MALFORMED, whole frame",
        ),
        # ---- TSO / jumbograms
        # ---------------------------------------------------------------------------
        _c(
            "tso-ipv4-length-0",
            "tso-jumbo",
            "Eth() / IP4() / TCP() / Raw(bytes(1600))",
            "IPv4 total length 0 (TSO / BIG TCP): the captured bytes are the packet",
            edits=[(16, "0000")],
        ),
        _c(
            "jumbo-ipv6-payload-length-0",
            "tso-jumbo",
            "Eth() / IP6() / IPv6ExtHdrHopByHop() / UDP(len=0) / Raw(bytes(100))",
            "IPv6 payload length 0 (jumbogram): to the end of the capture",
            edits=[(18, "0000")],
        ),
        # ---- not IP
        # -------------------------------------------------------------------------------------
        _c("arp", "non-ip", "Eth() / Arp()", "ARP: NON_IP, everything after the MAC header"),
        _c(
            "dot3-llc-snap-ip",
            "non-ip",
            "Dot3(dst='02:00:00:00:00:02', src='02:00:00:00:00:01') / LLC(dsap=0xaa, ssap=0xaa, "
            "ctrl=3) / SNAP(OUI=0, code=0x0800) / IP4() / UDP() / PAYLOAD",
            "802.3 length field with LLC/SNAP carrying IPv4: NON_IP all the same",
        ),
        _c(
            "mpls",
            "non-ip",
            "Eth() / MPLS(label=16, s=1) / IP4() / UDP() / PAYLOAD",
            "MPLS: no look inside",
        ),
        _c(
            "pppoe",
            "non-ip",
            "Eth() / PPPoE(sessionid=1) / PPP(proto=0x21) / IP4() / UDP() / PAYLOAD",
            "PPPoE: NON_IP",
        ),
        # ---- RoCEv2
        # -------------------------------------------------------------------------------------
        *_roce_cases(),
        _c(
            "rocev2-cnp",
            "rocev2",
            f"Eth() / IP4() / {_ROCE_UDP} / BTH(opcode=0x81) / Raw(bytes(16))",
            "RoCEv2 CNP: its 16 reserved bytes are the payload",
        ),
        _c(
            "rocev2-ipv6-trailer",
            "rocev2",
            f"Raw(bytes(Eth() / IP6() / {_ROCE_UDP} / BTH(opcode=0x06, dqpn=17, psn=5) / "
            "Raw(b'\\xee' * 16 + ROCE_PAYLOAD))) / Padding(bytes(6))",
            "RoCEv2 RDMA WRITE First over IPv6, 6 trailer bytes after the packet",
        ),
        _c(
            "rocev2-unknown-opcode",
            "rocev2",
            f"Eth() / IP4() / {_ROCE_UDP} / BTH(opcode=0x40) / Raw(bytes(20))",
            "RD opcode 0x40: MALFORMED right after the BTH",
        ),
        _c(
            "rocev2-too-short-for-bth",
            "rocev2",
            "Eth() / IP4() / UDP(dport=4791) / Raw(bytes(6))",
            "6 bytes after the UDP header: MALFORMED from the UDP payload",
        ),
        _c(
            "rocev2-too-short-for-reth",
            "rocev2",
            f"Eth() / IP4() / {_ROCE_UDP} / BTH(opcode=0x0a) / Raw(bytes(8))",
            "RDMA WRITE Only without room for its RETH and the ICRC: MALFORMED",
        ),
        # ---- other link types
        # ---------------------------------------------------------------------------
        _c(
            "sll-ipv4",
            "link-type",
            "CookedLinux(proto=0x0800) / IP4() / TCP() / PAYLOAD",
            "Linux SLL: 16 bytes",
            113,
        ),
        _c(
            "sll-arp",
            "link-type",
            "CookedLinux(proto=0x0806) / Arp()",
            "Linux SLL carrying ARP: NON_IP",
            113,
        ),
        _c(
            "sll2-ipv6",
            "link-type",
            "CookedLinuxV2(proto=0x86DD) / IP6() / UDP() / PAYLOAD",
            "Linux SLL2: 20 bytes",
            276,
        ),
        _c(
            "null-ipv4",
            "link-type",
            "Raw(b'\\x02\\x00\\x00\\x00') / IP4() / UDP() / PAYLOAD",
            "BSD loopback, AF_INET little-endian",
            0,
        ),
        _c(
            "null-ipv6-be-30",
            "link-type",
            "Raw(b'\\x00\\x00\\x00\\x1e') / IP6() / UDP() / PAYLOAD",
            "BSD loopback, AF_INET6 30 (macOS) big-endian",
            0,
        ),
        _c(
            "null-non-ip",
            "link-type",
            "Raw(b'\\x11\\x00\\x00\\x00') / PAYLOAD",
            "BSD loopback, family 17: NON_IP",
            0,
        ),
        _c("raw-ipv4", "link-type", "IP4() / TCP() / PAYLOAD", "raw IP (101), version 4", 101),
        _c("raw-ipv6", "link-type", "IP6() / UDP() / PAYLOAD", "raw IP (101), version 6", 101),
        _c(
            "raw-bad-version",
            "link-type",
            "Raw(b'\\x50' + bytes(39))",
            "raw IP with version 5: MALFORMED",
            101,
        ),
        _c("lt228-ipv4", "link-type", "IP4() / UDP() / PAYLOAD", "LINKTYPE_IPV4", 228),
        _c(
            "lt228-version-mismatch",
            "link-type",
            "IP6() / UDP() / PAYLOAD",
            "LINKTYPE_IPV4 carrying IPv6: MALFORMED",
            228,
        ),
        _c("lt229-ipv6", "link-type", "IP6() / TCP() / PAYLOAD", "LINKTYPE_IPV6", 229),
        _c(
            "lt229-version-mismatch",
            "link-type",
            "IP4() / TCP() / PAYLOAD",
            "LINKTYPE_IPV6 carrying IPv4: MALFORMED",
            229,
        ),
        _c(
            "ieee802-11-unsupported",
            "link-type",
            "Raw(b'\\x80\\x00' + bytes(40))",
            "802.11 (105): UNSUPPORTED_LINKTYPE, the whole frame in every mode",
            105,
        ),
    ]
)

CAPTURE_NAMES = {
    1: "ethernet",
    113: "linux-sll",
    276: "linux-sll2",
    0: "null",
    101: "raw",
    228: "ipv4",
    229: "ipv6",
    105: "ieee802-11",
}
"""Capture file stem per link type (classic pcap holds one link type per file)."""


def by_capture() -> dict[str, list[Case]]:
    """The cases grouped into their captures, in catalogue order (the order of the frames in each
    file)."""
    out: dict[str, list[Case]] = {name: [] for name in CAPTURE_NAMES.values()}
    for case in CASES:
        out[CAPTURE_NAMES[case.linktype]].append(case)
    return out


def scapy_only() -> dict[str, Packet]:
    """name -> scapy packet of every case without byte edits or a cut (tests/test_strip.py's
    oracle input)."""
    return {c.name: c.packet() for c in CASES if c.scapy_only}
