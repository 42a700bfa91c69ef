"""Pure-Python reference path: a classic-pcap reader and SipHash, written from the specs.

Independent of the C engine (no shared code), used (1) by tests as an oracle on random inputs and
(2) by `bench` as the baseline the native path is compared with in the same run. Slow on purpose:
clarity over speed.

SipHash-c-d: Aumasson & Bernstein, "SipHash: a fast short-input PRF", INDOCRYPT 2012, with the
128-bit output mode of the reference implementation (github.com/veorq/SipHash).
"""

from __future__ import annotations

import struct
from typing import Iterator

_M64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash(key: bytes, msg: bytes, c: int = 1, d: int = 3, out_bytes: int = 16) -> bytes:
    """SipHash-c-d of `msg` under a 16-byte `key`; 8- or 16-byte little-endian output."""
    if len(key) != 16 or out_bytes not in (8, 16):
        raise ValueError("SipHash needs a 16-byte key and 8 or 16 output bytes")
    k0, k1 = struct.unpack("<QQ", key)
    v = [0x736F6D6570736575 ^ k0, 0x646F72616E646F6D ^ k1, 0x6C7967656E657261 ^ k0, 0x7465646279746573 ^ k1]
    if out_bytes == 16:
        v[1] ^= 0xEE

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & _M64; v[1] = _rotl(v[1], 13) ^ v[0]; v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _M64; v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _M64; v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _M64; v[1] = _rotl(v[1], 17) ^ v[2]; v[2] = _rotl(v[2], 32)

    # Message words, then the final word: remaining bytes with the length (mod 256) in the top byte.
    full = len(msg) - len(msg) % 8
    tail = msg[full:] + bytes(7 - len(msg) % 8) + bytes([len(msg) & 0xFF])
    for off in range(0, full + 8, 8):
        m = int.from_bytes((msg[off:off + 8] if off < full else tail), "little")
        v[3] ^= m
        rounds(c)
        v[0] ^= m
    v[2] ^= 0xEE if out_bytes == 16 else 0xFF
    rounds(d)
    out = ((v[0] ^ v[1] ^ v[2] ^ v[3]) & _M64).to_bytes(8, "little")
    if out_bytes == 16:
        v[1] ^= 0xDD
        rounds(d)
        out += ((v[0] ^ v[1] ^ v[2] ^ v[3]) & _M64).to_bytes(8, "little")
    return out


def read_pcap(data: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """Frames of a classic pcap (µs or ns magic, either byte order) as (ts_ns, caplen, wire_len, bytes).

    Stops silently at a cut record: a reference for well-formed files, not a hardened reader.
    """
    magic = data[:4]
    table = {b"\xd4\xc3\xb2\xa1": ("<", 1000), b"\xa1\xb2\xc3\xd4": (">", 1000),
             b"\x4d\x3c\xb2\xa1": ("<", 1), b"\xa1\xb2\x3c\x4d": (">", 1)}
    if magic not in table:
        raise ValueError("not a classic pcap file")
    order, unit = table[magic]
    rec = struct.Struct(order + "IIII")
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, wire = rec.unpack_from(data, off)
        off += 16
        if off + caplen > len(data):
            return
        yield sec * 1_000_000_000 + frac * unit, caplen, wire, data[off:off + caplen]
        off += caplen
