"""`capture --leaf-hash blake3 --ledger-format v1`: refused, exit 2, nothing written, with one line
that names the ledger and says what to do, not "'blake3' is not one of sha256, blake3"."""

from __future__ import annotations

from conftest import SAMPLES, cli


def test_blake3_leaves_on_v1_say_they_need_v2(tmp_path, keydir):
    led = tmp_path / "L"
    r = cli(
        "capture", SAMPLES / "sample.pcap", "--ledger", led, "--ledger-format", "v1",
        "--leaf-hash", "blake3", "--digest-key", keydir / "digest.key",
        "--signing-key", keydir / "signing.key",
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr == (
        f"ledgertool: error: {led}: leaf hash 'blake3' is for ledger format v2 only (a v1 ledger "
        "keeps sha256 leaves)\n"
    ), r.stderr
    assert not led.exists()


def test_an_unknown_leaf_hash_is_still_named(tmp_path, keydir):
    r = cli(
        "capture", SAMPLES / "sample.pcap", "--ledger", tmp_path / "L", "--leaf-hash", "md5",
        "--digest-key", keydir / "digest.key", "--signing-key", keydir / "signing.key",
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "md5" in r.stderr, r.stderr
