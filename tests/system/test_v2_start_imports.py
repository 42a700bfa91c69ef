"""What `capture` and `verify` of a v2 ledger load: neither numpy nor pyarrow (0.1-0.2 s of CPU
each command would pay at start-up; docs/benchmarks.md, "CLI start-up"). A real interpreter: the
process's modules are what is under test, so each command runs through the command line's `_run`
in a fresh child, which prints the modules loaded after each command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.pcapng"

DRIVER = """
import json, sys
from ledgertool.cli.app import _run

runs = json.loads(sys.argv[1])
out = []
for argv in runs:
    sys.argv = ["ledgertool", *argv]
    rc = _run()
    out.append({"rc": rc, "modules": sorted(sys.modules)})
print("RESULT " + json.dumps(out))
"""


def _run_in_child(*argvs: list[str]) -> list[dict]:
    r = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in ("numpy", "pyarrow")]


def test_capture_and_verify_of_a_v2_ledger_load_no_numpy_or_pyarrow(tmp_path, keydir):
    ledger = tmp_path / "L"
    capture = [
        "capture",
        str(SAMPLE),
        "--ledger",
        str(ledger),
        "--signing-key",
        str(keydir / "signing.key"),
        "--digest-key",
        str(keydir / "digest.key"),
        "--quiet",
        "--segment-records",
        "100",
    ]
    verify = ["verify", str(ledger), "--trust", str(keydir / "verifier.pub"), "--quiet"]
    cap, ver = _run_in_child(capture, verify)
    assert cap["rc"] == 0 and ver["rc"] == 0
    assert sorted(p.name for p in (ledger / "link=link0").glob("*.rec")) == [
        "seg-00000000.rec",
        "seg-00000001.rec",
        "seg-00000002.rec",
    ]  # v2: raw record files, 3 sealed
    assert (
        "ledgertool.capture.run" in cap["modules"] and "ledgertool.verify.ledger" in ver["modules"]
    )
    assert _heavy(cap["modules"]) == []
    assert _heavy(ver["modules"]) == []


def test_capture_of_a_v1_ledger_still_loads_pyarrow(tmp_path, keydir):
    """The check above sees what a command loads: a v1 capture writes Parquet, with pyarrow."""
    capture = [
        "capture",
        str(SAMPLE),
        "--ledger",
        str(tmp_path / "L1"),
        "--signing-key",
        str(keydir / "signing.key"),
        "--digest-key",
        str(keydir / "digest.key"),
        "--quiet",
        "--ledger-format",
        "v1",
    ]
    (cap,) = _run_in_child(capture)
    assert cap["rc"] == 0
    assert "pyarrow.parquet" in cap["modules"] and "numpy" in cap["modules"]
