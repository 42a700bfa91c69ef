"""recompute with a --from/--to that holds no frame of either side compares nothing: it still
matches (nothing differs) but says so in a warning, in text and in JSON; a range that holds frames
gives no such warning."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES, recompute_cli

WARNING = "--from/--to: no frame of the capture and no record of the ledger lies in that range"


def _recompute(ledger, keydir, *extra):
    return recompute_cli(SAMPLES / "sample.pcapng", ledger, keydir, *extra)


@pytest.mark.parametrize("extra", [("--from", "2037-01-01"), ("--to", "1971-01-01")])
def test_a_range_that_holds_no_frame_is_named(sample_ledger, keydir, extra):
    r = _recompute(sample_ledger, keydir, *extra)
    assert r.returncode == 0, r.stderr
    assert WARNING in r.stderr
    doc = json.loads(_recompute(sample_ledger, keydir, *extra, "--json").stdout)
    assert (doc["matched"], doc["ledger_only"], doc["capture_only"]) == (0, 0, 0)
    assert any(w.startswith(WARNING) for w in doc["warnings"])


def test_a_range_that_holds_frames_has_no_such_warning(sample_ledger, keydir):
    doc = json.loads(_recompute(sample_ledger, keydir, "--from", "1971-01-01", "--json").stdout)
    assert doc["matched"] == 294
    assert not any(w.startswith(WARNING) for w in doc["warnings"])
