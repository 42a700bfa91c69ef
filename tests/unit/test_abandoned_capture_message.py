"""A capture abandoned by a second Ctrl-C says what it left, as found on disk: the open segment
and the `recover` that seals it, or, when the sealing it cut short had already finished (or nothing
was opened), that no segment was left open."""

from __future__ import annotations

import pytest
from conftest import SAMPLES, cli

import ledgertool.capture.run as capture_run


def _capture_args(keydir, ledger):
    return (
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--segment-records",
        "100",
    )


@pytest.mark.parametrize("left_open", [0, 1, 2])
def test_second_ctrl_c_names_what_was_left_open(tmp_path, keydir, monkeypatch, left_open):
    ledger = tmp_path / "L"
    assert cli(*_capture_args(keydir, ledger)).returncode == 0  # a ledger, everything sealed
    for i in range(left_open):  # what a capture cut short leaves (the name is all that is read)
        (ledger / "link=link0" / f"seg-{90 + i:08d}.open").write_bytes(b"")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(capture_run, "capture_file", interrupted)
    r = cli(*_capture_args(keydir, ledger))
    assert r.returncode == 130, r.stderr
    line = r.stderr.splitlines()[-1]
    if left_open == 0:
        assert line == (
            f"ledgertool: interrupted: no segment was left open in {ledger}; "
            f"`ledgertool verify {ledger} --trust verifier.pub` checks what was sealed"
        )
    else:
        its = "it" if left_open == 1 else "them"
        segs = "1 open segment" if left_open == 1 else f"{left_open} open segments"
        assert line == (
            f"ledgertool: interrupted: {segs} not sealed; `ledgertool recover {ledger} "
            f"--signing-key {keydir / 'signing.key'}` seals {its}"
        )


def test_second_ctrl_c_before_anything_was_opened(tmp_path, keydir, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(capture_run, "capture_file", interrupted)
    ledger = tmp_path / "never"
    r = cli(*_capture_args(keydir, ledger))
    assert r.returncode == 130
    assert r.stderr.splitlines()[-1] == (
        f"ledgertool: interrupted: nothing was written ({ledger} was not created)"
    )
