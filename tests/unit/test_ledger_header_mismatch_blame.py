"""ledger_header_mismatch says which side changed: ledger.json when every seal of the link signs
another header, the seals when the link's other seals sign the ledger.json that is there."""

from __future__ import annotations

import json

from ledgertool.keyfiles import TrustBundle
from ledgertool.verify.ledger import verify_ledger


def _finding(led, keydir):
    v = verify_ledger(led, TrustBundle.load(keydir / "verifier.pub"))
    (p,) = [p for p in v.problems if p.kind == "ledger_header_mismatch"]
    return p


def test_one_changed_seal_is_blamed_not_the_header(sample_ledger, keydir):
    seal = sample_ledger / "link=link0" / "seg-00000001.seal.json"
    doc = json.loads(seal.read_text())
    h = doc["ledger_header_sha256"]
    doc["ledger_header_sha256"] = ("0" if h[0] != "0" else "1") + h[1:]
    seal.write_text(json.dumps(doc))
    p = _finding(sample_ledger, keydir)
    assert p.segment == 1
    assert "1 seal(s) of link link0 sign (segments 1..1): those seals were changed" in p.detail
    assert "(the link's other 2 name this one)" in p.detail


def test_an_edited_header_is_blamed(sample_ledger, keydir):
    header = sample_ledger / "ledger.json"
    doc = json.loads(header.read_text())
    doc["created_at"] = "2001-01-01T00:00:00Z"  # a valid header, not the one sealed
    header.write_text(json.dumps(doc))
    p = _finding(sample_ledger, keydir)
    assert "3 seal(s) of link link0 sign (segments 0..2): ledger.json was edited" in p.detail
