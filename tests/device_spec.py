"""An independent hardware device, written from docs/devices.md ("Authenticated record streams",
"Many lanes", "Device clocks") and NOT importing ledgertool: what a firmware team would write.

It numbers each lane's records from 0, stamps them with its own clock (monotone per lane), declares
a lane's drops with one GAP record in that lane, cuts each lane's records into blocks, and MACs the
blocks in one chain with keyed BLAKE3 under the stream key derived from the digest master key it
received with `keys provision`.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

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

    def push_record(self, lane: int, rec: bytes) -> None:
        """A record the lane's record stage made (its seq is replaced by the lane's)."""
        self._push(lane, rec)

    def window(self, rec: bytes) -> None:
        """One window record (docs/ledger-format.md "Window records"), in a block of its own."""
        self._emit(WINDOWS, 0, 1, rec)

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


def parse_blocks(
    stream: bytes, record_bytes: int = 48, window_bytes: int = 0
) -> tuple[bytes, list[bytes]]:
    """(header with its tag, [each block's bytes]): for tests that tamper with a stream."""
    link_len = stream[14]
    hsize = 56 + link_len + 32
    blocks, at = [], hsize
    while at < len(stream):
        kind, _, _, count = struct.unpack_from("<BBHI", stream, at)
        unit = {RECORDS: record_bytes, WINDOWS: window_bytes, CLOSE: 8}[kind]
        size = 16 + count * unit + 32
        blocks.append(stream[at : at + size])
        at += size
    return stream[:hsize], blocks


# --------------------------------------------------------------------------- a device on the kit


def kit_frames(kit: Path, capture: str, strip: str) -> list[tuple[int, Frame]]:
    """(kit ts_ns, Frame) of each frame of a kit capture as this device computes it: the hashed
    range and flags of frames.json (the strip parser's output), digest = blake3-keyed-128: the first
    16 bytes of BLAKE3 keyed_hash under the kit's subkey (digests/blake3-keyed-128.json)."""
    doc = json.loads((kit / "frames.json").read_text())
    subkey = bytes.fromhex(
        json.loads((kit / "digests/blake3-keyed-128.json").read_text())["subkey"]
    )
    out = []
    for f in doc["frames"]:
        if f["capture"] != capture:
            continue
        frame, rng = bytes.fromhex(f["frame"]), f["strip"][strip]
        hashed = frame[rng["offset"] : rng["offset"] + rng["length"]]
        digest = blake3.blake3(hashed, key=subkey).digest()[:16]
        out.append(
            (
                int(f["ts_ns"]),
                Frame(f["wire_len"], f["cap_len"], rng["flags"], f["linktype"], digest),
            )
        )
    return out


def own_clock(kit_ts: list[int], start_ns: int, jitter_ns: int, lanes: int) -> list[int]:
    """The device's own timestamps for frames arriving at the kit's pace: its clock starts at
    `start_ns` and each frame is stamped up to `jitter_ns` late (a fixed pseudo-random pattern),
    never earlier than the frame before it in the same lane (frame k on lane k mod lanes)."""
    out: list[int] = []
    last = [start_ns - 1] * lanes
    for k, t in enumerate(kit_ts):
        ts = max(start_ns + (t - kit_ts[0]) + (k * 7919) % (jitter_ns + 1), last[k % lanes])
        last[k % lanes] = ts
        out.append(ts)
    return out


def lane_records(frames: list[tuple[int, Frame]], stamps: list[int], lanes: int) -> list[bytes]:
    """Each lane's records file (frame k on lane k mod lanes, lane seqs from 0)."""
    files = [bytearray() for _ in range(lanes)]
    for k, ((_, f), ts) in enumerate(zip(frames, stamps)):
        lane = k % lanes
        seq = len(files[lane]) // (32 + len(f.digest))
        files[lane] += record(seq, ts, f.wire_len, f.cap_len, f.flags, f.linktype, 0, f.digest)
    return [bytes(b) for b in files]
