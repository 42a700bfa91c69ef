"""prune --before beyond a u64 (or below 0) is bad input, exit 2, nothing written: the statement
holds the cut-off as a u64, so signing one past it left a statement verify refuses, with the
record files already removed (a ledger that no longer verifies). The largest u64 still prunes."""

from __future__ import annotations

from conftest import cli
from test_prune import built, ledger  # noqa: F401 - the fixtures


def _files(lg) -> list[str]:
    return sorted(str(p.relative_to(lg)) for p in lg.rglob("*") if p.name != ".lock")


def test_a_cutoff_outside_u64_is_refused_and_nothing_is_removed(built, ledger):  # noqa: F811
    before = _files(ledger)
    for cut in (str(2**64), "99999999999999999999999", "-1"):
        r = cli(
            "prune", ledger, "--before", cut, "--signing-key", built["keys"] / "signing.key",
        )  # fmt: skip
        assert r.returncode == 2, (cut, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
        assert f"--before {cut}: the cut-off must be 0..2^64-1 ns" in r.stderr, r.stderr
        assert _files(ledger) == before
    v = cli("verify", ledger, "--trust", built["keys"] / "verifier.pub")
    assert v.returncode == 0, (v.stdout, v.stderr)
    assert "pruned" not in v.stdout


def test_the_largest_u64_prunes_every_sealed_segment_and_verifies(built, ledger):  # noqa: F811
    r = cli(
        "prune", ledger, "--before", str(2**64 - 1),
        "--signing-key", built["keys"] / "signing.key",
    )  # fmt: skip
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "pruned link link0 segments 0..5: 294 records" in r.stdout
    v = cli("verify", ledger, "--trust", built["keys"] / "verifier.pub")
    assert v.returncode == 0, (v.stdout, v.stderr)
    assert "pruned link0: segments 0..5 (294 records" in v.stdout
