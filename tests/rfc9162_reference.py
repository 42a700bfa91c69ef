"""An independent RFC 9162 section 2.1 implementation for the tests.

Written from the RFC text, not from ledgertool/seal/merkle.py, and deliberately in the RFC's own
shape so a reader can hold it next to the RFC:

* s2.1.1   ``mth``: the Merkle Tree Hash, recursive, k = the largest power of two smaller than n.
* s2.1.3.1 ``path``: the inclusion proof PATH(m, D[n]), recursive.
* s2.1.3.2 ``verify_inclusion``: the RFC's numbered verification algorithm, step by step.
* s2.1.4.1 ``proof``: the consistency proof PROOF(m, D[n]) = SUBPROOF(m, D[n], true).
* s2.1.4.2 ``verify_consistency``: the RFC's numbered verification algorithm, step by step.

Inputs are the leaf *entries* d(i) (bytes); the leaf hash is HASH(0x00 || d(i)). HASH is SHA-256
(the hash algorithm of the ledger's trees). Quadratic slicing; meant for test-sized trees.
"""

from __future__ import annotations

import hashlib


def _hash(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def leaf_hash(entry: bytes) -> bytes:
    """MTH({d(0)}) = HASH(0x00 || d(0))."""
    return _hash(b"\x00" + entry)


def _k(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while k << 1 < n:
        k <<= 1
    return k


def mth(d: list[bytes]) -> bytes:
    """s2.1.1: MTH(D[n]) over entries, MTH({}) = HASH()."""
    n = len(d)
    if n == 0:
        return _hash(b"")
    if n == 1:
        return leaf_hash(d[0])
    k = _k(n)
    return _hash(b"\x01" + mth(d[:k]) + mth(d[k:]))


def path(m: int, d: list[bytes]) -> list[bytes]:
    """s2.1.3.1: PATH(m, D[n]), the audit path of entry m, leaf level first."""
    n = len(d)
    if not 0 <= m < n:
        raise ValueError(f"leaf {m} is not in a tree of {n} leaves")
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return path(m, d[:k]) + [mth(d[k:])]
    return path(m - k, d[k:]) + [mth(d[:k])]


def _subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [mth(d)]
    k = _k(n)
    if m <= k:
        return _subproof(m, d[:k], b) + [mth(d[k:])]
    return _subproof(m - k, d[k:], False) + [mth(d[:k])]


def proof(m: int, d: list[bytes]) -> list[bytes]:
    """s2.1.4.1: PROOF(m, D[n]) for 0 < m < n; the RFC gives no proof for m = n (it is empty)."""
    n = len(d)
    if not 0 < m <= n:
        raise ValueError(f"no consistency proof from {m} to {n} leaves")
    return [] if m == n else _subproof(m, d, True)


def _lsb(x: int) -> int:
    return x & 1


def verify_inclusion(
    leaf_index: int, tree_size: int, hash_: bytes, inclusion_path: list[bytes], root_hash: bytes
) -> bool:
    """s2.1.3.2, with ``hash_`` the leaf hash HASH(0x00 || entry). True iff the proof verifies."""
    # 1. leaf_index >= tree_size: fail
    if leaf_index >= tree_size:
        return False
    # 2. fn = leaf_index, sn = tree_size - 1
    fn, sn = leaf_index, tree_size - 1
    # 3. r = hash
    r = hash_
    # 4. for each p in inclusion_path
    for p in inclusion_path:
        # a. sn == 0: fail
        if sn == 0:
            return False
        # b. LSB(fn) set or fn == sn
        if _lsb(fn) or fn == sn:
            r = _hash(b"\x01" + p + r)
            if not _lsb(fn):
                while not (_lsb(fn) or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            r = _hash(b"\x01" + r + p)
        # c. shift both once
        fn >>= 1
        sn >>= 1
    # 5. sn == 0 and r == root_hash
    return sn == 0 and r == root_hash


def verify_consistency(
    first: int, second: int, first_hash: bytes, second_hash: bytes, consistency_path: list[bytes]
) -> bool:
    """s2.1.4.2 for 0 < first < second. Outside the RFC's algorithm: first == second is consistent
    exactly when the path is empty and the roots are equal (the RFC defines no proof for it)."""
    if not 0 < first <= second:
        return False
    if first == second:
        return not consistency_path and first_hash == second_hash
    # 1. an empty path: fail
    if not consistency_path:
        return False
    path_ = list(consistency_path)
    # 2. first an exact power of 2: prepend first_hash
    if first & (first - 1) == 0:
        path_.insert(0, first_hash)
    # 3. fn = first - 1, sn = second - 1
    fn, sn = first - 1, second - 1
    # 4. LSB(fn) set: shift both until it is not
    while _lsb(fn):
        fn >>= 1
        sn >>= 1
    # 5. fr = sr = the first value of the path
    fr = sr = path_[0]
    # 6. each subsequent value c
    for c in path_[1:]:
        # a. sn == 0: fail
        if sn == 0:
            return False
        # b. LSB(fn) set or fn == sn
        if _lsb(fn) or fn == sn:
            fr = _hash(b"\x01" + c + fr)
            sr = _hash(b"\x01" + c + sr)
            if not _lsb(fn):
                while not (_lsb(fn) or fn == 0):
                    fn >>= 1
                    sn >>= 1
        else:
            sr = _hash(b"\x01" + sr + c)
        # c. shift both once
        fn >>= 1
        sn >>= 1
    # 7. fr == first_hash, sr == second_hash, sn == 0
    return fr == first_hash and sr == second_hash and sn == 0
