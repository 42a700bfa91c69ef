"""Working with other tools: `ledgertool keys vkey` publishes the checkpoint key as a
c2sp.org/signed-note verifier key, and Go's golang.org/x/mod/sumdb/note (tests/note_check.go)
verifies the checkpoints ledgertool writes given nothing but that string."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, SAMPLES, cli

SCHEMAS = REPO / "schemas"
GOPATH = Path("/usr/share/gocode")  # Debian's golang-golang-x-mod-dev


def _ledger(tmp: Path, scheme: str) -> tuple[Path, Path]:
    """(ledger, keys dir): the sample captured with keys of `scheme`."""
    keys, led = tmp / f"keys-{scheme}", tmp / f"L-{scheme}"
    r = cli("keys", "generate", keys, "--scheme", scheme)
    assert r.returncode == 0, r.stderr
    r = cli(
        "capture",
        SAMPLES / "sample.pcapng",
        "--ledger",
        led,
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        keys / "signing.key",
        "--segment-records",
        "100",
    )
    assert r.returncode == 0, r.stderr
    return led, keys


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory) -> tuple[Path, Path]:
    return _ledger(tmp_path_factory.mktemp("vkey"), "hybrid")


def _vkey(led: Path, keys: Path) -> str:
    r = cli("keys", "vkey", keys / "verifier.pub", "--ledger", led)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_vkey_is_the_signed_note_encoding_of_the_ed25519_key(hybrid):
    led, keys = hybrid
    vkey = _vkey(led, keys)
    ledger_id = json.loads((led / "ledger.json").read_text())["ledger_id"]
    name, kid, key = vkey.split("+", 2)
    assert name == f"ledgertool/{ledger_id}"
    pub = next(
        k
        for k in json.loads((keys / "verifier.pub").read_text())["keys"]
        if k["algorithm"] == "ed25519"
    )
    raw = base64.b64decode(key, validate=True)
    # signature type 0x01 || 32-byte key
    assert raw == b"\x01" + base64.b64decode(pub["public_key"])
    # signed-note's key id rule, and the id the checkpoint's Ed25519 signature line carries
    assert kid == hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4].hex()
    sig_lines = (led / "checkpoint").read_text().split("\n\n")[-1].splitlines()
    assert [base64.b64decode(ln.split(" ")[2])[:4].hex() for ln in sig_lines][0] == kid
    r = cli("keys", "vkey", "--trust", keys / "verifier.pub", "--ledger-id", ledger_id, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, json.loads((SCHEMAS / "keys-vkey-report.schema.json").read_text()))
    assert doc == {
        "ok": True,
        "vkey": vkey,
        "name": name,
        "key_id": kid,
        "algorithm": "ed25519",
        "ledger_id": ledger_id,
    }


def test_vkey_refusals(hybrid, tmp_path):
    led, keys = hybrid
    r = cli("keys", "vkey", "--trust", keys / "verifier.pub")
    assert r.returncode == 2 and "give --ledger DIR or --ledger-id ID" in r.stderr, r.stderr
    r = cli("keys", "vkey", "--ledger", led, cwd=keys)  # VERIFIER defaults to ./verifier.pub
    assert r.returncode == 0 and r.stdout == _vkey(led, keys) + "\n", r.stderr
    r = cli("keys", "vkey", keys / "verifier.pub", "--trust", keys / "signing.key", "--ledger", led)
    assert r.returncode == 2 and "give VERIFIER or --trust, not both" in r.stderr, r.stderr
    r = cli("keys", "vkey", keys / "verifier.pub", "--ledger-id", "ABC")
    assert r.returncode == 2 and "ledger id 'ABC' is not 32 lowercase hex digits" in r.stderr, (
        r.stderr
    )
    r = cli("keys", "vkey", keys / "signing.key", "--ledger", led)
    assert r.returncode == 2 and "expected a verifier trust bundle" in r.stderr, r.stderr
    mled, mkeys = _ledger(tmp_path, "mldsa65")
    r = cli("keys", "vkey", mkeys / "verifier.pub", "--ledger", mled)
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert (
        "scheme mldsa65 has no Ed25519 key" in r.stderr
        and "verify only with ledgertool" in r.stderr
    )
