"""`witness serve` refuses a bad --addr port and a --state that is not a directory with one line
naming the option or the path, exit 2, before it listens."""

from __future__ import annotations

import pytest
from conftest import cli

LEDGER_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture()
def serve_args(keydir, tmp_path):
    r = cli("witness", "keygen", "--name", "witness.test/w1", "--out", tmp_path / "w.key")
    assert r.returncode == 0, r.stderr
    v = cli("keys", "vkey", keydir / "verifier.pub", "--ledger-id", LEDGER_ID)
    assert v.returncode == 0, v.stderr
    log = f"ledgertool/{LEDGER_ID}/link0={v.stdout.strip()}"
    return ("witness", "serve", "--key", tmp_path / "w.key", "--log", log)


@pytest.mark.parametrize("port", ["65536", "99999", "123456789012345678901234567890"])
def test_a_port_past_65535_is_named(serve_args, tmp_path, port):
    addr = f"127.0.0.1:{port}"
    r = cli(*serve_args, "--state", tmp_path / "state", "--addr", addr)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"ledgertool: error: --addr '{addr}': give HOST:PORT, PORT 0 to 65535\n"


def test_a_state_path_that_is_a_file_is_named_as_not_a_directory(serve_args, tmp_path):
    state = tmp_path / "state"
    state.write_bytes(b"not a directory\n")
    r = cli(*serve_args, "--state", state, "--addr", "127.0.0.1:0")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"ledgertool: error: {state}: is not a directory\n"
    assert state.read_bytes() == b"not a directory\n"
