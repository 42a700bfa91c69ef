"""The pure verifier core (ledgertool.verify.checks per segment, ledgertool.verify.chain per
link): it works on bytes read beforehand, its per-segment results survive pickling (the cluster
runs them as separate tasks) and the reduction gives verify's own findings, in verify's order;
the finding kinds are the schema's."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, SAMPLES, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.digest.record import RECORD_FIXED, record_dtype
from ledgertool.keyfiles import (
    BAD_SIGNATURE,
    SIGNATURE_MISSING,
    SignatureFinding,
    SigningKey,
)
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.layout import LEAVES, PARQUET, RECORDS
from ledgertool.ledger.parquet import records_to_table, table_to_records
from ledgertool.ledger.reader import LedgerReader
from ledgertool.ledger.segment import BLOCK_PREFIX, parse_open_segment
from ledgertool.seal.rotation import key_schedule
from ledgertool.verify.chain import LinkChain, SegmentCheck
from ledgertool.verify.checks import (
    RecordsRead,
    SegmentPlace,
    check_records,
    check_seal,
    merkle_finding,
)
from ledgertool.verify.ledger import verify_ledger
from ledgertool.verify.problems import Group, Kind, Problem

SEG = 100  # records per segment: sample.pcap gives segments 0..2


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def tampered(request, tmp_path, keydir) -> Path:
    """A ledger whose segment 1 has one record digest changed (record 7: v1, in its Parquet file;
    v2, in its raw record file) and segment 2 a missing ML-DSA signature."""
    dk, sk, _ = load_keys(keydir)
    out = tmp_path / "ledger"
    capture_file(
        SAMPLES / "sample.pcap",
        out,
        digest_key=dk,
        signing_key=sk,
        segment_records=SEG,
        ledger_format=request.param,
    )
    if request.param == 1:
        pq_file = out / "link=link0" / "seg-00000001.parquet"
        arr = np.frombuffer(
            table_to_records(pq.read_table(pq_file), 16), dtype=record_dtype(16)
        ).copy()
        arr["digest"][7] = b"\x00" * 16
        pq.write_table(records_to_table(arr.tobytes(), 16, 1), pq_file)
    else:
        rec_file = out / "link=link0" / "seg-00000001.rec"
        raw = bytearray(rec_file.read_bytes())
        block = parse_open_segment(bytes(raw), rec_file).blocks[
            0
        ]  # the same framing as an open segment
        assert block.count > 7
        at = block.offset + BLOCK_PREFIX + 7 * (RECORD_FIXED + 16) + RECORD_FIXED
        raw[at : at + 16] = bytes(16)
        rec_file.write_bytes(bytes(raw))
    seal = out / "link=link0" / "seg-00000002.seal.json"
    doc = json.loads(seal.read_text())
    del doc["signatures"]["ml-dsa-65"]
    seal.write_text(json.dumps(doc))
    return out


def _read_all(directory: Path, kind: str) -> dict[int, tuple[bytes, bytes, bytes]]:
    """Every sealed segment's seal, records file (`kind`: Parquet or raw record file) and
    leaf-sidecar bytes, read through LedgerReader."""
    reader = LedgerReader(directory)
    return {
        i: (
            reader.read_seal_bytes("link0", i),
            reader.read_segment_file("link0", i, kind).to_pybytes(),
            reader.read_segment_file("link0", i, LEAVES).to_pybytes(),
        )
        for i in reader.listing("link0").sealed
    }


def test_pure_core_on_bytes_read_before_gives_verifys_findings(tampered, keydir, tmp_path):
    trust = load_keys(keydir)[2]
    want = verify_ledger(tampered, trust)
    ledger = load_ledger(tampered)
    kind = PARQUET if ledger.version == 1 else RECORDS
    # only v1 seals pin the file
    pinned = {("parquet_hash_mismatch", 1)} if ledger.version == 1 else set()
    assert {(p.kind, p.segment) for p in want.problems} == {
        ("merkle_mismatch", 1),
        ("signature_missing", 2),
    } | pinned
    files = _read_all(tampered, kind)
    link_dir = tampered / "link=link0"
    gone = tmp_path / "moved-away"
    tampered.rename(gone)  # the pure calls below have no files to read, even if they tried
    sched = key_schedule(
        ledger.ledger_id, trust, [], digest_key_id=ledger.digest_key_id, algorithm=ledger.algorithm
    )
    checks = []
    for index, (seal_raw, data, leaves) in sorted(files.items()):
        place = SegmentPlace(ledger, "link0", index, link_dir, sched)
        seal = check_seal(seal_raw, place)
        recs = check_records(seal, RecordsRead(pa.py_buffer(data), kind=kind), place)
        if not recs.merkle_ok:
            recs = merkle_finding(seal, recs, leaves, place, kind)
        checks.append(SegmentCheck(seal, recs))
    # per-segment results cross a process boundary as they are (the cluster's per-segment tasks)
    shipped = [pickle.loads(pickle.dumps(c)) for c in checks]
    assert [
        bytes(c.records.records) == bytes(s.records.records) for c, s in zip(checks, shipped)
    ] == [True] * 3
    if ledger.version == 1:  # a raw record file has records and no table (RecordsCheck)
        assert [c.records.table.equals(s.records.table) for c, s in zip(checks, shipped)] == [
            True
        ] * 3
    runs = []
    for results in (checks, shipped):
        chain = LinkChain(ledger, "link0", link_dir, tampered / "ledger.json")
        runs.append([p for c in results for p in chain.add(c)] + chain.finish())
    assert runs[0] == runs[1] == want.problems
    assert chain.tree.seal_hashes and len(chain.tree.seal_hashes) == 3 and chain.tree.complete
    assert chain.records == want.records == 294


def test_kinds_are_the_schema_enum_and_compare_as_their_json_strings():
    schema = json.loads((REPO / "schemas" / "verify-report.schema.json").read_text())["properties"]
    problems = schema["problems"]["items"]["properties"]["kind"]["enum"]
    warnings = schema["warnings"]["items"]["properties"]["kind"]["enum"]
    assert sorted(k.value for k in Kind) == sorted(problems + warnings)
    assert [k for k in problems if Kind(k).is_warning] == [] and all(
        Kind(k).is_warning for k in warnings
    )
    assert Kind.BAD_SIGNATURE == "bad_signature" and "bad_signature" in {Kind.BAD_SIGNATURE}
    assert json.dumps(Problem("merkle_mismatch", 1, "d", "link0", 12).to_json()) == (
        '{"kind": "merkle_mismatch", "segment": 1, "record": 12, "link": "link0", "detail": "d"}'
    )
    assert Kind.SIGNATURE_MISSING.group is Group.SIGNATURES_AND_KEYS
    with pytest.raises(ValueError):
        Problem("signature_mising", 1, "a typo is not a kind")


def test_signature_findings_name_their_algorithm():
    key = SigningKey.generate()
    sigs = key.sign(b"m")
    bundle = key.trust_bundle()
    assert bundle.verify_detailed(b"m", {"ed25519": sigs["ed25519"]}) == [
        SignatureFinding(SIGNATURE_MISSING, "ml-dsa-65", "ml-dsa-65 signature missing")
    ]
    found = bundle.verify_detailed(b"other", sigs)
    assert [(f.kind, f.algorithm) for f in found] == [
        (BAD_SIGNATURE, "ed25519"),
        (BAD_SIGNATURE, "ml-dsa-65"),
    ]


def test_check_seal_canonicalises_a_seal_once(keydir, tmp_path, monkeypatch):
    """verify's per-segment fixed cost: the seal hash and the signed message are the same RFC 8785
    bytes of the seal's body, which check_seal made twice (pure-Python rfc8785, ~0.1 ms each under
    load). Now once; the hash, the signature verdict and a changed field's finding are as before."""
    from v2_reference import synthetic_records, write_v2_ledger

    from ledgertool import canonical
    from ledgertool.seal.document import seal_hash

    _, sk, trust = load_keys(keydir)
    d = tmp_path / "L"
    write_v2_ledger(d, sk, [synthetic_records(40)], leaf_records=16)
    ledger = load_ledger(d)
    sched = key_schedule(
        ledger.ledger_id, trust, [], digest_key_id=ledger.digest_key_id, algorithm=ledger.algorithm
    )
    place = SegmentPlace(ledger, "link0", 0, d / "link=link0", sched)
    raw = (d / "link=link0" / "seg-00000000.seal.json").read_bytes()
    calls = []
    real = canonical.canonical_json
    monkeypatch.setattr(canonical, "canonical_json", lambda obj: calls.append(1) or real(obj))
    seal = check_seal(raw, place)
    assert len(calls) == 1
    assert (
        seal.problems == ()
        and seal.seal_hash == seal_hash(json.loads(raw))
        and len(seal.seal_hash) == 64
    )
    doc = json.loads(raw)
    doc["frames"] += 1  # signed: both signatures fail, and the hash moves
    changed = check_seal(json.dumps(doc).encode(), place)
    assert sorted((p.kind, p.detail.split(": ")[-1].split()[0]) for p in changed.problems) == [
        ("bad_signature", "ed25519"),
        ("bad_signature", "ml-dsa-65"),
    ]
    assert changed.seal_hash == seal_hash(doc) != seal.seal_hash
