"""A ledger of window records alone has seals only in its window logs: appending to it, or
pruning it, with a signing key that is not the one its seals carry is refused (exit 2) before
anything is written, as for a ledger with per-frame records."""

from __future__ import annotations

from conftest import SAMPLES, capture_windows, cli


def _files(d):
    """Every file and its size, but the writer lock (it names the last process that held it)."""
    return sorted(
        (p.relative_to(d), p.stat().st_size)
        for p in d.rglob("*")
        if p.is_file() and p.name != ".lock"
    )


def test_a_windows_only_ledger_refuses_another_signing_key(tmp_path, keydir, other_keydir):
    led = tmp_path / "W"
    first = capture_windows(led, keydir)
    assert first.returncode == 0, first.stderr
    before = _files(led)
    other = other_keydir / "signing.key"
    again = cli(
        "capture", SAMPLES / "sample.pcapng", "--ledger", led, "--tiers", "windows",
        "--link", "link1", "--signing-key", other, "--digest-key", keydir / "digest.key",
    )  # fmt: skip
    assert again.returncode == 2, (again.stdout, again.stderr)
    assert f"{other}: is not the key that signs ledger {led}" in again.stderr
    assert _files(led) == before
    pruned = cli("prune", led, "--before", "2030-01-01", "--signing-key", other)
    assert pruned.returncode == 2, (pruned.stdout, pruned.stderr)
    assert "is not the key that signs ledger" in pruned.stderr
    assert _files(led) == before
    ok = cli("verify", led, "--trust", keydir / "verifier.pub")
    assert ok.returncode == 0, ok.stdout
