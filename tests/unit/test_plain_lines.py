"""The lines a command prints to a file or a pipe are written without rich (cli/render.py): the
text must be rich's, byte for byte, for any strings and styled parts, and rich must still draw
what it alone can (a terminal, colour forced by the environment, a table)."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool.cli.render import SafeConsole, styled
from ledgertool.cli.richconsole import RichConsole

STYLES = ["", "red", "green", "yellow", "bold red", "bold"]
#: any text: controls, separators, bidi overrides, surrogates, tabs, wide and combining characters
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
PART = TEXT | st.tuples(TEXT, st.sampled_from(STYLES))
OBJECT = TEXT | st.lists(PART, min_size=1, max_size=4).map(lambda parts: styled(*parts))


def _printed(console_of, stderr: bool, objects, sep=" ", end="\n", **kwargs) -> str:
    """What a console built by `console_of` prints to stdout or stderr (a StringIO: not a tty)."""
    buf = io.StringIO()
    redirect = contextlib.redirect_stderr if stderr else contextlib.redirect_stdout
    with redirect(buf):
        console = console_of(stderr=stderr, soft_wrap=True)
        console.print(*objects, sep=sep, end=end, **kwargs)
    return buf.getvalue(), console


def _rich(**kwargs):
    return RichConsole(**kwargs)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(OBJECT, max_size=4),
    st.booleans(),
    st.sampled_from([" ", "", ", "]),
    st.sampled_from(["\n", "", " ."]),
    st.sampled_from(
        [{}, {"markup": False}, {"markup": False, "highlight": False, "soft_wrap": True}]
    ),
)
def test_plain_lines_are_riches(objects, stderr, sep, end, kwargs):
    plain, console = _printed(SafeConsole, stderr, objects, sep, end, **kwargs)
    want, _ = _printed(_rich, stderr, objects, sep, end, **kwargs)
    assert plain == want
    assert console._rich is None  # written without rich


def test_known_line():
    line = styled("L: ", ("OK", "green"), ": 1 segment\x1b[2J, links \u202elink0")
    plain, console = _printed(SafeConsole, False, [line, "and\ttab"])
    assert plain == "L: OK: 1 segment\\x1b[2J, links \\u202elink0 and\\x09tab\n"
    assert console._rich is None and not console.is_terminal


@pytest.mark.parametrize("env", [{"FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "1"}])
def test_colour_forced_by_the_environment_is_drawn_by_rich(monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    line = [styled(("FAIL", "red"), " x")]
    got, console = _printed(SafeConsole, False, line)
    want, _ = _printed(_rich, False, line)
    assert got == want and "\x1b[" in got  # red, as rich draws it
    assert console._rich is not None


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_is_drawn_by_rich(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    buf = _Tty()
    with contextlib.redirect_stdout(buf):
        console = SafeConsole(soft_wrap=True)
        assert console.is_terminal
        console.print(styled(("OK", "green"), ": 1 segment"))
    assert console._rich is not None
    assert buf.getvalue() == "\x1b[32mOK\x1b[0m: 1 segment\n"


def test_what_only_rich_draws_goes_to_rich():
    from rich.table import Table

    t = Table("a", "b")
    t.add_row(styled(("x\x07", "red")), "y")
    got, console = _printed(SafeConsole, False, [t])
    assert console._rich is not None and "x\\x07" in got and "┃" in got
    got, console = _printed(SafeConsole, False, ["x"], style="red")
    assert console._rich is not None and got == "x\n"
