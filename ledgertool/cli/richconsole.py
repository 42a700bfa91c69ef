"""The rich console behind cli/render.SafeConsole, built when a print needs rich (a table, a
terminal's colours, progress): the one module that subclasses rich's Console."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from .printable import printable


class RichConsole(Console):
    """A rich Console that never interprets the strings it prints: markup, emoji codes and
    highlighting are off whatever a call asks for, and control characters are made visible
    (`printable`), in `print` and in table cells alike."""

    def __init__(self, **kwargs) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **kwargs)

    def render_str(self, text: str, **kwargs) -> Text:
        kwargs.update(markup=False, emoji=False, highlight=False)
        return super().render_str(printable(text), **kwargs)
