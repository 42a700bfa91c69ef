"""The byte-level statements of the documents an independent implementer reads (strip modes,
rotation chain, device key files, checkpoints, inclusion proofs, recompute's verdict), each read
out of the document and checked against the code: a device or verifier built from the text alone
must compute what ledgertool computes."""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES, load_keys
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment
from scapy.layers.l2 import Ether
from typer.testing import CliRunner

from ledgertool.capture.run import capture_file
from ledgertool.cli.app import app
from ledgertool.device.provision import DeviceKey, device_init
from ledgertool.digest.strip import flag_names, strip_range
from ledgertool.ledger.checkpoints import check_consistency
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.layout import checkpoint_path
from ledgertool.seal import merkle
from ledgertool.seal.rotation import rotation_genesis
from ledgertool.verify.proof import build_proof, check_proof

DOCS = REPO / "docs"


def _text(name: str) -> str:
    """The document with its line breaks and indentation folded to single spaces."""
    return " ".join((DOCS / name).read_text().split())


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, keydir) -> Path:
    dk, sk, _ = load_keys(keydir)
    out = tmp_path_factory.mktemp("docs") / "L"
    capture_file(SAMPLES / "sample.pcap", out, digest_key=dk, signing_key=sk, segment_records=100)
    return out


def test_ipv6_non_first_fragment_is_hashed_from_after_the_fragment_header():
    doc = _text("strip-modes.md")
    assert "including the IPv6 Fragment header" not in doc
    assert (
        "Non-first fragments (offset ≠ 0) hash the data after the IP header; for IPv6, the data "
        "after the Fragment header (the 8-byte Fragment header and any extension headers before it "
        "are not hashed)"
    ) in doc
    row = re.search(
        r"\| Ether / IPv6 / Fragment\(offset 8\) / 37 B \| \[(\d+), (\d+)\) \| \[(\d+), (\d+)\), "
        r"(\w+) \|",
        doc,
    )
    assert row, "the example row is gone from docs/strip-modes.md"
    l3, payload, flag = (
        tuple(map(int, row.group(1, 2))),
        tuple(map(int, row.group(3, 4))),
        row.group(5),
    )
    frame = bytes(Ether() / IPv6() / IPv6ExtHdrFragment(offset=8, m=0, id=5, nh=17) / (b"x" * 37))
    assert len(frame) == 99
    got_l3, got_payload = strip_range(frame, 1, "l3"), strip_range(frame, 1, "payload")
    assert (got_l3.offset, got_l3.end) == l3
    # after the Fragment header
    assert (got_payload.offset, got_payload.end) == payload == (14 + 40 + 8, 99)
    assert flag_names(got_payload.flags) == [flag]


def test_rotation_genesis_takes_the_ledger_id_as_16_raw_bytes():
    doc = _text("transparency.md")
    assert (
        'for the first `SHA-256(b"ledgertool rotation genesis v1\\x00" || ledger_id (16 raw '
        "bytes))`" in doc
    )
    ledger_id = "1657e90a2f714c10bcac8eacf0092206"
    raw = bytes.fromhex(ledger_id)
    assert len(raw) == 16
    assert (
        rotation_genesis(ledger_id)
        == hashlib.sha256(b"ledgertool rotation genesis v1\x00" + raw).hexdigest()
    )
    assert (
        rotation_genesis(ledger_id)
        != hashlib.sha256(b"ledgertool rotation genesis v1\x00" + ledger_id.encode()).hexdigest()
    )


def _documented_members(doc: str, file: str) -> str:
    item = re.search(
        rf"- `{re.escape(file)}` \(mode 0\d+, `schemas/[a-z-]+\.schema\.json`\): (.*?)(?= - `|$)",
        doc,
    )
    assert item, f"no bullet for {file} in docs/devices.md"
    return item.group(1)[:600]


def test_device_key_files_have_exactly_the_documented_members(tmp_path):
    doc = _text("devices.md")
    res = device_init(tmp_path / "dev")
    pub = json.loads(Path(res.device_pub).read_text())
    key = json.loads(Path(res.device_key).read_text())
    for name, have in (("device.pub", pub), ("device.key", key)):
        text = _documented_members(doc, name)
        assert "exactly the members" in text[:120], text
        for member, value in have.items():
            assert f"`{member}`" in text or f"`{member} = " in text, (name, member)
            if member in ("format", "kem"):
                assert f'`{member}` (`"{value}"`)' in text, (name, member, value)
    assert set(pub) == {"format", "kem", "public_key", "device_id"}
    assert set(key) == {"format", "kem", "mlkem768_seed", "x25519_private"}
    DeviceKey.load(res.device_key)  # what the code requires is what it wrote


def test_equal_size_checkpoints_are_consistent_with_the_empty_proof(ledger, keydir):
    doc = _text("transparency.md")
    assert (
        "two checkpoints of **equal size** are consistent with the **empty proof** exactly when "
        "their roots are equal (a non-empty proof is refused)"
    ) in doc
    cp = checkpoint_path(ledger, "link0").read_bytes()
    res = check_consistency(cp, cp, ledger, load_keys(keydir)[2])
    assert res.ok and res.proof == []
    leaves = [hashlib.sha256(bytes([i])).digest() for i in range(5)]
    root = merkle.root_from_leaf_hashes(leaves)
    assert merkle.consistency_proof(5, leaves) == []
    assert merkle.verify_consistency(5, 5, root, root, [])
    assert not merkle.verify_consistency(5, 5, root, root, [root])
    assert not merkle.verify_consistency(5, 5, root, bytes(32), [])


def test_proofs_reach_the_checkpoint_root_as_adr_0004_says(ledger, keydir):
    adr = " ".join(next((DOCS / "adr").glob("0004-*.md")).read_text().split())
    assert "not implemented" not in adr
    assert "the seal hash's RFC 9162 audit path in the link tree" in adr
    proof = build_proof(ledger, seq=250).to_json()
    assert proof["checkpoint"] is not None and proof["segment"] == 2
    res = check_proof(proof, load_keys(keydir)[2])
    assert res.ok and res.checkpoint.size == 3, res.reason


def _retimed(src: Path, dst: Path, shift_s: int, more_wire: int) -> None:
    """The pcap `src` with every timestamp `shift_s` later and every wire length `more_wire`
    longer."""
    raw = bytearray(src.read_bytes())
    assert struct.unpack_from("<I", raw)[0] in (0xA1B2C3D4, 0xA1B23C4D)  # little-endian pcap
    pos = 24
    while pos < len(raw):
        sec, frac, incl, orig = struct.unpack_from("<IIII", raw, pos)
        struct.pack_into("<IIII", raw, pos, sec + shift_s, frac, incl, orig + more_wire)
        pos += 16 + incl
    dst.write_bytes(bytes(raw))


@pytest.mark.parametrize("shift_s,more_wire", [(3600, 0), (0, 4)])
def test_recompute_match_compares_digests_not_timestamps_or_lengths(
    ledger, keydir, tmp_path, shift_s, more_wire
):
    doc = _text("threat-model.md")
    assert (
        "The same frames re-timed by an hour are MATCH, and so are the same bytes with another "
        "`wire_len`" in doc
    )
    cap = tmp_path / "retimed.pcap"
    _retimed(SAMPLES / "sample.pcap", cap, shift_s, more_wire)
    r = CliRunner().invoke(
        app,
        [
            "recompute",
            str(cap),
            "--ledger",
            str(ledger),
            "--digest-key",
            str(keydir / "digest.key"),
            "--trust",
            str(keydir / "verifier.pub"),
            "--json",
        ],
    )
    rep = json.loads(r.stdout)
    assert r.exit_code == 0 and rep["ok"] and rep["matched"] == rep["frames"] == 294, r.output
    assert load_ledger(ledger).ledger_id  # the ledger was not touched by the run


def test_records_source_seals_every_field_as_the_device_wrote_it(tmp_path, keydir):
    """docs/devices.md "What it trusts": only the framing is checked; timestamps running backwards,
    lengths no frame had and made-up digests are sealed as given, and verify is OK."""
    import numpy as np
    from v2_reference import synthetic_records

    from ledgertool.digest.record import record_dtype
    from ledgertool.ledger.reader import LedgerReader
    from ledgertool.verify.ledger import verified_segment

    doc = _text("devices.md")
    assert (
        "The records source takes every field as the device wrote it: the digests, `ts_ns`, "
        "`wire_len`, `cap_len`, `linktype`, `aux` and the flag bits it may set are sealed without "
        "being recomputed"
    ) in doc
    assert "timestamps need not increase" in doc
    recs = np.frombuffer(synthetic_records(50), dtype=record_dtype(16)).copy()
    recs["ts_ns"] = recs["ts_ns"][::-1]  # backwards in time
    recs["wire_len"][7], recs["cap_len"][7] = 9000, 3  # no such frame was ever captured
    (tmp_path / "dev.records").write_bytes(recs.tobytes())
    r = CliRunner().invoke(
        app,
        [
            "capture",
            f"records:{tmp_path / 'dev.records'}",
            "--ledger",
            str(tmp_path / "L"),
            "--signing-key",
            str(keydir / "signing.key"),
            "--digest-key",
            str(keydir / "digest.key"),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    sealed = verified_segment(LedgerReader(tmp_path / "L"), load_ledger(tmp_path / "L"), "link0", 0)
    assert bytes(sealed.records) == recs.tobytes()
