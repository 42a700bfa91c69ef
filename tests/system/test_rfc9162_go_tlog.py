"""The ledger's roots and proofs check with Go's golang.org/x/mod/sumdb/tlog (built offline from
GOPATH; skipped without Go)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import cli, go_build
from test_rfc9162_independent import (  # noqa: F401  (shared with the in-process tests)
    GOPATH,
    RECORD,
    consistency,
    ledger,
    note_tree,
    seal_hash,
    seals,
    segment_records,
    seven,
)

TLOG = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb" / "tlog"


@pytest.fixture(scope="module")
def tlog_check(tmp_path_factory) -> Path:
    return go_build(tmp_path_factory, GOPATH, TLOG, "tlog_check.go")


def test_go_tlog_accepts_the_ledgers_roots_and_proofs(tlog_check, seven, keydir, tmp_path):
    """Segment roots over record blocks, the checkpoint root over seal hashes, `prove` audit paths
    (to the seal and to the checkpoint) and `check-consistency` proofs, each checked by tlog's
    TreeHash / CheckRecord / CheckTree; the same cases with one hash changed are refused."""
    led, notes = seven
    docs = seals(led)
    leaf = json.loads((led / "ledger.json").read_text())["leaf_records"]
    cases = [
        {
            "kind": "root",
            "entries": [seal_hash(s).hex() for s in docs],
            "root": note_tree(notes[7].read_bytes())[1].hex(),
        }
    ]
    for s in docs[:2]:
        recs = segment_records(led, s)
        cases.append(
            {
                "kind": "root",
                "entries": [b"".join(recs[i : i + leaf]).hex() for i in range(0, len(recs), leaf)],
                "root": s["merkle_root"],
            }
        )
    for seq in (0, 293, 294 * 3 + 100, 294 * 7 - 1):
        out = tmp_path / f"p{seq}.json"
        r = cli("prove", led, "--seq", seq, "--out", out)
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())
        cases.append(
            {
                "kind": "inclusion",
                "index": doc["leaf_index"],
                "size": doc["tree_size"],
                "entry": doc["leaf_block"]["hex"],
                "proof": doc["audit_path"],
                "root": doc["seal"]["merkle_root"],
            }
        )
        cp = doc["checkpoint"]
        cases.append(
            {
                "kind": "inclusion",
                "index": cp["leaf_index"],
                "size": cp["tree_size"],
                "entry": seal_hash(doc["seal"]).hex(),
                "proof": cp["audit_path"],
                "root": note_tree(cp["note"].encode())[1].hex(),
            }
        )
    for m, n in ((1, 7), (3, 7), (4, 7), (6, 7), (3, 5)):
        res = consistency(led, notes[m], notes[n], keydir / "verifier.pub")
        assert res["proof"]
        cases.append(
            {
                "kind": "consistency",
                "old_size": m,
                "new_size": n,
                "old_root": res["old_root"],
                "new_root": res["new_root"],
                "proof": res["proof"],
            }
        )
    bad = []
    for c in cases:
        c = json.loads(json.dumps(c))
        if c["kind"] == "root":
            c["root"] = c["root"][:-1] + ("0" if c["root"][-1] != "0" else "1")
        else:
            c["proof"][-1] = "00" * 32
        bad.append(c)
    r = subprocess.run(
        [str(tlog_check)],
        input="".join(json.dumps(c) + "\n" for c in cases + bad),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[: len(cases)] == ["ok"] * len(cases)
    assert len(lines) == 2 * len(cases) and all(x.startswith("fail:") for x in lines[len(cases) :])
