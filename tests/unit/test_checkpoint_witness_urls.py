"""`checkpoint --witness URL=VKEY` with a URL urllib cannot open (a port past 65535 or not a
number, an unclosed IPv6 bracket, no host) is one line naming the option, exit 2: a bad port or
bracket was an internal error (InvalidURL, ValueError) raised while posting."""

from __future__ import annotations

import pytest
from conftest import cli


@pytest.fixture()
def witness_vkey(tmp_path):
    r = cli("witness", "keygen", "--name", "witness.test/w1", "--out", tmp_path / "w.key")
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:99999", "Port out of range 0-65535"),
        ("http://127.0.0.1:abc", "Port could not be cast to integer value as 'abc'"),
        ("http://[::1", "Invalid IPv6 URL"),
        ("http://", "no host"),
        ("https://:8080", "no host"),
    ],
)
def test_a_witness_url_urllib_cannot_open_is_named(sample_ledger, witness_vkey, tmp_path, url, why):
    r = cli(
        "checkpoint", sample_ledger, "--out", tmp_path / "cp", "--witness", f"{url}={witness_vkey}"
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"ledgertool: error: --witness {url}: not a URL ({why})\n"


def test_a_witness_nobody_answers_is_named_in_words(sample_ledger, witness_vkey, tmp_path):
    """The refusal read `witness URL: [Errno 111] Connection refused`, the repr of the OSError."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        r = cli("checkpoint", sample_ledger, "--out", tmp_path / "cp",
                "--witness", f"{url}={witness_vkey}")  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"ledgertool: error: witness {url}: cannot reach it: Connection refused\n"


@pytest.mark.parametrize(
    "arg", ["http://127.0.0.1:abc={vkey}", "http://127.0.0.1:1=not-a-vkey", "ftp://w={vkey}"]
)
def test_a_bad_witness_argument_writes_no_checkpoint(sample_ledger, witness_vkey, tmp_path, arg):
    """Every --witness is checked before the checkpoint is written: a bad one left the file
    behind, uncosigned, with exit 2."""
    out = tmp_path / "cp"
    r = cli("checkpoint", sample_ledger, "--out", out, "--witness", arg.format(vkey=witness_vkey))
    assert r.returncode == 2 and r.stderr.startswith("ledgertool: error: --witness ")
    assert not out.exists()
