"""A real `ledgertool witness serve` process on loopback cosigns a ledger's checkpoints; Go's
golang.org/x/mod/sumdb/note (with a cosignature/v1 verifier written from the spec,
tests/cosignature_check.go) verifies the log's signature and the cosignature, and refuses a
changed note; the witness process refuses a rollback (skipped without Go for the Go part)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, go_build, load_keys
from test_vkey import GOPATH  # noqa: F401  (Debian's golang-golang-x-mod-dev)

from ledgertool.capture.run import capture_file

NOTE_PKG = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb" / "note"


@pytest.fixture()
def served(tmp_path, keydir):
    """(ledger, witness URL, witness vkey, log vkey, process)."""
    dk, sk, _ = load_keys(keydir)
    led = tmp_path / "L"
    capture_file(SAMPLES / "sample.pcapng", led, digest_key=dk, signing_key=sk, segment_records=100)
    r = cli("witness", "keygen", "--name", "witness.test/go", "--out", tmp_path / "w.key")
    assert r.returncode == 0, r.stderr
    wvkey = r.stdout.strip()
    r = cli("keys", "vkey", keydir / "verifier.pub", "--ledger", led)
    lvkey = r.stdout.strip()
    origin = (led / "checkpoint").read_text().split("\n", 1)[0]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ledgertool.cli.app import main; main()",
            "witness",
            "serve",
            "--key",
            str(tmp_path / "w.key"),
            "--state",
            str(tmp_path / "state"),
            "--log",
            f"{origin}={lvkey}",
            "--addr",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, line + proc.stderr.read()
        url = line.split("listening on ")[1].strip()
        yield led, url, wvkey, lvkey, proc
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


def test_witness_process_cosigns_and_refuses_a_rollback(served, tmp_path, keydir):
    led, url, wvkey, _, _ = served
    dk, sk, _ = load_keys(keydir)
    old = tmp_path / "old"
    r = cli("checkpoint", led, "--out", old, "--witness", f"{url}={wvkey}")
    assert r.returncode == 0, r.stderr
    capture_file(SAMPLES / "sample.pcap", led, digest_key=dk, signing_key=sk, segment_records=100)
    new = tmp_path / "new"
    r = cli("checkpoint", led, "--out", new, "--witness", f"{url}={wvkey}")
    assert r.returncode == 0, r.stderr
    r = cli("checkpoint", led, "--out", tmp_path / "x", "--witness", f"{url}={wvkey}")
    assert r.returncode == 0  # the current state again
    # the old checkpoint again: the witness holds 6 segments, it has 3
    from ledgertool.seal.witness import parse_vkey
    from ledgertool.witness.client import WitnessSpec, cosign

    with pytest.raises(Exception, match="rollback"):
        cosign(led, old.read_bytes(), WitnessSpec(url, parse_vkey(wvkey, "w", 0x04)))


@pytest.fixture(scope="module")
def cosig_check(tmp_path_factory) -> Path:
    return go_build(tmp_path_factory, GOPATH, NOTE_PKG, "cosignature_check.go")


def test_go_note_verifies_the_log_signature_and_the_cosignature(served, cosig_check, tmp_path):
    led, url, wvkey, lvkey, _ = served
    cp = tmp_path / "cp"
    r = cli("checkpoint", led, "--out", cp, "--witness", f"{url}={wvkey}")
    assert r.returncode == 0, r.stderr
    note = cp.read_text()
    changed = note.replace("\n3\n", "\n4\n", 1)
    other = cli("witness", "keygen", "--name", "witness.test/go", "--out", tmp_path / "o.key")
    cases = [(lvkey, wvkey, note), (lvkey, wvkey, changed), (lvkey, other.stdout.strip(), note)]
    r = subprocess.run(
        [str(cosig_check)],
        input="".join(
            json.dumps({"log_vkey": a, "witness_vkey": b, "note": n}) + "\n" for a, b, n in cases
        ),
        check=False,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    name = lvkey.split("+")[0]
    assert lines[0].startswith(f"ok {name},witness.test/go "), lines
    assert int(lines[0].split(" ")[2]) > 1_700_000_000
    assert lines[1].startswith("fail:"), lines
    # another key of the same name: Go sees an unknown key id, so only the log's signature counts
    assert lines[2].startswith(f"ok {name} 0"), lines
