"""An independent hardware device, written from docs/devices.md ("Authenticated record streams",
"Many lanes", "Device clocks") and NOT importing ledgertool: what a firmware team would write.

It numbers each lane's records from 0, stamps them with its own clock (monotone per lane), declares
a lane's drops with one GAP record in that lane, cuts each lane's records into blocks, and MACs the
blocks in one chain with keyed BLAKE3 under the stream key derived from the digest master key it
received with `keys provision`.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

import blake3
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAGIC = b"LTSTREAM"
RECORDS, WINDOWS, CLOSE = 1, 2, 3
FLAG_GAP = 0x8000


def device_id_of(public_key: bytes) -> str:
    """device_id = hex(SHA-256("ledgertool device id v1" 0x00 || public key)[0:16])."""
    return hashlib.sha256(b"ledgertool device id v1\0" + public_key).digest()[:16].hex()


def stream_key(master: bytes, ledger_id: str, device_id: str) -> bytes:
    info = b"ledgertool record stream v1\x00" + bytes.fromhex(ledger_id) + bytes.fromhex(device_id)
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(master)


def tag(key: bytes, domain: bytes, data: bytes) -> bytes:
    return blake3.blake3(domain + data, key=key).digest()


def record(
    seq: int,
    ts_ns: int,
    wire_len: int,
    cap_len: int,
    flags: int,
    linktype: int,
    aux: int,
    digest: bytes,
) -> bytes:
    return struct.pack("<QqIIHHI", seq, ts_ns, wire_len, cap_len, flags, linktype, aux) + digest


@dataclass
class Frame:
    """What a lane's parser hands the record stage: everything but seq and the timestamp."""

    wire_len: int
    cap_len: int
    flags: int
    linktype: int
    digest: bytes


@dataclass
class Device:
    master: bytes
    ledger_id: str
    device_id: str
    link: str = "link0"
    lanes: int = 1
    stream_no: int = 1
    record_bytes: int = 48
    block_records: int = 8
    chained_to: bytes = b""  # the last tag emitted
    index: int = 0
    lane_seq: list[int] = field(default_factory=list)
    pending: list[list[bytes]] = field(default_factory=list)
    out: bytearray = field(default_factory=bytearray)

    def __post_init__(self) -> None:
        self.key = stream_key(self.master, self.ledger_id, self.device_id)
        self.lane_seq = [0] * self.lanes
        self.pending = [[] for _ in range(self.lanes)]
        link = self.link.encode()
        head = (
            struct.pack("<8sHHHBB", MAGIC, 1, self.record_bytes, self.lanes, len(link), 0)
            + bytes.fromhex(self.ledger_id)
            + bytes.fromhex(self.device_id)
            + struct.pack("<Q", self.stream_no)
            + link
        )
        t = tag(self.key, b"H", head)
        self.out += head + t
        self.chained_to = t

    def _emit(self, kind: int, lane: int, count: int, payload: bytes) -> None:
        head = struct.pack("<BBHIQ", kind, 0, lane, count, self.index)
        t = tag(self.key, b"B", self.chained_to + head + payload)
        self.out += head + payload + t
        self.chained_to = t
        self.index += 1

    def frame(self, lane: int, ts_ns: int, f: Frame) -> None:
        self._push(lane, record(0, ts_ns, f.wire_len, f.cap_len, f.flags, f.linktype, 0, f.digest))

    def drops(self, lane: int, ts_ns: int, n: int, linktype: int = 1) -> None:
        self._push(
            lane, record(0, ts_ns, 0, 0, FLAG_GAP, linktype, n, bytes(self.record_bytes - 32))
        )

    def _push(self, lane: int, rec: bytes) -> None:
        rec = struct.pack("<Q", self.lane_seq[lane]) + rec[8:]
        self.lane_seq[lane] += 1
        self.pending[lane].append(rec)
        if len(self.pending[lane]) == self.block_records:
            self.flush(lane)

    def flush(self, lane: int) -> None:
        if self.pending[lane]:
            recs = self.pending[lane]
            self._emit(RECORDS, lane, len(recs), b"".join(recs))
            self.pending[lane] = []

    def close(self) -> bytes:
        for lane in range(self.lanes):
            self.flush(lane)
        self._emit(CLOSE, 0, self.lanes, struct.pack(f"<{self.lanes}Q", *self.lane_seq))
        return bytes(self.out)


def parse_blocks(stream: bytes, record_bytes: int = 48) -> tuple[bytes, list[bytes]]:
    """(header with its tag, [each block's bytes]): for tests that tamper with a stream."""
    link_len = stream[14]
    hsize = 56 + link_len + 32
    blocks, at = [], hsize
    while at < len(stream):
        kind, _, _, count = struct.unpack_from("<BBHI", stream, at)
        size = 16 + (count * record_bytes if kind == RECORDS else 8 * count) + 32
        blocks.append(stream[at : at + size])
        at += size
    return stream[:hsize], blocks
