"""The capture-file source: pcap and pcapng files opened by the native reader (native/src/reader*.c).

`CaptureReader` is also the face every other source has (handle, info, raise_error, close): the
workload generator wraps its native reader in one, and the live readers (ledgertool.source.live,
.bypass) copy it, so the digest engine treats them alike. `ReaderInfo` says how a source was read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

from .._binding import c_string, capture_error, ffi, lib
from ..errors import CaptureFormatError

FORMAT_NAMES = {
    lib.LT_FMT_PCAP_US: "pcap (µs)",
    lib.LT_FMT_PCAP_NS: "pcap (ns)",
    lib.LT_FMT_PCAP_MODIFIED: "pcap (modified)",
    lib.LT_FMT_PCAPNG: "pcapng",
    lib.LT_FMT_WORKLOAD: "workload",
    lib.LT_FMT_LIVE: "live",
}



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

    def truncation_note(self) -> str | None:
        if not self.truncated:
            return None
        return (f"{self.path}: truncated last record at byte {self.truncated_offset} "
                f"({self.truncated_bytes} bytes present, not recorded); {self.frames} whole frames read")


class CaptureReader:
    """A pcap/pcapng file opened by the native reader (mmap, format by magic number only).

    Raises CaptureFormatError (exit 2) when the file is missing, unreadable, not a capture or
    corrupt at open. Use as a context manager.
    """

    def __init__(self, path: str | os.PathLike):
        self._r = None
        self.path = os.fspath(path)
        if os.path.isdir(self.path):
            raise CaptureFormatError(f"{self.path}: is a directory, not a capture file", self.path)
        err = ffi.new("char[512]")
        out = ffi.new("lt_reader **")
        st = lib.lt_reader_open(self.path.encode(), out, err, 512)
        if st != lib.LT_OK:
            raise capture_error(st, c_string(err) or f"{self.path}: cannot open (status {st})", self.path)
        self._r = out[0]

    @classmethod
    def from_handle(cls, handle, path: str) -> "CaptureReader":
        """Wrap an already open native reader (e.g. the workload generator, ledgertool.source.workload);
        `path` names the source in messages. The reader takes ownership of the handle."""
        self = cls.__new__(cls)
        self._r = handle
        self.path = path
        return self

    def close(self) -> None:
        if getattr(self, "_r", None) is not None:
            lib.lt_reader_close(self._r)
            self._r = None

    def __enter__(self) -> "CaptureReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - safety net
        self.close()

    @property
    def handle(self):
        return self._r

    def info(self) -> ReaderInfo:
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        return ReaderInfo(
            path=self.path,
            format=FORMAT_NAMES.get(i.format, "unknown"),
            version=f"{i.version_major}.{i.version_minor}",
            snaplen=i.snaplen,
            linktype=1 if i.format == lib.LT_FMT_WORKLOAD else i.linktype,  # generated frames are Ethernet
            file_size=i.file_size,
            frames=i.frames,
            sections=i.sections,
            interfaces=i.interfaces,
            skipped_blocks=i.skipped_blocks,
            truncated=bool(i.truncated),
            truncated_offset=i.truncated_offset,
            truncated_bytes=i.truncated_bytes,
            message=c_string(i.message),
        )

    def raise_error(self, status: int) -> None:
        """Turn a reader error status into CaptureFormatError naming file and byte offset."""
        i = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(self._r, i)
        raise capture_error(status, c_string(i.message) or f"read error (status {status})", self.path,
                            int(i.error_offset))

    def frames(self, batch: int = 256) -> Iterator[Frame]:
        """Yield every frame (copies the bytes). Raises CaptureFormatError at a corrupt structure,
        after yielding every frame before it, and when the file shrinks while it is read."""
        buf = ffi.new("lt_frame[]", batch)
        n = ffi.new("size_t *")
        index = 0
        while True:
            st = lib.lt_reader_next(self._r, buf, batch, n)
            got = n[0]
            # copied in C, under the reader's SIGBUS guard: the map may shrink under us
            data = ffi.new("uint8_t[]", max(1, sum(buf[k].caplen for k in range(got))))
            if got and lib.lt_reader_copy_frames(self._r, buf, got, data, len(data)) != lib.LT_OK:
                self.raise_error(lib.LT_ERR_IO)
            raw, pos = ffi.buffer(data), 0
            for k in range(got):
                f = buf[k]
                yield Frame(index, f.offset, f.ts_ns, f.caplen, f.wire_len, f.linktype, f.interface_id,
                            f.rflags, raw[pos:pos + f.caplen])
                pos += f.caplen
                index += 1
            if st == lib.LT_EOF:
                return
            if st != lib.LT_OK:
                self.raise_error(st)
