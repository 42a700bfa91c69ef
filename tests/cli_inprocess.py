"""The CLI in-process, through the same error mapping as the console entry point (`_run`): the
exit code and one-line errors a user sees, without a subprocess."""

from __future__ import annotations

import sys


def run_inprocess(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `ledgertool ARGS`, run in this process."""
    from ledgertool.cli.app import _run

    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["ledgertool", *map(str, args)])
    code = _run()
    got = capsys.readouterr()
    return code, got.out, got.err
