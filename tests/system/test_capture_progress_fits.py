"""`capture` of a file on an 80-column terminal (a real process, stderr on a pseudo-terminal): its
progress line has the file's size as a total and an ETA, and fits the 80 columns (what does not fit
of the figures is left out, never cut mid-word)."""

from __future__ import annotations

import os
import pty
import re
import struct
import subprocess

from test_cli_output import CLI

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _pcap(path, frames: int) -> int:
    """A pcap of `frames` 60-byte frames 1 µs apart; returns its size."""
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    body = bytes(range(60))
    with open(path, "wb") as f:
        f.write(head)
        for k in range(0, frames, 10000):
            f.write(
                b"".join(
                    struct.pack("<IIII", 1_700_000_000 + i // 1_000_000, i % 1_000_000, 60, 60)
                    + body
                    for i in range(k, min(frames, k + 10000))
                )
            )
    return path.stat().st_size


def _stderr_on_tty(args, columns: int) -> tuple[int, str]:
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS=str(columns), LINES="40", TERM="xterm")
    p = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        err += chunk
    rc = p.wait(timeout=600)
    os.close(master)
    return rc, ANSI.sub("", err.decode(errors="replace"))


def test_capture_of_a_file_shows_its_size_an_eta_and_fits_80_columns(tmp_path, keydir):
    size = _pcap(tmp_path / "big.pcap", 1_500_000)
    rc, err = _stderr_on_tty(
        [
            "capture",
            tmp_path / "big.pcap",
            "--ledger",
            tmp_path / "L",
            "--digest-key",
            keydir / "digest.key",
            "--signing-key",
            keydir / "signing.key",
            "--segment-records",
            "200000",
        ],
        80,
    )
    assert rc == 0, err
    total = f"of {size / (1 << 20):.1f} MiB"
    drawn = [s for s in re.split(r"[\r\n]", err) if total in s]
    assert drawn, err  # the file's size is the total
    assert any("ETA" in s and re.search(r"ETA \d:\d\d:\d\d", s) for s in drawn), drawn
    assert max(len(s.rstrip()) for s in re.split(r"[\r\n]", err)) <= 80, err
