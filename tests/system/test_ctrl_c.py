"""Ctrl-C and SIGINT in a running command (a real process, signalled): capture seals what it holds,
a second Ctrl-C abandons it, other commands say they were interrupted."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from conftest import cli
from test_cli_habits import (  # noqa: F401  (shared with the in-process tests)
    SAMPLE,
    _keys,
    ledger,
)

ENDLESS = """version = 1
name = "endless"
seed = 1
start_ns = 1767225600000000000
interframe_ns = 100

[[flows]]
name = "a"
src_mac = "02:00:5e:00:00:0a"
dst_mac = "02:00:5e:00:00:0b"
src_ip = "192.0.2.1"
dst_ip = "192.0.2.2"
protocol = "udp"
src_port = 1
dst_port = 2
frames = 500000000
size = 64
"""


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "from ledgertool.cli.app import main; main()", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(pred, proc: subprocess.Popen, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_ctrl_c_in_query(ledger):
    p = _start(
        "query", ledger, "SELECT sum(a.range * b.range) FROM range(100000000) a, range(100000) b"
    )
    time.sleep(6)  # verified and querying (a query of that size runs for minutes)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert [ln for ln in err.splitlines() if not ln.startswith("warning:")] == [
        "ledgertool: interrupted"
    ]
    assert out == ""


def test_ctrl_c_elsewhere_says_interrupted(ledger, keydir):
    spec = ledger.parent / "endless.toml"
    spec.write_text(ENDLESS)
    out = ledger.parent / "endless.parquet"
    p = _start(
        "recompute",
        f"workload:{spec}",
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
        "--out",
        out,
    )
    time.sleep(4)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert (p.returncode, err.strip()) == (130, "ledgertool: interrupted")
    assert not out.exists()


@pytest.fixture()
def endless_capture(tmp_path, keydir):
    spec = tmp_path / "endless.toml"
    spec.write_text(ENDLESS)
    led = tmp_path / "L"
    p = _start(
        "capture",
        f"workload:{spec}",
        "--ledger",
        led,
        *_keys(keydir),
        "--segment-records",
        "60000000",
    )
    _wait_for(lambda: any(led.glob("link=link0/seg-*.open")), p)
    time.sleep(1)
    return p, led


def test_ctrl_c_in_capture_says_it_seals(endless_capture, keydir):
    p, led = endless_capture
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    line = err.splitlines()[0]
    assert line == "sealing the open segment… (Ctrl-C again to abandon it; it stays recoverable)"
    assert "segments 0..0" in out
    assert cli("verify", led, "--trust", keydir / "verifier.pub").returncode == 0


def test_second_ctrl_c_in_capture_abandons(endless_capture, keydir):
    p, led = endless_capture
    p.send_signal(signal.SIGINT)
    first = p.stderr.readline()  # the first one was handled (two at once would count as one)
    assert first.startswith("sealing "), first
    p.send_signal(signal.SIGINT)  # while the segment of > 10^6 records is being sealed
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130, err
    assert err.splitlines()[-1] == (
        f"ledgertool: interrupted: 1 open segment not sealed; `ledgertool recover "
        f"{led} --signing-key {keydir / 'signing.key'}` seals it"
    )
    assert list(led.glob("link=link0/seg-*.open"))
    r = cli("recover", led, "--signing-key", keydir / "signing.key")
    assert r.returncode == 0 and r.stdout.startswith("sealed link link0 segment 0: "), (
        r.stdout + r.stderr
    )
    assert cli("verify", led, "--trust", keydir / "verifier.pub").returncode == 0
