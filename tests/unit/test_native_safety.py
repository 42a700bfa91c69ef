"""Memory safety of the native core and the bounds of what it is handed.

ledger.json is unsigned storage. Its fields are bounded when it is loaded, the C Merkle
code refuses sizes it cannot hold, and the header is bound to the signed chain
(`ledger_header_sha256` in every new seal), so an edited header is a named problem.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys

SAMPLE = SAMPLES / "sample.pcap"  # 294 Ethernet frames
SEG, LEAF = 100, 8


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, keydir) -> Path:
    from ledgertool.capture.run import capture_file

    dk, sk, _ = load_keys(keydir)
    out = tmp_path_factory.mktemp("ledger") / "ledger"
    capture_file(SAMPLE, out, digest_key=dk, signing_key=sk, segment_records=SEG, leaf_records=LEAF)
    return out


@pytest.fixture()
def ledger(pristine, tmp_path) -> Path:
    d = tmp_path / "ledger"
    shutil.copytree(pristine, d)
    return d


@pytest.fixture()
def v1_ledger(tmp_path, keydir) -> Path:
    """The same ledger in format v1, whose seals were once written without ledger_header_sha256."""
    from ledgertool.capture.run import capture_file

    dk, sk, _ = load_keys(keydir)
    out = tmp_path / "v1"
    capture_file(
        SAMPLE,
        out,
        digest_key=dk,
        signing_key=sk,
        segment_records=SEG,
        leaf_records=LEAF,
        ledger_format=1,
    )
    return out


def _edit_header(ledger: Path, **changes) -> None:
    path = ledger / "ledger.json"
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def _verify(ledger: Path, keydir: Path) -> dict:
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


# ---- the overflow itself ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["verify", "recover"])
def test_leaf_records_overflow(ledger, keydir, command):
    """leaf_records = 2^60 + 1 wrapped `record_size * leaf_records` to 48 in lt_merkle_leaves:
    verify aborted (ASan heap-buffer-overflow), recover corrupted the heap. Now: one line naming
    ledger.json and the field, exit 2, before any record is hashed."""
    _edit_header(ledger, leaf_records=2**60 + 1)
    extra = (
        ["--trust", keydir / "verifier.pub"]
        if command == "verify"
        else ["--signing-key", keydir / "signing.key"]
    )
    r = cli(command, ledger, *extra)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "ledger.json" in lines[0] and "leaf_records" in lines[0] and str(2**60 + 1) in lines[0]


def test_merkle_leaves_checks_every_size_in_c():
    """The C entry point itself refuses what it cannot hold, whatever Python passes: no write
    past `out`, status LT_ERR_ARG."""
    from ledgertool._binding import ffi, lib

    records = bytes(48 * 10)
    out = ffi.new("uint8_t[]", 64)
    sentinel = bytes(ffi.buffer(out))

    def call(record_size, count, leaf, out_len=64):
        return lib.lt_merkle_leaves(records, record_size, count, leaf, out, out_len)

    assert call(48, 10, 2**60 + 1) == lib.LT_ERR_ARG  # the reported overflow
    assert call(48, 10, 3) == lib.LT_ERR_ARG  # not a power of two
    assert call(48, 10, 2 * lib.LT_MERKLE_MAX_LEAF_RECORDS) == lib.LT_ERR_ARG
    assert call(48, 10, 0) == lib.LT_ERR_ARG
    assert call(17, 10, 8) == lib.LT_ERR_ARG  # not a record size
    assert call(48, 2**62, 8) == lib.LT_ERR_ARG  # count * record_size overflows
    assert call(48, 10, 4) == lib.LT_ERR_ARG  # 3 leaves do not fit 64 bytes
    assert bytes(ffi.buffer(out)) == sentinel  # nothing was written
    assert call(48, 10, 8) == lib.LT_OK  # 2 leaves fit
    assert bytes(ffi.buffer(out)) != sentinel


def test_workload_timestamps_cannot_overflow():
    """start_ns + frames x interframe past 2^63 - 1 ns overflowed the generator's int64 clock
    (signed overflow: negative timestamps); now the spec is refused."""
    import dataclasses

    from ledgertool.errors import WorkloadSpecError
    from ledgertool.source.workload import load_spec, open_workload

    spec = load_spec(SAMPLES / "workloads" / "imix.toml")
    with open_workload(dataclasses.replace(spec, start_ns=2**63 - 10**12, interframe_ps=10**6)):
        pass  # fits
    with pytest.raises(WorkloadSpecError, match="past 2\\^63 - 1 ns"):
        open_workload(dataclasses.replace(spec, start_ns=2**63 - 10, interframe_ps=10**15))


# ---- every header field bounded on load -----------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("leaf_records", 0),
        ("leaf_records", 3),
        ("leaf_records", 2**17),
        ("leaf_records", True),
        ("leaf_records", 64.0),
        ("leaf_records", "64"),
        ("record_size", 64),
        ("record_size", True),
        ("digest_size", 32),
        ("digest_size", False),
        ("algorithm", "siphash-1-3-64"),
        ("algorithm", "md5"),
        ("algorithm", 1),
        ("strip", "everything"),
        ("ledger_id", "ABCDEF" * 5 + "ab"),
        ("ledger_id", "00" * 15),
        ("ledger_id", 7),
        ("digest_key_id", "zz" * 16),
        ("digest_key_id", None),
        ("format", "ledgertool-ledger-v3"),
        ("created_at", 5),
        ("surprise", 1),
    ],
)
def test_ledger_header_fields_are_bounded(ledger, field, value):
    from ledgertool.errors import LedgerFormatError
    from ledgertool.ledger.header import load_ledger

    _edit_header(ledger, **{field: value})
    with pytest.raises(LedgerFormatError) as e:
        load_ledger(ledger)
    msg = str(e.value)
    assert "\n" not in msg and "ledger.json" in msg and field in msg, msg


def test_ledger_header_duplicate_member_and_size(ledger):
    from ledgertool.errors import LedgerFormatError
    from ledgertool.ledger.header import load_ledger

    path = ledger / "ledger.json"
    text = path.read_text()
    path.write_text(
        text.replace('"leaf_records": 8', '"leaf_records": 8, "leaf_records": 2147483648')
    )
    with pytest.raises(
        LedgerFormatError, match="'leaf_records' appears twice|duplicate member 'leaf_records'"
    ):
        load_ledger(ledger)
    path.write_text(text[:-2] + ', "pad": "' + "x" * 70000 + '"}\n')
    with pytest.raises(LedgerFormatError, match="65536"):
        load_ledger(ledger)


@pytest.mark.parametrize(
    "field, value, where",
    [
        ("leaf_records", 2**31, "byte 36"),
        ("leaf_records", 0, "byte 36"),
        ("leaf_records", 96, "byte 36"),
        ("algorithm", "siphash-1-3-64", "byte 96"),
        ("algorithm", "blake3-keyed-256", "byte 96"),
        ("strip", "nothing", "byte 128"),
        ("link", "../x", "byte 64"),
    ],
)
def test_segment_header_is_bounded(field, value, where):
    from ledgertool.errors import LedgerFormatError
    from ledgertool.ledger.segment import SegmentHeader

    good = dict(
        ledger_id="ab" * 16,
        link="link0",
        index=3,
        algorithm="siphash-1-3-128",
        strip="frame",
        key_id="cd" * 16,
        record_size=48,
        digest_size=16,
        leaf_records=64,
        first_seq=0,
        created_ns=1,
    )
    assert SegmentHeader.decode(SegmentHeader(**good).encode(), "x.open") == SegmentHeader(**good)
    raw = SegmentHeader(**{**good, field: value}).encode()
    with pytest.raises(LedgerFormatError, match=where):
        SegmentHeader.decode(raw, "x.open")


# ---- the header is bound to the signed chain -------------------------------------------


def test_new_seals_sign_the_header_bytes(ledger):
    import hashlib

    want = hashlib.sha256((ledger / "ledger.json").read_bytes()).hexdigest()
    seals = sorted((ledger / "link=link0").glob("*.seal.json"))
    assert len(seals) == 3
    assert {json.loads(p.read_text())["ledger_header_sha256"] for p in seals} == {want}


def test_edited_header_is_a_named_problem(ledger, keydir):
    """A header edit that keeps every compared parameter (created_at) was invisible; one that
    changes leaf_records made verify hash the records with the unsigned value. Now both are
    `ledger_header_mismatch`, and records are still hashed with the seals' signed layout."""
    assert _verify(ledger, keydir)["ok"]
    _edit_header(ledger, created_at="1999-01-01T00:00:00+00:00")
    v = _verify(ledger, keydir)
    assert not v["ok"] and {p["kind"] for p in v["problems"]} == {"ledger_header_mismatch"}
    (p,) = v["problems"]
    assert p["segment"] == 0 and "ledger.json" in p["detail"] and "segments 0..2" in p["detail"]

    _edit_header(
        ledger,
        created_at=json.loads((ledger / "ledger.json").read_text())["created_at"],
        leaf_records=128,
    )
    kinds = [p["kind"] for p in _verify(ledger, keydir)["problems"]]
    assert "ledger_header_mismatch" in kinds and "parameter_mismatch" in kinds
    assert "merkle_mismatch" not in kinds, (
        "records were hashed with the unsigned header's leaf size"
    )


def test_capture_refuses_to_append_over_an_edited_header(ledger, keydir):
    _edit_header(ledger, created_at="1999-01-01T00:00:00+00:00")
    before = sorted(p.name for p in (ledger / "link=link0").iterdir())
    r = cli(
        "capture",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    assert r.returncode == 2 and "ledger.json" in r.stderr and "ledger_header_sha256" in r.stderr, (
        r.stderr
    )
    assert sorted(p.name for p in (ledger / "link=link0").iterdir()) == before


def _strip_binding(ledger: Path, keydir: Path) -> None:
    """Re-sign every seal without ledger_header_sha256, as seals were written before it existed
    (the chain and the stored checkpoint follow)."""
    from ledgertool.ledger.checkpoints import write_checkpoint
    from ledgertool.ledger.header import load_ledger
    from ledgertool.seal.document import genesis_hash, seal_hash, seal_signed_bytes

    _, sk, _ = load_keys(keydir)
    header = load_ledger(ledger)
    prev = genesis_hash(header.ledger_id, "link0")
    for path in sorted((ledger / "link=link0").glob("*.seal.json")):
        doc = json.loads(path.read_text())
        del doc["ledger_header_sha256"]
        doc["prev_seal_hash"] = prev
        doc.pop("signatures")
        doc["signatures"] = sk.sign(seal_signed_bytes(doc))
        path.write_text(json.dumps(doc, indent=1) + "\n")
        prev = seal_hash(doc)
    write_checkpoint(ledger, header, "link0", sk)


def test_old_seals_without_the_binding_still_verify(v1_ledger, keydir):
    """v1 seals from before the binding (v2 seals were never written without it: next test)."""
    ledger = v1_ledger
    _strip_binding(ledger, keydir)
    assert _verify(ledger, keydir)["ok"]
    _edit_header(ledger, created_at="1999-01-01T00:00:00+00:00")  # not covered by an old seal
    assert _verify(ledger, keydir)["ok"]
    _edit_header(ledger, leaf_records=128)
    v = _verify(ledger, keydir)
    kinds = {p["kind"] for p in v["problems"]}
    assert kinds == {"parameter_mismatch"}, v[
        "problems"
    ]  # the seals' own leaf size is the one used
    assert len(v["problems"]) == 3


def test_v2_seals_without_the_binding_are_malformed(ledger, keydir):
    _strip_binding(ledger, keydir)
    v = _verify(ledger, keydir)
    assert [(p["kind"], p["segment"]) for p in v["problems"]] == [
        ("seal_malformed", i) for i in range(3)
    ], v
    assert all(
        "ledgertool-seal-v2 seal lacks ledger_header_sha256" in p["detail"] for p in v["problems"]
    )


# ---- key wipes, core dumps, a capture file that shrinks, replay timing -----------------


def _saturated_pcapng(path: Path) -> Path:
    """Two Ethernet frames whose pcapng timestamps saturate to INT64_MIN and INT64_MAX ns: each on
    its own interface, with if_tsoffset -2^62 and +2^62 seconds."""
    import struct

    def block(btype: int, body: bytes) -> bytes:
        body += bytes(-len(body) % 4)
        n = 12 + len(body)
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = [
        block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HHq", 14, 8, off) + bytes(4))
        for off in (-(2**62), 2**62)
    ]
    frame = bytes(6) + bytes.fromhex("020000000001") + b"\x08\x00" + bytes(46)
    epb = [
        block(6, struct.pack("<IIIII", ifid, 0, 1, len(frame), len(frame)) + frame)
        for ifid in (0, 1)
    ]
    path.write_bytes(shb + b"".join(idb) + b"".join(epb))
    return path


needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="replay opens a PF_PACKET socket (root or CAP_NET_RAW)"
)


def test_saturated_pcapng_reads_as_int64_limits(tmp_path):
    from ledgertool.source.file import CaptureReader

    with CaptureReader(_saturated_pcapng(tmp_path / "sat.pcapng")) as r:
        assert [f.ts_ns for f in r.frames()] == [-(2**63), 2**63 - 1]


@needs_root
def test_replay_timing_refuses_saturated_timestamps(tmp_path):
    """--timing computed INT64_MAX - INT64_MIN (signed overflow: UBSan reports it; plain builds
    wrapped to -1 and sent both frames at once). Now a one-line usage error naming the frame."""
    cap = _saturated_pcapng(tmp_path / "sat.pcapng")
    r = cli("replay", cap, "--iface", "lo", "--json")
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert f"{cap}: frame 1 (byte " in r.stderr and "--pps, --mbps or --topspeed" in r.stderr
