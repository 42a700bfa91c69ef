"""Inclusion proofs, checkpoints (C2SP tlog-checkpoint signed notes), consistency between
checkpoints, and signing-key rotation: library and CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES, cli, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.errors import KeyFileError, LedgerFormatError
from ledgertool.keyfiles import SigningKey, generate_keys
from ledgertool.ledger.checkpoints import check_consistency
from ledgertool.ledger.layout import checkpoint_path
from ledgertool.ledger.rotations import rotate_keys
from ledgertool.ledger.sealer import load_seal
from ledgertool.seal import merkle
from ledgertool.seal.checkpoint import note_key_id, parse_note, tree_root, verify_note
from ledgertool.seal.document import seal_hash
from ledgertool.verify.ledger import verify_ledger
from ledgertool.verify.proof import build_proof, check_proof, parse_proof

SAMPLE = SAMPLES / "sample.pcapng"


@pytest.fixture()
def ledger(tmp_path, built_ledger) -> Path:
    return built_ledger(SAMPLE, segment_records=100, leaf_records=8).copy_to(tmp_path / "L")


# ---- checkpoints --------------------------------------------------------------------------


def test_checkpoint_is_a_c2sp_signed_note(ledger, keydir):
    _, _, trust = load_keys(keydir)
    data = (ledger / "checkpoint").read_bytes()
    assert data == checkpoint_path(ledger, "link0").read_bytes()
    text, _, sigs = data.decode().rpartition("\n\n")
    lines = (text + "\n").splitlines()
    lid = json.loads((ledger / "ledger.json").read_text())["ledger_id"]
    assert lines[0] == f"ledgertool/{lid}/link0" and lines[1] == "3"
    seals = [load_seal(p) for p in sorted(ledger.glob("link=link0/*.seal.json"))]
    leaves = [merkle.leaf_hash(bytes.fromhex(seal_hash(d))) for d in seals]
    assert (
        base64.b64decode(lines[2])
        == merkle.root_from_leaf_hashes(leaves)
        == tree_root([seal_hash(d) for d in seals])
    )
    assert f"records {sum(d.records for d in seals)}" in lines
    assert f"last-seal {seal_hash(seals[-1])}" in lines
    sig_lines = sigs.strip("\n").split("\n")
    assert len(sig_lines) == 2 and all(s.startswith(f"\u2014 ledgertool/{lid} ") for s in sig_lines)
    # Ed25519 key id per c2sp.org/signed-note: SHA-256(name || 0x0A || 0x01 || pubkey)[:4]
    name = f"ledgertool/{lid}"
    ed_pub = trust.public_keys["ed25519"]
    kid = hashlib.sha256(name.encode() + b"\n\x01" + ed_pub).digest()[:4]
    raw = base64.b64decode(sig_lines[0].split(" ")[2])
    assert raw[:4] == kid == note_key_id(name, "ed25519", ed_pub)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    Ed25519PublicKey.from_public_bytes(ed_pub).verify(raw[4:], (text + "\n").encode())
    note = parse_note(data)
    assert verify_note(note, [trust]) is None


def test_checkpoint_note_rejects_tampering(ledger, keydir, other_keydir):
    _, _, trust = load_keys(keydir)
    data = (ledger / "checkpoint").read_bytes()
    forged = data.replace(b"\n3\n", b"\n2\n", 1)
    assert verify_note(parse_note(forged), [trust]) is not None
    assert verify_note(parse_note(data), [load_keys(other_keydir)[2]]) is not None
    for bad in (
        b"",
        b"no blank line\n",
        data.replace(b"\n\n", b"\n"),
        b"x\n3\nAAAA\n\n\xe2\x80\x94 k AAAAAAA=\n",
    ):
        with pytest.raises(LedgerFormatError):
            parse_note(bad)


def test_checkpoint_consistency_cli(ledger, keydir, tmp_path):
    dk, sk, _ = load_keys(keydir)
    old = tmp_path / "old.cp"
    r = cli("checkpoint", ledger, "--out", old)
    assert r.returncode == 0, r.stderr
    capture_file(
        SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=sk, segment_records=100
    )
    new = tmp_path / "new.cp"
    r = cli("checkpoint", ledger, "--out", new, "--signing-key", keydir / "signing.key", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["tree_size"] == 6
    pub = keydir / "verifier.pub"
    r = cli("check-consistency", old, new, "--ledger", ledger, "--trust", pub, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["ok"] and len(json.loads(r.stdout)["proof"]) > 0
    r = cli("check-consistency", new, old, "--ledger", ledger, "--trust", pub)
    assert r.returncode == 2 and "swapped" in r.stderr  # the order, not a fork
    r = cli("verify", ledger, "--trust", pub, "--checkpoint", old)
    assert r.returncode == 0, r.stdout
    r = cli("verify", ledger, "--trust", pub, "--checkpoint", tmp_path / "missing.cp")
    assert r.returncode == 2 and "missing.cp" in r.stderr and "Traceback" not in r.stderr


def test_consistency_fails_for_a_fork(ledger, keydir, tmp_path):
    """OLD and NEW from two histories that share a prefix: NEW does not extend OLD."""
    dk, sk, trust = load_keys(keydir)
    fork = tmp_path / "fork"
    shutil.copytree(ledger, fork)
    capture_file(
        SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=sk, segment_records=100
    )
    old = (ledger / "checkpoint").read_bytes()  # 6 segments, history A
    capture_file(SAMPLES / "sample.pcapng", fork, digest_key=dk, signing_key=sk, segment_records=50)
    capture_file(
        SAMPLES / "sample.pcapng", fork, digest_key=dk, signing_key=sk, segment_records=100
    )
    new = (fork / "checkpoint").read_bytes()  # more segments, history B
    res = check_consistency(old, new, fork, trust)
    assert not res.ok and res.old.size < res.new.size
    res = check_consistency((ledger / "checkpoint").read_bytes(), old, ledger, trust)
    assert res.ok  # same checkpoint twice


# ---- inclusion proofs ---------------------------------------------------------------------


@pytest.mark.parametrize("seq", [0, 7, 8, 150, 293])
def test_prove_and_check_every_kind_of_position(ledger, keydir, seq):
    _, _, trust = load_keys(keydir)
    doc = build_proof(ledger, seq=seq).to_json()
    assert int(doc["record"]["seq"]) == seq and doc["leaf_block"]["records"] <= 8
    res = check_proof(json.loads(json.dumps(doc)), trust)
    assert res.ok, res.reason


def _tamper_proof(doc: dict, how: str) -> None:
    if how == "record_digest":
        doc["record"]["digest"] = "00" * 16
    elif how == "leaf_block":
        h = bytearray(bytes.fromhex(doc["leaf_block"]["hex"]))
        h[-1] ^= 1
        doc["leaf_block"]["hex"] = h.hex()
    elif how == "audit_path":
        doc["audit_path"][0] = "00" * 32
    elif how == "seal_root":
        doc["seal"]["merkle_root"] = "00" * 32
    elif how == "record_index":
        doc["record_index"] += 1


@pytest.mark.parametrize(
    "how", ["record_digest", "leaf_block", "audit_path", "seal_root", "record_index"]
)
def test_tampered_proof_is_invalid(ledger, keydir, how):
    _, _, trust = load_keys(keydir)
    doc = build_proof(ledger, seq=150).to_json()
    _tamper_proof(doc, how)
    res = check_proof(doc, trust)
    assert not res.ok and res.reason


def test_prove_cli_by_seq_and_digest(ledger, keydir, other_keydir, tmp_path):
    proof = tmp_path / "p.json"
    r = cli("prove", ledger, "--seq", 150, "--out", proof, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(proof.read_text())
    schema = json.loads((REPO / "schemas" / "proof.schema.json").read_text())
    assert set(schema["required"]) <= set(doc)
    r = cli("check-proof", proof, "--trust", keydir / "verifier.pub")
    assert r.returncode == 0 and "VALID" in r.stdout
    r = cli("check-proof", proof, "--trust", other_keydir / "verifier.pub", "--json")
    assert r.returncode == 1 and "signature" in json.loads(r.stdout)["reason"]
    proof2 = tmp_path / "p2.json"
    r = cli(
        "prove", ledger, "--digest", doc["record"]["digest"], "--link", "link0", "--out", proof2
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(proof2.read_text())["record"]["digest"] == doc["record"]["digest"]
    (tmp_path / "junk.json").write_text("{not json")
    r = cli("check-proof", tmp_path / "junk.json", "--trust", keydir / "verifier.pub")
    assert r.returncode == 2 and "junk.json" in r.stderr
    r = cli("prove", ledger, "--seq", 10**9, "--out", proof)
    assert r.returncode == 2 and "seq" in r.stderr


def test_a_proof_for_every_record_verifies(ledger, keydir):
    """Every record of the small ledger (3 segments, leaf blocks of 8, a short last block)."""
    _, _, trust = load_keys(keydir)
    total = sum(load_seal(p).records for p in ledger.glob("link=link0/*.seal.json"))
    assert total > 200
    for seq in range(total):
        doc = build_proof(ledger, seq=seq).to_json()
        assert int(doc["record"]["seq"]) == seq and doc["checkpoint"]["tree_size"] == 3
        res = check_proof(parse_proof(json.dumps(doc).encode()), trust)
        assert res.ok, (seq, res.reason)
        assert res.checkpoint.size == 3


def test_any_flipped_byte_in_a_proof_fails(ledger, keydir):
    """Flip one bit of every byte of PROOF.json (outside the two long ML-DSA-65 signatures, where
    every 7th byte): parsing refuses it or check-proof finds it invalid, never accepts it."""
    _, _, trust = load_keys(keydir)
    raw = (json.dumps(build_proof(ledger, seq=150).to_json(), indent=1) + "\n").encode()
    assert check_proof(parse_proof(raw), trust).ok
    long_runs = [(m.start(), m.end()) for m in re.finditer(rb"[A-Za-z0-9+/=]{1000,}", raw)]
    positions = [
        i for i in range(len(raw)) if not any(a <= i < b for a, b in long_runs) or i % 7 == 0
    ]
    assert len(long_runs) >= 2 and len(positions) > 3000
    accepted = []
    for i in positions:
        b = bytearray(raw)
        b[i] ^= 1
        try:
            res = check_proof(parse_proof(bytes(b)), trust)
        except LedgerFormatError:
            continue
        if res.ok:
            accepted.append((i, raw[max(0, i - 20) : i + 20]))
    assert accepted == []
    # hex has one spelling: upper-casing any a-f of any hex string (the leaf block, paths, the
    # digest, the seal's hashes and ids) is refused by the parser or fails the check (signed seal
    # fields)
    upper_accepted = []
    for m in re.finditer(rb'"([0-9a-f]{32,})"', raw):
        for i in range(m.start(1), m.end(1)):
            if raw[i : i + 1] in b"abcdef":
                try:
                    ok = check_proof(
                        parse_proof(raw[:i] + raw[i : i + 1].upper() + raw[i + 1 :]), trust
                    ).ok
                except LedgerFormatError:
                    continue
                if ok:
                    upper_accepted.append(i)
    assert upper_accepted == []


def test_proof_parsing_is_strict(ledger, keydir):
    doc = build_proof(ledger, seq=150).to_json()
    raw = json.dumps(doc).encode()
    for drop in ("rotations", "checkpoint"):
        bad = {k: v for k, v in doc.items() if k != drop}
        with pytest.raises(LedgerFormatError, match=drop):
            parse_proof(json.dumps(bad).encode())
    with pytest.raises(LedgerFormatError, match="not UTF-8 at byte 0"):
        parse_proof(raw.decode().encode("utf-16"))
    with pytest.raises(LedgerFormatError, match="unknown field 'extra'"):
        parse_proof(json.dumps(dict(doc, extra=1)).encode())


def test_v1_proofs_without_a_checkpoint_still_check(ledger, keydir):
    """Proofs written before the checkpoint part existed (format -v1) verify up to their seal; a v1
    document cannot carry a checkpoint part, and a v2 one must."""
    _, _, trust = load_keys(keydir)
    doc = build_proof(ledger, seq=150).to_json()
    assert doc["format"] == "ledgertool-inclusion-proof-v2"
    old = {k: v for k, v in doc.items() if k != "checkpoint"}
    old["format"] = "ledgertool-inclusion-proof-v1"
    res = check_proof(parse_proof(json.dumps(old).encode()), trust)
    assert res.ok and res.checkpoint is None
    from test_schemas_reports import is_valid, validate

    validate(doc, "proof.schema.json")
    validate(old, "proof.schema.json")
    assert not is_valid(dict(old, checkpoint=None), "proof.schema.json")
    assert not is_valid({k: v for k, v in doc.items() if k != "checkpoint"}, "proof.schema.json")
    with pytest.raises(LedgerFormatError, match="unknown field 'checkpoint'"):
        parse_proof(json.dumps(dict(old, checkpoint=None)).encode())
    bad = dict(old, seal=dict(old["seal"], records=old["seal"]["records"] + 1))
    assert not check_proof(parse_proof(json.dumps(bad).encode()), trust).ok


def _set_unused_bits(b64: str) -> str:
    """The same bytes spelt differently: set the unused low bits of the last base64 character."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = b64.rstrip("=")
    pad = len(b64) - len(body)
    assert pad in (1, 2)
    last = alphabet.index(body[-1]) | (0b11 if pad == 1 else 0b1111)
    out = body[:-1] + alphabet[last] + "=" * pad
    assert out != b64 and base64.b64decode(out) == base64.b64decode(b64)
    return out


def test_non_canonical_base64_signatures_are_refused(ledger, keydir):
    """RFC 4648 s3.5 decoders may ignore a last character's unused bits; ours may not, so the one
    accepted spelling of a signature is the canonical one (a flipped bit there is never ignored)."""
    _, _, trust = load_keys(keydir)
    doc = build_proof(ledger, seq=150).to_json()
    bad = json.loads(json.dumps(doc))
    bad["seal"]["signatures"]["ed25519"] = _set_unused_bits(bad["seal"]["signatures"]["ed25519"])
    res = check_proof(bad, trust)
    assert not res.ok and "ed25519 signature is not valid base64" in res.reason
    text, _, sigs = doc["checkpoint"]["note"].rpartition("\n\n")
    lines = sigs.rstrip("\n").split("\n")
    name_part, b64 = lines[0].rsplit(" ", 1)
    lines[0] = f"{name_part} {_set_unused_bits(b64)}"
    bad = json.loads(json.dumps(doc))
    bad["checkpoint"]["note"] = text + "\n\n" + "\n".join(lines) + "\n"
    res = check_proof(bad, trust)
    assert not res.ok and "not base64" in res.reason


def test_proof_reaches_the_checkpoint_a_verifier_holds(ledger, keydir, other_keydir, tmp_path):
    dk, sk, trust = load_keys(keydir)
    held = tmp_path / "held.cp"
    held.write_bytes((ledger / "checkpoint").read_bytes())  # 3 segments
    capture_file(
        SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=sk, segment_records=100
    )
    pub = keydir / "verifier.pub"
    proof = tmp_path / "p.json"
    r = cli("prove", ledger, "--seq", 150, "--out", proof, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["checkpoint_size"] == 6, r.stderr
    r = cli("check-proof", proof, "--trust", pub, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["checkpoint"]["tree_size"] == 6
    # the verifier holds the older checkpoint: a proof to the newer one is not a proof to it
    r = cli("check-proof", proof, "--trust", pub, "--checkpoint", held, "--json")
    assert (
        r.returncode == 1
        and "tree size 6, not the given one of tree size 3" in json.loads(r.stdout)["reason"]
    )
    r = cli("prove", ledger, "--seq", 150, "--out", proof, "--checkpoint", held)
    assert r.returncode == 0 and "checkpoint of tree size 3" in r.stdout, r.stderr
    r = cli("check-proof", proof, "--trust", pub, "--checkpoint", held, "--json")
    assert r.returncode == 0, r.stdout
    cp = parse_note(held.read_bytes()).checkpoint
    assert json.loads(r.stdout)["checkpoint"] == {"tree_size": 3, "root_hash": cp.root.hex()}
    # a record sealed after the held checkpoint cannot be proved to it
    last = sum(load_seal(p).records for p in ledger.glob("link=link0/*.seal.json")) - 1
    r = cli("prove", ledger, "--seq", last, "--out", proof, "--checkpoint", held)
    assert r.returncode == 2 and "held.cp" in r.stderr and "newer checkpoint" in r.stderr
    # a checkpoint of another ledger, or garbage
    other = tmp_path / "other"
    odk, osk, _ = load_keys(other_keydir)
    capture_file(SAMPLE, other, digest_key=odk, signing_key=osk, segment_records=100)
    r = cli("prove", ledger, "--seq", 1, "--out", proof, "--checkpoint", other / "checkpoint")
    assert r.returncode == 2 and "checkpoint is for" in r.stderr
    r = cli("check-proof", proof, "--trust", pub, "--checkpoint", other / "checkpoint")
    assert r.returncode == 2 and "checkpoint is for" in r.stderr
    r = cli("prove", ledger, "--seq", last, "--out", tmp_path / "late.json")
    r = cli("check-proof", tmp_path / "late.json", "--trust", pub, "--checkpoint", held, "--json")
    assert (
        r.returncode == 1
        and "was sealed after the given checkpoint" in json.loads(r.stdout)["reason"]
    )
    (tmp_path / "junk.cp").write_text("junk")
    r = cli("check-proof", proof, "--trust", pub, "--checkpoint", tmp_path / "junk.cp")
    assert r.returncode == 2 and "junk.cp" in r.stderr and "Traceback" not in r.stderr


def test_proof_checkpoint_tampering_and_forks(ledger, keydir, other_keydir, tmp_path):
    dk, sk, trust = load_keys(keydir)
    doc = build_proof(ledger, seq=150).to_json()
    assert check_proof(doc, trust).ok
    bad = json.loads(json.dumps(doc))
    bad["checkpoint"]["audit_path"][0] = "00" * 32
    assert "checkpoint audit path" in check_proof(bad, trust).reason
    bad = json.loads(json.dumps(doc))
    bad["checkpoint"]["note"] = bad["checkpoint"]["note"].replace("\n3\n", "\n2\n", 1)
    assert "checkpoint" in check_proof(bad, trust).reason
    # a checkpoint signed by a key the verifier never trusted
    _, osk, _ = load_keys(other_keydir)
    from ledgertool.ledger.checkpoints import make_checkpoint
    from ledgertool.ledger.header import load_ledger
    from ledgertool.seal.checkpoint import sign_checkpoint

    bad = json.loads(json.dumps(doc))
    bad["checkpoint"]["note"] = sign_checkpoint(
        make_checkpoint(ledger, load_ledger(ledger), "link0"), osk
    ).decode()
    assert "checkpoint" in check_proof(bad, trust).reason
    # the ledger was forked after the checkpoint was taken: prove refuses to chain to it
    held = (ledger / "checkpoint").read_bytes()
    fork = tmp_path / "fork"
    shutil.copytree(ledger, fork)
    for p in fork.glob("link=link0/seg-00000002.*"):
        p.unlink()
    capture_file(
        SAMPLES / "sample.pcap", fork, digest_key=dk, signing_key=sk, segment_records=10**6
    )
    (tmp_path / "h.cp").write_bytes(held)
    r = cli(
        "prove", fork, "--seq", 0, "--out", tmp_path / "p.json", "--checkpoint", tmp_path / "h.cp"
    )
    assert r.returncode == 1 and "does not extend" in r.stderr
    # a tail cut under the link's stored checkpoint: refused, naming that checkpoint file
    cut = tmp_path / "cut"
    shutil.copytree(ledger, cut)
    for p in cut.glob("link=link0/seg-00000002.*"):
        p.unlink()
    r = cli("prove", cut, "--seq", 0, "--out", tmp_path / "p.json")
    assert r.returncode == 1 and "link=link0/checkpoint: link link0 does not extend" in r.stderr, (
        r.stderr
    )
    # the fork's own checkpoint has the same tree size (3) and another root
    forked = build_proof(fork, seq=0).to_json()
    assert forked["checkpoint"]["tree_size"] == 3 and check_proof(forked, trust).ok
    res = check_proof(forked, trust, parse_note(held))
    assert not res.ok and "fork" in res.reason


# ---- key rotation -------------------------------------------------------------------------


def test_rotation_chain_is_followed(ledger, keydir, tmp_path):
    dk, sk, trust = load_keys(keydir)
    generate_keys(tmp_path / "k2")
    generate_keys(tmp_path / "k3")
    k2 = SigningKey.load(tmp_path / "k2" / "signing.key")
    k3 = SigningKey.load(tmp_path / "k3" / "signing.key")
    old_cp = (ledger / "checkpoint").read_bytes()
    r = cli(
        "keys",
        "rotate",
        ledger,
        "--old",
        keydir / "signing.key",
        "--new",
        tmp_path / "k2" / "signing.key",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["effective_from"] == {"link0": 3}
    with pytest.raises(KeyFileError):  # the retired key can no longer extend the ledger
        capture_file(
            SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=sk, segment_records=100
        )
    capture_file(
        SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=k2, segment_records=100
    )
    rotate_keys(ledger, k2, k3)
    capture_file(
        SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=k3, segment_records=200
    )
    v = verify_ledger(ledger, trust, old_cp)
    assert v.ok and v.segments == 8, v.problems
    doc = build_proof(
        ledger, seq=700
    ).to_json()  # signed by k3, provable from the root trust bundle
    assert check_proof(doc, trust).ok
    new_cp = (ledger / "checkpoint").read_bytes()
    assert check_consistency(old_cp, new_cp, ledger, trust).ok
    # the verifier's trust bundle is still the root: a verifier that starts from k2 fails
    v2 = verify_ledger(ledger, k2.trust_bundle())
    assert not v2.ok


def test_seal_by_a_never_introduced_key_fails(ledger, keydir, other_keydir, tmp_path):
    _, _, trust = load_keys(keydir)
    rotate_keys(ledger, SigningKey.load(keydir / "signing.key"), SigningKey.generate())
    rot = next((ledger / "rotations").glob("*.json"))
    doc = json.loads(rot.read_text())
    other = load_keys(other_keydir)[1]
    from ledgertool.seal.rotation import rotation_message

    doc["new_keys"] = other.trust_bundle().to_dict()  # swap in a key the old key never signed for
    doc["signatures"]["new"] = other.sign(rotation_message(doc))
    rot.write_text(json.dumps(doc))
    capture_file(
        SAMPLES / "sample.pcap",
        ledger,
        digest_key=load_keys(keydir)[0],
        signing_key=other,
        segment_records=100,
    )
    v = verify_ledger(ledger, trust)
    kinds = {(p.kind, p.segment) for p in v.problems}
    assert ("rotation_invalid", None) in kinds and ("bad_signature", 3) in kinds
    assert not any(p.segment in (0, 1, 2) for p in v.problems if p.kind == "bad_signature")


def test_rotation_refuses_wrong_old_key_and_open_segments(ledger, keydir, other_keydir):
    with pytest.raises(KeyFileError):
        rotate_keys(ledger, load_keys(other_keydir)[1], SigningKey.generate())
    (ledger / "link=link0" / "seg-00000003.open").write_bytes(b"")
    r = cli(
        "keys",
        "rotate",
        ledger,
        "--old",
        keydir / "signing.key",
        "--new",
        other_keydir / "signing.key",
    )
    assert r.returncode == 2 and "recover" in r.stderr
