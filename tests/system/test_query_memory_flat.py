"""`query` holds memory flat in the ledger's size: a fresh interpreter's peak RSS while it counts
2 M records streamed from the bytes verify checked (a table of them would cost ~200 MB)."""

from __future__ import annotations

import os
import subprocess
import sys

_MEASURE = """
import os, sys
from ledgertool.reconcile.query import run_query
import resource
run_query(sys.argv[1], "SELECT count(*) FROM records")  # the imports and DuckDB's start
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows = run_query(sys.argv[2], "SELECT count(*) FROM records").rows
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(rows[0][0], grown * 1024)
"""


def test_query_count_memory_stays_flat_in_the_ledger_size(tmp_path, keydir, sample_ledger):
    """2 M records: a table of them costs ~200 MB; the stream holds a few 100k-record segments."""
    spec = tmp_path / "w.toml"
    spec.write_text(SPEC)
    big = tmp_path / "big"
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from ledgertool.cli.app import main; main()",
            "capture",
            f"workload:{spec}",
            "--ledger",
            str(big),
            "--segment-records",
            "100000",
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
        ],
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(sample_ledger), str(big)],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    ).stdout
    count, grown = (int(v) for v in out.split())
    assert count == 2_000_000
    assert grown < 60 * 2**20, f"peak RSS grew {grown / 2**20:.0f} MiB for 2,000,000 records"


SPEC = """version = 1
name = "flat"
seed = 64
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
frames = 2000000
size = 64
"""
