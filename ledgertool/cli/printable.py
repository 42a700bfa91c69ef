"""Untrusted text made safe to print: every control, format and line-separator character written
as a visible escape (cli/render.py prints everything through it)."""

from __future__ import annotations

import unicodedata

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
