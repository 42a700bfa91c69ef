"""Go's golang.org/x/mod/sumdb/tlog (tests/tlog_check.go, built once a module) checks the segment
roots and `prove` audit paths of a ledger with BLAKE3 leaf entries, given each block's entry."""

from __future__ import annotations

import json
import subprocess

from conftest import cli_in_process
from test_blake3_leaf_entries import entry, ledger, raw_records  # noqa: F401  (the blake3 ledger)
from test_rfc9162_go_tlog import tlog_check  # noqa: F401  (the Go checker, built once a module)


def test_go_tlog_accepts_blake3_leaf_roots_and_proofs_given_the_entries(
    ledger, tmp_path, monkeypatch, capsys, tlog_check
):
    """Go's golang.org/x/mod/sumdb/tlog (tests/tlog_check.go) over each block's BLAKE3 entry:
    segment roots (TreeHash) and `prove` audit paths (CheckRecord); one hash changed is refused."""
    cases = []
    for p in sorted(ledger.glob("link=link0/seg-*.seal.json")):
        s = json.loads(p.read_text())
        recs = raw_records(p.with_name(p.name.replace(".seal.json", ".rec")))
        cases.append(
            {
                "kind": "root",
                "root": s["merkle_root"],
                "entries": [entry(b"".join(recs[i : i + 8])).hex() for i in range(0, len(recs), 8)],
            }
        )
    for seq in (0, 150, 293):
        out = tmp_path / f"p{seq}.json"
        code, o, e = cli_in_process("prove", str(ledger), "--seq", str(seq), "--out", str(out))
        assert code == 0, o + e
        doc = json.loads(out.read_text())
        cases.append(
            {
                "kind": "inclusion",
                "index": doc["leaf_index"],
                "size": doc["tree_size"],
                "entry": entry(bytes.fromhex(doc["leaf_block"]["hex"])).hex(),
                "proof": doc["audit_path"],
                "root": doc["seal"]["merkle_root"],
            }
        )
    bad = [dict(c, root=c["root"][:-1] + ("0" if c["root"][-1] != "0" else "1")) for c in cases]
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
    assert lines == ["ok"] * len(cases) + lines[len(cases) :]
    assert len(lines) == 2 * len(cases) and all(x.startswith("fail:") for x in lines[len(cases) :])
