"""Error hierarchy, mapped to CLI exit codes in one place (`exit_code_for`).

Two roots under `LedgerError`, as python-tuf splits bad metadata from a failed download:
  DataError  the data or the request is wrong (a corrupt capture, a tampered ledger, a bad key file,
             a setting out of range); running again on the same input fails the same way
  HostError  the machine around the data is in the way (storage full or read-only, an interface
             that cannot be opened, a ledger locked by another process); fixing the host may help

Exit codes (docs/cli.md): 0 ok, 1 discrepancy found, 2 bad input or usage.
Every message is one line that names the file and, where it applies, the byte offset,
segment or record. Library messages name settings by their parameter name (`Setting`), never by
a command-line option; the CLI shows its option there instead (ledgertool.cli.flags).
"""

from __future__ import annotations


class Setting(str):
    """The name of a library parameter inside an error message (``ring_mb``, ``segment_records``):
    `str()` of the error shows the name; the CLI shows the option that sets it (``--ring-mb``)."""

    __slots__ = ()


class LedgerError(Exception):
    """Base of every error ledgertool raises on purpose. `str(e)` is the one-line message.

    Built from parts: plain text and `Setting` names, so the CLI can render each setting as its
    option (`parts`) while `str(e)` stays in the library's words."""

    exit_code = 2

    def __init__(self, *parts: str):
        self.parts = parts
        super().__init__("".join(map(str, parts)))


class DataError(LedgerError):
    """Root of the errors about the input itself: bad data, bad settings, tampered ledgers."""


class HostError(LedgerError):
    """Root of the errors about the environment: storage, interfaces, locks held by others."""


class UsageError(DataError):
    """A call's settings are wrong: out of range, conflicting or missing (names them as
    `Setting`)."""


class CaptureFormatError(DataError):
    """A capture file is missing, unreadable, not a capture (by magic), or corrupt.

    `path` names the file; `offset` is the byte offset of the bad header or block, when known.
    """

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset


class WorkloadSpecError(DataError):
    """A workload spec is unreadable, not TOML, or breaks a rule; `key` names the offending key
    (e.g. ``flows[1].vlan``) where one does."""

    def __init__(self, message: str, path: str | None = None, key: str | None = None):
        super().__init__(message)
        self.path = path
        self.key = key


class InterfaceError(HostError):
    """A live interface cannot be opened or read (missing, no permission, ring set-up failed,
    interface gone), or a replay cannot send. `iface` names the interface."""

    def __init__(self, message: str, iface: str | None = None):
        super().__init__(message)
        self.iface = iface


class KeyFileError(DataError):
    """A key or trust file is missing, malformed, or does not fit the ledger (wrong key)."""


class LedgerFormatError(DataError):
    """A directory is not a ledger, or one of its files cannot be parsed at all."""


class StorageError(HostError):
    """A file cannot be read or written because of its environment: no space left, a read-only
    file system, an I/O error, a missing permission. The message names the file the command was
    working on (never a temporary name) and what to do; `path` is that file, `errno` the OS error
    number (errno module)."""

    def __init__(self, message: str, path: str | None = None, errno: int | None = None):
        super().__init__(message)
        self.path = path
        self.errno = errno


class FileTypeError(DataError):
    """A path holds the wrong kind of file: a symbolic link, FIFO, socket, device or directory where
    a regular file belongs, or a link or file where a directory belongs. Nothing inside a ledger is
    followed, read or written through such a path (docs/threat-model.md, "File system")."""


class LedgerLockedError(HostError):
    """Another process holds the ledger's writer lock (DIR/.lock); the message names it (pid,
    command, since when)."""


class AlgorithmError(DataError):
    """Unknown algorithm or strip mode, or one not allowed in a ledger (64-bit digests)."""


class ClusterError(HostError):
    """The compute cluster a command runs on is in the way: its scheduler cannot be reached, or it
    lost the work of a segment (workers that kept dying) so that no complete verdict exists."""


class NativeModuleError(HostError):
    """The compiled native module (ledgertool._native) is missing, or was built from other sources
    than this package (ledgertool/_binding.py checks at import); the message says how to rebuild."""


class DiscrepancyError(DataError):
    """A check ran and found a discrepancy (used where a command has no richer result)."""

    exit_code = 1


class OpenSegmentRefusedError(DiscrepancyError):
    """Recovery will not seal an open segment: a block fails authentication by the device's key
    (planted, rewritten, reordered), its header names another MAC key, or it carries no
    authentication (format v1; `unauthenticated`) and the storage was not declared trusted.
    Nothing of it is signed; the file stays where it is, for inspection."""

    def __init__(self, *parts: str, unauthenticated: bool = False):
        super().__init__(*parts)
        self.unauthenticated = unauthenticated


class RecordsPrunedError(DataError):
    """The records asked for were removed by `ledgertool prune` under a valid prune statement:
    their seal is still checked, but no per-frame record (and no inclusion proof of one) is held;
    the window tier still commits to their frames. Exit 2: the data is gone on purpose, not
    changed."""


class RollbackRefusedError(DataError):
    """The ledger's storage is behind what this signing key has signed, or diverges from it (the
    device's protected state, ledgertool.ledger.devstate): a seal or checkpoint the device signed
    is missing or replaced, or a sealed segment comes back as an open one. Nothing is signed: a
    new seal there would fork the history the device already vouched for."""


def exit_code_for(exc: BaseException) -> int:
    """Exit code for an exception reaching the CLI: 2 for anything unexpected."""
    return getattr(exc, "exit_code", 2) if isinstance(exc, LedgerError) else 2
