"""What one worker does for `recompute --cluster`, called in one process: every capture chunk
digested, every segment checked and split, the one partition paired and tallied; prints the wall
time of each step, the CPU seconds and records per CPU-second, and with --prof a cProfile table
(docs/benchmarks.md, "recompute --cluster").

Usage:  python scripts/recompute_worker_profile.py LEDGER CAPTURE.pcap KEYDIR [--chunk-bytes B] [--prof]
(LEDGER: one link, captured from CAPTURE with KEYDIR's keys.)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import time
from pathlib import Path

from ledgertool.algorithms import get_algorithm
from ledgertool.keyfiles import DigestKey, TrustBundle
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.reader import LedgerReader
from ledgertool.reconcile import cluster as rc
from ledgertool.reconcile.recompute import _Segment
from ledgertool.verify import ledger as vl
from ledgertool.verify.cluster import LedgerContext, segment_part


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ledger", type=Path)
    ap.add_argument("capture", type=Path)
    ap.add_argument("keys", type=Path)
    ap.add_argument("--chunk-bytes", type=int, default=1 << 40)
    ap.add_argument("--prof", action="store_true")
    a = ap.parse_args()
    dk, trust = DigestKey.load(a.keys / "digest.key"), TrustBundle.load(a.keys / "verifier.pub")
    ledger = load_ledger(a.ledger)
    alg = get_algorithm(ledger.algorithm)
    reader = LedgerReader(a.ledger)
    link = reader.links[0]
    listing = reader.listing(link)
    places: list = []

    def grab(rd, ls, pl):  # the places (with the key schedule) as verify builds them
        places.extend(pl)
        return vl.check_here(rd, ls, pl)

    vl.verify_ledger(a.ledger, trust, links=[link], checker=grab)
    ctx = LedgerContext(str(a.ledger), places[0].ledger, places[0].sched)
    pr = cProfile.Profile()
    c0, t0 = time.process_time(), time.perf_counter()
    if a.prof:
        pr.enable()
    chunks, _stop = rc.plan_chunks([a.capture], a.chunk_bytes)
    t1 = time.perf_counter()
    caps = [rc.digest_chunk(c, dk.subkey(alg.name, alg.key_size), alg.name, ledger.strip, 1) for c in chunks]
    t2 = time.perf_counter()
    segs = [rc.check_and_split(ctx, segment_part(listing, p.index), p.index, 1) for p in places]
    t3 = time.perf_counter()
    kid = segs[0][0].seal.doc["digest_key_id"]
    job = rc.PartitionJob(str(a.ledger), (kid,), tuple(_Segment.of_seal(link, s[0].seal.index, s[0].seal.doc)
                                                         for s in segs), (), None, None, 0, 10, 0, "4GB", alg.digest_size)
    offsets = [0]
    for c in caps[:-1]:
        offsets.append(offsets[-1] + c[0].frames)
    t = rc.tally_partition(job, offsets, [s[1][0] for s in segs], [c[1][0] for c in caps])
    t4 = time.perf_counter()
    if a.prof:
        pr.disable()
    cpu = time.process_time() - c0
    n = t.tally.frames_in_window
    print(f"matched {t.tally.matched:,}, ledger-only {t.tally.ledger_only:,}, capture-only {t.tally.capture_only:,}")
    print(f"plan {t1 - t0:.2f} s, digest {t2 - t1:.2f} s, verify + split {t3 - t2:.2f} s, pair + tally {t4 - t3:.2f} s; "
          f"CPU {cpu:.2f} s: {n / cpu:,.0f} records per CPU-s; peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if a.prof:
        pstats.Stats(pr).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main()
