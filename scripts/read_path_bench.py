"""What verify's reads cost against its leaves: the raw record files of a v2 ledger read through the
page cache (pread(2), as verify reads them) and with O_DIRECT (the disk's DMA, no kernel copy),
alone and with the Merkle leaves hashed over each chunk read: CPU time per 48-byte record.

Usage:  python scripts/read_path_bench.py LEDGER [--rounds 5] [--chunk-mib 4]

LEDGER: a ledger of 64-byte frames (48-byte records), e.g. one `scripts/scale_bench.py` or
`ledgertool capture` wrote, on the storage to measure (O_DIRECT needs a file system that takes it:
not tmpfs before Linux 6.6). Each round reads every `seg-*.rec` file in CHUNK_MIB chunks into one
page-aligned buffer, four ways alternating: buffered and direct, each with no hashing and with the
chunk's leaves (256 records a leaf, `sha256` and `blake3`, lt_merkle_leaves) hashed where it was
read. The file's framing (block counts, MACs) is hashed as if it were records: the cost is what is
measured, not the ledger's root. The buffered rounds read from the page cache (the first round
fills it); the direct rounds from the disk. CPU is this process's user + system time
(getrusage), best and median of ROUNDS.

This is a model, not verify itself, which reads through the page cache: here the leaves' lanes are
the first to touch a chunk; in verify's walk a one-stream first pass does, and with O_DIRECT it paid
more in cache misses than the kernel's copy costs (docs/benchmarks.md, "verify").
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import statistics
import time
from pathlib import Path

from ledgertool._binding import ffi, lib
from ledgertool.digest.engine import leaf_spec

RECORD = 48
LEAF = 256


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one_pass(files: list[Path], buf: mmap.mmap, direct: bool, leaf_hash: str | None) -> tuple:
    """Read every file once; return (CPU ns a record, wall ns a record)."""
    view = memoryview(buf)
    cbuf = ffi.from_buffer(buf)
    chunk_leaves = len(buf) // (RECORD * LEAF)
    out = ffi.new("uint8_t[]", 32 * max(chunk_leaves, 1))
    spec = leaf_spec(LEAF, leaf_hash) if leaf_hash else 0
    c0, w0, total = cpu(), time.perf_counter(), 0
    for f in files:
        fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECT if direct else 0))
        try:
            off = 0
            while True:
                got = os.preadv(fd, [view], off)
                total += got
                off += got
                n = got // (RECORD * LEAF) * LEAF
                if leaf_hash and n:
                    if lib.lt_merkle_leaves(cbuf, RECORD, n, spec, out, len(out)) != 0:
                        raise SystemExit("lt_merkle_leaves failed")
                if got < len(buf):
                    break
        finally:
            os.close(fd)
    records = total / RECORD
    return (cpu() - c0) / records * 1e9, (time.perf_counter() - w0) / records * 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ledger", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--chunk-mib", type=int, default=4)
    a = ap.parse_args()
    files = sorted(a.ledger.glob("link=*/seg-*.rec"))
    if not files:
        raise SystemExit(f"{a.ledger}: no raw record files (link=*/seg-*.rec)")
    buf = mmap.mmap(-1, a.chunk_mib << 20)  # page-aligned, as O_DIRECT needs
    cases = [(d, h) for h in (None, "sha256", "blake3") for d in (False, True)]
    cpu_ns: dict = {c: [] for c in cases}
    wall_ns: dict = {c: [] for c in cases}
    one_pass(files, buf, False, None)  # the page cache holds the files for the buffered rounds
    for _ in range(a.rounds):
        for c in cases:
            ns, wall = one_pass(files, buf, *c)
            cpu_ns[c].append(ns)
            wall_ns[c].append(wall)
    size = sum(f.stat().st_size for f in files)
    print(f"{len(files)} files, {size / 1e6:,.0f} MB, {a.chunk_mib} MiB reads, best of {a.rounds}")
    print("| read | leaves | CPU ns a record, best (median) | wall ns a record, best |")
    print("| --- | --- | ---: | ---: |")
    for d, h in cases:
        best, med = min(cpu_ns[(d, h)]), statistics.median(cpu_ns[(d, h)])
        print(
            f"| {'O_DIRECT' if d else 'page cache'} | {h or '-'} | {best:.1f} ({med:.1f}) | "
            f"{min(wall_ns[(d, h)]):.1f} |"
        )


if __name__ == "__main__":
    main()
