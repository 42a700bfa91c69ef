"""A capture killed (SIGKILL) mid-segment: recover seals the authenticated prefix of its open
segment."""

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
from ledgertool.reconcile.recompute import reconcile
from ledgertool.verify.ledger import verify_ledger


def test_sigkill_mid_segment_recovers_the_authenticated_prefix(tmp_path, keydir):
    """kill -9 a capture in the middle of a long segment: recover seals the whole authenticated
    blocks, and recompute of the frames they cover matches the ledger exactly."""
    frames = 600_000
    src = tmp_path / "in.pcap"
    write_synthetic_pcap(src, frames, 64, seed=9)
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
            "--segment-records",
            str(frames),
            "--json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    # an append is one block of up to 65,536 records (3 MiB of 48-byte records) and a kill can
    # land inside one: wait for more than two blocks' worth, so that whole blocks precede the cut
    t0 = time.monotonic()
    while not any(p.stat().st_size > 8_000_000 for p in ledger.glob("link=*/*.open")):
        assert proc.poll() is None and time.monotonic() - t0 < 120, (
            "capture never filled an open segment"
        )
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    (path,) = ledger.glob("link=*/*.open")
    with open(path, "ab") as f:
        f.write((5).to_bytes(4, "little") + b"\x07" * 50)  # a torn block in any case
    seg = segments.read_open_segment(path)
    assert len(seg.blocks) >= 2
    sk = load_keys(keydir)[1]
    rec = recover_ledger(ledger, sk)
    (got,) = [r for _, r in rec.sealed]
    assert (got.records, got.blocks, got.tail_blocks) == (
        seg.count,
        len(seg.blocks),
        1,
    ) and got.records > 0
    assert got.torn_bytes == seg.torn_bytes >= 54
    dk, _, trust = load_keys(keydir)
    v = verify_ledger(ledger, trust, layout.checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and v.records == got.records
    r = reconcile(src, ledger, dk, trust=trust)
    # every sealed record is a frame of the input; the frames after the crash are only in the input
    assert (r.matched, r.ledger_only, r.capture_only) == (got.records, 0, frames - got.records)
