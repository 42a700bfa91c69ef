"""Python source parsed to an AST for the tests that read the package's own code.

CPython 3.11 before 3.11.8 keeps the AST constructor's recursion depth in state shared by every
thread of the interpreter, so a parse that overlaps one in another thread (a test's leftover
worker, pytest-xdist's own threads) can fail with "SystemError: AST constructor recursion depth
mismatch" though the source is fine (python/cpython gh-106905). The parse is pure: it is simply
done again.
"""

from __future__ import annotations

import ast


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    for _ in range(4):
        try:
            return ast.parse(source, filename)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
    return ast.parse(source, filename)
