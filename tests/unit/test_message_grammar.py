"""Counts in messages read "1 segment", "2 segments" (ledgertool.plural), and verify's
merkle_mismatch names the records file it hashed, as the other findings about a file do.

Before: "OK: 1 segments, ...", "1 problem(s): ...", "1 sealed segments", and a merkle_mismatch
detail that started "segment 1: Merkle root ..." without the file.
"""

from __future__ import annotations

import json

import pytest
from conftest import CORPUS, SAMPLES, cli, load_keys
from hypothesis import given
from hypothesis import strategies as st
from ledger_files import rewrite_sealed_records, sealed_records

from ledgertool.ledger import layout
from ledgertool.plural import plural


def test_plural_known_answers():
    assert plural(0, "segment") == "0 segments"
    assert plural(1, "segment") == "1 segment"
    assert plural(2, "segment") == "2 segments"
    assert plural(-1, "record", fmt="+d") == "-1 record"
    assert plural(1, "record", fmt="+d") == "+1 record"
    assert plural(100, "record", fmt="+d") == "+100 records"
    assert plural(1234567, "frame", fmt=",") == "1,234,567 frames"
    assert plural(1, "path hash", "path hashes") == "1 path hash"
    assert plural(3, "path hash", "path hashes") == "3 path hashes"


@given(st.integers(-(10**12), 10**12))
def test_plural_is_the_number_then_the_right_form(n: int):
    text = plural(n, "frame", fmt=",")
    assert text == f"{n:,} frame" + ("" if abs(n) == 1 else "s")


@pytest.fixture()
def one_segment_ledger(tmp_path, built_ledger):
    """samples/sample.pcapng (294 frames) in one sealed v2 segment."""
    built = built_ledger(SAMPLES / "sample.pcapng", segment_records=1000)
    assert [s.index for s in built.result.segments] == [0]
    return built.copy_to(tmp_path / "one")


def test_verify_one_segment_says_segment(one_segment_ledger, keydir):
    r = cli("verify", one_segment_ledger, "--trust", keydir / "verifier.pub")
    assert (r.returncode, r.stdout) == (
        0,
        "OK: 1 segment, 294 records, 294 frames, 0 drops declared, links link0\n",
    )
    doc = json.loads(
        cli("verify", one_segment_ledger, "--trust", keydir / "verifier.pub", "--json").stdout
    )
    assert doc["segments"] == 1 and doc["records"] == 294  # the JSON keeps its field names


def test_checkpoint_of_one_segment(one_segment_ledger, tmp_path):
    r = cli("checkpoint", one_segment_ledger, "--out", tmp_path / "cp")
    assert r.returncode == 0, r.stderr
    assert ": 1 segment, 294 records, root " in r.stdout


def test_demo_lines_of_one_segment(tmp_path):
    from ledgertool.demo import run_demo

    lines = run_demo(tmp_path / "demo", segment_records=1000)["lines"]
    assert lines[1].startswith("capture   sample.pcapng: 294 frames -> 1 sealed segment in ")
    assert lines[2] == "verify    OK: 1 segment, 294 records, 0 problems"
    assert lines[4].endswith(" wire bytes, 1 segment") and "-> 294 frames, " in lines[4]


def _flip_a_digest_byte(ledger, keydir, index: int) -> None:
    """Change one digest byte of record 0 of segment `index` in the stored records (seal
    untouched)."""
    recs = bytearray(sealed_records(ledger, index))
    recs[-1] ^= 0x01  # the last byte of the last record: its digest
    rewrite_sealed_records(ledger, index, bytes(recs), load_keys(keydir)[1])


@pytest.mark.parametrize("compacted", [False, True], ids=["raw", "compacted"])
def test_merkle_mismatch_names_the_records_file(sample_ledger, keydir, compacted):
    if compacted:
        assert cli("compact", sample_ledger).returncode == 0
    _flip_a_digest_byte(sample_ledger, keydir, 1)
    kind = layout.PARQUET if compacted else layout.RECORDS
    name = layout.segment_path(sample_ledger, "link0", 1, kind)
    assert (
        name.exists()
        and str(name)
        == f"{sample_ledger}/link=link0/seg-00000001.{'parquet' if compacted else 'rec'}"
    )
    r = cli("verify", sample_ledger, "--trust", keydir / "verifier.pub")
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == [
        f"FAIL merkle_mismatch link link0 segment 1 record 0: {name}: Merkle root differs from the "
        "seal; changed leaf blocks: records 0..99 (leaf 0, 256 records per leaf)",
        "1 problem: 3 segments, 294 records, 294 frames, 0 drops declared, links link0",
    ]
    doc = json.loads(
        cli("verify", sample_ledger, "--trust", keydir / "verifier.pub", "--json").stdout
    )
    assert [(p["kind"], p["segment"], p["detail"].split(": ")[0]) for p in doc["problems"]] == [
        ("merkle_mismatch", 1, str(name))
    ]


def test_merkle_mismatch_without_the_sidecar_names_the_file(sample_ledger, keydir):
    _flip_a_digest_byte(sample_ledger, keydir, 2)
    # no changed blocks to name
    layout.segment_path(sample_ledger, "link0", 2, layout.LEAVES).unlink()
    doc = json.loads(
        cli("verify", sample_ledger, "--trust", keydir / "verifier.pub", "--json").stdout
    )
    rec = layout.segment_path(sample_ledger, "link0", 2, layout.RECORDS)
    assert [
        (p["kind"], p["detail"]) for p in doc["problems"] if p["kind"] == "merkle_mismatch"
    ] == [
        (
            "merkle_mismatch",
            f"{rec}: Merkle root over its 94 records differs from the seal (a record was changed)",
        )
    ]


def test_one_frame_capture_reads_frame(tmp_path, keydir):
    """Real one-record corpus captures: 'captured 1 frame', 'OK: 1 segment, 1 record, 1 frame', and
    the truncation note of a capture whose second record is cut: '1 whole frame read'."""
    corpus = CORPUS / "files"
    one, cut = corpus / "dpkt__truncated_dns.pcap", corpus / "dpkt__truncated_dns_2.pcap"
    if not (one.exists() and cut.exists()):
        pytest.skip(f"corpus files not at {corpus}")
    keys = ("--digest-key", keydir / "digest.key", "--signing-key", keydir / "signing.key")
    c = cli("capture", one, "--ledger", tmp_path / "L", *keys, "-q")
    assert c.returncode == 0 and c.stdout.startswith(
        f"captured 1 frame (200 bytes) from {one} into "
    ), c.stdout
    v = cli("verify", tmp_path / "L", "--trust", keydir / "verifier.pub")
    assert v.stdout == "OK: 1 segment, 1 record, 1 frame, 0 drops declared, links link0\n"
    r = cli(
        "recompute",
        cut,
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
        "--out",
        tmp_path / "d.parquet",
        "-q",
    )
    assert (
        r.returncode == 0
        and r.stdout
        == f"wrote 1 digest (siphash-1-3-128, strip frame) to {tmp_path / 'd.parquet'}\n"
    )
    assert r.stderr == (
        f"warning: {cut}: truncated last record at byte 240 (7 bytes present, not recorded); "
        "1 whole frame read\n"
    )
