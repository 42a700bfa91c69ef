"""A checkpoint whose signature fails says nothing the signer vouched for: verify reports the bad
signature and draws no conclusion about the ledger from the note's size or root."""

from __future__ import annotations

import json

from conftest import cli


def test_a_forged_size_is_only_a_bad_signature(sample_ledger, keydir, tmp_path):
    cp = tmp_path / "cp"
    assert cli("checkpoint", sample_ledger, "--out", cp).returncode == 0
    lines = cp.read_text().split("\n")
    assert lines[1] == "3"  # the tree size: 3 sealed segments
    lines[1] = "7"  # claims more segments than the ledger holds
    cp.write_text("\n".join(lines))
    r = cli(
        "verify", sample_ledger, "--trust", keydir / "verifier.pub", "--checkpoint", cp, "--json"
    )
    assert r.returncode == 1, r.stderr
    kinds = [p["kind"] for p in json.loads(r.stdout)["problems"]]
    assert kinds == ["checkpoint_bad_signature"], kinds
