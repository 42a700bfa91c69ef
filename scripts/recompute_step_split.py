"""recompute's one-machine path split into its steps, each timed on its own (CPU seconds from
process_time, best of R per step), in ns per record: verify alone (no reader of the records),
verify + keep the records (recompute._ledger_parts), digest the capture (_capture_records, one
thread), join the ledger's segments (multiset.ledger_rows), open DuckDB, pair + tally
(pair_records). Runs on main too (where _ledger_parts takes no hint and returns no array), so
the same ledger can be timed with both trees, alternating (docs/benchmarks.md, "recompute per
worker: records into one array").

Usage:  python scripts/recompute_step_split.py LEDGER CAPTURE KEYDIR [R]
(KEYDIR: digest.key and verifier.pub of the ledger; LEDGER captured from CAPTURE, one key.)
"""
from __future__ import annotations

import gc
import inspect
import sys
import tempfile
import time
from pathlib import Path

from ledgertool.algorithms import get_algorithm
from ledgertool.keyfiles import DigestKey, TrustBundle
from ledgertool.ledger.header import load_ledger
from ledgertool.reconcile import recompute as rc
from ledgertool.reconcile.multiset import ledger_rows
from ledgertool.reconcile.query import open_duckdb
from ledgertool.verify.ledger import verify_ledger


def main() -> None:
    ledger_dir, capture, keys = map(Path, sys.argv[1:4])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    dk, trust = DigestKey.load(keys / "digest.key"), TrustBundle.load(keys / "verifier.pub")
    led = load_ledger(ledger_dir)
    alg = get_algorithm(led.algorithm)
    # this branch's _ledger_parts takes the sink's hint (as reconcile passes it) and returns the array
    hint = ((rc._file_bytes(capture) // 64,) if "hint" in inspect.signature(rc._ledger_parts).parameters else ())
    best: dict[str, float] = {}

    def timed(name, f):
        gc.collect()
        c0 = time.process_time()
        out = f()
        best[name] = min(best.get(name, float("inf")), time.process_time() - c0)
        return out

    for _ in range(rounds):
        timed("verify alone", lambda: verify_ledger(ledger_dir, trust))
        got = timed("verify + keep", lambda: rc._ledger_parts(ledger_dir, trust, None, "checkpoint", None, None,
                                                              alg.digest_size, *hint))
        segs, _ver, parts = got[:3]
        extra = {"whole": got[3]} if len(got) > 3 else {}
        keys_, uncovered = rc._match_keys(ledger_dir, led, alg, [dk], segs)
        cap, _run = timed("digest capture", lambda: rc._capture_records(capture, keys_[0][1], alg, led.strip, None, 1))
        side = timed("join ledger", lambda: ledger_rows(parts, keys_[0][0], alg.digest_size, **extra))
        del parts, got, extra
        with tempfile.TemporaryDirectory() as tmp:
            con = timed("open duckdb", lambda: open_duckdb({"memory_limit": "4GB", "temp_directory": tmp}))
            tally = timed("pair + tally", lambda: rc.pair_records(con, keys_[0][0], segs, uncovered, side, cap,
                                                                  (None, None, 0), 10))
            con.close()
        n = len(cap)
        del cap, side
    total = sum(v for k, v in best.items() if k != "verify alone")
    for k, v in best.items():
        print(f"{k:16s} {v / n * 1e9:7.1f} ns/record")
    print(f"{'total':16s} {total / n * 1e9:7.1f} ns/record  ({n / total / 1e6:.2f} M records per CPU-s); "
          f"matched {tally.matched}")


if __name__ == "__main__":
    main()
