"""A witness's state directory: per log (origin), the latest checkpoint it cosigned, one file
each (`<SHA-256 of the origin, hex>.checkpoint`), replaced atomically before the witness answers.

The state is the witness's own, but it is read back as untrusted: a file that does not parse,
names another origin or is not signed by the log's configured key stops the witness (a witness
that cannot trust what it held must not cosign from scratch: that would cosign a fork).

One witness at a time per directory: `witness.lock` is held (flock) while a witness serves from it,
since two witnesses each holding their own copy of the state could each cosign another root for
one size."""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

from .. import fsio
from ..errors import LedgerFormatError, LedgerLockedError
from ..seal.checkpoint import MAX_NOTE_BYTES, parse_note
from ..seal.witness import Held, NoteKey, log_signed


def state_path(directory: Path, origin: str) -> Path:
    return Path(directory) / f"{hashlib.sha256(origin.encode()).hexdigest()}.checkpoint"


LOCK_FILE = "witness.lock"


def lock_state(directory: Path) -> int:
    """A descriptor holding the state directory's exclusive lock (close it to release);
    LedgerLockedError when another witness holds it."""
    directory = Path(directory)
    fsio.make_dirs(directory)
    dfd = fsio.open_dir(directory)
    try:
        fd = os.open(
            LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd
        )
    except OSError as e:
        raise fsio.storage_error(e, directory / LOCK_FILE, "open the witness's lock") from None
    finally:
        os.close(dfd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if isinstance(e, BlockingIOError):
            raise LedgerLockedError(
                f"{directory}: another witness serves from this state directory; one witness "
                "per state (two would each cosign from their own copy of it)"
            ) from None
        raise fsio.storage_error(e, directory / LOCK_FILE, "lock the witness's state") from None
    return fd


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
