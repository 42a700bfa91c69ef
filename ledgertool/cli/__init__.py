"""The `ledgertool` command line (contract: docs/cli.md).

The only package that imports typer and rich, and nothing else in ledgertool imports it. Commands
import the library modules they call inside their bodies, so that `ledgertool --help` loads no
numpy, cffi, pyarrow or scapy (start-up time, docs/cli.md).
"""

import sys

from .. import __version__


def main() -> None:
    """Console entry point. A bare `ledgertool --version` is answered here, before typer and rich
    load; everything else runs the app (ledgertool.cli.app.main)."""
    if sys.argv[1:] == ["--version"]:
        sys.stdout.write(f"ledgertool {__version__}\n")
        sys.stdout.flush()
        return

    from ..errors import NativeModuleError

    try:
        from .app import main as run
    except NativeModuleError as e:  # a stale or missing native build: one line, not a traceback
        print(f"ledgertool: error: {e}", file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    run()
