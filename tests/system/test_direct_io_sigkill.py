"""A capture killed (SIGKILL) mid-segment with its segment written by O_DIRECT, and through the page
cache (LEDGERTOOL_SEGMENT_IO=buffered): the killed file is what each way leaves, and recover seals
its authenticated prefix either way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import load_keys

from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.recover import recover_ledger
from ledgertool.verify.ledger import verify_ledger


def _takes_o_direct(directory) -> bool:
    probe = directory / "probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600))
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)
    return True


@pytest.mark.parametrize("mode", ["direct", "buffered"])
def test_sigkill_mid_segment_under_either_write_path(tmp_path, keydir, mode):
    """kill -9 while a long segment is written: with O_DIRECT the file's size is a multiple of
    4 KiB (whole pages; zero padding after the last block, or a cut inside one), through the page
    cache it ends where the last write ended; recover seals the whole blocks, verify passes."""
    frames = 400_000
    src = tmp_path / "in.pcap"
    write_synthetic_pcap(src, frames, 64, seed=3)
    ledger = tmp_path / "L"
    env = dict(os.environ, **{segments.SEGMENT_IO_ENV: mode})
    argv = ["capture", str(src), "--ledger", str(ledger), "--segment-records", str(frames)]
    keys = [
        "--digest-key",
        str(keydir / "digest.key"),
        "--signing-key",
        str(keydir / "signing.key"),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", "from ledgertool.cli.app import main; main()", *argv, *keys],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    t0 = time.monotonic()
    while not any(p.stat().st_size > 7_000_000 for p in ledger.glob("link=*/*.open")):
        assert proc.poll() is None and time.monotonic() - t0 < 120, "no open segment filled"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    (path,) = ledger.glob("link=*/*.open")
    seg = segments.read_open_segment(path)
    assert len(seg.blocks) >= 2
    if mode == "direct" and _takes_o_direct(path.parent):
        assert seg.size % 4096 == 0 and seg.padding < 4096
    else:
        assert seg.padding == 0
    sk = load_keys(keydir)[1]
    rec = recover_ledger(ledger, sk)
    (got,) = [r for _, r in rec.sealed]
    assert (got.records, got.blocks, got.torn_bytes) == (seg.count, len(seg.blocks), seg.torn_bytes)
    trust = load_keys(keydir)[2]
    v = verify_ledger(ledger, trust, layout.checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and v.records == seg.count
