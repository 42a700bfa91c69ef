"""ledgertool.ledger.writer.LinkWriter on its own: the one seam where records go from the digest
engine to storage and to the sealer."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from conftest import SAMPLES, load_keys

from ledgertool.algorithms import get_algorithm, get_strip_mode
from ledgertool.capture.run import capture_file
from ledgertool.digest.engine import DigestEngine
from ledgertool.ledger import layout
from ledgertool.ledger.header import create_ledger, load_ledger
from ledgertool.ledger.reader import LedgerReader
from ledgertool.ledger.sealer import load_seal
from ledgertool.ledger.writer import LinkWriter
from ledgertool.seal.checkpoint import parse_note
from ledgertool.source import open_source
from ledgertool.verify.ledger import verified_segment, verify_ledger

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
ALG = "siphash-1-3-128"


def _sealed_table(ledger_dir, index: int):
    """Sealed segment `index` of link0 as verify checks it, in either form."""
    return verified_segment(LedgerReader(ledger_dir), load_ledger(ledger_dir), "link0", index).table


@pytest.mark.parametrize("ledger_format", [1, 2], ids=["v1", "v2"])
def test_link_writer_rotates_chains_and_seals_what_capture_seals(ledger_format, tmp_path, keydir):
    dk, sk, trust = load_keys(keydir)
    alg = get_algorithm(ALG)
    ledger_dir = tmp_path / "W"
    ledger = create_ledger(
        ledger_dir,
        algorithm=alg.name,
        strip="frame",
        digest_key_id=dk.key_id(alg.name, alg.key_size),
        digest_size=alg.digest_size,
        version=ledger_format,
    )
    reader = open_source(SAMPLE)
    engine = DigestEngine(
        reader, alg, get_strip_mode("frame"), dk.subkey(alg.name, alg.key_size), workers=1
    )
    w = LinkWriter.open(ledger_dir, ledger, "link0", sk, source=SAMPLE.name, segment_records=100)
    try:
        while True:
            records, n, _ = engine.fill(w.next_seq, w.room())
            if n == 0:
                break
            w.append(records, n)
            w.rotate_if_due()
        assert w.open_index == 2 and w.open_records == 94  # the last, partial segment is still open
        w.end_segment()
        w.drain()
        w.checkpoint()
    finally:
        w.close()
        reader.close()
    assert [(s.index, s.records) for s in w.sealed] == [(0, 100), (1, 100), (2, 94)]
    assert (w.next_index, w.next_seq, w.sealed_range()) == (3, 294, "segments 0..2")
    assert not list(layout.link_dir(ledger_dir, "link0").glob("*.open"))
    note = layout.checkpoint_path(ledger_dir, "link0").read_bytes()
    assert parse_note(note).checkpoint.size == 3
    v = verify_ledger(ledger_dir, trust, note)
    assert v.ok and v.records == 294, v.problems

    # capture_file goes through the same writer: the same records, segment by segment
    captured = tmp_path / "C"
    capture_file(
        SAMPLE,
        captured,
        digest_key=dk,
        signing_key=sk,
        algorithm=ALG,
        segment_records=100,
        ledger_format=ledger_format,
    )
    assert load_ledger(captured).leaf_records == ledger.leaf_records
    for i in range(3):
        mine, theirs = _sealed_table(ledger_dir, i), _sealed_table(captured, i)
        assert mine.num_rows == theirs.num_rows and mine.equals(theirs), i
        assert (
            load_seal(layout.seal_path(ledger_dir, "link0", i)).merkle_root
            == load_seal(layout.seal_path(captured, "link0", i)).merkle_root
        )


def test_create_ledger_defaults_to_the_format_capture_creates(tmp_path, keydir):
    """The library and the CLI make the same ledger when a caller names no format: v2, leaf 256."""
    dk, _, _ = load_keys(keydir)
    alg = get_algorithm(ALG)
    made = create_ledger(
        tmp_path / "W",
        algorithm=alg.name,
        strip="frame",
        digest_key_id=dk.key_id(alg.name, alg.key_size),
        digest_size=alg.digest_size,
    )
    assert (made.version, made.format, made.leaf_records) == (2, "ledgertool-ledger-v2", 256)
    assert load_ledger(tmp_path / "W") == made
    captured = tmp_path / "C"
    capture_file(
        SAMPLE,
        captured,
        digest_key=dk,
        signing_key=load_keys(keydir)[1],
        algorithm=ALG,
        segment_records=100,
    )
    got = load_ledger(captured)
    assert (got.version, got.leaf_records) == (made.version, made.leaf_records)
    v1 = create_ledger(
        tmp_path / "V1",
        algorithm=alg.name,
        strip="frame",
        digest_key_id=dk.key_id(alg.name, alg.key_size),
        digest_size=alg.digest_size,
        version=1,
    )
    assert (v1.version, v1.format, v1.leaf_records) == (1, "ledgertool-ledger-v1", 64)


def test_link_writer_due_by_records_and_by_age(tmp_path, keydir):
    dk, sk, _ = load_keys(keydir)
    alg = get_algorithm(ALG)
    ledger = create_ledger(
        tmp_path / "W",
        algorithm=alg.name,
        strip="frame",
        digest_key_id=dk.key_id(alg.name, alg.key_size),
        digest_size=alg.digest_size,
    )
    w = LinkWriter.open(
        tmp_path / "W", ledger, "link0", sk, source="x", segment_records=100, segment_seconds=2.0
    )
    try:
        assert not w.due(99, 10.0, 11.9)
        assert w.due(100, 10.0, 10.0)  # full
        assert w.due(1, 10.0, 12.0)  # old enough
        assert w.open_index is None and w.room() == 100
    finally:
        w.close()


def test_seal_covers_the_records_handed_over_not_the_open_segment_file_read_back(tmp_path, keydir):
    """Storage is the adversary's: bytes changed in the open segment file between append and seal
    must not be what the seal signs (the writer seals the records it was given, from memory). A v1
    ledger: its Parquet file is written from memory and the open file removed (v2 keeps the open
    file as its raw record file: tests/unit/test_open_segment_auth.py, the rewrite attack)."""
    dk, sk, trust = load_keys(keydir)
    alg = get_algorithm(ALG)
    ledger_dir = tmp_path / "W"
    ledger = create_ledger(
        ledger_dir,
        algorithm=alg.name,
        strip="frame",
        digest_key_id=dk.key_id(alg.name, alg.key_size),
        digest_size=alg.digest_size,
        version=1,
    )
    reader = open_source(SAMPLE)
    engine = DigestEngine(
        reader, alg, get_strip_mode("frame"), dk.subkey(alg.name, alg.key_size), workers=1
    )
    w = LinkWriter.open(ledger_dir, ledger, "link0", sk, source=SAMPLE.name, segment_records=1000)
    try:
        records, n, _ = engine.fill(0, 10)
        handed = bytes(records)
        w.append(records, n)
        open_file = layout.open_segment_path(ledger_dir, "link0", 0)
        raw = bytearray(open_file.read_bytes())
        raw[-1] ^= 0xFF  # the last record's last digest byte, as an attacker with the disk would
        open_file.write_bytes(bytes(raw))
        w.end_segment()
        w.drain()
    finally:
        w.close()
        reader.close()
    table = pq.read_table(layout.parquet_path(ledger_dir, "link0", 0))
    assert table.column("digest").to_pylist()[-1] == handed[-alg.digest_size :]
    assert not open_file.exists()
    v = verify_ledger(ledger_dir, trust, None)
    assert v.ok and v.records == 10, v.problems
