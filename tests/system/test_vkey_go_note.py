"""Checkpoints verify with Go's golang.org/x/mod/sumdb/note given only the vkey (skipped without
Go)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import cli, go_build
from test_vkey import (  # noqa: F401  (shared with the in-process tests)
    GOPATH,
    _ledger,
    _vkey,
    hybrid,
)

NOTE_PKG = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb" / "note"


@pytest.fixture(scope="module")
def note_check(tmp_path_factory) -> Path:
    return go_build(tmp_path_factory, GOPATH, NOTE_PKG, "note_check.go")


def _go(exe: Path, cases: list[tuple[str, str]]) -> list[str]:
    r = subprocess.run(
        [str(exe)],
        input="".join(json.dumps({"vkey": v, "note": n}) + "\n" for v, n in cases),
        check=False,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_go_sumdb_note_verifies_checkpoints_with_only_the_vkey(note_check, hybrid, tmp_path):
    led, keys = hybrid
    vkey = _vkey(led, keys)
    name, kid, _ = vkey.split("+", 2)
    stored = (led / "checkpoint").read_text()
    exported = tmp_path / "cp"
    # freshly signed
    r = cli("checkpoint", led, "--out", exported, "--signing-key", keys / "signing.key")
    assert r.returncode == 0, r.stderr
    eled, ekeys = _ledger(tmp_path, "ed25519")
    evkey = _vkey(eled, ekeys)
    forged = stored.replace("\n3\n", "\n4\n", 1)  # the tree size changed, the signatures kept
    assert forged != stored
    bad_hash = f"{name}+{int(kid, 16) ^ 1:08x}+{vkey.split('+', 2)[2]}"
    lines = _go(
        note_check,
        [
            (vkey, stored),
            (vkey, exported.read_text()),
            (evkey, (eled / "checkpoint").read_text()),
            (vkey, forged),
            (evkey, stored),
            (bad_hash, stored),
        ],
    )
    origin = stored.splitlines()[0]
    # a hybrid note: the Ed25519 line verifies, the ML-DSA-65 line is an unknown key to Go (ignored)
    assert lines[0] == lines[1] == f"ok {name} {kid} 1 {origin}"
    ename, ekid, _ = evkey.split("+", 2)
    assert lines[2] == f"ok {ename} {ekid} 0 {(eled / 'checkpoint').read_text().splitlines()[0]}"
    assert lines[3] == f"fail: invalid signature for key {name}+{kid}"
    assert lines[4] == "fail: note has no verifiable signatures"
    assert lines[5] == "fail: invalid verifier hash"
