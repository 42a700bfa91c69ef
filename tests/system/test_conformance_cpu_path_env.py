"""The conformance kit passes with LEDGERTOOL_CPU_PATH=portable through the CLI (a fresh
interpreter, the variable read at start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, cli
from test_schemas_reports import validate

from ledgertool.algorithms import ALGORITHMS
from ledgertool.device.cases import CASES

LEDGER_ALGS = [a for a in ALGORITHMS.values() if a.ledger_ok]


STRIPS = ["frame", "l3", "payload", "rdma"]


ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("kit") / "kit"
    r = cli("conformance", "export", d, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    validate(rep, "conformance-export-report.schema.json")
    assert rep["frames"] == len(CASES) and rep["record_files"] == rep["captures"] * len(LEDGER_ALGS) * len(STRIPS)
    return d


def test_kit_passes_with_LEDGERTOOL_CPU_PATH_portable_through_the_cli(kit):
    env = {**ENV, "LEDGERTOOL_CPU_PATH": "portable"}
    probe = ("import sys; from ledgertool.algorithms import ALGORITHMS; from ledgertool.digest.engine import cpu_path; "
             "sys.exit(0 if {cpu_path(a) for a in ALGORITHMS.values()} == {'portable'} else 1)")
    assert subprocess.run([sys.executable, "-c", probe], env=env).returncode == 0
    for a in LEDGER_ALGS:
        r = subprocess.run([sys.executable, "-c", "from ledgertool.cli.app import main; main()", "conformance", "check",
                            kit / "captures/ethernet.pcap", "--records", kit / f"records/ethernet/{a.name}.rdma.records",
                            "--algorithm", a.name, "--strip", "rdma", "--digest-key", kit / "digest.key"],
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0 and r.stdout.startswith("BYTE-EXACT: 102 frames"), r.stdout + r.stderr
