"""Captures at fsspec URLs (s3://, gs://, memory:// ...; docs/cluster.md, "Data where it lives").

The object is streamed, never copied to a temporary file: a thread reads it with the URL's fsspec
filesystem, CHUNK bytes at a time, into a pipe that the native stream reader reads
(lt_reader_open_fd, as for standard input), so a gzip/xz/zstd capture is still recognised by its
magic number and decompressed on the way (ledgertool.source.compressed). The native reader needs
no random access for a stream, so nothing is held whole in memory either.

A read that fails part-way (the network, the object removed) is recorded with the byte offset
reached before the pipe is closed, so the reader's end of stream is reported as that error, never
as a capture that ended cleanly.
"""

from __future__ import annotations

import os
import threading

from ..errors import CaptureFormatError
from ..urls import UrlPath, filesystem
from .compressed import CHUNK, capture_pipe, read_head
from .file import CaptureReader, stream_reader


class Fetcher(threading.Thread):
    """Copy the open remote file `f` (owned) into the write end of a new pipe; `read_fd` is the
    read end. `error` is a CaptureFormatError once a read failed, set before the pipe is closed."""

    def __init__(self, f, name: str):
        super().__init__(name="fetch capture", daemon=True)
        self.source = name
        self.error: CaptureFormatError | None = None
        self.fetched = 0
        self._f = f
        self.read_fd, self._write_fd = capture_pipe()

    def run(self) -> None:
        try:
            while data := self._f.read(CHUNK):
                view = memoryview(data)
                while view:
                    view = view[os.write(self._write_fd, view) :]
                self.fetched += len(data)
        except BrokenPipeError:
            pass  # the reader stopped reading (a corrupt capture, or it was closed)
        except Exception as e:  # the remote filesystem's own errors (network, permission, ...)
            why = (str(e).splitlines() or [""])[0] or type(e).__name__
            self.error = CaptureFormatError(
                f"{self.source}: read error at byte {self.fetched}: {why}",
                self.source,
                self.fetched,
            )
        finally:
            os.close(self._write_fd)
            try:
                self._f.close()
            except Exception:
                pass  # nothing more is read from it


def open_remote_capture(url: UrlPath) -> CaptureReader:
    """The capture at `url`, streamed (module docstring). CaptureFormatError (exit 2) naming the
    URL for a missing object, a directory or one that cannot be opened; UsageError (urls.filesystem)
    when fsspec or the scheme's filesystem is not installed."""
    fs = filesystem(url.url)[0]
    try:
        if fs.isdir(url.path):
            raise CaptureFormatError(f"{url}: is a directory, not a capture file", str(url))
        f = fs.open(url.path, "rb")
    except CaptureFormatError:
        raise
    except FileNotFoundError:
        raise CaptureFormatError(f"{url}: no such capture", str(url)) from None
    except Exception as e:
        why = (str(e).splitlines() or [""])[0] or type(e).__name__
        raise CaptureFormatError(f"{url}: cannot open: {why}", str(url)) from None
    fetch = Fetcher(f, str(url))
    fetch.start()
    fd = fetch.read_fd
    try:
        head = read_head(fd)
        reader = stream_reader(fd, head, str(url), str(url))  # owns fd from here, also on error
    except CaptureFormatError:
        fetch.join(timeout=1.0)
        if fetch.error is not None:
            raise fetch.error from None
        raise
    reader._fetch = fetch
    return reader
