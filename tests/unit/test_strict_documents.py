"""Every JSON document read from storage or a user is parsed one strict way.

Duplicate members were accepted (Python keeps the last; another verifier may keep the first, so
two verifiers could read two different seals behind one signature), and true / false / 1.0 passed
for a proof's integers (Python compares them equal to 1, 0 and 1). `canonical.loads_strict`
refuses both, and NaN, fractions, integers beyond 2^53, lone surrogates, deep nesting and a
byte order mark; proofs check the JSON type of every integer at any depth.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import cli, load_keys

from ledgertool.canonical import MAX_DOCUMENT_DEPTH, loads_strict
from ledgertool.errors import KeyFileError, LedgerFormatError
from ledgertool.keyfiles import SigningKey, TrustBundle
from ledgertool.ledger.rotations import rotate_keys
from ledgertool.verify.proof import build_proof, check_proof, parse_proof


@pytest.fixture()
def ledger(sample_ledger) -> Path:
    return sample_ledger


def _duplicate_first(path: Path, member: str, value) -> None:
    """Put `"member": value` before the document's own members, so the file holds it twice and a
    first-wins parser reads `value` while Python's json keeps the original."""
    text = path.read_text()
    assert text.startswith("{\n") and f'"{member}"' in text
    path.write_text("{" + json.dumps(member) + ": " + json.dumps(value) + "," + text[1:])


def test_loads_strict_refuses_what_readers_could_read_differently():
    cases = {
        b'{"a": 1, "a": 2}': "duplicate member 'a'",
        b'{"a": {"b": 1, "b": 1}}': "duplicate member 'b'",
        b'{"a": NaN}': "NaN is not a JSON number",
        b'{"a": -Infinity}': "-Infinity is not a JSON number",
        b'{"a": 1.0}': "not an integer",
        b'{"a": 1e3}': "not an integer",
        b'{"a": 9007199254740992}': "outside",
        b'{"a": -' + b"9" * 5000 + b"}": "outside",
        b'{"a": "\\ud800"}': "lone UTF-16 surrogate",
        b"\xef\xbb\xbf{}": "byte order mark",
        b'{"a": "\xff"}': "not UTF-8 at byte 7",
        b'{"a": 1} {}': "not JSON at byte 9",
        b'{"\xc3\xa9": tru}': "not JSON at byte 7",  # byte offset, not character offset
        b"[" * (MAX_DOCUMENT_DEPTH + 1) + b"]" * (MAX_DOCUMENT_DEPTH + 1): "nested deeper",
        b"[" * 100_000: "nested deeper",
        b" " * 101: "more than the 100 a document may have",
    }
    for data, want in cases.items():
        with pytest.raises(LedgerFormatError) as e:
            loads_strict(data, "doc.json", max_bytes=100 if len(data) == 101 else 1 << 20)
        assert str(e.value).startswith("doc.json: ") and want in str(e.value), (
            data[:40],
            str(e.value),
        )
    assert loads_strict(b'{"a": [1, -2, true, null, "x"], "b": {"c": 9007199254740991}}', "d") == {
        "a": [1, -2, True, None, "x"],
        "b": {"c": 2**53 - 1},
    }
    nested = b"[" * MAX_DOCUMENT_DEPTH + b"]" * MAX_DOCUMENT_DEPTH
    assert loads_strict(nested, "d") is not None


def test_seal_with_a_duplicate_member_is_refused(ledger, keydir):
    seal = ledger / "link=link0" / "seg-00000001.seal.json"
    _duplicate_first(seal, "records", 1)  # a first-wins reader would see one record
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and not doc["ok"], r.stdout
    p = doc["problems"][0]  # then the gap and the checkpoint it leaves
    assert (p["kind"], p["segment"]) == ("seal_unreadable", 1)
    assert p["detail"] == f"{seal}: duplicate member 'records' in an object"
    # a ledger that does not verify is not queried
    r = cli("query", ledger, "SELECT count(*) FROM seals")
    assert (
        r.returncode == 1
        and "seal_unreadable" in r.stderr
        and "duplicate member 'records'" in r.stderr
    )


def test_ledger_header_and_rotations_with_duplicate_members(ledger, keydir, tmp_path):
    head = ledger / "ledger.json"
    _duplicate_first(head, "algorithm", "aes-128-gmac")
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub")
    assert (
        r.returncode == 2
        and r.stderr.strip()
        == f"ledgertool: error: {head}: duplicate member 'algorithm' in an object"
    ), r.stderr
    head.write_text(head.read_text().replace('{"algorithm": "aes-128-gmac",', "{", 1))
    _, sk, _ = load_keys(keydir)
    res = rotate_keys(ledger, sk, SigningKey.generate())
    stmt = Path(res["path"])
    _duplicate_first(stmt, "effective_from", {"link0": 0})
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub")
    assert r.returncode == 2 and f"{stmt}: duplicate member 'effective_from'" in r.stderr, r.stderr


def test_key_files_with_duplicate_members(tmp_path, keydir):
    pub = tmp_path / "verifier.pub"
    pub.write_text((keydir / "verifier.pub").read_text())
    _duplicate_first(pub, "scheme", "ed25519")
    with pytest.raises(KeyFileError, match="duplicate member 'scheme'"):
        TrustBundle.load(pub)
    key = tmp_path / "signing.key"
    key.write_text((keydir / "signing.key").read_text())
    os.chmod(key, 0o600)
    _duplicate_first(key, "scheme", "ed25519")
    with pytest.raises(KeyFileError, match="duplicate member 'scheme'"):
        SigningKey.load(key)


def _proof(ledger, tmp_path, edit) -> Path:
    doc = build_proof(
        ledger, seq=5
    ).to_json()  # segment 0, record 5, leaf 0: several fields are 0 or 1
    assert doc["checkpoint"] is not None
    edit(doc)
    out = tmp_path / "proof.json"
    out.write_text(json.dumps(doc))
    return out


BAD_INTEGERS = {
    "leaf_block.first_record_index": (lambda d: d["leaf_block"].update(first_record_index=False)),
    "leaf_block.records": (
        lambda d: d["leaf_block"].update(records=float(d["leaf_block"]["records"]))
    ),
    "record.flags": (lambda d: d["record"].update(flags=False)),
    "record.wire_len": (lambda d: d["record"].update(wire_len=float(d["record"]["wire_len"]))),
    "checkpoint.leaf_index": (lambda d: d["checkpoint"].update(leaf_index=False)),
    "checkpoint.tree_size": (
        lambda d: d["checkpoint"].update(tree_size=float(d["checkpoint"]["tree_size"]))
    ),
    "seal.segment": (lambda d: d["seal"].update(segment=False)),
    "seal.records": (lambda d: d["seal"].update(records=float(d["seal"]["records"]))),
    "'segment'": (lambda d: d.update(segment=False)),
}


@pytest.mark.parametrize("field", list(BAD_INTEGERS))
def test_proof_integers_must_be_json_integers(ledger, keydir, tmp_path, field):
    path = _proof(ledger, tmp_path, BAD_INTEGERS[field])
    r = cli("check-proof", path, "--trust", keydir / "verifier.pub")
    assert r.returncode == 2 and field in r.stderr and r.stdout == "", (
        r.returncode,
        r.stdout,
        r.stderr,
    )
    # check_proof on a dict that never went through parse_proof refuses it too
    doc = json.loads(path.read_text(), parse_float=float)
    res = check_proof(doc, TrustBundle.load(keydir / "verifier.pub"))
    assert not res.ok and field.strip("'") in res.reason


def test_proof_with_a_duplicate_member_is_refused(ledger, keydir, tmp_path):
    path = _proof(ledger, tmp_path, lambda d: None)
    assert cli("check-proof", path, "--trust", keydir / "verifier.pub").returncode == 0
    text = path.read_text()
    path.write_text('{"record_index": 99, ' + text[1:])
    r = cli("check-proof", path, "--trust", keydir / "verifier.pub")
    assert r.returncode == 2 and "duplicate member 'record_index'" in r.stderr
    with pytest.raises(LedgerFormatError, match="record must have exactly"):
        parse_proof(
            json.dumps(_edit(json.loads(text), lambda d: d["record"].update(extra=1))).encode()
        )


def _edit(doc: dict, how) -> dict:
    how(doc)
    return doc
