"""Strip modes: which bytes of a frame the digest covers (docs/strip-modes.md).

The rules are implemented once, in C (native/src/strip.c); this module names the modes, exposes
the native range for one frame, and explains a frame's range with scapy (`recompute --details`).
The normative text is docs/strip-modes.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._binding import check, ffi, lib
from ..algorithms import STRIP_MODES, get_strip_mode
from ..plural import plural
from .record import FLAG_NAMES, FLAG_TRUNCATED


@dataclass(frozen=True)
class StripMode:
    name: str
    native_id: int
    description: str


DESCRIPTIONS = {
    "frame": "the captured link-layer bytes as stored",
    "l3": "the IP packet: minus the link-layer header (Ethernet + VLAN tags, SLL, SLL2, NULL, raw "
    "IP) and minus Ethernet padding after the IP length",
    "payload": "the L4 payload: l3 minus the IPv4 header/IPv6 header chain and the UDP/TCP header; "
    "ICMP and other protocols: what follows the IP header(s)",
    "rdma": "payload; for RoCEv2 (UDP port 4791) also minus the InfiniBand BTH, the extended "
    "transport headers of its opcode and the 4-byte ICRC",
}

MODES: dict[str, StripMode] = {n: StripMode(n, i, DESCRIPTIONS[n]) for n, i in STRIP_MODES.items()}


@dataclass(frozen=True)
class StripFallbacks:
    """Frames whose strip mode could not do what it names and hashed more, per reason (the
    engine's count, lt_engine_stats; docs/strip-modes.md "Fallbacks"). Each is a record flag:
    unsupported_linktype (the whole frame hashed), non_ip (from the end of the link header),
    malformed (from the first header that could not be followed)."""

    unsupported_linktype: int = 0
    non_ip: int = 0
    malformed: int = 0

    @property
    def total(self) -> int:
        return self.unsupported_linktype + self.non_ip + self.malformed

    def __add__(self, other: StripFallbacks) -> StripFallbacks:
        return StripFallbacks(
            self.unsupported_linktype + other.unsupported_linktype,
            self.non_ip + other.non_ip,
            self.malformed + other.malformed,
        )

    def to_json(self) -> dict:
        return {
            "total": self.total,
            "unsupported_linktype": self.unsupported_linktype,
            "non_ip": self.non_ip,
            "malformed": self.malformed,
        }

    def note(self, strip: str, frames: int, source: str) -> str | None:
        """One line for the summary, or None when no frame fell back."""
        if not self.total:
            return None
        why = [
            f"{n} {what}"
            for n, what in (
                (self.unsupported_linktype, "of a link type it cannot parse (hashed whole)"),
                (self.non_ip, "not IPv4/IPv6 (hashed from the end of the link header)"),
                (self.malformed, "malformed (hashed from the first header it could not follow)"),
            )
            if n
        ]
        return (
            f"{source}: strip {strip} fell back on {self.total} of {plural(frames, 'frame')}: "
            f"{'; '.join(why)} "
            '(docs/strip-modes.md, "Fallbacks")'
        )


def flag_names(flags: int) -> list[str]:
    return [name for bit, name in FLAG_NAMES.items() if flags & bit]


@dataclass(frozen=True)
class StripRange:
    """The hashed bytes are frame[offset:offset + length]; `flags` are those the strip adds."""

    offset: int
    length: int
    flags: int

    @property
    def end(self) -> int:
        return self.offset + self.length


def strip_range(
    frame: bytes, linktype: int, strip: str | int, wire_len: int | None = None
) -> StripRange:
    """The native strip of one frame (the same code the engine runs per frame).

    `wire_len` defaults to len(frame) (an uncut frame). The TRUNCATED flag is not included: the
    engine adds it from caplen < wire_len.
    """
    sid = strip if isinstance(strip, int) else get_strip_mode(strip)
    off, ln, fl = ffi.new("uint32_t *"), ffi.new("uint32_t *"), ffi.new("uint16_t *")
    check(
        lib.lt_strip(
            sid,
            linktype,
            frame,
            len(frame),
            len(frame) if wire_len is None else wire_len,
            off,
            ln,
            fl,
        ),
        f"unknown strip mode id {strip!r}",
    )
    return StripRange(off[0], ln[0], fl[0])


def explain(frame: bytes, linktype: int, strip: str, wire_len: int | None = None) -> str:
    """One line saying what strip mode `strip` hashed of `frame`, with scapy naming the layers."""
    r = strip_range(frame, linktype, strip, wire_len)
    text = f"strip {strip}: hashed bytes [{r.offset}, {r.end}) of {len(frame)}"
    flags = flag_names(
        r.flags | (FLAG_TRUNCATED if wire_len is not None and len(frame) < wire_len else 0)
    )
    layers = _layers(frame, linktype)
    if layers:
        stripped = [name for name, start in layers if start < r.offset]
        inside = [name for name, start in layers if r.offset <= start < max(r.end, r.offset + 1)]
        text += f"; stripped {' / '.join(stripped) or 'nothing'}"
        text += f"; hashed {' / '.join(inside) or 'no layer start'}"
        if r.end < len(frame):
            text += f"; {len(frame) - r.end} trailing bytes not hashed"
    if flags:
        text += f"; flags {', '.join(flags)}"
    return text


def _layers(frame: bytes, linktype: int) -> list[tuple[str, int]]:
    """(layer name, start offset) as scapy dissects the frame; empty when scapy cannot."""
    try:  # scapy.layers.all takes seconds to load: only when a frame is explained
        import scapy.layers.all  # noqa: F401  (registers the link types and protocol bindings)
        from scapy.config import conf

        cls = conf.l2types.get(linktype)
        if cls is None:
            return []
        pkt = cls(frame)
        out, layer = [], pkt
        while layer is not None and layer.__class__.__name__ != "NoPayload":
            out.append((layer.name, len(frame) - len(bytes(layer))))
            layer = layer.payload if layer.payload else None
        return out
    except Exception:  # scapy raising on odd bytes must not break an explanation
        return []
