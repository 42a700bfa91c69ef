"""The ledgertool(1) page is generated from the command tree: every command the CLI has is a
section with its options and its Reads/Exit codes text, and groff reads it without a warning."""

from __future__ import annotations

import datetime
import shutil
import subprocess

import pytest

from ledgertool.cli import helptext
from ledgertool.cli.manpage import man_page


def test_every_command_is_in_the_page_with_its_options():
    page = man_page(datetime.date(2026, 1, 1))
    assert page.startswith('.TH LEDGERTOOL 1 "2026-01-01"')
    for path in helptext.COMMANDS:
        assert f'.SS "{path}"' in page, path
    section = page.split('.SS "capture"')[1].split(".SS")[0]
    assert "\\fB--ring-mb MIB\\fR" in section and "Exit codes: 0 done" in section


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff not installed")
def test_groff_reads_it_without_warnings(tmp_path):
    page = tmp_path / "ledgertool.1"
    page.write_text(man_page())
    run = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr
