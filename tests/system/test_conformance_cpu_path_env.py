"""The conformance kit passes with LEDGERTOOL_CPU_PATH=portable through the CLI (a fresh
interpreter, the variable read at start-up)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO
from test_conformance import (  # noqa: F401  (shared with the in-process tests)
    LEDGER_ALGS,
    STRIPS,
    kit,
)

ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
}


def test_kit_passes_with_LEDGERTOOL_CPU_PATH_portable_through_the_cli(kit):
    env = {**ENV, "LEDGERTOOL_CPU_PATH": "portable"}
    probe = (
        "import sys; from ledgertool.algorithms import ALGORITHMS; from ledgertool.digest.engine "
        "import cpu_path; sys.exit(0 if {cpu_path(a) for a in ALGORITHMS.values()} == {'portable'} "
        "else 1)"
    )
    assert subprocess.run([sys.executable, "-c", probe], env=env).returncode == 0
    for a in LEDGER_ALGS:
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "from ledgertool.cli.app import main; main()",
                "conformance",
                "check",
                kit / "captures/ethernet.pcap",
                "--records",
                kit / f"records/ethernet/{a.name}.rdma.records",
                "--algorithm",
                a.name,
                "--strip",
                "rdma",
                "--digest-key",
                kit / "digest.key",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert r.returncode == 0 and r.stdout.startswith("BYTE-EXACT: 102 frames"), (
            r.stdout + r.stderr
        )
