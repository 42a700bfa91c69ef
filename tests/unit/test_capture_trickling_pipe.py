"""`capture -` from a pipe that never goes quiet for a whole wait (tcpdump on a link with a frame
every few tens of milliseconds): --duration and --segment-seconds still act within a fraction of
a second, not only once the input ends or a batch fills."""

from __future__ import annotations

import json
import os
import struct
import threading
import time

from conftest import SAMPLES, cli

SAMPLE = SAMPLES / "sample.pcap"  # little-endian µs pcap, 294 frames


def _records() -> tuple[bytes, list[bytes]]:
    b = SAMPLE.read_bytes()
    pos, recs = 24, []
    while pos < len(b):
        n = 16 + struct.unpack_from("<I", b, pos + 8)[0]
        recs.append(b[pos : pos + n])
        pos += n
    return b[:24], recs


def _capture_from_trickle(tmp_path, keydir, *extra: str, gap: float = 0.02):
    """Run `capture -` in this process with fd 0 a pipe that gets one frame every `gap` seconds
    (294 frames: ~6 s); returns (result, seconds the capture took)."""
    head, recs = _records()
    rfd, wfd = os.pipe()
    stop = threading.Event()

    def write():
        try:
            os.write(wfd, head)
            for r in recs:
                if stop.is_set():
                    break
                os.write(wfd, r)
                time.sleep(gap)
        except BrokenPipeError:
            pass
        finally:
            os.close(wfd)

    saved = os.dup(0)
    os.dup2(rfd, 0)
    os.close(rfd)
    t = threading.Thread(target=write)
    t.start()
    try:
        t0 = time.monotonic()
        r = cli(
            "capture", "-", "--ledger", tmp_path / "L", "--digest-key", keydir / "digest.key",
            "--signing-key", keydir / "signing.key", "--json", *extra,
        )  # fmt: skip
        took = time.monotonic() - t0
    finally:
        os.dup2(saved, 0)  # the capture's dup of the read end is closed: the writer gets EPIPE
        os.close(saved)
        stop.set()
        t.join()
    return r, took


def test_duration_stops_a_trickling_pipe(tmp_path, keydir):
    r, took = _capture_from_trickle(tmp_path, keydir, "--duration", "0.5")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["stop_reason"] == "duration"
    # ~25 frames came in 0.5 s; before the fix the capture ran until the input ended (~6 s, 294)
    assert took < 2.5, took
    assert 0 < rep["frames"] < 150
    assert rep["elapsed_s"] < 2.0


def test_segment_seconds_seals_a_trickling_pipe(tmp_path, keydir):
    r, took = _capture_from_trickle(tmp_path, keydir, "--segment-seconds", "0.5", "--frames", "60")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["frames"] == 60
    # 60 frames 20 ms apart: ~1.2 s, so at least two segments sealed by the wall clock (before the
    # fix the first batch held all 60 frames: one segment)
    assert len(rep["segments"]) >= 2, rep["segments"]
