"""`conformance check --clock device --clock-tolerance 0` asks for a device clock in exact step
with the capture's pace; the library takes a tolerance >= 0 (and says so), but the CLI refused 0
as not a positive duration. As `recompute --tolerance`, it takes 0, 0s and 0ns."""

from __future__ import annotations

import json
import struct

import pytest
from conftest import cli

RECORDS = "records/ethernet/siphash-1-3-128.l3.records"


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    d = tmp_path_factory.mktemp("kit") / "kit"
    r = cli("conformance", "export", d)
    assert r.returncode == 0, r.stderr
    return d


def _check(kit, records, tolerance):
    return cli("conformance", "check", kit / "captures/ethernet.pcap", "--records", records,
               "--strip", "l3", "--digest-key", kit / "digest.key", "--clock", "device",
               "--clock-tolerance", tolerance, "--json")  # fmt: skip


@pytest.mark.parametrize("zero", ["0", "0s", "0ns"])
def test_zero_tolerance_passes_records_in_step_with_the_capture(kit, zero):
    r = _check(kit, kit / RECORDS, zero)
    assert r.returncode == 0, r.stderr
    clock = json.loads(r.stdout)["clock"]
    assert (clock["mode"], clock["tolerance_ns"], clock["violations"]) == ("device", 0, 0)


def test_zero_tolerance_names_a_record_one_nanosecond_off_the_pace(kit, tmp_path):
    data = bytearray((kit / RECORDS).read_bytes())
    rs = 48
    (ts,) = struct.unpack_from("<Q", data, 5 * rs + 8)
    struct.pack_into("<Q", data, 5 * rs + 8, ts + 1)
    (tmp_path / "dev.records").write_bytes(data)
    r = _check(kit, tmp_path / "dev.records", "0")
    assert r.returncode == 1, r.stderr
    clock = json.loads(r.stdout)["clock"]
    assert clock["violations"] == 1 and clock["first_violations"][0]["index"] == 5
    assert _check(kit, tmp_path / "dev.records", "1ns").returncode == 0
