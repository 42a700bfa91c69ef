"""The --json reports of the commands not covered by tests/unit/test_schemas.py, against their
schemas.

Each command runs for real (in this process, through `main`'s error mapping, in tmp_path) on keys
from `keys generate`, a ledger captured from samples/sample.pcapng and a workload from
samples/workloads/; its stdout is validated against schemas/<command>-report.schema.json. Schemas
may $ref each other by file name (resolved against their $id), so validation goes through a
registry of every schemas/*.schema.json.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema  # noqa: E402 - test extra
import pytest
import referencing  # noqa: E402 - comes with jsonschema
from conftest import REPO, CliResult
from conftest import cli as run_in_process

SCHEMAS = REPO / "schemas"
SAMPLE = REPO / "samples" / "sample.pcapng"
WORKLOAD = REPO / "samples" / "workloads" / "worst-case-64.toml"

NEW_SCHEMAS = [
    "keys-generate-report.schema.json",
    "keys-rotate-report.schema.json",
    "recover-report.schema.json",
    "checkpoint-report.schema.json",
    "check-consistency-report.schema.json",
    "prove-report.schema.json",
    "check-proof-report.schema.json",
    "workload-bench-report.schema.json",
    "algorithms-report.schema.json",
    "plan-collision-report.schema.json",
    "plan-storage-report.schema.json",
    "query-report.schema.json",
    "demo-report.schema.json",
    "keys-device-init-report.schema.json",
    "keys-provision-report.schema.json",
    "keys-unwrap-report.schema.json",
    "device-key.schema.json",
    "device-pub.schema.json",
    "key-package.schema.json",
    "compact-report.schema.json",
]


def _registry():
    resources = []
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        doc = json.loads(path.read_text())
        resources.append((doc["$id"], referencing.Resource.from_contents(doc)))
    return referencing.Registry().with_resources(resources)


REGISTRY = _registry()


def validator(name: str):
    s = json.loads((SCHEMAS / name).read_text())
    return jsonschema.Draft202012Validator(
        s, registry=REGISTRY, format_checker=jsonschema.FormatChecker()
    )


def validate(doc, name: str) -> None:
    validator(name).validate(doc)


def is_valid(doc, name: str) -> bool:
    return validator(name).is_valid(doc)


def cli(*args, cwd: Path, ok: tuple[int, ...] = (0,)) -> CliResult:
    proc = run_in_process(*args, cwd=cwd)
    assert proc.returncode in ok, (
        f"{args}: exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    )
    return proc


def cli_json(*args, cwd: Path, ok: tuple[int, ...] = (0,)):
    return json.loads(cli(*args, cwd=cwd, ok=ok).stdout)  # exactly one JSON document on stdout


# ---- one run of the transparency commands, shared by the tests ---------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("reports")
    c = dict(cwd=tmp)
    out: dict = {"tmp": tmp}
    keys, new_keys, ledger = tmp / "keys", tmp / "keys-new", tmp / "ledger"
    out.update(keys=keys, ledger=ledger)
    out["keys_generate"] = cli_json("keys", "generate", keys, "--json", **c)
    out["keys_generate_ed25519"] = cli_json(
        "keys", "generate", new_keys, "--scheme", "ed25519", "--json", **c
    )
    out["keys_generate_mldsa65"] = cli_json(
        "keys", "generate", tmp / "keys-mldsa", "--scheme", "mldsa65", "--json", **c
    )
    cli(
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
        **c,
    )

    out["checkpoint_stored"] = cli_json(
        "checkpoint", ledger, "--out", tmp / "cp-stored", "--json", **c
    )
    out["checkpoint_old"] = cli_json(
        "checkpoint",
        ledger,
        "--out",
        tmp / "cp-old",
        "--signing-key",
        keys / "signing.key",
        "--json",
        **c,
    )
    out["prove"] = cli_json(
        "prove", ledger, "--out", tmp / "proof.json", "--seq", 150, "--json", **c
    )
    out["check_proof"] = cli_json(
        "check-proof", tmp / "proof.json", "--trust", keys / "verifier.pub", "--json", **c
    )
    bad = json.loads((tmp / "proof.json").read_text())
    bad["record"]["wire_len"] += 1
    (tmp / "proof-bad.json").write_text(json.dumps(bad))
    out["check_proof_bad"] = cli_json(
        "check-proof",
        tmp / "proof-bad.json",
        "--trust",
        keys / "verifier.pub",
        "--json",
        ok=(1,),
        **c,
    )

    # move the ledger to a new key, capture more under it, then check the checkpoints across the
    # move
    out["keys_rotate"] = cli_json(
        "keys",
        "rotate",
        ledger,
        "--old",
        keys / "signing.key",
        "--new",
        new_keys / "signing.key",
        "--json",
        **c,
    )
    cli(
        "capture",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keys / "digest.key",
        "--signing-key",
        new_keys / "signing.key",
        "--segment-records",
        100,
        "--json",
        **c,
    )
    out["checkpoint_new"] = cli_json("checkpoint", ledger, "--out", tmp / "cp-new", "--json", **c)
    out["consistent"] = cli_json(
        "check-consistency",
        tmp / "cp-old",
        tmp / "cp-new",
        "--ledger",
        ledger,
        "--trust",
        keys / "verifier.pub",
        "--json",
        **c,
    )
    # a NEW whose tree size was changed after signing: its signature fails, INCONSISTENT (exit 1)
    origin, size, rest = (tmp / "cp-new").read_bytes().split(b"\n", 2)
    (tmp / "cp-forged").write_bytes(b"\n".join([origin, str(int(size) + 1).encode(), rest]))
    out["inconsistent"] = cli_json(
        "check-consistency",
        tmp / "cp-old",
        tmp / "cp-forged",
        "--ledger",
        ledger,
        "--trust",
        keys / "verifier.pub",
        "--json",
        ok=(1,),
        **c,
    )
    out["prove_rotated"] = cli_json(
        "prove", ledger, "--out", tmp / "proof2.json", "--seq", 450, "--json", **c
    )
    out["check_proof_rotated"] = cli_json(
        "check-proof", tmp / "proof2.json", "--trust", keys / "verifier.pub", "--json", **c
    )
    out["recover_clean"] = cli_json(
        "recover", ledger, "--signing-key", new_keys / "signing.key", "--json", **c
    )
    return out


# ---- schemas are schemas ----------------------------------------------------------------------


@pytest.mark.parametrize("name", NEW_SCHEMAS)
def test_report_schema_is_strict_draft_2020_12(name):
    s = json.loads((SCHEMAS / name).read_text())
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["$id"] == f"https://ledgertool.invalid/schemas/{name}"
    jsonschema.Draft202012Validator.check_schema(s)
    assert s.get("title") and s.get("description")

    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                yield node
            for v in node.values():
                yield from objects(v)
        elif isinstance(node, list):
            for v in node:
                yield from objects(v)

    for o in objects(s):  # every object we write lists its fields and refuses others
        assert o.get("additionalProperties") is False, (name, sorted(o["properties"]))
        assert o.get("required"), (name, sorted(o["properties"]))


# ---- keys -------------------------------------------------------------------------------------


def test_keys_generate(run):
    for key in ("keys_generate", "keys_generate_ed25519", "keys_generate_mldsa65"):
        validate(run[key], "keys-generate-report.schema.json")
    doc = run["keys_generate"]
    assert doc["scheme"] == "hybrid" and set(doc["key_ids"]) == {"ed25519", "ml-dsa-65"}
    bundle = json.loads(Path(run["tmp"], doc["verifier"]).read_text())
    assert doc["key_ids"] == {k["algorithm"]: k["key_id"] for k in bundle["keys"]}
    assert set(run["keys_generate_mldsa65"]["key_ids"]) == {"ml-dsa-65"}
    # a hybrid report naming one key id only is not a hybrid report
    assert not is_valid(
        {**doc, "key_ids": {"ed25519": doc["key_ids"]["ed25519"]}},
        "keys-generate-report.schema.json",
    )
    assert not is_valid({**doc, "extra": 1}, "keys-generate-report.schema.json")


def test_keys_rotate(run):
    doc = run["keys_rotate"]
    validate(doc, "keys-rotate-report.schema.json")
    assert doc["number"] == 1 and doc["effective_from"] == {"link0": 3}
    assert doc["new_key_ids"] == run["keys_generate_ed25519"]["key_ids"]
    assert Path(run["tmp"], doc["path"]).is_file()
    assert not is_valid({**doc, "effective_from": {"link0": -1}}, "keys-rotate-report.schema.json")


# ---- checkpoints and proofs -------------------------------------------------------------------


def test_checkpoint(run):
    for key in ("checkpoint_stored", "checkpoint_old", "checkpoint_new"):
        validate(run[key], "checkpoint-report.schema.json")
    old, new = run["checkpoint_old"], run["checkpoint_new"]
    assert (old["tree_size"], old["records"]) == (3, 294)
    assert (new["tree_size"], new["records"]) == (6, 588)
    assert old["origin"] == new["origin"]
    assert not is_valid(
        {**old, "root_hash": old["root_hash"][:-2]}, "checkpoint-report.schema.json"
    )


def test_check_consistency(run):
    ok, bad = run["consistent"], run["inconsistent"]
    validate(ok, "check-consistency-report.schema.json")
    validate(bad, "check-consistency-report.schema.json")
    assert (
        ok["ok"]
        and ok["reason"] is None
        and (ok["old_size"], ok["new_size"]) == (3, 6)
        and ok["proof"]
    )
    assert not bad["ok"] and bad["reason"]
    # ok and reason go together
    assert not is_valid({**ok, "reason": "x"}, "check-consistency-report.schema.json")
    assert not is_valid({**bad, "reason": None}, "check-consistency-report.schema.json")


def test_prove(run):
    for key in ("prove", "prove_rotated"):
        validate(run[key], "prove-report.schema.json")
    doc = run["prove"]
    assert (doc["segment"], doc["record_index"], doc["seq"]) == (1, 50, "150")
    proof = json.loads((run["tmp"] / "proof.json").read_text())
    assert doc["audit_path"] == len(proof["audit_path"])
    assert run["prove_rotated"]["segment"] == 4


def test_check_proof(run):
    for key in ("check_proof", "check_proof_rotated", "check_proof_bad"):
        validate(run[key], "check-proof-report.schema.json")
    good, bad = run["check_proof"], run["check_proof_bad"]
    assert good["ok"] and good["reason"] is None and good["record"]["seq"] == "150"
    assert not bad["ok"] and bad["reason"]
    # a valid proof's record follows proof.schema.json's record
    assert not is_valid(
        {**good, "record": {**good["record"], "seq": 150}}, "check-proof-report.schema.json"
    )


# ---- recover ----------------------------------------------------------------------------------


def test_recover_clean(run):
    doc = run["recover_clean"]
    validate(doc, "recover-report.schema.json")
    assert doc["sealed"] == [] and doc["discarded"] == [] and doc["bytes_discarded"] == 0
    assert len(doc["checkpoints"]) == 1


def _torn_ledger(tmp: Path, keys: Path) -> Path:
    """A ledger as a crash leaves it: an open segment with 100 whole records and a torn tail, an
    open segment whose header was cut, and a temporary file of an interrupted write."""
    import numpy as np
    from ledger_files import sealed_records

    from ledgertool.digest.record import record_dtype
    from ledgertool.keyfiles import SigningKey
    from ledgertool.ledger.layout import open_segment_path
    from ledgertool.ledger.openmac import OpenSegmentKey
    from ledgertool.ledger.segment import SegmentHeader, SegmentWriter, now_ns

    ledger = tmp / "torn"
    cli(
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
        "--leaf-records",
        64,
        "--json",
        cwd=tmp,
    )
    meta = json.loads((ledger / "ledger.json").read_text())
    recs = np.frombuffer(sealed_records(ledger, 0), dtype=record_dtype(meta["digest_size"])).copy()
    recs["seq"] += 294  # segments 0..2 hold seq 0..293
    key = OpenSegmentKey.derive(SigningKey.load(keys / "signing.key"), meta["ledger_id"])
    header = SegmentHeader(
        meta["ledger_id"],
        "link0",
        3,
        meta["algorithm"],
        meta["strip"],
        meta["digest_key_id"],
        meta["record_size"],
        meta["digest_size"],
        meta["leaf_records"],
        294,
        now_ns(),
        key.key_id,
    )
    w = SegmentWriter(open_segment_path(ledger, "link0", 3), header, key)
    w.append(recs.tobytes(), len(recs))
    w.close()
    with open(open_segment_path(ledger, "link0", 3), "ab") as f:
        f.write(b"\x07" * 5)  # a torn next block
    open_segment_path(ledger, "link0", 4).write_bytes(header.encode()[:100])
    (ledger / "ledger.json.tmp").write_bytes(b"{")
    return ledger


def test_recover_torn(run, tmp_path):
    keys = run["keys"]
    ledger = _torn_ledger(tmp_path, keys)
    doc = cli_json("recover", ledger, "--signing-key", keys / "signing.key", "--json", cwd=tmp_path)
    validate(doc, "recover-report.schema.json")
    # one append of 100 records at leaf 64: a block of one leaf, then a short one
    assert doc["sealed"] == [
        {
            "link": "link0",
            "segment": 3,
            "records": 100,
            "torn_bytes_discarded": 5,
            "blocks_sealed": 2,
            "blocks_past_prefix": 1,
        }
    ]
    assert sorted(d["why"] for d in doc["discarded"]) == [
        "segment header cut",
        "temporary file of an interrupted write",
    ]
    assert doc["bytes_discarded"] == 5 + sum(d["bytes"] for d in doc["discarded"]) == 5 + 100 + 1
    assert not is_valid(
        {**doc, "discarded": [{**doc["discarded"][0], "why": "other"}]},
        "recover-report.schema.json",
    )
    # the recovered ledger verifies
    cli("verify", ledger, "--trust", keys / "verifier.pub", "--json", cwd=tmp_path)


# ---- workload bench, algorithms, plan ---------------------------------------------------------


def test_workload_bench(tmp_path):
    doc = cli_json("workload", "bench", WORKLOAD, "--frames", 20000, "--json", cwd=tmp_path)
    validate(doc, "workload-bench-report.schema.json")
    assert doc["frames"] == 20000 and doc["bytes"] == 20000 * 60  # 64-byte frames less the FCS
    assert "generate_and_digest_s" in doc
    assert not is_valid(
        {k: v for k, v in doc.items() if k != "generate_and_digest_s"},
        "workload-bench-report.schema.json",
    )  # the digest pair comes together


def test_algorithms(tmp_path):
    doc = cli_json("algorithms", "--json", cwd=tmp_path)
    validate(doc, "algorithms-report.schema.json")
    from ledgertool.algorithms import ALGORITHMS

    assert [a["name"] for a in doc["algorithms"]] == list(ALGORITHMS)
    for a in doc["algorithms"]:
        assert a["cpu_paths"][-1] == "portable" and a["cpu_path"] in a["cpu_paths"], a
        assert a["ledger"] == (a["digest_bytes"] > 8)


def test_plan_collision(tmp_path):
    by_rate = cli_json(
        "plan",
        "collision",
        "--bits",
        64,
        "--bits",
        128,
        "--rate",
        "400G,1.6T",
        "--frame",
        "64,imix",
        "--links",
        4,
        "--duration",
        "30d",
        "--json",
        cwd=tmp_path,
    )
    by_pps = cli_json("plan", "collision", "--bits", 128, "--pps", "1.2e9", "--json", cwd=tmp_path)
    for doc in (by_rate, by_pps):
        validate(doc, "plan-collision-report.schema.json")
    assert len(by_rate["rows"]) == 8 and {r["frame"] for r in by_rate["rows"]} == {"64", "imix"}
    assert by_pps["rows"][0]["rate_bps"] is None and by_pps["rows"][0]["frame"] is None
    row = by_rate["rows"][0]
    # half --pps
    assert not is_valid({"rows": [{**row, "frame": None}]}, "plan-collision-report.schema.json")


def test_plan_storage(run, tmp_path):
    docs = {
        "format": cli_json(
            "plan", "storage", "--rate", "400G", "--frame", "64,1500", "--json", cwd=tmp_path
        ),
        "option": cli_json(
            "plan",
            "storage",
            "--pps",
            "1M",
            "--record-bytes",
            48,
            "--links",
            2,
            "--duration",
            "30d",
            "--json",
            cwd=tmp_path,
        ),
        "ledger": cli_json(
            "plan",
            "storage",
            "--rate",
            "100G",
            "--from-ledger",
            run["ledger"],
            "--json",
            cwd=tmp_path,
        ),
    }
    for kind, doc in docs.items():
        validate(doc, "plan-storage-report.schema.json")
        assert doc["record_bytes_source"]["kind"] == kind
    src = docs["ledger"]["record_bytes_source"]
    assert src["bytes_per_record"] == docs["ledger"]["rows"][0]["record_bytes"]
    assert not is_valid(
        {**docs["option"], "record_bytes_source": {"kind": "option", "digest_bytes": 16}},
        "plan-storage-report.schema.json",
    )


# ---- query ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM records ORDER BY seq LIMIT 5",
        "SELECT * FROM seals ORDER BY segment",
        "SELECT link, count(*) AS frames, sum(wire_len) AS wire_bytes, min(ts_ns) AS first_ts_ns "
        "FROM records GROUP BY link",
        "SELECT * FROM records WHERE false",
    ],
)
def test_query_json(run, sql, tmp_path):
    proc = cli("query", run["ledger"], sql, "--format", "json", cwd=tmp_path)
    rows = json.loads(proc.stdout)
    validate(rows, "query-report.schema.json")
    for r in rows:
        if "digest" in r:
            assert re.fullmatch(r"[0-9a-f]{32}", r["digest"])


# ---- demo -------------------------------------------------------------------------------------


def test_demo(tmp_path):
    doc = cli_json("demo", "--workdir", tmp_path / "demo", "--json", cwd=tmp_path)
    validate(doc, "demo-report.schema.json")
    assert doc["ok"] and doc["frames"] == doc["query"]["frames"] == 294 and doc["segments"] == 3
    assert not is_valid({**doc, "verify": {**doc["verify"], "extra": 1}}, "demo-report.schema.json")
