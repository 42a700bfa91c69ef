"""Standard output and standard error that fail the way docs/cli.md says ("Standard output and
error"): a failed write to standard output is an OutputError (exit 2, one line on stderr saying
what the command had done), a failed write to standard error is dropped (there is nowhere left
to say it), and a descriptor 0-2 closed at start is never handed to a file the run opens.
"""

from __future__ import annotations

import errno
import os
import sys


class OutputError(Exception):
    """Writing or flushing standard output failed: the report is lost, not the work. Not an
    OSError: click turns an OSError with EPIPE into a silent exit 1, the code of a discrepancy."""

    def __init__(self, errno_: int | None, strerror: str):
        super().__init__(strerror)
        self.errno = errno_
        self.strerror = strerror


class _Guarded:
    """A text stream whose write and flush errors become OutputError, or with `drop` are dropped."""

    def __init__(self, stream, drop: bool):
        self._stream = stream
        self._drop = drop

    def _failed(self, e: OSError):
        if self._drop:
            return None
        raise OutputError(e.errno, e.strerror or str(e)) from None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            self._failed(e)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            self._failed(e)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _Closed:
    """What stands for a standard stream whose descriptor was closed when the run started."""

    encoding = "utf-8"
    errors = "strict"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def reserve_closed_descriptors() -> set[int]:
    """/dev/null on each of descriptors 0-2 that is closed, so that no file the run opens (a
    ledger file) becomes one and receives what a library prints there; returns those closed."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            nul = os.open(os.devnull, os.O_RDWR)
            if nul != fd:
                os.dup2(nul, fd)
                os.close(nul)
            closed.add(fd)
    return closed


def guard_streams(closed: set[int] = frozenset()) -> tuple:
    """Put the guards on sys.stdout and sys.stderr; returns the streams they replace (for
    restore_streams). A stream Python left as None (its descriptor closed) becomes _Closed."""
    saved = (sys.stdout, sys.stderr)
    stdout = _Closed() if sys.stdout is None or 1 in closed else sys.stdout
    stderr = _Closed() if sys.stderr is None or 2 in closed else sys.stderr
    if not isinstance(stdout, _Guarded):
        sys.stdout = _Guarded(stdout, drop=False)
    if not isinstance(stderr, _Guarded):
        sys.stderr = _Guarded(stderr, drop=True)
    return saved


def restore_streams(saved: tuple) -> None:
    sys.stdout, sys.stderr = saved
