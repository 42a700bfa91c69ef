"""Reports of runs with strip mode rdma (RoCEv2 traffic from the bundled workload spec) validate
against their JSON Schemas, and every strip-mode enum in schemas/ lists exactly the modes the
code accepts (a mode added to the code and not to a schema is a report an implementer's
validator rejects)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import SAMPLES
from typer.testing import CliRunner

from ledgertool.algorithms import STRIP_MODES
from ledgertool.cli.app import app
from ledgertool.keyfiles import generate_keys

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
SPEC = f"workload:{SAMPLES / 'workloads' / 'rocev2-allreduce.toml'}"


def _valid(doc: dict, name: str) -> None:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(doc)


def _json(args: list) -> dict:
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def rdma_reports(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("rdma")
    keys, ledger = tmp / "keys", tmp / "L"
    generate_keys(keys)
    capture = _json(
        [
            "capture",
            SPEC,
            "--ledger",
            ledger,
            "--strip",
            "rdma",
            "--digest-key",
            keys / "digest.key",
            "--signing-key",
            keys / "signing.key",
            "--json",
        ]
    )
    standalone = _json(
        [
            "recompute",
            SPEC,
            "--digest-key",
            keys / "digest.key",
            "--algorithm",
            "siphash-1-3-128",
            "--strip",
            "rdma",
            "--out",
            tmp / "d.parquet",
            "--json",
        ]
    )
    reconcile = _json(
        [
            "recompute",
            SPEC,
            "--digest-key",
            keys / "digest.key",
            "--ledger",
            ledger,
            "--trust",
            keys / "verifier.pub",
            "--json",
        ]
    )
    return {"capture": capture, "standalone": standalone, "reconcile": reconcile}


def test_capture_report_with_strip_rdma_validates(rdma_reports):
    doc = rdma_reports["capture"]
    # the spec's 4 x 256 writes + 4 x 32 ACKs
    assert doc["strip"] == "rdma" and doc["frames"] == 1152
    _valid(doc, "capture-report.schema.json")


def test_standalone_recompute_report_with_strip_rdma_validates(rdma_reports):
    doc = rdma_reports["standalone"]
    assert json.dumps(doc).count('"strip": "rdma"') == 1, doc
    _valid(doc, "recompute-report.schema.json")


def test_reconcile_report_of_an_rdma_ledger_validates(rdma_reports):
    doc = rdma_reports["reconcile"]
    assert doc["ok"] and doc["matched"] == doc["frames"] == 1152, doc
    _valid(doc, "recompute-report.schema.json")


def _strip_enums(node, where: str):
    if isinstance(node, dict):
        enum = node.get("enum")
        if isinstance(enum, list) and "frame" in enum and "l3" in enum:
            yield where, enum
        for k, v in node.items():
            yield from _strip_enums(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _strip_enums(v, f"{where}/{i}")


def test_every_strip_mode_enum_lists_the_modes_the_code_accepts():
    found = [
        (f"{p.name}#{where}", enum)
        for p in sorted(SCHEMAS.glob("*.json"))
        for where, enum in _strip_enums(json.loads(p.read_text()), "")
    ]
    # capture, recompute, ledger, seal (v1, v2), the conformance kit ...
    assert len(found) >= 9, found
    wrong = [(where, enum) for where, enum in found if sorted(enum) != sorted(STRIP_MODES)]
    assert not wrong, wrong
