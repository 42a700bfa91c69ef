"""The public API resolves lazily: importing ledgertool loads nothing heavy (a fresh
interpreter)."""

from __future__ import annotations

import sys


def test_lazy_api_resolves() -> None:
    """Every public name resolves, and `import ledgertool` alone loads none of the heavy parts."""
    import subprocess

    code = (
        "import sys, ledgertool; heavy = [m for m in ('numpy', 'cffi', 'pyarrow', 'duckdb', "
        "'typer', 'rich') if m in sys.modules]; assert not heavy, heavy; [getattr(ledgertool, n) "
        "for n in ledgertool.__all__]"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
