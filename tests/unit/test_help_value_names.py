"""Option values in --help are named by what they take (docs/cli.md, "Conventions"): a directory
is DIR, a duration its unit, a nonce HEX. `witness serve --state` said FILE for a directory, and
other options showed their own name in capitals (`--log LOGS`, `--valid-for VALID-FOR`,
`--clock-tolerance CLOCK-TOLERANCE`, `--verifier-nonce VERIFIER-NONCE`)."""

from __future__ import annotations

import re

import pytest
from conftest import cli

EXPECTED = {
    ("witness", "serve"): {
        "--state": "DIR",
        "--log": "ORIGIN=VKEY",
        "--addr": "HOST:PORT",
        "--key": "FILE",
    },
    ("challenge", "draw"): {
        "--verifier-nonce": "HEX",
        "--prover-nonce": "HEX|@FILE",
        "--prover-commitment": "HEX",
        "--beacon": "HEX",
    },
    ("conformance", "check"): {"--clock": "kit|device", "--clock-tolerance": "5us|1ms"},
    ("keys", "provision"): {"--valid-for": "1d|12h"},
}


@pytest.mark.parametrize("command", sorted(EXPECTED))
def test_option_values_are_named_by_what_they_take(command):
    r = cli(*command, "--help")
    assert r.returncode == 0, r.stderr
    shown = dict(re.findall(r"^  (--[a-z-]+) (\S+)", r.stdout, re.M))
    for option, name in EXPECTED[command].items():
        assert shown.get(option) == name, (command, option, shown.get(option))
