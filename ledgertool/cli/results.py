"""`query` results in the formats it writes (docs/cli.md#query), after DuckDB's CLI: full values
everywhere, except a table on a terminal, which is fitted to the terminal's width.

Binary cells are lowercase hex at any depth, other non-JSON scalars (DECIMAL, DATE, UUID, ...)
their SQL text. In JSON every integer is a JSON number with its exact digits, whatever its
DuckDB type (`count(*)`, `seq`, `ts_ns`), as DuckDB's own JSON output writes it
(docs/cli.md#json-integers).
"""

from __future__ import annotations

import csv
import io
import json
import math

from rich.cells import cell_len
from rich.table import Table

from .render import SafeConsole, printable

#: the text formats; `parquet` (binary) is written from the Arrow table, never to a terminal
TEXT_FORMATS = ("table", "csv", "json", "jsonl", "markdown")
FORMATS = TEXT_FORMATS + ("parquet",)


def cell(v):
    """A query value as JSON/CSV: binary as lowercase hex at any depth, other non-JSON scalars as
    their SQL text."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, (list, tuple)):
        return [cell(x) for x in v]
    if isinstance(v, dict):
        return {str(k): cell(x) for k, x in v.items()}
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # 'inf', '-inf', 'nan' as DuckDB spells them: JSON has no such number
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def _keys(cols: list[str]) -> list[str]:
    """Column names as object keys; a repeated name gets a suffix (a, a_2, ...) so none collide."""
    keys, seen = [], {}
    for c in cols:
        seen[c] = seen.get(c, 0) + 1
        keys.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
    return keys


def _text(v) -> str:
    """A cell as table or Markdown text: NULL, JSON for lists and structs, else its string."""
    if v is None:
        return "NULL"
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def render(fmt: str, cols: list[str], raw_rows: list[tuple], width: int | None = None) -> str:
    """The result as text in `fmt` (one of TEXT_FORMATS). A table fits `width` columns when given
    (a terminal: `_fitted`), else is as wide as its longest values."""
    if fmt in ("json", "jsonl"):
        keys = _keys(cols)
        docs = [dict(zip(keys, (cell(v) for v in r))) for r in raw_rows]
        if fmt == "json":
            return json.dumps(docs, allow_nan=False) + "\n"
        return "".join(json.dumps(d, allow_nan=False) + "\n" for d in docs)
    rows = [[cell(v) for v in r] for r in raw_rows]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(cols)
        w.writerows(rows)
        return buf.getvalue()
    texts = [[_text(v) for v in r] for r in rows]
    if fmt == "markdown":

        def line(vals) -> str:  # a newline or | in a value would end the row or the cell
            return (
                "| "
                + " | ".join(printable(v).replace("\\", "\\\\").replace("|", "\\|") for v in vals)
                + " |\n"
            )

        return (
            line(cols)
            + "| "
            + " | ".join("---" for _ in cols)
            + " |\n"
            + "".join(line(r) for r in texts)
        )
    return _table(cols, texts, width)


#: a hex value longer than this is shown as its first and last HEX_KEEP digits around an
#: ellipsis when a table does not fit the terminal (digests, keys); integers are never shortened
HEX_SHORTEN = 20
HEX_KEEP = 8
_HEX = frozenset("0123456789abcdef")


def _shortened(v: str) -> str:
    if len(v) > HEX_SHORTEN and _HEX.issuperset(v):
        return f"{v[:HEX_KEEP]}…{v[-HEX_KEEP:]}"
    return v


def _fitted(cols: list[str], texts: list[list[str]], width: int) -> tuple[list[int], list, str]:
    """What a table of `width` columns shows, after DuckDB's CLI: every value whole where the table
    fits; else hex values (digests) shortened in the middle; else whole columns hidden from the
    right (the first is always kept) and a footer `11 columns (6 shown; hidden: ...)`. (indexes of
    the columns shown, their rows, footer)."""

    def need(idx: list[int], rows) -> int:  # rich's box: 3 cells a column plus the left border
        return (
            sum(
                max([cell_len(printable(cols[i]))] + [cell_len(printable(r[i])) for r in rows])
                for i in idx
            )
            + 3 * len(idx)
            + 1
        )

    shown = list(range(len(cols)))
    if need(shown, texts) <= width:
        return shown, texts, ""
    texts = [[_shortened(v) for v in r] for r in texts]
    while len(shown) > 1 and need(shown, texts) > width:
        shown.pop()
    rows = [[r[i] for i in shown] for r in texts]
    hidden = [cols[i] for i in range(len(shown), len(cols))]
    footer = (
        f"{len(cols)} columns ({len(shown)} shown; hidden: {', '.join(hidden)})" if hidden else ""
    )
    return shown, rows, footer


def _table(cols: list[str], texts: list[list[str]], width: int | None) -> str:
    footer = ""
    if width is None:  # never cut a value: as wide as the widest cell of every column
        shown = list(range(len(cols)))
        widths = [
            max([cell_len(printable(c))] + [cell_len(printable(r[i])) for r in texts])
            for i, c in enumerate(cols)
        ]
        width = sum(widths) + 3 * len(cols) + 1
    else:
        shown, texts, footer = _fitted(cols, texts, width)
    t = Table(*(cols[i] for i in shown))
    for c in t.columns:
        c.no_wrap = True  # a value that still does not fit (one wide column) ends in an ellipsis
        c.overflow = "ellipsis"
    for r in texts:
        t.add_row(*r)
    buf = io.StringIO()
    SafeConsole(file=buf, width=width, color_system=None, force_terminal=False).print(t)
    return buf.getvalue() + (footer + "\n" if footer else "")
