"""After `prune`: query's `seals` table still has a row for every seal verify checked (the pruned
segments' seals are kept and checked) while `records` holds only the records still held; the note
and warnings on what is no longer held are left out where they do not apply (--quiet, a recompute
from after the pruned time)."""

from __future__ import annotations

import json

from conftest import cli
from test_prune import CUT, SAMPLE, built, ledger  # noqa: F401 - the fixtures

from ledgertool.ledger.prune import prune_ledger


def _rows(ledger, keys, sql):
    r = cli("query", ledger, "--trust", keys / "verifier.pub", "--format", "csv", sql)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout.split()


def test_the_seals_table_keeps_the_pruned_segments(built, ledger):  # noqa: F811
    sql = "SELECT count(*) AS n, sum(records) AS r, min(segment) AS lo FROM seals"
    before = _rows(ledger, built["keys"], sql)
    assert before == ["n,r,lo", "6,294,0"]
    prune_ledger(ledger, CUT, built["sk"])
    assert _rows(ledger, built["keys"], sql) == before
    held = "SELECT count(*) AS n, min(segment) AS lo FROM records"
    assert _rows(ledger, built["keys"], held) == ["n,lo", "144,3"]
    # each pruned seal's row is the seal as signed: its sequence numbers follow on unbroken
    seqs = _rows(ledger, built["keys"], "SELECT first_seq, last_seq FROM seals ORDER BY segment")
    ranges = [tuple(map(int, row.split(","))) for row in seqs[1:]]
    assert ranges[0][0] == 0 and all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:]))


def test_quiet_leaves_out_the_pruned_note(built, ledger):  # noqa: F811
    prune_ledger(ledger, CUT, built["sk"])
    args = ("query", ledger, "--trust", built["keys"] / "verifier.pub", "--format", "csv")
    sql = "SELECT count(*) AS n FROM records"
    loud, quiet = cli(*args, sql), cli(*args, "--quiet", sql)
    assert loud.stdout == quiet.stdout and quiet.stdout.split() == ["n", "144"]
    assert "records table does not hold" in loud.stderr
    assert quiet.stderr == ""


def test_recompute_from_after_the_pruned_time_has_no_pruned_warning(built, ledger):  # noqa: F811
    prune_ledger(ledger, CUT, built["sk"])
    args = ("--digest-key", built["keys"] / "digest.key", "--trust", built["keys"] / "verifier.pub")
    base = ("recompute", SAMPLE, "--ledger", ledger, "--against", "frames", *args, "--json")
    before = json.loads(cli(*base).stdout)
    assert [w for w in before["warnings"] if "were pruned" in w]
    after = cli(*base, "--from", str(CUT))
    doc = json.loads(after.stdout)
    assert after.returncode == 0, (after.stdout, after.stderr)
    assert doc["capture_only"] == 0 and not [w for w in doc["warnings"] if "were pruned" in w]
