"""The `ledgertool` command line (contract: docs/cli.md)."""


def main() -> None:
    """Console entry point (ledgertool.cli.app.main), imported only when run."""
    from .app import main as run

    run()
