"""`workload bench --frames N` past what a flow may hold (10^12 frames, docs/workloads.md) is a
usage error naming the option, exit 2: past 2^64 it was an internal OverflowError."""

from __future__ import annotations

import pytest
from conftest import SAMPLES, cli


@pytest.mark.parametrize("frames", [10**12 + 1, 2**64, 10**20])
def test_frames_past_a_flows_limit_are_refused_by_name(frames):
    r = cli("workload", "bench", SAMPLES / "workloads" / "imix.toml", "--frames", frames)
    assert r.returncode == 2 and r.stdout == ""
    assert "Invalid value for '--frames'" in r.stderr
    assert "less than or equal to 1000000000000" in r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_frames_within_the_limit_still_scale_the_flows():
    r = cli("workload", "bench", SAMPLES / "workloads" / "imix.toml", "--frames", 10, "--json")
    assert r.returncode == 0, r.stderr
    assert '"frames": 10' in r.stdout


@pytest.mark.parametrize(
    "size, bound",
    [
        (-5, "greater than or equal to 64"),
        (63, "greater than or equal to 64"),
        (16389, "less than or equal to 16388"),
    ],
)
def test_a_size_no_flow_may_have_names_the_option(size, bound):
    """--size -5 blamed the spec file (`imix.toml: flows[0].size: ...`): the value is the
    option's."""
    r = cli("workload", "bench", SAMPLES / "workloads" / "imix.toml", "--size", size)
    assert r.returncode == 2 and r.stdout == ""
    assert "Invalid value for '--size'" in r.stderr and bound in r.stderr
    assert "imix.toml" not in r.stderr


def test_the_size_bound_is_the_generators():
    from ledgertool._binding import lib
    from ledgertool.cli.workload import SIZE_MAX

    assert SIZE_MAX == lib.LT_WL_MAX_FRAME + 4  # the largest frame, FCS included
