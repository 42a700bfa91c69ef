"""Pure-Python reference path: a classic-pcap reader and SipHash, written from the specs.

Independent of the C engine (no shared code), used (1) by tests as an oracle on random inputs and
(2) by `bench` as the baseline the native path is compared with in the same run. Slow on purpose:
clarity over speed.

SipHash-c-d: Aumasson & Bernstein, "SipHash: a fast short-input PRF", INDOCRYPT 2012, with the
128-bit output mode of the reference implementation (github.com/veorq/SipHash).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from fractions import Fraction

_M64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash(key: bytes, msg: bytes, c: int = 1, d: int = 3, out_bytes: int = 16) -> bytes:
    """SipHash-c-d of `msg` under a 16-byte `key`; 8- or 16-byte little-endian output."""
    if len(key) != 16 or out_bytes not in (8, 16):
        raise ValueError("SipHash needs a 16-byte key and 8 or 16 output bytes")
    k0, k1 = struct.unpack("<QQ", key)
    v = [
        0x736F6D6570736575 ^ k0,
        0x646F72616E646F6D ^ k1,
        0x6C7967656E657261 ^ k0,
        0x7465646279746573 ^ k1,
    ]
    if out_bytes == 16:
        v[1] ^= 0xEE

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & _M64
            v[1] = _rotl(v[1], 13) ^ v[0]
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _M64
            v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _M64
            v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _M64
            v[1] = _rotl(v[1], 17) ^ v[2]
            v[2] = _rotl(v[2], 32)

    # Message words, then the final word: remaining bytes with the length (mod 256) in the top byte.
    full = len(msg) - len(msg) % 8
    tail = msg[full:] + bytes(7 - len(msg) % 8) + bytes([len(msg) & 0xFF])
    for off in range(0, full + 8, 8):
        m = int.from_bytes((msg[off : off + 8] if off < full else tail), "little")
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
    """Frames of a classic pcap (µs or ns magic, either byte order) as (ts_ns, caplen, wire_len,
    bytes).

    Stops silently at a cut record: a reference for well-formed files, not a hardened reader.
    """
    magic = data[:4]
    table = {
        b"\xd4\xc3\xb2\xa1": ("<", 1000),
        b"\xa1\xb2\xc3\xd4": (">", 1000),
        b"\x4d\x3c\xb2\xa1": ("<", 1),
        b"\xa1\xb2\x3c\x4d": (">", 1),
    }
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
        yield sec * 1_000_000_000 + frac * unit, caplen, wire, data[off : off + caplen]
        off += caplen


# ---- workload derivation (docs/workloads.md "Derivation"), independent of workload_gen.c ----

_SM_GAMMA = 0x9E3779B97F4A7C15
_FRAME_GAMMA = 0xD1B54A32D192ED03


def mix64(z: int) -> int:
    """The splitmix64 output function (Steele, Lea & Flood 2014)."""
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def workload_key(seed: int) -> bytes:
    """16-byte SipHash key: the first two splitmix64 outputs from state `seed`, little-endian."""
    return b"".join(mix64(seed + i * _SM_GAMMA).to_bytes(8, "little") for i in (1, 2))


def workload_flow_seed(seed: int, flow: int) -> int:
    """fs(f) = SipHash-1-3-64(key, LE64(f))."""
    return int.from_bytes(
        siphash(workload_key(seed), flow.to_bytes(8, "little"), 1, 3, 8), "little"
    )


def workload_stream_word(seed: int, flow: int, k: int, i: int) -> int:
    """Word i of frame k of flow f: mix64(s + (i+1)*gamma), s = mix64(fs(f) +
    (k+1)*0xD1B54A32D192ED03). Word 0 draws the size, word 1 the pool offset, word 2 the payload
    mask."""
    s = mix64(workload_flow_seed(seed, flow) + (k + 1) * _FRAME_GAMMA)
    return mix64(s + (i + 1) * _SM_GAMMA)


def workload_size_choice(seed: int, flow: int, k: int, weights: list[int]) -> int:
    """Index of the size entry of frame k: where ((word0 >> 32) * total) >> 32 falls."""
    r = ((workload_stream_word(seed, flow, k, 0) >> 32) * sum(weights)) >> 32
    for i, w in enumerate(weights):
        if r < w:
            return i
        r -= w
    raise AssertionError("unreachable")


_POOL_WORDS = 8192
_pools: dict[int, list[int]] = {}


def workload_pool(seed: int) -> list[int]:
    """8192 words: pool[i] = mix64(SipHash-1-3-64(key, LE64(2^64-1)) + (i+1)*gamma)."""
    if seed not in _pools:
        ps = int.from_bytes(
            siphash(workload_key(seed), _M64.to_bytes(8, "little"), 1, 3, 8), "little"
        )
        _pools[seed] = [mix64(ps + (i + 1) * _SM_GAMMA) for i in range(_POOL_WORDS)]
    return _pools[seed]


def workload_payload(seed: int, flow: int, k: int, length: int) -> bytes:
    """Payload of frame k of flow f: word j = pool[(word1 mod 8192 + j) mod 8192] XOR word2,
    little-endian, cut to `length`."""
    pool = workload_pool(seed)
    off = workload_stream_word(seed, flow, k, 1) % _POOL_WORDS
    mask = workload_stream_word(seed, flow, k, 2)
    words = (length + 7) // 8
    return b"".join(
        (pool[(off + j) % _POOL_WORDS] ^ mask).to_bytes(8, "little") for j in range(words)
    )[:length]


def workload_order(frame_counts: list[int]) -> list[tuple[int, int]]:
    """Global frame order as (flow, k): by virtual time (2k+1)/(2 n_f), ties by flow index."""
    keys = [
        (Fraction(2 * k + 1, 2 * n), f, k) for f, n in enumerate(frame_counts) for k in range(n)
    ]
    return [(f, k) for _, f, k in sorted(keys)]


def workload_timestamp(start_ns: int, interframe_ps: int, j: int) -> int:
    """Timestamp of global frame j."""
    return start_ns + (j * interframe_ps) // 1000
