"""Compressed captures (gzip, xz, zstd) and captures on standard input: the bytes a stream reader
(native lt_reader_open_fd) reads through a pipe.

A compressed capture is recognised by the magic number of its codec (RFC 1952 gzip 1f 8b, the
.xz format fd 37 7a 58 5a 00, RFC 8878 zstd 28 b5 2f fd), never by its name. A thread
decompresses it with the codec's library (zlib, lzma, zstandard) into a pipe whose other end the
native reader reads, so the frames and records are those of the decompressed file and nothing
is held whole in memory or written to a temporary file. Concatenated members / streams / frames
are read one after the other, as gzip -d, xz -d and zstd -d do.

Decompression is not the hot path (the digest engine is): each codec call gets CHUNK compressed
bytes. When the compressed data is corrupt or ends before its end-of-stream marker, the thread
records the error (the file, the compressed byte offset reached, the bytes decompressed) before it
closes the pipe, so the reader sees the end of a stream and the error is there to be raised
(`Decompressor.error`) by the time it does.
"""

from __future__ import annotations

import fcntl
import lzma
import os
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import zstandard

from ..errors import CaptureFormatError

CHUNK = 1 << 16  # compressed bytes per codec call
# asked of the kernel for the pipe (F_SETPIPE_SZ); the default 64 KiB is slower
PIPE_BYTES = 1 << 20
MAGIC_BYTES = 6  # the longest magic number below


def capture_pipe() -> tuple[int, int]:
    """(read end, write end) of a new pipe that a thread fills for the native stream reader,
    PIPE_BYTES large where the kernel allows it."""
    read_fd, write_fd = os.pipe()
    try:
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass  # above /proc/sys/fs/pipe-max-size: the default size works, more slowly
    return read_fd, write_fd


class _Decoder(Protocol):
    eof: bool
    unused_data: bytes

    def decompress(self, data: bytes) -> bytes: ...


@dataclass(frozen=True)
class Codec:
    """A compression format: its name, magic number and a new decoder for one
    member/stream/frame."""

    name: str
    magic: bytes
    decoder: Callable[[], _Decoder]


CODECS = (
    Codec("gzip", b"\x1f\x8b", lambda: zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)),
    Codec("xz", b"\xfd7zXZ\x00", lambda: lzma.LZMADecompressor(format=lzma.FORMAT_XZ)),
    Codec("zstd", b"\x28\xb5\x2f\xfd", lambda: zstandard.ZstdDecompressor().decompressobj()),
)
_CODEC_ERRORS = (zlib.error, lzma.LZMAError, zstandard.ZstdError, EOFError)


def codec_of(head: bytes) -> Codec | None:
    """The codec whose magic number `head` (the first bytes of a file) starts with, or None."""
    return next((c for c in CODECS if head.startswith(c.magic)), None)


#: what `refused_format` needs of a file's first bytes (an ERF record header)
FORMAT_HEAD_BYTES = 16
_CONVERT = "convert it first (editcap -F pcapng FILE out.pcapng)"


def refused_format(head: bytes) -> str | None:
    """What a capture ledgertool does not read is, by its first bytes, with what to do; None when
    it is none of those (the caller names the unknown magic)."""
    if len(head) >= 4 and head[:3] == b"BZh" and head[3:4] in b"123456789":
        return (
            "bzip2-compressed: decompress first "
            "(bunzip2 -k FILE, or bzcat FILE | ledgertool capture - ...)"
        )
    if head.startswith(b"\x04\x22\x4d\x18"):
        return (
            "lz4-compressed: decompress first "
            "(lz4 -d FILE, or lz4cat FILE | ledgertool capture - ...)"
        )
    if head.startswith(b"snoop\0\0\0"):
        return f"a snoop capture (RFC 1761), not pcap or pcapng: {_CONVERT}"
    text = all(32 <= b < 127 or b in b"\t\n\r" for b in head[:16])
    if len(head) >= 16 and not text:
        # ERF has no file header: its first record's type (1..31, bit 7 an extension header), the
        # variable-length flag every ERF writer sets, and a record length of 16 bytes or more
        kind, flags, rlen = head[8] & 0x7F, head[9], int.from_bytes(head[10:12], "big")
        if 1 <= kind <= 31 and flags & 0x04 and rlen >= 16:
            return (
                "looks like ERF records (Endace DAG) but its second record header is not "
                f"plausible: {_CONVERT}"
            )
    return None


def read_head(fd: int, n: int = MAGIC_BYTES) -> bytes:
    """Up to `n` bytes from `fd` (fewer only at its end): a pipe may return them in pieces."""
    head = b""
    while len(head) < n:
        got = os.read(fd, n - len(head))
        if not got:
            break
        head += got
    return head


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Decompressor(threading.Thread):
    """Decompress `codec` data from `src_fd` (after `head`, the bytes already read from it) into
    the write end of a new pipe; `read_fd` is the read end for the native reader. Owns src_fd.

    `error` is a CaptureFormatError once the data turned out corrupt or cut short, set before the
    pipe's write end is closed; None while running and after a clean end. A reader that closes
    the read end early simply ends the thread."""

    def __init__(self, codec: Codec, src_fd: int, head: bytes, name: str):
        super().__init__(name=f"decompress {codec.name}", daemon=True)
        self.codec = codec
        self.source = name
        self.error: CaptureFormatError | None = None
        self.compressed = 0  # compressed bytes fed to the codec
        self.decompressed = 0
        self._src, self._head = src_fd, head
        self.read_fd, self._write_fd = capture_pipe()

    def run(self) -> None:
        try:
            self._pump()
        except BrokenPipeError:
            pass  # the reader stopped reading (a corrupt capture, or it was closed)
        except _CODEC_ERRORS as e:
            self.error = self._failed(
                f"{self.codec.name} data corrupt at or before compressed byte {self.compressed}",
                str(e) or type(e).__name__,
            )
        except OSError as e:
            self.error = self._failed(
                f"read error at compressed byte {self.compressed}", e.strerror or str(e)
            )
        finally:
            os.close(self._write_fd)
            os.close(self._src)

    def _failed(self, what: str, why: str) -> CaptureFormatError:
        return CaptureFormatError(
            f"{self.source}: {what} ({self.decompressed} bytes decompressed): {why}",
            self.source,
            self.compressed,
        )

    def _pump(self) -> None:
        dec, fed = self.codec.decoder(), False  # fed: the current member has had input
        data = self._head
        self.compressed = len(data)
        while True:
            if not data:
                data = os.read(self._src, CHUNK)
                if not data:
                    break
                self.compressed += len(data)
            while data:
                out = dec.decompress(data)
                fed = True
                if out:
                    _write_all(self._write_fd, out)
                    self.decompressed += len(out)
                if not dec.eof:
                    data = b""
                else:  # a member ended: what follows is the next member (concatenated files)
                    data, dec, fed = dec.unused_data, self.codec.decoder(), False
        if fed:
            self.error = self._failed(
                f"{self.codec.name} data cut short at compressed byte {self.compressed}",
                "the compressed file ends before its end-of-stream marker",
            )
