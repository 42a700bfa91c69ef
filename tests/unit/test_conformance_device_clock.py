"""`conformance check --clock device`: the independent device (tests/device_spec.py, written from
docs/devices.md, not importing ledgertool) stamps the kit's frames with its own clock and passes;
the same records fail in clock mode kit, a wrong digest still fails, and timestamps that go back or
stray past the tolerance are named."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import cli

from ledgertool.device.conformance import check_records
from ledgertool.device.kit import export_kit
from ledgertool.keyfiles import DigestKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from device_spec import kit_frames, lane_records, own_clock  # noqa: E402

ALG, STRIP = "blake3-keyed-128", "l3"
DEVICE_EPOCH = 4_000_000_000_000_000_000  # the device's clock is nowhere near the kit's


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("kit") / "kit"
    export_kit(d)
    return d


def _device_records(kit: Path, jitter_ns: int = 50_000) -> tuple[bytes, list[int]]:
    frames = kit_frames(kit, "ethernet", STRIP)
    stamps = own_clock([t for t, _ in frames], DEVICE_EPOCH, jitter_ns, 1)
    return lane_records(frames, stamps, 1)[0], stamps


def _check(kit: Path, tmp_path: Path, records: bytes, **kw):
    (tmp_path / "dev.records").write_bytes(records)
    return check_records(
        kit / "captures/ethernet.pcap",
        tmp_path / "dev.records",
        DigestKey.load(kit / "digest.key"),
        ALG,
        STRIP,
        **kw,
    )


def test_device_with_its_own_clock_passes_in_clock_mode_device(kit, tmp_path):
    records, _ = _device_records(kit)
    res = _check(kit, tmp_path, records, clock="device", clock_tolerance_ns=1_000_000)
    assert res.ok and res.matched == res.frames == 102 and res.clock_violations == 0
    kit_mode = _check(kit, tmp_path, records)
    assert not kit_mode.ok and kit_mode.differing == 102
    assert kit_mode.first_differences[0].fields == ["ts_ns"]


def test_wrong_digest_still_fails_with_the_device_clock(kit, tmp_path):
    records = bytearray(_device_records(kit)[0])
    records[5 * 48 + 32] ^= 1  # frame 5's digest
    res = _check(kit, tmp_path, bytes(records), clock="device")
    assert not res.ok and res.differing == 1 and res.matched == 101
    assert [(d.index, d.fields) for d in res.first_differences] == [(5, ["digest"])]


def test_timestamps_that_go_back_or_stray_are_named(kit, tmp_path):
    records = bytearray(_device_records(kit)[0])
    ts7 = int.from_bytes(records[6 * 48 + 8 : 6 * 48 + 16], "little") - 1
    records[7 * 48 + 8 : 7 * 48 + 16] = ts7.to_bytes(8, "little")  # earlier than frame 6
    res = _check(kit, tmp_path, bytes(records), clock="device")
    assert not res.ok and res.differing == 0 and res.clock_violations == 1
    v = res.first_clock_violations[0]
    assert v.index == 7 and v.ts_ns == ts7 and "earlier than the record before" in v.why
    # 50 us of jitter: within 1 ms, not within 10 us
    records, _ = _device_records(kit)
    tight = _check(kit, tmp_path, records, clock="device", clock_tolerance_ns=10_000)
    assert not tight.ok and tight.clock_violations > 0
    assert "off the capture's pace" in tight.first_clock_violations[0].why


def test_cli_clock_device_json_report(kit, tmp_path):
    from jsonschema import validate

    records, _ = _device_records(kit)
    (tmp_path / "dev.records").write_bytes(records)
    args = [
        "conformance",
        "check",
        kit / "captures/ethernet.pcap",
        "--records",
        tmp_path / "dev.records",
        "--digest-key",
        kit / "digest.key",
        "--algorithm",
        ALG,
        "--strip",
        STRIP,
    ]
    r = cli(*args, "--clock", "device", "--clock-tolerance", "1ms", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    schema = Path(__file__).resolve().parents[2] / "schemas/conformance-check-report.schema.json"
    validate(rep, json.loads(schema.read_text()))
    assert rep["clock"] == {
        "mode": "device",
        "tolerance_ns": 1_000_000,
        "violations": 0,
        "first_violations": [],
    }
    text = cli(*args, "--clock", "device")
    assert text.returncode == 0 and "device clock: ts_ns monotone" in text.stdout
    assert cli(*args).returncode == 1
    bad = cli(*args, "--clock-tolerance", "1ms")
    assert bad.returncode == 2 and "--clock-tolerance" in bad.stderr


def _lanes(kit: Path, tmp_path: Path, lanes: int, edit=None) -> list[Path]:
    frames = kit_frames(kit, "ethernet", STRIP)
    stamps = own_clock([t for t, _ in frames], DEVICE_EPOCH, 50_000, lanes)
    files = lane_records(frames, stamps, lanes)
    if edit:
        files = edit(files)
    out = []
    for n, data in enumerate(files):
        (tmp_path / f"lane{n}.records").write_bytes(data)
        out.append(tmp_path / f"lane{n}.records")
    return out


def test_four_lane_device_with_its_own_clock_passes(kit, tmp_path):
    from ledgertool.device.conformance import check_lanes

    key = DigestKey.load(kit / "digest.key")
    cap = kit / "captures/ethernet.pcap"
    files = _lanes(kit, tmp_path, 4)
    res = check_lanes(cap, files, key, ALG, STRIP, clock_tolerance_ns=1_000_000)
    assert res.ok and res.lanes == 4 and res.matched == res.frames == res.device_records == 102
    r = cli(
        "conformance", "check", cap, *[a for f in files for a in ("--records", f)],
        "--digest-key", kit / "digest.key", "--algorithm", ALG, "--strip", STRIP,
        "--clock", "device", "--clock-tolerance", "1ms",
    )  # fmt: skip
    assert r.returncode == 0 and "from 4 lanes" in r.stdout, r.stdout + r.stderr


def test_four_lane_device_with_a_wrong_digest_or_lost_record_fails(kit, tmp_path):
    from ledgertool.device.conformance import check_lanes

    key = DigestKey.load(kit / "digest.key")
    cap = kit / "captures/ethernet.pcap"

    def flip(files):  # lane 2's record 3 is frame 14 (frame k on lane k mod 4)
        b = bytearray(files[2])
        b[3 * 48 + 40] ^= 0xFF
        return [files[0], files[1], bytes(b), files[3]]

    res = check_lanes(cap, _lanes(kit, tmp_path, 4, flip), key, ALG, STRIP)
    assert not res.ok and res.differing == 1 and res.matched == 101
    [d] = res.first_differences
    assert (d.index, d.fields) == (14, ["digest"])

    def lose(files):  # lane 1 loses its record 2 (frame 9); its later seqs are renumbered
        import struct

        recs = [files[1][i : i + 48] for i in range(0, len(files[1]), 48)]
        del recs[2]
        recs = [struct.pack("<Q", n) + r[8:] for n, r in enumerate(recs)]
        return [files[0], b"".join(recs), files[2], files[3]]

    lost = check_lanes(cap, _lanes(kit, tmp_path, 4, lose), key, ALG, STRIP)
    assert not lost.ok and lost.differing == 1 and lost.device_records == 101
    assert [(d.index, d.fields) for d in lost.first_differences] == [(9, ["missing record"])]

    def swap(files):  # lane 0's records 1 and 2 (frames 4 and 8) swapped, seqs kept
        recs = [files[0][i : i + 48] for i in range(0, len(files[0]), 48)]
        recs[1], recs[2] = recs[1][:8] + recs[2][8:], recs[2][:8] + recs[1][8:]
        return [b"".join(recs), *files[1:]]

    order = check_lanes(cap, _lanes(kit, tmp_path, 4, swap), key, ALG, STRIP)
    assert not order.ok and any("out of capture order" in w for w in order.warnings)
