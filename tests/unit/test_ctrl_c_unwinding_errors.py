"""An error raised while a Ctrl-C unwinds is the interruption, not an internal error. Python raises
KeyboardInterrupt from the signal handler between any two bytecodes; inside
threading.Condition.wait that can leave the condition's lock released, and the `with` leaving it
then raises "cannot release un-acquired lock" in the KeyboardInterrupt's place (a second Ctrl-C
during capture's sealing gave `internal error: RuntimeError`, exit 2, once in a CI run). The race
itself cannot be timed from a test: the library call is replaced by one that fails the same way."""

from __future__ import annotations

import pytest
from conftest import cli

import ledgertool.capture.run
import ledgertool.verify.ledger


def _fails_unwinding_ctrl_c(*_a, **_k):
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise RuntimeError("cannot release un-acquired lock") from None  # __context__ is kept


def _fails_on_its_own(*_a, **_k):
    raise RuntimeError("cannot release un-acquired lock")


def _capture(tmp_path, keydir):
    return cli(
        "capture", "samples/sample.pcap", "--ledger", tmp_path / "L", "--digest-key",
        keydir / "digest.key", "--signing-key", keydir / "signing.key",
    )  # fmt: skip


def test_capture_abandoned_by_a_second_ctrl_c_says_so_whatever_the_unwinding_raised(
    monkeypatch, tmp_path, keydir
):
    monkeypatch.setattr(ledgertool.capture.run, "capture_file", _fails_unwinding_ctrl_c)
    r = _capture(tmp_path, keydir)
    assert r.returncode == 130, r.stderr
    assert r.stderr == (
        f"ledgertool: interrupted: nothing was written ({tmp_path / 'L'} was not created)\n"
    )


def test_any_command_interrupted_while_unwinding_is_exit_130(monkeypatch, sample_ledger, keydir):
    monkeypatch.setattr(ledgertool.verify.ledger, "verify_ledger", _fails_unwinding_ctrl_c)
    r = cli("verify", sample_ledger, "--trust", keydir / "verifier.pub")
    assert (r.returncode, r.stdout, r.stderr) == (130, "", "ledgertool: interrupted\n")


@pytest.mark.parametrize("command", ["capture", "verify"])
def test_the_same_error_without_a_ctrl_c_is_still_an_internal_error(
    monkeypatch, tmp_path, sample_ledger, keydir, command
):
    if command == "capture":
        monkeypatch.setattr(ledgertool.capture.run, "capture_file", _fails_on_its_own)
        r = _capture(tmp_path, keydir)
    else:
        monkeypatch.setattr(ledgertool.verify.ledger, "verify_ledger", _fails_on_its_own)
        r = cli("verify", sample_ledger, "--trust", keydir / "verifier.pub")
    assert r.returncode == 2
    assert r.stderr.startswith(
        "ledgertool: internal error: RuntimeError: cannot release un-acquired lock"
    )
