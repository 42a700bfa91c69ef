"""Rendering helpers shared by the commands that print: the console every command prints through,
and the result-table console.

Text that comes from a file, a seal, a proof, an error message or a file name is data, never
markup or terminal control: `SafeConsole` renders no rich markup or emoji codes and makes control
characters visible (`printable`); the few styled words of a line are built with `styled`.

rich costs ~0.03 s of CPU to import, more than a `verify` of a small ledger spends verifying: a
`SafeConsole` loads it for what needs it (a table, a terminal's colours and width, progress), not
for the lines of plain and styled text a command prints to a file or a pipe, which it writes as
rich would (tests/unit/test_plain_lines.py holds the two to the same text).
"""

from __future__ import annotations

import os
import sys

from .printable import printable

__all__ = ["SafeConsole", "Styled", "printable", "styled", "table_console"]

#: what rich writes for a print that fails to encode, after the encoder's reason
_ENCODING_HINT = "\n*** You may need to add PYTHONIOENCODING=utf-8 to your environment ***"


class Styled:
    """One line of (text, rich style) parts, each already `printable`: rich renders it as Text
    (`__rich__`), a file or a pipe gets its `plain` text."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple[tuple[str, str], ...]) -> None:
        self.parts = parts

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.parts)

    def text(self):
        """The line as rich Text."""
        from rich.text import Text

        return Text.assemble(*self.parts)

    __rich__ = text


def styled(*parts: str | tuple[str, str]) -> Styled:
    """One line of plain parts and (text, rich style) parts, each passed through `printable`:
    ``styled(("FAIL", "red"), f" {kind}: {detail}")``. Nothing in a part is read as markup."""
    return Styled(
        tuple((printable(p), "") if isinstance(p, str) else (printable(p[0]), p[1]) for p in parts)
    )


class SafeConsole:
    """A console that never interprets the strings it prints: markup, emoji codes and highlighting
    are off whatever a call asks for, and control characters are made visible (`printable`), in
    `print` and in table cells alike. Style comes only from `styled` parts.

    Its rich console (cli/richconsole.py; everything but `print` and `is_terminal` is that
    console's) is built on first need. A soft-wrapping console's line of strings and `styled`
    parts, for a file rich would not colour (not a terminal, no TTY_COMPATIBLE or FORCE_COLOR in
    the environment), is what rich would write, its text and `end`: it is written here."""

    def __init__(self, **kwargs) -> None:
        self._kwargs = kwargs
        self._rich = None

    @property
    def rich(self):
        """The rich Console behind this one."""
        if self._rich is None:
            from .richconsole import RichConsole  # rich: only for what needs it (module docstring)

            self._rich = RichConsole(**self._kwargs)
        return self._rich

    def __getattr__(self, name: str):
        if name.startswith("_"):  # not built yet (a copy, say): no rich console to ask
            raise AttributeError(name)
        return getattr(self.rich, name)

    @property
    def is_terminal(self) -> bool:
        return self.rich.is_terminal if self._plain_file() is None else False

    def print(self, *objects, sep: str = " ", end: str = "\n", **kwargs) -> None:
        file = self._plain_file(objects, kwargs)
        if file is None:
            self.rich.print(*objects, sep=sep, end=end, **kwargs)
            return
        text = sep.join(o.plain if type(o) is Styled else printable(o) for o in objects) + end
        try:
            file.write(text)
        except UnicodeEncodeError as e:
            e.reason = f"{e.reason}{_ENCODING_HINT}"
            raise
        file.flush()

    def _plain_file(self, objects: tuple = (), kwargs: dict | None = None):
        """The file rich would write `objects` to as plain text (see the class), or None."""
        if self._kwargs.get("soft_wrap") is not True or set(self._kwargs) - {"soft_wrap", "stderr"}:
            return None
        kwargs = kwargs or {}
        if set(kwargs) - {"markup", "highlight", "emoji", "soft_wrap"}:  # the first three: off
            return None
        if kwargs.get("soft_wrap", True) is not True:
            return None
        if not all(type(o) is str or type(o) is Styled for o in objects):
            return None
        if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:  # rich's terminal, then
            return None
        file = sys.stderr if self._kwargs.get("stderr") else sys.stdout
        file = getattr(file, "rich_proxied_file", file)  # under rich's progress, the real stream
        isatty = getattr(file, "isatty", None)
        try:
            terminal = isatty is not None and isatty()
        except ValueError:  # closed: rich counts it not a terminal, and the write says the rest
            terminal = False
        return None if file is None or terminal else file


def table_console(width: int = 240) -> SafeConsole:
    """A console for result tables: the terminal's width on a terminal; off one (a pipe, a file),
    `width` columns, so rows are neither wrapped nor cut at rich's default of 80 (result lines
    are not wrapped: scripts read them)."""
    return SafeConsole(width=None if sys.stdout.isatty() else width)
