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
    """The result as text in `fmt` (one of TEXT_FORMATS). A table is `width` columns wide when
    given (a terminal: rich shrinks and wraps cells to fit), else as wide as its longest values."""
    if fmt in ("json", "jsonl"):
        keys = _keys(cols)
        docs = [dict(zip(keys, (cell(v) for v in r))) for r in raw_rows]
        if fmt == "json":
            return json.dumps(docs) + "\n"
        return "".join(json.dumps(d) + "\n" for d in docs)
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


def _table(cols: list[str], texts: list[list[str]], width: int | None) -> str:
    t = Table(*cols)
    if width is None:  # never cut a value: as wide as the widest cell of every column
        for c in t.columns:
            c.no_wrap = True
        widths = [
            max([cell_len(printable(c))] + [cell_len(printable(r[i])) for r in texts])
            for i, c in enumerate(cols)
        ]
        width = sum(widths) + 3 * len(cols) + 1
    for r in texts:
        t.add_row(*r)
    buf = io.StringIO()
    SafeConsole(file=buf, width=width, color_system=None, force_terminal=False).print(t)
    return buf.getvalue()
