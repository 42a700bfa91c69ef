"""The `ledgertool` command line (contract: docs/cli.md)."""


def main() -> None:
    """Console entry point (ledgertool.cli.app.main), imported only when run."""
    import sys

    from ..errors import NativeModuleError

    try:
        from .app import main as run
    except NativeModuleError as e:  # a stale or missing native build: one line, not a traceback
        print(f"ledgertool: error: {e}", file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    run()
