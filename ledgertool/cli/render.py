"""Rendering helpers shared by the commands that print: the console every command prints through,
and the result-table console.

Text that comes from a file, a seal, a proof, an error message or a file name is data, never
markup or terminal control: `SafeConsole` renders no rich markup or emoji codes and makes control
characters visible (`printable`); the few styled words of a line are built with `styled`.
"""

from __future__ import annotations

import sys
import unicodedata

from rich.console import Console
from rich.text import Text

# C0/C1 controls and DEL (ESC starts a terminal escape sequence, CR and BS overwrite what was
# printed), format characters (bidi overrides reorder a line: "Trojan Source"), line and paragraph
# separators (a second line could fake a verdict).
_HIDDEN = {"Cc", "Cf", "Zl", "Zp"}


def printable(text: object) -> str:
    """`str(text)` with every control, format and line-separator character (Unicode categories Cc,
    Cf, Zl, Zp: ESC, CR, LF, TAB, DEL, U+202E, ...) written as a visible escape: ``\\x1b``,
    ``\\u202e``, ``\\U000e0001``; a surrogate a file name's non-UTF-8 byte became (os.fsdecode) as
    that byte, ``\\xff``. Other text, backslashes included, is unchanged."""
    s = str(text)
    if s.isprintable():  # the common case, in C; isprintable() is False for every hidden category
        return s
    out = []
    for c in s:
        n = ord(c)
        if 0xDC80 <= n <= 0xDCFF:  # a file name's byte that is not UTF-8 (os.fsdecode): that byte
            out.append(f"\\x{n - 0xDC00:02x}")
        elif unicodedata.category(c) in _HIDDEN or 0xD800 <= n <= 0xDFFF:
            out.append(
                f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"
            )
        else:
            out.append(c)
    return "".join(out)


def styled(*parts: str | tuple[str, str]) -> Text:
    """One line of plain parts and (text, rich style) parts, each passed through `printable`:
    ``styled(("FAIL", "red"), f" {kind}: {detail}")``. Nothing in a part is read as markup."""
    return Text.assemble(
        *((printable(p), "") if isinstance(p, str) else (printable(p[0]), p[1]) for p in parts)
    )


class SafeConsole(Console):
    """A rich Console that never interprets the strings it prints: markup, emoji codes and
    highlighting are off whatever a call asks for, and control characters are made visible
    (`printable`), in `print` and in table cells alike. Style comes only from `styled` Text."""

    def __init__(self, **kwargs) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **kwargs)

    def render_str(self, text: str, **kwargs) -> Text:
        kwargs.update(markup=False, emoji=False, highlight=False)
        return super().render_str(printable(text), **kwargs)


def table_console(width: int = 240) -> Console:
    """A console for result tables: the terminal's width on a terminal; off one (a pipe, a file),
    `width` columns, so rows are neither wrapped nor cut at rich's default of 80 (result lines
    are not wrapped: scripts read them)."""
    return SafeConsole(width=None if sys.stdout.isatty() else width)
