"""One writer per ledger: an exclusive flock(2) on DIR/.lock (docs/ledger-format.md, "Writer
lock").

Every command that writes into a ledger (capture, recover, keys rotate, keys rotate-digest,
checkpoint --signing-key) holds the lock for its whole run; a second writer is refused at once
with LedgerLockedError naming the holder, whose pid, command, host and start time the holder
wrote into the lock file. The kernel releases a flock when the holder's last descriptor closes,
also when the process is killed, so a crashed writer never leaves a stale lock behind; the file
itself stays (removing it would let two writers lock two different files). Readers (verify,
query, prove ...) take no lock: every file a writer replaces is renamed into place whole
(ledgertool.fsio), and an open segment only grows, so a reader sees each file either before or
after a write and at worst an open segment (a warning), never a half-written seal or checkpoint.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import LedgerLockedError
from ..fsio import open_dir, storage_error, wrong_kind
from .layout import LOCK_FILE

_MAX_HOLDER_BYTES = 4096


@dataclass(frozen=True)
class LockHolder:
    """Who holds a ledger's writer lock, as the holder wrote it (schemas: none; informational)."""

    pid: int
    command: str
    host: str
    since: str  # RFC 3339, UTC

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} ({self.command}, since {self.since})"

    @classmethod
    def parse(cls, raw: bytes) -> LockHolder | None:
        try:
            doc = json.loads(raw)
            return cls(int(doc["pid"]), str(doc["command"]), str(doc["host"]), str(doc["since"]))
        except (ValueError, TypeError, KeyError):
            return None


@contextmanager
def writer_lock(directory: Path, command: str) -> Iterator[LockHolder]:
    """Hold the exclusive writer lock of the ledger at `directory` (which must exist) while the
    block runs; yields what was written into the lock file. LedgerLockedError (exit 2) when another
    process holds it; FileTypeError when DIR/.lock is a link or not a regular file;
    StorageError when the lock file cannot be created (a read-only ledger, for one)."""
    path = Path(directory) / LOCK_FILE
    dfd = open_dir(directory)
    try:
        fd = os.open(
            LOCK_FILE,
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o644,
            dir_fd=dfd,
        )
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise wrong_kind(path, stat.S_IFLNK, "a regular file") from None
        raise storage_error(e, path, "open the ledger's writer lock") from None
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise wrong_kind(path, st.st_mode, "a regular file (the writer lock)")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = LockHolder.parse(os.pread(fd, _MAX_HOLDER_BYTES, 0))
            who = (
                holder.describe() if holder else "another process (it has not written its name yet)"
            )
            raise LedgerLockedError(
                f"{directory}: another writer holds the ledger: {who}; wait for it to "
                f"finish (one writer per ledger; {path})"
            ) from None
        me = LockHolder(
            os.getpid(),
            command,
            socket.gethostname(),
            datetime.now(UTC).isoformat(timespec="seconds"),
        )
        raw = json.dumps(
            {"pid": me.pid, "command": me.command, "host": me.host, "since": me.since}
        ).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, raw + b"\n", 0)
    except OSError as e:
        os.close(fd)
        raise storage_error(e, path, "write the ledger's writer lock") from None
    except BaseException:
        os.close(fd)
        raise
    try:
        yield me
    finally:
        os.close(fd)  # releases the flock
