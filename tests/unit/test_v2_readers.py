"""prove, query and recompute on ledger format v2: they read each segment through verify's
one path (raw record file, or Parquet after compaction), so they see exactly the records verify
checked, and refuse a segment that does not verify. Ledgers from tests/v2_reference.py over the
records of samples/sample.pcap."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import SAMPLES, load_keys
from v2_reference import capture_records, parquet_bytes, write_v2_ledger

from ledgertool.errors import DiscrepancyError
from ledgertool.reconcile.query import run_query
from ledgertool.reconcile.recompute import reconcile
from ledgertool.verify.proof import build_proof, check_proof, parse_proof

SEG = 100


@pytest.fixture(scope="module")
def v2(tmp_path_factory, keydir):
    dk, sk, _ = load_keys(keydir)
    recs = capture_records(SAMPLES / "sample.pcap", dk)
    segs = [recs[i : i + SEG * 48] for i in range(0, len(recs), SEG * 48)]
    d = tmp_path_factory.mktemp("v2") / "L"
    w = write_v2_ledger(
        d,
        sk,
        segs,
        digest_key_id=dk.key_id("siphash-1-3-128", 16),
        leaf_records=32,
        block_records=[[1, 99], None, [50, 44]],
    )
    w.path(1, "parquet").write_bytes(parquet_bytes(segs[1], 16, 1))  # segment 1 compacted
    w.path(1, "rec").unlink()
    return d, segs


def test_query_v2_sees_the_verified_records(v2, keydir):
    d, segs = v2
    trust = load_keys(keydir)[2]
    res = run_query(
        d,
        "SELECT segment, count(*), min(seq), max(seq) FROM records GROUP BY segment ORDER BY "
        "segment",
        trust,
    )
    assert res.rows == [(0, 100, 0, 99), (1, 100, 100, 199), (2, 94, 200, 293)]
    res = run_query(d, "SELECT segment, parquet_sha256, records FROM seals ORDER BY segment", trust)
    assert res.rows == [(0, None, 100), (1, None, 100), (2, None, 94)]
    digest = segs[2][17 * 48 + 32 : 18 * 48].hex()
    res = run_query(d, f"SELECT seq FROM records WHERE digest = from_hex('{digest}')", trust)
    assert res.rows == [(217,)]


def test_recompute_v2_matches_the_capture_on_both_forms(v2, keydir):
    d, _ = v2
    dk, _, trust = load_keys(keydir)
    res = reconcile(SAMPLES / "sample.pcap", d, dk, trust=trust)
    assert res.ok and res.verified
    assert (res.frames, res.ledger_records, res.matched, res.ledger_only, res.capture_only) == (
        294,
        294,
        294,
        0,
        0,
    )


def test_prove_v2_raw_and_parquet_segments(v2, keydir):
    d, segs = v2
    trust = load_keys(keydir)[2]
    for seq in (5, 150, 250):  # a raw file, the compacted segment, unaligned blocks
        proof = parse_proof(json.dumps(build_proof(d, seq=seq).to_json()).encode())
        assert proof.seal.format == "ledgertool-seal-v2" and proof.record.seq == seq
        got = check_proof(proof, trust)
        assert got.ok, got.reason


def test_readers_refuse_a_v2_segment_that_does_not_verify(v2, keydir, tmp_path):
    d, _ = v2
    dk, _, trust = load_keys(keydir)
    bad = tmp_path / "L"
    shutil.copytree(d, bad)
    rec = bad / "link=link0" / "seg-00000002.rec"
    raw = bytearray(rec.read_bytes())
    raw[256 + 4 + 10 * 48 + 40] ^= 1  # a digest byte of record 10 (block 0)
    rec.write_bytes(bytes(raw))
    with pytest.raises(DiscrepancyError, match="link link0 segment 2: merkle_mismatch"):
        build_proof(bad, seq=250).to_json()
    with pytest.raises(DiscrepancyError, match="merkle_mismatch"):
        run_query(bad, "SELECT count(*) FROM records", trust)
    with pytest.raises(DiscrepancyError, match="merkle_mismatch"):
        reconcile(SAMPLES / "sample.pcap", bad, dk, trust=trust)
    assert build_proof(bad, seq=5).to_json()["segment"] == 0  # the other segments still prove


def test_plain_verify_hashes_raw_files_in_place(v2, keydir, tmp_path):
    """verify with no reader of the records takes a raw record file's leaves in place (nothing
    copied: records None) with the same counts and verdict as the copying path; a rewritten record
    falls back to that path over the same bytes and is named as before."""
    from ledgertool.ledger.header import load_ledger
    from ledgertool.ledger.reader import LedgerReader
    from ledgertool.verify.checks import SegmentPlace
    from ledgertool.verify.ledger import check_segment, verify_ledger

    d, segs = v2
    work = tmp_path / "L"
    shutil.copytree(d, work)

    def both(index: int):
        reader = LedgerReader(work)
        ledger = load_ledger(work)
        return [
            check_segment(
                reader,
                reader.listing("link0"),
                SegmentPlace(
                    ledger, "link0", index, reader.link_dir("link0"), None, records_wanted=w
                ),
            )
            for w in (False, True)
        ]

    for index in (0, 2):
        lean, full = both(index)
        assert lean.records.records is None and bytes(full.records.records) == segs[index]
        assert (lean.records.n, lean.records.frames, lean.records.merkle_ok) == (
            len(segs[index]) // 48,
            full.records.frames,
            True,
        )
        assert lean.records.problems == full.records.problems == ()
    rec = work / "link=link0" / "seg-00000002.rec"
    raw = bytearray(rec.read_bytes())
    raw[256 + 4 + 40] ^= 1  # record 0's digest
    rec.write_bytes(bytes(raw))
    lean, full = both(2)
    assert lean.records.records is not None and lean.records.problems == full.records.problems
    assert [p.kind.value for p in lean.records.problems] == ["merkle_mismatch"]
    res = verify_ledger(work, None)
    assert [p.kind.value for p in res.problems if not p.kind.is_warning] == ["merkle_mismatch"]


def test_sealed_but_not_yet_renamed_segment_verifies_from_its_open_file(v2, keydir, tmp_path):
    """The writer signs the seal, then renames seg-N.open to seg-N.rec: a verify (or query) that
    lands in between, or a crash there, finds the seal and the open file. Its bytes are the records
    file's and are checked against the signed root: no records_missing, and the readers get exactly
    them; a changed byte in it is the Merkle mismatch it would be in the .rec."""
    d, segs = v2
    dk, _, trust = load_keys(keydir)
    copy = tmp_path / "L"
    shutil.copytree(d, copy)
    link = next(copy.glob("link=*"))
    (link / "seg-00000002.rec").rename(link / "seg-00000002.open")
    res = run_query(
        copy,
        "SELECT segment, count(*), max(seq) FROM records GROUP BY segment ORDER BY segment",
        trust,
    )
    assert res.rows == [(0, 100, 99), (1, 100, 199), (2, 94, 293)]
    got = reconcile(SAMPLES / "sample.pcap", copy, dk, trust=trust)
    assert got.ok and (got.matched, got.ledger_only, got.capture_only) == (294, 0, 0)
    data = bytearray((link / "seg-00000002.open").read_bytes())
    data[256 + 4 + 40] ^= 1  # a digest byte of the segment's first record
    (link / "seg-00000002.open").write_bytes(bytes(data))
    with pytest.raises(DiscrepancyError, match="merkle_mismatch|Merkle"):
        run_query(copy, "SELECT count(*) FROM records", trust)


def test_raw_segment_table_is_built_only_when_read(v2, keydir):
    """recompute takes a segment's records, not its Arrow table: for a raw record file the table
    is built on first use (from exactly the checked records), for a Parquet one it is the decoded
    file."""
    from ledgertool.ledger.parquet import records_to_table
    from ledgertool.verify.ledger import verify_ledger

    d, segs = v2
    got = []
    assert verify_ledger(d, load_keys(keydir)[2], on_segment=got.append).ok
    assert [(s.index, s.decoded is None) for s in got] == [(0, True), (1, False), (2, True)]
    raw = got[2]
    assert "table" not in vars(raw)  # not built while verifying
    assert bytes(raw.records) == segs[2]
    assert raw.table.equals(records_to_table(segs[2], 16, 2)) and "table" in vars(raw)
    assert raw.table.num_rows == 94 and raw.table.column("seq")[0].as_py() == 200
    assert got[1].table is got[1].decoded and got[1].table.num_rows == 100
