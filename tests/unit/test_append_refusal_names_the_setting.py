"""A capture into an existing ledger with another value of a setting fixed at creation is refused
(exit 2, one line) with a parenthesis naming that setting and its option, not another one."""

from __future__ import annotations

import pytest
from conftest import SAMPLES, capture_cli

SAMPLE = SAMPLES / "sample.pcap"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (
            ("--algorithm", "blake3-keyed-128"),
            "ledger uses algorithm 'siphash-1-3-128', not 'blake3-keyed-128' "
            "(--algorithm: a ledger never changes its digest algorithm)",
        ),
        (
            ("--strip", "l3"),
            "ledger uses strip 'frame', not 'l3' (--strip: a ledger never changes its strip mode)",
        ),
        (
            ("--leaf-records", "64"),
            "ledger uses leaf_records 256, not 64 "
            "(--leaf-records: a ledger never changes its records per Merkle leaf)",
        ),
        (
            ("--leaf-hash", "blake3"),
            "ledger uses leaf_hash 'sha256', not 'blake3' "
            "(--leaf-hash: a ledger never changes its Merkle leaf construction)",
        ),
        (
            ("--ledger-format", "v1"),
            "ledger uses version 2, not 1 (--ledger-format: a ledger never changes its format)",
        ),
    ],
)
def test_the_refusal_names_the_setting_refused(tmp_path, keydir, extra, says):
    led = tmp_path / "L"
    assert capture_cli(SAMPLE, led, keydir).returncode == 0
    before = sorted(p.name for p in (led / "link=link0").iterdir())
    r = capture_cli(SAMPLE, led, keydir, *extra)
    assert r.returncode == 2, r.stderr
    assert r.stderr == f"ledgertool: error: {led}: {says}\n"
    assert sorted(p.name for p in (led / "link=link0").iterdir()) == before
