"""The documented formats (docs/ledger-format.md, docs/cli.md, schemas/) against what the CLI
writes.

One real run of the CLI on the bundled sample (keys, capture, verify, recompute, bench), then every
file and --json document is validated against its JSON Schema, the Arrow schemas and the segment
header layout are compared with the code, and the worked example in docs/ledger-format.md is
extracted and run as an independent implementation of signed bytes, seal hash, genesis hash, Merkle
root and digest key id. The capture makes a ledger of the default format (v2); a second capture with
--ledger-format v1, and a compacted copy of the first, give the Parquet and v1-seal forms.
"""

from __future__ import annotations

import base64
import csv
import json
import re
import shutil
import struct
from pathlib import Path

import jsonschema  # noqa: E402 - test extra
import pyarrow.parquet as pq
import pytest
from conftest import REPO, CliResult
from conftest import cli as run_in_process

SCHEMAS = REPO / "schemas"
SAMPLE = REPO / "samples" / "sample.pcapng"
SAMPLE_PCAP = REPO / "samples" / "sample.pcap"


def cli(*args, ok: tuple[int, ...] = (0,)) -> CliResult:
    proc = run_in_process(*args, cwd=REPO)
    assert proc.returncode in ok, (
        f"{args}: exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    )
    return proc


def cli_json(*args, ok: tuple[int, ...] = (0,)) -> dict:
    proc = cli(*args, ok=ok)
    return json.loads(proc.stdout)  # --json: exactly one JSON document on stdout


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


def validate(doc, name: str) -> None:
    s = schema(name)
    jsonschema.Draft202012Validator(s, format_checker=jsonschema.FormatChecker()).validate(doc)


def is_valid(doc, name: str) -> bool:
    return jsonschema.Draft202012Validator(schema(name)).is_valid(doc)


# ---- one CLI run shared by the tests ----------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("schemas")
    keys, ledger = tmp / "keys", tmp / "ledger"
    out = {"tmp": tmp, "keys": keys, "ledger": ledger}
    out["keys_report"] = cli_json("keys", "generate", keys, "--json")
    out["capture"] = cli_json(
        "capture",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        keys / "signing.key",
        "--segment-records",
        100,
        "--json",
    )
    out["ledger_v1"] = tmp / "ledger-v1"
    cli_json(
        "capture",
        SAMPLE,
        "--ledger",
        out["ledger_v1"],
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        keys / "signing.key",
        "--segment-records",
        100,
        "--ledger-format",
        "v1",
        "--json",
    )
    out["compacted"] = tmp / "compacted"
    shutil.copytree(ledger, out["compacted"])
    cli_json("compact", out["compacted"], "--json")
    out["verify"] = cli_json("verify", ledger, "--trust", keys / "verifier.pub", "--json")
    out["reconcile"] = cli_json(
        "recompute",
        SAMPLE,
        "--digest-key",
        keys / "digest.key",
        "--ledger",
        ledger,
        "--trust",
        keys / "verifier.pub",
        "--json",
    )
    out["digests_file"] = tmp / "digests.parquet"
    out["recompute_out"] = cli_json(
        "recompute",
        SAMPLE,
        "--digest-key",
        keys / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
        "--out",
        out["digests_file"],
        "--json",
    )
    out["bench_csv"] = tmp / "bench.csv"
    out["bench"] = cli_json(
        "bench",
        "--sizes",
        64,
        "--threads",
        1,
        "--capture-frames",
        2000,
        "--reference-frames",
        200,
        "--repeats",
        1,
        "--algorithm",
        "siphash-1-3-128",
        "--csv",
        out["bench_csv"],
        "--json",
    )
    return out


def seals(ledger: Path, link: str = "link0") -> list[dict]:
    paths = sorted((ledger / f"link={link}").glob("seg-*.seal.json"))
    return [json.loads(p.read_text()) for p in paths]


# ---- schemas are schemas ----------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.schema.json")), ids=lambda p: p.name)
def test_schema_files_are_valid_draft_2020_12(path):
    s = json.loads(path.read_text())
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(s)


# ---- files in the ledger and key directories --------------------------------------------------


def test_key_files(run):
    keys = run["keys"]
    validate(json.loads((keys / "signing.key").read_text()), "signing-key.schema.json")
    validate(json.loads((keys / "verifier.pub").read_text()), "verifier.schema.json")
    assert re.fullmatch(r"[0-9a-f]{64}\n", (keys / "digest.key").read_text())
    assert (keys / "digest.key").stat().st_mode & 0o777 == 0o600
    assert (keys / "signing.key").stat().st_mode & 0o777 == 0o600


def test_key_schemas_reject_wrong_shapes(run):
    sk = json.loads((run["keys"] / "signing.key").read_text())
    assert not is_valid(
        {k: v for k, v in sk.items() if k != "mldsa65_seed"}, "signing-key.schema.json"
    )
    assert not is_valid({**sk, "scheme": "ed25519"}, "signing-key.schema.json")  # extra ML-DSA seed
    vp = json.loads((run["keys"] / "verifier.pub").read_text())
    assert not is_valid({**vp, "keys": vp["keys"][:1]}, "verifier.schema.json")  # hybrid needs both


@pytest.mark.parametrize("which, fmt", [("ledger", "v2"), ("ledger_v1", "v1")], ids=["v2", "v1"])
def test_ledger_json_and_seals(run, which, fmt):
    ledger = run[which]
    header = json.loads((ledger / "ledger.json").read_text())
    validate(header, "ledger.schema.json")
    assert header["format"] == f"ledgertool-ledger-{fmt}"
    docs = seals(ledger)
    assert len(docs) == 3
    for doc in docs:
        validate(doc, "seal.schema.json")
        assert doc["format"] == f"ledgertool-seal-{fmt}" and ("parquet_sha256" in doc) == (
            fmt == "v1"
        )
    # u64 values are strings; an integer there is refused, as is an unknown member
    assert not is_valid({**docs[0], "first_seq": 0}, "seal.schema.json")
    assert not is_valid({**docs[0], "extra": 1}, "seal.schema.json")
    assert not is_valid({**docs[0], "algorithm": "siphash-1-3-64"}, "seal.schema.json")


def test_parquet_schema_matches_records_arrow_json(run):
    header = json.loads((run["ledger"] / "ledger.json").read_text())
    expected = json.loads((SCHEMAS / "records.arrow.json").read_text())
    # a v1 ledger's sealed Parquet and a v2 ledger's after compaction
    paths = [
        p
        for d in ("ledger_v1", "compacted")
        for p in sorted((run[d] / "link=link0").glob("seg-*.parquet"))
    ]
    assert len(paths) == 6
    for path in paths:
        got = pq.read_schema(path)
        assert [(f.name, str(f.type), f.nullable) for f in got] == [
            (c["name"], c["type"].format(digest_size=header["digest_size"]), c["nullable"])
            for c in expected
        ]
    from ledgertool.ledger.parquet import arrow_schema

    for size in (16, 32):
        assert [(f.name, str(f.type)) for f in arrow_schema(size)] == [
            (c["name"], c["type"].format(digest_size=size)) for c in expected
        ]


def test_recompute_digests_parquet_schema(run):
    expected = json.loads((SCHEMAS / "recompute-digests.arrow.json").read_text())
    got = pq.read_schema(run["digests_file"])
    assert [(f.name, str(f.type), f.nullable) for f in got] == [
        (c["name"], c["type"].format(digest_size=16), c["nullable"]) for c in expected
    ]


def test_record_layout_matches_docs():
    from ledgertool.digest.record import RECORD_FIXED, record_dtype

    assert RECORD_FIXED == struct.calcsize("<QqIIHHI") == 32
    dt = record_dtype(16)
    offsets = {name: dt.fields[name][1] for name in dt.names}
    assert offsets == {
        "seq": 0,
        "ts_ns": 8,
        "wire_len": 16,
        "cap_len": 20,
        "flags": 24,
        "linktype": 26,
        "aux": 28,
        "digest": 32,
    }
    assert dt.itemsize == 48 and record_dtype(32).itemsize == 64


def test_record_flags_match_docs():
    from ledgertool.digest import record

    doc = (REPO / "docs" / "ledger-format.md").read_text()
    for name in (
        "TRUNCATED",
        "MALFORMED",
        "NON_IP",
        "FRAGMENT",
        "UNSUPPORTED_LINKTYPE",
        "NO_TIMESTAMP",
        "CAPLEN_GT_SNAPLEN",
        "GAP",
    ):
        value = getattr(record, f"FLAG_{name}")
        assert f"| `{name}` | `0x{value:04X}` |" in doc, name


def test_segment_header_layout_matches_code():
    from ledgertool.ledger import segment as segments

    layout = json.loads((SCHEMAS / "segment-header.json").read_text())
    assert layout["size"] == segments.HEADER_SIZE == 256
    assert layout["magic"].encode() == segments.SEGMENT_MAGIC_V2
    assert layout["v1_magic"].encode() == segments.SEGMENT_MAGIC
    codes = re.findall(
        r"(\d*)([A-Za-z])",
        segments._HEADER.format.lstrip("<")
        + segments._MAC_KEY_ID.format.lstrip("<")
        + segments._TIER.format.lstrip("<"),
    )
    type_code = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i64": "q"}
    fields = [f for f in layout["fields"] if f["field"] != "reserved"]
    assert len(fields) == len(codes)
    offset = 0
    for f, (count, code) in zip(fields, codes):
        fmt = count + code
        assert f["offset"] == offset, f
        assert f["size"] == struct.calcsize("<" + fmt), f
        m = re.fullmatch(r"(bytes|char)\[(\d+)\]", f["type"])
        assert (m and code == "s" and int(m.group(2)) == int(count)) or type_code.get(
            f["type"]
        ) == code, f
        offset += f["size"]
    reserved = layout["fields"][-1]
    assert (
        reserved["field"] == "reserved"
        and reserved["offset"]
        == offset
        == segments._HEADER.size + segments._MAC_KEY_ID.size + segments._TIER.size
    )
    assert reserved["offset"] + reserved["size"] == segments.HEADER_SIZE


def test_segment_header_values_at_documented_offsets():
    from ledgertool.ledger.segment import SegmentHeader

    hdr = SegmentHeader(
        "00112233445566778899aabbccddeeff",
        "linkA",
        7,
        "siphash-2-4-128",
        "frame",
        "ffeeddccbbaa99887766554433221100",
        48,
        16,
        64,
        2**40 + 5,
        -3,
        "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
    )
    raw = hdr.encode()
    at = {
        f["field"]: f for f in json.loads((SCHEMAS / "segment-header.json").read_text())["fields"]
    }

    def field(name):
        f = at[name]
        return raw[f["offset"] : f["offset"] + f["size"]]

    unpack = {"u16": "<H", "u32": "<I", "u64": "<Q", "i64": "<q"}

    def num(name):
        return struct.unpack(unpack[at[name]["type"]], field(name))[0]

    assert field("magic") == b"LTSEGv2\n" and field("mac_key_id").hex() == hdr.mac_key_id
    assert (num("version"), num("header_size"), num("record_size"), num("digest_size")) == (
        2,
        256,
        48,
        16,
    )
    assert field("ledger_id").hex() == hdr.ledger_id and field("digest_key_id").hex() == hdr.key_id
    assert (num("segment"), num("leaf_records"), num("first_seq"), num("created_ns")) == (
        7,
        64,
        2**40 + 5,
        -3,
    )
    assert (
        field("link").rstrip(b"\0") == b"linkA"
        and field("algorithm").rstrip(b"\0") == b"siphash-2-4-128"
    )
    assert field("strip").rstrip(b"\0") == b"frame" and field("reserved") == bytes(
        at["reserved"]["size"]
    )


# ---- --json reports ---------------------------------------------------------------------------


def test_capture_report(run):
    rep = run["capture"]
    validate(rep, "capture-report.schema.json")
    assert rep["frames"] == 294 and rep["segments"] == [0, 1, 2]


def test_verify_report_ok(run):
    rep = run["verify"]
    validate(rep, "verify-report.schema.json")
    assert rep["ok"] and rep["problems"] == [] and rep["records"] == 294


def test_verify_report_with_problems(run, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(run["ledger"], bad)
    (bad / "link=link0" / "seg-00000001.seal.json").unlink()
    rep = cli_json("verify", bad, "--trust", run["keys"] / "verifier.pub", "--json", ok=(1,))
    validate(rep, "verify-report.schema.json")
    assert not rep["ok"]
    assert {"segment_missing", "chain_broken", "sequence_gap"} <= {
        p["kind"] for p in rep["problems"]
    }


def test_verify_problem_kinds_match_code():
    from ledgertool.verify.problems import Kind

    props = schema("verify-report.schema.json")["properties"]
    kinds = set(props["problems"]["items"]["properties"]["kind"]["enum"])
    warnings = set(props["warnings"]["items"]["properties"]["kind"]["enum"])
    assert {k.value for k in Kind if not k.is_warning} == kinds
    assert {k.value for k in Kind if k.is_warning} == warnings
    # every kind is emitted: verify's modules name it (Kind.X); checkpoint and signature findings
    # come from seal/checkpoint.py and keyfiles.py by value
    verify = "\n".join(
        p.read_text()
        for p in (REPO / "ledgertool" / "verify").glob("*.py")
        if p.name != "problems.py"
    )
    other = "\n".join(
        (REPO / "ledgertool" / m).read_text() for m in ("seal/checkpoint.py", "keyfiles.py")
    )
    for k in Kind:
        assert f"Kind.{k.name}" in verify or f'"{k.value}"' in other, (
            f"schema lists {k.value}, verify never emits it"
        )
    doc = (REPO / "docs" / "ledger-format.md").read_text()
    for kind in kinds:
        assert f"`{kind}`" in doc, f"docs/ledger-format.md does not describe {kind}"


def test_recompute_reports(run, tmp_path):
    validate(run["reconcile"], "recompute-report.schema.json")
    assert run["reconcile"]["ok"] and run["reconcile"]["matched"] == 294
    validate(run["recompute_out"], "recompute-report.schema.json")
    assert run["recompute_out"]["frames"] == 294
    # a capture missing one frame: reconcile fails with an example
    data = SAMPLE_PCAP.read_bytes()
    off, recs = 24, []
    while off < len(data):
        cap = struct.unpack_from("<I", data, off + 8)[0]
        recs.append(data[off : off + 16 + cap])
        off += 16 + cap
    short = tmp_path / "short.pcap"
    short.write_bytes(data[:24] + b"".join(recs[:10] + recs[11:]))
    rep = cli_json(
        "recompute",
        short,
        "--digest-key",
        run["keys"] / "digest.key",
        "--ledger",
        run["ledger"],
        "--trust",
        run["keys"] / "verifier.pub",
        "--json",
        ok=(1,),
    )
    validate(rep, "recompute-report.schema.json")
    assert rep["ledger_only"] == 1 and rep["examples_ledger_only"][0]["seq"] == "10"


def test_bench_report_and_csv(run):
    validate(run["bench"], "bench-report.schema.json")
    kinds = [r["benchmark"] for r in run["bench"]["rows"]]
    from ledgertool.bench.measure import digest_paths, usable_cores

    want = ["digest"] * len(digest_paths("siphash-1-3-128", "best"))
    want += ["capture:engine", "capture:sealed", "capture:windows"] * len({1, usable_cores()})
    want += ["capture:python-reference"]
    assert kinds in (want, want + ["capture:tcpdump"])
    row_schema = schema("bench.csv.schema.json")
    with open(run["bench_csv"], newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == row_schema["x-csv-columns"]
        rows = list(reader)
    assert len(rows) == len(kinds)
    for row in rows:
        validate(row, "bench.csv.schema.json")


# ---- the worked example in docs/ledger-format.md, run as written ------------------------------


def worked_example() -> dict:
    text = (REPO / "docs" / "ledger-format.md").read_text()
    section = text.split("## Worked example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert not re.search(r"^\s*(import|from)\s+ledgertool", code, re.M), (
        "the worked example must not use ledgertool"
    )
    ns: dict = {}
    exec(compile(code, "docs/ledger-format.md (worked example)", "exec"), ns)
    return ns


def worked_example_v2() -> dict:
    """The v2 worked example, run after the v1 one whose functions it reuses."""
    ns = worked_example()
    section = (REPO / "docs" / "ledger-format.md").read_text().split("## Worked example, v2", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert not re.search(r"^\s*(import|from)\s+ledgertool", code, re.M)
    exec(compile(code, "docs/ledger-format.md (worked example, v2)", "exec"), ns)
    return ns


@pytest.mark.parametrize("which", ["ledger_v1", "ledger"], ids=["v1", "v2"])
def test_worked_example_recomputes_seals_independently(run, which):
    """The worked example of the ledger's format checks the CLI's ledger: v1 each seal's Parquet
    file, v2 each raw record file (tests/unit/test_worked_example_v2.py runs it on the tests'
    reference writer's ledgers and on tampered copies)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA65PublicKey

    ex = worked_example() if which == "ledger_v1" else worked_example_v2()
    ledger = run[which]
    header = json.loads((ledger / "ledger.json").read_text())
    trust = {
        k["algorithm"]: base64.b64decode(k["public_key"])
        for k in json.loads((run["keys"] / "verifier.pub").read_text())["keys"]
    }
    master = bytes.fromhex((run["keys"] / "digest.key").read_text().strip())
    assert ex["digest_key_id"](master, header["algorithm"], 16) == header["digest_key_id"]

    prev = ex["genesis_hash"](header["ledger_id"], "link0")
    docs = seals(ledger)
    assert docs
    for doc in docs:
        assert doc["prev_seal_hash"] == prev
        if which == "ledger_v1":
            parquet = ledger / "link=link0" / doc["parquet_file"]
            assert ex["records_root"](parquet, header["leaf_records"]) == doc["merkle_root"]
        else:
            rec = ledger / "link=link0" / f"seg-{doc['segment']:08d}.rec"
            records = ex["check_v2_records"](doc, rec)
            assert len(records) == doc["records"] * 48 and struct.unpack_from("<Q", records)[
                0
            ] == int(doc["first_seq"])
        msg = ex["signed_bytes"](doc)
        Ed25519PublicKey.from_public_bytes(trust["ed25519"]).verify(
            base64.b64decode(doc["signatures"]["ed25519"]), msg
        )
        MLDSA65PublicKey.from_public_bytes(trust["ml-dsa-65"]).verify(
            base64.b64decode(doc["signatures"]["ml-dsa-65"]), msg
        )
        prev = ex["seal_hash"](doc)

    # the same functions agree with the library's
    from ledgertool.ledger.parquet import records_to_table
    from ledgertool.seal import document as seal_mod
    from ledgertool.seal import merkle

    assert ex["signed_bytes"](docs[0]) == seal_mod.seal_signed_bytes(docs[0])
    assert ex["seal_hash"](docs[0]) == seal_mod.seal_hash(docs[0])
    assert ex["genesis_hash"](header["ledger_id"], "x.y") == seal_mod.genesis_hash(
        header["ledger_id"], "x.y"
    )
    # last leaf shorter than the others, odd leaf counts, one leaf, no records
    for n in (0, 1, 5, 64, 65, 200, 257):
        records = b"".join(
            struct.pack("<QqIIHHI", i, i * 7, 60, 60, 0, 1, 0) + bytes([i % 256]) * 16
            for i in range(n)
        )
        want = merkle.records_root(records, 48, 4).hex()
        tmp = run["tmp"] / f"rr-{n}.parquet"
        pq.write_table(records_to_table(records, 16, 0), tmp)
        assert ex["records_root"](tmp, 4) == want, n


def test_worked_example_detects_a_changed_record(run, tmp_path):
    """v1's Parquet form (a changed raw record file: tests/unit/test_worked_example_v2.py)."""
    ex = worked_example()
    header = json.loads((run["ledger_v1"] / "ledger.json").read_text())
    doc = seals(run["ledger_v1"])[1]
    table = pq.read_table(run["ledger_v1"] / "link=link0" / doc["parquet_file"])
    rows = table.to_pylist()
    rows[37]["wire_len"] += 1
    changed = tmp_path / "changed.parquet"
    pq.write_table(type(table).from_pylist(rows, schema=table.schema), changed)
    assert ex["records_root"](changed, header["leaf_records"]) != doc["merkle_root"]
