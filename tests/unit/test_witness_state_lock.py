"""One witness per state directory: a second `witness serve` on the same --state (a restart that
overlaps the old process, an operator's slip) would hold its own copy of what was cosigned, and the
two could each cosign another root for one size. It is refused while the first one runs."""

from __future__ import annotations

import hashlib

import pytest
from conftest import cli, load_keys

from ledgertool.errors import LedgerLockedError
from ledgertool.seal import merkle
from ledgertool.seal.checkpoint import Checkpoint, sign_checkpoint, verifier_key
from ledgertool.seal.witness import ED25519_NOTE, WitnessSigner, parse_vkey, request_body
from ledgertool.witness.server import Witness

LEDGER_ID = "0123456789abcdef0123456789abcdef"
ORIGIN = f"ledgertool/{LEDGER_ID}/link0"


def _setup(keydir):
    _, sk, trust = load_keys(keydir)
    key = parse_vkey(str(verifier_key(LEDGER_ID, trust)), "vkey", ED25519_NOTE)
    return sk, {ORIGIN: [key]}


def _note(sk, fork: bytes) -> bytes:
    leaves = [merkle.leaf_hash(hashlib.sha256(fork + b"%d" % i).digest()) for i in range(3)]
    return sign_checkpoint(Checkpoint(ORIGIN, 3, merkle.root_from_leaf_hashes(leaves), 30), sk)


def test_a_second_witness_on_the_same_state_is_refused_until_the_first_closes(keydir, tmp_path):
    sk, logs = _setup(keydir)
    state = tmp_path / "state"
    a = Witness(WitnessSigner("w.test/a", b"a" * 32), logs, state)
    try:
        with pytest.raises(LedgerLockedError, match="another witness serves from this state"):
            Witness(WitnessSigner("w.test/b", b"b" * 32), logs, state)
        assert a.add_checkpoint(request_body(0, [], _note(sk, b""))).status == 200
    finally:
        a.close()
    # the first one gone, a successor starts from what it cosigned: another root is a fork
    b = Witness(WitnessSigner("w.test/a", b"a" * 32), logs, state)
    try:
        assert b.add_checkpoint(request_body(3, [], _note(sk, b"fork"))).status == 409
        assert b.add_checkpoint(request_body(3, [], _note(sk, b""))).status == 200
    finally:
        b.close()


def test_witness_serve_on_a_state_in_use_is_one_line_exit_2(keydir, tmp_path):
    _, logs = _setup(keydir)
    state = tmp_path / "state"
    key = tmp_path / "w.key"
    assert cli("witness", "keygen", "--name", "w.test/a", "--out", key).returncode == 0
    v = cli("keys", "vkey", keydir / "verifier.pub", "--ledger-id", LEDGER_ID).stdout.strip()
    a = Witness(WitnessSigner("w.test/a", b"a" * 32), logs, state)
    try:
        r = cli("witness", "serve", "--key", key, "--state", state, "--log", f"{ORIGIN}={v}")
    finally:
        a.close()
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        f"ledgertool: error: {state}: another witness serves from this state directory; one "
        "witness per state (two would each cosign from their own copy of it)\n"
    )
