"""The help of `ledgertool` and of each command group fits 80 columns as a command's does (its
closing lines wrapped, its example continued with backslashes), and an example keeps every option
on the line of its value."""

from __future__ import annotations

import shlex

import pytest
from conftest import cli

from ledgertool.cli import helptext

GROUPS = sorted(helptext.GROUPS)


@pytest.mark.parametrize("path", GROUPS)
def test_group_help_fits_80_columns_and_its_example_is_the_command(path):
    out = cli(*path.split(), "--help").stdout
    long = [line for line in out.splitlines() if len(line) > 80]
    assert not long, long
    assert "Exit codes: " in out
    joined = out.split("Example:\n", 1)[1].replace("\\\n", " ")
    assert shlex.split(joined) == shlex.split(helptext.GROUPS[path])


@pytest.mark.parametrize("path", sorted(helptext.COMMANDS) + GROUPS)
def test_no_example_line_ends_on_an_option_that_takes_the_next_as_its_value(path):
    out = cli(*path.split(), "--help").stdout
    lines = out.split("Example:\n", 1)[1].splitlines()
    for line, nxt in zip(lines, lines[1:]):
        if line.endswith(" \\"):
            last = line[:-2].split()[-1]
            assert not (last.startswith("--") and not nxt.split()[0].startswith("-")), (line, nxt)
