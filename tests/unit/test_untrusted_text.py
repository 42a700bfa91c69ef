"""Text from a ledger, a proof, a file name or an error is printed as data.

Rich read it as markup: a seal whose `link` is "[/]" made `verify` exit 2 ("internal error:
MarkupError") with no FAIL line, and `[link=...]` or `[bold]` in a seal field changed what the
terminal showed. Terminal control characters (ESC, CR, bidi overrides) went to the terminal as they
were. Also here: `check-proof` names the ledger id, and secret key files readable by group or
others are refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import SAMPLES, cli

from ledgertool.cli.render import printable
from ledgertool.errors import KeyFileError
from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys
from ledgertool.verify.proof import build_proof

HOSTILE = [
    "[/]",
    "[bold]loud",
    "[link=file:///etc/passwd]x[/link]",
    "\x1b[2J\x1b[31mred",
    "ok\rOK: 0 problems",
    "a\nOK: 3 segments",
    "\u202egnp.exe",
    ":warning: [red]x[/red]",
]


@pytest.fixture()
def ledger(tmp_path, built_ledger) -> Path:
    return built_ledger(SAMPLES / "sample.pcap", segment_records=100).copy_to(tmp_path / "L")


def _edit_seal(ledger: Path, segment: int, **members) -> None:
    path = ledger / "link=link0" / f"seg-{segment:08d}.seal.json"
    doc = json.loads(path.read_text())
    doc.update(members)
    path.write_text(json.dumps(doc))


def _no_terminal_control(*texts: str) -> None:
    for t in texts:
        assert "\x1b" not in t and "\r" not in t and "\u202e" not in t, t


def test_printable_makes_controls_visible():
    assert printable("plain [bold] text é 日本") == "plain [bold] text é 日本"
    assert (
        printable("\x1b[2J\r\n\t\x7f\x85\u202e\u2028\U000e0001")
        == "\\x1b[2J\\x0d\\x0a\\x09\\x7f\\x85\\u202e\\u2028\\U000e0001"
    )


@pytest.mark.parametrize("text", HOSTILE)
def test_seal_fields_are_printed_as_text(ledger, keydir, text):
    """A bracketed link ("link": "[/]") and other hostile strings, in a field verify names raw
    (ledger_id) and in one it names with repr (link): a FAIL line for each, exit 1."""
    _edit_seal(ledger, 1, link=text, ledger_id=text)
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "internal error" not in r.stderr
    lines = r.stdout.splitlines()
    fails = [ln for ln in lines if ln.startswith("FAIL ")]
    foreign = [ln for ln in fails if ln.startswith("FAIL foreign_seal link link0 segment 1: ")]
    assert len(foreign) == 1 and foreign[0].endswith(f"seal belongs to ledger {printable(text)}"), (
        lines
    )
    assert any(ln.startswith("FAIL seal_misplaced link link0 segment 1: ") for ln in fails)
    # one verdict line, at the end
    assert lines[-1].startswith(f"{len(fails)} problem{'' if len(fails) == 1 else 's'}: ")
    assert not any(ln.startswith("OK") for ln in lines)
    _no_terminal_control(r.stdout, r.stderr)


def test_hostile_file_names_in_warnings_and_errors(ledger, keydir, tmp_path):
    name = "[bold]x[red]\x1b[2J\r.tmp"  # no "/" in a file name
    (ledger / "link=link0" / name).write_bytes(b"")
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub")
    assert r.returncode == 0, (r.stdout, r.stderr)
    [warn] = [ln for ln in r.stderr.splitlines() if ln.startswith("warning temp_file")]
    assert printable(str(ledger / "link=link0" / name)) in warn
    _no_terminal_control(r.stdout, r.stderr)
    missing = tmp_path / "[link=file:///etc/passwd]x[/link]\x1b]0;title\x07"
    r = cli("verify", missing, "--trust", keydir / "verifier.pub")
    assert (
        r.returncode == 2
        and r.stderr == f"ledgertool: error: {printable(missing)}: no such ledger directory\n"
    )


def test_check_proof_names_the_ledger_and_prints_proof_text_as_text(ledger, keydir, tmp_path):
    doc = build_proof(ledger, seq=5).to_json()
    lid = doc["ledger_id"]
    good = tmp_path / "proof.json"
    good.write_text(json.dumps(doc))
    r = cli("check-proof", good, "--trust", keydir / "verifier.pub")
    assert r.returncode == 0
    assert r.stdout.startswith(
        f"VALID: seq 5 digest {doc['record']['digest']} is record 5 of ledger {lid} link "
        "link0 segment 0 under its signed seal"
    ), r.stdout
    doc["link"] = HOSTILE[0] + HOSTILE[3]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = cli("check-proof", bad, "--trust", keydir / "verifier.pub")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == (
        "INVALID: the embedded seal is for another ledger, link or segment (the proof claims seq 5 "
        f"of ledger {lid} link {printable(doc['link'])} segment 0)\n"
    )
    _no_terminal_control(r.stdout, r.stderr)


# ---- key file modes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,mode",
    [("digest.key", 0o644), ("digest.key", 0o640), ("signing.key", 0o604), ("signing.key", 0o660)],
)
def test_secret_key_files_readable_by_others_are_refused(tmp_path, name, mode):
    keys = tmp_path / "k"
    generate_keys(keys)
    (keys / name).chmod(mode)
    r = cli(
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        keys / "signing.key",
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        f"ledgertool: error: {keys / name}: UNPROTECTED PRIVATE KEY FILE: mode {mode:04o} lets "
        f"group or others read this {name.split('.')[0]} key; refused (run `chmod 600 "
        f"{keys / name}`)\n"
    )
    assert not (tmp_path / "L").exists()


def test_private_and_public_modes_that_are_accepted(tmp_path):
    keys = tmp_path / "k"
    generate_keys(keys)
    assert [
        os.stat(keys / n).st_mode & 0o777 for n in ("digest.key", "signing.key", "verifier.pub")
    ] == [0o600, 0o600, 0o644]
    (keys / "digest.key").chmod(0o400)
    (keys / "verifier.pub").chmod(0o666)  # public: its mode is not checked
    led = tmp_path / "L"
    r = cli(
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        led,
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        keys / "signing.key",
    )
    assert r.returncode == 0, r.stderr
    assert cli("verify", led, "--trust", keys / "verifier.pub").returncode == 0
    DigestKey.load(keys / "digest.key")
    SigningKey.load(keys / "signing.key")


def test_wrong_kind_of_key_file_is_named_before_its_mode(tmp_path):
    """verifier.pub (0644) given as the digest key: the message says what the file is."""
    keys = tmp_path / "k"
    generate_keys(keys)
    with pytest.raises(KeyFileError, match="is a verifier trust bundle .*, expected a digest key"):
        DigestKey.load(keys / "verifier.pub")
