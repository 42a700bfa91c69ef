"""Shell completion, as typer's completion script calls the program: command names and options
complete; `--show-completion` prints a script for the shell."""

from __future__ import annotations

import os
import subprocess

from test_cli_output import CLI


def _complete(words: str, cword: int) -> list[str]:
    env = dict(
        os.environ, _LEDGERTOOL_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword)
    )
    out = subprocess.run([*CLI], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_commands_and_options_complete():
    assert _complete("ledgertool ver", 1) == ["verify"]
    assert "--trust" in _complete("ledgertool verify --tr", 2)
    assert "generate" in _complete("ledgertool keys ", 2)


def test_show_completion_prints_a_bash_script():
    env = dict(os.environ, SHELL="/bin/bash")
    out = subprocess.run(
        [*CLI, "--show-completion", "bash"], env=env, capture_output=True, text=True, timeout=60
    )
    assert (
        out.returncode == 0 and "complete " in out.stdout and "_LEDGERTOOL_COMPLETE" in out.stdout
    )
