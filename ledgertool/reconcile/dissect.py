"""One-line dissection of a frame for people reading a reconciliation report (scapy).

Example: "IPv4 10.0.0.1 > 10.0.0.2 UDP 4791 > 4791 len 1082". Never raises: a frame scapy cannot
parse is described by its link type and length.
"""

from __future__ import annotations

import logging

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

# LINKTYPE_* -> scapy layer class name
_LINK_LAYERS = {
    1: "Ether",
    0: "Loopback",
    101: "IP_or_IPv6",
    228: "IP",
    229: "IPv6",
    113: "CookedLinux",
    276: "CookedLinuxV2",
}


def dissect_line(frame: bytes, linktype: int) -> str:
    """A short human-readable summary of one captured frame (bytes as captured)."""
    try:
        return _dissect(frame, linktype)
    except Exception:  # noqa: BLE001 - malformed frames are exactly what reports are about
        return f"linktype {linktype} len {len(frame)} (not dissected)"


def _dissect(frame: bytes, linktype: int) -> str:
    from scapy.layers import (
        inet,
        inet6,
        l2,
    )  # heavy (~0.3 s): loaded only when a report dissects a frame

    name = _LINK_LAYERS.get(linktype)
    if name is None:
        return f"linktype {linktype} len {len(frame)}"
    if name == "IP_or_IPv6":
        pkt = (inet6.IPv6 if frame[:1] and frame[0] >> 4 == 6 else inet.IP)(frame)
    elif name in ("IP", "IPv6"):
        pkt = getattr(inet, name, None) or getattr(inet6, name)
        pkt = pkt(frame)
    else:
        pkt = getattr(l2, name)(frame)
    parts = []
    vlans = [
        str(layer.vlan) for layer in _layers(pkt) if layer.__class__.__name__ in ("Dot1Q", "Dot1AD")
    ]
    if vlans:
        parts.append("vlan " + ".".join(vlans))
    ip = pkt.getlayer(inet.IP) or pkt.getlayer(inet6.IPv6)
    if ip is None:
        top = pkt.lastlayer().__class__.__name__ if pkt.payload else pkt.__class__.__name__
        layers = [
            layer.__class__.__name__
            for layer in _layers(pkt)
            if layer.__class__.__name__ not in ("Raw", "Padding")
        ]
        parts.append(" / ".join(layers) if layers else top)
        parts.append(f"len {len(frame)}")
        return " ".join(parts)
    ver = "IPv4" if isinstance(ip, inet.IP) else "IPv6"
    parts.append(f"{ver} {ip.src} > {ip.dst}")
    if isinstance(ip, inet.IP) and (ip.flags.MF or ip.frag):
        parts.append(f"frag off {ip.frag * 8}{' MF' if ip.flags.MF else ''}")
    l4 = pkt.getlayer(inet.UDP) or pkt.getlayer(inet.TCP)
    if l4 is not None:
        parts.append(f"{l4.__class__.__name__} {l4.sport} > {l4.dport}")
    elif pkt.getlayer(inet.ICMP) is not None:
        parts.append("ICMP")
    parts.append(f"len {len(frame)}")
    return " ".join(parts)


def _layers(pkt):
    layer = pkt
    while layer:
        yield layer
        layer = layer.payload
