"""The device's protected state (KEYFILE.state beside the signing key): `recover` and `capture`
never sign a second history of a ledger, however the custodian of the storage rolls it back; and
what recovery cannot seal is set aside, never destroyed (docs/threat-model.md, "The device's
protected state")."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import jsonschema
import pytest
from conftest import REPO, SAMPLES, cli_in_process

from ledgertool.keyfiles import SigningKey, generate_keys
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.devstate import DeviceState
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.sealer import load_seal

SAMPLE = SAMPLES / "sample.pcapng"  # 294 frames


@pytest.fixture()
def keys(tmp_path) -> Path:
    """A key directory of this test's own: its protected state starts empty."""
    d = tmp_path / "keys"
    d.mkdir()
    generate_keys(d)
    return d


def cli(_capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `ledgertool ARGS` in this process."""
    return cli_in_process(*args)


def capture(capsys, keys: Path, ledger: Path, *extra) -> tuple[int, str, str]:
    return cli(
        capsys,
        "capture",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        keys / "signing.key",
        *extra,
    )


def recover(capsys, keys: Path, ledger: Path, *extra) -> tuple[int, str, str]:
    return cli(capsys, "recover", ledger, "--signing-key", keys / "signing.key", *extra)


def verify_against(capsys, keys: Path, ledger: Path, note: Path) -> tuple[int, str, str]:
    return cli(capsys, "verify", ledger, "--trust", keys / "verifier.pub", "--checkpoint", note)


def _roll_back_to_open(ledger: Path, blocks: int = 1) -> Path:
    """The custodian's rollback: seal 0, its leaves and the stored checkpoints deleted, the sealed
    seg-0.rec renamed back to seg-0.open and cut to its first `blocks` blocks."""
    d = layout.link_dir(ledger, "link0")
    for p in (
        layout.seal_path(ledger, "link0", 0),
        layout.leaves_path(ledger, "link0", 0),
        layout.checkpoint_path(ledger, "link0"),
        layout.top_checkpoint_path(ledger),
    ):
        p.unlink()
    rec = layout.records_path(ledger, "link0", 0)
    raw = rec.read_bytes()
    seg = segments.parse_open_segment(raw, rec)
    assert len(seg.blocks) > blocks  # a real cut
    rec.unlink()
    opened = d / layout.segment_name(0, layout.OPEN)
    opened.write_bytes(raw[: seg.blocks[blocks].offset])
    return opened


# ---- rollback forks -----------------------------------------------------------------------------


def test_recover_refuses_a_sealed_segment_rolled_back_to_an_open_one(capsys, keys, tmp_path):
    """The attack: seal 0 (294 records) deleted with its leaves and checkpoints, seg-0.rec renamed
    seg-0.open and cut to its first block (256 records). On main `recover` exited 0 and the device
    signed a new seal 0 of 256 records: a fork only a verifier holding the old checkpoint saw."""
    ledger = tmp_path / "L"
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    old = tmp_path / "old.note"
    shutil.copy(layout.checkpoint_path(ledger, "link0"), old)
    opened = _roll_back_to_open(ledger)
    rc, out, err = recover(capsys, keys, ledger)
    assert rc == 2 and out == "" and err.count("\n") == 1, (rc, out, err)
    assert err.startswith(
        f"ledgertool: error: {ledger}: link link0: this signing key signed seal 0 (up to seq 293, "
        "seal hash "
    ), err
    assert err.rstrip().endswith(
        "which the storage lacks (the link holds no seal); it is behind what the device "
        "signed: restore the missing seals, nothing was signed"
    ), err
    assert not layout.seal_path(ledger, "link0", 0).exists() and opened.exists()
    # a capture refuses the same way, before it captures anything
    rc, _, err = capture(capsys, keys, ledger, "--segment-records", "300")
    assert (
        rc == 2
        and "this signing key signed seal 0" in err
        and not layout.seal_path(ledger, "link0", 1).exists()
    )
    # nothing was signed over the cut history: restoring the sealed file makes the old checkpoint
    # match again
    assert verify_against(capsys, keys, ledger, old)[0] == 1


def test_restored_storage_is_accepted_and_the_old_checkpoint_still_matches(capsys, keys, tmp_path):
    ledger = tmp_path / "L"
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    backup = tmp_path / "backup"
    shutil.copytree(ledger, backup)
    old = tmp_path / "old.note"
    shutil.copy(layout.checkpoint_path(ledger, "link0"), old)
    _roll_back_to_open(ledger)
    assert recover(capsys, keys, ledger)[0] == 2
    shutil.rmtree(ledger)
    shutil.copytree(backup, ledger)
    assert recover(capsys, keys, ledger)[0] == 0
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    rc, out, _ = verify_against(capsys, keys, ledger, old)
    assert rc == 0 and "588 records" in out, out


def test_a_fork_beside_the_remembered_seal_is_refused(capsys, keys, tmp_path):
    """A copy taken before the last capture, extended by the device, then put back: the storage
    holds another seal 1 than the one the device signed."""
    ledger = tmp_path / "L"
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    copy = tmp_path / "copy"
    shutil.copytree(ledger, copy)
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    shutil.rmtree(ledger)
    shutil.copytree(copy, ledger)
    rc, _, err = capture(capsys, keys, ledger, "--segment-records", "100")  # would sign seals 1..3
    assert (
        rc == 2
        and "this signing key signed seal 1 (up to seq 587" in err
        and "link holds seals 0..0" in err
    ), err
    seal1 = load_seal(layout.seal_path(copy, "link0", 0))
    assert seal1.records == 294 and not layout.seal_path(ledger, "link0", 1).exists()


def test_a_link_the_device_signed_that_the_storage_lacks_is_refused(capsys, keys, tmp_path):
    ledger = tmp_path / "L"
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    assert capture(capsys, keys, ledger, "--segment-records", "300", "--link", "b")[0] == 0
    shutil.rmtree(layout.link_dir(ledger, "b"))
    rc, _, err = recover(capsys, keys, ledger)
    assert rc == 2 and f"{ledger}: link b: this signing key signed seal 0" in err, err


def test_the_state_records_each_seal_and_checkpoint(capsys, keys, tmp_path):
    ledger = tmp_path / "L"
    assert capture(capsys, keys, ledger, "--segment-records", "100")[0] == 0
    lg = load_ledger(ledger)
    state = keys / "signing.key.state"
    path = state / f"{lg.ledger_id}.json"
    assert (
        stat.S_IMODE(os.stat(state).st_mode) == 0o700
        and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    )
    doc = json.loads(path.read_text())
    seal2 = load_seal(layout.seal_path(ledger, "link0", 2))
    from ledgertool.seal.checkpoint import parse_note

    cp = parse_note(layout.checkpoint_path(ledger, "link0").read_bytes()).checkpoint
    assert doc == {
        "format": "ledgertool-device-state-v1",
        "ledger_id": lg.ledger_id,
        "links": {
            "link0": {
                "segment": 2,
                "seal_hash": cp.last_seal,
                "last_seq": "293",
                "checkpoint_size": 3,
                "checkpoint_root": cp.root.hex(),
            }
        },
    }
    assert int(seal2.last_seq) == 293


def test_first_use_on_an_existing_ledger_starts_from_storage_and_says_so_once(
    capsys, keys, tmp_path
):
    """A ledger signed before the key had a state (or by another copy of the key): the state starts
    from the storage, said once; from then on a rollback is refused."""
    ledger = tmp_path / "L"
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    # the state lost: protection lost until re-established
    shutil.rmtree(keys / "signing.key.state")
    rc, _, err = recover(capsys, keys, ledger)
    assert rc == 0 and err.count("rollback protection of that link starts now") == 1, err
    assert "started from the 1 seal in storage" in err
    rc, _, err = recover(capsys, keys, ledger)
    assert rc == 0 and "starts now" not in err
    _roll_back_to_open(ledger)
    assert recover(capsys, keys, ledger)[0] == 2


def test_a_rotated_key_starts_its_state_at_the_rotation(capsys, keys, tmp_path):
    ledger = tmp_path / "L"
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    k2 = tmp_path / "k2"
    k2.mkdir()
    generate_keys(k2)
    rc, _, err = cli(
        capsys, "keys", "rotate", ledger, "--old", keys / "signing.key", "--new", k2 / "signing.key"
    )
    assert rc == 0, err
    rc, _, err = cli(
        capsys,
        "capture",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        k2 / "signing.key",
        "--segment-records",
        "300",
    )
    assert rc == 0 and "starts now" not in err, err  # carried over by the rotation, not started
    lid = load_ledger(ledger).ledger_id
    assert (
        json.loads((k2 / "signing.key.state" / f"{lid}.json").read_text())["links"]["link0"][
            "segment"
        ]
        == 1
    )
    # the old key's state still says seal 0, and the new key's refuses a storage cut back to it
    for p in layout.link_dir(ledger, "link0").glob("seg-00000001.*"):
        p.unlink()
    rc, _, err = recover(capsys, keys, ledger)
    assert rc == 2  # the old key is not the ledger's signer any more
    rc, _, err = cli(capsys, "recover", ledger, "--signing-key", k2 / "signing.key")
    assert rc == 2 and "this signing key signed seal 1" in err, err


def test_two_writers_with_one_key_on_copies_of_a_ledger_are_refused(keys, tmp_path):
    state = DeviceState.beside(keys / "signing.key")
    from ledgertool.errors import LedgerLockedError

    with state.ledger("0" * 32):
        with pytest.raises(
            LedgerLockedError, match="another writer with this signing key is extending ledger 0000"
        ):
            with state.ledger("0" * 32):
                pass
    with state.ledger("0" * 32):  # released
        pass


def test_a_damaged_state_file_is_refused_not_reset(capsys, keys, tmp_path):
    ledger = tmp_path / "L"
    assert capture(capsys, keys, ledger, "--segment-records", "300")[0] == 0
    path = keys / "signing.key.state" / f"{load_ledger(ledger).ledger_id}.json"
    doc = json.loads(path.read_text())
    doc["links"]["link0"]["segment"] = -1
    path.write_text(json.dumps(doc))
    rc, _, err = recover(capsys, keys, ledger)
    assert (
        rc == 2 and f"{path}: link link0: not a link entry of ledgertool-device-state-v1" in err
    ), err


# ---- what recovery cannot seal is set aside -----------------------------------------------------


def _open_segments_of_two_links(capsys, keys: Path, tmp_path: Path) -> Path:
    """A ledger with links a and b, each with an open segment 1 left by a crash."""
    ledger = tmp_path / "L"
    for link in ("a", "b"):
        assert capture(capsys, keys, ledger, "--segment-records", "300", "--link", link)[0] == 0
    lg, sk = load_ledger(ledger), SigningKey.load(keys / "signing.key")
    from ledgertool.ledger.reader import LedgerReader
    from ledgertool.ledger.writer import LinkWriter
    from ledgertool.verify.ledger import verified_segment

    for link in ("a", "b"):
        records = bytes(verified_segment(LedgerReader(ledger), lg, link, 0).records)
        w = LinkWriter.open(ledger, lg, link, sk, source="test", segment_records=1000)
        try:
            # renumbered by nothing: the records' own seqs do not matter to the MAC
            w.append(records, 294)
            w._segment.close()  # the crash: the file stays as written
        finally:
            w.close()
    return ledger


def test_open_segments_that_do_not_fit_are_set_aside_not_deleted(capsys, keys, tmp_path):
    """Two links' open files swapped: on main `recover` deleted both (14,984 bytes discarded)."""
    ledger = _open_segments_of_two_links(capsys, keys, tmp_path)
    a, b = (layout.open_segment_path(ledger, link, 1) for link in ("a", "b"))
    ra, rb = a.read_bytes(), b.read_bytes()
    a.write_bytes(rb)
    b.write_bytes(ra)
    rc, out, err = recover(capsys, keys, ledger, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    jsonschema.validate(
        doc, json.loads((REPO / "schemas" / "recover-report.schema.json").read_text())
    )
    assert doc["sealed"] == [] and doc["discarded"] == [] and doc["bytes_discarded"] == 0
    got = {
        (x["path"], x["moved_to"], x["bytes"], x["failed_authentication"]) for x in doc["set_aside"]
    }
    assert got == {
        (str(a), str(ledger / "set-aside" / "link=a" / a.name), len(rb), False),
        (str(b), str(ledger / "set-aside" / "link=b" / b.name), len(ra), False),
    }
    why = {x["path"]: x["why"] for x in doc["set_aside"]}
    assert why[str(a)] == (
        "open segment does not continue the chain at segment 1, seq 294: its header says link "
        "'b' where the ledger needs 'a'; its 294 records cannot be sealed there"
    )
    assert (ledger / "set-aside" / "link=a" / a.name).read_bytes() == rb and not a.exists()
    # verify names the directory as not part of the sealed ledger
    rc, out, err = cli(capsys, "verify", ledger, "--trust", keys / "verifier.pub")
    out += err
    assert (
        rc == 0
        and "set-aside: what `ledgertool recover` set aside of open segments (never sealed)" in out
    ), out


def test_capture_sets_aside_what_does_not_fit_and_continues(capsys, keys, tmp_path):
    ledger = _open_segments_of_two_links(capsys, keys, tmp_path)
    a, b = (layout.open_segment_path(ledger, link, 1) for link in ("a", "b"))
    rb = b.read_bytes()
    a.write_bytes(rb)
    rc, _, err = capture(capsys, keys, ledger, "--segment-records", "300", "--link", "a")
    assert (
        rc == 0
        and f"warning: recovery set aside {a} as {ledger / 'set-aside' / 'link=a' / a.name}" in err
    ), err
    assert (ledger / "set-aside" / "link=a" / a.name).read_bytes() == rb
    # captured, not recovered
    assert load_seal(layout.seal_path(ledger, "a", 1)).source == SAMPLE.name
