"""`challenge commit` and `challenge draw` refuse what they cannot honour with one line, exit 2:
an existing nonce file (it may hold the nonce a published commitment opens) and a
`--range-records` no challenge document can hold."""

from __future__ import annotations

from conftest import cli


def test_commit_refuses_to_replace_an_existing_nonce(sample_ledger, tmp_path):
    nonce = tmp_path / "nonce"
    first = cli("challenge", "commit", "--checkpoint", sample_ledger / "checkpoint", "--out", nonce)
    assert first.returncode == 0, first.stderr
    kept = nonce.read_bytes()
    assert len(kept) == 65 and nonce.stat().st_mode & 0o777 == 0o600
    again = cli("challenge", "commit", "--checkpoint", sample_ledger / "checkpoint", "--out", nonce)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.count("\n") == 1
    assert again.stderr.startswith(f"ledgertool: error: {nonce}: already exists")
    assert nonce.read_bytes() == kept
