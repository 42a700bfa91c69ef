"""Everything the device signs checks its protected state first: a fresh checkpoint, a signing-key
rotation and a digest-key rotation are refused over a storage behind or beside what the key
signed; a rotation carries the old key's state into the new key's (protected from its first use)
and both remember the statement; the library keeps a state where the caller gives one
(docs/threat-model.md, "The device's protected state"; docs/api.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, SAMPLES, cli_in_process

from ledgertool.capture.run import capture_file
from ledgertool.errors import RollbackRefusedError, StorageError
from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys
from ledgertool.ledger import layout
from ledgertool.ledger.devstate import DeviceState, LedgerMarks
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.rotations import rotate_keys
from ledgertool.seal.checkpoint import parse_note
from ledgertool.seal.rotation import rotation_hash

SAMPLE = SAMPLES / "sample.pcapng"  # 294 frames: 3 segments of 100 records


def _keys(tmp_path: Path, name: str) -> Path:
    """A key directory of this test's own: its protected state starts empty."""
    d = tmp_path / name
    d.mkdir()
    generate_keys(d)
    return d


@pytest.fixture()
def keys(tmp_path) -> Path:
    return _keys(tmp_path, "keys")


@pytest.fixture()
def cli(monkeypatch, capsys):
    return lambda *args: cli_in_process(*args)


def _capture(cli, keys: Path, ledger: Path, signer: Path | None = None) -> tuple[int, str, str]:
    """`capture` of SAMPLE, 100 records a segment, signed with `signer`'s key (default: `keys`')."""
    key = (signer or keys) / "signing.key"
    args = ["--digest-key", keys / "digest.key", "--signing-key", key, "--segment-records", "100"]
    return cli("capture", SAMPLE, "--ledger", ledger, *args)


def _capture_without_state(keys: Path, ledger: Path) -> None:
    """A library caller's capture: no protected state is kept."""
    dk, sk = DigestKey.load(keys / "digest.key"), SigningKey.load(keys / "signing.key")
    capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100)


def _drop_segment(ledger: Path, index: int) -> None:
    """The custodian's rollback: segment `index` of link0 (seal, records, leaves) and the stored
    checkpoints deleted."""
    gone = list(layout.link_dir(ledger, "link0").glob(f"seg-{index:08d}.*"))
    assert gone
    for p in gone + [layout.checkpoint_path(ledger, "link0"), layout.top_checkpoint_path(ledger)]:
        p.unlink(missing_ok=True)


def _state(keys: Path, ledger: Path) -> dict:
    return json.loads(
        (keys / "signing.key.state" / f"{load_ledger(ledger).ledger_id}.json").read_text()
    )


# ---- checkpoint --signing-key ------------------------------------------------------------------


def test_a_fresh_checkpoint_over_a_rolled_back_link_is_refused(cli, keys, tmp_path):
    ledger, note = tmp_path / "L", tmp_path / "cp.note"
    assert _capture(cli, keys, ledger)[0] == 0
    _drop_segment(ledger, 2)
    rc, out, err = cli("checkpoint", ledger, "--out", note, "--signing-key", keys / "signing.key")
    assert rc == 2 and out == "" and err.count("\n") == 1, (rc, out, err)
    assert err.startswith(
        f"ledgertool: error: {ledger}: link link0: this signing key signed seal 2 (up to seq 293,"
    ), err
    assert (
        "which the storage lacks (the link holds seals 0..1 only)" in err
        and "nothing was signed" in err
    ), err
    assert not note.exists()


def test_a_checkpoint_over_seals_made_without_the_state_moves_the_state_up(cli, keys, tmp_path):
    """Seals a library caller made without the state are vouched for by the checkpoint: the
    remembered seal moves up to its last, and the state stays readable."""
    ledger, note = tmp_path / "L", tmp_path / "cp.note"
    assert _capture(cli, keys, ledger)[0] == 0
    _capture_without_state(keys, ledger)
    # the state did not see seals 3..5
    assert _state(keys, ledger)["links"]["link0"]["segment"] == 2
    rc, _, err = cli("checkpoint", ledger, "--out", note, "--signing-key", keys / "signing.key")
    assert rc == 0, err
    cp, link = parse_note(note.read_bytes()).checkpoint, _state(keys, ledger)["links"]["link0"]
    assert (
        link["segment"],
        link["seal_hash"],
        link["last_seq"],
        link["checkpoint_size"],
        link["checkpoint_root"],
    ) == (5, cp.last_seal, "587", 6, cp.root.hex())
    rc, out, err = cli("recover", ledger, "--signing-key", keys / "signing.key")
    assert rc == 0 and "recovered 0 segments" in out, err
    _drop_segment(ledger, 5)
    rc, _, err = cli("recover", ledger, "--signing-key", keys / "signing.key")
    assert rc == 2 and "this signing key signed seal 5 (up to seq 587" in err, err


# ---- keys rotate, keys rotate-digest -----------------------------------------------------------


def test_a_rotation_over_a_rolled_back_ledger_is_refused(cli, keys, tmp_path):
    """The old key would hand segment 2, which it signed, to the new key: a second seal 2."""
    ledger, k2 = tmp_path / "L", _keys(tmp_path, "k2")
    assert _capture(cli, keys, ledger)[0] == 0
    _drop_segment(ledger, 2)
    rc, out, err = cli(
        "keys", "rotate", ledger, "--old", keys / "signing.key", "--new", k2 / "signing.key"
    )
    assert rc == 2 and out == "" and "this signing key signed seal 2" in err, (rc, out, err)
    assert not layout.rotation_path(ledger, 1).exists()
    assert not (k2 / "signing.key.state" / f"{load_ledger(ledger).ledger_id}.json").exists()


def test_a_digest_key_rotation_over_a_rolled_back_ledger_is_refused(cli, keys, tmp_path):
    ledger, k2 = tmp_path / "L", _keys(tmp_path, "k2")
    assert _capture(cli, keys, ledger)[0] == 0
    _drop_segment(ledger, 2)
    rc, _, err = cli(
        "keys",
        "rotate-digest",
        ledger,
        "--signing-key",
        keys / "signing.key",
        "--old-digest-key",
        keys / "digest.key",
        "--new-digest-key",
        k2 / "digest.key",
    )
    assert rc == 2 and "this signing key signed seal 2" in err, err
    assert not layout.rotation_path(ledger, 1).exists()


def test_a_rotation_carries_the_state_to_the_new_key(cli, keys, tmp_path):
    """Storage rolled back behind the rotation point (seal 2, the old key's last, deleted): the new
    key refuses at its first use. On main its state started from that storage, and it signed a
    second seal 2."""
    ledger, k2 = tmp_path / "L", _keys(tmp_path, "k2")
    assert _capture(cli, keys, ledger)[0] == 0
    rc, out, err = cli(
        "keys",
        "rotate",
        ledger,
        "--old",
        keys / "signing.key",
        "--new",
        k2 / "signing.key",
        "--json",
    )
    assert rc == 0, err
    doc = json.loads(out)
    jsonschema.validate(
        doc, json.loads((REPO / "schemas" / "keys-rotate-report.schema.json").read_text())
    )
    assert "notes" not in doc and "warning" not in doc
    statement = json.loads(layout.rotation_path(ledger, 1).read_text())
    old, new = _state(keys, ledger), _state(k2, ledger)
    assert new["links"] == old["links"] and old["links"]["link0"]["segment"] == 2
    assert (
        new["rotation"]
        == old["rotation"]
        == {"number": 1, "rotation_hash": rotation_hash(statement)}
    )
    _drop_segment(ledger, 2)
    rc, _, err = _capture(cli, keys, ledger, k2)
    assert rc == 2 and "this signing key signed seal 2 (up to seq 293" in err, err
    assert not layout.seal_path(ledger, "link0", 2).exists()


def test_a_ledger_rolled_back_behind_a_rotation_is_refused_to_both_keys(cli, keys, tmp_path):
    """The statement deleted: the old key would be the ledger's signer again and sign on past the
    point it handed over; the state of each key remembers the statement it signed."""
    ledger, k2 = tmp_path / "L", _keys(tmp_path, "k2")
    assert _capture(cli, keys, ledger)[0] == 0
    assert (
        cli("keys", "rotate", ledger, "--old", keys / "signing.key", "--new", k2 / "signing.key")[0]
        == 0
    )
    layout.rotation_path(ledger, 1).unlink()
    rc, _, err = _capture(cli, keys, ledger)
    assert rc == 2 and f"{ledger}: this signing key signed rotation statement 1 of ledger" in err, (
        err
    )
    assert (
        "which the storage lacks (it holds 0 rotations)" in err and "nothing was signed" in err
    ), err
    assert not layout.seal_path(ledger, "link0", 3).exists()
    rc, _, err = cli(
        "checkpoint", ledger, "--out", tmp_path / "cp.note", "--signing-key", keys / "signing.key"
    )
    assert rc == 2 and "signed rotation statement 1" in err, err


def test_a_rotation_that_is_in_force_says_so_when_a_state_cannot_be_updated(
    keys, tmp_path, monkeypatch
):
    ledger, k2 = tmp_path / "L", _keys(tmp_path, "k2")
    _capture_without_state(keys, ledger)

    def fail(self, number, statement_hash):
        raise StorageError(
            f"{self.path}: cannot write the signing key's protected state: No space left on device"
        )

    monkeypatch.setattr(LedgerMarks, "rotated", fail)
    res = rotate_keys(
        ledger,
        SigningKey.load(keys / "signing.key"),
        SigningKey.load(k2 / "signing.key"),
        old_state=DeviceState.beside(keys / "signing.key"),
        new_state=DeviceState.beside(k2 / "signing.key"),
    )
    assert res["number"] == 1 and layout.rotation_path(ledger, 1).exists()
    assert res["warning"].startswith(
        f"rotation 1 is in force ({layout.rotation_path(ledger, 1)}), but a signing "
        "key's protected state could not be updated ("
    ), res
    assert res["warning"].endswith(
        "No space left on device): it starts again from the storage at the key's next use"
    ), res


# ---- the library ------------------------------------------------------------------------------


def test_the_library_keeps_no_state_unless_given_one(keys, tmp_path):
    """Without `device_state` the caller takes the storage as the truth (a copy of a ledger
    extended on purpose, a test fixture); the same copies are refused once a state is kept."""
    ledger, copy, state = (
        tmp_path / "L",
        tmp_path / "copy",
        DeviceState.beside(keys / "signing.key"),
    )
    dk, sk = DigestKey.load(keys / "digest.key"), SigningKey.load(keys / "signing.key")
    capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100)
    shutil.copytree(ledger, copy)
    capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100)
    capture_file(SAMPLE, copy, digest_key=dk, signing_key=sk, segment_records=100)
    assert not (keys / "signing.key.state").exists()
    capture_file(
        SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100, device_state=state
    )
    with pytest.raises(RollbackRefusedError, match="signed seal 8 .*which the storage lacks"):
        capture_file(
            SAMPLE, copy, digest_key=dk, signing_key=sk, segment_records=100, device_state=state
        )
