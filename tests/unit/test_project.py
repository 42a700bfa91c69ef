"""Promises every change must keep: README's two set-up commands and .ci/run agree."""

from __future__ import annotations

import re

from conftest import REPO


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```sh\n(.+?)\n```", text)[:2]


def test_readme_opens_with_demo_and_test_commands():
    demo, tests = readme_commands()
    assert "ledgertool demo" in demo and demo.startswith("pip install .")
    assert "[test]" in tests and "pytest" in tests


def test_ci_runs_the_readme_test_command_exactly():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci
