"""Ledger and capture locations given as fsspec URLs (docs/cluster.md, "Data where it lives").

`file://PATH` is the local path PATH, read by the local readers under their rules (no symlink
followed inside a ledger, regular files only). Any other `SCHEME://...` (s3://, gs://, memory://
...) is read through fsspec with the filesystem the user installed for it; fsspec is imported
only here and only when such a URL is given, so the base install does not need it.

A `UrlPath` names an object on such a filesystem in messages and spells the names a ledger reader
opens; it has no __fspath__, so nothing can hand it to a local open by mistake.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from .errors import StorageError, UsageError

_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)

#: The package a scheme's fsspec filesystem comes in, for the "not installed" message.
PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "hf": "huggingface_hub",
    "sftp": "paramiko",
    "ssh": "paramiko",
    "http": "aiohttp",
    "https": "aiohttp",
}


@dataclass(frozen=True)
class UrlPath:
    """An object on an fsspec filesystem: `url` as the user spells it (messages), `path` as the
    filesystem names it. `/` joins one name, as pathlib does."""

    url: str
    path: str
    protocol: str

    def __truediv__(self, name: str) -> UrlPath:
        return UrlPath(f"{self.url}/{name}", f"{self.path}/{name}", self.protocol)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def parent(self) -> UrlPath:
        return UrlPath(self.url.rsplit("/", 1)[0], self.path.rsplit("/", 1)[0], self.protocol)

    def __str__(self) -> str:
        return self.url


Location = Path | UrlPath


def is_url(arg: object) -> bool:
    """Whether `arg` is a string of the form SCHEME://... (a Path never is)."""
    return isinstance(arg, str) and _URL.fullmatch(arg) is not None


def location(arg: str | os.PathLike | UrlPath) -> Location:
    """The location `arg` names: a UrlPath for a URL other than file://, else a local Path
    (file://PATH is PATH, percent-decoded; file://localhost/PATH too). UsageError for a file://
    URL naming another host."""
    if isinstance(arg, (UrlPath, Path)):
        return arg
    if not is_url(arg):
        return Path(arg)
    scheme, rest = _URL.fullmatch(arg).groups()
    if scheme.lower() == "file":
        host, sep, path = rest.partition("/")
        if host not in ("", "localhost"):
            raise UsageError(
                f"{arg}: a file:// URL names a local path (file:///PATH), not host {host!r}"
            )
        return Path("/" + unquote(path) if sep else "/")
    url = arg.rstrip("/")
    return UrlPath(url, filesystem(url)[1], scheme.lower())


def filesystem(url: str):
    """(fsspec filesystem, its path) for `url`. UsageError (exit 2) naming the package to install
    when fsspec or the scheme's filesystem is missing, or the scheme is unknown to fsspec."""
    scheme = url.split("://", 1)[0].lower()
    try:
        import fsspec  # optional: only a URL needs it (ledgertool[cluster])
    except ImportError:
        raise UsageError(
            f"{url}: a {scheme}:// location needs fsspec: pip install fsspec "
            "(or pip install 'ledgertool[cluster]')"
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError:
        pkg = PACKAGES.get(scheme, f"the fsspec filesystem for {scheme}://")
        raise UsageError(f"{url}: {scheme}:// needs {pkg}: pip install {pkg}") from None
    except ValueError as e:
        raise UsageError(f"{url}: {e} (fsspec knows no filesystem for {scheme}://)") from None
    return fs, path.rstrip("/") or path


def remote_error(e: Exception, where: object, action: str) -> StorageError:
    """StorageError '{where}: cannot {action}: {why}' for an exception a remote filesystem raised;
    `errno` ENOENT for a missing object (the local readers' convention)."""
    if isinstance(e, FileNotFoundError):
        return StorageError(f"{where}: cannot {action}: no such object", str(where), errno.ENOENT)
    why = (str(e).splitlines() or [""])[0] or type(e).__name__
    return StorageError(f"{where}: cannot {action}: {why}", str(where), getattr(e, "errno", None))
