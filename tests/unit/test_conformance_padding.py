"""`conformance check` against a simulated device that hashes Ethernet padding: it names the range
"to the end of the captured frame" for the padded frames, however many bytes the padding is, and
never blames the key while other records match under it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgertool.algorithms import ALGORITHMS
from ledgertool.device.conformance import KIT_MASTER_KEY, check_records, compute_records
from ledgertool.device.kit import export_kit
from ledgertool.digest.engine import digest_one
from ledgertool.digest.record import RECORD_FIXED
from ledgertool.digest.strip import strip_range
from ledgertool.keyfiles import DigestKey
from ledgertool.source.file import CaptureReader


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("kit") / "kit"
    export_kit(d)
    return d


def _device(kit: Path, strip: str, hashed) -> tuple[bytes, list[tuple[int, int, int]]]:
    """Records of a device that hashes frame[hashed(offset, end, len)] of each frame of the kit's
    Ethernet capture (key, algorithm and every other field right: ledgertool's records with those
    digests replaced), and (index, end, frame length) of every frame it hashes differently."""
    alg = ALGORITHMS["siphash-1-3-128"]
    sub = DigestKey(KIT_MASTER_KEY).subkey(alg.name, alg.key_size)
    capture = kit / "captures" / "ethernet.pcap"
    rs = RECORD_FIXED + alg.digest_size
    records = bytearray(compute_records(capture, DigestKey(KIT_MASTER_KEY), alg, strip))
    moved = []
    with CaptureReader(capture) as reader:
        for fr in reader.frames():
            rng = strip_range(fr.data, fr.linktype, strip, fr.wire_len)
            a, b = hashed(rng.offset, rng.end, len(fr.data))
            if (a, b) != (rng.offset, rng.end):
                moved.append((fr.index, rng.end, len(fr.data)))
                at = fr.index * rs + RECORD_FIXED
                records[at : at + alg.digest_size] = digest_one(alg, sub, fr.data[a:b])
    return bytes(records), moved


def _check(kit: Path, records: bytes, tmp_path: Path, strip: str):
    (tmp_path / "dev.records").write_bytes(records)
    return check_records(
        kit / "captures" / "ethernet.pcap",
        tmp_path / "dev.records",
        DigestKey.load(kit / "digest.key"),
        "siphash-1-3-128",
        strip,
        max_report=20,
    )


@pytest.mark.parametrize("strip", ["l3", "payload"])
def test_device_hashing_ethernet_padding_is_named_as_such(kit, tmp_path, strip):
    records, padded = _device(kit, strip, lambda a, b, n: (a, n))
    assert padded and max(n - end for _, end, n in padded) > 8  # beyond the near-range search
    res = _check(kit, records, tmp_path, strip)
    assert (res.frames, res.differing, res.matched) == (102, len(padded), 102 - len(padded))
    assert [d.index for d in res.first_differences] == [i for i, _, _ in padded]
    for d, (_, end, n) in zip(res.first_differences, padded):
        assert d.fields == ["digest"] and d.device_range == (d.expected_range[0], n), d
        assert d.device_range_note.startswith(
            f"the device hashed [{d.expected_range[0]}, {n}), to the end of the captured frame"
        ), d.device_range_note
        assert (
            f"the {n - end} bytes after the packet's end (Ethernet padding or a trailer)"
            in d.device_range_note
        )
        assert "look at the key" not in d.device_range_note


def test_key_is_not_blamed_when_other_records_match(kit, tmp_path):
    """Padded frames hashed from 9 bytes past the start to their end: no range the check tries, yet
    the other frames match, so the note says the key and algorithm are right."""
    records, odd = _device(kit, "l3", lambda a, b, n: (a + 9, n) if n > b else (a, b))
    res = _check(kit, records, tmp_path, "l3")
    assert res.differing == len(odd) and res.matched == 102 - len(odd) > 90
    for d in res.first_differences:
        assert d.device_range is None and "look at the key" not in d.device_range_note
        assert (
            f"yet {res.matched} other record(s) match under this key and algorithm, so neither is "
            "wrong" in d.device_range_note
        ), d.device_range_note
