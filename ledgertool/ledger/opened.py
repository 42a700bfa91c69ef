"""A ledger opened once: its location resolved (a path, file:// or an fsspec URL), its directory
listed by one reader and its ledger.json parsed, handed as one value to whatever reads it next
(verify, recompute on one machine or a cluster, recompute against windows), so that none of
them resolves, lists or parses it again."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..urls import Location, location
from .header import LedgerHeader, parse_ledger_header
from .layout import LEDGER_FILE
from .reader import LedgerReader
from .remote import ledger_reader

__all__ = ["OpenLedger", "open_ledger"]


@dataclass(frozen=True)
class OpenLedger:
    """A ledger directory, its reader and its checked header (`open_ledger`)."""

    location: Path | Location
    reader: LedgerReader
    header: LedgerHeader

    def __str__(self) -> str:  # how messages and reports name the ledger: its location
        return str(self.location)


def open_ledger(where: str | os.PathLike | Location | OpenLedger) -> OpenLedger:
    """The ledger at `where` opened (an OpenLedger is returned as it is). LedgerFormatError (one
    line naming the file) when it is not a ledger or its ledger.json is out of bounds."""
    if isinstance(where, OpenLedger):
        return where
    loc = location(where)
    reader = ledger_reader(loc)
    return OpenLedger(
        loc, reader, parse_ledger_header(reader.read_header_bytes(), loc / LEDGER_FILE)
    )
