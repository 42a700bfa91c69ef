"""The kit's device vectors (device/: lanes, the authenticated stream, window records): the
independent device (tests/device_spec.py, from docs/devices.md) rebuilds the 4-lane stream byte for
byte from the lane files and device.json; ledgertool's stream parser accepts it and merges the
lanes into the capture's records; the window stream carries exactly the window vectors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import cli

from ledgertool.device.conformance import KIT_MASTER_KEY
from ledgertool.digest.record import record_dtype
from ledgertool.source.stream import StreamBinding, StreamParser

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from device_spec import Device, parse_blocks, stream_key  # noqa: E402

PREFIX = "device/ethernet.siphash-1-3-128.l3"


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("kit") / "kit"
    assert cli("conformance", "export", d).returncode == 0
    return d


def test_independent_device_rebuilds_the_four_lane_stream(kit):
    doc = json.loads((kit / "device/device.json").read_text())
    assert (
        stream_key(KIT_MASTER_KEY, doc["ledger_id"], doc["device_id"]).hex()
        == (doc["stream"]["key"])
    )
    lanes = [(kit / f"{PREFIX}.lane{n}.records").read_bytes() for n in range(4)]
    d = Device(KIT_MASTER_KEY, doc["ledger_id"], doc["device_id"], lanes=4, block_records=8)
    recs = [[lane[i : i + 48] for i in range(0, len(lane), 48)] for lane in lanes]
    for k in range(sum(map(len, recs))):  # frame k arrives on lane k mod 4
        d.push_record(k % 4, recs[k % 4][k // 4])
    assert d.close() == (kit / f"{PREFIX}.4lanes.lts").read_bytes()


def test_stream_vector_merges_into_the_capture_records(kit):
    doc = json.loads((kit / "device/device.json").read_text())
    binding = StreamBinding(doc["ledger_id"], KIT_MASTER_KEY, "link0", 48)
    p = StreamParser("kit", binding)
    p.feed((kit / f"{PREFIX}.4lanes.lts").read_bytes())
    got = []
    while (arr := p.take(sum(map(len, got)), None)) is not None:
        got.append(arr.copy())
    p.finish()
    merged = np.concatenate(got)
    want = np.frombuffer(
        (kit / "records/ethernet/siphash-1-3-128.l3.records").read_bytes(), dtype=record_dtype(16)
    )
    assert merged["seq"].tolist() == list(range(102))

    # the same records, in stream order (blocks of 8 per lane), as a multiset
    def rows(a):
        return sorted((int(r["ts_ns"]), bytes(r["digest"]), int(r["flags"])) for r in a)

    assert rows(merged) == rows(want)


def test_window_stream_carries_the_window_vectors(kit):
    doc = json.loads((kit / "device/device.json").read_text())
    windows = (kit / f"{PREFIX}.windows").read_bytes()
    data = (kit / f"{PREFIX}.windows.lts").read_bytes()
    size = len(windows) // len(doc["windows"]["records"])
    head, blocks = parse_blocks(data, window_bytes=size)
    assert b"".join(b[16:-32] for b in blocks[:-1]) == windows
    assert sum(r["frames"] for r in doc["windows"]["records"]) == 102
