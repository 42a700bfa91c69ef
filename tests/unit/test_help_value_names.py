"""Option values in --help are named by what they take, not by the option's own name in capitals
(TIME, HEX, v1|v2, sha256|blake3)."""

from __future__ import annotations

import pytest
from conftest import cli


@pytest.mark.parametrize(
    "command, shown",
    [
        (("recompute",), ["--from TIME", "--to TIME"]),
        (
            ("capture",),
            [
                "--ledger-format v1|v2",
                "--leaf-hash sha256|blake3",
                "--digest-key-id HEX",
                "--device-id HEX",
            ],
        ),
        (("keys", "vkey"), ["--ledger-id HEX"]),
        (("keys", "provision"), ["--ledger-id HEX", "--device-id HEX"]),
        (("bench",), ["--ledger-format v1|v2", "--leaf-hash sha256,blake3"]),
    ],
)
def test_value_names(command, shown):
    r = cli(*command, "--help")
    assert r.returncode == 0
    for s in shown:
        assert s in r.stdout, (s, r.stdout)
    for auto in ("FROM-TIME", "TO-TIME", "LEDGER-ID", "LEDGER-FORMAT", "LEAF-HASH", "DEVICE-ID"):
        assert auto not in r.stdout
