"""A `capture --tiers windows` killed (SIGKILL) mid-run: recover seals the authenticated prefix of
the window log's open segment, the ledger verifies, and every recovered window matches the
capture's."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from conftest import load_keys

from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.recover import recover_ledger
from ledgertool.reconcile.against_windows import reconcile_windows
from ledgertool.verify.ledger import verify_ledger

LOG = layout.window_log("link0")


def test_sigkill_mid_window_segment_recovers_the_authenticated_windows(tmp_path, keydir):
    # one frame a microsecond: 20,000 windows of 100 us, a block (an engine batch) ~2 MB of them
    frames = 2_000_000
    src = tmp_path / "in.pcap"
    write_synthetic_pcap(src, frames, 64, seed=5)
    ledger = tmp_path / "L"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ledgertool.cli.app import main; main()",
            "capture",
            str(src),
            "--ledger",
            str(ledger),
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
            "--tiers",
            "windows",
            "--window",
            "100us",
            "--window-capacity",
            "4",
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    t0 = time.monotonic()
    while not any(p.stat().st_size > 8_000_000 for p in ledger.glob(f"{LOG}/*.open")):
        assert proc.poll() is None and time.monotonic() - t0 < 120, (
            "capture never filled an open window segment"
        )
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    (path,) = ledger.glob(f"{LOG}/*.open")
    with open(path, "ab") as f:
        f.write((3).to_bytes(4, "little") + b"\x07" * 50)  # a torn block in any case
    seg = segments.read_open_segment(path)
    assert seg.header.tier == "windows" and len(seg.blocks) >= 2
    dk, sk, trust = load_keys(keydir)
    rec = recover_ledger(ledger, sk)
    (got,) = [r for log, r in rec.sealed if log == LOG]
    assert (got.records, got.blocks) == (seg.count, len(seg.blocks)) and got.torn_bytes >= 54
    v = verify_ledger(ledger, trust, layout.checkpoint_path(ledger, LOG).read_bytes())
    assert v.ok, [p.to_json() for p in v.problems]
    (summary,) = v.windows
    assert summary.windows >= got.records > 0
    res = reconcile_windows(src, ledger, dk, trust=trust)
    held = [w for w in res.windows if w.ledger_frames]
    # every window the ledger holds is the capture's, exactly; the windows after the kill are only
    # in the capture
    assert len(held) == summary.windows and all(w.status == "match" for w in held)
    assert sum(w.ledger_frames for w in held) == summary.frames < frames
    assert sum(w.capture_frames for w in res.windows) == frames
