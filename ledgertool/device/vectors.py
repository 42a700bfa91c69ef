"""The conformance kit's device vectors (docs/devices.md "Device vectors"): what a device of
several lanes writes for the kit's Ethernet capture, the authenticated record stream carrying it,
and the window records of those frames, all under the kit's public key and fixed ids, so that a
hardware team can compare its lanes, its stream MAC and its window accumulator byte for byte.

Written by `conformance export` into `device/` of the kit, with `device/device.json` saying how
each file is made; every byte is a function of the catalogue and the kit key.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ..algorithms import get_algorithm
from ..digest.record import record_dtype
from ..digest.window import (
    DEFAULT_CAPACITY,
    WindowAccumulator,
    WindowKeys,
    cells_for_capacity,
)
from ..keyfiles import DigestKey
from ..source.stream import (
    BLOCK_CLOSE,
    BLOCK_RECORDS,
    BLOCK_WINDOWS,
    MAGIC,
    VERSION,
    mac,
    stream_key,
)
from .conformance import KIT_MASTER_KEY, KIT_VERSION, compute_records

DEVICE_FORMAT = f"ledgertool-conformance-device-v{KIT_VERSION}"
KIT_LEDGER_ID = hashlib.sha256(b"ledgertool conformance kit v1 ledger id").digest()[:16].hex()
KIT_DEVICE_ID = hashlib.sha256(b"ledgertool conformance kit v1 device id").digest()[:16].hex()
LINK = "link0"
CAPTURE, ALG, STRIP = "ethernet", "siphash-1-3-128", "l3"
LANES = 4  # frame k goes to lane k mod LANES
BLOCK = 8  # records per block
WINDOW_NS = 10_000_000_000  # 10 s: the kit's frames are 1 s apart


def lane_split(records: np.ndarray, lanes: int) -> list[np.ndarray]:
    """Lane l's records: frames k = l, l + lanes, ..., their seq renumbered from 0."""
    out = []
    for lane in range(lanes):
        part = records[lane::lanes].copy()
        part["seq"] = np.arange(len(part), dtype=np.uint64)
        out.append(part)
    return out


def stream_bytes(
    key: bytes,
    header: dict[str, Any],
    blocks: list[tuple[int, int, bytes, int]],
) -> bytes:
    """A stream: `header` (record_bytes, lanes, ledger_id, device_id, stream_no, link) and
    `blocks` (type, lane, payload, count) in order; the close block (each lane's count) is
    appended from the records blocks."""
    link = header["link"].encode()
    head = (
        struct.pack(
            "<8sHHHBB", MAGIC, VERSION, header["record_bytes"], header["lanes"], len(link), 0
        )
        + bytes.fromhex(header["ledger_id"])
        + bytes.fromhex(header["device_id"])
        + struct.pack("<Q", header["stream_no"])
        + link
    )
    prev = mac(key, b"H", head)
    out = [head, prev]
    sent = [0] * header["lanes"]
    blocks = [*blocks, (BLOCK_CLOSE, 0, b"", header["lanes"])]
    for index, (kind, lane, payload, count) in enumerate(blocks):
        if kind == BLOCK_RECORDS:
            sent[lane] += count
        if kind == BLOCK_CLOSE:
            payload = struct.pack(f"<{len(sent)}Q", *sent)
        bh = struct.pack("<BBHIQ", kind, 0, lane, count, index)
        prev = mac(key, b"B", prev, bh, payload)
        out += [bh, payload, prev]
    return b"".join(out)


def _record_blocks(lanes: list[np.ndarray]) -> list[tuple[int, int, bytes, int]]:
    """Blocks of BLOCK records per lane, emitted in the order they fill when frame k arrives on
    lane k mod LANES; the partial last blocks then in lane order."""
    blocks, pending = [], [0] * len(lanes)
    total = sum(len(x) for x in lanes)
    for k in range(total):
        lane = k % len(lanes)
        pending[lane] += 1
        if pending[lane] == BLOCK:
            lo = (k // len(lanes)) - BLOCK + 1
            part = lanes[lane][lo : lo + BLOCK]
            blocks.append((BLOCK_RECORDS, lane, part.tobytes(), BLOCK))
            pending[lane] = 0
    for lane, n in enumerate(pending):
        if n:
            part = lanes[lane][len(lanes[lane]) - n :]
            blocks.append((BLOCK_RECORDS, lane, part.tobytes(), n))
    return blocks


def write_device_vectors(root: Path, write) -> list[str]:
    """Write device/ into the kit at `root` with `write(root, rel, data)`; the files written."""
    alg = get_algorithm(ALG)
    key = DigestKey(KIT_MASTER_KEY)
    raw = compute_records(root / f"captures/{CAPTURE}.pcap", key, alg, STRIP)
    records = np.frombuffer(raw, dtype=record_dtype(alg.digest_size))
    lanes = lane_split(records, LANES)
    files = {}
    for n, part in enumerate(lanes):
        files[f"device/{CAPTURE}.{ALG}.{STRIP}.lane{n}.records"] = part.tobytes()
    skey = stream_key(KIT_MASTER_KEY, KIT_LEDGER_ID, KIT_DEVICE_ID)
    rb = 32 + alg.digest_size
    head = {
        "record_bytes": rb,
        "lanes": LANES,
        "ledger_id": KIT_LEDGER_ID,
        "device_id": KIT_DEVICE_ID,
        "stream_no": 1,
        "link": LINK,
    }
    files[f"device/{CAPTURE}.{ALG}.{STRIP}.{LANES}lanes.lts"] = stream_bytes(
        skey, head, _record_blocks(lanes)
    )
    cells = cells_for_capacity(DEFAULT_CAPACITY)
    wkeys = WindowKeys.derive(KIT_MASTER_KEY, ALG, KIT_LEDGER_ID, LINK, WINDOW_NS)
    acc = WindowAccumulator(wkeys, alg.digest_size, window_ns=WINDOW_NS, cells=cells)
    windows = acc.add(records) + acc.finish()
    wbytes = b"".join(w.serialize() for w in windows)
    files[f"device/{CAPTURE}.{ALG}.{STRIP}.windows"] = wbytes
    files[f"device/{CAPTURE}.{ALG}.{STRIP}.windows.lts"] = stream_bytes(
        skey,
        {**head, "lanes": 1, "stream_no": 2},
        [(BLOCK_WINDOWS, 0, w.serialize(), 1) for w in windows],
    )
    for rel, data in files.items():
        write(root, rel, data)
    doc = _device_doc(skey, wkeys, cells, windows, list(files))
    write(root, "device/device.json", doc)
    return [*files, "device/device.json"]


def _device_doc(skey, wkeys, cells, windows, files) -> bytes:
    doc = {
        "format": DEVICE_FORMAT,
        "kit_version": KIT_VERSION,
        "capture": f"captures/{CAPTURE}.pcap",
        "algorithm": ALG,
        "strip": STRIP,
        "ledger_id": KIT_LEDGER_ID,
        "device_id": KIT_DEVICE_ID,
        "link": LINK,
        "lanes": {
            "lanes": LANES,
            "rule": "frame k (capture order, from 0) goes to lane k mod 4; each lane's seq from 0",
            "ts_ns": "the kit's capture timestamps (a device with its own clock: conformance "
            "check --clock device)",
        },
        "stream": {
            "key": skey.hex(),
            "key_derivation": "HKDF-SHA256(ikm=master, salt=empty, info='ledgertool record "
            "stream v1' 0x00 || ledger_id (16 bytes) || device_id (16 bytes), L=32)",
            "stream_no": 1,
            "block_records": BLOCK,
            "block_order": "a lane's block is emitted when its 8th record arrives (frame k on "
            "lane k mod 4); then each lane's partial last block, in lane order; then the close",
        },
        "windows": {
            "window_ns": str(WINDOW_NS),
            "capacity": DEFAULT_CAPACITY,
            "cells": cells,
            "element_key": wkeys.element.hex(),
            "pad_key": wkeys.pad.hex(),
            "records": [
                {"index": str(w.index), "frames": w.frames, "wire_bytes": str(w.wire_bytes)}
                for w in windows
            ],
            "stream": "the same window records, one per type 2 block, lanes 1, stream_no 2",
        },
        "files": files,
    }
    return (json.dumps(doc, indent=1) + "\n").encode()
