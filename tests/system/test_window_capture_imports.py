"""What `capture --tiers windows` (and windows,frames) of a file loads: no numpy, as a capture of
frames alone (tests/system/test_v2_start_imports.py, whose child this runs in): importing it
would cost the command a tenth of a second of CPU, more than the window tier itself over millions
of frames. A real interpreter in a fresh child: the process's modules are what is under test."""

from __future__ import annotations

import pytest
from test_v2_start_imports import _run_in_child, capture_argv


@pytest.mark.parametrize("tiers", ["windows", "windows,frames"])
def test_a_windowed_capture_of_a_file_loads_no_numpy(tmp_path, keydir, tiers):
    ledger = tmp_path / "L"
    (got,) = _run_in_child(capture_argv(ledger, keydir, "--tiers", tiers))
    assert got["rc"] == 0
    # the window tier ran: its log holds a sealed segment
    assert sorted(p.name for p in (ledger / "windows=link0").glob("*.seal.json")) == [
        "seg-00000000.seal.json"
    ]
    assert "ledgertool.capture.windows" in got["modules"]
    assert [m for m in got["modules"] if m.split(".")[0] == "numpy"] == []
