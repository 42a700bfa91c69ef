"""Where a record's time goes when a segment is sealed (docs/benchmarks.md, "The seal stage").

Usage:  python scripts/seal_account.py [--records 1000000] [--repeats 7]

Builds one segment of N 48-byte records (64-byte frames every 6.72 ns, random 16-byte digests),
then times each step of `seal_records` (ledgertool/ledger/sealer.py) separately and the whole call, best of
--repeats, in a temporary directory next to the system's temporary files; then writes the same
Arrow table with other Parquet settings, to show how much of the Parquet step is encoding rather
than compression. Prints Markdown tables (ns per record, M records per second, file size).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from ledgertool.digest.engine import merkle_leaves, merkle_root
from ledgertool.digest.record import record_dtype
from ledgertool.keyfiles import SigningKey
from ledgertool.seal import merkle
from ledgertool.ledger.parquet import PARQUET_OPTIONS, records_to_table, write_parquet_atomic
from ledgertool.ledger.sealer import seal_records

_COLS = ("segment", "seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux", "digest")
_SMALL = dict(use_dictionary=["segment", "linktype", "flags"],
              column_encoding={"seq": "DELTA_BINARY_PACKED", "ts_ns": "DELTA_BINARY_PACKED"})
VARIANTS = {
    "as sealed (zstd on the small columns, raw digests, delta seq/ts)": PARQUET_OPTIONS,
    "no compression, delta seq/ts": dict(compression="none", **_SMALL),
    "lz4 on the small columns, delta seq/ts": dict(compression={c: ("none" if c == "digest" else "lz4")
                                                                for c in _COLS}, **_SMALL),
}


def best(fn, repeats: int) -> float:
    out = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records in the segment")
    ap.add_argument("--repeats", type=int, default=7, help="runs per step (the best is kept)")
    a = ap.parse_args()
    n = a.records
    arr = np.zeros(n, dtype=record_dtype(16))
    arr["seq"] = np.arange(n)
    arr["ts_ns"] = 1767225600000000000 + np.arange(n) * 6720 // 1000
    arr["wire_len"], arr["cap_len"], arr["linktype"] = 64, 60, 1
    arr["digest"] = np.frombuffer(os.urandom(16 * n), dtype="V16")
    rec = arr.tobytes()
    ledger = {"ledger_id": "0" * 32, "algorithm": "siphash-1-3-128", "strip": "frame", "digest_key_id": "0" * 32,
              "record_size": 48, "leaf_records": 64, "digest_size": 16}
    sk = SigningKey.generate("hybrid")
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        table = records_to_table(rec, 16, 0)
        raw = merkle_leaves(rec, 48, 64)
        leaves = [raw[i:i + 32] for i in range(0, len(raw), 32)]
        steps = [
            ("records → Arrow table (one copy per column out of the fixed-size records)",
             lambda: records_to_table(rec, 16, 0)),
            ("Parquet encode (in memory) + SHA-256 + atomic write with fsync",
             lambda: write_parquet_atomic(table, d / "x.parquet")),
            ("Merkle leaves, `lt_merkle_leaves` (C, SHA-NI: 48 bytes hashed per record)",
             lambda: merkle_leaves(rec, 48, 64)),
            ("tree above the leaves, `lt_merkle_root` (C)", lambda: merkle_root(raw)),
            ("the same tree in Python hashlib (`ledgertool.seal.merkle`, the reference)",
             lambda: merkle.root_from_leaf_hashes(leaves)),
            ("**`seal_records` in all** (the above, the `.leaves` file, the seal, both signatures)",
             lambda: seal_records(ledger_dir=d, ledger=ledger, link="l", index=0, first_seq=0, records=rec,
                                  prev_hash="0" * 64, signing_key=sk, parquet=d / "s.parquet",
                                  seal_file=d / "s.seal.json")),
        ]
        print("| step | ns/record | M records/s |\n| --- | ---: | ---: |")
        for name, fn in steps:
            t = best(fn, a.repeats)
            print(f"| {name} | {t / n * 1e9:.1f} | {n / t / 1e6:.1f} |", flush=True)
        print("\n| Parquet settings (pq.write_table to a file) | M records/s | MB |\n| --- | ---: | ---: |")
        for name, opt in VARIANTS.items():
            t = best(lambda: pq.write_table(table, d / "v.parquet", **opt), a.repeats)
            print(f"| {name} | {n / t / 1e6:.1f} | {os.path.getsize(d / 'v.parquet') / 1e6:.1f} |", flush=True)


if __name__ == "__main__":
    main()
