"""Library setting names -> the command-line options that set them.

Library errors name a wrong setting by its parameter name (`ledgertool.errors.Setting`, e.g.
``ring_mb``); on the command line the same message names the option (``--ring-mb``). Most options
are the parameter name with dashes; the rest are listed here.
"""

from __future__ import annotations

from ..errors import LedgerError, Setting

#: parameter name -> option, where the option is not "--" + the name with dashes
OPTIONS = {
    "digest_keys": "--digest-key",
    "from_ns": "--from",
    "to_ns": "--to",
    "max_frames": "--frames",
    "duration_s": "--duration",
    "valid_for_s": "--valid-for",
    "eal_args": "--eal",
    "overwrite": "--force",
    "loops": "--loop",
}


def option(name: str) -> str:
    """The command-line option that sets library parameter `name`."""
    return OPTIONS.get(name) or "--" + name.replace("_", "-")


def cli_message(e: LedgerError) -> str:
    """`e`'s message with every `Setting` shown as its option (docs/cli.md wording)."""
    parts = getattr(e, "parts", None)
    if not parts:
        return str(e)
    return "".join(option(p) if isinstance(p, Setting) else str(p) for p in parts)
