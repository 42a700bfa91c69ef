"""Seals and rotation statements parse into frozen typed values (seal.document.Seal,
seal.rotation.RotationStatement) whose signed bytes are RFC 8785 of exactly the document as it was
signed, unknown members included; checked against the independent reference writer
(tests/v2_reference.py: hashlib and rfc8785, no ledgertool code) and the signatures it made."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle

import pytest
import rfc8785
from conftest import load_keys
from v2_reference import SEAL_PREFIX, synthetic_records, write_v2_ledger

from ledgertool.keyfiles import SigningKey, generate_keys
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.rotations import load_rotations, rotate_keys
from ledgertool.seal.document import Seal, parse_seal
from ledgertool.seal.rotation import RotationStatement, key_schedule, parse_rotation
from ledgertool.verify.checks import SegmentPlace, check_seal

ROTATION_PREFIX = b"ledgertool rotation v1\n"


@pytest.fixture()
def v2_ledger(keydir, tmp_path):
    _, sk, trust = load_keys(keydir)
    d = tmp_path / "L"
    written = write_v2_ledger(
        d, sk, [synthetic_records(40), synthetic_records(8, 40)], leaf_records=16
    )
    return d, sk, trust, written


def _body(doc: dict) -> bytes:
    return rfc8785.dumps({k: v for k, v in doc.items() if k != "signatures"})


def test_seal_fields_and_signed_bytes_match_the_reference(v2_ledger):
    d, _, trust, written = v2_ledger
    for index, doc in enumerate(written.seals):
        raw = (d / "link=link0" / f"seg-{index:08d}.seal.json").read_bytes()
        seal = parse_seal(raw, "seal.json")
        assert isinstance(seal, Seal) and seal.v2
        assert (seal.segment, seal.records, seal.first_seq, seal.last_seq, seal.merkle_root) == (
            index,
            doc["records"],
            doc["first_seq"],
            doc["last_seq"],
            doc["merkle_root"],
        )
        assert seal.records == (40, 8)[index] and seal.first_seq == ("0", "40")[index]
        assert seal.signed_bytes() == SEAL_PREFIX + _body(doc)
        assert seal.hash() == hashlib.sha256(_body(doc)).hexdigest()
        assert trust.verify(seal.signed_bytes(), seal.signatures) == []
        assert seal.to_json() == doc
    # the chain: each seal names the previous one's hash
    first, second = (
        parse_seal((d / "link=link0" / f"seg-{i:08d}.seal.json").read_bytes(), "s") for i in (0, 1)
    )
    assert second.prev_seal_hash == first.hash()


def test_seal_keeps_unknown_members_in_its_signed_bytes(v2_ledger, keydir):
    """The parse accepts members the format does not name and signs over them: a key holder's seal
    with an extra member verifies its signatures, is named seal_malformed (v2), and its hash is not
    that of the seal without the member."""
    d, sk, trust, written = v2_ledger
    doc = dict(written.seals[0], x_note="kept")
    doc["signatures"] = sk.sign(SEAL_PREFIX + _body(doc))
    raw = json.dumps(doc).encode()
    seal = parse_seal(raw, "seal.json")
    assert "x_note" in seal.members and not hasattr(seal, "x_note")
    assert seal.signed_bytes() == SEAL_PREFIX + _body(doc)
    assert b'"x_note":"kept"' in seal.signed_bytes()
    assert seal.hash() != parse_seal(json.dumps(written.seals[0]).encode(), "s").hash()
    ledger = load_ledger(d)
    sched = key_schedule(
        ledger.ledger_id, trust, [], digest_key_id=ledger.digest_key_id, algorithm=ledger.algorithm
    )
    check = check_seal(raw, SegmentPlace(ledger, "link0", 0, d / "link=link0", sched))
    assert [p.kind.value for p in check.problems] == []
    assert check.name_problem is not None and "x_note" in check.name_problem.detail
    assert check.seal_hash == hashlib.sha256(_body(doc)).hexdigest()


def test_absent_member_is_none_and_not_a_member(v2_ledger):
    _, _, _, written = v2_ledger
    doc = {k: v for k, v in written.seals[0].items() if k != "ledger_header_sha256"}
    doc["source"] = None
    seal = parse_seal(json.dumps(doc).encode(), "s")
    assert seal.ledger_header_sha256 is None and not seal.has("ledger_header_sha256")
    assert seal.source is None and seal.has("source")


def test_seal_is_frozen_picklable_and_unchanged_by_its_json(v2_ledger):
    _, _, _, written = v2_ledger
    seal = parse_seal(json.dumps(written.seals[0]).encode(), "s")
    with pytest.raises(dataclasses.FrozenInstanceError):
        seal.records = 1  # type: ignore[misc]
    copy = seal.to_json()
    copy["records"] = 999
    assert seal.records == 40 and seal.signed_bytes() == SEAL_PREFIX + _body(written.seals[0])
    back = pickle.loads(pickle.dumps(seal))
    assert back == seal and back.signed_bytes() == seal.signed_bytes()


def test_parse_seal_refuses_other_formats():
    from ledgertool.errors import LedgerFormatError

    for raw in (b"[]", b'{"format": "ledgertool-seal-v3"}', b'{"records": 1}'):
        with pytest.raises(LedgerFormatError, match="where.json: not a ledgertool-seal-v1"):
            parse_seal(raw, "where.json")


def test_rotation_statement_typed_and_signed_over_what_was_written(v2_ledger, tmp_path):
    d, sk, trust, _ = v2_ledger
    new_dir = tmp_path / "new"
    generate_keys(new_dir)
    new = SigningKey.load(new_dir / "signing.key")
    rotate_keys(d, sk, new)
    path = d / "rotations" / "rotation-0001.json"
    doc = json.loads(path.read_bytes())
    (st,) = load_rotations(d)
    assert isinstance(st, RotationStatement) and st == parse_rotation(path.read_bytes(), path)
    assert (st.kind, st.number, st.ledger_id) == ("signing-key", 1, load_ledger(d).ledger_id)
    assert st.authoriser == doc["old_keys"] and st.new_signer == doc["new_keys"]
    assert st.message() == ROTATION_PREFIX + _body(doc)
    assert st.hash() == hashlib.sha256(_body(doc)).hexdigest()
    # the same schedule whether the statement is the parsed value or a mapping (a proof's)
    from_typed = key_schedule(st.ledger_id, trust, [st])
    from_json = key_schedule(st.ledger_id, trust, [doc])
    assert from_typed.problems == from_json.problems == []
    assert from_typed.current == from_json.current == new.trust_bundle()
    # a statement written before `kind` existed is a signing-key statement
    old_style = parse_rotation(
        json.dumps({k: v for k, v in doc.items() if k != "kind"}).encode(), "r"
    )
    assert old_style.kind == "signing-key" and "kind" not in old_style.members
