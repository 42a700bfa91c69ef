"""plan collision --json at the edges of every input is strict JSON (no Infinity): a frame of
1e300 bytes, or a rate of 1e-200 bit/s, made the expected time overflow to inf and the command
end in an internal error. Frame size, rate and --pps now have limits on the side that overflows
(docs/plan.md), refused as one line, exit 2."""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import cli


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


TRAFFIC = [
    ("--rate", "1", "--frame", "1e6"),
    ("--rate", "1", "--frame", "64"),
    ("--rate", "1e18", "--frame", "64"),
    ("--rate", "1e18", "--frame", "1e6"),
    ("--pps", "1e-6"),
    ("--pps", "1e18"),
]
EDGES = [("--links", "1", "--duration", "1ns"), ("--links", "1000000", "--duration", "1e9y")]


@pytest.mark.parametrize(("traffic", "edge"), list(itertools.product(TRAFFIC, EDGES)))
def test_every_edge_gives_finite_json(traffic, edge):
    for bits in ("8", "1024"):
        r = cli("plan", "collision", "--bits", bits, *traffic, *edge, "--json")
        assert r.returncode == 0, (traffic, edge, r.stderr)
        row = _strict(r.stdout)["rows"][0]
        assert 0 < row["expected_seconds"] < float("inf")
        assert 0 <= row["probability"] <= 1
    if traffic[0] == "--rate":  # storage takes the same traffic
        r = cli("plan", "storage", *traffic, *edge, "--json")
        assert r.returncode == 0, (traffic, edge, r.stderr)
        _strict(r.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rate", "400G", "--frame", "1e300"), "bad frame size '1e300': beyond the planner's "
         "limit of 1e+06 bytes"),
        (("--rate", "400G", "--frame", "1000001"), "bad frame size '1000001': beyond the "
         "planner's limit of 1e+06 bytes"),
        (("--rate", "1e-200"), "rate '1e-200' is below the planner's floor of 1"),
        (("--rate", "0.5"), "rate '0.5' is below the planner's floor of 1"),
        (("--pps", "1e-300"), "frames per second (--pps) '1e-300' is below the planner's floor "
         "of 1e-06"),
    ],
)  # fmt: skip
def test_past_the_edges_is_one_line_exit_2(args, message):
    for cmd in ("collision", "storage"):
        extra = ("--bits", "1024") if cmd == "collision" else ()
        r = cli("plan", cmd, *extra, *args, "--json")
        assert r.returncode == 2, (cmd, args, r.stdout, r.stderr)
        assert (r.stdout, r.stderr) == ("", f"ledgertool: error: {message}\n")
