"""recompute's memory does not grow with the ledger when a few frames differ: only the differing
parts' rows are kept (and past a quarter of --memory-limit they go to DuckDB, which spills). The
process is under test (its peak RSS), so it runs in a child: 400,000 generated 64-byte frames
captured into a ledger, the pcap of the same frames with 3 of them changed, reconciled under
--memory-limit 64MB. Pairing everything keeps both sides' records (48 bytes a record each, ~100
bytes a record with the pairing's arrays); the partitioned pairing must stay well under that."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ledgertool.cli.app import app
from ledgertool.reconcile.msethash import accelerated

N = 400_000

SPEC = """version = 1
name = "memory-bound"
seed = 7
start_ns = 1767225600000000000
interframe_ps = 1680

[[flows]]
name = "a-to-b"
src_mac = "02:00:5e:00:00:0a"
dst_mac = "02:00:5e:00:00:0b"
src_ip = "192.0.2.100"
dst_ip = "192.0.2.101"
protocol = "udp"
src_port = 1024
dst_port = 1025
frames = {n}
size = 64
"""

CHILD = """
import resource, sys
from pathlib import Path
from ledgertool.keyfiles import DigestKey, TrustBundle
from ledgertool.reconcile.query import open_duckdb
from ledgertool.reconcile.recompute import reconcile
pcap, led, keys, exact = sys.argv[1:5]
dk, trust = DigestKey.load(Path(keys) / "digest.key"), TrustBundle.load(Path(keys) / "verifier.pub")
open_duckdb().close()  # DuckDB's own start-up is not the ledger's
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
res = reconcile(
    Path(pcap), Path(led), dk, trust=trust, memory_limit="64MB", workers=1, exact=exact == "1"
)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(after - before, res.matched, res.ledger_only, res.capture_only)
"""


def changed_ledger(tmp_path):
    """(keys, ledger, pcap): N generated frames captured into a ledger, and their pcap with one
    payload byte of 3 frames flipped."""
    runner = CliRunner()
    keys, led, pcap = tmp_path / "keys", tmp_path / "L", tmp_path / "f.pcap"
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(n=N))
    for args in (
        ["keys", "generate", str(keys)],
        ["workload", "generate", str(spec), "--out", str(pcap)],
        [
            "capture",
            f"workload:{spec}",
            "--ledger",
            str(led),
            "--digest-key",
            str(keys / "digest.key"),
            "--signing-key",
            str(keys / "signing.key"),
            "--segment-records",
            "50000",
        ],
    ):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
    raw = bytearray(pcap.read_bytes())
    size = 16 + int.from_bytes(raw[32:36], "little")  # a record: its header and the captured bytes
    for i in (1000, 200_000, 399_000):  # one payload byte of 3 frames
        raw[24 + i * size + 16 + 50] ^= 1
    pcap.write_bytes(raw)
    return keys, led, pcap


@pytest.mark.skipif(not accelerated(), reason="the partitioned pairing runs where AES-NI does")
def test_peak_memory_of_a_differing_capture_stays_off_the_ledgers_size(tmp_path):
    keys, led, pcap = changed_ledger(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(pcap), str(led), str(keys), "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    grown_kib, matched, lonly, conly = map(int, out.stdout.split())
    assert (matched, lonly, conly) == (N - 3, 3, 3)
    # pairing everything grows ~100 bytes a record here (40 MB); the partitioned pairing holds one
    # segment's buffer, one engine batch and the pcap's map window (~8 MB): allow 40 bytes a record
    assert grown_kib * 1024 < 40 * N, f"peak RSS grew {grown_kib} KiB for {N} records"
