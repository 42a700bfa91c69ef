"""Every `--help` fits 80 columns: the Reads/Writes/Exit codes lines are wrapped (continuations
indented), and the example is a command continued with backslashes that a shell reads as one."""

from __future__ import annotations

import functools
import shlex

import pytest
from conftest import cli

from ledgertool.cli import helptext

PATHS = sorted(helptext.COMMANDS)


@functools.cache
def help_of(path: str) -> str:
    """`ledgertool PATH --help` as printed (each command's help rendered once for the checks)."""
    return cli(*path.split(), "--help").stdout


@pytest.mark.parametrize("path", PATHS)
def test_help_lines_fit_80_columns(path):
    out = help_of(path)
    long = [line for line in out.splitlines() if len(line) > 80]
    assert not long, long
    assert "Reads: " in out and "Exit codes: " in out


@pytest.mark.parametrize("path", PATHS)
def test_the_example_is_the_command_when_joined(path):
    out = help_of(path)
    shown = out.split("Example:\n", 1)[1]
    joined = shown.replace("\\\n", " ")
    assert shlex.split(joined) == shlex.split(helptext.COMMANDS[path][3])


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("capture", "--block-ms MS"),
        ("capture", "--block-kb KIB"),
        ("capture", "--ring-mb MIB"),
        ("capture", "--duration SECONDS|5m"),
        ("bench", "--min-time SECONDS"),
        ("recompute", "--tolerance 5us|1ms"),
        ("recompute", "--memory-limit SIZE"),
        ("plan storage", "--duration 1d|12h"),
        ("plan storage", "--window 1s|100ms"),
        ("plan storage", "--rate BITS/S"),
    ],
)
def test_metavars_say_the_unit(path, shown):
    assert shown in help_of(path)
