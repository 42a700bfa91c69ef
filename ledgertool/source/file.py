"""The capture-file source: pcap, pcapng and ERF files opened by the native reader
(native/src/reader*.c), mapped; compressed ones (gzip, xz, zstd: by magic number) and standard
input (`-`) read as a stream through a pipe (ledgertool.source.compressed, lt_reader_open_fd).

`CaptureReader` is also the face every other source has (handle, info, raise_error, close): the
workload generator wraps its native reader in one, and the live readers (ledgertool.source.live,
.bypass) copy it, so the digest engine treats them alike. `ReaderInfo` says how a source was read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from .._binding import c_string, capture_error, ffi, lib
from ..errors import CaptureFormatError
from ..plural import plural
from .compressed import FORMAT_HEAD_BYTES, Decompressor, codec_of, read_head, refused_format

STDIN = "-"
STDIN_NAME = "standard input"

FORMAT_NAMES = {
    lib.LT_FMT_PCAP_US: "pcap (µs)",
    lib.LT_FMT_PCAP_NS: "pcap (ns)",
    lib.LT_FMT_PCAP_MODIFIED: "pcap (modified)",
    lib.LT_FMT_PCAPNG: "pcapng",
    lib.LT_FMT_WORKLOAD: "workload",
    lib.LT_FMT_LIVE: "live",
    lib.LT_FMT_ERF: "ERF",
}


#: bytes a record adds to its captured bytes in each format (its header; pcapng: the EPB's fixed
#: part and trailer; ERF: the header and the Ethernet pad, extension headers not counted), so that
#: frames and captured bytes so far estimate the bytes read of a file
RECORD_OVERHEAD = {
    "pcap (µs)": 16,
    "pcap (ns)": 16,
    "pcap (modified)": 24,
    "pcapng": 32,
    "ERF": 18,
}


def file_total(path: str | os.PathLike) -> tuple[int, int] | None:
    """(bytes, RECORD_OVERHEAD) of an uncompressed capture file, whose progress can have a total;
    None for standard input, a compressed file, anything not a readable capture file."""
    path = os.fspath(path)
    if path == STDIN or not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as f:
            if codec_of(f.read(FORMAT_HEAD_BYTES)) is not None:
                return None
        with CaptureReader(path) as r:
            info = r.info()
    except (OSError, CaptureFormatError):
        return None
    overhead = RECORD_OVERHEAD.get(info.format)
    return (info.file_size, overhead) if overhead is not None and info.file_size else None


@dataclass(frozen=True)
class Frame:
    """One captured frame (copied out of the map; for tests and the reference path)."""

    index: int
    offset: int  # byte offset of its record/block header in the file
    ts_ns: int  # ns since the Unix epoch
    caplen: int  # bytes captured
    wire_len: int  # bytes on the wire
    linktype: int
    interface_id: int
    rflags: int
    data: bytes


@dataclass(frozen=True)
class ReaderInfo:
    """How a capture file was read. `truncated_*` describe a cut last record."""

    path: str
    format: str
    version: str
    snaplen: int
    linktype: int
    file_size: int
    frames: int
    sections: int
    interfaces: int
    skipped_blocks: int
    truncated: bool
    truncated_offset: int
    truncated_bytes: int
    message: str
    compression: str = ""  # "gzip", "xz" or "zstd": the frames are those of the decompressed bytes
    damaged_blocks: int = 0  # pcapng blocks read past although damaged (wiretap stops at them)
    damage: str = ""  # the first of them, named with its byte offset

    def damage_note(self) -> str | None:
        """A warning naming the first damaged block read past, or None."""
        if not self.damaged_blocks:
            return None
        more = self.damaged_blocks - 1
        also = f"; {plural(more, 'more damaged block')}" if more else ""
        return (
            f"{self.path}: {self.damage}{also}; frames after it were read "
            "(tshark and other wiretap readers stop there)"
        )

    def truncation_note(self) -> str | None:
        if not self.truncated:
            return None
        return (
            f"{self.path}: truncated last record at byte {self.truncated_offset} "
            f"({plural(self.truncated_bytes, 'byte')} present, not recorded); "
            f"{plural(self.frames, 'whole frame')} read"
        )


def open_capture(path: str | os.PathLike) -> CaptureReader:
    """The capture at `path`: `-` is standard input; a file whose first bytes are a gzip, xz or
    zstd magic number is decompressed as it is read; any other file is mapped (CaptureReader).
    Raises CaptureFormatError as CaptureReader does, also for a terminal on standard input."""
    path = os.fspath(path)
    if path == STDIN:
        if os.isatty(0):
            raise CaptureFormatError(
                f"{STDIN_NAME} is a terminal: `-` reads a capture piped in", STDIN
            )
        fd = os.dup(0)
        return stream_reader(fd, read_head(fd, FORMAT_HEAD_BYTES), STDIN, STDIN_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return CaptureReader(path)  # its native open names the reason
    try:
        # FIFOs etc.: the native refusal
        head = read_head(fd) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        head = b""
    if codec_of(head) is None:
        os.close(fd)
        return CaptureReader(path)
    os.set_blocking(fd, True)
    return stream_reader(fd, head, path, path)


def _refused_file(path: str) -> str | None:
    """refused_format of the file at `path` (it was opened a moment ago), or None."""
    try:
        with open(path, "rb") as f:
            return refused_format(f.read(FORMAT_HEAD_BYTES))
    except OSError:
        return None


def stream_reader(fd: int, head: bytes, path: str, name: str) -> CaptureReader:
    """A stream reader over fd (owned), whose first bytes `head` were read already: through a
    Decompressor when they are a codec's magic number."""
    codec = codec_of(head)
    pump = None
    if codec is not None:
        pump = Decompressor(codec, fd, head, name)
        fd, head = pump.read_fd, b""
        pump.start()
    err = ffi.new("char[512]")
    out = ffi.new("lt_reader **")
    # the name's own bytes, UTF-8 or not; the reader owns fd from here
    st = lib.lt_reader_open_fd(fd, os.fsencode(name), head, len(head), out, err, 512)
    if st != lib.LT_OK:
        text = c_string(err)
        what = refused_format(head) if st == lib.LT_ERR_FORMAT and pump is None else None
        if what is not None:
            text = f"{name}: {what}"
        if pump is not None:
            pump.join(timeout=1.0)  # the reader closed the pipe: it ends at its next write
            if pump.error is not None:
                raise pump.error
            text += f" (after {codec.name} decompression)"
        raise capture_error(st, text or f"{name}: cannot read (status {st})", name)
    reader = CaptureReader.from_handle(out[0], path)
    reader._pump = pump
    reader._name = name
    reader.stream = True
    return reader


class CaptureReader:
    """A pcap/pcapng file opened by the native reader (mmap, format by magic number only), or a
    stream (open_capture).

    Raises CaptureFormatError (exit 2) when the file is missing, unreadable, not a capture or
    corrupt at open. Use as a context manager.
    """

    _pump: Decompressor | None = None
    _fetch = (
        None  # a remote capture's Fetcher (ledgertool.source.remote): it feeds _pump or the reader
    )
    _name: str | None = None  # the stream's name in messages, where it differs from path
    # a pipe or standard input: lt_reader_next returns no frame, not the end, while it is quiet
    stream = False

    def __init__(self, path: str | os.PathLike):
        self._r = None
        self.path = os.fspath(path)
        if os.path.isdir(self.path):
            raise CaptureFormatError(f"{self.path}: is a directory, not a capture file", self.path)
        err = ffi.new("char[512]")
        out = ffi.new("lt_reader **")
        st = lib.lt_reader_open(os.fsencode(self.path), out, err, 512)
        if st != lib.LT_OK:
            text = c_string(err) or f"{self.path}: cannot open (status {st})"
            what = _refused_file(self.path) if st == lib.LT_ERR_FORMAT else None
            raise capture_error(st, f"{self.path}: {what}" if what else text, self.path)
        self._r = out[0]

    @classmethod
    def from_handle(cls, handle, path: str) -> CaptureReader:
        """Wrap an already open native reader (e.g. the workload generator,
        ledgertool.source.workload); `path` names the source in messages. The reader takes
        ownership of the handle."""
        self = cls.__new__(cls)
        self._r = handle
        self.path = path
        return self

    def close(self) -> None:
        if getattr(self, "_r", None) is not None:
            lib.lt_reader_close(self._r)  # closes the pipe: a decompressor still writing ends
            self._r = None
        for pump in (self._pump, self._fetch):
            if pump is not None:
                pump.join(timeout=1.0)  # not longer: it may wait on a slow standard input

    def end_error(self) -> CaptureFormatError | None:
        """Why a stream ended early where the native reader saw its end: its compressed data was
        corrupt or cut short (None for a file, or a stream that ended cleanly)."""
        # set before it closed the pipe
        if self._fetch is not None and self._fetch.error is not None:
            return self._fetch.error  # first: what the codec or the reader saw followed from it
        if self._pump is None:
            return None
        if self._r is not None and self._pump.is_alive():
            self._pump.join()  # the reader saw the pipe's end, so the thread is closing it
        return self._pump.error

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - safety net
        self.close()

    @property
    def handle(self):
        return self._r

    def declare_losses(self) -> None:
        """Hand out an ERF file's loss counters as GAP pseudo-frames (capture declares them as
        drops); without it the frames alone, as a ledger's frame records are. Before reading."""
        lib.lt_reader_declare_losses(self._r, 1)

    def info(self) -> ReaderInfo:
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        return ReaderInfo(
            path=self._name or self.path,
            format=FORMAT_NAMES.get(i.format, "unknown"),
            version=f"{i.version_major}.{i.version_minor}",
            snaplen=i.snaplen,
            linktype=1
            if i.format == lib.LT_FMT_WORKLOAD
            else i.linktype,  # generated frames are Ethernet
            file_size=i.file_size,
            frames=i.frames,
            sections=i.sections,
            interfaces=i.interfaces,
            skipped_blocks=i.skipped_blocks,
            truncated=bool(i.truncated),
            truncated_offset=i.truncated_offset,
            truncated_bytes=i.truncated_bytes,
            message=c_string(i.message),
            compression=self._pump.codec.name if self._pump is not None else "",
            damaged_blocks=i.damaged_blocks,
            damage=c_string(i.warning),
        )

    def raise_error(self, status: int) -> None:
        """Turn a reader error status into CaptureFormatError naming file and byte offset (for a
        stream whose decompression failed, that failure: what the reader saw follows from it)."""
        if self.end_error() is not None:
            raise self.end_error()
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        raise capture_error(
            status,
            c_string(i.message) or f"read error (status {status})",
            self._name or self.path,
            int(i.error_offset),
        )

    def frames_at(self, wanted: set[int], batch: int = 4096) -> dict[int, Frame]:
        """The frames with these indexes, read to the last of them: only the batches holding one
        are copied (a report naming a few frames of a large capture). CaptureFormatError as for
        frames()."""
        buf = ffi.new("lt_frame[]", batch)
        n = ffi.new("size_t *")
        out: dict[int, Frame] = {}
        left, index = sorted(wanted), 0
        while left:
            st = lib.lt_reader_next(self._r, buf, batch, n)
            got = n[0]
            if got and left[0] < index + got:
                out.update((f.index, f) for f in self._copied(buf, got, index) if f.index in wanted)
                left = [i for i in left if i >= index + got]
            index += got
            if st == lib.LT_EOF:
                if self.end_error() is not None:
                    raise self.end_error()
                break
            if st != lib.LT_OK:
                self.raise_error(st)
        return out

    def _copied(self, buf, got: int, index: int) -> list[Frame]:
        """The `got` frames of `buf` with their bytes, numbered from `index`."""
        # copied in C, under the reader's SIGBUS guard: the map may shrink under us
        data = ffi.new("uint8_t[]", max(1, sum(buf[k].caplen for k in range(got))))
        if got and lib.lt_reader_copy_frames(self._r, buf, got, data, len(data)) != lib.LT_OK:
            self.raise_error(lib.LT_ERR_IO)
        raw, pos, out = ffi.buffer(data), 0, []
        for k in range(got):
            f = buf[k]
            out.append(
                Frame(
                    index + k,
                    f.offset,
                    f.ts_ns,
                    f.caplen,
                    f.wire_len,
                    f.linktype,
                    f.interface_id,
                    f.rflags,
                    raw[pos : pos + f.caplen],
                )
            )
            pos += f.caplen
        return out

    def frames(self, batch: int = 256) -> Iterator[Frame]:
        """Yield every frame (copies the bytes). Raises CaptureFormatError at a corrupt structure,
        after yielding every frame before it, and when the file shrinks while it is read."""
        buf = ffi.new("lt_frame[]", batch)
        n = ffi.new("size_t *")
        index = 0
        while True:
            st = lib.lt_reader_next(self._r, buf, batch, n)
            got = n[0]
            yield from self._copied(buf, got, index)
            index += got
            if st == lib.LT_EOF:
                if self.end_error() is not None:
                    raise self.end_error()
                return
            if st != lib.LT_OK:
                self.raise_error(st)
