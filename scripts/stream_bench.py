"""CPU per record of `capture records:` for the same records as plain records and as an
authenticated record stream (docs/devices.md "Cost at 400G with 64-byte frames", ADR 0016), and
of the stream check alone (StreamParser: tags and lane checks, no sealing); best of N, same run:

    python scripts/stream_bench.py [--records 2000000] [--block 1024] [--lanes 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

from ledgertool.bench.measure import cpu_model
from ledgertool.capture.run import capture_file
from ledgertool.digest.record import record_dtype
from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys
from ledgertool.source.stream import MAGIC, StreamBinding, StreamParser, mac, stream_key

DEVICE = "ab" * 16


def synthetic(n: int) -> np.ndarray:
    recs = np.zeros(n, dtype=record_dtype(16))
    recs["seq"] = np.arange(n, dtype=np.uint64)
    recs["ts_ns"] = 1_767_225_600_000_000_000 + np.arange(n, dtype=np.int64) * 1680
    recs["wire_len"] = recs["cap_len"] = 64
    recs["linktype"] = 1
    rng = np.random.default_rng(1)
    recs["digest"] = rng.integers(0, 256, (n, 16), dtype=np.uint8).view("V16")[:, 0]
    return recs


def stream(recs: np.ndarray, key: bytes, ledger_id: str, lanes: int, block: int) -> bytes:
    """The device's stream: lane = block number mod lanes, lane seqs from 0."""
    head = struct.pack("<8sHHHBB", MAGIC, 1, 48, lanes, 5, 0)
    head += bytes.fromhex(ledger_id) + bytes.fromhex(DEVICE) + struct.pack("<Q", 1) + b"link0"
    prev = mac(key, b"H", head)
    out, lane_next = [head, prev], [0] * lanes
    for i, lo in enumerate(range(0, len(recs), block)):
        lane = i % lanes
        part = recs[lo : lo + block].copy()
        part["seq"] = np.arange(lane_next[lane], lane_next[lane] + len(part), dtype=np.uint64)
        lane_next[lane] += len(part)
        bh = struct.pack("<BBHIQ", 1, 0, lane, len(part), i)
        prev = mac(key, b"B", prev, bh, part.tobytes())
        out += [bh, part.tobytes(), prev]
    bh = struct.pack("<BBHIQ", 3, 0, 0, lanes, len(out) // 3)
    payload = struct.pack(f"<{lanes}Q", *lane_next)
    out += [bh, payload, mac(key, b"B", prev, bh, payload)]
    return b"".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--lanes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    recs = synthetic(a.records)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        generate_keys(t / "keys")
        dk, sk = DigestKey.load(t / "keys/digest.key"), SigningKey.load(t / "keys/signing.key")
        (t / "plain.records").write_bytes(recs.tobytes())
        (t / "empty.records").write_bytes(b"")
        best: dict[str, float] = {}
        for r in range(a.rounds):
            for kind in ("plain", "stream", "check"):
                lg = t / f"L{r}{kind}"
                capture_file(f"records:{t / 'empty.records'}", lg, digest_key=dk, signing_key=sk)
                ledger_id = json.loads((lg / "ledger.json").read_text())["ledger_id"]
                data = stream(
                    recs, stream_key(dk.master, ledger_id, DEVICE), ledger_id, a.lanes, a.block
                )
                (t / "s.lts").write_bytes(data)
                c0 = time.process_time()
                if kind == "check":
                    p = StreamParser("s", StreamBinding(ledger_id, dk.master, "link0", 48))
                    p.feed(data)
                    seq = 0
                    while (got := p.take(seq, None)) is not None:
                        seq += len(got)
                    p.finish()
                else:
                    src = t / ("plain.records" if kind == "plain" else "s.lts")
                    capture_file(
                        f"records:{src}",
                        lg,
                        digest_key=dk,
                        signing_key=sk,
                        segment_records=1_000_000,
                    )
                ns = (time.process_time() - c0) / a.records * 1e9
                best[kind] = min(best.get(kind, ns), ns)
        overhead = (len(data) - recs.nbytes) / a.records
    print(
        f"CPU: {cpu_model()}; {a.records:,} records, blocks of {a.block}, {a.lanes} lanes, "
        f"best of {a.rounds} (CPU time per record)"
    )
    print(f"  capture records: plain records      {best['plain']:6.1f} ns")
    print(
        f"  capture records: stream             {best['stream']:6.1f} ns "
        f"({best['stream'] / best['plain']:.2f}x)"
    )
    print(f"  stream check alone (StreamParser)   {best['check']:6.1f} ns")
    print(f"  stream bytes beyond the records     {overhead:.4f} B/record")


if __name__ == "__main__":
    main()
