"""Option values in `--help` are named for what they are (`--xdp-mode auto|zero-copy|copy`,
`--eal ARGS`, `--cluster ADDRESS`), not by the option's own name in capitals (`--eal EAL`); a
metavar that lists the values lists those the code takes."""

from __future__ import annotations

import re

import pytest
from conftest import cli

from ledgertool.cli.app import _value_name, click_command
from ledgertool.cli.results import FORMATS
from ledgertool.keyfiles import SCHEMES
from ledgertool.source.bypass import XDP_ATTACH, XDP_MODES

#: options whose own name in capitals is what the value is: an algorithm's, an interface's and a
#: witness's name
NAMED_AS_THEIR_VALUE = {
    ("capture", "--algorithm"),
    ("recompute", "--algorithm"),
    ("bench", "--algorithm"),
    ("conformance check", "--algorithm"),
    ("replay", "--iface"),
    ("witness keygen", "--name"),
}


def _options(cmd, path: str = ""):
    for p in cmd.params:
        if getattr(p, "param_type_name", "") == "option" and not (p.is_flag or p.count):
            yield path, p
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _options(sub, f"{path} {name}".strip())


def test_no_option_value_is_named_after_the_option():
    own = {
        (path, p.opts[0])
        for path, p in _options(click_command())
        if (p.metavar or _value_name(p)) == p.name.upper().replace("_", "-")
    }
    assert own == NAMED_AS_THEIR_VALUE


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("capture", f"--xdp-mode {'|'.join(XDP_MODES)}"),
        ("capture", f"--xdp-attach {'|'.join(XDP_ATTACH)}"),
        ("capture", "--eal ARGS"),
        ("capture", "--strip MODE"),
        ("capture", "--link NAME"),
        ("capture", "--tiers TIER[,TIER]"),
        ("verify", "--cluster ADDRESS"),
        ("recompute", "--cluster ADDRESS"),
        ("recompute", "--link NAME"),
        ("prove", "--digest HEX"),
        ("query", f"--format {'|'.join(FORMATS)}"),
        ("keys generate", f"--scheme {'|'.join(SCHEMES)}"),
        ("bench", "--threads N,..."),
        ("bench", "--paths best|default|all|PATH,..."),
    ],
)
def test_help_names_the_value(path, shown):
    r = cli(*path.split(), "--help")
    assert r.returncode == 0
    # the whole value name: a space or a line break after it (a long one has a line of its own)
    assert re.search(re.escape(shown) + r"\s", r.stdout), r.stdout
