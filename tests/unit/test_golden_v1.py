"""A v1 ledger written once by the CLI of 0.1 (format v2 must not change how it reads):
tests/golden/v1/ledger was made with `keys generate`, then `capture samples/sample.pcap --ledger L
--segment-records 200` (siphash-1-3-128, strip frame, leaf_records 64); its verifier.pub and
digest.key are beside it (the signing key was thrown away). Every value below is pinned: a reader
change that reads it differently fails here."""

from __future__ import annotations

import hashlib
import shutil
import struct

import pyarrow.parquet as pq
from conftest import SAMPLES

from ledgertool.keyfiles import DigestKey, TrustBundle
from ledgertool.reconcile.recompute import reconcile
from ledgertool.verify.ledger import verify_ledger

GOLDEN = SAMPLES.parent / "tests" / "golden" / "v1"
LEDGER = GOLDEN / "ledger"
ROOTS = [
    "ed9bb913dd34a627776d683dbfb6a1a0e026e9d517f561dcdb88f669de2aed90",
    "0849e04509ebe6ca8565d07e74ebec0209f97bd7bd77732bff4b0f4350566760",
]
PARQUET_SHA256 = [
    "9efd850610eafe56bcfdeb2a7a5bb226cfe361df3d5eb0cbced19fcbbe63484d",
    "4c71c5192e5b0827c84fb1bd954171aa975c25c8e4be984d8c5c9552fe88415d",
]


def _mth(h: list[bytes]) -> bytes:
    if len(h) == 1:
        return h[0]
    k = 1 << ((len(h) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _mth(h[:k]) + _mth(h[k:])).digest()


def test_golden_v1_files_are_the_ones_pinned():
    for i, want in enumerate(PARQUET_SHA256):
        data = (LEDGER / "link=link0" / f"seg-{i:08d}.parquet").read_bytes()
        assert hashlib.sha256(data).hexdigest() == want
        # the roots recomputed here from the Parquet columns (hashlib only) are the pinned ones
        rows = pq.read_table(LEDGER / "link=link0" / f"seg-{i:08d}.parquet").to_pylist()
        recs = [
            struct.pack(
                "<QqIIHHI",
                r["seq"],
                r["ts_ns"],
                r["wire_len"],
                r["cap_len"],
                r["flags"],
                r["linktype"],
                r["aux"],
            )
            + r["digest"]
            for r in rows
        ]
        leaves = [
            hashlib.sha256(b"\x00" + b"".join(recs[j : j + 64])).digest()
            for j in range(0, len(recs), 64)
        ]
        assert _mth(leaves).hex() == ROOTS[i]


def test_golden_v1_verifies_with_fixed_results():
    res = verify_ledger(LEDGER, TrustBundle.load(GOLDEN / "verifier.pub"))
    assert res.ok, res.problems
    assert (res.segments, res.records, res.frames, res.drops_declared, res.links) == (
        2,
        294,
        294,
        0,
        ["link0"],
    )
    assert [w.kind for w in res.warnings] == []
    seen = []
    res = verify_ledger(
        LEDGER,
        TrustBundle.load(GOLDEN / "verifier.pub"),
        on_segment=lambda s: seen.append(
            (s.index, s.seal.merkle_root, len(s.records) // 48, s.table.num_rows)
        ),
    )
    assert seen == [(0, ROOTS[0], 200, 200), (1, ROOTS[1], 94, 94)]


def test_golden_v1_recompute_matches_the_sample_capture(tmp_path):
    # git keeps no file modes beyond the executable bit, and a secret key file must be 0600
    key = tmp_path / "digest.key"
    key.write_bytes((GOLDEN / "digest.key").read_bytes())
    key.chmod(0o600)
    res = reconcile(
        SAMPLES / "sample.pcap",
        LEDGER,
        DigestKey.load(key),
        trust=TrustBundle.load(GOLDEN / "verifier.pub"),
    )
    assert res.ok and res.verified
    assert (res.frames, res.ledger_records, res.matched, res.ledger_only, res.capture_only) == (
        294,
        294,
        294,
        0,
        0,
    )


def test_golden_v1_a_changed_byte_is_found(tmp_path):
    copy = tmp_path / "L"
    shutil.copytree(LEDGER, copy)
    p = copy / "link=link0" / "seg-00000001.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 1
    p.write_bytes(bytes(data))
    res = verify_ledger(copy, TrustBundle.load(GOLDEN / "verifier.pub"))
    assert "parquet_hash_mismatch" in {p.kind for p in res.problems}
