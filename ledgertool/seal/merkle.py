"""Merkle Tree Hash, inclusion and consistency proofs per RFC 9162 section 2.1.

Implements (SHA-256 throughout; every hash is 32 raw bytes):

* RFC 9162 s2.1.1   Merkle Tree Hash: ``MTH({}) = SHA-256()``, leaf hash
  ``SHA-256(0x00 || d)``, interior node ``SHA-256(0x01 || left || right)``, the
  tree split at the largest power of two smaller than the number of leaves.
* RFC 9162 s2.1.3   inclusion proofs: generation (s2.1.3.1) and verification
  (s2.1.3.2).
* RFC 9162 s2.1.4   consistency proofs: generation (s2.1.4.1) and verification
  (s2.1.4.2).
* ``records_root``: the ledger's per-segment root, where a leaf is a block of
  ``leaf_records`` consecutive fixed-size records (docs/ledger-format.md).

Everything here is pure: bytes in, bytes or bool out, no I/O.

Implementation note: the RFC defines MTH recursively.  Here every tree is
built bottom-up by pairing adjacent nodes level by level and carrying an odd
last node up unchanged.  That yields exactly the RFC's left-balanced tree, and
node ``i`` of level ``j`` is the MTH of leaves ``[i*2^j, min((i+1)*2^j, n))``
-- which is what the proof generators look up.  Cost is O(n) hashes and
O(n) memory for the proof generators; the verifiers are O(log n).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = [
    "HASH_SIZE",
    "EMPTY_ROOT",
    "leaf_hash",
    "node_hash",
    "root_from_leaf_hashes",
    "records_root",
    "records_leaf_hashes",
    "inclusion_proof",
    "verify_inclusion",
    "consistency_proof",
    "verify_consistency",
]

HASH_SIZE = 32
"""Size in bytes of every hash in the tree (SHA-256)."""

EMPTY_ROOT = hashlib.sha256(b"").digest()
"""MTH of the empty list: SHA-256 of the empty string (RFC 9162 s2.1.1)."""

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"
_LEAF_BASE = hashlib.sha256(_LEAF_PREFIX)


def leaf_hash(data: bytes | bytearray | memoryview) -> bytes:
    """Leaf hash ``SHA-256(0x00 || data)`` (RFC 9162 s2.1.1). Returns 32 bytes."""
    h = _LEAF_BASE.copy()
    h.update(data)
    return h.digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Interior node hash ``SHA-256(0x01 || left || right)`` (RFC 9162 s2.1.1).

    ``left`` and ``right`` are 32-byte child hashes; returns 32 bytes.
    Raises ValueError if a child is not 32 bytes.
    """
    if len(left) != HASH_SIZE or len(right) != HASH_SIZE:
        raise ValueError("node_hash: child hashes must be 32 bytes each")
    return hashlib.sha256(_NODE_PREFIX + bytes(left) + bytes(right)).digest()


def _node(left: bytes, right: bytes) -> bytes:
    # Unchecked variant for internal loops (inputs are our own 32-byte digests).
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _check_hashes(hashes: Sequence[bytes], what: str) -> list[bytes]:
    out = []
    for i, h in enumerate(hashes):
        if not isinstance(h, (bytes, bytearray, memoryview)) or len(h) != HASH_SIZE:
            raise ValueError(f"{what}[{i}] is not a 32-byte hash")
        out.append(bytes(h))
    return out


def _next_level(level: list[bytes]) -> list[bytes]:
    n = len(level)
    up = [_node(level[i], level[i + 1]) for i in range(0, n - 1, 2)]
    if n % 2:
        up.append(level[-1])  # odd node is carried up unchanged
    return up


def _levels(leaf_hashes: list[bytes]) -> list[list[bytes]]:
    """All levels of the tree, leaves first, root level (one node) last."""
    levels = [leaf_hashes]
    while len(levels[-1]) > 1:
        levels.append(_next_level(levels[-1]))
    return levels


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """Merkle Tree Hash over already-hashed leaves (RFC 9162 s2.1.1).

    ``hashes``: the leaf hashes (32 bytes each, as made by `leaf_hash`), in
    leaf order.  Returns the 32-byte root; the empty sequence gives
    `EMPTY_ROOT`.  Iterative, O(n) hashes.  Raises ValueError on a hash that
    is not 32 bytes.
    """
    level = _check_hashes(hashes, "hashes")
    if not level:
        return EMPTY_ROOT
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def records_root(
    records: bytes | bytearray | memoryview, record_size: int, leaf_records: int
) -> bytes:
    """Per-segment Merkle root over fixed-size records (RFC 9162 s2.1.1 tree).

    ``records``: the concatenated records of a segment, ``len(records)`` a
    multiple of ``record_size`` bytes.  Leaf ``i`` is the raw bytes of records
    ``[i*leaf_records, (i+1)*leaf_records)`` -- the last leaf may hold fewer
    records -- hashed as ``SHA-256(0x00 || block)``.  Zero records give
    `EMPTY_ROOT`.  Returns 32 bytes.

    Raises ValueError if ``record_size`` or ``leaf_records`` is not a positive
    int, or the length is not a whole number of records.

    Work is one hashlib call per leaf over memoryview slices (no copies, no
    per-record Python work).
    """
    leaves = records_leaf_hashes(records, record_size, leaf_records)
    if not leaves:
        return EMPTY_ROOT
    level = leaves
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def records_leaf_hashes(
    records: bytes | bytearray | memoryview, record_size: int, leaf_records: int
) -> list[bytes]:
    """Leaf hashes of the per-segment tree (see `records_root`): one 32-byte hash per block of
    ``leaf_records`` records, in order; empty for zero records. Same ValueErrors as
    `records_root`."""
    if not isinstance(record_size, int) or isinstance(record_size, bool) or record_size <= 0:
        raise ValueError(f"record_size must be a positive integer, got {record_size!r}")
    if not isinstance(leaf_records, int) or isinstance(leaf_records, bool) or leaf_records <= 0:
        raise ValueError(f"leaf_records must be a positive integer, got {leaf_records!r}")
    mv = memoryview(records).cast("B")
    total = len(mv)
    if total % record_size:
        raise ValueError(
            f"records length {total} is not a multiple of the record size {record_size} "
            f"({total % record_size} trailing bytes)"
        )
    block = record_size * leaf_records
    base = _LEAF_BASE
    leaves = []
    append = leaves.append
    for start in range(0, total, block):
        h = base.copy()
        h.update(mv[start : start + block])
        append(h.digest())
    return leaves


def inclusion_proof(index: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """Audit path for leaf ``index`` in the tree over ``leaf_hashes`` (RFC 9162 s2.1.3.1).

    ``index`` is 0-based; ``leaf_hashes`` are 32-byte leaf hashes.  Returns the
    list of 32-byte sibling hashes from the leaf level upwards (empty for a
    one-leaf tree).  Raises ValueError if ``index`` is not in ``[0, n)``.
    """
    hashes = _check_hashes(leaf_hashes, "leaf_hashes")
    n = len(hashes)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
        raise ValueError(f"leaf index {index!r} is outside a tree of {n} leaves")
    proof = []
    for level in _levels(hashes)[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            proof.append(level[sibling])
        # else: this node is carried up unchanged; no sibling at this level.
        index >>= 1
    return proof


def _subtree(levels: list[list[bytes]], start: int, end: int) -> bytes:
    """MTH of leaves [start, end) where the range is a node of the tree.

    Valid when ``start`` is a multiple of 2^j, 2^j >= end - start, and either
    ``end == start + 2^j`` or ``end`` is the tree size; every range that the
    RFC's recursive split produces has that shape.
    """
    j = (end - start - 1).bit_length()
    return levels[j][start >> j]


def consistency_proof(old_size: int, leaf_hashes: Sequence[bytes]) -> list[bytes]:
    """Consistency proof from the first ``old_size`` leaves to all of ``leaf_hashes``.

    RFC 9162 s2.1.4.1 ``PROOF(m, D[n]) = SUBPROOF(m, D[n], true)``.
    ``old_size`` must satisfy ``0 <= old_size <= n``; ``old_size`` 0 or ``n``
    gives the empty proof (nothing to prove).  Returns a list of 32-byte
    hashes.  Raises ValueError on an out-of-range size.
    """
    hashes = _check_hashes(leaf_hashes, "leaf_hashes")
    n = len(hashes)
    if not isinstance(old_size, int) or isinstance(old_size, bool) or not 0 <= old_size <= n:
        raise ValueError(f"old size {old_size!r} is outside [0, {n}]")
    if old_size in (0, n):
        return []
    levels = _levels(hashes)
    # Iterative SUBPROOF: each step appends the hash of the part it does not
    # descend into; the RFC concatenates those after the deeper result, so the
    # collected list is reversed at the end.
    m, start, end, complete = old_size, 0, n, True
    tail: list[bytes] = []
    while m != end - start:
        k = 1 << ((end - start - 1).bit_length() - 1)  # largest power of 2 < size
        if m <= k:
            tail.append(_subtree(levels, start + k, end))
            end = start + k
        else:
            tail.append(_subtree(levels, start, start + k))
            m -= k
            start += k
            complete = False
    if not complete:
        tail.append(_subtree(levels, start, end))
    tail.reverse()
    return tail


def _is_hash(h: object) -> bool:
    return isinstance(h, (bytes, bytearray, memoryview)) and len(h) == HASH_SIZE


def verify_inclusion(
    leaf_hash: bytes, index: int, tree_size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Check an inclusion proof (RFC 9162 s2.1.3.2).

    ``leaf_hash``: the 32-byte leaf hash; ``index``: its 0-based position;
    ``tree_size``: number of leaves; ``proof``: the audit path; ``root``: the
    trusted 32-byte root.  Returns True only if the path recomputes ``root``
    and is exactly as long as the tree requires.  Malformed input (wrong
    hash sizes, index out of range, negative sizes) gives False, never an
    exception.
    """
    if not (_is_hash(leaf_hash) and _is_hash(root)):
        return False
    if not all(_is_hash(p) for p in proof):
        return False
    if not (isinstance(index, int) and isinstance(tree_size, int)):
        return False
    if index < 0 or index >= tree_size:
        return False
    fn, sn = index, tree_size - 1
    r = bytes(leaf_hash)
    for p in proof:
        p = bytes(p)
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == bytes(root)


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Check that the tree of ``new_size`` leaves extends the one of ``old_size`` (RFC 9162
    s2.1.4.2).

    Roots are 32 bytes; ``proof`` is a list of 32-byte hashes.  The RFC
    covers ``0 < old_size < new_size``; the edge cases are decided as:
    ``old_size == new_size`` holds iff the proof is empty and the roots are
    equal; ``old_size == 0`` holds iff the proof is empty and ``old_root`` is
    `EMPTY_ROOT`; ``old_size > new_size`` or a negative size never holds.
    Returns a bool; malformed input gives False, never an exception.
    """
    if not (_is_hash(old_root) and _is_hash(new_root)):
        return False
    if not all(_is_hash(p) for p in proof):
        return False
    if not (isinstance(old_size, int) and isinstance(new_size, int)):
        return False
    if old_size < 0 or new_size < old_size:
        return False
    old_root, new_root = bytes(old_root), bytes(new_root)
    if old_size == new_size:
        return len(proof) == 0 and old_root == new_root
    if old_size == 0:
        return len(proof) == 0 and old_root == EMPTY_ROOT
    path = [bytes(p) for p in proof]
    # Step 1: an empty path cannot prove 0 < old < new.
    if not path:
        return False
    # Step 2: a power-of-two old tree is itself a node of the new tree.
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    # Steps 3-4.
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # Steps 5-6.
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = _node(c, fr)
            sr = _node(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = _node(sr, c)
        fn >>= 1
        sn >>= 1
    # Step 7.
    return sn == 0 and fr == old_root and sr == new_root
