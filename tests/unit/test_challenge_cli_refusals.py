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


def test_draw_refuses_a_range_length_the_challenge_document_cannot_hold(
    sample_ledger, keydir, tmp_path
):
    """2^53 - 1 is the largest integer a canonical JSON document holds exactly: one more, or one
    past u64 (the seed's field), was a traceback-free but internal error (OverflowError or
    ValueError), not the option named."""
    args = ("challenge", "draw", sample_ledger, "--checkpoint", sample_ledger / "checkpoint")
    args += ("--trust", keydir / "verifier.pub", "--beacon", "ab" * 16, "-k", "1")
    for rr in (0, 2**53, 2**64, 10**23):
        r = cli(*args, "--range-records", rr, "--out", tmp_path / "ch.json")
        assert r.returncode == 2, (rr, r.stderr)
        assert r.stderr == (
            f"ledgertool: error: --range-records {rr}: give 1 to 2^53 - 1 records\n"
        ), rr
        assert not (tmp_path / "ch.json").exists()
    r = cli(*args, "--range-records", 2**53 - 1, "--out", tmp_path / "ch.json", "--json")
    assert r.returncode == 0, r.stderr
    assert '"range_records": 9007199254740991' in r.stdout and '"population": 1' in r.stdout
