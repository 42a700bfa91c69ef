"""Library setting names -> the command-line options that set them.

Library errors name a wrong setting by its parameter name (`ledgertool.errors.Setting`, e.g.
``ring_mb``); on the command line the same message names the option (``--ring-mb``). Most options
are the parameter name with dashes; the rest are listed here.
"""

from __future__ import annotations

from ..errors import LedgerError, Setting

#: parameter name -> option, where the option is not "--" + the name with dashes
OPTIONS = {
    "from_ns": "--from",
    "to_ns": "--to",
    "loops": "--loop",
    "pin_cpu": "--pin",
    "valid_for_s": "--valid-for",
    "plain_tcp": "--insecure-cluster",
    "links": "--link",
    "before_ns": "--before",
}


def option(name: str) -> str:
    """The command-line option that sets library parameter `name`."""
    return OPTIONS.get(name) or "--" + name.replace("_", "-")


def cli_message(e: LedgerError) -> str:
    """`e`'s message with every `Setting` shown as its option (docs/cli.md wording)."""
    parts = getattr(e, "parts", None)
    # no parts, or the message was rewritten since
    if not parts or "".join(map(str, parts)) != str(e):
        return str(e)
    return "".join(option(p) if isinstance(p, Setting) else str(p) for p in parts)
