"""`keys vkey --ledger DIR` on a ledger whose signing key was rotated says on stderr, in one line,
which of the ledger's keys the printed vkey is: the current one (checkpoints written before the
rotation were signed by another key), a retired one, or none; stdout keeps the vkey alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, cli


def _capture(led: Path, keys: Path, signing: str = "signing.key"):
    r = cli(
        "capture", SAMPLES / "sample.pcap", "--ledger", led, "--digest-key", keys / "digest.key",
        "--signing-key", keys / signing, "--segment-records", "100",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def rotated(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(ledger, old keys, new keys): 294 frames in segments 0..2, the key rotated, 294 more."""
    tmp = tmp_path_factory.mktemp("rotated")
    old, new, led = tmp / "old", tmp / "new", tmp / "L"
    for d in (old, new):
        assert cli("keys", "generate", d).returncode == 0
    _capture(led, old)
    r = cli("keys", "rotate", led, "--old", old / "signing.key", "--new", new / "signing.key")
    assert r.returncode == 0, r.stderr
    (new / "digest.key").unlink()
    (new / "digest.key").symlink_to(old / "digest.key")
    _capture(led, new)
    return led, old, new


def _vkey(led, bundle, *extra):
    r = cli("keys", "vkey", bundle, "--ledger", led, *extra)
    assert r.returncode == 0, r.stderr
    return r


def test_the_current_key_is_named_current(rotated):
    led, _old, new = rotated
    r = _vkey(led, new / "verifier.pub")
    assert r.stdout.count("\n") == 1 and r.stdout.startswith("ledgertool/")
    assert r.stderr == (
        f"warning: {led}: the ledger's signing key was rotated (1 time): this vkey is the current "
        "key's (rotation 1's new key, signing from link0 segment 3); checkpoints written before "
        "that were signed by an earlier key and do not verify with it\n"
    )


def test_a_retired_key_is_named_retired(rotated):
    led, old, _new = rotated
    r = _vkey(led, old / "verifier.pub")
    assert r.stderr == (
        f"warning: {led}: the ledger's signing key was rotated (1 time): this vkey is a retired "
        "key's (rotation 1 replaced it from link0 segment 3): ledgertool accepts its checkpoints "
        "only up to there, a standard verifier does not know that; the current key is rotation "
        "1's new key\n"
    )


def test_a_key_of_another_ledger_is_none_of_its_keys(rotated, keydir):
    led, _old, _new = rotated
    r = _vkey(led, keydir / "verifier.pub")
    assert r.stderr == (
        f"warning: {led}: the ledger's signing key was rotated (1 time), and this key is none of "
        "its signing keys: it verifies no checkpoint\n"
    )


def test_json_stays_on_stdout_and_the_warning_on_stderr(rotated):
    led, _old, new = rotated
    r = _vkey(led, new / "verifier.pub", "--json")
    assert json.loads(r.stdout)["ok"] is True
    assert r.stderr.startswith(f"warning: {led}: the ledger's signing key was rotated (1 time)")
    assert r.stderr.count("\n") == 1


def test_no_warning_without_a_signing_key_rotation(tmp_path):
    keys, led = tmp_path / "k", tmp_path / "L"
    assert cli("keys", "generate", keys).returncode == 0
    _capture(led, keys)
    assert cli("keys", "generate", tmp_path / "k3").returncode == 0
    r = cli(
        "keys", "rotate-digest", led, "--signing-key", keys / "signing.key",
        "--old-digest-key", keys / "digest.key", "--new-digest-key", tmp_path / "k3/digest.key",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # a digest-key rotation leaves the signing key, and so the vkey, as it was
    assert (_vkey(led, keys / "verifier.pub").stderr) == ""


def test_statements_that_do_not_verify_are_said_so(rotated, tmp_path):
    led, _old, new = rotated
    copy = tmp_path / "L"
    shutil.copytree(led, copy, symlinks=True)
    path = copy / "rotations" / "rotation-0001.json"
    doc = json.loads(path.read_text())
    doc["created_at"] = "2000-01-01T00:00:00Z"
    path.write_text(json.dumps(doc))
    r = _vkey(copy, new / "verifier.pub")
    assert r.stderr.startswith(f"warning: {copy}: rotation 1: "), r.stderr
    assert r.stderr.endswith(
        ": the ledger's key rotation statements do not verify, so which key signs its checkpoints "
        "is not known (`verify` says more)\n"
    )
    assert r.stderr.count("\n") == 1
