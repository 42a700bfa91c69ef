"""Counts in messages: ``plural(1, "segment")`` is "1 segment", ``plural(2, "segment")`` "2
segments"."""

from __future__ import annotations


def plural(n: int, noun: str, many: str | None = None, *, fmt: str = "") -> str:
    """`n` formatted with `fmt` (a format spec: "," gives 1,234), a space, and `noun` when `n` is 1,
    else `many` (default `noun` + "s"): ``plural(3, "record", fmt=",")`` -> "3 records",
    ``plural(1, "proof hash", "proof hashes")`` -> "1 proof hash". Only 1 (and -1) is singular:
    "0 frames". Raises TypeError/ValueError as `format(n, fmt)` does."""
    return f"{n:{fmt}} {noun if abs(n) == 1 else (noun + 's' if many is None else many)}"
