"""Rendering helpers shared by the commands that print rich tables."""

from __future__ import annotations

import sys

from rich.console import Console


def table_console(width: int = 240) -> Console:
    """A console for result tables: the terminal's width on a terminal; off one (a pipe, a file),
    `width` columns, so rows are neither wrapped nor cut at rich's default of 80 (CLI.md: result
    lines are not wrapped)."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else width)
