"""What `capture --tiers windows` (and windows,frames) of a file loads: no numpy, as a capture of
frames alone (tests/system/test_v2_start_imports.py): importing it would cost the command a tenth
of a second of CPU, more than the window tier itself over millions of frames. A real interpreter
in a fresh child: the process's modules are what is under test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.pcapng"

DRIVER = """
import json, sys
from ledgertool.cli.app import _run

sys.argv = ["ledgertool", *json.loads(sys.argv[1])]
rc = _run()
print("RESULT " + json.dumps({"rc": rc, "modules": sorted(sys.modules)}))
"""


@pytest.mark.parametrize("tiers", ["windows", "windows,frames"])
def test_a_windowed_capture_of_a_file_loads_no_numpy(tmp_path, keydir, tiers):
    ledger = tmp_path / "L"
    argv = [
        "capture",
        str(SAMPLE),
        "--ledger",
        str(ledger),
        "--signing-key",
        str(keydir / "signing.key"),
        "--digest-key",
        str(keydir / "digest.key"),
        "--tiers",
        tiers,
        "--quiet",
    ]
    r = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    got = json.loads(line.removeprefix("RESULT "))
    assert got["rc"] == 0
    # the window tier ran: its log holds a sealed segment
    assert sorted(p.name for p in (ledger / "windows=link0").glob("*.seal.json")) == [
        "seg-00000000.seal.json"
    ]
    assert "ledgertool.capture.windows" in got["modules"]
    assert [m for m in got["modules"] if m.split(".")[0] == "numpy"] == []
