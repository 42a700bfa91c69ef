"""A ledger at an fsspec URL (s3://, gs://, memory:// ...): LedgerReader with fsspec storage.

Every name rule is LedgerReader's (ASCII segment index, anything the layout does not name is a
stray and never read, each file opened by the name spelled from its index); only the storage
primitives differ. An object store has no links, FIFOs or devices: an entry is a file (a regular
file) or a directory, anything else a filesystem reports is a special file, never read. Each
file is read once, bounded as locally (its listed size against the limit first, then at most
limit + 1 bytes), into memory the checks and the readers after them share.

`ledger_reader` is the one constructor callers use: a local Path (or a file:// URL) gets the
local LedgerReader, any other URL this one.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ..errors import FileTypeError, LedgerError, LedgerFormatError
from ..urls import Location, UrlPath, filesystem, location, remote_error
from .reader import LedgerReader

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa

__all__ = ["FsspecLedgerReader", "ledger_reader"]

_MODES = {"file": stat.S_IFREG, "directory": stat.S_IFDIR}


def ledger_reader(directory: str | os.PathLike | Location) -> LedgerReader:
    """The reader of the ledger at `directory`: a local path, file://PATH or an fsspec URL."""
    where = location(directory)
    return FsspecLedgerReader(where) if isinstance(where, UrlPath) else LedgerReader(Path(where))


@dataclass
class FsspecLedgerReader(LedgerReader):
    """LedgerReader over the fsspec filesystem of a UrlPath (module docstring). Storage errors
    (a listing or read that fails, an object gone) are StorageError naming the URL."""

    def _check_top(self) -> None:
        self._fs = filesystem(self.directory.url)[0]
        mode = self._lmode(self.directory)
        if mode is None or not stat.S_ISDIR(mode):
            what = (
                "not a directory; a ledger is a directory"
                if mode is not None
                else "no such ledger directory"
            )
            raise LedgerFormatError(f"{self.directory}: {what}")

    def _info(self, path: UrlPath) -> dict | None:
        try:
            return self._fs.info(path.path)
        except FileNotFoundError:
            return None
        except Exception as e:  # a remote filesystem's own errors (network, permission, ...)
            raise remote_error(e, path, "look up") from None

    def _lmode(self, path: UrlPath) -> int | None:
        info = self._info(path)
        return None if info is None else _MODES.get(info.get("type"), 0)

    def _list(self, directory: UrlPath) -> list[tuple[str, int]]:
        try:
            entries = self._fs.ls(directory.path, detail=True)
        except Exception as e:
            raise remote_error(e, directory, "list directory") from None
        out, prefix = [], directory.path.rstrip("/") + "/"
        for e in entries:
            full = str(e.get("name", "")).rstrip("/")
            name = full[len(prefix) :] if full.startswith(prefix) else ""
            if full == directory.path.rstrip("/"):
                continue  # some stores list a directory's own marker object
            if not name or "/" in name:  # not a child of this directory: a stray under an odd name
                name = full.rsplit("/", 1)[-1] or full
                out.append((name, 0))
                continue
            out.append((name, _MODES.get(e.get("type"), 0)))
        return sorted(out)

    def _read(self, path: UrlPath, limit: int | None, what: str) -> pa.Buffer:
        import pyarrow as pa

        return pa.py_buffer(self._read_document(path, limit, what))

    def _read_document(
        self, path: UrlPath, limit: int | None, what: str, dir_fd: int | None = None
    ) -> bytes:
        info = self._info(path)
        if info is None:
            raise remote_error(FileNotFoundError(path.path), path, f"read {what}")
        if info.get("type") != "file":
            raise FileTypeError(
                f"{path}: is a {info.get('type') or 'special file'}; expected a regular file "
                f"({what})"
            )
        size = info.get("size")
        if limit is not None and isinstance(size, int) and size > limit:
            raise LedgerFormatError(f"{path}: {size} bytes, larger than a {what} can be ({limit})")
        try:
            with self._fs.open(path.path, "rb") as f:
                data = f.read() if limit is None else f.read(limit + 1)
        except Exception as e:
            raise remote_error(e, path, f"read {what}") from None
        if limit is not None and len(data) > limit:
            raise LedgerFormatError(f"{path}: larger than a {what} can be ({limit} bytes)")
        if isinstance(size, int) and len(data) != size:
            raise LedgerFormatError(f"{path}: changed size while being read")
        return data

    def _open_link_dir(self, link: str) -> None:
        return None  # no descriptors on fsspec storage: every read goes by its path

    def _open_records(
        self, path: UrlPath, what: str, dir_fd: int | None = None, limit: int | None = None
    ) -> pa.Buffer:
        return self._read(path, limit, what)  # no map of a remote file: its bytes, bounded

    @contextmanager
    def _open_growing(self, path: UrlPath, what: str) -> Iterator[tuple[BinaryIO, int]]:
        info = self._info(path)
        if info is None:
            raise remote_error(FileNotFoundError(path.path), path, f"read {what}")
        size = info.get("type"), info.get("size")
        if size[0] != "file" or not isinstance(size[1], int):
            raise FileTypeError(
                f"{path}: is a {size[0] or 'special file'}; expected a regular file ({what})"
            )
        try:  # ranged reads of the object, as the local file's
            with self._fs.open(path.path, "rb") as f:
                yield f, size[1]
        except LedgerError:  # the reads' own finding, not the storage's
            raise
        except Exception as e:
            raise remote_error(e, path, f"read {what}") from None

    def _check_dir(self, path: UrlPath) -> None:
        mode = self._lmode(path)
        if mode is None or not stat.S_ISDIR(mode):
            raise FileTypeError(f"{path}: is not a directory")

    def exists(self, link: str, index: int, kind: str, *, follow_symlinks: bool) -> bool:
        return self._lmode(self.segment_path(link, index, kind)) is not None
