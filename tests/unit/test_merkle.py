"""RFC 9162 s2.1 Merkle tree: published known answers, an RFC-text reference, properties."""

from __future__ import annotations

import hashlib
import json

import pytest
from conftest import TESTS
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool.seal import merkle
from ledgertool.seal.merkle import (
    EMPTY_ROOT,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    records_root,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)

VECTORS = json.loads((TESTS / "vectors" / "merkle_rfc9162.json").read_text())
LEAVES = [bytes.fromhex(x) for x in VECTORS["leaves"]]
LEAF_HASHES = [leaf_hash(x) for x in LEAVES]
ROOTS = [bytes.fromhex(x) for x in VECTORS["roots"]]


def unhex(xs):
    return [bytes.fromhex(x) for x in xs]


# --------------------------------------------------------------------------- reference
# A direct transcription of the RFC 9162 s2.1 recursive definitions, used only as an
# independent oracle for small trees (quadratic slicing is fine here).


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(d: list[bytes]) -> bytes:
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return hashlib.sha256(b"\x00" + d[0]).digest()
    k = _k(len(d))
    return hashlib.sha256(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:])).digest()


def ref_path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return ref_path(m, d[:k]) + [ref_mth(d[k:])]
    return ref_path(m - k, d[k:]) + [ref_mth(d[:k])]


def ref_subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [ref_mth(d)]
    k = _k(n)
    if m <= k:
        return ref_subproof(m, d[:k], b) + [ref_mth(d[k:])]
    return ref_subproof(m - k, d[k:], False) + [ref_mth(d[:k])]


def data(n: int) -> list[bytes]:
    """n distinct leaf inputs."""
    return [b"leaf %d" % i for i in range(n)]


def flip(h: bytes, bit: int = 0) -> bytes:
    return bytes([h[0] ^ (1 << bit)]) + h[1:]


# --------------------------------------------------------------------------- known answers


def test_vector_file_names_its_source():
    sources = VECTORS["source"]
    assert sources and all(s["repository"] and s["path"] for s in sources)


def test_empty_root_is_sha256_of_empty_string():
    assert EMPTY_ROOT == hashlib.sha256(b"").digest() == ROOTS[0]
    assert root_from_leaf_hashes([]) == EMPTY_ROOT


def test_leaf_hashes_match_published():
    assert [h.hex() for h in LEAF_HASHES] == VECTORS["node_hashes"][0]


@pytest.mark.parametrize("size", range(9))
def test_roots_match_published(size):
    assert root_from_leaf_hashes(LEAF_HASHES[:size]) == ROOTS[size]


def test_complete_subtree_hashes_match_published():
    for level, row in enumerate(VECTORS["node_hashes"]):
        width = 1 << level
        for i, expected in enumerate(row):
            got = root_from_leaf_hashes(LEAF_HASHES[i * width : (i + 1) * width])
            assert got.hex() == expected, (level, i)


def test_node_hash_definition():
    a, b = LEAF_HASHES[0], LEAF_HASHES[1]
    assert node_hash(a, b) == hashlib.sha256(b"\x01" + a + b).digest()
    assert node_hash(a, b).hex() == VECTORS["node_hashes"][1][0]
    with pytest.raises(ValueError):
        node_hash(a, b[:31])


@pytest.mark.parametrize(
    "vec", VECTORS["inclusion_proofs"], ids=lambda v: f"{v['leaf_index']}of{v['tree_size']}"
)
def test_inclusion_proofs_match_published(vec):
    i, n = vec["leaf_index"], vec["tree_size"]
    proof = unhex(vec["proof"])
    assert inclusion_proof(i, LEAF_HASHES[:n]) == proof
    assert verify_inclusion(LEAF_HASHES[i], i, n, proof, ROOTS[n])


@pytest.mark.parametrize(
    "vec", VECTORS["consistency_proofs"], ids=lambda v: f"{v['old_size']}to{v['new_size']}"
)
def test_consistency_proofs_match_published(vec):
    m, n = vec["old_size"], vec["new_size"]
    proof = unhex(vec["proof"])
    assert consistency_proof(m, LEAF_HASHES[:n]) == proof
    assert verify_consistency(m, n, ROOTS[m], ROOTS[n], proof)


@pytest.mark.parametrize(
    "vec",
    [v for v in VECTORS["inclusion_proofs"] if v["proof"]],
    ids=lambda v: f"{v['leaf_index']}of{v['tree_size']}",
)
def test_corrupted_inclusion_proofs_fail(vec):
    i, n = vec["leaf_index"], vec["tree_size"]
    proof, root, lh = unhex(vec["proof"]), ROOTS[n], LEAF_HASHES[i]
    some = bytes(range(32))
    bad = [
        (lh, i - 1, n, proof, root),
        (lh, i + 1, n, proof, root),
        (lh, i ^ 2, n, proof, root),
        (lh, i, n * 2, proof, root),
        (lh, i, n // 2, proof, root),
        (leaf_hash(b"WrongLeaf"), i, n, proof, root),
        (lh, i, n, proof, EMPTY_ROOT),
        (lh, i, n, proof, some),
        (lh, i, n, proof + [root], root),
        (lh, i, n, [root] + proof, root),
        (lh, i, n, proof[:-1], root),
        (lh, i, n, [proof[0], some] + proof[1:], root),
    ]
    bad += [
        (lh, i, n, proof[:j] + [flip(proof[j], 3)] + proof[j + 1 :], root)
        for j in range(len(proof))
    ]
    for args in bad:
        assert not verify_inclusion(*args), args[1:3]


@pytest.mark.parametrize(
    "vec",
    [v for v in VECTORS["consistency_proofs"] if v["proof"]],
    ids=lambda v: f"{v['old_size']}to{v['new_size']}",
)
def test_corrupted_consistency_proofs_fail(vec):
    m, n = vec["old_size"], vec["new_size"]
    proof, r1, r2 = unhex(vec["proof"]), ROOTS[m], ROOTS[n]
    bad = [
        (m - 1, n, r1, r2, proof),
        (m + 1, n, r1, r2, proof),
        (m ^ 2, n, r1, r2, proof),
        (m, n * 2, r1, r2, proof),
        (m, n // 2, r1, r2, proof),
        (m, n, flip(r1), r2, proof),
        (m, n, r1, flip(r2), proof),
        (m, n, r2, r1, proof),
        (m, n, r1, r2, []),
        (m, n, r1, r2, proof + [r1]),
        (m, n, r1, r2, proof + [r2]),
        (m, n, r1, r2, [r1] + proof),
        (m, n, r1, r2, [r2] + proof),
        (m, n, r1, r2, [proof[0]] + proof),
        (m, n, r1, r2, proof[:-1]),
    ]
    bad += [
        (m, n, r1, r2, proof[:j] + [flip(proof[j], 4)] + proof[j + 1 :]) for j in range(len(proof))
    ]
    for args in bad:
        assert not verify_consistency(*args), args[:2]


# --------------------------------------------------------------------------- edge cases


def test_consistency_edge_cases():
    r = ROOTS[3]
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert verify_consistency(0, 5, EMPTY_ROOT, ROOTS[5], [])
    assert not verify_consistency(0, 5, r, ROOTS[5], [])  # size 0 has exactly one root
    assert verify_consistency(3, 3, r, r, [])
    assert not verify_consistency(3, 3, r, ROOTS[4], [])
    assert not verify_consistency(3, 3, r, r, [r])
    assert not verify_consistency(4, 3, ROOTS[4], r, [])
    assert not verify_consistency(-1, 3, r, r, [])
    assert not verify_consistency(1, 2, ROOTS[1], ROOTS[2], [b"short"])
    assert not verify_consistency(1, 2, b"short", ROOTS[2], [LEAF_HASHES[1]])
    assert consistency_proof(0, LEAF_HASHES) == []
    assert consistency_proof(8, LEAF_HASHES) == []
    with pytest.raises(ValueError):
        consistency_proof(9, LEAF_HASHES)
    with pytest.raises(ValueError):
        consistency_proof(-1, LEAF_HASHES)


def test_inclusion_edge_cases():
    h = leaf_hash(b"data")
    assert verify_inclusion(h, 0, 1, [], h)
    assert not verify_inclusion(h, 0, 1, [], b"")
    assert not verify_inclusion(b"", 0, 1, [], h)
    for index, size in [(0, 0), (1, 0), (2, 1), (-1, 1)]:
        assert not verify_inclusion(h, index, size, [], h)
    for index in (-1, 8):
        with pytest.raises(ValueError):
            inclusion_proof(index, LEAF_HASHES)
    with pytest.raises(ValueError):
        inclusion_proof(0, [])
    with pytest.raises(ValueError):
        root_from_leaf_hashes([b"not a hash"])


# --------------------------------------------------------------------------- reference comparison


@pytest.mark.parametrize("n", range(0, 70))
def test_root_matches_rfc_recursive_definition(n):
    d = data(n)
    assert root_from_leaf_hashes([leaf_hash(x) for x in d]) == ref_mth(d)


@pytest.mark.parametrize("n", range(1, 34))
def test_proof_generators_match_rfc_recursive_definition(n):
    d = data(n)
    hashes = [leaf_hash(x) for x in d]
    for m in range(n):
        assert inclusion_proof(m, hashes) == ref_path(m, d)
    for m in range(1, n):
        assert consistency_proof(m, hashes) == ref_subproof(m, d, True)


def test_all_consistency_proofs_up_to_40():
    hashes = [leaf_hash(x) for x in data(40)]
    roots = [root_from_leaf_hashes(hashes[:n]) for n in range(41)]
    for new in range(41):
        for old in range(new + 1):
            proof = consistency_proof(old, hashes[:new])
            assert verify_consistency(old, new, roots[old], roots[new], proof), (old, new)
            if 0 < old < new:
                assert not verify_consistency(old, new, roots[old], flip(roots[new]), proof)
                assert not verify_consistency(old, new, flip(roots[old]), roots[new], proof)


# --------------------------------------------------------------------------- properties


@st.composite
def tree_and_index(draw, max_size=64):
    n = draw(st.integers(1, max_size))
    i = draw(st.integers(0, n - 1))
    salt = draw(st.binary(max_size=8))
    return [salt + b"/%d" % k for k in range(n)], i


@given(tree_and_index(), st.data())
@settings(max_examples=200, deadline=None)
def test_inclusion_property(case, draw):
    d, i = case
    n = len(d)
    hashes = [leaf_hash(x) for x in d]
    root = root_from_leaf_hashes(hashes)
    proof = inclusion_proof(i, hashes)
    assert verify_inclusion(hashes[i], i, n, proof, root)
    assert not verify_inclusion(leaf_hash(d[i] + b"x"), i, n, proof, root)
    if n > 1:
        j = draw.draw(st.integers(0, n - 1).filter(lambda j: j != i))
        assert not verify_inclusion(hashes[i], j, n, proof, root)
        assert not verify_inclusion(hashes[j], i, n, proof, root)


@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(1, n), st.integers(0, n - 1))
    )
)
@settings(max_examples=200, deadline=None)
def test_consistency_fails_when_an_old_leaf_changes(case):
    new, old, j = case
    d = data(new)
    hashes = [leaf_hash(x) for x in d]
    changed = list(hashes)
    changed[j] = leaf_hash(b"changed")
    old_root = root_from_leaf_hashes(hashes[:old])
    new_root = root_from_leaf_hashes(hashes)
    changed_root = root_from_leaf_hashes(changed)
    proof_from_changed = consistency_proof(old, changed)
    if j < old:
        # The rewritten tree no longer extends the old one.
        assert not verify_consistency(old, new, old_root, changed_root, proof_from_changed)
    if old < new:
        # The honest proof does not vouch for a different new root.
        assert not verify_consistency(
            old, new, old_root, changed_root, consistency_proof(old, hashes)
        )
        assert verify_consistency(old, new, old_root, new_root, consistency_proof(old, hashes))


@given(
    record_size=st.integers(1, 64),
    leaf_records=st.integers(1, 9),
    count=st.integers(0, 60),
    seed=st.binary(min_size=1, max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_records_root_equals_manual_blocks(record_size, leaf_records, count, seed):
    records = hashlib.shake_256(seed).digest(record_size * count) if count else b""
    blocks = [
        records[i * record_size : (i + leaf_records) * record_size]
        for i in range(0, count, leaf_records)
    ]
    expected = root_from_leaf_hashes([hashlib.sha256(b"\x00" + blk).digest() for blk in blocks])
    assert records_root(records, record_size, leaf_records) == expected
    assert records_root(memoryview(records), record_size, leaf_records) == expected
    assert records_root(bytearray(records), record_size, leaf_records) == expected


def test_records_root_rejects_partial_record():
    with pytest.raises(ValueError, match="multiple"):
        records_root(b"\x00" * 49, 48, 4)


@pytest.mark.parametrize(
    "record_size,leaf_records", [(0, 1), (48, 0), (-48, 1), (48, -1), (48, True)]
)
def test_records_root_rejects_bad_sizes(record_size, leaf_records):
    with pytest.raises(ValueError):
        records_root(b"", record_size, leaf_records)


def test_records_root_empty_and_single():
    assert records_root(b"", 48, 16) == EMPTY_ROOT
    rec = bytes(range(48))
    assert records_root(rec, 48, 16) == leaf_hash(rec)


def test_records_root_one_million_records():
    record_size, leaf_records, count = 48, 1024, 1_000_000
    records = hashlib.shake_256(b"ledgertool merkle test").digest(record_size * count)
    block = record_size * leaf_records
    expected = root_from_leaf_hashes(
        [leaf_hash(records[i : i + block]) for i in range(0, len(records), block)]
    )
    assert records_root(records, record_size, leaf_records) == expected
    # A one-bit change in the last record changes the root.
    tampered = bytearray(records)
    tampered[-1] ^= 1
    assert records_root(tampered, record_size, leaf_records) != expected


def test_module_exports():
    for name in merkle.__all__:
        assert hasattr(merkle, name)
