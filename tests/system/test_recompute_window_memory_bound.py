"""recompute's pairing holds --memory-limit on every path, also those with no fast verdict: a
--from/--to window (and likewise standard input, several digest keys, a CPU without AES
instructions) pairs every frame, and past a quarter of the limit the rows go to bucket files by
their part and pair a bucket at a time (reconcile.partstore). The process is under test (its peak
RSS), so it runs in a child: 400,000 generated 64-byte frames captured into a ledger, the pcap of
the same frames with 3 of them changed, reconciled over a window that holds every frame under
--memory-limit 16MB. Holding both sides' records grows ~100 bytes a record (40 MB here)."""

from __future__ import annotations

import subprocess
import sys

from test_recompute_memory_bound import N, changed_ledger

START_NS = 1767225600000000000  # the spec's start_ns

CHILD = """
import resource, sys
from pathlib import Path
from ledgertool.keyfiles import DigestKey, TrustBundle
from ledgertool.reconcile.query import open_duckdb
from ledgertool.reconcile.recompute import reconcile
pcap, led, keys, lo, hi = sys.argv[1:6]
dk, trust = DigestKey.load(Path(keys) / "digest.key"), TrustBundle.load(Path(keys) / "verifier.pub")
open_duckdb().close()  # DuckDB's own start-up is not the ledger's
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
res = reconcile(Path(pcap), Path(led), dk, trust=trust, memory_limit="16MB", workers=1,
                from_ns=int(lo), to_ns=int(hi))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(after - before, res.frames, res.matched, res.ledger_only, res.capture_only)
"""


def test_peak_memory_of_a_windowed_pairing_stays_off_the_ledgers_size(tmp_path):
    keys, led, pcap = changed_ledger(tmp_path)
    window = (START_NS, START_NS + 3600 * 10**9)  # every frame: the pairing of all of them
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(pcap), str(led), str(keys), *map(str, window)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    grown_kib, frames, matched, lonly, conly = map(int, out.stdout.split())
    assert (frames, matched, lonly, conly) == (N, N - 3, 3, 3)
    # holding both sides grows ~100 bytes a record (40 MB); bucket by bucket: a quarter of the
    # limit, one segment's buffer, one engine batch and the pcap's map window: allow 40 a record
    assert grown_kib * 1024 < 40 * N, f"peak RSS grew {grown_kib} KiB for {N} records"
