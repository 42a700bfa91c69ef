"""Ledgers with BLAKE3 leaf entries (ledger.json `leaf_hash: "blake3"`): leaf =
SHA-256(0x00 || BLAKE3-256(block)), the RFC 9162 tree above unchanged. The native leaves are
checked against the `blake3` package and hashlib; a captured ledger's segment roots and `prove`'s
audit paths against tests/rfc9162_reference.py given each block's BLAKE3 entry (records read from
the raw record files as docs/ledger-format.md lays them out, not through ledgertool)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import blake3
import pytest
import rfc9162_reference as ref
from conftest import SAMPLES, cli_in_process, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.digest.engine import merkle_leaves
from ledgertool.errors import LedgerFormatError
from ledgertool.ledger.header import create_ledger, parse_ledger_header

HEADER, RECORD = 256, 48


def entry(block: bytes) -> bytes:
    return blake3.blake3(block).digest()


def independent_leaves(records: bytes, record_size: int, leaf_records: int) -> bytes:
    step = record_size * leaf_records
    return b"".join(
        hashlib.sha256(b"\x00" + entry(records[i : i + step])).digest()
        for i in range(0, len(records), step)
    )


@pytest.mark.parametrize("record_size", [48, 64])
@pytest.mark.parametrize("leaf_records", [1, 8, 256, 1024])
@pytest.mark.parametrize("extra", [0, 1, 5])
def test_native_blake3_leaves_equal_the_blake3_package(record_size, leaf_records, extra):
    # 37 whole leaves + a shorter one: more than one batch of lanes, every chunk edge of a block
    count = 37 * leaf_records + extra
    records = os.urandom(record_size * count)
    got = merkle_leaves(records, record_size, leaf_records, "blake3")
    assert got == independent_leaves(records, record_size, leaf_records)
    assert got != merkle_leaves(records, record_size, leaf_records)  # not today's leaves


def test_unknown_leaf_hash_is_refused():
    with pytest.raises(ValueError, match="leaf hash 'md5'"):
        merkle_leaves(b"\0" * 48, 48, 1, "md5")


def ledger_json(**extra) -> bytes:
    doc = {
        "format": "ledgertool-ledger-v2",
        "ledger_id": "0" * 32,
        "algorithm": "siphash-1-3-128",
        "strip": "frame",
        "digest_key_id": "1" * 32,
        "digest_size": 16,
        "record_size": 48,
        "leaf_records": 256,
        **extra,
    }
    return json.dumps(doc).encode()


def test_ledger_json_without_leaf_hash_is_sha256_and_blake3_is_read():
    assert parse_ledger_header(ledger_json(), "L/ledger.json").leaf_hash == "sha256"
    assert (
        parse_ledger_header(ledger_json(leaf_hash="blake3"), "L/ledger.json").leaf_hash == "blake3"
    )


@pytest.mark.parametrize(
    "extra",
    [
        {"leaf_hash": "sha256"},
        {"leaf_hash": "BLAKE3"},
        {"leaf_hash": 1},
        {"leaf_hash": "blake3", "format": "ledgertool-ledger-v1"},
    ],
)
def test_ledger_json_leaf_hash_out_of_bounds_is_one_line(extra):
    with pytest.raises(LedgerFormatError, match=r"^L/ledger.json: field 'leaf_hash' is "):
        parse_ledger_header(ledger_json(**extra), "L/ledger.json")


def test_create_ledger_writes_leaf_hash_only_for_blake3(tmp_path):
    h = create_ledger(
        tmp_path / "a",
        algorithm="siphash-1-3-128",
        strip="frame",
        digest_key_id="1" * 32,
        digest_size=16,
        leaf_hash="blake3",
    )
    assert h.leaf_hash == "blake3"
    assert json.loads((tmp_path / "a" / "ledger.json").read_text())["leaf_hash"] == "blake3"
    create_ledger(
        tmp_path / "b",
        algorithm="siphash-1-3-128",
        strip="frame",
        digest_key_id="1" * 32,
        digest_size=16,
    )
    assert "leaf_hash" not in json.loads((tmp_path / "b" / "ledger.json").read_text())
    with pytest.raises(LedgerFormatError, match="v2 only"):
        create_ledger(
            tmp_path / "c",
            algorithm="siphash-1-3-128",
            strip="frame",
            digest_key_id="1" * 32,
            digest_size=16,
            leaf_hash="blake3",
            version=1,
        )


@pytest.fixture()
def ledger(tmp_path, keydir) -> Path:
    """Three segments (100, 100, 94 records), leaf blocks of 8, BLAKE3 entries."""
    dk, sk, _ = load_keys(keydir)
    out = tmp_path / "L"
    capture_file(
        SAMPLES / "sample.pcapng",
        out,
        digest_key=dk,
        signing_key=sk,
        segment_records=100,
        leaf_records=8,
        leaf_hash="blake3",
    )
    assert json.loads((out / "ledger.json").read_text())["leaf_hash"] == "blake3"
    return out


def raw_records(path: Path) -> list[bytes]:
    """The records of a raw record file (docs/ledger-format.md): a 256-byte header, then blocks of
    u32 count || count records || a 32-byte MAC."""
    data, at, out = path.read_bytes(), HEADER, []
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        body = data[at + 4 : at + 4 + n * RECORD]
        out += [body[i : i + RECORD] for i in range(0, len(body), RECORD)]
        at += 4 + n * RECORD + 32
    return out


def test_segment_roots_are_rfc9162_roots_over_blake3_entries(ledger):
    seals = [json.loads(p.read_text()) for p in sorted(ledger.glob("link=link0/seg-*.seal.json"))]
    assert [s["records"] for s in seals] == [100, 100, 94]
    for s in seals:
        recs = raw_records(ledger / "link=link0" / f"seg-{s['segment']:08d}.rec")
        assert len(recs) == s["records"]
        blocks = [b"".join(recs[i : i + 8]) for i in range(0, len(recs), 8)]
        assert ref.mth([entry(b) for b in blocks]).hex() == s["merkle_root"]
        # SHA-256 leaves over the blocks are not it
        assert ref.mth(blocks).hex() != s["merkle_root"]


def test_verify_accepts_and_a_stripped_leaf_hash_is_found(ledger, monkeypatch, capsys, keydir):
    trust = keydir / "verifier.pub"
    code, out, err = cli_in_process("verify", str(ledger), "--trust", str(trust))
    assert code == 0, out + err
    # ledger.json rewritten to say sha256 (member removed): the seals bind the other header bytes
    doc = json.loads((ledger / "ledger.json").read_text())
    del doc["leaf_hash"]
    (ledger / "ledger.json").write_text(json.dumps(doc, indent=1) + "\n")
    code, out, err = cli_in_process("verify", str(ledger), "--trust", str(trust))
    assert code == 1, out + err


@pytest.mark.parametrize("seq", [0, 7, 8, 150, 293])
def test_prove_checks_with_the_reference_given_the_entry(
    ledger, tmp_path, monkeypatch, capsys, keydir, seq
):
    out = tmp_path / "p.json"
    code, o, e = cli_in_process("prove", str(ledger), "--seq", str(seq), "--out", str(out))
    assert code == 0, o + e
    doc = json.loads(out.read_text())
    assert doc["leaf_hash"] == "blake3"
    block, path = (
        bytes.fromhex(doc["leaf_block"]["hex"]),
        [bytes.fromhex(h) for h in doc["audit_path"]],
    )
    root = bytes.fromhex(doc["seal"]["merkle_root"])
    assert ref.verify_inclusion(
        doc["leaf_index"], doc["tree_size"], ref.leaf_hash(entry(block)), path, root
    )
    assert not ref.verify_inclusion(
        doc["leaf_index"], doc["tree_size"], ref.leaf_hash(block), path, root
    )
    code, o, e = cli_in_process("check-proof", str(out), "--trust", str(keydir / "verifier.pub"))
    assert code == 0, o + e
    doc["leaf_hash"] = "sha256"  # the other construction named: no block is a 32-byte entry
    out.write_text(json.dumps(doc))
    code, o, e = cli_in_process("check-proof", str(out), "--trust", str(keydir / "verifier.pub"))
    assert code == 1, o + e


def test_the_worked_example_checks_a_blake3_ledger_with_the_blake3_package(ledger, keydir):
    """docs/ledger-format.md's v2 worked example (its leaf_entry uses the blake3 package, not
    ledgertool) over the CLI-written ledger; with SHA-256 leaves named it refuses every segment."""
    from test_worked_example_v2 import example

    ex = example()
    header = json.loads((ledger / "ledger.json").read_text())
    seals = [json.loads(p.read_text()) for p in sorted(ledger.glob("link=link0/seg-*.seal.json"))]
    prev = ex["genesis_hash"](header["ledger_id"], "link0")
    raw_header = (ledger / "ledger.json").read_bytes()
    for s in seals:
        rec = ledger / "link=link0" / f"seg-{s['segment']:08d}.rec"
        assert s["ledger_header_sha256"] == hashlib.sha256(raw_header).hexdigest()
        records = ex["check_v2_records"](s, rec, None, header.get("leaf_hash", "sha256"))
        assert len(records) == s["records"] * 48
        assert s["prev_seal_hash"] == prev
        prev = ex["seal_hash"](s)
        with pytest.raises(AssertionError, match="Merkle root differs"):
            ex["check_v2_records"](s, rec, None, "sha256")


@pytest.fixture()
def reference_ledger(tmp_path, keydir):
    """A blake3-leaf v2 ledger from tests/v2_reference.py (hashlib + the blake3 package): blocks
    that do not start on leaf boundaries, GAP records, an empty segment."""
    from v2_reference import synthetic_records, write_v2_ledger

    _, sk, trust = load_keys(keydir)
    segs = [
        synthetic_records(300, 0, 16, 1),
        synthetic_records(70, 300, 16, 2, gaps={3: 5}),
        synthetic_records(0, 370),
    ]
    w = write_v2_ledger(
        tmp_path / "R",
        sk,
        segs,
        leaf_records=64,
        leaf_hash="blake3",
        block_records=[[1, 63, 200, 36], None, []],
    )
    return w, segs, trust


def test_ledgertool_verifies_the_reference_blake3_ledger(reference_ledger):
    from ledgertool.verify.ledger import verify_ledger

    w, segs, trust = reference_ledger
    assert json.loads((w.ledger.directory / "ledger.json").read_text())["leaf_hash"] == "blake3"
    assert merkle_leaves(segs[0], 48, 64, "blake3") == w.path(0, "leaves").read_bytes()
    res = verify_ledger(w.ledger.directory, trust)
    assert res.ok, res.problems
    assert (res.segments, res.records, res.frames, res.drops_declared) == (3, 370, 369, 5)


def test_the_reference_blake3_ledger_read_as_sha256_fails_verify(reference_ledger):
    """ledger.json's leaf_hash removed: the seals' ledger_header_sha256 and every non-empty root
    disagree (the leaves of the same records under the other construction)."""
    from ledgertool.verify.ledger import verify_ledger

    w, _, trust = reference_ledger
    path = w.ledger.directory / "ledger.json"
    doc = json.loads(path.read_text())
    del doc["leaf_hash"]
    path.write_text(json.dumps(doc, indent=1) + "\n")
    res = verify_ledger(w.ledger.directory, trust)
    kinds = {str(getattr(p.kind, "value", p.kind)) for p in res.problems}
    assert not res.ok and "ledger_header_mismatch" in kinds and "merkle_mismatch" in kinds, kinds


def _paths(name: str) -> list[tuple[str, str]]:
    from ledgertool.algorithms import ALGORITHMS
    from ledgertool.digest.engine import cpu_paths

    return [(name, p) for p in cpu_paths(ALGORITHMS[name])]


@pytest.mark.parametrize(
    "on_path",
    _paths("blake3-keyed-256") + _paths("hmac-sha256-128"),
    indirect=True,
    ids=lambda x: f"{x[0]}={x[1]}",
)
def test_blake3_leaves_are_the_same_on_every_cpu_path(on_path):
    """The entries through each BLAKE3 path (lanes, rows, portable) and the leaf over them through
    each SHA-256 path: the same bytes as the blake3 package and hashlib."""
    records = os.urandom(48 * (40 * 256 + 17))
    assert merkle_leaves(records, 48, 256, "blake3") == independent_leaves(records, 48, 256)


@pytest.mark.parametrize("flip", [None, "block1"])
def test_recover_authenticates_and_seals_a_blake3_open_segment(tmp_path, keydir, flip):
    """An open segment of a blake3 ledger left by a crash (blocks of 64, 32, 32 records, so the
    chunk hashes of the MAC chain cover whole and partial leaves): recovery's MAC check and seal
    use the ledger's leaves; one flipped record byte costs the blocks from it on."""
    import numpy as np

    from ledgertool.digest.record import record_dtype
    from ledgertool.ledger import layout
    from ledgertool.ledger import segment as segments
    from ledgertool.ledger.header import load_ledger
    from ledgertool.ledger.reader import LedgerReader
    from ledgertool.ledger.recover import recover_ledger
    from ledgertool.ledger.writer import LinkWriter
    from ledgertool.verify.ledger import verified_segment, verify_ledger

    dk, sk, trust = load_keys(keydir)
    led = tmp_path / "L"
    capture_file(
        SAMPLES / "sample.pcap",
        led,
        digest_key=dk,
        signing_key=sk,
        segment_records=100,
        leaf_records=64,
        leaf_hash="blake3",
    )
    lg = load_ledger(led)
    assert lg.leaf_hash == "blake3"
    arr = np.frombuffer(
        b"".join(
            bytes(verified_segment(LedgerReader(led), lg, "link0", i).records) for i in range(3)
        ),
        dtype=record_dtype(lg.digest_size),
    ).copy()
    arr["seq"] += 294
    records = arr.tobytes()
    w = LinkWriter.open(led, lg, "link0", sk, source="test", segment_records=1000)
    try:
        at = 0
        for n in (64, 32, 32):
            w.append(records[at : at + n * lg.record_size], n)
            at += n * lg.record_size
        w._segment.close()  # the crash: the file stays as written
    finally:
        w.close()
    path = layout.open_segment_path(led, "link0", 3)
    if flip:
        raw = bytearray(path.read_bytes())
        raw[segments.read_open_segment(path).blocks[1].offset + 4 + 40] ^= 1
        path.write_bytes(bytes(raw))
    res = recover_ledger(led, sk)
    sealed = 64 if flip else 128
    assert [(r.index, r.records) for _, r in res.sealed] == [(3, sealed)]
    v = verify_ledger(led, trust, layout.checkpoint_path(led, "link0").read_bytes())
    assert v.ok and v.records == 294 + sealed, v.problems
