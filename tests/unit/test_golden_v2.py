"""A v2 ledger written once by the CLI (the first ledger format v2 capture): made with
`keys generate`, then `capture samples/sample.pcap --ledger L --ledger-format v2 --segment-records
200 --leaf-records 64` (siphash-1-3-128, strip frame); its verifier.pub and digest.key are beside it
(the signing key was thrown away, so the block MACs cannot be checked here: nothing a verifier
checks depends on them). Every value below is pinned, and the record framing is parsed here with
struct and hashlib only, from docs/ledger-format.md: a writer or reader change that reads these
bytes differently fails here."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct

from conftest import SAMPLES

from ledgertool.keyfiles import DigestKey, TrustBundle
from ledgertool.ledger.compact import compact_ledger
from ledgertool.reconcile.recompute import reconcile
from ledgertool.verify.ledger import verify_ledger

GOLDEN = SAMPLES.parent / "tests" / "golden" / "v2"
LEDGER = GOLDEN / "ledger"
RECORD_SIZE, LEAF = 48, 64
ROOTS = [
    "4e5471fccfa73e7c8fc673168a3fdaffa9fe4734ebe74e532f911cb96b9640c5",
    "64f35170cd3b6107fb6f3dc71107a8c6b7e00104bef7d7ae95c6fd7d58789649",
]
REC_SHA256 = [
    "2d50cbfd641107ad2542cf26ac9efe7b38ab8fa0cabf847756e2330ab4dba00f",
    "c3187f8efceea9d5514b7ce15adfd15fe19626233482bc2bfa29115f1f8ea8f7",
]
BLOCKS = [[192, 8], [64, 30]]  # leaf-aligned: whole leaves, then the rest of the append


def _mth(h: list[bytes]) -> bytes:
    if len(h) == 1:
        return h[0]
    k = 1 << ((len(h) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _mth(h[:k]) + _mth(h[k:])).digest()


def _records(data: bytes) -> tuple[bytes, list[int]]:
    """The records of a raw record file, framing stripped (256-byte header; blocks of u32 count,
    the records, a 32-byte MAC; nothing after the last block)."""
    assert data[:8] == b"LTSEGv2\n" and struct.unpack_from("<HH", data, 8) == (2, 256)
    at, recs, counts = 256, [], []
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        recs.append(data[at + 4 : at + 4 + n * RECORD_SIZE])
        counts.append(n)
        at += 4 + n * RECORD_SIZE + 32
    assert at == len(data)
    return b"".join(recs), counts


def test_golden_v2_files_are_the_ones_pinned():
    assert json.loads((LEDGER / "ledger.json").read_text())["format"] == "ledgertool-ledger-v2"
    for i in range(2):
        data = (LEDGER / "link=link0" / f"seg-{i:08d}.rec").read_bytes()
        assert hashlib.sha256(data).hexdigest() == REC_SHA256[i]
        recs, counts = _records(data)
        assert counts == BLOCKS[i]
        leaves = [
            hashlib.sha256(b"\x00" + recs[j : j + LEAF * RECORD_SIZE]).digest()
            for j in range(0, len(recs), LEAF * RECORD_SIZE)
        ]
        assert _mth(leaves).hex() == ROOTS[i]
        seal = json.loads((LEDGER / "link=link0" / f"seg-{i:08d}.seal.json").read_text())
        assert seal["format"] == "ledgertool-seal-v2" and seal["merkle_root"] == ROOTS[i]
        assert "parquet_sha256" not in seal and seal["records"] == sum(counts)
        # the first record's seq is the seal's first_seq (records numbered 0.. across segments)
        assert struct.unpack_from("<Q", recs, 0)[0] == int(seal["first_seq"]) == 200 * i


def test_golden_v2_verifies_with_fixed_results():
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


def test_golden_v2_recompute_matches_the_sample_capture(tmp_path):
    key = tmp_path / "digest.key"  # git keeps no 0600 mode; a secret key file must have it
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


def test_golden_v2_compacted_copy_verifies_with_the_same_roots(tmp_path):
    copy = tmp_path / "L"
    shutil.copytree(LEDGER, copy)
    compact_ledger(copy)
    assert sorted(p.name for p in (copy / "link=link0").glob("seg-*.parquet")) == [
        "seg-00000000.parquet",
        "seg-00000001.parquet",
    ]
    assert not list((copy / "link=link0").glob("*.rec"))
    seen = []
    res = verify_ledger(
        copy,
        TrustBundle.load(GOLDEN / "verifier.pub"),
        on_segment=lambda s: seen.append((s.index, s.seal.merkle_root, len(s.records) // 48)),
    )
    assert res.ok, res.problems
    assert seen == [(0, ROOTS[0], 200), (1, ROOTS[1], 94)]


def test_golden_v2_a_changed_record_byte_is_found(tmp_path):
    copy = tmp_path / "L"
    shutil.copytree(LEDGER, copy)
    p = copy / "link=link0" / "seg-00000001.rec"
    data = bytearray(p.read_bytes())
    data[256 + 4 + 40] ^= 1  # a digest byte of record 0
    p.write_bytes(bytes(data))
    res = verify_ledger(copy, TrustBundle.load(GOLDEN / "verifier.pub"))
    assert not res.ok and "merkle_mismatch" in {p.kind for p in res.problems}
