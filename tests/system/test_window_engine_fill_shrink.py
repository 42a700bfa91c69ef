"""The engine that feeds the window accumulator (DigestEngine.fill with `window`) on a capture
file truncated while it is read: one line naming the file and the byte (exit 2), as the plain
fill, and every record it handed out before is in the accumulator's windows, none after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledgertool.bench.measure import write_synthetic_pcap

_PROBE = """
import os, sys
from ledgertool.algorithms import get_algorithm
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.window import WindowAccumulator, WindowKeys
from ledgertool.source.file import CaptureReader
from ledgertool.errors import CaptureFormatError
path, workers = sys.argv[1], int(sys.argv[2])
alg = get_algorithm("siphash-1-3-128")
acc = WindowAccumulator(WindowKeys(bytes(16), bytes(16)), 16, window_ns=10**12)
handed = 0
with CaptureReader(path) as r:
    # a fill of 1,024 of the 4,096 frames read: the next fill hashes frames past the new end
    e = DigestEngine(r, alg, 0, bytes(16), batch_records=1024, workers=workers, batch=4096)
    try:
        handed += e.fill(0, window=acc)[1]
        os.truncate(path, 8192)
        while (n := e.fill(handed, window=acc)[1]):
            handed += n
    except CaptureFormatError as exc:
        print(exc)
        [w] = acc.take_closed() + acc.finish()
        print(handed, w.frames)
        sys.exit(2)
print("no error")
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_a_file_that_shrinks_under_the_window_fed_engine_is_one_error_line(tmp_path, workers):
    cap = tmp_path / "cap.pcap"
    write_synthetic_pcap(cap, 40_000, 64)
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, str(cap), str(workers)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    msg, counts = r.stdout.strip().splitlines()
    assert msg.startswith(f"{cap}: the file shrank while it was read: byte "), msg
    handed, windowed = map(int, counts.split())
    assert handed == windowed and handed >= 1024
    assert Path(cap).stat().st_size == 8192
