"""verify's per-segment fixed cost: verify_ledger of a ledger of small segments (written by
`scripts/verify_v2_bench.py --segments 100 --records 1024 --only v2-rec --out DIR`, which leaves
DIR/v2-rec and DIR/trust.json), keyless and with signatures, best of N, CPU seconds of this
process per segment (the 1,024 records add ~0.03 ms).

    PYTHONPATH=TREE python scripts/verify_fixed_bench.py DIR [N]
"""
import sys, time
from pathlib import Path
import ledgertool
from ledgertool.keyfiles import TrustBundle
from ledgertool.verify.ledger import verify_ledger
d = Path(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
trust = TrustBundle.load(d / "trust.json")
out = {}
for mode, t in (("keyless", None), ("signed", trust)):
    best = 1e9
    for _ in range(n):
        c = time.process_time(); r = verify_ledger(d / "v2-rec", t); c = time.process_time() - c
        assert r.ok; best = min(best, c)
    out[mode] = best / r.segments * 1e3
print(f"{Path(ledgertool.__file__).parent.parent}: keyless {out['keyless']:.3f} ms/segment, signed {out['signed']:.3f} ms/segment (CPU, best of {n}, {r.segments} segments x {r.records // r.segments} records)")
