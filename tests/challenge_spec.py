"""The audit challenge's derivation written from docs/transparency.md ("The challenge
derivation") alone, importing no ledgertool code: the prover commitment, the seed, the stream
and the sample without replacement, and the escape probability of a sample."""

from __future__ import annotations

import hashlib
from fractions import Fraction


def commitment(text: bytes, prover_nonce: bytes) -> bytes:
    h = hashlib.sha256(b"ledgertool challenge commitment v1" + b"\x00")
    h.update(hashlib.sha256(text).digest())
    h.update(prover_nonce)
    return h.digest()


def seed(
    text: bytes, tier: str, range_records: int, k: int, mode: str, a: bytes, b: bytes
) -> bytes:
    h = hashlib.sha256()
    h.update(b"ledgertool challenge v1\x00")
    h.update(len(text).to_bytes(4, "big") + text)
    h.update(bytes([len(tier)]) + tier.encode("ascii"))
    h.update(range_records.to_bytes(8, "big"))
    h.update(k.to_bytes(8, "big"))
    h.update(bytes([len(mode)]) + mode.encode("ascii"))
    h.update(len(a).to_bytes(2, "big") + a)
    h.update(len(b).to_bytes(2, "big") + b)
    return h.digest()


def sample(s: bytes, n: int, k: int) -> list[int]:
    """k distinct positions of range(n) in draw order."""
    out: list[int] = []
    j = 0
    bound = 2**64 - (2**64 % n)
    while len(out) < k:
        block = hashlib.sha256(b"ledgertool challenge stream v1\x00" + s + j.to_bytes(8, "big"))
        j += 1
        d = block.digest()
        for i in range(4):
            x = int.from_bytes(d[8 * i : 8 * i + 8], "big")
            if x < bound and x % n not in out:
                out.append(x % n)
                if len(out) == k:
                    break
    return out


def escape(n: int, k: int, bad: int) -> Fraction:
    """Exact hypergeometric P(no bad item among k of n)."""
    p = Fraction(1)
    for i in range(k):
        p *= Fraction(n - bad - i, n - i)
        if p == 0:
            break
    return p
