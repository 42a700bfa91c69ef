"""LedgerReader: the one place a ledger directory is listed and its files are read.

The storage a ledger lives on is normally the prover's (docs/threat-model.md), so what is found
there is data to be checked, never instructions:

* The segment index is built from file names parsed as ASCII only (``seg-`` + eight ASCII digits);
  a name that only looks like one (other Unicode digits, compatibility forms) is reported, never
  read. Every file is then opened by the name spelled here from its index, never by a name taken
  from a seal field or passed on from the listing.
* Files are opened with O_NOFOLLOW and O_NONBLOCK and must be regular files: a symlink, FIFO,
  socket or device in a ledger is refused with a message naming it (a FIFO would block a reader).
* Each file is read once, a segment file into memory owned by Arrow (``pyarrow.Buffer``) and a
  document (seal, checkpoint, ledger.json, rotation statement) into bytes, and the bytes that are
  hashed are the bytes that are decoded; nothing re-opens a file that was checked. pyarrow is
  imported by the first read that needs it: `verify` of a v2 ledger reads documents and maps raw
  record files, and loads no pyarrow (start-up time, docs/benchmarks.md).

Everything a reader finds that is not part of the ledger (stray files, confusable names, link
directories with invalid names) is listed in `Stray` values for `verify` to report; `query`,
`recompute` and `prove` see only the segments of the index.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from .. import fsio
from ..errors import FileTypeError, LedgerFormatError, StorageError
from ..seal.prune import MAX_PRUNE_BYTES
from ..seal.rotation import MAX_ROTATION_BYTES
from ..urls import UrlPath
from .layout import (
    CHECKPOINT_FILE,
    LEAVES,
    LEDGER_FILE,
    LINK_PREFIX,
    LOCK_FILE,
    OPEN,
    PARQUET,
    PRUNED_DIR,
    RECORDS,
    ROTATIONS_DIR,
    SEAL,
    SET_ASIDE_DIR,
    is_link_name,
    log_dir_name,
    parse_prune_name,
    parse_rotation_name,
    parse_segment_name,
    segment_name,
    window_log_link,
)

if TYPE_CHECKING:
    import pyarrow as pa

#: Names a writer leaves behind for a moment (atomic-write temporaries) or on purpose.
_TEMP = re.compile(r".*\.tmp(-[A-Za-z0-9_]+)?")
# seals, checkpoints, rotation statements, ledger.json: far larger is not one
MAX_DOCUMENT_BYTES = 1 << 20
MAX_LEDGER_FILE_BYTES = 1 << 16  # ledger.json is a few hundred bytes


@dataclass(frozen=True)
class OpenRecordFile:
    """A raw record file open for reading: `fd` (opened by the ledger reader's rules; its opener
    closes it) and `size`, its length in bytes when fstat'd at open.
    ledgertool.ledger.recfile.parse_record_file reads it with pread(2) straight into the records'
    copy (or the walk's stage): no whole-file buffer, and no map a failing disk could hang."""

    fd: int
    size: int


@dataclass(frozen=True)
class Stray:
    """Something in a ledger directory that is not part of the ledger. `shadows` is the segment
    index a confusable name imitates when that segment is part of the ledger (a problem, not a
    warning: a reader that parses names loosely would take it for the real file)."""

    path: Path
    why: str
    link: str | None = None
    shadows: int | None = None


@dataclass(frozen=True)
class LinkListing:
    """The files of one link directory, by segment index (ASCII names only)."""

    link: str
    segments: dict[
        int, frozenset[str]
    ]  # index -> kinds present (OPEN, PARQUET, RECORDS, LEAVES, SEAL)
    temp_files: tuple[Path, ...] = ()
    strays: tuple[Stray, ...] = ()

    @property
    def sealed(self) -> list[int]:
        """Indexes with a seal document, ascending: the segments the ledger claims."""
        return sorted(i for i, kinds in self.segments.items() if SEAL in kinds)

    def has(self, index: int, kind: str) -> bool:
        return kind in self.segments.get(index, ())


@lru_cache(maxsize=1024)
def segment_file(link_dir: Path, index: int, kind: str) -> Path:
    """link_dir / segment_name(index, kind), built once: verify names a segment's files in several
    reads and findings, and pathlib's joins were ~10 % of its per-segment Python."""
    return link_dir / segment_name(index, kind)


def confusable_segment_name(name: str) -> tuple[int, str] | None:
    """The segment name `name` imitates with non-ASCII characters (other Unicode decimal digits,
    full-width or other NFKC compatibility forms), or None when it imitates none."""
    if name.isascii():
        return None
    folded = "".join(
        str(unicodedata.decimal(c)) if unicodedata.decimal(c, None) is not None else c
        for c in unicodedata.normalize("NFKC", name)
    )
    return parse_segment_name(folded) if folded.isascii() else None


def read_arrow_buffer(
    path: Path,
    limit: int | None = None,
    *,
    root: Path | None = None,
    what: str = "ledger file",
    dir_fd: int | None = None,
) -> pa.Buffer:
    """The bytes of the regular file at `path`, read once into an Arrow-owned buffer (what the
    ledger's readers hand to pyarrow and the native walk; fsio.read_regular returns bytes).

    Opened by fsio.open_regular (O_NOFOLLOW | O_NONBLOCK, every directory below `root` without
    following a link, or by name relative to `dir_fd`, a held descriptor of its directory; a
    symlink, FIFO, socket, device or directory is FileTypeError), then exactly the size fstat gave
    is read; a file that changes size while it is read, or is larger than `limit` bytes, is
    LedgerFormatError. StorageError for the environment (EIO, EACCES ...)."""
    import pyarrow as pa

    return _read_exact(path, limit, root, what, dir_fd, pa.allocate_buffer)


def read_document_bytes(
    path: Path,
    limit: int | None = None,
    *,
    root: Path | None = None,
    what: str = "ledger file",
    dir_fd: int | None = None,
) -> bytes:
    """read_arrow_buffer's read (its rules and errors) into bytes, without Arrow: for the
    documents (seals, checkpoints, ledger.json, rotation statements) that are parsed as text."""
    return bytes(_read_exact(path, limit, root, what, dir_fd, bytearray))


def _read_exact(
    path: Path,
    limit: int | None,
    root: Path | None,
    what: str,
    dir_fd: int | None,
    alloc: Callable[[int], object],
):
    fd = fsio.open_regular(path, root=root, what=what, dir_fd=dir_fd)
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            raise LedgerFormatError(f"{path}: {size} bytes, larger than a {what} can be ({limit})")
        try:
            buf = alloc(size)
        except MemoryError:  # a file the storage holder made too large (a hole costs it nothing)
            raise LedgerFormatError(
                f"{path}: {size} bytes, too large to read into memory"
            ) from None
        view, got = memoryview(buf), 0
        while got < size:
            n = os.readv(fd, [view[got:]])
            if n == 0:
                break
            got += n
        if got != size or os.read(fd, 1):
            raise LedgerFormatError(f"{path}: changed size while being read")
        return buf
    except OSError as e:
        raise fsio.storage_error(e, path, f"read {what}") from None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISLNK, "symbolic link"),
    ):
        if test(mode):
            return name
    return "special file"


def _entries(directory: Path) -> list[tuple[str, int]]:
    """(name, lstat st_mode) of a directory's entries, sorted by name; never follows a symlink.
    An entry that vanishes between the listing and its lstat (a writer's temporary file renamed
    into place) is left out, as if listed a moment later."""
    out = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                try:
                    out.append((e.name, e.stat(follow_symlinks=False).st_mode))
                except FileNotFoundError:
                    continue
    except OSError as e:
        raise fsio.storage_error(e, directory, "list directory") from None
    return sorted(out)


@dataclass
class LedgerReader:
    """Lists a ledger directory once and reads its files (module docstring for the rules).

    Construction reads nothing but the directory listing; LedgerFormatError when `directory` is
    not a directory (a missing ledger.json is found by `read_header`).

    The storage primitives (`_list`, `_lmode`, `_read`, `_check_dir`, `_check_top`) are the local
    file system's here; ledgertool.ledger.remote overrides them for an fsspec URL, and every name
    rule above them is this class's, the same for both."""

    directory: Path | UrlPath
    links: list[str] = field(init=False)
    # 'windows=NAME': the window logs (layout.window_log)
    window_logs: list[str] = field(init=False)
    strays: list[Stray] = field(init=False)
    _listings: dict[str, LinkListing] = field(init=False, repr=False)
    _link_dirs: dict[str, Path | UrlPath] = field(init=False, repr=False)
    # link -> its directory's descriptor (holding_link)
    _held: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._check_top()
        self.links, self.strays, self._listings, self._link_dirs, self._held = [], [], {}, {}, {}
        self.window_logs = []
        for name, mode in self._list(self.directory):
            path = self.directory / name
            if (
                name.startswith(LINK_PREFIX)
                and stat.S_ISDIR(mode)
                and is_link_name(name[len(LINK_PREFIX) :])
            ):
                self.links.append(name[len(LINK_PREFIX) :])
            elif stat.S_ISDIR(mode) and window_log_link(name) is not None:
                self.window_logs.append(name)  # a link's window log, named as its directory
            elif name in (LEDGER_FILE, CHECKPOINT_FILE, LOCK_FILE) and stat.S_ISREG(mode):
                continue
            elif name in (ROTATIONS_DIR, PRUNED_DIR) and stat.S_ISDIR(mode):
                continue
            elif name == SET_ASIDE_DIR and stat.S_ISDIR(mode):
                self.strays.append(
                    Stray(
                        path, "what `ledgertool recover` set aside of open segments (never sealed)"
                    )
                )
            elif _TEMP.fullmatch(name) and stat.S_ISREG(mode):
                self.strays.append(Stray(path, "temp"))
            else:
                self.strays.append(Stray(path, _stray_reason(name, mode)))

    # ---- storage primitives (local file system; ledgertool.ledger.remote: fsspec) ----------------

    def _check_top(self) -> None:
        self.directory = Path(self.directory)
        # the directory itself is the operator's choice, and may be a link
        if not self.directory.is_dir():
            what = (
                "not a directory; a ledger is a directory"
                if self.directory.exists()
                else "no such ledger directory"
            )
            raise LedgerFormatError(f"{self.directory}: {what}")

    def _list(self, directory) -> list[tuple[str, int]]:
        """(name, st_mode) of a directory's entries, sorted by name, never following a link."""
        return _entries(directory)

    def _lmode(self, path) -> int | None:
        """lstat(2)'s st_mode of `path`, None when nothing is there."""
        try:
            return os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _read(self, path, limit: int | None, what: str) -> pa.Buffer:
        """The bytes of the regular file `path` below the ledger (read_arrow_buffer's rules and
        errors)."""
        return read_arrow_buffer(path, limit, root=self.directory, what=what)

    def _read_document(
        self, path, limit: int | None, what: str, dir_fd: int | None = None
    ) -> bytes:
        """A document's bytes (read_document_bytes), relative to `dir_fd` when given."""
        if dir_fd is None:
            return read_document_bytes(path, limit, root=self.directory, what=what)
        return read_document_bytes(path, limit, what=what, dir_fd=dir_fd)

    @contextmanager
    def _open_growing(self, path, what: str) -> Iterator[tuple[BinaryIO, int]]:
        """A file a writer may be appending to (an open segment), opened for reads in place (a
        buffered file, its size when opened); an OSError while it is open is StorageError."""
        fd = fsio.open_regular(path, what=what)
        try:
            with open(fd, "rb", buffering=1 << 16, closefd=False) as f:
                yield f, os.fstat(fd).st_size
        except OSError as e:
            raise fsio.storage_error(e, path, f"read {what}") from None
        finally:
            os.close(fd)

    def _open_records(
        self, path, what: str, dir_fd: int | None = None, limit: int | None = None
    ) -> OpenRecordFile | pa.Buffer:
        """A raw record file for parse_record_file: open (read_arrow_buffer's rules), read by the
        walk instead of into a buffer here. `dir_fd`: its link's directory, held by
        holding_link: the file is then opened by name relative to it. LedgerFormatError when it
        is larger than `limit`."""
        fd = (
            fsio.open_regular(path, root=self.directory, what=what)
            if dir_fd is None
            else fsio.open_regular(path, what=what, dir_fd=dir_fd)
        )
        try:
            size = os.fstat(fd).st_size
        except OSError as e:
            os.close(fd)
            raise fsio.storage_error(e, path, f"read {what}") from None
        if limit is not None and size > limit:
            os.close(fd)
            raise LedgerFormatError(f"{path}: {size} bytes, larger than its seal allows ({limit})")
        return OpenRecordFile(fd, size)

    def _check_dir(self, path) -> None:
        fsio.check_dir(path, self.directory)  # a link or file there is refused, not followed

    def _open_link_dir(self, link: str) -> int | None:
        """A descriptor of the link's directory, opened below the ledger directory without
        following a link (fsio.open_dir); None when it cannot be opened (each read then reports
        why, as without one)."""
        try:
            return fsio.open_dir(self.link_dir(link), self.directory)
        except (FileTypeError, StorageError):
            return None

    def _read_in_link(self, link: str, path, limit: int | None, what: str) -> pa.Buffer:
        """`_read` of a file in the link's directory: relative to its held descriptor when there
        is one."""
        dfd = self._held.get(link)
        if dfd is None:
            return self._read(path, limit, what)
        return read_arrow_buffer(path, limit, what=what, dir_fd=dfd)

    # ---- listing ------------------------------------------------------------------------------

    @contextmanager
    def holding_link(self, link: str) -> Iterator[None]:
        """Hold one descriptor of `link`'s directory while the caller reads its segment files:
        each is then opened by name relative to it (one openat(2), O_NOFOLLOW, the same checks)
        instead of walking every directory from the ledger directory again, and the files read are
        all in the directory the descriptor names, even if a name above it is swapped meanwhile.
        Nested holds of one link share the outer descriptor; fsspec storage holds nothing."""
        if link in self._held:
            yield
            return
        dfd = self._open_link_dir(link)
        if dfd is None:
            yield
            return
        self._held[link] = dfd
        try:
            yield
        finally:
            del self._held[link]
            os.close(dfd)

    def link_dir(self, link: str) -> Path:
        ldir = self._link_dirs.get(link)
        if ldir is None:
            ldir = self._link_dirs[link] = self.directory / log_dir_name(link)
        return ldir

    def listing(self, link: str) -> LinkListing:
        """The segment index of `link` (listed once, then cached)."""
        if link not in self._listings:
            self._listings[link] = self._list_link(link)
        return self._listings[link]

    def _list_link(self, link: str) -> LinkListing:
        ldir = self.link_dir(link)
        found: dict[int, set[str]] = {}
        temps, strays, confusable = [], [], []
        for name, mode in self._list(ldir):
            path = ldir / name
            parsed = parse_segment_name(name)
            if parsed and stat.S_ISREG(mode):
                found.setdefault(parsed[0], set()).add(parsed[1])
            elif parsed:  # a ledger name on something that is not a regular file: never read
                strays.append(
                    Stray(
                        path,
                        f"a {_kind(mode)} where a segment file belongs",
                        link,
                        shadows=parsed[0],
                    )
                )
            elif name == CHECKPOINT_FILE and stat.S_ISREG(mode):
                continue  # the link's checkpoint: read by name (ledger/checkpoints.py), not a stray
            elif _TEMP.fullmatch(name) and stat.S_ISREG(mode):
                temps.append(path)
            elif (imitated := confusable_segment_name(name)) is not None:
                confusable.append((path, imitated))
            else:
                strays.append(Stray(path, _stray_reason(name, mode), link))
        # readdir(3) may miss a name renamed into place while it runs (a capture sealing now): every
        # hole below the highest seal is looked up by name before the index calls it missing
        sealed_top = max((i for i, k in found.items() if SEAL in k), default=-1)
        for i in range(sealed_top + 1):
            for kind in (SEAL, PARQUET, RECORDS, LEAVES):
                if kind not in found.get(i, ()):
                    mode = self._lmode(ldir / segment_name(i, kind))
                    if mode is not None and stat.S_ISREG(mode):
                        found.setdefault(i, set()).add(kind)
        segs = {i: frozenset(k) for i, k in found.items()}
        for path, (index, kind) in confusable:
            real = segment_name(index, kind)
            shadows = index if SEAL in segs.get(index, ()) else None
            strays.append(
                Stray(path, f"a name that imitates {real} with non-ASCII characters", link, shadows)
            )
        return LinkListing(link, segs, tuple(temps), tuple(strays))

    # ---- reading ------------------------------------------------------------------------------

    def read_header_bytes(self) -> bytes:
        """The bytes of DIR/ledger.json (ledgertool.ledger.header.parse_ledger_header checks them);
        LedgerFormatError when there is none (DIR is not a ledger) or it is too large."""
        path = self.directory / LEDGER_FILE
        if self._lmode(path) is None:
            raise LedgerFormatError(f"{self.directory}: not a ledger (no {LEDGER_FILE})")
        return self._read_document(path, MAX_LEDGER_FILE_BYTES, "ledger header")

    def read_rotation_files(self) -> list[tuple[Path, bytes]]:
        """(path, bytes) of every rotation statement, in file (statement number) order; none when
        the ledger has no rotations directory. A link or file where it belongs is FileTypeError."""
        rdir = self.directory / ROTATIONS_DIR
        if self._lmode(rdir) is None:
            return []
        self._check_dir(rdir)
        names = [name for name, _ in self._list(rdir) if parse_rotation_name(name) is not None]
        return [
            (
                rdir / name,
                self._read_document(rdir / name, MAX_ROTATION_BYTES, "rotation statement"),
            )
            for name in names
        ]

    def read_prune_files(self) -> list[tuple[Path, bytes]]:
        """(path, bytes) of every prune statement, in statement number order; none when the
        ledger has no pruned directory. A link or file where it belongs is FileTypeError."""
        pdir = self.directory / PRUNED_DIR
        if self._lmode(pdir) is None:
            return []
        self._check_dir(pdir)
        names = [name for name, _ in self._list(pdir) if parse_prune_name(name) is not None]
        return [
            (pdir / name, self._read_document(pdir / name, MAX_PRUNE_BYTES, "prune statement"))
            for name in names
        ]

    def segment_path(self, link: str, index: int, kind: str) -> Path:
        return segment_file(self.link_dir(link), index, kind)

    def read_segment_file(
        self, link: str, index: int, kind: str, limit: int | None = None
    ) -> pa.Buffer:
        """The bytes of one segment file, by index and kind (read_arrow_buffer's errors)."""
        return self._read_in_link(
            link, self.segment_path(link, index, kind), limit, f"segment {kind} file"
        )

    def open_record_file(
        self, link: str, index: int, limit: int | None = None
    ) -> OpenRecordFile | pa.Buffer:
        """A segment's raw record file for ledgertool.ledger.recfile.parse_record_file: on local
        storage open (the caller closes it with `close_record_file`), else its bytes (never more
        than `limit`: LedgerFormatError); the errors of read_segment_file."""
        path, what = self.segment_path(link, index, RECORDS), f"segment {RECORDS} file"
        # one place opens every record file (held directory or not): a test stands in for the
        # storage holder there
        return self._open_records(path, what, self._held.get(link), limit)

    @staticmethod
    def close_record_file(source: OpenRecordFile | pa.Buffer | None) -> None:
        if isinstance(source, OpenRecordFile):
            os.close(source.fd)

    def exists(self, link: str, index: int, kind: str, *, follow_symlinks: bool) -> bool:
        """Whether a segment file exists now (the listing may predate a capture's rename into
        place)."""
        path = self.segment_path(link, index, kind)
        return path.exists() if follow_symlinks else self._lmode(path) is not None

    def open_growing(self, link: str, index: int) -> AbstractContextManager[tuple[BinaryIO, int]]:
        """An open segment file, opened to be read in place (ledger.segment.survey_open_segment
        reads its framing, never the whole file): (the file, its size), closed on leaving;
        fsio.open_regular's errors (ENOENT when a running capture sealed and removed it since the
        listing), StorageError for a read that fails."""
        return self._open_growing(self.segment_path(link, index, OPEN), "open segment")

    def read_seal_bytes(self, link: str, index: int) -> bytes:
        return self._read_document(
            self.segment_path(link, index, SEAL),
            MAX_DOCUMENT_BYTES,
            f"segment {SEAL} file",
            self._held.get(link),
        )

    def checkpoint_path(self, link: str) -> Path:
        return self.link_dir(link) / CHECKPOINT_FILE

    def read_checkpoint(self, link: str) -> bytes | None:
        """The link's stored checkpoint note, None when the link has none. Read without the listing,
        so a reader that takes it before listing the link's segments sees a checkpoint no newer
        than the seals it then finds (a capture writes each seal before its checkpoint)."""
        if self._lmode(self.checkpoint_path(link)) is None:
            return None
        return self._read_document(self.checkpoint_path(link), MAX_DOCUMENT_BYTES, "checkpoint")

    def read_top_checkpoint(self) -> bytes | None:
        """DIR/checkpoint, which ledgers written before per-link checkpoints carried; None if
        absent."""
        path = self.directory / CHECKPOINT_FILE
        mode = self._lmode(path)
        if mode is None or not stat.S_ISREG(mode):  # a link there is a stray, never followed
            return None
        return self._read_document(path, MAX_DOCUMENT_BYTES, "checkpoint")


def _stray_reason(name: str, mode: int) -> str:
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return f"a {_kind(mode)}, not part of the ledger"
    if name.startswith(LINK_PREFIX):
        return (
            "a link directory whose name is not a valid ASCII link name (1-32 of A-Z a-z 0-9 . _ -)"
        )
    return "not a file of the ledger format"
