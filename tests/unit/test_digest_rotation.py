"""Digest-key rotation: a ledger moves to a new digest key at a segment boundary.

The ledger of every test: the first half of a capture digested with key A (segments 0..2), a
digest-key rotation A -> B (rotation 1, effective from segment 3), the second half with key B
(segments 3..5). The second half repeats three frames of the first, so the same bytes sit in
both epochs under different digests: reconciliation must still pair every frame exactly once.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, cli, load_keys
from test_reconcile import write_pcap
from test_schemas_reports import is_valid, validate

from ledgertool.capture.run import capture_file
from ledgertool.digest.record import record_dtype
from ledgertool.digest.reference import read_pcap, siphash
from ledgertool.errors import KeyFileError, LedgerFormatError, UsageError
from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.checkpoints import check_consistency, write_checkpoint
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.layout import checkpoint_path
from ledgertool.ledger.openmac import OpenSegmentKey
from ledgertool.ledger.reader import LedgerReader
from ledgertool.ledger.recover import recover_ledger
from ledgertool.ledger.rotations import load_rotations, rotate_digest_key, rotate_keys
from ledgertool.ledger.sealer import load_seal
from ledgertool.reconcile.recompute import reconcile
from ledgertool.seal.document import seal_hash, seal_signed_bytes
from ledgertool.seal.rotation import key_schedule, rotation_hash, rotation_message
from ledgertool.verify.ledger import verified_segment, verify_ledger
from ledgertool.verify.proof import build_proof, check_proof

ALG = "siphash-1-3-128"
SEG = 50
HALF = 147  # frames of sample.pcap in the first half (294 in all)
REPEATED = (5, 60, 100)  # first-half frames sent again in the second half


def _kid(dk: DigestKey) -> str:
    return dk.key_id(ALG, 16)


@pytest.fixture(scope="module")
def keys(tmp_path_factory, keydir):
    """digest keys A (keydir), B, C; signing key of keydir; a stranger's keys."""
    d = tmp_path_factory.mktemp("dkeys")
    for name in ("b", "c", "x"):
        generate_keys(d / name)
    a, sk, trust = load_keys(keydir)
    return {
        "A": a,
        "B": DigestKey.load(d / "b" / "digest.key"),
        "C": DigestKey.load(d / "c" / "digest.key"),
        "sk": sk,
        "trust": trust,
        "dir": d,
        "keydir": keydir,
        "stranger": load_keys(d / "x"),
    }


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    d = tmp_path_factory.mktemp("dcap")
    frames = [
        (ts, wire, data)
        for ts, _cap, wire, data in read_pcap((SAMPLES / "sample.pcap").read_bytes())
    ]
    first = frames[:HALF]
    t_end = first[-1][0]
    again = [(t_end + 1000 * (k + 1), frames[i][1], frames[i][2]) for k, i in enumerate(REPEATED)]
    second = again + [(ts + 10_000, w, b) for ts, w, b in frames[HALF:]]
    write_pcap(d / "first.pcap", first)
    write_pcap(d / "second.pcap", second)
    write_pcap(d / "full.pcap", first + second)
    return {"dir": d, "first": first, "second": second, "boundary_ns": second[0][0]}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, keys, captures) -> Path:
    lg = tmp_path_factory.mktemp("dledger") / "ledger"
    c = captures["dir"]
    capture_file(
        c / "first.pcap", lg, digest_key=keys["A"], signing_key=keys["sk"], segment_records=SEG
    )
    r = cli(
        "keys",
        "rotate-digest",
        lg,
        "--signing-key",
        keys["keydir"] / "signing.key",
        "--old-digest-key",
        keys["keydir"] / "digest.key",
        "--new-digest-key",
        keys["dir"] / "b" / "digest.key",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    validate(rep, "keys-rotate-report.schema.json")
    assert (
        rep["kind"] == "digest-key" and rep["number"] == 1 and rep["effective_from"] == {"link0": 3}
    )
    assert (rep["old_digest_key_id"], rep["new_digest_key_id"]) == (
        _kid(keys["A"]),
        _kid(keys["B"]),
    )
    res = capture_file(
        c / "second.pcap", lg, digest_key=keys["B"], signing_key=keys["sk"], segment_records=SEG
    )
    assert [s.index for s in res.segments] == [3, 4, 5]
    return lg


@pytest.fixture()
def ledger(pristine, tmp_path) -> Path:
    out = tmp_path / "ledger"
    shutil.copytree(pristine, out)
    return out


def _seal_path(lg: Path, i: int) -> Path:
    return lg / "link=link0" / f"seg-{i:08d}.seal.json"


def _kinds(v) -> set[tuple[str, int | None]]:
    return {(p.kind, p.segment) for p in v.problems}


# ---- the happy path ------------------------------------------------------------------------


def test_seals_name_the_scheduled_digest_key_and_verify(pristine, keys):
    a, b = _kid(keys["A"]), _kid(keys["B"])
    assert load_ledger(pristine).digest_key_id == a  # ledger.json keeps the genesis id
    assert [load_seal(_seal_path(pristine, i)).digest_key_id for i in range(6)] == [a] * 3 + [b] * 3
    rot = json.loads((pristine / "rotations" / "rotation-0001.json").read_text())
    assert "digest.key" not in json.dumps(rot) and keys["B"].master.hex() not in json.dumps(rot)
    sched = key_schedule(
        load_ledger(pristine).ledger_id,
        keys["trust"],
        load_rotations(pristine),
        digest_key_id=a,
        algorithm=ALG,
    )
    assert not sched.problems
    assert [sched.digest_key_id_for("link0", i) for i in (0, 2, 3, 9)] == [a, a, b, b]
    # a link created later starts with the newest key
    assert sched.digest_key_id_for("link-new", 0) == b
    assert sched.retired_by(a) == 1 and sched.retired_by(b) is None
    v = verify_ledger(pristine, keys["trust"])
    assert v.ok and v.segments == 6 and v.frames == HALF + len(REPEATED) + 294 - HALF, v.problems
    r = cli("verify", pristine, "--trust", keys["keydir"] / "verifier.pub")
    assert r.returncode == 0, r.stdout
    from ledgertool.reconcile.query import run_query

    rows = run_query(
        pristine,
        "SELECT digest_key_id, count(*) FROM seals GROUP BY 1 ORDER BY min(segment)",
        keys["trust"],
    ).rows
    assert rows == [(a, 3), (b, 3)]


def test_recompute_with_both_keys_matches_every_frame(pristine, keys, captures):
    n = len(captures["first"]) + len(captures["second"])
    for order in (["A", "B"], ["B", "A"]):  # key order on the command line does not matter
        r = reconcile(
            captures["dir"] / "full.pcap", pristine, [keys[k] for k in order], trust=keys["trust"]
        )
        assert (r.frames, r.matched, r.ledger_only, r.capture_only) == (n, n, 0, 0)
        assert not r.partial and r.uncovered == []
        assert r.digest_keys == [
            {"key_id": _kid(keys["A"]), "segments": 3},
            {"key_id": _kid(keys["B"]), "segments": 3},
        ]
    r = cli(
        "recompute",
        captures["dir"] / "full.pcap",
        "--ledger",
        pristine,
        "--trust",
        keys["keydir"] / "verifier.pub",
        "--digest-key",
        keys["keydir"] / "digest.key",
        "--digest-key",
        keys["dir"] / "b" / "digest.key",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    validate(doc, "recompute-report.schema.json")
    assert (doc["matched"], doc["partial"], doc["uncovered"]) == (n, False, [])


def test_recompute_across_rotation_stays_exact(pristine, keys, captures, tmp_path):
    """Drop one repeated frame's second-epoch copy and one plain second-epoch frame, add a new
    frame: exactly those are named, in the right epoch."""
    first, second = captures["first"], captures["second"]
    dropped = [0, 10]  # second[0] repeats first[REPEATED[0]]; second[10] is a plain frame
    kept = [f for i, f in enumerate(second) if i not in dropped]
    extra = (second[-1][0] + 5, 60, b"\x02" * 60)
    write_pcap(tmp_path / "changed.pcap", first + kept + [extra])
    r = reconcile(tmp_path / "changed.pcap", pristine, [keys["A"], keys["B"]], trust=keys["trust"])
    n = len(first) + len(second)
    assert (r.matched, r.ledger_only, r.capture_only) == (n - 2, 2, 1)
    assert sorted(e["seq"] for e in r.examples_ledger_only) == [HALF + 0, HALF + 10]
    assert [e["ts_ns"] for e in r.examples_capture_only] == [extra[0]]
    # digests checked against the pure-Python SipHash-1-3-128 (ledgertool.digest.reference): the
    # capture-only frame under the first key in the ledger's order (A), the ledger-only records
    # under the key of their epoch (B)
    sub = {k: keys[k].subkey(ALG, 16) for k in "AB"}
    assert r.examples_capture_only[0]["digest"] == siphash(sub["A"], extra[2]).hex()
    assert {e["digest"] for e in r.examples_ledger_only} == {
        siphash(sub["B"], second[i][2]).hex() for i in dropped
    }


def test_recompute_with_one_key_is_partial_and_says_so(pristine, keys, captures):
    first, second = captures["first"], captures["second"]
    r = reconcile(captures["dir"] / "full.pcap", pristine, keys["A"], trust=keys["trust"])
    assert (r.matched, r.ledger_only, r.capture_only) == (len(first), 0, len(second))
    assert r.partial and r.uncovered == [
        {
            "link": "link0",
            "first_segment": 3,
            "last_segment": 5,
            "segments": 3,
            "digest_key_id": _kid(keys["B"]),
            "frames": len(second),
        }
    ]
    assert any(w.startswith("partial:") and "segments 3..5" in w for w in r.warnings)
    r = reconcile(captures["dir"] / "full.pcap", pristine, keys["B"], trust=keys["trust"])
    assert (r.matched, r.ledger_only, r.capture_only) == (len(second), 0, len(first))
    assert [(u["first_segment"], u["last_segment"]) for u in r.uncovered] == [(0, 2)]
    # frame-level attribution: the capture-only frames are exactly the uncovered epoch's, also for
    # the frames whose bytes were sent again in the covered epoch (paired with their covered copy)
    for key, want in (
        (keys["A"], range(len(first), len(first) + len(second))),
        (keys["B"], range(len(first))),
    ):
        det = captures["dir"] / "details.jsonl"
        reconcile(captures["dir"] / "full.pcap", pristine, key, details=det, trust=keys["trust"])
        rows = [json.loads(line) for line in det.read_text().splitlines()]
        assert sorted(d["index"] for d in rows if d["status"] == "capture_only") == list(want)
    # the CLI: warning on stderr, JSON field, exit 1 (capture frames were left unpaired) ...
    r = cli(
        "recompute",
        captures["dir"] / "full.pcap",
        "--ledger",
        pristine,
        "--trust",
        keys["keydir"] / "verifier.pub",
        "--digest-key",
        keys["keydir"] / "digest.key",
        "--json",
    )
    assert (
        r.returncode == 1
        and "partial: no --digest-key given for link link0 segments 3..5" in r.stderr
    )
    doc = json.loads(r.stdout)
    validate(doc, "recompute-report.schema.json")
    assert doc["partial"] is True and doc["capture_only"] == len(second)
    # ... and exit 0 when the window holds only what the key covers (still stated as partial)
    r = cli(
        "recompute",
        captures["dir"] / "full.pcap",
        "--ledger",
        pristine,
        "--trust",
        keys["keydir"] / "verifier.pub",
        "--digest-key",
        keys["keydir"] / "digest.key",
        "--to",
        captures["boundary_ns"],
        "--json",
    )
    assert r.returncode == 0, r.stdout
    doc = json.loads(r.stdout)
    assert (doc["matched"], doc["capture_only"], doc["partial"]) == (len(first), 0, True)


def test_recompute_refuses_keys_that_cover_nothing(ledger, keys, captures):
    full = captures["dir"] / "full.pcap"
    r = cli(
        "recompute",
        full,
        "--ledger",
        ledger,
        "--trust",
        keys["keydir"] / "verifier.pub",
        "--digest-key",
        keys["dir"] / "x" / "digest.key",
    )
    assert r.returncode == 2 and "wrong key" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli(
        "recompute",
        full,
        "--ledger",
        ledger,
        "--trust",
        keys["keydir"] / "verifier.pub",
        "--digest-key",
        keys["keydir"] / "digest.key",
        "--digest-key",
        keys["keydir"] / "digest.key",
    )
    assert r.returncode == 2 and "same digest key" in r.stderr
    # introduced, but nothing captured with it yet
    rotate_digest_key(ledger, keys["sk"], keys["B"], keys["C"])
    with pytest.raises(KeyFileError, match="covers no sealed segment"):
        reconcile(full, ledger, [keys["A"], keys["B"], keys["C"]], trust=keys["trust"])


# ---- capture, recover and rotate refuse what does not fit ------------------------------------


def test_capture_refuses_the_retired_key(ledger, keys, captures):
    with pytest.raises(KeyFileError, match="retired by rotation 1"):
        capture_file(
            captures["dir"] / "second.pcap", ledger, digest_key=keys["A"], signing_key=keys["sk"]
        )
    r = cli(
        "capture",
        captures["dir"] / "second.pcap",
        "--ledger",
        ledger,
        "--digest-key",
        keys["keydir"] / "digest.key",
        "--signing-key",
        keys["keydir"] / "signing.key",
    )
    assert r.returncode == 2 and "wrong key: retired by rotation 1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    with pytest.raises(KeyFileError, match=r"wrong key$"):  # a key the ledger never used
        capture_file(
            captures["dir"] / "second.pcap", ledger, digest_key=keys["C"], signing_key=keys["sk"]
        )
    assert (
        sorted(p.name for p in (ledger / "link=link0").glob("*.seal.json"))[-1]
        == "seg-00000005.seal.json"
    )


def test_rotate_digest_refusals(ledger, keys):
    a, b, c, sk = keys["A"], keys["B"], keys["C"], keys["sk"]
    with pytest.raises(KeyFileError, match="retired by rotation 1"):
        rotate_digest_key(ledger, sk, a, c)  # A is no longer current
    with pytest.raises(KeyFileError, match="already used"):
        rotate_digest_key(ledger, sk, b, a)  # a retired key never comes back
    with pytest.raises(KeyFileError, match="current signing key"):
        rotate_digest_key(ledger, keys["stranger"][1], b, c)
    r = cli(
        "keys",
        "rotate-digest",
        ledger,
        "--signing-key",
        keys["keydir"] / "signing.key",
        "--old-digest-key",
        keys["dir"] / "x" / "digest.key",
        "--new-digest-key",
        keys["dir"] / "c" / "digest.key",
    )
    assert r.returncode == 2 and "is not the ledger's current digest key" in r.stderr
    (ledger / "link=link0" / "seg-00000006.open").write_bytes(b"")
    with pytest.raises(UsageError, match="recover"):
        rotate_digest_key(ledger, sk, b, c)
    assert len(load_rotations(ledger)) == 1


def test_recover_seals_with_the_key_its_segment_was_written_with(ledger, keys):
    """An open segment left after the rotation is sealed with the id in its header (B), not
    ledger.json's genesis id (A)."""
    lg = load_ledger(ledger)
    last = np.frombuffer(
        bytes(verified_segment(LedgerReader(ledger), lg, "link0", 5).records),
        dtype=record_dtype(16),
    )
    nxt = last[:4].copy()
    nxt["seq"] = np.arange(4) + int(last["seq"][-1]) + 1
    key = OpenSegmentKey.derive(keys["sk"], lg.ledger_id)
    hdr = segments.SegmentHeader(
        lg.ledger_id,
        "link0",
        6,
        ALG,
        lg.strip,
        _kid(keys["B"]),
        lg.record_size,
        lg.digest_size,
        lg.leaf_records,
        int(nxt["seq"][0]),
        0,
        key.key_id,
    )
    w = segments.SegmentWriter(layout.open_segment_path(ledger, "link0", 6), hdr, key, ledger)
    w.append(nxt.tobytes(), len(nxt))
    w.close()
    rec = recover_ledger(ledger, keys["sk"])
    assert [(r.index, r.records) for _, r in rec.sealed] == [(6, 4)]
    assert load_seal(_seal_path(ledger, 6)).digest_key_id == _kid(keys["B"])
    v = verify_ledger(ledger, keys["trust"], checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok, v.problems


# ---- what verify must catch -----------------------------------------------------------------


def _reseal_last(ledger: Path, sk: SigningKey, digest_key_id: str, index: int = 5) -> None:
    """A signing-key holder re-seals the last segment (same records, valid signature, chain and
    checkpoint) naming another digest key id: the seal re-signed, and the raw record file's header
    (bytes 48..63, which nothing signs) made to name the same key, so the seal is the only place
    the key shows. The digest-key checks are the seal's, the same for both ledger formats."""
    assert load_ledger(ledger).version == 2
    rec_file = layout.records_path(ledger, "link0", index)
    raw = bytearray(rec_file.read_bytes())
    raw[48:64] = bytes.fromhex(digest_key_id)
    rec_file.write_bytes(bytes(raw))
    doc = load_seal(_seal_path(ledger, index)).to_json()
    doc["digest_key_id"] = digest_key_id
    doc["signatures"] = sk.sign(seal_signed_bytes(doc))
    _seal_path(ledger, index).write_text(json.dumps(doc))
    write_checkpoint(ledger, load_ledger(ledger), "link0", sk)


def test_seal_naming_a_never_introduced_digest_key_fails(ledger, keys):
    _reseal_last(ledger, keys["sk"], _kid(keys["C"]))
    v = verify_ledger(ledger, keys["trust"])
    assert {p.kind for p in v.problems} == {"digest_key_mismatch"} and _kinds(v) == {
        ("digest_key_mismatch", 5)
    }
    assert "never introduced" in v.problems[0].detail and _kid(keys["B"]) in v.problems[0].detail


def test_seal_naming_the_retired_digest_key_fails(ledger, keys):
    _reseal_last(ledger, keys["sk"], _kid(keys["A"]))
    v = verify_ledger(ledger, keys["trust"])
    assert (
        _kinds(v) == {("digest_key_mismatch", 5)}
        and "retired by rotation 1" in v.problems[0].detail
    )


def test_seal_naming_the_new_key_before_the_rotation_fails(ledger, keys):
    doc = load_seal(_seal_path(ledger, 2)).to_json()
    doc["digest_key_id"] = _kid(keys["B"])
    doc["signatures"] = keys["sk"].sign(seal_signed_bytes(doc))
    _seal_path(ledger, 2).write_text(json.dumps(doc))
    v = verify_ledger(ledger, keys["trust"])
    assert ("digest_key_mismatch", 2) in _kinds(
        v
    ) and "takes over at a later segment" in v.problems[0].detail
    # v2: the raw record file's header still names key A, and verify compares it with the seal
    header = {"records_header_mismatch"} if load_ledger(ledger).version == 2 else set()
    assert {p.kind for p in v.problems} == {
        "digest_key_mismatch",
        "chain_broken",
        "checkpoint_mismatch",
    } | header


def test_check_proof_follows_the_digest_key_schedule(ledger, keys):
    """A proof carries the rotation statements: a seal re-signed by the signing-key holder with a
    digest key the chain does not assign to its segment is refused offline too."""
    for seq in (0, 200):  # one record in each epoch
        assert check_proof(build_proof(ledger, seq=seq), keys["trust"]).ok
    _reseal_last(ledger, keys["sk"], _kid(keys["A"]))  # segment 5 claims the retired key
    last = int(load_seal(_seal_path(ledger, 5)).last_seq)
    res = check_proof(build_proof(ledger, seq=last), keys["trust"])
    assert not res.ok and f"assigns {_kid(keys['B'])} to segment 5" in res.reason


def test_edited_digest_key_id_without_the_signing_key_fails(ledger, keys):
    doc = load_seal(_seal_path(ledger, 5)).to_json()
    doc["digest_key_id"] = _kid(keys["C"])
    _seal_path(ledger, 5).write_text(json.dumps(doc))
    v = verify_ledger(ledger, keys["trust"])
    assert {("digest_key_mismatch", 5), ("bad_signature", 5)} <= _kinds(v)


def _forge(ledger: Path, mutate, signer: SigningKey | None) -> None:
    """Change rotation 1 and re-sign it (with `signer`, or not at all)."""
    p = ledger / "rotations" / "rotation-0001.json"
    doc = json.loads(p.read_text())
    mutate(doc)
    if signer is not None:
        doc["signatures"] = {"signing": signer.sign(rotation_message(doc))}
    p.write_text(json.dumps(doc))


FORGERIES = {
    # name: (mutation, re-signed by the ledger's key?, words in the rotation_invalid detail)
    "signed_by_a_stranger": (
        lambda d: None,
        "stranger",
        "signing key: ed25519 signature does not verify",
    ),
    "unsigned_edit": (
        lambda d: d.__setitem__("new_digest_key_id", "00" * 16),
        None,
        "does not verify",
    ),
    "signature_missing": (lambda d: d["signatures"].pop("signing"), None, "signature missing"),
    "wrong_prev_hash": (
        lambda d: d.__setitem__("prev_rotation_hash", "11" * 32),
        "own",
        "prev_rotation_hash",
    ),
    "wrong_old_id": (
        lambda d: d.__setitem__("old_digest_key_id", "22" * 16),
        "own",
        "old_digest_key_id",
    ),
    "new_id_reused": (
        lambda d: d.__setitem__("new_digest_key_id", d["old_digest_key_id"]),
        "own",
        "already used",
    ),
    "effective_from_negative": (
        lambda d: d.__setitem__("effective_from", {"link0": -1}),
        "own",
        "effective_from",
    ),
    "other_algorithm": (
        lambda d: d.__setitem__("algorithm", "blake3-keyed-128"),
        "own",
        "algorithm",
    ),
    "unknown_kind": (lambda d: d.__setitem__("kind", "tls-key"), "own", "unknown kind"),
    "signing_keys_swapped": (None, "stranger", "signing_keys are not the ledger's current"),
}


@pytest.mark.parametrize("case", list(FORGERIES))
def test_forged_digest_rotation_is_rotation_invalid(case, ledger, keys):
    mutate, signer, words = FORGERIES[case]
    stranger = keys["stranger"][1]
    if mutate is None:  # a statement that names the stranger's key set as current, signed by it
        mutate = lambda d: d.__setitem__("signing_keys", stranger.trust_bundle().to_dict())  # noqa: E731
    _forge(ledger, mutate, {"stranger": stranger, "own": keys["sk"], None: None}[signer])
    v = verify_ledger(ledger, keys["trust"])
    invalid = [p for p in v.problems if p.kind == "rotation_invalid"]
    assert (
        len(invalid) == 1
        and invalid[0].detail.startswith("rotation 1: ")
        and words in invalid[0].detail
    ), invalid
    # the schedule stops: B was never validly introduced, so every seal of B's epoch fails
    assert {p.kind for p in v.problems} == {"rotation_invalid", "digest_key_mismatch"}
    assert sorted(p.segment for p in v.problems if p.kind == "digest_key_mismatch") == [3, 4, 5]
    r = cli("verify", ledger, "--trust", keys["keydir"] / "verifier.pub", "--json")
    assert r.returncode == 1
    validate(json.loads(r.stdout), "verify-report.schema.json")


def test_effective_from_going_back_is_rotation_invalid(ledger, keys, captures):
    rotate_digest_key(ledger, keys["sk"], keys["B"], keys["C"])  # rotation 2, effective from 6
    _forge(ledger, lambda d: None, None)  # (rotation 1 untouched)
    p = ledger / "rotations" / "rotation-0002.json"
    doc = json.loads(p.read_text())
    doc["effective_from"] = {"link0": 2}
    doc["signatures"] = {"signing": keys["sk"].sign(rotation_message(doc))}
    p.write_text(json.dumps(doc))
    v = verify_ledger(ledger, keys["trust"])
    assert [p.detail for p in v.problems if p.kind == "rotation_invalid"] == [
        "rotation 2: effective_from goes back before the previous rotation"
    ]
    assert v.ok is False and {p.kind for p in v.problems} == {"rotation_invalid"}


# ---- one history for both kinds --------------------------------------------------------------


def test_mixed_signing_and_digest_rotations(tmp_path, keys, captures):
    """signing k1 -> k2, digest A -> B (signed by k2), signing k2 -> k3, digest B -> C (signed by
    k3)."""
    lg = tmp_path / "ledger"
    src = SAMPLES / "sample.pcap"
    k1 = keys["sk"]
    k2, k3 = SigningKey.generate(), SigningKey.generate()
    capture_file(src, lg, digest_key=keys["A"], signing_key=k1, segment_records=100)  # 0..2
    cp0 = checkpoint_path(lg, "link0").read_bytes()
    rotate_keys(lg, k1, k2)
    # k1 is retired: it cannot sign this
    with pytest.raises(KeyFileError, match="current signing key"):
        rotate_digest_key(lg, k1, keys["A"], keys["B"])
    rotate_digest_key(lg, k2, keys["A"], keys["B"])
    capture_file(src, lg, digest_key=keys["B"], signing_key=k2, segment_records=100)  # 3..5
    rotate_keys(lg, k2, k3)
    capture_file(src, lg, digest_key=keys["B"], signing_key=k3, segment_records=150)  # 6..7
    rotate_digest_key(lg, k3, keys["B"], keys["C"])
    capture_file(src, lg, digest_key=keys["C"], signing_key=k3, segment_records=300)  # 8
    rots = [r.to_json() for r in load_rotations(lg)]
    for d in rots:
        validate(d, "rotation.schema.json")
    assert not is_valid({**rots[1], "new_keys": rots[0]["new_keys"]}, "rotation.schema.json")
    assert not is_valid({k: v for k, v in rots[1].items() if k != "kind"}, "rotation.schema.json")
    assert [(d["number"], d["kind"], d["effective_from"]["link0"]) for d in rots] == [
        (1, "signing-key", 3),
        (2, "digest-key", 3),
        (3, "signing-key", 6),
        (4, "digest-key", 8),
    ]
    v = verify_ledger(lg, keys["trust"], cp0)
    assert v.ok and v.segments == 9, v.problems
    ids = [load_seal(_seal_path(lg, i)).digest_key_id for i in range(9)]
    assert ids == [_kid(keys["A"])] * 3 + [_kid(keys["B"])] * 5 + [_kid(keys["C"])]
    # proofs and checkpoint consistency follow the same chain
    assert check_proof(build_proof(lg, seq=294 * 3 + 7), keys["trust"]).ok
    assert check_consistency(cp0, checkpoint_path(lg, "link0").read_bytes(), lg, keys["trust"]).ok
    r = reconcile(src, lg, [keys["A"], keys["B"], keys["C"]], trust=keys["trust"])
    assert (r.matched, r.ledger_only, r.capture_only) == (
        294,
        294 * 3,
        0,
    )  # sample was captured 4 times


def test_digest_rotation_signed_by_a_retired_signing_key_is_rotation_invalid(tmp_path, keys):
    lg = tmp_path / "ledger"
    k1, k2 = keys["sk"], SigningKey.generate()
    capture_file(
        SAMPLES / "sample.pcap", lg, digest_key=keys["A"], signing_key=k1, segment_records=100
    )
    rotate_keys(lg, k1, k2)
    rotate_digest_key(lg, k2, keys["A"], keys["B"])
    p = lg / "rotations" / "rotation-0002.json"
    doc = json.loads(p.read_text())
    doc["signing_keys"] = k1.trust_bundle().to_dict()
    doc["signatures"] = {"signing": k1.sign(rotation_message(doc))}
    p.write_text(json.dumps(doc))
    v = verify_ledger(lg, keys["trust"])
    assert [p.detail for p in v.problems] == [
        "rotation 2: signing_keys are not the ledger's current signing keys"
    ]
    # nothing is appended to a broken history
    with pytest.raises(LedgerFormatError, match="rotation 2"):
        rotate_digest_key(lg, k2, keys["B"], keys["C"])


def test_old_format_signing_rotation_still_verifies(tmp_path, keys):
    """A statement written before digest-key rotation existed has no "kind"; it is a signing-key
    rotation, and a digest-key rotation can follow it."""
    lg = tmp_path / "ledger"
    k1, k2 = keys["sk"], SigningKey.generate()
    capture_file(
        SAMPLES / "sample.pcap", lg, digest_key=keys["A"], signing_key=k1, segment_records=100
    )
    rotate_keys(lg, k1, k2)
    p = lg / "rotations" / "rotation-0001.json"
    doc = json.loads(p.read_text())
    del doc["kind"]  # exactly what the previous version wrote
    msg = rotation_message(doc)
    doc["signatures"] = {"old": k1.sign(msg), "new": k2.sign(msg)}
    p.write_text(json.dumps(doc, indent=1))
    validate(doc, "rotation.schema.json")
    capture_file(
        SAMPLES / "sample.pcap", lg, digest_key=keys["A"], signing_key=k2, segment_records=100
    )
    rotate_digest_key(lg, k2, keys["A"], keys["B"])
    assert load_rotations(lg)[1].prev_rotation_hash == rotation_hash(doc)
    capture_file(
        SAMPLES / "sample.pcap", lg, digest_key=keys["B"], signing_key=k2, segment_records=100
    )
    v = verify_ledger(lg, keys["trust"])
    assert v.ok and v.segments == 9, v.problems


def test_cli_rotate_digest_text_output(ledger, keys):
    r = cli(
        "keys",
        "rotate-digest",
        ledger,
        "--signing-key",
        keys["keydir"] / "signing.key",
        "--old-digest-key",
        keys["dir"] / "b" / "digest.key",
        "--new-digest-key",
        keys["dir"] / "c" / "digest.key",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        f"rotation 2 -> {ledger}/rotations/rotation-0002.json: digest key "
        f"{_kid(keys['C'])} replaces {_kid(keys['B'])} from link link0 segment 6"
    )
    assert seal_hash(load_seal(_seal_path(ledger, 5)))  # the ledger's seals were not touched
    assert verify_ledger(ledger, keys["trust"]).ok
