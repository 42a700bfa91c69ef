"""Promises every change must keep: README's two set-up commands and .ci/run agree; the unit
tier starts no process."""

from __future__ import annotations

import ast
import re

import python_source
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


def _starts_a_process(tree: ast.AST) -> list[str]:
    """What in a module starts the CLI or Python as a process, or a cluster of worker processes."""
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = ast.unparse(n.func)
            first = ast.unparse(n.args[0]) if n.args else ""
            if f == "run_cli" or (f.startswith("subprocess.") and "sys.executable" in first):
                found.append(f"line {n.lineno}: {f}")
        elif isinstance(n, ast.Constant) and re.match(r"local:\d", str(n.value)):
            found.append(f"line {n.lineno}: a LocalCluster ({n.value})")
    return found


def test_unit_tests_start_no_process():
    """tests/unit runs in the test process (the quick loop); a test that needs a real process
    (the CLI under the interpreter, a fresh interpreter, a cluster) belongs in tests/system."""
    unit = REPO / "tests" / "unit"
    found = {
        p.name: _starts_a_process(python_source.parse(p.read_text()))
        for p in sorted(unit.glob("*.py"))
    }
    bad = {name: f for name, f in found.items() if f}
    assert not bad, bad
    system = REPO / "tests" / "system"
    assert any(_starts_a_process(python_source.parse(p.read_text())) for p in system.glob("*.py"))
