"""Verify's leaf walk and the sealed capture with SHA-256 leaves and with BLAKE3 leaf entries, in
the same run on the same machine: CPU time per record (docs/adr/0013-blake3-leaf-entries.md).

Usage:  python scripts/leaf_hash_bench.py --workdir DIR [--segments 100] [--records 262144]
                                          [--rounds 5] [--capture-frames 4000000]
                                          [--sha256-lanes 16,4]

1. For each leaf hash, `ledgertool capture workload:SPEC` (64-byte frames, siphash, 48-byte
   records, leaf 256) writes a ledger of SEGMENTS segments of RECORDS records (reused when DIR
   already holds it). Then, in this process, every segment's raw record file is walked as verify
   walks it (framing, tally, leaves: ledgertool.ledger.recfile.parse_record_file without keeping
   the records) and its Merkle root compared with the seal's: keyless (no signature checks), CPU
   time per record, best and median of ROUNDS rounds, the two leaf hashes alternating.
2. `capture` of CAPTURE_FRAMES / 5 and CAPTURE_FRAMES frames into a new ledger per leaf hash,
   alternating, ROUNDS rounds: the children's CPU time (wait4, every thread) per frame beyond
   start-up (the difference of the two sizes over the difference of their frames), best and median.

--sha256-lanes 16,4 measures the SHA-256 leaves once per count of leaves hashed side by side
(LEDGERTOOL_MERKLE_LANES, docs/algorithms.md), in the same rounds; a count this CPU cannot run is
left out. Without it, the default count.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale_bench import SPEC  # noqa: E402  (the 64-byte two-flow workload)

_CLI = "from ledgertool.cli.app import main; main()"
HASHES = ("sha256", "blake3")


def cli(*args: str, lanes: int | None = None) -> float:
    """Run `ledgertool ARGS` (with LEDGERTOOL_MERKLE_LANES=lanes when given); return the child's
    CPU seconds (every thread)."""
    env = dict(os.environ, LEDGERTOOL_MERKLE_LANES=str(lanes)) if lanes else None
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLI, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(
            f"ledgertool {' '.join(args)} failed: {proc.stderr.read().decode().strip()}"
        )
    return usage.ru_utime + usage.ru_stime


def capture(
    work: Path,
    out: Path,
    frames: int,
    segment_records: int,
    leaf_hash: str,
    lanes: int | None = None,
) -> float:
    spec = work / f"spec-{frames}.toml"
    spec.write_text(SPEC.format(n=frames, a=frames - frames // 2, b=frames // 2))
    return cli(
        "capture",
        f"workload:{spec}",
        "--ledger",
        str(out),
        "--digest-key",
        str(work / "keys" / "digest.key"),
        "--signing-key",
        str(work / "keys" / "signing.key"),
        "--segment-records",
        str(segment_records),
        "--leaf-hash",
        leaf_hash,
        lanes=lanes,
    )


def walk(ledger: Path, leaf_hash: str, lanes: int | None = None) -> tuple[float, int]:
    """CPU seconds and records of verify's keyless walk over every segment of `ledger` (with
    `lanes` SHA-256 leaves side by side when given)."""
    from ledgertool._binding import lib
    from ledgertool.digest.engine import merkle_root

    lib.lt_merkle_lanes_force(lanes or 0)
    from ledgertool.ledger.reader import OpenRecordFile
    from ledgertool.ledger.recfile import parse_record_file

    seals = sorted(ledger.glob("link=link0/seg-*.seal.json"))
    docs = [json.loads(p.read_text()) for p in seals]
    t0, n = time.process_time(), 0
    for doc, p in zip(docs, seals):
        path = p.with_name(p.name.replace(".seal.json", ".rec"))
        fd = os.open(path, os.O_RDONLY)
        try:
            rec = parse_record_file(
                OpenRecordFile(fd, os.fstat(fd).st_size),
                path,
                doc["record_size"],
                doc["leaf_records"],
                int(doc["first_seq"]),
                keep_records=False,
                leaf_hash=leaf_hash,
            )
        finally:
            os.close(fd)
        if merkle_root(rec.leaves).hex() != doc["merkle_root"]:
            raise SystemExit(f"{path}: root differs from the seal")
        n += doc["records"]
    lib.lt_merkle_lanes_force(0)
    return time.process_time() - t0, n


def variants(lanes_arg: str | None) -> list[tuple[str, str, int | None]]:
    """(label, leaf hash, lanes) to measure: SHA-256 once per usable lane count, then BLAKE3."""
    from ledgertool._binding import lib

    counts: list[int | None] = [None]
    if lanes_arg:
        counts = [n for n in map(int, lanes_arg.split(",")) if lib.lt_merkle_lanes_force(n) == 0]
        lib.lt_merkle_lanes_force(0)
    sha = [(f"sha256 ({n} lanes)" if n else "sha256", "sha256", n) for n in counts]
    return [*sha, ("blake3", "blake3", None)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--records", type=int, default=262144)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--capture-frames", type=int, default=4_000_000)
    ap.add_argument("--sha256-lanes", help="e.g. 16,4: SHA-256 leaves per lane count")
    a = ap.parse_args()
    work = a.workdir
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "keys").exists():
        cli("keys", "generate", str(work / "keys"))
    for h in HASHES:
        led = work / f"verify-{h}"
        if not led.exists():
            capture(work, led, a.segments * a.records, a.records, h)
    runs = variants(a.sha256_lanes)
    per: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    for _ in range(a.rounds):
        for label, h, lanes in runs:
            cpu, n = walk(work / f"verify-{h}", h, lanes)
            per[label].append(cpu / n * 1e9)
    print(
        f"verify walk, keyless, {a.segments} x {a.records:,} 48-byte records, leaf 256, "
        "CPU ns per record, best (median):"
    )
    for label, v in per.items():
        print(f"  {label}: {min(v):.1f} ({statistics.median(v):.1f})")
    cap: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    small, big = a.capture_frames // 5, a.capture_frames
    for _ in range(a.rounds):
        for label, h, lanes in runs:
            cpu = []
            for n in (small, big):
                out = work / f"capture-{h}"
                shutil.rmtree(out, ignore_errors=True)
                cpu.append(capture(work, out, n, 1_000_000, h, lanes))
                shutil.rmtree(out, ignore_errors=True)
            cap[label].append((cpu[1] - cpu[0]) / (big - small) * 1e9)
    print(
        f"capture (sealed), 64-byte frames, siphash, CPU ns per frame beyond start-up "
        f"({small:,} and {big:,} frames), best (median):"
    )
    for label, v in cap.items():
        print(f"  {label}: {min(v):.1f} ({statistics.median(v):.1f})")


if __name__ == "__main__":
    main()
