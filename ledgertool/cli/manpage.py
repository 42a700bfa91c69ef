"""The ledgertool(1) manual page, generated from the command tree that `--help` shows (every
command's usage, description, options and the Reads/Writes/Exit codes/Example text), so the page
and `--help` cannot disagree. `python scripts/make_manpage.py [FILE]` writes it (roff, `man -l`)."""

from __future__ import annotations

import datetime

from .. import __version__


def _roff(text: str) -> str:
    """Plain text as roff: backslashes and leading dots/quotes escaped."""
    lines = []
    for line in text.replace("\\", "\\e").split("\n"):
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


def _options(cmd, ctx) -> list[str]:
    out = []
    for p in cmd.get_params(ctx):
        rec = p.get_help_record(ctx)
        if rec is None:
            continue
        names, help_text = rec
        out += [".TP", f"\\fB{_roff(names)}\\fR", _roff(help_text or "")]
    return out


def _epilog(text: str) -> list[str]:
    out = [".PP", ".nf"]
    out += [_roff(line) for line in text.replace("\b\n", "").splitlines()]
    return out + [".fi"]


def man_page(today: datetime.date | None = None) -> str:
    """The whole page: NAME, SYNOPSIS, DESCRIPTION with the global options, then a COMMANDS section
    with one subsection per command (groups' commands under their full name)."""
    import click

    from .app import click_command

    root = click_command()
    date = (today or datetime.date.today()).isoformat()
    lines = [
        f'.TH LEDGERTOOL 1 "{date}" "ledgertool {__version__}" "User Commands"',
        ".SH NAME",
        "ledgertool \\- " + _roff(root.help or ""),
        ".SH SYNOPSIS",
        "\\fBledgertool\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
        ".SH DESCRIPTION",
        "Every command's options, what it reads and writes and its exit codes follow;",
        "docs/cli.md has the whole story.",
        ".SH OPTIONS",
    ]
    lines += _options(root, click.Context(root, info_name="ledgertool"))
    lines.append(".SH COMMANDS")

    def walk(cmd, path: list[str], parent) -> None:
        ctx = click.Context(cmd, info_name=path[-1], parent=parent)
        subs = getattr(cmd, "commands", None)
        if subs:
            for name in cmd.list_commands(ctx):
                walk(subs[name], [*path, name], ctx)
            return
        name = " ".join(path[1:])
        lines.extend([f'.SS "{_roff(name)}"', ".nf", _roff(cmd.get_usage(ctx)), ".fi", ".PP"])
        lines.append(_roff(cmd.help or ""))
        lines.extend(_options(cmd, ctx))
        if cmd.epilog:
            lines.extend(_epilog(cmd.epilog))

    root_ctx = click.Context(root, info_name="ledgertool")
    for name in root.list_commands(root_ctx):
        walk(root.commands[name], ["ledgertool", name], root_ctx)
    lines += [".SH SEE ALSO", "tcpdump(1), tshark(1), duckdb(1)"]
    return "\n".join(lines) + "\n"
