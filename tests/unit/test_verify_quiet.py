"""`verify -q` for a job that runs unattended: no append-only note on stderr (the report's JSON
still carries it), while the verdict stays on stdout."""

from __future__ import annotations

import json

from conftest import cli_in_process

NOTE = "append-only not checked against a checkpoint you hold"


def test_verify_quiet_leaves_out_the_append_only_note(sample_ledger, keydir):
    trust = ("--trust", keydir / "verifier.pub")
    rc, out, err = cli_in_process("verify", sample_ledger, *trust)
    assert rc == 0 and NOTE in err  # without -q: the note, as before
    for q in ("-q", "--quiet"):
        rc, out, err = cli_in_process("verify", sample_ledger, *trust, q)
        assert (rc, err) == (0, ""), err
        assert out.startswith("OK: 3 segments, 294 records")
        rc, out, err = cli_in_process("verify", sample_ledger, sample_ledger, *trust, q)
        assert (rc, err) == (0, ""), err
    rc, out, err = cli_in_process("verify", sample_ledger, *trust, "-q", "--json")
    assert rc == 0 and err == "" and NOTE in json.loads(out)["append_only"]["note"]
