"""Digests keep every byte when they leave numpy.

numpy's fixed-width strings ("S16") drop trailing zero bytes when they become Python bytes, so a
digest ending in 0x00 (about one record in 256) came out a byte short: `prove` wrote 30 hex
characters, the proof failed schemas/proof.schema.json, and `check-proof` rejected the correct
32-character digest. The sample capture under the fixed digest key below has such a record.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from conftest import SAMPLES, cli
from test_schemas_reports import validate

from ledgertool.digest.record import record_dtype
from ledgertool.keyfiles import DigestKey, SigningKey
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.parquet import records_to_table, table_to_records
from ledgertool.ledger.reader import LedgerReader
from ledgertool.verify.ledger import verified_segment
from ledgertool.verify.proof import record_to_json

# Found by trying master keys bytes([i]) * 32: with i = 1, siphash-1-3-128 over the sample gives
# record 94 a digest ending in 00 (and no other record does).
MASTER = bytes([1]) * 32
SEQ = 94


@pytest.fixture(scope="module")
def zero_tail(tmp_path_factory):
    """(ledger, keys dir, the full digest of record SEQ as bytes)."""
    d = tmp_path_factory.mktemp("zero-tail")
    DigestKey(MASTER).save(d / "digest.key")
    sk = SigningKey.generate("ed25519")
    sk.save(d / "signing.key")
    sk.trust_bundle().save(d / "verifier.pub")
    led = d / "ledger"
    r = cli(
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        led,
        "--digest-key",
        d / "digest.key",
        "--signing-key",
        d / "signing.key",
        "--segment-records",
        "100",
    )
    assert r.returncode == 0, r.stderr
    # the sealed records, either form
    t = verified_segment(LedgerReader(led), load_ledger(led), "link0", 0).table
    digest = t.column("digest")[SEQ].as_py()
    assert len(digest) == 16 and digest[-1] == 0  # the case under test really is in the ledger
    return led, d, digest


def test_proof_of_a_digest_ending_in_zero_keeps_all_bytes(zero_tail, tmp_path):
    led, keys, digest = zero_tail
    out = tmp_path / "proof.json"
    r = cli("prove", led, "--seq", SEQ, "--out", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["record"]["digest"] == digest.hex() and len(doc["record"]["digest"]) == 32
    validate(doc, "proof.schema.json")
    r = cli("check-proof", out, "--trust", keys / "verifier.pub", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["record"]["digest"] == digest.hex()


def test_prove_by_a_digest_ending_in_zero(zero_tail, tmp_path):
    led, keys, digest = zero_tail
    out = tmp_path / "proof.json"
    r = cli("prove", led, "--digest", digest.hex(), "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["seq"] == str(SEQ)
    # the same digest without its last byte is no record's digest (numpy "S" compares ignore
    # trailing zero bytes; the void compare does not)
    r = cli("prove", led, "--digest", digest[:-1].hex() + "01", "--out", out)
    assert r.returncode == 2 and "no sealed record" in r.stderr


def test_record_layout_round_trips_zero_bytes():
    """Arrow table <-> fixed-size records and the proof's record object keep digests whose last,
    first or every byte is zero."""
    digests = [
        bytes(15) + b"\x00",
        b"\x00" + bytes(range(1, 16)),
        bytes(range(1, 15)) + b"\x00\x00",
        bytes(range(100, 116)),
    ]
    records = b"".join(
        struct.pack("<QqIIHHI", i, 0, 60, 60, 0, 1, 0) + d for i, d in enumerate(digests)
    )
    table = records_to_table(records, 16, 0)
    assert table.column("digest").to_pylist() == digests
    assert table_to_records(table, 16) == records
    back = np.frombuffer(records, dtype=record_dtype(16))
    assert [bytes(r["digest"]) for r in back] == digests
    assert [record_to_json(r)["digest"] for r in back] == [d.hex() for d in digests]
