"""Window records written from docs/ledger-format.md ("Window records") alone: an independent
implementation that does not import ledgertool (tests/test_window_independent.py compares its bytes
with the native accumulator's, and checks that this module imports no ledgertool code).

Plain Python and `cryptography` (AES-128, HKDF-SHA256); slow, and meant to be read."""

from __future__ import annotations

import struct

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

P = 2**127 - 1
GAP = 0x8000


def window_keys(
    master: bytes, algorithm: str, ledger_id: str, link: str, window_ns: int
) -> tuple[bytes, bytes]:
    info = b"\x00".join(
        [
            b"ledgertool window v1",
            algorithm.encode(),
            ledger_id.encode(),
            link.encode(),
            str(window_ns).encode(),
        ]
    )
    okm = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(master)
    return okm[:16], okm[16:]


def _aes(key: bytes):
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update


def element(aes, digest: bytes) -> bytes:
    """F(d): AES of a 16-byte digest; for 32 bytes the CBC-MAC AES(AES(d0) xor d1)."""
    f = aes(digest[:16])
    for at in range(16, len(digest), 16):
        f = aes(bytes(a ^ b for a, b in zip(f, digest[at : at + 16])))
    return f


def cells_of(f: bytes, cells: int) -> list[int]:
    part, x = cells // 3, int.from_bytes(f[:8], "little")
    return [j * part + ((((x >> (21 * j)) & (2**21 - 1)) * part) >> 21) for j in range(3)]


def record(
    kf: bytes,
    kpad: bytes,
    window_ns: int,
    index: int,
    cells: int,
    dsize: int,
    frames: list[tuple[int, bytes]],
    drops: int,
    late: int,
) -> bytes:
    """One window's record; frames = [(wire_len, digest)]."""
    aes = _aes(kf)
    total, count, check, xor = 0, [0] * cells, [0] * cells, [0] * cells
    for _, d in frames:
        f = element(aes, d)
        total += int.from_bytes(f, "little")
        for c in cells_of(f, cells):
            count[c] += 1
            check[c] ^= int.from_bytes(f[8:], "little")
            xor[c] ^= int.from_bytes(d, "little")
    head = struct.pack("<4sBBHII", b"LTWN", 1, 3, dsize, cells, 0)
    head += struct.pack(
        "<QqQQQQ", window_ns, index, len(frames), sum(w for w, _ in frames), drops, late
    )
    body = (total % P).to_bytes(16, "little") + b"".join(
        struct.pack("<IQ", count[i] % 2**32, check[i]) + xor[i].to_bytes(dsize, "little")
        for i in range(cells)
    )
    pad = _aes(kpad)(b"".join(struct.pack("<qQ", index, j) for j in range((len(body) + 15) // 16)))
    return head + bytes(a ^ b for a, b in zip(body, pad))


def windows(records, kf: bytes, kpad: bytes, window_ns: int, cells: int, dsize: int) -> list[bytes]:
    """Every record of a run: records = [(ts_ns, wire_len, flags, aux, digest)] in capture order;
    the assignment rule of the document (never an earlier window than the open one, or than the
    one after the last emitted)."""
    out, cur, floor = [], None, None
    frames, drops, late = [], 0, 0
    for ts, wire, flags, aux, digest in records:
        w = ts // window_ns
        if cur is not None and w > cur:
            out.append(record(kf, kpad, window_ns, cur, cells, dsize, frames, drops, late))
            floor, cur, frames, drops, late = cur + 1, None, [], 0, 0
        is_late = 0
        if cur is not None and w < cur:
            w, is_late = cur, 1
        elif cur is None and floor is not None and w < floor:
            w, is_late = floor, 1
        if cur is None:
            cur = w
        if flags & GAP:
            drops += aux
        else:
            frames.append((wire, digest))
            late += is_late
    if cur is not None:
        out.append(record(kf, kpad, window_ns, cur, cells, dsize, frames, drops, late))
    return out
