"""A signing key that `keys rotate` retired cannot vouch for the history sealed after the
rotation's `effective_from`: a checkpoint it signs over those later segments is refused by
`verify --checkpoint` (a finding, exit 1), `check-consistency` (exit 1) and `check-proof`, while
its checkpoints over the segments before the rotation still verify."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES, cli_in_process, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.keyfiles import SigningKey, generate_keys
from ledgertool.ledger.checkpoints import check_consistency, make_checkpoint
from ledgertool.ledger.header import load_ledger
from ledgertool.seal.checkpoint import sign_checkpoint
from ledgertool.verify.ledger import verify_ledger
from ledgertool.verify.proof import build_proof, check_proof


@pytest.fixture()
def rotated(tmp_path, sample_ledger, keydir, monkeypatch, capsys):
    """sample_ledger (3 segments under the root key), `keys rotate` to a new key, then 3 more
    segments sealed by the new key; with the checkpoint the old key stored before the rotation
    and one it signs afterwards over all 6 segments."""
    dk, old_key, trust = load_keys(keydir)
    before = (sample_ledger / "checkpoint").read_bytes()
    generate_keys(tmp_path / "k2")
    code, out, err = cli_in_process(
        "keys",
        "rotate",
        sample_ledger,
        "--old",
        keydir / "signing.key",
        "--new",
        tmp_path / "k2" / "signing.key",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["effective_from"] == {"link0": 3}
    capture_file(
        SAMPLES / "sample.pcapng",
        sample_ledger,
        digest_key=dk,
        signing_key=SigningKey.load(tmp_path / "k2" / "signing.key"),
        segment_records=100,
    )
    cp = make_checkpoint(sample_ledger, load_ledger(sample_ledger), "link0")
    assert cp.size == 6
    forged = tmp_path / "retired.cp"
    forged.write_bytes(sign_checkpoint(cp, old_key))
    held = tmp_path / "before.cp"
    held.write_bytes(before)
    return sample_ledger, trust, held, forged


def test_retired_key_checkpoint_over_later_segments_is_a_verify_finding(
    rotated, keydir, monkeypatch, capsys
):
    ledger, trust, held, forged = rotated
    res = verify_ledger(ledger, trust, forged.read_bytes(), str(forged))
    assert [p.kind for p in res.problems] == ["checkpoint_bad_signature"]
    assert (
        "retired signing key (rotation 1 replaced it from segment 3 of link link0)"
        in res.problems[0].detail
    )
    assert "6 segments" in res.problems[0].detail
    code, out, err = cli_in_process(
        "verify",
        ledger,
        "--trust",
        keydir / "verifier.pub",
        "--checkpoint",
        forged,
    )
    assert (
        code == 1 and "checkpoint_bad_signature" in out + err and "retired signing key" in out + err
    )


def test_retired_key_checkpoint_before_rotation_still_verifies(
    rotated, keydir, monkeypatch, capsys
):
    ledger, trust, held, _ = rotated
    res = verify_ledger(ledger, trust, held.read_bytes(), str(held))
    assert res.ok and res.segments == 6, res.problems
    code, _, err = cli_in_process(
        "verify",
        ledger,
        "--trust",
        keydir / "verifier.pub",
        "--checkpoint",
        held,
    )
    assert code == 0, err


def test_retired_key_checkpoint_is_inconsistent(rotated, keydir, monkeypatch, capsys):
    ledger, trust, held, forged = rotated
    res = check_consistency(held.read_bytes(), forged.read_bytes(), ledger, trust, "OLD", "NEW")
    assert not res.ok and res.reason.startswith("NEW: signed by a retired signing key")
    current = (ledger / "checkpoint").read_bytes()  # the new key's, over the same 6 segments
    assert check_consistency(held.read_bytes(), current, ledger, trust).ok
    code, out, _ = cli_in_process(
        "check-consistency",
        held,
        forged,
        "--ledger",
        ledger,
        "--trust",
        keydir / "verifier.pub",
    )
    assert code == 1 and out.startswith("INCONSISTENT: ") and "retired signing key" in out


def test_retired_key_checkpoint_in_a_proof_is_refused(rotated):
    ledger, trust, _, forged = rotated
    doc = build_proof(ledger, seq=400).to_json()  # a record in segment 4, sealed by the new key
    assert check_proof(doc, trust).ok
    part = doc["checkpoint"]
    assert part["tree_size"] == 6
    part["note"] = forged.read_text()
    res = check_proof(doc, trust)
    assert not res.ok and "retired signing key" in res.reason
