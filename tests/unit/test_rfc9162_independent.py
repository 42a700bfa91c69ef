"""The ledger's trees check with an RFC 9162 implementation the project did not write:
tests/rfc9162_reference.py, written from the RFC text. Known answers first (the RFC's
s2.1.5 example and the transcribed transparency-dev vectors), then the project's Merkle roots,
`prove` inclusion proofs and `check-consistency` proofs on ledgers written by the CLI's capture.
Records, seal hashes and checkpoint roots are recomputed here from the documented formats
(docs/ledger-format.md's worked examples: pyarrow, rfc8785, struct), not read through ledgertool:
a v1 segment's records from its Parquet file, a v2 segment's from its raw record file (the ledger
fixture makes one ledger of each format)."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import rfc8785
import rfc9162_reference as ref
from conftest import SAMPLES, TESTS, cli, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.seal import merkle

VECTORS = json.loads((TESTS / "vectors" / "merkle_rfc9162.json").read_text())
D = [bytes.fromhex(x) for x in VECTORS["leaves"]]


def unhex(xs: list[str]) -> list[bytes]:
    return [bytes.fromhex(x) for x in xs]


# ---- the reference against known answers ------------------------------------------------------


def test_reference_matches_the_transcribed_vectors():
    for n, root in enumerate(unhex(VECTORS["roots"])):
        assert ref.mth(D[:n]) == root
    for case in VECTORS["inclusion_proofs"]:
        i, n, p = case["leaf_index"], case["tree_size"], unhex(case["proof"])
        assert ref.path(i, D[:n]) == p
        assert ref.verify_inclusion(i, n, ref.leaf_hash(D[i]), p, ref.mth(D[:n]))
    for case in VECTORS["consistency_proofs"]:
        m, n, p = case["old_size"], case["new_size"], unhex(case["proof"])
        assert ref.proof(m, D[:n]) == p
        assert ref.verify_consistency(m, n, ref.mth(D[:m]), ref.mth(D[:n]), p)


def test_reference_reproduces_the_rfc_example_tree():
    """RFC 9162 s2.1.5: the 7-leaf tree with nodes a..l and its stated proofs."""
    d = D[:7]
    a, b, c, dd, e, f = (ref.leaf_hash(x) for x in d[:6])
    j = ref.leaf_hash(d[6])
    g, h, i = ref.mth(d[0:2]), ref.mth(d[2:4]), ref.mth(d[4:6])
    k, l = ref.mth(d[0:4]), ref.mth(d[4:7])  # noqa: E741 (the RFC names the nodes a..l)
    assert a != b and i == hashlib.sha256(b"\x01" + e + f).digest()
    assert ref.mth(d) == hashlib.sha256(b"\x01" + k + l).digest()
    assert ref.path(0, d) == [b, h, l]
    assert ref.path(3, d) == [c, g, l]
    assert ref.path(4, d) == [f, j, k]
    assert ref.path(6, d) == [i, k]
    assert ref.proof(3, d) == [c, dd, g, l]
    assert ref.proof(4, d) == [l]
    assert ref.proof(6, d) == [i, j, k]
    assert ref.mth(d[:4]) == k and ref.mth(d[:6]) == hashlib.sha256(b"\x01" + k + i).digest()


def test_reference_verifiers_refuse_what_they_must():
    d = D[:7]
    root, p = ref.mth(d), ref.path(4, d)
    lh = ref.leaf_hash(d[4])
    assert ref.verify_inclusion(4, 7, lh, p, root)
    assert not ref.verify_inclusion(5, 7, lh, p, root)
    assert not ref.verify_inclusion(4, 5, lh, p, root)  # (4, 8) would pass: same hashing order
    assert not ref.verify_inclusion(7, 7, lh, p, root)
    assert not ref.verify_inclusion(4, 7, lh, p[:-1], root)
    assert not ref.verify_inclusion(4, 7, lh, p + [root], root)
    assert not ref.verify_inclusion(4, 7, ref.leaf_hash(d[3]), p, root)
    old, cp = ref.mth(d[:3]), ref.proof(3, d)
    assert ref.verify_consistency(3, 7, old, root, cp)
    assert not ref.verify_consistency(3, 7, ref.mth(d[:4]), root, cp)
    assert not ref.verify_consistency(3, 6, old, ref.mth(d[:6]), cp)
    assert not ref.verify_consistency(3, 7, old, root, cp[:-1])
    assert not ref.verify_consistency(3, 7, old, root, [])
    assert not ref.verify_consistency(3, 7, old, root, cp[:1] + [bytes(32)] + cp[2:])
    assert ref.verify_consistency(7, 7, root, root, []) and not ref.verify_consistency(
        7, 7, root, old, []
    )


def test_project_proofs_verify_with_the_rfc_algorithms():
    """Every leaf and every old size of trees of 1..40 leaves: the project's generators give the
    RFC's proofs, and the RFC's s2.1.3.2 and s2.1.4.2 algorithms accept them."""
    for n in range(1, 41):
        d = [b"entry %d" % i for i in range(n)]
        hashes = [merkle.leaf_hash(x) for x in d]
        root = ref.mth(d)
        assert merkle.root_from_leaf_hashes(hashes) == root
        for i in range(n):
            p = merkle.inclusion_proof(i, hashes)
            assert p == ref.path(i, d) and ref.verify_inclusion(i, n, hashes[i], p, root)
        for m in range(1, n + 1):
            p = merkle.consistency_proof(m, hashes)
            assert p == ref.proof(m, d)
            assert ref.verify_consistency(m, n, ref.mth(d[:m]), root, p)


# ---- real ledgers -----------------------------------------------------------------------------

RECORD = struct.Struct("<QqIIHHI")


def segment_records(ledger: Path, seal: dict) -> list[bytes]:
    """The segment's raw records as docs/ledger-format.md says: rebuilt from the Parquet columns
    (the v1 seal names the file), or the blocks of the raw record file seg-N.rec (v2) unframed:
    after its 256-byte header, each block is u32 count, count records, a 32-byte MAC."""
    size = seal["record_size"]
    if "parquet_file" in seal:
        return [
            RECORD.pack(
                r["seq"],
                r["ts_ns"],
                r["wire_len"],
                r["cap_len"],
                r["flags"],
                r["linktype"],
                r["aux"],
            )
            + r["digest"]
            for r in pq.read_table(ledger / "link=link0" / seal["parquet_file"]).to_pylist()
        ]
    data = (ledger / "link=link0" / f"seg-{seal['segment']:08d}.rec").read_bytes()
    assert data[:8] == b"LTSEGv2\n"
    out, pos = [], 256
    while pos < len(data):
        (count,) = struct.unpack_from("<I", data, pos)
        out += [data[pos + 4 + k * size : pos + 4 + (k + 1) * size] for k in range(count)]
        pos += 4 + count * size + 32
    assert pos == len(data)
    return out


def seal_hash(seal: dict) -> bytes:
    """SHA-256 of the RFC 8785 JSON of the seal without its signatures (docs/ledger-format.md)."""
    return hashlib.sha256(
        rfc8785.dumps({k: v for k, v in seal.items() if k != "signatures"})
    ).digest()


def seals(ledger: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(ledger.glob("link=link0/seg-*.seal.json"))]


def note_tree(note: bytes) -> tuple[int, bytes]:
    """(tree size, root hash) of a c2sp.org/tlog-checkpoint note: lines 2 and 3 of its body."""
    lines = note.decode().split("\n")
    return int(lines[1]), base64.b64decode(lines[2], validate=True)


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def ledger(request, tmp_path, built_ledger) -> Path:
    """Three segments (100, 100, 94 records), leaf blocks of 8: a short last block in each; of
    ledger format v1 (Parquet) or v2 (raw record files)."""
    out = built_ledger(
        SAMPLES / "sample.pcapng", segment_records=100, leaf_records=8, ledger_format=request.param
    ).copy_to(tmp_path / "L")
    assert (
        json.loads((out / "ledger.json").read_text())["format"]
        == f"ledgertool-ledger-v{request.param}"
    )
    return out


def test_segment_roots_are_rfc9162_roots_of_their_record_blocks(ledger):
    leaf = json.loads((ledger / "ledger.json").read_text())["leaf_records"]
    assert leaf == 8
    docs = seals(ledger)
    assert [s["records"] for s in docs] == [100, 100, 94]
    for s in docs:
        recs = segment_records(ledger, s)
        assert len(recs) == s["records"] and {len(r) for r in recs} == {48}
        blocks = [b"".join(recs[i : i + leaf]) for i in range(0, len(recs), leaf)]
        assert ref.mth(blocks).hex() == s["merkle_root"]


def test_checkpoint_root_is_the_rfc9162_root_of_the_seal_hashes(ledger):
    size, root = note_tree((ledger / "checkpoint").read_bytes())
    assert size == 3 and root == ref.mth([seal_hash(s) for s in seals(ledger)])


@pytest.mark.parametrize("seq", [0, 7, 8, 99, 100, 150, 287, 288, 293])
def test_prove_output_verifies_with_the_reference(ledger, tmp_path, seq):
    out = tmp_path / "p.json"
    r = cli("prove", ledger, "--seq", seq, "--out", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    seal, block = doc["seal"], bytes.fromhex(doc["leaf_block"]["hex"])
    i, n = doc["leaf_index"], doc["tree_size"]
    assert (i, n) == (doc["record_index"] // 8, -(-seal["records"] // 8))
    # the record is its entry in the block: seq is the first 8 bytes, little-endian
    at = (doc["record_index"] - doc["leaf_block"]["first_record_index"]) * 48
    assert struct.unpack_from("<Q", block, at)[0] == seq
    path = unhex(doc["audit_path"])
    assert ref.verify_inclusion(
        i, n, ref.leaf_hash(block), path, bytes.fromhex(seal["merkle_root"])
    )
    recs = segment_records(ledger, seal)
    assert path == ref.path(i, [b"".join(recs[j : j + 8]) for j in range(0, len(recs), 8)])
    # the seal hash up to the signed checkpoint root
    cp = doc["checkpoint"]
    size, root = note_tree(cp["note"].encode())
    assert (cp["leaf_index"], cp["tree_size"]) == (seal["segment"], size) == (doc["segment"], 3)
    cpath = unhex(cp["audit_path"])
    assert ref.verify_inclusion(cp["leaf_index"], size, ref.leaf_hash(seal_hash(seal)), cpath, root)
    assert cpath == ref.path(cp["leaf_index"], [seal_hash(s) for s in seals(ledger)])
    # and a wrong block does not: the check above can fail
    assert not ref.verify_inclusion(
        i,
        n,
        ref.leaf_hash(block[:-1] + bytes([block[-1] ^ 1])),
        path,
        bytes.fromhex(seal["merkle_root"]),
    )


@pytest.fixture(scope="module")
def seven(tmp_path_factory, keydir) -> tuple[Path, dict[int, Path]]:
    """A ledger after each of seven captures of one segment, and the checkpoint each capture
    stored: tree sizes 1..7, powers of two and not. A new ledger's default format (v2)."""
    dk, sk, _ = load_keys(keydir)
    d = tmp_path_factory.mktemp("seven")
    led, notes = d / "L", {}
    for _ in range(7):
        capture_file(
            SAMPLES / "sample.pcapng", led, digest_key=dk, signing_key=sk, segment_records=1000
        )
        note = (led / "checkpoint").read_bytes()
        size, _ = note_tree(note)
        notes[size] = d / f"cp{size}"
        notes[size].write_bytes(note)
    assert sorted(notes) == list(range(1, 8))
    return led, notes


def consistency(led: Path, old: Path, new: Path, pub: Path) -> dict:
    r = cli("check-consistency", old, new, "--ledger", led, "--trust", pub, "--json")
    assert r.returncode == 0, (old, new, r.stdout, r.stderr)
    return json.loads(r.stdout)


def test_check_consistency_proofs_verify_with_the_reference(seven, keydir):
    """The consistency proof check-consistency prints (from every old size below 4 and 7, some
    others, and equal sizes) is the RFC's PROOF(m, D[n]) and passes s2.1.4.2 against the two
    signed roots."""
    led, notes = seven
    entries = [seal_hash(s) for s in seals(led)]
    pairs = [(m, n) for n in (4, 7) for m in range(1, n)] + [(2, 3), (3, 5), (5, 6), (5, 5)]
    for m, n in pairs:
        res = consistency(led, notes[m], notes[n], keydir / "verifier.pub")
        old_root, new_root = bytes.fromhex(res["old_root"]), bytes.fromhex(res["new_root"])
        assert (res["old_size"], res["new_size"]) == (m, n)
        assert (old_root, new_root) == (
            note_tree(notes[m].read_bytes())[1],
            note_tree(notes[n].read_bytes())[1],
        )
        assert (old_root, new_root) == (ref.mth(entries[:m]), ref.mth(entries[:n]))
        proof = unhex(res["proof"])
        assert proof == ref.proof(m, entries[:n])
        assert ref.verify_consistency(m, n, old_root, new_root, proof)


# ---- Go's golang.org/x/mod/sumdb/tlog, where installed ----------------------------------------

GOPATH = Path("/usr/share/gocode")  # Debian's golang-golang-x-mod-dev
