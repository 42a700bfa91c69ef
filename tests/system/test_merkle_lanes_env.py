"""LEDGERTOOL_MERKLE_LANES, read once at first use, sets how many SHA-256 leaves are hashed side by
side (1, 4 or 16); a count this CPU cannot run, or any other value, leaves the default."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ledgertool._binding import lib

PROBE = "from ledgertool._binding import lib; print(lib.lt_merkle_lanes())"


def _lanes(value: str | None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "LEDGERTOOL_MERKLE_LANES"}
    if value is not None:
        env["LEDGERTOOL_MERKLE_LANES"] = value
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return int(out.stdout)


def test_the_variable_sets_the_count_this_cpu_runs():
    lib.lt_merkle_lanes_force(0)
    default = _lanes(None)
    assert default == lib.lt_merkle_lanes()  # this process's default: the same CPU
    assert _lanes("1") == 1
    for n in (4, 16):
        runs = lib.lt_merkle_lanes_force(n) == lib.LT_OK
        lib.lt_merkle_lanes_force(0)
        assert _lanes(str(n)) == (n if runs else default)


@pytest.mark.parametrize("value", ["", "0", "8", "32", "sixteen", "4x"])
def test_other_values_leave_the_default(value):
    assert _lanes(value) == _lanes(None)


def test_algorithms_reports_the_count_the_variable_set():
    env = {k: v for k, v in os.environ.items() if k not in ("LEDGERTOOL_MERKLE_LANES",)}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ledgertool.cli.app import main; main()",
            "algorithms",
            "--json",
        ],
        env=dict(env, LEDGERTOOL_MERKLE_LANES="1"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["merkle_leaf_lanes"] == 1
