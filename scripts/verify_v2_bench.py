"""verify's speed on a 100-segment ledger, format v2 (raw record files, and the same after
`compact`) against v1 (Parquet pinned by the seal), the same records in each (issue 14: verify
>= 50 M records/s per core).

    python scripts/verify_v2_bench.py [--segments 100] [--records 16384] [--rounds 3] [--out DIR]
        [--reuse] [--keyless]

--reuse times the ledgers already in --out (written by an earlier run) instead of writing them:
the same ledger timed with two trees (PYTHONPATH=main, then this one) gives a same-run baseline.
--keyless verifies without the trust bundle (no signature checks), as `query` and `recompute` do.
A run that writes ledgers saves their trust bundle as trust.json in --out, so that --reuse without
--keyless checks the signatures too.

The v2 ledger is written by the tests' reference writer (tests/v2_reference.py), the v1 ledger by
ledgertool's own sealer; records are synthetic (numpy), 48 bytes, leaf_records 256 (v2) / 64 (v1,
its default) and 256. Prints wall and CPU (process) time per record for each, best of `rounds`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import v2_reference  # noqa: E402

from ledgertool.digest.record import record_dtype  # noqa: E402
from ledgertool.keyfiles import SigningKey, TrustBundle  # noqa: E402
from ledgertool.ledger.checkpoints import write_checkpoint  # noqa: E402
from ledgertool.ledger.compact import compact_ledger  # noqa: E402
from ledgertool.ledger.header import create_ledger  # noqa: E402
from ledgertool.ledger.layout import link_dir, parquet_path, seal_path  # noqa: E402
from ledgertool.ledger.sealer import seal_records
from ledgertool.seal.document import genesis_hash  # noqa: E402
from ledgertool.verify.ledger import verify_ledger  # noqa: E402


def records(n: int, first: int, seed: int) -> bytes:
    arr = np.zeros(n, dtype=record_dtype(16))
    arr["seq"] = np.arange(first, first + n, dtype=np.uint64)
    arr["ts_ns"] = 1_700_000_000_000_000_000 + arr["seq"].astype(np.int64) * 1000
    arr["wire_len"] = arr["cap_len"] = 64
    arr["linktype"] = 1
    arr["digest"] = np.frombuffer(np.random.default_rng(seed).bytes(16 * n), dtype="V16")
    return arr.tobytes()


def v1_ledger(d: Path, sk: SigningKey, segs: list[bytes], leaf: int) -> None:
    ledger = create_ledger(d, algorithm="siphash-1-3-128", strip="frame", digest_key_id="00" * 16, digest_size=16,
                           leaf_records=leaf, version=1)  # seal_records with a Parquet path: the v1 form
    link_dir(d, "link0").mkdir()
    prev, seq = genesis_hash(ledger.ledger_id, "link0"), 0
    for i, r in enumerate(segs):
        _, res = seal_records(ledger_dir=d, ledger=ledger, link="link0", index=i, first_seq=seq, records=r,
                              prev_hash=prev, signing_key=sk, parquet=parquet_path(d, "link0", i),
                              seal_file=seal_path(d, "link0", i))
        prev, seq = res.seal_hash, seq + res.records
    write_checkpoint(d, ledger, "link0", sk)


def best(d: Path, trust, rounds: int) -> tuple[float, float, int]:
    out = []
    for _ in range(rounds):
        w, c = time.perf_counter(), time.process_time()
        res = verify_ledger(d, trust)
        out.append((time.perf_counter() - w, time.process_time() - c))
        assert res.ok, res.problems[:3]
    return min(x[0] for x in out), min(x[1] for x in out), res.records


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--records", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", default="v2-rec,v2-parquet,v1-64,v1-256", help="ledgers to build and time")
    ap.add_argument("--reuse", action="store_true", help="time the ledgers already in --out")
    ap.add_argument("--keyless", action="store_true", help="verify without the trust bundle")
    a = ap.parse_args()
    only = a.only.split(",")
    base = a.out or Path(tempfile.mkdtemp(prefix="verify-v2-"))
    if a.reuse:
        if a.out is None:
            ap.error("--reuse needs --out")
        if not a.keyless and not (base / "trust.json").exists():
            ap.error(f"--reuse without --keyless needs {base / 'trust.json'} (written by runs since that option)")
        trust = None if a.keyless else TrustBundle.load(base / "trust.json")
        mode = "keyless" if a.keyless else "signed"
        for name in only:
            wall, cpu, n = best(base / name, trust, a.rounds)
            print(f"{name:11s} {mode} {n / cpu / 1e6:6.2f} M records/s per CPU-second ({cpu * 1e9 / n:5.1f} ns CPU, "
                  f"{wall * 1e9 / n:5.1f} ns wall per record)")
        return
    sk = SigningKey.generate()
    base.mkdir(parents=True, exist_ok=True)
    (base / "trust.json").unlink(missing_ok=True)
    sk.trust_bundle().save(base / "trust.json")
    trust = None if a.keyless else sk.trust_bundle()
    segs = [records(a.records, i * a.records, i) for i in range(a.segments)]
    if "v2-rec" in only:
        v2_reference.write_v2_ledger(base / "v2-rec", sk, segs, leaf_records=256)
    if "v2-parquet" in only:
        v2_reference.write_v2_ledger(base / "v2-parquet", sk, segs, leaf_records=256)
        compact_ledger(base / "v2-parquet")
    for leaf in (64, 256):
        if f"v1-{leaf}" in only:
            v1_ledger(base / f"v1-{leaf}", sk, segs, leaf)
    del segs
    print(f"{a.segments} segments x {a.records} records of 48 bytes, best of {a.rounds}, "
          f"{'keyless' if a.keyless else 'signatures checked'}")
    for name in only:
        wall, cpu, n = best(base / name, trust, a.rounds)
        print(f"{name:11s} {n / wall / 1e6:6.2f} M records/s wall  {n / cpu / 1e6:6.2f} M records/s per CPU-second"
              f"  ({wall * 1e9 / n:5.1f} ns wall, {cpu * 1e9 / n:5.1f} ns CPU per record)")


if __name__ == "__main__":
    main()
