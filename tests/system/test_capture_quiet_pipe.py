"""`capture -` from a pipe whose writer stays open and silent (tcpdump on a quiet link): --duration
and Ctrl-C act at once, the frames that arrived are sealed. A real pipe and a real signal: the
process is what is under test."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
import time

from conftest import SAMPLES, run_cli

from ledgertool.ledger import layout

SAMPLE = SAMPLES / "sample.pcap"  # little-endian pcap, 294 frames
FRAMES = 100


def _head_and_frames(n: int) -> bytes:
    """The pcap file header and the first n records of the sample."""
    b = SAMPLE.read_bytes()
    pos = 24
    for _ in range(n):
        pos += 16 + struct.unpack_from("<I", b, pos + 8)[0]
    return b[:pos]


def _start(keydir, led, *extra: str) -> tuple[subprocess.Popen, float]:
    """capture - with FRAMES frames written and the pipe left open; returns once they are in the
    open segment (v2, 48-byte records: header, one 64-record leaf, the open leaf of 36), with
    the time they were."""
    args = [
        sys.executable,
        "-c",
        "from ledgertool.cli.app import main; main()",
        "capture",
        "-",
        "--ledger",
        str(led),
        "--digest-key",
        str(keydir / "digest.key"),
        "--signing-key",
        str(keydir / "signing.key"),
        "--algorithm",
        "siphash-1-3-128",
        "--tiers",
        "frames",
        "--leaf-records",
        "64",
        "--json",
        *extra,
    ]
    pipe = subprocess.PIPE
    p = subprocess.Popen(args, stdin=pipe, stdout=pipe, stderr=pipe)
    p.stdin.write(_head_and_frames(FRAMES))
    p.stdin.flush()
    seg = layout.open_segment_path(led, "link0", 0)
    want = 256 + (4 + 64 * 48 + 32) + (4 + 36 * 48 + 32)
    deadline = time.monotonic() + 60
    # through the page cache the file is `want` bytes; under O_DIRECT it is zero-padded to 4 KiB
    sizes = {want, -(-want // 4096) * 4096}
    while not (seg.exists() and seg.stat().st_size in sizes):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise AssertionError(p.stderr.read().decode() if p.poll() is not None else "timeout")
        time.sleep(0.02)
    return p, time.monotonic()


def _finish(p: subprocess.Popen, t_arrived: float) -> tuple[int, float, dict]:
    try:
        rc = p.wait(timeout=20)  # stdin is still open: only the deadline or the signal ends the run
        took = time.monotonic() - t_arrived
        out = p.stdout.read()
    finally:
        if p.poll() is None:
            p.kill()
        p.stdin.close()
    return rc, took, json.loads(out)


def _sealed(led, keydir) -> None:
    v = run_cli("verify", led, "--trust", keydir / "verifier.pub")
    assert v.returncode == 0 and f"{FRAMES} records" in v.stdout, v.stdout + v.stderr


def test_duration_ends_a_capture_of_a_quiet_pipe(tmp_path, keydir):
    led = tmp_path / "D"
    p, t = _start(keydir, led, "--duration", "1")
    rc, took, rep = _finish(p, t)
    assert rc == 0
    assert took < 3, f"ran {took:.1f} s after the last frame with --duration 1"
    assert (rep["frames"], rep["stop_reason"], rep["segments"]) == (FRAMES, "duration", [0])
    _sealed(led, keydir)


def test_sigint_ends_a_capture_of_a_quiet_pipe_at_once(tmp_path, keydir):
    led = tmp_path / "S"
    p, _ = _start(keydir, led)
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    rc, took, rep = _finish(p, t)
    assert rc == 0
    assert took < 3, f"ran {took:.1f} s after SIGINT"
    assert (rep["frames"], rep["interrupted"], rep["stop_reason"], rep["segments"]) == (
        FRAMES,
        True,
        "signal",
        [0],
    )
    _sealed(led, keydir)
