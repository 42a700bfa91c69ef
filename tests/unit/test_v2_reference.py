"""The tests-only v2 reference writer (tests/v2_reference.py) writes what v2-spec.md and
docs/ledger-format.md say, byte for byte: checked here against the spec's own arithmetic and
against ledgertool's open-segment header decoder."""

from __future__ import annotations

import hashlib
import json
import struct

from conftest import SAMPLES, load_keys
from v2_reference import leaf_hashes, mth, rec_bytes, synthetic_records, write_v2_ledger

from ledgertool.ledger.header import parse_ledger_header
from ledgertool.ledger.segment import SegmentHeader


def test_v2_reference_rec_file_layout(tmp_path, keydir):
    _, sk, _ = load_keys(keydir)
    recs = synthetic_records(300, 0, 16, seed=1)
    w = write_v2_ledger(
        tmp_path / "L", sk, [recs], leaf_records=128, block_records=[[128, 100, 28, 44]]
    )
    raw = w.path(0, "rec").read_bytes()
    # header + 4 blocks of (4 + count * 48 + 32) bytes, nothing after
    assert len(raw) == 256 + sum(4 + c * 48 + 32 for c in (128, 100, 28, 44)) == 14_800
    h = SegmentHeader.decode(raw, "rec")
    assert (h.version, h.index, h.first_seq, h.leaf_records, h.record_size, h.ledger_id) == (
        2,
        0,
        0,
        128,
        48,
        w.ledger.ledger_id,
    )
    assert struct.unpack_from("<I", raw, 256)[0] == 128
    assert raw[260 : 260 + 128 * 48] == recs[: 128 * 48]
    ledger = parse_ledger_header((tmp_path / "L" / "ledger.json").read_bytes(), "ledger.json")
    assert ledger.leaf_records == 128
    seal = json.loads(w.path(0, "seal.json").read_text())
    assert seal["format"] == "ledgertool-seal-v2" and "parquet_file" not in seal
    assert seal["merkle_root"] == mth(leaf_hashes(recs, 48, 128)).hex()
    assert (
        seal["merkle_root"]
        == mth(
            [
                hashlib.sha256(b"\0" + recs[: 128 * 48]).digest(),
                hashlib.sha256(b"\0" + recs[128 * 48 : 256 * 48]).digest(),
                hashlib.sha256(b"\0" + recs[256 * 48 :]).digest(),
            ]
        ).hex()
    )
    assert (seal["records"], seal["first_seq"], seal["last_seq"]) == (300, "0", "299")


def test_v2_reference_default_blocks_are_leaf_aligned(tmp_path, keydir):
    _, sk, _ = load_keys(keydir)
    recs = synthetic_records(600, 0, 16)
    w = write_v2_ledger(tmp_path / "L", sk, [recs])
    raw = w.path(0, "rec").read_bytes()
    assert len(raw) == 256 + (4 + 256 * 48 + 32) * 2 + (4 + 88 * 48 + 32)
    assert rec_bytes(w.ledger, "link0", 0, 0, recs, sk) == raw  # deterministic


def test_seal_schema_is_one_of_v1_and_v2_strict(tmp_path, keydir):
    import jsonschema

    schema = json.loads((SAMPLES.parent / "schemas" / "seal.schema.json").read_text())
    v = jsonschema.Draft202012Validator(schema)
    _, sk, _ = load_keys(keydir)
    w = write_v2_ledger(tmp_path / "L", sk, [synthetic_records(10, 0, 16)])
    doc = w.seals[0]
    assert v.is_valid(doc)
    assert not v.is_valid({**doc, "parquet_sha256": "00" * 32})  # a v1 member in a v2 seal
    # required in v2
    assert not v.is_valid({k: x for k, x in doc.items() if k != "ledger_header_sha256"})
    assert not v.is_valid({**doc, "format": "ledgertool-seal-v1"})  # v1 needs its Parquet members
    v1 = {
        **doc,
        "format": "ledgertool-seal-v1",
        "parquet_file": "seg-00000000.parquet",
        "parquet_sha256": "00" * 32,
        "parquet_bytes": 1,
    }
    assert v.is_valid(v1) and not v.is_valid({**v1, "format": "ledgertool-seal-v2"})
