"""Property-based fuzzing of the Python parsers of untrusted documents (docs/fuzzing.md).

Each parser that reads bytes a verifier did not produce must either succeed or raise a
`LedgerError` subclass (or return its clean failure value: a `VerifyResult` with problems, a
`ProofCheck` with ok False, a reason string); any other exception is a bug. Covered:

* seal documents: `seal.load_seal` and the whole `verify.verify_ledger` path over a ledger
  whose middle seal is replaced by a mutated one (raw bytes and structured JSON mutations);
* inclusion proofs: `proof.load_proof` + `proof.check_proof`;
* checkpoints (signed notes): `checkpoint.parse_note` + `verify_note` + `check_extends`;
* segment headers: `segments.SegmentHeader.decode` and `read_open_segment`;
* the ledger header: `ledger.parse_ledger_header` (ledger.json);
* key rotation statements: `rotation.load_rotations` + `rotation.key_schedule`.

Inputs start from genuine documents of a small ledger built here from a synthetic capture (no
corpus needed) and are mutated by hypothesis. Runs are derandomized so CI is reproducible; set
LEDGERTOOL_FUZZ_EXAMPLES=N (and LEDGERTOOL_FUZZ_RANDOM=1 for fresh randomness) to fuzz longer.

Findings are pinned as regression tests at the end (named after what they reproduced); a new
finding the code does not handle yet may be listed in `_known` and pinned as a strict xfail until
it is fixed.
"""

from __future__ import annotations

import copy
import json
import os
import struct
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from ledgertool.capture.run import capture_file
from ledgertool.digest.engine import valid_leaf_records
from ledgertool.errors import LedgerError
from ledgertool.keyfiles import DigestKey, SigningKey, TrustBundle
from ledgertool.ledger import layout
from ledgertool.ledger.checkpoints import link_tree, write_checkpoint
from ledgertool.ledger.header import load_ledger, parse_ledger_header
from ledgertool.ledger.layout import ROTATIONS_DIR
from ledgertool.ledger.rotations import load_rotations, rotate_keys
from ledgertool.ledger.sealer import load_seal
from ledgertool.ledger.segment import HEADER_SIZE, SegmentHeader, read_open_segment
from ledgertool.seal.checkpoint import check_extends, parse_note, verify_note
from ledgertool.seal.rotation import key_schedule
from ledgertool.verify.ledger import VerifyResult, verify_ledger
from ledgertool.verify.proof import ProofCheck, build_proof, check_proof, load_proof

EXAMPLES = int(os.environ.get("LEDGERTOOL_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=EXAMPLES or 100,
    derandomize=not os.environ.get("LEDGERTOOL_FUZZ_RANDOM"),
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
# verify_ledger reads Parquet files per example: fewer examples by default.
FUZZ_SLOW = settings(FUZZ, max_examples=EXAMPLES or 40)

LINK = "link0"
SEG, LEAF = 10, 4  # records per segment (3 segments: 10, 10, 4), records per Merkle leaf
FRAMES = 24


# ---- a small ledger from a synthetic capture ----------------------------------------------------


def _synthetic_pcap(path: Path, frames: int = FRAMES) -> None:
    """Nanosecond pcap of Ethernet/IPv4/UDP frames with distinct payloads."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)]
    for i in range(frames):
        payload = bytes((i * 7 + k) & 0xFF for k in range(20 + i))
        udp = struct.pack(">HHHH", 1000 + i, 2000, 8 + len(payload), 0) + payload
        ip = (
            struct.pack(
                ">BBHHHBBH4s4s",
                0x45,
                0,
                20 + len(udp),
                i,
                0,
                64,
                17,
                0,
                bytes([10, 0, 0, 1]),
                bytes([10, 0, 0, 2]),
            )
            + udp
        )
        frame = bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00" + ip
        out.append(
            struct.pack("<IIII", 1_700_000_000 + i, i * 1000, len(frame), len(frame)) + frame
        )
    path.write_bytes(b"".join(out))


@pytest.fixture(scope="module", params=[1, 2], ids=["v1", "v2"])
def world(request, tmp_path_factory, keydir):
    """The ledger every fuzz test mutates, in both ledger formats (their seals differ: v1 pins its
    Parquet file, v2 has no file members)."""
    d = tmp_path_factory.mktemp("fuzz")
    src = d / "synthetic.pcap"
    _synthetic_pcap(src)
    dk, sk = DigestKey.load(keydir / "digest.key"), SigningKey.load(keydir / "signing.key")
    trust = TrustBundle.load(keydir / "verifier.pub")
    ledger = d / "ledger"
    res = capture_file(
        src,
        ledger,
        digest_key=dk,
        signing_key=sk,
        segment_records=SEG,
        leaf_records=LEAF,
        ledger_format=request.param,
    )
    assert res.frames == FRAMES
    write_checkpoint(ledger, load_ledger(ledger), LINK, sk)
    seal1 = layout.seal_path(ledger, LINK, 1)
    note = (ledger / f"link={LINK}" / "checkpoint").read_bytes()
    assert not verify_ledger(ledger, trust).problems
    rotated = d / "rotated"
    __import__("shutil").copytree(ledger, rotated)
    rotate_keys(rotated, sk, SigningKey.generate())
    rotation_file = next((rotated / ROTATIONS_DIR).glob("rotation-*.json"))
    return {
        "rotated": rotated,
        "rotation_file": rotation_file,
        "rotation": json.loads(rotation_file.read_bytes()),
        "dir": d,
        "ledger": ledger,
        "trust": trust,
        "sk": sk,
        "seal_path": seal1,
        "seal_bytes": seal1.read_bytes(),
        "seal": json.loads(seal1.read_bytes()),
        "proof": build_proof(ledger, seq=13, link=LINK).to_json(),
        "note": note,
        "tree": link_tree(ledger, LINK),
    }


# ---- strategies -------------------------------------------------------------------------------

_EDGE_INTS = st.sampled_from(
    [
        0,
        1,
        -1,
        2,
        3,
        4,
        16,
        32,
        48,
        64,
        2**31,
        2**32,
        2**53,
        2**63 - 1,
        2**63,
        2**64,
        -(2**63),
        10**30,
    ]
)
_EDGE_STRS = st.sampled_from(
    [
        "",
        "0",
        "-1",
        "13",
        "1e3",
        "18446744073709551615",
        "99999999999999999999",
        "9" * 5000,
        "00",
        " 1",
        "0x10",
        "NaN",
        "ab" * 16,
        "00" * 32,
        "zz",
        "\ud800",
        "link0",
        "seg-00000001.parquet",
        "seg-00000001.rec",
        "ledgertool-seal-v1",
        "ledgertool-seal-v2",
        "ledgertool-inclusion-proof-v1",
    ]
)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | _EDGE_INTS
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | _EDGE_STRS
)
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=6,
)


def _paths(node, prefix=()):
    """Every (container, key) slot in a JSON document, depth first."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


def _mutate_json(data, doc):
    """1..3 structured mutations: replace a value, delete a member, add a member, or stringify /
    numberify a scalar."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        paths = list(_paths(doc))
        if not paths:
            break
        path = data.draw(st.sampled_from(paths), label="path")
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        op = data.draw(
            st.sampled_from(["replace", "replace", "delete", "add", "retype"]), label="op"
        )
        if op == "replace":
            parent[key] = data.draw(JSON_VALUES, label="value")
        elif op == "delete":
            del parent[key]
        elif op == "add":
            if isinstance(parent, dict):
                parent[data.draw(st.text(max_size=8), label="new key")] = data.draw(
                    JSON_VALUES, label="value"
                )
            else:
                parent.insert(key, data.draw(JSON_VALUES, label="value"))
        else:
            v = parent[key]
            if isinstance(v, str) and v.lstrip("-").isdigit() and len(v) < 30:
                parent[key] = int(v)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                parent[key] = str(v)
            else:
                parent[key] = [v]
    return doc


def _mutate_bytes(data, raw: bytes) -> bytes:
    """1..4 byte-level edits: flip, overwrite, insert, delete, truncate."""
    b = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        if not b:
            b += data.draw(st.binary(min_size=1, max_size=8), label="bytes")
            continue
        i = data.draw(st.integers(0, len(b) - 1), label="at")
        op = data.draw(
            st.sampled_from(["flip", "set", "insert", "delete", "truncate"]), label="edit"
        )
        if op == "flip":
            b[i] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        elif op == "set":
            b[i] = data.draw(st.integers(0, 255), label="byte")
        elif op == "insert":
            b[i:i] = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
        elif op == "delete":
            del b[i : i + data.draw(st.integers(1, 8), label="n")]
        else:
            del b[i:]
    return bytes(b)


# ---- known findings (see the regression tests at the end) -----------------------------------


def _raised_in(exc: BaseException, function: str) -> bool:
    return any(fr.name == function for fr in traceback.extract_tb(exc.__traceback__))


def _known(exc: BaseException) -> bool:
    """An exception from a finding still open (none now: the three this harness found — non-ASCII
    segment header names, Infinity in a seal, a huge seal sequence range — are fixed and pinned by
    the regression tests below). LEDGERTOOL_FUZZ_STRICT is kept for compatibility."""
    return False


def _must_be_clean(fn, *args):
    """Call fn: a result or a LedgerError is fine; a known finding is skipped; anything else
    fails."""
    try:
        return fn(*args)
    except LedgerError:
        return None
    except Exception as e:  # noqa: BLE001 - the property under test
        if _known(e):
            assume(False)
        raise


# ---- segment headers ----------------------------------------------------------------------------


def _valid_header(world, mac_key_id: str | None = None) -> bytes:
    return SegmentHeader(
        ledger_id=load_ledger(world["ledger"]).ledger_id,
        link=LINK,
        index=3,
        algorithm="siphash-2-4-128",
        strip="frame",
        key_id="ab" * 16,
        record_size=48,
        digest_size=16,
        leaf_records=LEAF,
        first_seq=24,
        created_ns=1,
        mac_key_id=mac_key_id,
    ).encode()


@FUZZ
@given(data=st.data())
@example(data=None)
def test_segment_header_decode(world, data, tmp_path_factory):
    header = _valid_header(world)
    if data is None:  # the genuine header decodes
        assert SegmentHeader.decode(header, "x").first_seq == 24
        return
    v2 = _valid_header(world, "cd" * 16)  # authenticated blocks follow
    raw = data.draw(st.binary(max_size=300) | st.just(header) | st.just(v2), label="start")
    # a block count the body may not fill
    if raw in (header, v2) and data.draw(st.booleans(), label="v2 block"):
        raw += data.draw(st.integers(0, 2**32 - 1), label="count").to_bytes(4, "little")
    if raw == header or data.draw(st.booleans(), label="mutate"):
        raw = _mutate_bytes(data, raw)
    hdr = _must_be_clean(SegmentHeader.decode, raw, "fuzz.open")
    if hdr is not None:
        assert hdr.record_size == 32 + hdr.digest_size and hdr.digest_size in (16, 32)
    body = data.draw(st.binary(max_size=120), label="records")
    path = tmp_path_factory.getbasetemp() / "fuzz-seg.open"
    path.write_bytes(raw + body)
    seg = _must_be_clean(read_open_segment, path)
    if seg is not None:
        assert len(seg.records) == seg.count * seg.header.record_size
        if seg.header.version == 1:
            assert 0 <= seg.torn_bytes < seg.header.record_size
        else:  # every byte is in a whole block or counted past them
            framed = sum(4 + b.count * seg.header.record_size + 32 for b in seg.blocks)
            assert HEADER_SIZE + framed + seg.torn_bytes == len(raw + body)
            assert sum(b.count for b in seg.blocks) == seg.count


# ---- the ledger header (ledger.json) ------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_ledger_header(world, data):
    raw = (world["ledger"] / "ledger.json").read_bytes()
    if data.draw(st.booleans(), label="raw bytes"):
        raw = _mutate_bytes(data, raw)
    else:
        raw = json.dumps(_mutate_json(data, json.loads(raw))).encode()
    hdr = _must_be_clean(parse_ledger_header, raw, "fuzz/ledger.json")
    if hdr is not None:  # what verify, proof and the Merkle code may rely on
        assert valid_leaf_records(hdr.leaf_records) and hdr.record_size == 32 + hdr.digest_size
        assert type(hdr.digest_size) is int and hdr.digest_size in (16, 32)


# ---- key rotation statements -----------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_rotation_statement(world, data):
    raw = world["rotation_file"].read_bytes()
    if data.draw(st.booleans(), label="raw bytes"):
        raw = _mutate_bytes(data, raw)
    else:
        raw = json.dumps(_mutate_json(data, world["rotation"])).encode()
    scratch = world["dir"] / "fuzz-rotation"
    (scratch / ROTATIONS_DIR).mkdir(parents=True, exist_ok=True)
    (scratch / ROTATIONS_DIR / world["rotation_file"].name).write_bytes(raw)
    docs = _must_be_clean(load_rotations, scratch)
    if docs is None:
        return
    ledger_id = load_ledger(world["ledger"]).ledger_id
    sched = _must_be_clean(key_schedule, ledger_id, world["trust"], docs)
    if sched is not None:
        assert isinstance(sched.problems, list) and sched.epochs
        if raw != world["rotation_file"].read_bytes():
            assert sched.problems or len(sched.epochs) == 2


def test_rotation_statement_genuine(world):
    sched = key_schedule(
        load_ledger(world["ledger"]).ledger_id, world["trust"], load_rotations(world["rotated"])
    )
    assert not sched.problems and len(sched.epochs) == 2


# ---- checkpoints (signed notes) ---------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_checkpoint_note(world, data):
    note = world["note"]
    kind = data.draw(st.sampled_from(["bytes", "lines", "random"]), label="kind")
    if kind == "bytes":
        raw = _mutate_bytes(data, note)
    elif kind == "lines":
        lines = note.decode().split("\n")
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        lines[i] = data.draw(
            st.text(max_size=80) | _EDGE_STRS | st.just("\u2014 a b"), label="text"
        )
        raw = "\n".join(lines).encode("utf-8", "surrogatepass")
    else:
        raw = data.draw(st.binary(max_size=200), label="raw")
    parsed = _must_be_clean(parse_note, raw, "fuzz-checkpoint")
    if parsed is None:
        return
    reason = verify_note(parsed, [world["trust"]])
    assert reason is None or isinstance(reason, str)
    if parsed.checkpoint.ledger_id == load_ledger(world["ledger"]).ledger_id:
        findings = check_extends(parsed, world["tree"], [world["trust"]])
        assert isinstance(findings, list)


def test_checkpoint_note_genuine(world):
    parsed = parse_note(world["note"])
    assert verify_note(parsed, [world["trust"]]) is None
    assert check_extends(parsed, world["tree"], [world["trust"]]) == []


# ---- inclusion proofs -------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_proof(world, data, tmp_path_factory):
    proof = world["proof"]
    if data.draw(st.booleans(), label="raw bytes"):
        raw = _mutate_bytes(data, json.dumps(proof).encode())
    else:
        raw = json.dumps(_mutate_json(data, proof)).encode()
    path = tmp_path_factory.getbasetemp() / "fuzz-proof.json"
    path.write_bytes(raw)
    doc = _must_be_clean(load_proof, path)
    if doc is None:
        return
    res = _must_be_clean(check_proof, doc, world["trust"])
    if res is not None:
        assert isinstance(res, ProofCheck)
        assert res.ok in (True, False) and (res.ok or isinstance(res.reason, str))
        json.dumps(res.to_json(), allow_nan=True)  # the CLI prints it


def test_proof_genuine(world):
    assert check_proof(world["proof"], world["trust"]).ok


# ---- seal documents, through the whole verify path ---------------------------------------------


def _verify_with_seal(world, raw: bytes) -> VerifyResult | None:
    path = world["seal_path"]
    try:
        path.write_bytes(raw)
        _must_be_clean(load_seal, path)
        res = _must_be_clean(verify_ledger, world["ledger"], world["trust"])
        if res is not None:
            assert isinstance(res, VerifyResult)
            json.dumps(res.to_json() if hasattr(res, "to_json") else res.__dict__, default=str)
        return res
    finally:
        path.write_bytes(world["seal_bytes"])


@FUZZ_SLOW
@given(data=st.data())
def test_seal_structured(world, data):
    doc = _mutate_json(data, world["seal"])
    res = _verify_with_seal(world, json.dumps(doc).encode())
    if res is not None and doc != world["seal"]:
        assert res.problems, "a changed seal must not verify"


@FUZZ_SLOW
@given(data=st.data())
def test_seal_bytes(world, data):
    _verify_with_seal(world, _mutate_bytes(data, world["seal_bytes"]))


# ---- regression tests: findings of the fuzzing above ----------------------------------------


def _header_with(field: str, value: bytes, world) -> bytes:
    raw = bytearray(_valid_header(world))
    # offsets in segments._HEADER "<8sHHHH16sIIQ16s32s32s16sq": link 64, algorithm 96, strip 128
    at = {"link": 64, "algorithm": 96, "strip": 128}[field]
    raw[at : at + len(value)] = value
    return bytes(raw)


@pytest.mark.parametrize("field", ["link", "algorithm", "strip"])
def test_regression_segment_header_non_utf8(world, field):
    with pytest.raises(LedgerError):
        SegmentHeader.decode(_header_with(field, b"\xff\xfe", world), "torn.open")


def _seal_with(world, **changes) -> bytes:
    doc = dict(world["seal"])
    doc.update(changes)
    return json.dumps(doc).encode()


def test_regression_seal_infinite_count(world):
    # json.loads accepts the non-standard literal Infinity; the seal reader must not
    raw = world["seal_bytes"].replace(b'"records": 10', b'"records": Infinity')
    assert raw != world["seal_bytes"]
    assert "seal_unreadable" in _verify_with_seal_raw(world, raw)


@pytest.mark.parametrize(
    "first,last", [("10", "99999999999999999999"), ("-99999999999999999999", "19")]
)
def test_regression_seal_huge_seq_range(world, first, last):
    assert "seal_malformed" in _verify_with_seal_raw(
        world, _seal_with(world, first_seq=first, last_seq=last)
    )


def _verify_with_seal_raw(world, raw: bytes):
    """Like _verify_with_seal, without the known-finding filter: any non-LedgerError escapes."""
    path = world["seal_path"]
    try:
        path.write_bytes(raw)
        return {p.kind for p in verify_ledger(world["ledger"], world["trust"]).problems}
    finally:
        path.write_bytes(world["seal_bytes"])


def test_regression_verify_open_segment_non_utf8(world):
    path = layout.open_segment_path(world["ledger"], LINK, 3)
    try:
        path.write_bytes(_header_with("link", b"\xff", world) + bytes(48))
        res = verify_ledger(world["ledger"], world["trust"])
        assert any("not ASCII" in w.detail for w in res.warnings)
    finally:
        path.unlink(missing_ok=True)
