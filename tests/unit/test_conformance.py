"""The conformance kit: `conformance export DIR` and `conformance check`.

The kit is checked against things that do not share its code: the strip ranges against the scapy
oracle of tests/unit/test_strip.py, the digests against independent implementations (pure-Python
SipHash, the blake3 package, AES-GCM and hmac from the standard library and `cryptography`), the
subkeys against HKDF written out with hmac, the records against struct packing, the Merkle leaves
and the seals against the hashlib/rfc8785 code of docs/ledger-format.md's worked example, and the
captures against scapy's own pcap reader. Then the project's implementation must pass its own kit
on every CPU path this machine has (docs/devices.md says what the arm64 NEON run covers), and
`check` must catch an off-by-one in strip offsets and a wrong key, naming which.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import rfc8785
import test_strip
from conftest import REPO, cli
from test_digests import reference
from test_schemas_reports import is_valid, validate

from ledgertool.algorithms import ALGORITHMS
from ledgertool.device.cases import CASES, CATEGORIES
from ledgertool.device.conformance import KIT_MASTER_KEY, check_records
from ledgertool.device.kit import export_kit, kit_signing_key
from ledgertool.digest.engine import cpu_path, cpu_paths, force_cpu_path
from ledgertool.digest.reference import siphash
from ledgertool.keyfiles import DigestKey

LEDGER_ALGS = [a for a in ALGORITHMS.values() if a.ledger_ok]
STRIPS = ["frame", "l3", "payload", "rdma"]


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("kit") / "kit"
    r = cli("conformance", "export", d, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    validate(rep, "conformance-export-report.schema.json")
    assert rep["frames"] == len(CASES) and rep["record_files"] == rep["captures"] * len(
        LEDGER_ALGS
    ) * len(STRIPS)
    return d


def load(kit: Path, rel: str):
    return json.loads((kit / rel).read_text())


def independent_subkey(master: bytes, name: str, size: int) -> bytes:
    prk = hmac.new(b"\0" * 32, master, "sha256").digest()  # RFC 5869 extract, empty salt
    return hmac.new(prk, b"ledgertool digest v1 " + name.encode() + b"\x01", "sha256").digest()[
        :size
    ]


def independent_digest(name: str, key: bytes, msg: bytes) -> bytes:
    if name.startswith("siphash-"):
        c, d = (1, 3) if name.startswith("siphash-1-3") else (2, 4)
        return siphash(key, msg, c, d, 16)
    return reference(name, key, msg)


def mth(hashes: list[bytes]) -> bytes:  # docs/ledger-format.md worked example, RFC 9162 s2.1.1
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + mth(hashes[:k]) + mth(hashes[k:])).digest()


# ---- the kit's files
# ------------------------------------------------------------------------------


def test_every_vector_file_names_its_format_version_and_generator(kit):
    manifest = load(kit, "kit.json")
    validate(manifest, "conformance-kit.schema.json")
    for rel, schema in [
        ("frames.json", "conformance-frames.schema.json"),
        ("merkle.json", "conformance-merkle.schema.json"),
        ("seals.json", "conformance-seals.schema.json"),
        *((f"digests/{a.name}.json", "conformance-digests.schema.json") for a in LEDGER_ALGS),
    ]:
        doc = load(kit, rel)
        validate(doc, schema)
        assert doc["kit_version"] == 1 and doc["format"].endswith("-v1")
        assert doc["generated_by"]["command"] == "ledgertool conformance export DIR"
        assert doc["generated_by"]["tool"].startswith("ledgertool ")
    listed = (
        [c["file"] for c in manifest["captures"]]
        + [r["file"] for r in manifest["records"]]
        + [v["file"] for v in manifest["vector_files"]]
    )
    shas = (
        {c["file"]: c["sha256"] for c in manifest["captures"]}
        | {r["file"]: r["sha256"] for r in manifest["records"]}
        | {v["file"]: v["sha256"] for v in manifest["vector_files"]}
    )
    for rel in listed:
        assert hashlib.sha256((kit / rel).read_bytes()).hexdigest() == shas[rel], rel
    readme = (kit / "README.md").read_text()
    assert (
        "ledgertool-conformance-kit-v1" in readme
        and "cmp mine.records" in readme
        and "$" not in readme.replace("$ ", "")
    )
    assert (kit / "digest.key").read_text() == KIT_MASTER_KEY.hex() + "\n"
    assert os.stat(kit / "digest.key").st_mode & 0o777 == 0o600  # loadable by --digest-key


def test_the_kit_is_reproducible(kit, tmp_path):
    again = tmp_path / "again"
    export_kit(again)
    names = sorted(str(p.relative_to(kit)) for p in kit.rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(again)) for p in again.rglob("*") if p.is_file())
    random_parts = [n for n in names if n.startswith("golden-ledger/") or n == "seals.json"]
    for n in names:
        if n not in random_parts:
            assert (kit / n).read_bytes() == (again / n).read_bytes(), n
    assert len(names) - len(random_parts) > 200


def test_the_kit_covers_every_strip_case_category_and_test_strip_knows_them_all(kit):
    frames = load(kit, "frames.json")["frames"]
    assert {f["category"] for f in frames} == set(CATEGORIES)
    names = {f["name"] for f in frames}
    # every frame tests/unit/test_strip.py crafts is in the kit
    assert set(test_strip.CRAFTED) <= names
    roce = [f for f in frames if f["name"].startswith("rocev2-") and f["category"] == "rocev2"]
    assert len(roce) >= 23 + 12 + 2
    flags = set()
    for f in frames:
        for s in f["strip"].values():
            flags.update(s["flag_names"])
    assert flags == {"TRUNCATED", "MALFORMED", "NON_IP", "FRAGMENT", "UNSUPPORTED_LINKTYPE"}


def test_captures_read_back_with_scapy_equal_frames_json(kit):
    from scapy.utils import RawPcapReader

    frames = load(kit, "frames.json")["frames"]
    for cap in load(kit, "kit.json")["captures"]:
        mine = [f for f in frames if f["capture"] == cap["name"]]
        with RawPcapReader(str(kit / cap["file"])) as r:
            got = list(r)
            assert r.linktype == cap["linktype"]
        assert len(got) == len(mine) == cap["frames"]
        for (data, meta), f in zip(got, mine):
            assert (
                data.hex() == f["frame"]
                and meta.wirelen == f["wire_len"]
                and meta.caplen == f["cap_len"]
            )
            assert meta.sec * 10**9 + meta.usec * 1000 == int(f["ts_ns"])
            case = next(c for c in CASES if c.name == f["name"])
            assert bytes.fromhex(f["frame"]) == case.frame and case.scapy == f["scapy"]


# The three cases the oracle of tests/unit/test_strip.py cannot judge, with the answer written out:
# scapy swallows an over-long IPv6 option header whole, does not know a RoCE datagram too short for
# its RETH, and reads a big-endian loopback family as the little-endian one.
ORACLE_BLIND = {
    "ipv6-ext-past-packet": {"payload": (54, 107, 0x2), "rdma": (54, 107, 0x2)},
    "rocev2-too-short-for-reth": {"rdma": (54, 66, 0x2)},
    "null-ipv6-be-30": {"l3": (4, 89, 0), "payload": (52, 89, 0), "rdma": (52, 89, 0)},
}


def test_kit_strip_ranges_agree_with_the_scapy_oracle(kit):
    checked = flags_only = 0
    for f in load(kit, "frames.json")["frames"]:
        frame = bytes.fromhex(f["frame"])
        for mode in STRIPS:
            s = f["strip"][mode]
            blind = ORACLE_BLIND.get(f["name"], {}).get(mode)
            if blind:
                assert (s["offset"], s["offset"] + s["length"], s["flags"]) == blind, (
                    f["name"],
                    mode,
                )
                continue
            exp, got = test_strip.check(frame, f["linktype"], mode, f["wire_len"])
            trunc = 0x1 if f["cap_len"] < f["wire_len"] else 0
            assert (got.offset, got.length, got.flags | trunc) == (
                s["offset"],
                s["length"],
                s["flags"],
            )
            if exp is not None and exp.range is not None:
                checked += 1
            elif exp is not None:
                flags_only += 1
    total = len(CASES) * len(STRIPS)
    print(f"oracle: {checked} ranges, {flags_only} flags only, of {total}")
    assert checked >= 0.85 * total


def test_kit_digests_and_records_equal_independent_implementations(kit):
    manifest = load(kit, "kit.json")
    frames = load(kit, "frames.json")["frames"]
    for a in LEDGER_ALGS:
        doc = load(kit, f"digests/{a.name}.json")
        sub = independent_subkey(KIT_MASTER_KEY, a.name, a.key_size)
        assert doc["subkey"] == sub.hex() == manifest["digest_key"]["algorithms"][a.name]["subkey"]
        assert (
            doc["digest_key_id"]
            == hashlib.sha256(b"ledgertool key id v1\0" + sub).digest()[:16].hex()
        )
        by_file: dict[str, bytes] = {}
        for f, d in zip(frames, doc["frames"]):
            assert (f["capture"], f["index"]) == (d["capture"], d["index"])
            frame = bytes.fromhex(f["frame"])
            for mode in STRIPS:
                s = f["strip"][mode]
                want = independent_digest(
                    a.name, sub, frame[s["offset"] : s["offset"] + s["length"]]
                )
                assert d["digests"][mode] == want.hex(), (a.name, f["name"], mode)
                rec = (
                    struct.pack(
                        "<QqIIHHI",
                        f["index"],
                        int(f["ts_ns"]),
                        f["wire_len"],
                        f["cap_len"],
                        s["flags"],
                        f["linktype"],
                        0,
                    )
                    + want
                )
                assert d["records"][mode] == rec.hex()
                rel = f"records/{f['capture']}/{a.name}.{mode}.records"
                by_file[rel] = by_file.get(rel, b"") + rec
        for rel, data in by_file.items():
            assert (kit / rel).read_bytes() == data, rel


def test_merkle_vectors_equal_the_worked_example(kit):
    doc = load(kit, "merkle.json")
    lr = doc["leaf_records"]
    assert lr == 4 and len(doc["files"]) == len(load(kit, "kit.json")["records"])
    for entry in doc["files"]:
        data = (kit / entry["file"]).read_bytes()
        rs = len(data) // entry["records"]
        leaves = [
            hashlib.sha256(b"\x00" + data[i : i + lr * rs]).digest()
            for i in range(0, len(data), lr * rs)
        ]
        assert [h.hex() for h in leaves] == entry["leaf_hashes"]
        assert mth(leaves).hex() == entry["root"]


def test_golden_ledger_verifies_and_holds_the_kit_records(kit):
    g = load(kit, "kit.json")["golden_ledger"]
    r = cli("verify", kit / g["directory"], "--trust", kit / g["trust"], "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["segments"] == g["segments"] == 3
    rows = []
    for p in sorted((kit / g["directory"] / "link=link0").glob("seg-*.parquet")):
        rows += pq.read_table(p).to_pylist()
    recs = b"".join(
        struct.pack(
            "<QqIIHHI",
            x["seq"],
            x["ts_ns"],
            x["wire_len"],
            x["cap_len"],
            x["flags"],
            x["linktype"],
            x["aux"],
        )
        + x["digest"]
        for x in rows
    )
    assert recs == (kit / g["records_file"]).read_bytes()
    assert json.loads((kit / g["trust"]).read_text()) == kit_signing_key().trust_bundle().to_dict()


def test_golden_ledger_is_the_format_kit_json_names(kit):
    """kit.json says (and its schema requires) ledgertool-ledger-v1; when capture's default became
    v2 the kit wrote a v2 golden ledger under that manifest (raw record files, no Parquet)."""
    g = load(kit, "kit.json")
    ledger = json.loads((kit / g["golden_ledger"]["directory"] / "ledger.json").read_text())
    assert ledger["format"] == g["ledger_format"] == "ledgertool-ledger-v1"
    names = sorted(
        p.name for p in (kit / g["golden_ledger"]["directory"] / "link=link0").glob("seg-*")
    )
    assert names == [
        f"seg-{i:08d}.{k}" for i in range(3) for k in ("leaves", "parquet", "seal.json")
    ]


def test_seal_vectors_recompute_with_rfc8785_alone(kit):
    doc = load(kit, "seals.json")
    prev = None
    for s in doc["seals"]:
        seal = json.loads((kit / s["file"]).read_text())
        body = rfc8785.dumps({k: v for k, v in seal.items() if k != "signatures"})
        assert s["signed_bytes"].encode() == b"ledgertool seal v1\n" + body
        assert s["signed_bytes_sha256"] == hashlib.sha256(s["signed_bytes"].encode()).hexdigest()
        assert s["seal_hash"] == s["canonical_body_sha256"] == hashlib.sha256(body).hexdigest()
        assert s["prev_seal_hash"] == (prev or s["genesis_hash"])
        assert (
            mth([bytes.fromhex(h) for h in s["leaf_hashes"]]).hex()
            == s["merkle_root"]
            == seal["merkle_root"]
        )
        prev = s["seal_hash"]
    assert (
        doc["seals"][0]["genesis_hash"]
        == hashlib.sha256(
            b"ledgertool genesis v1\0" + bytes.fromhex(doc["ledger_id"]) + b"\0link0"
        ).hexdigest()
    )


def test_export_refuses_a_directory_that_is_not_empty(kit, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").write_text("1")
    r = cli("conformance", "export", tmp_path / "x")
    assert r.returncode == 2 and "not an empty directory" in r.stderr and r.stdout == ""
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["keep"]
    assert not list(tmp_path.glob(".x.tmp-*"))


# ---- the project's implementation passes its own kit
# ------------------------------------------------


@pytest.mark.parametrize(
    "alg_path",
    [(a.name, p) for a in LEDGER_ALGS for p in cpu_paths(a)],
    ids=lambda t: f"{t[0]}@{t[1]}",
)
def test_own_implementation_passes_the_kit_on_every_cpu_path(kit, alg_path):
    name, path = alg_path
    alg = ALGORITHMS[name]
    key = DigestKey.load(kit / "digest.key")
    force_cpu_path(alg, path)
    try:
        assert cpu_path(alg) == path
        for cap in load(kit, "kit.json")["captures"]:
            for mode in STRIPS:
                res = check_records(
                    kit / cap["file"],
                    kit / f"records/{cap['name']}/{name}.{mode}.records",
                    key,
                    name,
                    mode,
                )
                assert res.ok and res.matched == res.frames == cap["frames"], (
                    cap["name"],
                    mode,
                    res.first_differences,
                )
    finally:
        force_cpu_path(alg, None)


# ---- check catches what a hardware pipeline gets wrong
# ----------------------------------------------


def device_records(
    kit: Path,
    alg_name: str,
    strip: str,
    start: int = 0,
    end: int = 0,
    key: bytes | None = None,
    capture: str = "ethernet",
) -> bytes:
    """Records of a simulated pipeline that hashes frame[offset + start : offset + length + end],
    optionally under another master key: built with independent digests and struct."""
    a = ALGORITHMS[alg_name]
    sub = independent_subkey(key or KIT_MASTER_KEY, a.name, a.key_size)
    out = b""
    for f in load(kit, "frames.json")["frames"]:
        if f["capture"] != capture:
            continue
        s, frame = f["strip"][strip], bytes.fromhex(f["frame"])
        lo = min(max(0, s["offset"] + start), len(frame))
        hi = min(max(lo, s["offset"] + s["length"] + end), len(frame))
        out += struct.pack(
            "<QqIIHHI",
            f["index"],
            int(f["ts_ns"]),
            f["wire_len"],
            f["cap_len"],
            s["flags"],
            f["linktype"],
            0,
        ) + independent_digest(a.name, sub, frame[lo:hi])
    return out


def check_cli(kit, records: Path, *extra):
    return cli(
        "conformance",
        "check",
        kit / "captures/ethernet.pcap",
        "--records",
        records,
        "--digest-key",
        kit / "digest.key",
        *extra,
    )


@pytest.mark.parametrize(
    "start,end,note",
    [(1, 0, "start +1"), (0, -1, "end -1"), (-1, 0, "start -1"), (2, -2, "start +2, end -2")],
)
def test_check_catches_an_off_by_one_in_strip_offsets(kit, tmp_path, start, end, note):
    (tmp_path / "dev.records").write_bytes(
        device_records(kit, "blake3-keyed-128", "l3", start, end)
    )
    r = check_cli(
        kit, tmp_path / "dev.records", "--algorithm", "blake3-keyed-128", "--strip", "l3", "--json"
    )
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    validate(rep, "conformance-check-report.schema.json")
    assert not rep["ok"] and rep["differing"] > 90 and rep["frames"] == rep["device_records"] == 102
    first = rep["first_differences"][0]
    assert first["fields"] == ["digest"] and first["summary"].startswith(
        "IPv4 192.0.2.1 > 198.51.100.2"
    )
    o, e = first["expected_range"]
    assert first["device_range"] == [o + start, e + end] and note in first["device_range_note"]
    assert "strip l3: hashed bytes" in first["explanation"]
    # the text report says the same, frame by frame
    r = check_cli(
        kit,
        tmp_path / "dev.records",
        "--algorithm",
        "blake3-keyed-128",
        "--strip",
        "l3",
        "--max-report",
        "2",
    )
    assert r.returncode == 1 and r.stdout.startswith("DIFFER: 102 frames")
    assert (
        r.stdout.count(note) == 2
        and "frame 0: digest differs" in r.stdout
        and "more differing frames not shown" in r.stdout
    )


def test_check_catches_a_wrong_key(kit, tmp_path):
    (tmp_path / "dev.records").write_bytes(
        device_records(kit, "siphash-1-3-128", "payload", key=bytes(32))
    )
    r = check_cli(kit, tmp_path / "dev.records", "--strip", "payload", "--json")
    assert r.returncode == 1
    rep = json.loads(r.stdout)
    assert rep["matched"] == 0 and rep["differing"] == 102
    for d in rep["first_differences"]:
        assert d["fields"] == ["digest"] and d["device_range"] is None
        assert "look at the key" in d["device_range_note"]
    # with the key the device really used, the same records are byte-exact
    (tmp_path / "zero.key").write_text("00" * 32 + "\n")
    os.chmod(tmp_path / "zero.key", 0o600)
    assert (
        cli(
            "conformance",
            "check",
            kit / "captures/ethernet.pcap",
            "--records",
            tmp_path / "dev.records",
            "--strip",
            "payload",
            "--digest-key",
            tmp_path / "zero.key",
        ).returncode
        == 0
    )


def test_check_catches_the_wrong_strip_mode_and_names_it(kit):
    r = check_cli(
        kit,
        kit / "records/ethernet/hmac-sha256-128.payload.records",
        "--algorithm",
        "hmac-sha256-128",
        "--strip",
        "l3",
        "--json",
    )
    rep = json.loads(r.stdout)
    assert r.returncode == 1
    assert (
        "the device hashed strip payload's range"
        in rep["first_differences"][0]["device_range_note"]
    )


def test_check_names_record_fields_and_missing_or_extra_records(kit, tmp_path):
    good = (kit / "records/ethernet/siphash-2-4-128.frame.records").read_bytes()
    rs = 48
    bad = bytearray(good)
    bad[5 * rs + 8] ^= 1  # ts_ns of frame 5
    bad[7 * rs + 24] |= 0x2  # flags of frame 7
    (tmp_path / "f.records").write_bytes(bad)
    rep = json.loads(
        check_cli(kit, tmp_path / "f.records", "--algorithm", "siphash-2-4-128", "--json").stdout
    )
    assert [(d["index"], d["fields"]) for d in rep["first_differences"]] == [
        (5, ["ts_ns"]),
        (7, ["flags"]),
    ]
    assert (
        rep["first_differences"][1]["device"]["flag_names"] == ["MALFORMED"]
        and rep["differing"] == 2
    )
    (tmp_path / "short.records").write_bytes(good[: -2 * rs])
    rep = json.loads(
        check_cli(
            kit, tmp_path / "short.records", "--algorithm", "siphash-2-4-128", "--json"
        ).stdout
    )
    assert [(d["index"], d["fields"]) for d in rep["first_differences"]] == [
        (100, ["missing record"]),
        (101, ["missing record"]),
    ]
    (tmp_path / "long.records").write_bytes(good + good[:rs])
    rep = json.loads(
        check_cli(kit, tmp_path / "long.records", "--algorithm", "siphash-2-4-128", "--json").stdout
    )
    assert [(d["index"], d["fields"]) for d in rep["first_differences"]] == [
        (102, ["extra record"])
    ]
    assert rep["matched"] == 102 and rep["differing"] == 1 and not rep["ok"]


@pytest.mark.parametrize(
    "what,needle",
    [
        (
            "cut",
            "is not a whole number of 48-byte siphash-1-3-128 records: record 2 is cut at byte 96",
        ),
        ("missing", "file not found"),
        ("algorithm", "unknown algorithm"),
        ("sixty-four", "64-bit digests"),
        ("capture", "not a pcap, pcapng or ERF capture (unknown magic"),
    ],
)
def test_check_refuses_bad_input(kit, tmp_path, what, needle):
    recs = kit / "records/ethernet/siphash-1-3-128.frame.records"
    cap = kit / "captures/ethernet.pcap"
    extra: list = []
    if what == "cut":
        (tmp_path / "r").write_bytes(recs.read_bytes()[:100])
        recs = tmp_path / "r"
    elif what == "missing":
        recs = tmp_path / "nope"
    elif what == "algorithm":
        extra = ["--algorithm", "md5"]
    elif what == "sixty-four":
        extra = ["--algorithm", "siphash-1-3-64"]
    elif what == "capture":
        cap = kit / "kit.json"
    r = cli(
        "conformance", "check", cap, "--records", recs, "--digest-key", kit / "digest.key", *extra
    )
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr and r.stdout == ""


def test_check_report_schema_rejects_wrong_shapes(kit):
    r = check_cli(kit, kit / "records/ethernet/siphash-1-3-128.frame.records", "--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 0 and rep["ok"] and rep["first_differences"] == []
    validate(rep, "conformance-check-report.schema.json")
    assert not is_valid({**rep, "extra": 1}, "conformance-check-report.schema.json")
    assert not is_valid({**rep, "strip": "l4"}, "conformance-check-report.schema.json")


def test_record_layout_file_matches_the_engine():
    from ledgertool.digest.record import record_dtype

    layout = json.loads((REPO / "schemas" / "record.json").read_text())
    dt = record_dtype(16)
    assert [f["field"] for f in layout["fields"]] == list(dt.names)
    for f in layout["fields"]:
        assert dt.fields[f["field"]][1] == f["offset"]
        if isinstance(f["size"], int):
            assert dt.fields[f["field"]][0].itemsize == f["size"]
