"""Messages name keys and JSON shapes in the user's words, not Python's: the key a rotated
ledger is signed by as `ed25519 ID, ml-dsa-65 ID` (not a dict), a proof field of the wrong shape
as `an object` (not `dict`)."""

from __future__ import annotations

import json

import pytest
from conftest import cli

from ledgertool.errors import KeyFileError
from ledgertool.keyfiles import SigningKey
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.rotations import current_signer_check, rotate_keys


def test_a_rotated_ledger_names_its_signer_in_words(sample_ledger, keydir, other_keydir):
    old = SigningKey.load(keydir / "signing.key")
    new = SigningKey.load(other_keydir / "signing.key")
    rotate_keys(sample_ledger, old, new)
    with pytest.raises(KeyFileError) as e:
        current_signer_check(sample_ledger, load_ledger(sample_ledger), old)
    ids = new.trust_bundle().key_ids
    want = ", ".join(f"{a} {k}" for a, k in sorted(ids.items()))
    assert str(e.value).endswith(f"(after rotation 1, {sample_ledger} is signed by {want})")
    assert "{" not in str(e.value)


def test_a_proof_field_of_the_wrong_shape_is_named_in_json_words(sample_ledger, tmp_path, keydir):
    proof = tmp_path / "p.json"
    assert cli("prove", sample_ledger, "--seq", "3", "--out", proof).returncode == 0
    doc = json.loads(proof.read_text())
    doc["seal"] = []
    proof.write_text(json.dumps(doc))
    r = cli("check-proof", proof, "--trust", keydir / "verifier.pub")
    assert r.returncode in (1, 2), (r.stdout, r.stderr)
    assert "field 'seal' missing or not an object" in r.stdout + r.stderr
    assert "dict" not in r.stdout + r.stderr
