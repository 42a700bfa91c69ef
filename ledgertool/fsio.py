"""Safe file I/O: atomic replacement, exclusive creation and regular-file reads that never follow a
link planted by whoever holds the storage (docs/threat-model.md, "File system").

The storage of a ledger is the adversary's: a symbolic link at a name a writer uses would redirect
the write (onto a key file, say), a FIFO in place of a seal would block a reader forever. So:

* a file is replaced by writing a new file under an unpredictable name (``NAME.<64 random
  bits>.tmp``) created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in the target's own directory,
  fsync'd, renamed over the target (rename(2) replaces a link at the target name, it never
  follows it) and the directory fsync'd, so a crash leaves the old file or the new one;
* below a `root` (a ledger directory) every component is opened relative to the one before with
  ``O_NOFOLLOW | O_DIRECTORY`` (openat(2)): a symbolic link, file or FIFO where a directory of the
  ledger belongs is refused, never followed, and cannot be swapped in between a check and a use.
  The root itself is the operator's choice and may be a link;
* a read opens with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO then cannot block the open), fstat(2)s
  the descriptor and refuses anything but a regular file, then reads blocking.

Errors: FileTypeError (exit 2) for a path of the wrong kind, StorageError (exit 2) for the
environment (ENOSPC, EROFS, EIO, EACCES ...), each one line naming the file the caller asked
for, never a temporary name, and what to do. Paths outside a ledger (--out files, key files)
pass ``root=None``: their parent directory is taken as named, the file itself as above.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from .errors import FileTypeError, LedgerFormatError, StorageError

PathArg = str | os.PathLike[str]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC

_SPACE = "free space on that file system (or move the ledger to a larger one) and rerun"
_ACCESS = "check the owner and permissions of the file and of its directory"
ADVICE = {
    errno.ENOSPC: _SPACE,
    errno.EDQUOT: "the disk quota is used up: free space or raise the quota and rerun",
    errno.EROFS: "the file system is mounted read-only: remount it read-write or use another "
    "directory",
    errno.EIO: "the storage reported an I/O error: check the device (dmesg) and copy what is "
    "readable to healthy storage before rerunning there",
    errno.EACCES: _ACCESS,
    errno.EPERM: _ACCESS,
    errno.EFBIG: "the file size limit (ulimit -f) or the file system's largest file size was "
    "reached",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n)",
}

#: Suffix of every temporary name this module creates; `recover` removes leftovers by it.
TMP_SUFFIX = ".tmp"


_TMP_PARTS = (
    re.compile(r"^(.+)\.[0-9a-f]{16}" + re.escape(TMP_SUFFIX) + "$"),  # _tmp_name
    re.compile(
        r"^\.(.+)\.[A-Za-z0-9_]{8}" + re.escape(TMP_SUFFIX) + "$"
    ),  # mkdtemp's (atomic_path)
)


def final_name(path: PathArg) -> str:
    """`path` with every temporary name this module (or a stage made like it) uses replaced by the
    name it becomes: 'L/seg-1.seal.json.<hex>.tmp' -> 'L/seg-1.seal.json', 'out/.ex.k2j4_x9q.tmp/
    part-0.parquet' -> 'out/ex/part-0.parquet'. Messages name the file the user asked for."""
    parts = []
    for part in os.fspath(path).split(os.sep):
        for pattern in _TMP_PARTS:
            m = pattern.match(part)
            if m:
                part = m.group(1)
                break
        parts.append(part)
    return os.sep.join(parts)


def storage_error(e: OSError, path: PathArg, action: str, hint: str | None = None) -> StorageError:
    """StorageError '{path}: cannot {action}: {strerror}; {what to do}' for OSError `e`. `hint`
    replaces the generic advice for the error number (ADVICE) where the caller knows better. A
    temporary name in `path` is shown as the name it becomes (final_name)."""
    path = final_name(path)
    advice = hint or ADVICE.get(e.errno or 0)
    msg = f"{path}: cannot {action}: {e.strerror or e}" + (f"; {advice}" if advice else "")
    return StorageError(msg, os.fspath(path), e.errno)


def kind_of(mode: int) -> str:
    """'a symbolic link', 'a FIFO (named pipe)', ... for an st_mode."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def wrong_kind(path: PathArg, mode: int, expected: str) -> FileTypeError:
    """FileTypeError '{path}: is a FIFO (named pipe); expected ...' (a link: refusing to follow
    it)."""
    why = (
        "refusing to follow it: a ledger holds only regular files and directories (remove the link)"
        if stat.S_ISLNK(mode)
        else f"expected {expected}"
    )
    return FileTypeError(f"{path}: is {kind_of(mode)}; {why}")


def _lstat_kind(
    name: str, dfd: int | None, path: PathArg, expected: str, e: OSError, follow: bool = False
) -> Exception:
    """The error for a path that open(2) refused (O_NOFOLLOW: a link; ENXIO: a socket; O_DIRECTORY:
    not a directory): FileTypeError naming its kind, else StorageError for `e`."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=follow)
    except OSError:
        return storage_error(e, path, "open")
    if stat.S_ISREG(st.st_mode) or (stat.S_ISDIR(st.st_mode) and expected == "a directory"):
        return storage_error(e, path, "open")
    return wrong_kind(path, st.st_mode, expected)


# ---- directories ------------------------------------------------------------------------------


def open_dir(directory: PathArg, root: PathArg | None = None, *, create: bool = False) -> int:
    """A descriptor of `directory` (close it). Below `root`, each component is opened with
    O_NOFOLLOW relative to its parent (FileTypeError naming one that is a link or not a
    directory); with `create`, missing components are made (mode 0755, the root with its parents).
    StorageError for the environment."""
    directory = Path(directory)
    if root is None:
        action = "open directory"
        try:
            if create and not os.path.isdir(directory):
                action = "create directory"
                os.makedirs(directory, exist_ok=True)
                action = "open directory"
            return os.open(directory, _DIR)
        except (NotADirectoryError, FileExistsError):  # makedirs: a file holds the name
            raise FileTypeError(f"{directory}: is not a directory") from None
        except OSError as e:
            raise storage_error(e, directory, action) from None
    root = Path(root)
    rel = directory.relative_to(root)  # ValueError: a caller passed a path outside its root
    fd = open_dir(root, None, create=create)
    cur = root
    try:
        for part in rel.parts:
            cur = cur / part
            try:
                nfd = os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                os.fsync(fd)
                nfd = os.open(part, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except (NotADirectoryError, OSError) as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _lstat_kind(part, fd, cur, "a directory", e) from None
                raise
            os.close(fd)
            fd = nfd
    except OSError as e:
        os.close(fd)
        raise storage_error(e, cur, "open directory") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_dir(directory: PathArg, root: PathArg | None = None) -> None:
    """FileTypeError when `directory` (below `root`) is a link, or any component is not a
    directory; StorageError when it cannot be opened (also when it does not exist)."""
    os.close(open_dir(directory, root))


def make_dirs(directory: PathArg, root: PathArg | None = None) -> None:
    """mkdir -p without following links below `root` (see open_dir)."""
    os.close(open_dir(directory, root, create=True))


def fsync_dir(directory: PathArg, root: PathArg | None = None) -> None:
    """fsync(2) a directory, so the names created or renamed in it survive a crash."""
    fd = open_dir(directory, root)
    try:
        os.fsync(fd)
    except OSError as e:
        raise storage_error(e, directory, "flush directory") from None
    finally:
        os.close(fd)


# ---- writing ----------------------------------------------------------------------------------


def _tmp_name(name: str) -> str:
    return f"{name[:200]}.{secrets.token_hex(8)}{TMP_SUFFIX}"


def _write_all(fd: int, data) -> None:
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view) :]


def _create_tmp(dfd: int, name: str, mode: int) -> tuple[int, str]:
    while True:
        tmp = _tmp_name(name)
        try:
            return os.open(tmp, _NEW, mode, dir_fd=dfd), tmp
        except FileExistsError:  # 64 random bits: only a planted name gets here; pick another
            continue


def _unlink_quietly(name: str, dfd: int) -> None:
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError:
        pass


def write_atomic(
    path: PathArg,
    data: bytes | bytearray | memoryview,
    *,
    root: PathArg | None = None,
    mode: int = 0o644,
    what: str = "file",
) -> None:
    """Replace `path` with `data` atomically and durably: a new file under an unpredictable name
    (O_CREAT|O_EXCL|O_NOFOLLOW), fsync, rename over `path`, fsync the directory. A link at `path`
    is replaced, never written through. StorageError / FileTypeError naming `path` (`what` says
    what it is: "seal document", ...); nothing is left behind on error."""
    with atomic_file(path, root=root, mode=mode, what=what) as f:
        f.write(data)


@contextmanager
def atomic_file(
    path: PathArg, *, root: PathArg | None = None, mode: int = 0o644, what: str = "file"
) -> Iterator[BinaryIO]:
    """A binary file object whose contents replace `path` when the block ends without an error
    (as write_atomic; for writers that stream: pyarrow, csv, matplotlib). On an error nothing
    replaces `path`; an OSError inside the block becomes StorageError naming `path`."""
    path = Path(path)
    dfd = open_dir(path.parent, root)
    tmp = None
    try:
        fd, tmp = _create_tmp(dfd, path.name, mode)
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
        os.fsync(dfd)
    except OSError as e:
        raise storage_error(e, path, f"write {what}") from None
    finally:
        if tmp is not None:
            _unlink_quietly(tmp, dfd)
        os.close(dfd)


def check_writable(path: PathArg, *, what: str = "file") -> None:
    """Fail now, before a long run, where replacing `path` at its end would: its directory is
    missing or not a directory, `path` is a directory, or no new file can be created next to it
    (permission, read-only file system: tried with a temporary file, removed at once).
    StorageError naming `path` ('{path}: cannot write {what}: Is a directory; ...'), nothing
    left."""
    path = Path(path)
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            raise storage_error(
                IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)),
                path,
                f"write {what}",
                "give a file name (the directory is not replaced)",
            )
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as e:
        raise storage_error(e, path, f"write {what}") from None
    try:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError) as e:
        raise storage_error(
            e, path, f"write {what}", f"{path.parent} is not an existing directory"
        ) from None
    except OSError as e:
        raise storage_error(e, path, f"write {what}") from None
    try:
        fd, tmp = _create_tmp(dfd, path.name, 0o600)
        os.close(fd)
        _unlink_quietly(tmp, dfd)
    except OSError as e:
        raise storage_error(e, path, f"write {what}") from None
    finally:
        os.close(dfd)


@contextmanager
def atomic_path(path: PathArg, *, what: str = "file") -> Iterator[Path]:
    """A path inside a new private directory (mkdtemp: mode 0700, unpredictable name) next to
    `path`, for a writer that only takes a file name (the native pcap writer). When the block ends
    without an error the file is fsync'd and renamed over `path`; the directory is removed either
    way. For files outside a ledger (`path`'s directory is taken as named)."""
    path = Path(path)
    try:
        private = Path(
            tempfile.mkdtemp(prefix=f".{path.name[:64]}.", suffix=TMP_SUFFIX, dir=path.parent)
        )
    except OSError as e:
        raise storage_error(e, path, f"write {what}") from None
    try:
        inner = private / path.name
        yield inner
        fd = os.open(inner, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(inner, path)
        fsync_dir(path.parent)
    except OSError as e:
        raise storage_error(e, path, f"write {what}") from None
    finally:
        shutil.rmtree(private, ignore_errors=True)


def create_new(path: PathArg, data: bytes, *, mode: int, what: str = "file") -> None:
    """Create `path` (it must not exist: O_CREAT|O_EXCL|O_NOFOLLOW, so not even a dangling link may
    stand there) with exactly `mode`, write, fsync it and its directory. StorageError "already
    exists; refusing to overwrite" (errno EEXIST) or for the environment; a failed write removes
    the file this call created."""
    path = Path(path)
    dfd = open_dir(path.parent)
    try:
        try:
            fd = os.open(path.name, _NEW, mode, dir_fd=dfd)
        except FileExistsError:
            raise StorageError(
                f"{path}: already exists; refusing to overwrite it ({what})",
                str(path),
                errno.EEXIST,
            ) from None
        try:
            try:
                os.fchmod(fd, mode)  # the umask may have cleared bits; set exactly
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.fsync(dfd)
        except OSError:
            _unlink_quietly(path.name, dfd)
            raise
    except OSError as e:
        raise storage_error(e, path, f"create {what}") from None
    finally:
        os.close(dfd)


def create_exclusive(
    path: PathArg,
    *,
    root: PathArg | None = None,
    mode: int = 0o644,
    append: bool = True,
    what: str = "file",
    durable_name: bool = True,
) -> int:
    """A write descriptor of a new file `path` (O_CREAT|O_EXCL|O_NOFOLLOW, O_APPEND by default;
    the caller closes it); its name is made durable (the directory is fsync'd) unless
    `durable_name` is False (the caller then fsyncs the directory with the file's data, fsync_dir).
    StorageError for the environment, also when `path` exists."""
    path = Path(path)
    dfd = open_dir(path.parent, root)
    try:
        fd = os.open(path.name, _NEW | (os.O_APPEND if append else 0), mode, dir_fd=dfd)
        try:
            if durable_name:
                os.fsync(dfd)
        except OSError:
            os.close(fd)
            raise
        return fd
    except OSError as e:
        raise storage_error(e, path, f"create {what}") from None
    finally:
        os.close(dfd)


def unlink(path: PathArg, *, root: PathArg | None = None, missing_ok: bool = False) -> None:
    """Remove `path` (a link itself, never its target) without following links below `root`."""
    path = Path(path)
    dfd = open_dir(path.parent, root)
    try:
        os.unlink(path.name, dir_fd=dfd)
    except FileNotFoundError:
        if not missing_ok:
            raise StorageError(
                f"{path}: cannot remove: no such file", str(path), errno.ENOENT
            ) from None
    except OSError as e:
        raise storage_error(e, path, "remove") from None
    finally:
        os.close(dfd)


def truncate(path: PathArg, size: int, *, root: PathArg | None = None) -> None:
    """Cut the regular file `path` (opened below `root` without following links) to `size` bytes
    and fsync it. StorageError naming `path`; FileTypeError for a link or other non-regular file."""
    path = Path(path)
    dfd = open_dir(path.parent, root)
    try:
        try:
            fd = os.open(
                path.name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd
            )
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise _lstat_kind(path.name, dfd, path, "a regular file", e, False) from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise wrong_kind(path, st.st_mode, "a regular file")
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise storage_error(e, path, "truncate") from None
    finally:
        os.close(dfd)


def rename(path: PathArg, new_name: str, *, root: PathArg | None = None) -> None:
    """Rename `path` to `new_name` in the same directory (renameat(2) on the directory opened below
    `root` without following links) and fsync the directory, so the new name survives a crash.
    StorageError naming `path`."""
    path = Path(path)
    dfd = open_dir(path.parent, root)
    try:
        os.rename(path.name, new_name, src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
    except OSError as e:
        raise storage_error(e, path, f"rename to {new_name}") from None
    finally:
        os.close(dfd)


def move(path: PathArg, new_path: PathArg, *, root: PathArg | None = None) -> None:
    """Move `path` to `new_path` (another directory of the same file system, made when missing;
    both opened below `root` without following links) and fsync both directories, new name
    first, so a crash leaves the file under one of its names. StorageError naming `path`."""
    path, new_path = Path(path), Path(new_path)
    dst = open_dir(new_path.parent, root, create=True)
    try:
        src = open_dir(path.parent, root)
        try:
            os.rename(path.name, new_path.name, src_dir_fd=src, dst_dir_fd=dst)
            os.fsync(dst)
            os.fsync(src)
        except OSError as e:
            raise storage_error(e, path, f"move to {new_path}") from None
        finally:
            os.close(src)
    finally:
        os.close(dst)


# ---- reading ----------------------------------------------------------------------------------


def open_regular(
    path: PathArg,
    *,
    root: PathArg | None = None,
    follow: bool = False,
    what: str = "file",
    dir_fd: int | None = None,
) -> int:
    """A read descriptor of `path`, which must be a regular file (the caller closes it).

    Opened with O_NONBLOCK (a FIFO cannot block the open) and, unless `follow`, O_NOFOLLOW; then
    fstat'd: a link, FIFO, socket, device or directory is FileTypeError naming `path`; O_NONBLOCK
    is cleared before the descriptor is returned. `follow` is for files a user names outside a
    ledger (key files, a capture): their links are the user's. `dir_fd`, a descriptor of
    `path`'s directory the caller opened below `root` (open_dir) and holds: the file is opened
    relative to it, by its name alone, and `root` is not walked again. StorageError for the
    environment (also ENOENT: `e.errno` tells)."""
    if not isinstance(path, Path):
        path = Path(path)
    flags = _READ | (0 if follow else os.O_NOFOLLOW)
    held = dir_fd is not None
    dfd = dir_fd if held else open_dir(path.parent, root) if root is not None else None
    try:
        try:
            fd = os.open(path.name if dfd is not None else path, flags, dir_fd=dfd)
        except OSError as e:
            if (e.errno == errno.ELOOP and not follow) or e.errno in (errno.ENXIO, errno.ENODEV):
                raise _lstat_kind(
                    path.name if dfd is not None else str(path),
                    dfd,
                    path,
                    f"a regular file ({what})",
                    e,
                    follow,
                ) from None
            raise storage_error(e, path, f"read {what}") from None
    finally:
        if dfd is not None and not held:
            os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise wrong_kind(path, st.st_mode, f"a regular file ({what})")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except OSError as e:
        os.close(fd)
        raise storage_error(e, path, f"read {what}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_with_stat(
    path: PathArg,
    limit: int | None = None,
    *,
    root: PathArg | None = None,
    follow: bool = False,
    what: str = "file",
) -> tuple[bytes, os.stat_result]:
    """The bytes of regular file `path` (see open_regular) and the fstat of the descriptor they
    were read from (its mode and owner, without a second open). With `limit`, a file larger than
    `limit` bytes is LedgerFormatError naming it, and no more than limit + 1 bytes are read."""
    fd = open_regular(path, root=root, follow=follow, what=what)
    with os.fdopen(fd, "rb") as f:
        try:
            st = os.fstat(f.fileno())
            if limit is not None and st.st_size > limit:
                raise LedgerFormatError(
                    f"{path}: {st.st_size} bytes, larger than a {what} can be ({limit})"
                )
            data = f.read() if limit is None else f.read(limit + 1)
        except MemoryError:  # a file the storage holder made too large (a hole costs it nothing)
            raise LedgerFormatError(
                f"{path}: {st.st_size} bytes, too large to read into memory"
            ) from None
        except OSError as e:
            raise storage_error(e, path, f"read {what}") from None
    if limit is not None and len(data) > limit:  # grew while being read
        raise LedgerFormatError(f"{path}: larger than a {what} can be ({limit} bytes)")
    return data, st


def read_regular(
    path: PathArg,
    limit: int | None = None,
    *,
    root: PathArg | None = None,
    follow: bool = False,
    what: str = "file",
) -> bytes:
    """The bytes of regular file `path`: read_with_stat without the stat."""
    return read_with_stat(path, limit, root=root, follow=follow, what=what)[0]
