"""A report that cannot be written (standard output full, closed or a broken pipe) is one line on
stderr saying what the command had done, exit 2, and never changes the work: a capture whose
report is lost is still sealed completely. With stderr failing too: exit 2, no traceback. These
run a real process, because the process's own standard streams are what is under test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import SAMPLES, load_keys

from ledgertool.verify.ledger import verify_ledger

SAMPLE = SAMPLES / "sample.pcapng"
MAIN = "from ledgertool.cli.app import main; main()"


def _capture(ledger, keydir, **streams) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-c",
            MAIN,
            "capture",
            str(SAMPLE),
            "--ledger",
            str(ledger),
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
            "--segment-records",
            "100",
        ],
        text=True,
        timeout=120,
        **streams,
    )


def _sealed_completely(ledger, keydir) -> None:
    res = verify_ledger(ledger, load_keys(keydir)[2])
    assert res.ok and res.segments == 3 and res.records == 294, res.problems


def test_capture_report_to_a_full_stdout_says_the_ledger_was_sealed(tmp_path, keydir):
    with open("/dev/full", "w") as full:
        r = _capture(tmp_path / "L", keydir, stdout=full, stderr=subprocess.PIPE)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "ledgertool: error: standard output: cannot write the report: No space left on device; "
        f"{tmp_path / 'L'}: the capture was sealed (294 frames in 3 segments, its checkpoint "
        "signed); only the report was lost"
    ]
    _sealed_completely(tmp_path / "L", keydir)


def test_capture_with_stdout_and_stderr_full_exits_2_without_traceback(tmp_path, keydir):
    # stderr is /dev/full too: what the process tries to say there is lost; the code is what is left
    with open("/dev/full", "w") as full:
        r = _capture(tmp_path / "L", keydir, stdout=full, stderr=full)
    assert r.returncode == 2
    _sealed_completely(tmp_path / "L", keydir)


def _with_closed(fds: tuple[int, ...]):
    def close():
        for fd in fds:
            os.close(fd)

    return close


@pytest.mark.parametrize(
    "closed", [(1,), (1, 2)], ids=["stdout closed", "stdout and stderr closed"]
)
def test_capture_with_closed_standard_streams_exits_2_and_seals(tmp_path, keydir, closed):
    stderr = subprocess.PIPE if 2 not in closed else None
    r = _capture(
        tmp_path / "L", keydir, stdout=None, stderr=stderr, preexec_fn=_with_closed(closed)
    )
    assert r.returncode == 2
    if stderr is not None:
        assert r.stderr.splitlines() == [
            "ledgertool: error: standard output: cannot write the report: standard output is "
            f"closed; {tmp_path / 'L'}: the capture was sealed (294 frames in 3 segments, its "
            "checkpoint signed); only the report was lost"
        ]
    _sealed_completely(tmp_path / "L", keydir)
    # a closed descriptor is never handed to a ledger file: nothing there holds stray output
    for p in (tmp_path / "L").rglob("*"):
        assert not p.is_file() or b"captured 294 frames" not in p.read_bytes(), p


def test_verify_report_into_a_broken_pipe_is_a_silent_exit_2_not_a_discrepancy(
    sample_ledger, keydir
):
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(
            [
                sys.executable,
                "-c",
                MAIN,
                "verify",
                str(sample_ledger),
                "--trust",
                str(keydir / "verifier.pub"),
            ],
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(w)
    assert p.returncode == 2
    # the reader left on purpose (`| head`): no error line (verify's own notes may still be there)
    assert "error" not in p.stderr and "Broken pipe" not in p.stderr
    assert "Traceback" not in p.stderr
