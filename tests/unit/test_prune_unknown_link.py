"""prune --link NAME of a link the ledger has no per-frame records of is bad input (exit 2, the
ledger's links named), not "nothing to prune"; nothing is written."""

from __future__ import annotations

from conftest import cli
from test_prune import CUT, built, ledger  # noqa: F401 - the fixtures


def test_an_unknown_link_is_refused(built, ledger):  # noqa: F811
    before = sorted(p.name for p in ledger.rglob("*") if p.name != ".lock")
    r = cli(
        "prune", ledger, "--before", str(CUT), "--link", "nope",
        "--signing-key", built["keys"] / "signing.key",
    )  # fmt: skip
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"{ledger}: no link 'nope' with per-frame records (links: link0)" in r.stderr
    assert sorted(p.name for p in ledger.rglob("*") if p.name != ".lock") == before
    ok = cli(
        "prune", ledger, "--before", str(CUT), "--link", "link0",
        "--signing-key", built["keys"] / "signing.key",
    )  # fmt: skip
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
