"""What a difference costs recompute: CPU time and peak RSS of `reconcile` on a capture that agrees
with its ledger and on the same capture with K frames changed (a byte of each flipped), each in a
fresh child process (getrusage), best of R runs.

Usage:  python scripts/recompute_diff_bench.py N [N ...] [--changed 5] [--runs 3] [--workdir DIR]
                                             [--segment-records 100000] [--memory-limit 4GB]
                                             [--exact]

For each N a workload of N 64-byte frames is captured into a ledger and written to a pcap
(scale_bench's spec); the changed copy flips one payload byte of K frames spread over the file.
docs/benchmarks.md, "A capture that differs".
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_bench import _cli, _ledger  # noqa: E402

_CHILD = """
import resource, sys
from pathlib import Path
from ledgertool.keyfiles import DigestKey, TrustBundle
from ledgertool.reconcile.recompute import reconcile
pcap, led, keys, limit, exact = sys.argv[1:6]
r0 = resource.getrusage(resource.RUSAGE_SELF)
res = reconcile(Path(pcap), Path(led), DigestKey.load(Path(keys) / "digest.key"),
                trust=TrustBundle.load(Path(keys) / "verifier.pub"), workers=1, memory_limit=limit,
                exact=exact == "1")
r = resource.getrusage(resource.RUSAGE_SELF)
cpu = r.ru_utime + r.ru_stime - r0.ru_utime - r0.ru_stime
print(cpu, r.ru_maxrss, res.matched, res.ledger_only, res.capture_only)
"""


def _changed(pcap: Path, out: Path, k: int) -> None:
    """`pcap` (frames of one size, 16-byte record headers) with one payload byte of k frames
    flipped."""
    raw = bytearray(pcap.read_bytes())
    # the first record's captured length
    size = 16 + int.from_bytes(raw[24 + 8 : 24 + 12], "little")
    n = (len(raw) - 24) // size
    for i in range(k):
        at = 24 + (n * (2 * i + 1) // (2 * k)) * size + 16 + 50
        raw[at] ^= 0x01
    out.write_bytes(raw)


def _run(pcap: Path, led: Path, keys: Path, limit: str, exact: bool) -> tuple[float, int, str]:
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(pcap),
            str(led),
            str(keys),
            limit,
            "1" if exact else "0",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    cpu, rss, m, lo, co = r.stdout.split()
    return float(cpu), int(rss), f"{int(m):,} matched, {lo} ledger-only, {co} capture-only"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", type=int, nargs="+")
    ap.add_argument("--changed", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--segment-records", type=int, default=100_000)
    ap.add_argument("--memory-limit", default="4GB")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument(
        "--exact", action="store_true", help="pair everything (exact=True), for the comparison"
    )
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="recompute-diff-"))
    work.mkdir(parents=True, exist_ok=True)
    keys = work / "keys"
    if not keys.exists():
        _cli("keys", "generate", keys, "--json")
    print("| frames | capture | CPU s (best) | ns per frame | peak RSS MiB | result |")
    print("|---:|---|---:|---:|---:|---|")
    for n in a.n:
        led = _ledger(work, keys, n, a.segment_records, reuse=True)
        pcap, diff = work / f"frames-{n}.pcap", work / f"frames-{n}-changed.pcap"
        if not pcap.exists():
            _cli("workload", "generate", work / f"spec-{n}.toml", "--out", pcap, "--json")
        _changed(pcap, diff, a.changed)
        for name, f in (("agrees", pcap), (f"{a.changed} changed", diff)):
            runs = [_run(f, led, keys, a.memory_limit, a.exact) for _ in range(a.runs)]
            cpu = min(r[0] for r in runs)
            rss = max(r[1] for r in runs) / 1024
            print(
                f"| {n:,} | {name} | {cpu:.2f} | {cpu / n * 1e9:.0f} | {rss:,.0f} | {runs[0][2]} |",
                flush=True,
            )
    if a.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
