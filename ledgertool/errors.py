"""Error hierarchy, mapped to CLI exit codes in one place (`exit_code_for`).

Exit codes (docs/cli.md): 0 ok, 1 discrepancy found, 2 bad input or usage.
Every message is one line that names the file and, where it applies, the byte offset,
segment or record.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Base of every error ledgertool raises on purpose. `str(e)` is the one-line message."""

    exit_code = 2


class UsageError(LedgerError):
    """Bad command-line usage (conflicting or missing options)."""


class CaptureFormatError(LedgerError):
    """A capture file is missing, unreadable, not a capture (by magic), or corrupt.

    `path` names the file; `offset` is the byte offset of the bad header or block, when known.
    """

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset


class WorkloadSpecError(LedgerError):
    """A workload spec is unreadable, not TOML, or breaks a rule; `key` names the offending key
    (e.g. ``flows[1].vlan``) where one does."""

    def __init__(self, message: str, path: str | None = None, key: str | None = None):
        super().__init__(message)
        self.path = path
        self.key = key


class InterfaceError(LedgerError):
    """A live interface cannot be opened or read (missing, no permission, ring set-up failed,
    interface gone), or a replay cannot send. `iface` names the interface."""

    def __init__(self, message: str, iface: str | None = None):
        super().__init__(message)
        self.iface = iface


class KeyFileError(LedgerError):
    """A key or trust file is missing, malformed, or does not fit the ledger (wrong key)."""


class LedgerFormatError(LedgerError):
    """A directory is not a ledger, or one of its files cannot be parsed at all."""


class StorageError(LedgerError):
    """A file cannot be read or written because of its environment: no space left, a read-only
    file system, an I/O error, a missing permission. The message names the file the command was
    working on (never a temporary name) and what to do; `path` is that file, `errno` the OS error
    number (errno module)."""

    def __init__(self, message: str, path: str | None = None, errno: int | None = None):
        super().__init__(message)
        self.path = path
        self.errno = errno


class FileTypeError(LedgerError):
    """A path holds the wrong kind of file: a symbolic link, FIFO, socket, device or directory where
    a regular file belongs, or a link or file where a directory belongs. Nothing inside a ledger is
    followed, read or written through such a path (docs/threat-model.md, "File system")."""


class LedgerLockedError(LedgerError):
    """Another process holds the ledger's writer lock (DIR/.lock); the message names it (pid,
    command, since when)."""


class AlgorithmError(LedgerError):
    """Unknown algorithm or strip mode, or one not allowed in a ledger (64-bit digests)."""


class NativeModuleError(LedgerError):
    """The compiled native module (ledgertool._native) is missing, or was built from other sources
    than this package (ledgertool/_binding.py checks at import); the message says how to rebuild."""


class DiscrepancyError(LedgerError):
    """A check ran and found a discrepancy (used where a command has no richer result)."""

    exit_code = 1


def exit_code_for(exc: BaseException) -> int:
    """Exit code for an exception reaching the CLI: 2 for anything unexpected."""
    return getattr(exc, "exit_code", 2) if isinstance(exc, LedgerError) else 2
