"""`keys vkey` with both --ledger and --ledger-id is refused as both: it was refused with the
message for neither ("needs the ledger: give --ledger DIR or --ledger-id ID"), which sent the user
to add what they had already given."""

from __future__ import annotations

from conftest import cli


def test_both_ledger_and_ledger_id_is_refused_as_both_not_as_neither(sample_ledger, keydir):
    from ledgertool.ledger.header import load_ledger

    lid = load_ledger(sample_ledger).ledger_id
    r = cli("keys", "vkey", keydir / "verifier.pub", "--ledger", sample_ledger, "--ledger-id", lid)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        "ledgertool: error: keys vkey takes one ledger: give --ledger DIR or --ledger-id ID, "
        "not both\n"
    )
    neither = cli("keys", "vkey", keydir / "verifier.pub")
    assert neither.returncode == 2 and "needs the ledger" in neither.stderr
    one = cli("keys", "vkey", keydir / "verifier.pub", "--ledger-id", lid)
    assert one.returncode == 0 and one.stdout.startswith(f"ledgertool/{lid}+")
