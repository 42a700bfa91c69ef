"""Authenticated record streams: records a device MACs in chained blocks under a key derived from
the digest master key it received with `keys provision` (docs/devices.md "Authenticated record
streams", ADR 0016).

A stream is a header (its own tag) and blocks; block i's tag covers the tag before it, the block's
header (type, lane, count, index) and its payload, so that a block changed, dropped, replayed,
reordered, moved from another stream, device, link or ledger, or a stream cut short (no close
block), fails a tag or a check at a named block and byte offset. `StreamParser` is fed the bytes as
they arrive and hands out the records of each block only after the block's tag verified, with the
record `seq` rewritten to the link's sequence (records carry their lane's sequence on the wire).
"""

from __future__ import annotations

import hmac
import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import blake3
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..digest.record import FLAG_GAP, FLAGS_DEFINED, record_dtype
from ..digest.window import WindowRecord
from ..digest.window import record_size as window_record_size
from ..errors import DataError, LedgerFormatError

if TYPE_CHECKING:  # imported where used (start-up: docs/benchmarks.md)
    import numpy as np

MAGIC = b"LTSTREAM"
VERSION = 1
HEADER_FIXED = 56  # bytes before the link name
TAG_BYTES = 32
BLOCK_HEADER = 16
MAX_LANES = 1024
MAX_BLOCK_RECORDS = 65536
MAX_BLOCK_WINDOWS = 256
BLOCK_RECORDS, BLOCK_WINDOWS, BLOCK_CLOSE = 1, 2, 3
KEY_INFO = b"ledgertool record stream v1\x00"
HEADER_DOMAIN, BLOCK_DOMAIN = b"H", b"B"
_SOURCE_TAIL = re.compile(r" device ([0-9a-f]{32}) stream ([0-9]+)$")


def stream_key(master: bytes, ledger_id: str, device_id: str) -> bytes:
    """K = HKDF-SHA256(ikm = master, salt = empty, info = "ledgertool record stream v1" 0x00 ||
    ledger_id (16 bytes) || device_id (16 bytes), L = 32)."""
    info = KEY_INFO + bytes.fromhex(ledger_id) + bytes.fromhex(device_id)
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(master)


def mac(key: bytes, domain: bytes, *parts: bytes) -> bytes:
    """BLAKE3 in keyed mode (32-byte key, 32-byte output) over domain || parts."""
    h = blake3.blake3(domain, key=key)
    for p in parts:
        h.update(p)
    return h.digest()


def source_tail(device_id: str, stream_no: int) -> str:
    """What a seal's `source` ends with for records from an authenticated stream."""
    return f" device {device_id} stream {stream_no}"


def parse_source_tail(source: str | None) -> tuple[str, int] | None:
    """(device id, stream number) of a seal source written by `source_tail`, else None."""
    m = _SOURCE_TAIL.search(source or "")
    return (m.group(1), int(m.group(2))) if m else None


@dataclass(frozen=True)
class StreamHeader:
    """The stream header, decoded (docs/devices.md "Stream header")."""

    record_bytes: int
    lanes: int
    ledger_id: str
    device_id: str
    stream_no: int
    link: str
    size: int  # bytes, tag included


@dataclass(frozen=True)
class StreamBinding:
    """What the sealer holds to check a stream: the ledger, its digest master key, the link, the
    device it requires (None: any device holding the key) and the highest stream number already
    sealed on the link per device (a stream at or below it is a replay)."""

    ledger_id: str
    master: bytes | None
    link: str
    record_bytes: int
    device_id: str | None = None
    sealed_streams: dict[str, int] | None = None
    # the ledger's window tier (window_ns, cells, digest bytes), None without one; and the last
    # window index sealed for the link (a window is committed once)
    window: tuple[int, int, int] | None = None
    last_window: int | None = None


class StreamParser:
    """Checks an authenticated record stream fed in pieces (`feed`) and hands out verified records
    (`take`). Errors are LedgerFormatError naming `path`, the block index and its byte offset."""

    def __init__(self, path: str, binding: StreamBinding):
        self.path = path
        self.binding = binding
        self.header: StreamHeader | None = None
        self._key = b""
        self._buf = bytearray()
        self._at = 0  # _buf[_at:] is not consumed yet (compacted now and then, not per block)
        self._pos = 0  # stream offset of _buf[_at]
        self._prev = b""  # the tag the next block chains to
        self._index = 0  # the next block's index
        self._lane_next: list[int] = []
        self._ready: np.ndarray | None = None  # verified records not handed out yet
        self.closed = False
        self.records = 0  # records handed out
        self.windows: list[WindowRecord] = []  # verified window records not handed out yet
        self._last_window = binding.last_window
        self._frames = 0  # frame (not GAP) records verified
        self._window_frames = 0  # frames the verified window records count

    # ---- input -------------------------------------------------------------------------------

    def feed(self, data: bytes | memoryview) -> None:
        if data:
            if self._at and self._at >= len(self._buf) // 2:
                del self._buf[: self._at]
                self._at = 0
            self._buf += data

    def _left(self) -> int:
        return len(self._buf) - self._at

    def _error(self, where: str, why: str) -> LedgerFormatError:
        return LedgerFormatError(f"{self.path}: {where} {why}")

    def _block_error(self, offset: int, why: str) -> LedgerFormatError:
        return self._error(f"block {self._index} (byte {offset})", why)

    # ---- header ------------------------------------------------------------------------------

    def _parse_header(self) -> bool:
        buf, a = self._buf, self._at
        if self._left() < HEADER_FIXED:
            return False
        magic, version, rb, lanes, link_len, zero = struct.unpack_from("<8sHHHBB", buf, a)
        if magic != MAGIC:
            raise self._error("stream header (byte 0)", "does not start with LTSTREAM")
        if self._left() < HEADER_FIXED + link_len + TAG_BYTES:
            return False
        ledger_id, device_id = buf[a + 16 : a + 32].hex(), buf[a + 32 : a + 48].hex()
        (stream_no,) = struct.unpack_from("<Q", buf, a + 48)
        size = HEADER_FIXED + link_len + TAG_BYTES
        link = bytes(buf[a + HEADER_FIXED : a + HEADER_FIXED + link_len]).decode("utf-8", "replace")
        self.header = StreamHeader(rb, lanes, ledger_id, device_id, stream_no, link, size)
        self._check_header(version, zero)
        self._key = stream_key(self.binding.master, ledger_id, device_id)
        tag = bytes(buf[a + size - TAG_BYTES : a + size])
        head = bytes(buf[a : a + size - TAG_BYTES])
        if not hmac.compare_digest(tag, mac(self._key, HEADER_DOMAIN, head)):
            raise self._error(
                "stream header (byte 0)",
                f"tag does not verify under device {device_id}'s stream key for ledger "
                f"{ledger_id}: changed, or not from a device holding this ledger's digest key",
            )
        self._prev = tag
        self._lane_next = [0] * lanes
        self._consume(size)
        return True

    def _check_header(self, version: int, zero: int) -> None:
        h, b = self.header, self.binding
        where = "stream header (byte 0)"
        problems = [
            (version != VERSION, f"is version {version}; this ledgertool reads version {VERSION}"),
            (zero != 0, "has a nonzero reserved byte 15"),
            (
                h.record_bytes != b.record_bytes,
                f"carries {h.record_bytes}-byte records, not the ledger's {b.record_bytes}-byte",
            ),
            (not 1 <= h.lanes <= MAX_LANES, f"names {h.lanes} lanes (1..{MAX_LANES})"),
            (h.ledger_id != b.ledger_id, f"is for ledger {h.ledger_id}, not {b.ledger_id}"),
            (h.link != b.link, f"is for link {h.link!r}, not {b.link!r}"),
            (
                b.device_id is not None and h.device_id != b.device_id,
                f"is from device {h.device_id}, not the device {b.device_id} required",
            ),
            (
                b.master is None,
                "needs the ledger's digest key to check the device's tags",
            ),
        ]
        for bad, why in problems:
            if bad:
                raise self._error(where, why)
        last = (b.sealed_streams or {}).get(h.device_id)
        if last is not None and h.stream_no <= last:
            raise self._error(
                where,
                f"is stream {h.stream_no} of device {h.device_id}, but the link already holds "
                f"its stream {last}: a replayed or stale stream (stream numbers only increase)",
            )

    def _consume(self, n: int) -> None:
        self._at += n
        self._pos += n

    # ---- blocks ------------------------------------------------------------------------------

    def _next_block(self) -> bool:
        """Verify the next whole block in the buffer; False when more bytes are needed."""

        buf, off, a = self._buf, self._pos, self._at
        if self._left() < BLOCK_HEADER:
            return False
        kind, zero, lane, count, index = struct.unpack_from("<BBHIQ", buf, a)
        rb = self.header.record_bytes
        if kind == BLOCK_RECORDS:
            if not 1 <= count <= MAX_BLOCK_RECORDS:
                raise self._block_error(off, f"holds {count} records (1..{MAX_BLOCK_RECORDS})")
            payload = count * rb
        elif kind == BLOCK_CLOSE:
            if count != self.header.lanes:
                raise self._block_error(off, f"closes {count} lanes, not {self.header.lanes}")
            payload = 8 * count
        elif kind == BLOCK_WINDOWS:
            if self.binding.window is None:
                raise self._block_error(
                    off, "holds window records, but the ledger has no window tier"
                )
            if not 1 <= count <= MAX_BLOCK_WINDOWS:
                raise self._block_error(off, f"holds {count} window records (1..256)")
            _, cells, dsize = self.binding.window
            payload = count * window_record_size(cells, dsize)
        else:
            raise self._block_error(off, f"has type {kind} (1 records, 2 windows, 3 close)")
        size = BLOCK_HEADER + payload + TAG_BYTES
        if self._left() < size:
            return False
        body = memoryview(buf)[a : a + size - TAG_BYTES]
        tag = bytes(buf[a + size - TAG_BYTES : a + size])
        ok = hmac.compare_digest(tag, mac(self._key, BLOCK_DOMAIN, self._prev, body))
        body.release()
        if not ok:
            raise self._block_error(
                off,
                "tag does not verify: the block was changed, or a block before it was dropped, "
                "replayed or reordered, or it comes from another stream, device, link or ledger",
            )
        # the tag verified: what follows is the device's own statement
        if index != self._index or zero != 0:
            raise self._block_error(off, f"carries index {index} (a device fault)")
        if kind == BLOCK_CLOSE:
            sent = list(struct.unpack_from(f"<{count}Q", buf, a + BLOCK_HEADER))
            if sent != self._lane_next:
                raise self._block_error(
                    off, f"closes lanes at {sent}, but their records end at {self._lane_next}"
                )
            self._check_window_frames(off)
            self.closed = True
        elif kind == BLOCK_WINDOWS:
            self._take_windows(off, lane, count)
        else:
            self._ready = self._lane_records(off, lane, count)
            self._frames += int(((self._ready["flags"] & FLAG_GAP) == 0).sum())
        self._prev = tag
        self._index += 1
        self._consume(size)
        return True

    def _take_windows(self, off: int, lane: int, count: int) -> None:
        """The verified window records of a type 2 block: the ledger's window length and table,
        indices increasing past the link's last sealed window."""
        window_ns, cells, dsize = self.binding.window
        size = window_record_size(cells, dsize)
        at = self._at + BLOCK_HEADER
        for k in range(count):
            where = f"{self.path}: block {self._index} (byte {off}) window record {k}"
            try:
                w = WindowRecord.parse(self._buf[at + k * size : at + (k + 1) * size], where)
            except DataError as e:
                raise LedgerFormatError(str(e)) from None
            problems = [
                (lane != 0, f"is for lane {lane}: window records are the link's (lane 0)"),
                (
                    (w.window_ns, w.cells, w.digest_size) != (window_ns, cells, dsize),
                    f"has window {w.window_ns} ns, {w.cells} cells, {w.digest_size}-byte "
                    f"digests; the ledger's are {window_ns} ns, {cells}, {dsize}",
                ),
                (
                    self._last_window is not None and w.index <= self._last_window,
                    f"has index {w.index}, not after window {self._last_window} (a window is "
                    "committed once)",
                ),
            ]
            for bad, why in problems:
                if bad:
                    raise self._block_error(off, f"window record {k} {why}")
            self._last_window = w.index
            self._window_frames += w.frames
            self.windows.append(w)

    def _check_window_frames(self, off: int) -> None:
        """At the close block: the window records count every frame record the stream carried
        (when it carried both)."""
        if self.binding.window is None or not (self._frames and self._window_frames):
            return
        if self._frames != self._window_frames:
            raise self._block_error(
                off,
                f"closes a stream of {self._frames} frame records whose window records count "
                f"{self._window_frames} frames",
            )

    def take_windows(self) -> list[WindowRecord]:
        """The verified window records not handed out yet, oldest first."""
        out, self.windows = self.windows, []
        return out

    def _lane_records(self, off: int, lane: int, count: int) -> np.ndarray:
        import numpy as np

        if lane >= self.header.lanes:
            raise self._block_error(off, f"is for lane {lane} of {self.header.lanes}")
        rb = self.header.record_bytes
        a = self._at + BLOCK_HEADER
        raw = bytearray(memoryview(self._buf)[a : a + count * rb])  # a memcpy, not per record
        arr = np.frombuffer(raw, dtype=record_dtype(rb - 32))
        want = np.arange(self._lane_next[lane], self._lane_next[lane] + count, dtype=np.uint64)
        bad = (arr["seq"] != want) | ((arr["flags"] & ~np.uint16(FLAGS_DEFINED)) != 0)
        if bad.any():
            k = int(np.argmax(bad))
            raise self._block_error(
                off,
                f"record {k} (byte {off + BLOCK_HEADER + k * rb}) of lane {lane} has seq "
                f"{int(arr['seq'][k])} and flags 0x{int(arr['flags'][k]):04x}; lane seq "
                f"{int(want[k])} and documented flags expected",
            )
        self._lane_next[lane] += count
        return arr

    # ---- output ------------------------------------------------------------------------------

    def take(self, first_seq: int, max_records: int | None) -> np.ndarray | None:
        """Up to `max_records` verified records renumbered from `first_seq` (the link's sequence),
        or None when the bytes fed so far hold no further verified record."""
        import numpy as np

        while self._ready is None or len(self._ready) == 0:
            if self.closed:
                if self._left():
                    raise self._error(
                        f"block {self._index} (byte {self._pos})",
                        f"follows the close block: {self._left()} bytes after the stream's end",
                    )
                return None
            if self.header is None:
                if not self._parse_header():
                    return None
                continue
            if not self._next_block():
                return None
        n = len(self._ready) if max_records is None else min(len(self._ready), max_records)
        # views: the first n are handed out once, so renumbering them in place is safe
        out, self._ready = self._ready[:n], self._ready[n:]
        out["seq"] = np.arange(first_seq, first_seq + n, dtype=np.uint64)
        self.records += n
        return out

    def finish(self) -> None:
        """The input ended: LedgerFormatError unless the stream was closed."""
        if self.closed:
            return
        if self.header is None:
            raise self._error("stream header (byte 0)", f"is cut at byte {self._left()}")
        left = self._left()
        what = f"{left} bytes of block {self._index}" if left else "no close block"
        raise self._error(
            f"block {self._index} (byte {self._pos})",
            f"missing: the stream ends with {what} (cut short; every record before it was "
            "verified)",
        )
