"""The memory a pairing may use: DuckDB's `memory_limit` as the user spells it, checked, in bytes,
and the share of it a pairing keeps in memory before its rows go to bucket files."""

from __future__ import annotations

import re

from ..errors import Setting, UsageError
from .query import open_duckdb

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "check_memory_limit",
    "keep_budget",
    "lazy_pairing",
    "memory_budget",
    "open_pairing",
]

DEFAULT_MEMORY_LIMIT = "4GB"  # DuckDB's memory_limit for the exact pairing


def check_memory_limit(memory_limit: str) -> None:
    """UsageError naming the setting when DuckDB does not take `memory_limit` (a connection is
    opened for it: ~30 ms, so the default, which it takes, is not checked)."""
    try:
        open_duckdb({"memory_limit": memory_limit}).close()
    except UsageError as e:
        raise UsageError(Setting("memory_limit"), f" {memory_limit!r}: {e}") from None


def open_pairing(memory_limit: str, tmp: str):
    """A DuckDB connection for a pairing: `memory_limit`, spilling to `tmp`."""
    try:
        return open_duckdb({"memory_limit": memory_limit, "temp_directory": tmp})
    except UsageError as e:
        raise UsageError(Setting("memory_limit"), f" {memory_limit!r}: {e}") from None


class _LazyPairing:
    """open_pairing's connection, opened when it is first called for (then the same one)."""

    def __init__(self, memory_limit: str, tmp: str):
        self.memory_limit, self.tmp, self.con = memory_limit, tmp, None

    def __call__(self):
        if self.con is None:
            self.con = open_pairing(self.memory_limit, self.tmp)
        return self.con

    def close(self) -> None:
        if self.con is not None:
            self.con.close()


def lazy_pairing(memory_limit: str, tmp: str) -> _LazyPairing:
    """A function that opens open_pairing's connection on its first call and returns it on every
    call (`close()` closes it, if it was opened): for a pairing that may not need DuckDB."""
    return _LazyPairing(memory_limit, tmp)


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def memory_budget(memory_limit: str) -> int:
    """`memory_limit` (DuckDB's spelling: "4GB", "500MiB", ...) in bytes; the default's for a
    spelling not understood here (DuckDB checks it)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", memory_limit)
    unit = _UNITS.get(m.group(2).lower()) if m else None
    if unit is None:
        return (
            memory_budget(DEFAULT_MEMORY_LIMIT)
            if memory_limit != DEFAULT_MEMORY_LIMIT
            else 4 * 10**9
        )
    return int(float(m.group(1)) * unit)


def keep_budget(memory_limit: str) -> int:
    """The bytes of both sides' rows a pairing keeps in memory (a quarter of `memory_limit`: the
    pairing of what is kept needs about as much again, and DuckDB the rest); past it they go to
    bucket files (PartStore)."""
    return memory_budget(memory_limit) // 4
