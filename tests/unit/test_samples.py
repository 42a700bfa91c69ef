"""The bundled samples (samples/sample.pcap, samples/sample.pcapng) are reproducible and hold
the advertised mix; pcap and pcapng carry identical frames.

Counts are pinned here on purpose: a change to samples/make_samples.py that alters the mix
must update this file and samples/README.md together.
"""

from __future__ import annotations

import hashlib
import importlib.util
import struct
import sys
from decimal import Decimal
from pathlib import Path

import pytest
import scapy.all  # noqa: F401  (registers every layer so readers dissect Ethernet)
from conftest import REPO
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrHopByHop
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q
from scapy.utils import PcapNgReader, PcapReader

SAMPLES = REPO / "samples"
PCAP = SAMPLES / "sample.pcap"
PCAPNG = SAMPLES / "sample.pcapng"
START_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z

EXPECTED = {
    "total": 294,
    "vlan": 57,  # frames with an 802.1Q and/or 802.1ad tag
    "qinq": 14,  # 0x88a8 S-tag + 0x8100 C-tag
    "ipv6": 50,
    "ipv6_ext_chain": 4,  # hop-by-hop + destination options
    "ipv4_fragments": 5,  # 3 + 2 fragments
    "arp": 7,
    "roce": 33,  # UDP dst port 4791
    "padded_60": 36,  # frames shorter than 60 bytes, zero-padded to 60
    "truncated": 1,  # caplen < wire length
}


def _load_script():
    """Import samples/make_samples.py (not a package) once, under a private module name."""
    name = "_ledgertool_samples_make_samples"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SAMPLES / "make_samples.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the script loads
    spec.loader.exec_module(module)
    return module


def _read(path: Path, reader) -> list:
    with reader(str(path)) as r:
        return list(r)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    out = tmp_path_factory.mktemp("samples")
    counts = _load_script().main(out)
    return out, counts


@pytest.fixture(scope="module")
def pcap_packets() -> list:
    return _read(PCAP, PcapReader)


@pytest.fixture(scope="module")
def pcapng_packets() -> list:
    return _read(PCAPNG, PcapNgReader)


def test_regeneration_is_byte_identical(regenerated) -> None:
    out, counts = regenerated
    for name in ("sample.pcap", "sample.pcapng"):
        assert _sha256(out / name) == _sha256(SAMPLES / name), (
            f"{name} differs from a fresh regeneration"
        )
    assert counts["total"] == EXPECTED["total"]


def test_regenerating_twice_is_identical(tmp_path: Path, regenerated) -> None:
    first, _ = regenerated
    _load_script().main(tmp_path)
    for name in ("sample.pcap", "sample.pcapng"):
        assert (tmp_path / name).read_bytes() == (first / name).read_bytes()


def test_files_are_small() -> None:
    for path in (PCAP, PCAPNG):
        assert path.stat().st_size < 200_000


def test_pcap_header() -> None:
    magic, major, minor, _zone, _sigfigs, snaplen, linktype = struct.unpack(
        "<IHHiIII", PCAP.read_bytes()[:24]
    )
    assert (magic, major, minor, linktype) == (
        0xA1B2C3D4,
        2,
        4,
        1,
    )  # microsecond, LINKTYPE_ETHERNET
    assert snaplen == 262_144


def test_pcapng_nanosecond_interface() -> None:
    data = PCAPNG.read_bytes()
    shb_type, shb_len, bom = struct.unpack("<III", data[:12])
    assert shb_type == 0x0A0D0D0A and bom == 0x1A2B3C4D
    idb = data[shb_len:]
    idb_type, idb_len, linktype = struct.unpack("<IIH", idb[:10])
    assert idb_type == 1 and linktype == 1
    options, pos, tsresol = idb[16 : idb_len - 4], 0, None
    while pos + 4 <= len(options):
        code, length = struct.unpack("<HH", options[pos : pos + 4])
        if code == 0:
            break
        if code == 9:
            tsresol = options[pos + 4]
        pos += 4 + length + (-length % 4)
    assert tsresol == 9


def test_pcap_and_pcapng_hold_identical_frames(pcap_packets, pcapng_packets) -> None:
    assert len(pcap_packets) == len(pcapng_packets) == EXPECTED["total"]
    for i, (a, b) in enumerate(zip(pcap_packets, pcapng_packets)):
        assert bytes(a) == bytes(b), f"frame {i}"
        assert (a.wirelen or len(a)) == (b.wirelen or len(b)), f"frame {i} wire length"
        ns = int(Decimal(str(b.time)) * 10**9)
        us = int(Decimal(str(a.time)) * 10**6)
        assert us == ns // 1000, f"frame {i}: pcap time is the pcapng time truncated to µs"


def test_timestamps(pcapng_packets) -> None:
    ns = [int(Decimal(str(p.time)) * 10**9) for p in pcapng_packets]
    assert ns[0] == START_NS
    assert all(b > a for a, b in zip(ns, ns[1:]))
    assert any(t % 1000 for t in ns), "some timestamps need nanosecond resolution"


def _count(packets: list, pred) -> int:
    return sum(1 for p in packets if pred(p))


def test_mix(pcap_packets) -> None:
    pk = pcap_packets
    assert len(pk) == EXPECTED["total"]
    assert _count(pk, lambda p: p.haslayer(Dot1Q) or p.haslayer(Dot1AD)) == EXPECTED["vlan"]
    assert _count(pk, lambda p: p.haslayer(Dot1AD) and p[Dot1AD].type == 0x8100) == EXPECTED["qinq"]
    assert _count(pk, lambda p: p.haslayer(IPv6)) == EXPECTED["ipv6"]
    assert (
        _count(pk, lambda p: p.haslayer(IPv6ExtHdrHopByHop) and p.haslayer(IPv6ExtHdrDestOpt))
        == EXPECTED["ipv6_ext_chain"]
    )
    assert (
        _count(pk, lambda p: p.haslayer(IP) and (p[IP].flags.MF or p[IP].frag > 0))
        == EXPECTED["ipv4_fragments"]
    )
    assert _count(pk, lambda p: p.haslayer(ARP)) == EXPECTED["arp"]
    assert _count(pk, lambda p: p.haslayer(UDP) and p[UDP].dport == 4791) == EXPECTED["roce"]
    assert _count(pk, lambda p: len(p) == 60) == EXPECTED["padded_60"]
    assert _count(pk, lambda p: (p.wirelen or len(p)) > len(p)) == EXPECTED["truncated"]
    assert _count(pk, lambda p: len(p) == 1514) >= 3  # full 1500-byte IP packets
    assert min(len(p) for p in pk) == 60


def test_script_counts_match(regenerated) -> None:
    _, counts = regenerated
    assert counts["truncated"] == EXPECTED["truncated"]
    assert counts["arp"] == EXPECTED["arp"]
    assert counts["ipv4-fragment"] == EXPECTED["ipv4_fragments"]
    assert counts["ipv6-ext"] == EXPECTED["ipv6_ext_chain"]
    assert counts["roce"] == EXPECTED["roce"]
    assert sum(v for k, v in counts.items() if k != "total") == EXPECTED["total"]


def test_padded_frames_match_script(pcap_packets) -> None:
    frames = _load_script().build_frames()
    padded = [i for i, f in enumerate(frames) if f.padded]
    assert len(padded) == EXPECTED["padded_60"]
    for i in padded:
        p = pcap_packets[i]
        assert len(p) == 60
        if p.haslayer(IP):  # the bytes past the IP datagram are the zero padding
            end = len(p) - len(p[IP]) + p[IP].len
            assert end < 60 and bytes(p)[end:] == b"\x00" * (60 - end)


def test_fragments_are_two_or_three_per_datagram(pcap_packets) -> None:
    by_id: dict[int, int] = {}
    for p in pcap_packets:
        if p.haslayer(IP) and (p[IP].flags.MF or p[IP].frag > 0):
            by_id[p[IP].id] = by_id.get(p[IP].id, 0) + 1
    assert sorted(by_id.values()) == [2, 3]
