"""A witness's state directory: per log (origin), the latest checkpoint it cosigned, one file
each (`<SHA-256 of the origin, hex>.checkpoint`), replaced atomically before the witness answers.

The state is the witness's own, but it is read back as untrusted: a file that does not parse,
names another origin or is not signed by the log's configured key stops the witness (a witness
that cannot trust what it held must not cosign from scratch: that would cosign a fork)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .. import fsio
from ..errors import LedgerFormatError
from ..seal.checkpoint import MAX_NOTE_BYTES, parse_note
from ..seal.witness import Held, NoteKey, log_signed


def state_path(directory: Path, origin: str) -> Path:
    return Path(directory) / f"{hashlib.sha256(origin.encode()).hexdigest()}.checkpoint"


def load_state(directory: Path, logs: dict[str, list[NoteKey]]) -> dict[str, Held]:
    """What the witness holds for each configured log (a log it never cosigned is absent)."""
    directory = Path(directory)
    fsio.make_dirs(directory)
    held = {}
    for origin, keys in logs.items():
        path = state_path(directory, origin)
        if not os.path.lexists(path):
            continue
        data = fsio.read_regular(path, MAX_NOTE_BYTES, what="witness state")
        note = parse_note(data, str(path))
        if note.checkpoint.origin != origin or not log_signed(note, keys):
            raise LedgerFormatError(
                f"{path}: not a checkpoint of {origin} signed by its configured key; the witness "
                "does not start from a state it cannot trust"
            )
        held[origin] = Held(note.checkpoint.size, note.checkpoint.root, data)
    return held


def save_state(directory: Path, origin: str, held: Held) -> None:
    fsio.write_atomic(state_path(directory, origin), held.note, what="witness state")
