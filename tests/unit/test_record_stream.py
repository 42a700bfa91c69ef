"""Authenticated record streams (docs/devices.md, ADR 0016): an independent device
(tests/device_spec.py, written from the page) produces streams `capture records:` seals, with one
lane and with several; a host between device and sealer that rewrites, drops, replays, reorders,
truncates or splices blocks is refused at a named block and byte offset, and nothing it altered is
sealed."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import cli
from ledger_files import sealed_records

from ledgertool.digest.record import record_dtype

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from device_spec import Device, Frame, parse_blocks  # noqa: E402
from record_stream_cli import capture_args, new_ledger  # noqa: E402

DEVICE = "ab" * 16
OTHER_DEVICE = "cd" * 16


@pytest.fixture()
def ledger(tmp_path, keydir) -> tuple[Path, str, bytes]:
    """A new, empty ledger (siphash-1-3-128): its directory, ledger id and digest master key."""
    return new_ledger(tmp_path, keydir)


def _capture(src: Path, lg: Path, keydir: Path, *extra: str) -> list[str]:
    return capture_args(f"records:{src}", lg, keydir, 16, *extra)


def _frame(i: int) -> Frame:
    return Frame(60 + i % 7, 60 + i % 7, 0, 1, (i * 2654435761 % 2**128).to_bytes(16, "little"))


def _stream(master, ledger_id, *, lanes=1, frames=40, device=DEVICE, link="link0", stream_no=1):
    d = Device(master, ledger_id, device, link=link, lanes=lanes, stream_no=stream_no)
    for i in range(frames):
        lane = i % lanes
        d.frame(lane, 1_767_225_600_000_000_000 + 1000 * i, _frame(i))
        if i == 13:
            d.drops(lane, 1_767_225_600_000_000_000 + 1000 * i, 5)
    return d.close()


def _seal_sources(lg: Path) -> list[str]:
    return [json.loads(p.read_text())["source"] for p in sorted(lg.glob("link=link0/*.seal.json"))]


def _feed(tmp_path, lg, keydir, data: bytes, *extra: str):
    src = tmp_path / "dev.lts"
    src.write_bytes(data)
    return cli(*_capture(src, lg, keydir, *extra))


@pytest.mark.parametrize("lanes", [1, 3])
def test_independent_device_stream_is_sealed_and_verifies(tmp_path, keydir, ledger, lanes):
    lg, ledger_id, master = ledger
    r = _feed(tmp_path, lg, keydir, _stream(master, ledger_id, lanes=lanes), "--device-id", DEVICE)
    assert r.returncode == 0, r.stderr
    assert "40 frames" in r.stdout and "drops 5" in r.stdout
    sources = _seal_sources(lg)
    assert len(sources) == 3  # 41 records, 16 a segment
    assert all(s == f"records:dev.lts device {DEVICE} stream 1" for s in sources)
    v = cli("verify", str(lg), "--trust", str(keydir / "verifier.pub"))
    assert v.returncode == 0, v.stdout + v.stderr


def test_lanes_merge_into_one_link_sequence_in_stream_order(tmp_path, keydir, ledger):
    lg, ledger_id, master = ledger
    assert _feed(tmp_path, lg, keydir, _stream(master, ledger_id, lanes=3)).returncode == 0
    recs = _sealed(lg)
    assert recs["seq"].tolist() == list(range(41))
    # stream order: lane 0's first block of 8 records, then lane 1's ...; the device's lane seq
    # is replaced by the link's
    frames = recs[(recs["flags"] & 0x8000) == 0]
    want = [_frame(i).digest for i in range(40)]
    assert sorted(bytes(d) for d in frames["digest"]) == sorted(want)
    gap = recs[(recs["flags"] & 0x8000) != 0]
    assert gap["aux"].tolist() == [5]


def _tamper_cases(stream: bytes, other_device: bytes, other_link: bytes):
    head, blocks = parse_blocks(stream)
    _, foreign = parse_blocks(other_device)
    _, foreign_link = parse_blocks(other_link)
    flipped = bytearray(blocks[2])
    flipped[16 + 40] ^= 1  # a digest byte of the block's first record
    return {
        "rewrite": (head + b"".join(blocks[:2]) + bytes(flipped) + b"".join(blocks[3:]), 2),
        "drop": (head + blocks[0] + b"".join(blocks[2:]), 1),
        "replay": (head + blocks[0] + blocks[1] + blocks[1] + b"".join(blocks[2:]), 2),
        "reorder": (head + blocks[0] + blocks[2] + blocks[1] + b"".join(blocks[3:]), 1),
        "truncate-close": (head + b"".join(blocks[:-1]), len(blocks) - 1),
        "truncate-mid-block": (head + b"".join(blocks[:3]) + blocks[3][:50], 3),
        "splice-other-device": (head + blocks[0] + foreign[1] + b"".join(blocks[2:]), 1),
        "splice-other-link": (head + blocks[0] + foreign_link[1] + b"".join(blocks[2:]), 1),
    }


@pytest.mark.parametrize(
    "case",
    [
        "rewrite",
        "drop",
        "replay",
        "reorder",
        "truncate-close",
        "truncate-mid-block",
        "splice-other-device",
        "splice-other-link",
    ],
)
def test_tampered_stream_is_refused_at_the_block_and_offset(tmp_path, keydir, ledger, case):
    lg, ledger_id, master = ledger
    stream = _stream(master, ledger_id, lanes=2)
    cases = _tamper_cases(
        stream,
        _stream(master, ledger_id, lanes=2, device=OTHER_DEVICE),
        _stream(master, ledger_id, lanes=2, link="link1"),
    )
    data, block = cases[case]
    head, blocks = parse_blocks(stream)
    offset = len(head) + sum(len(b) for b in blocks[:block])
    r = _feed(tmp_path, lg, keydir, data)
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"block {block} (byte {offset})" in line, line
    # only records of blocks before the refused one, all untouched, are sealed
    recs = _sealed(lg)
    before = sum(int.from_bytes(b[4:8], "little") for b in blocks[:block] if b[0] == 1)
    assert len(recs) == before
    sent = {_frame(i).digest for i in range(40)}
    assert all(bytes(d) in sent or f & 0x8000 for d, f in zip(recs["digest"], recs["flags"]))


def _sealed(lg: Path) -> np.ndarray:
    """Every sealed record of link0, in order."""
    n = len(list(lg.glob("link=link0/*.seal.json")))
    raw = b"".join(sealed_records(lg, i, "link0") for i in range(n))
    return np.frombuffer(raw, dtype=record_dtype(16))


def test_header_checks_refuse_other_ledger_link_device_and_replayed_stream(
    tmp_path, keydir, ledger
):
    lg, ledger_id, master = ledger
    other = _feed(tmp_path, lg, keydir, _stream(master, "00" * 16))
    assert other.returncode == 2 and "stream header (byte 0)" in other.stderr
    assert f"not {ledger_id}" in other.stderr
    link = _feed(tmp_path, lg, keydir, _stream(master, ledger_id, link="link1"))
    assert link.returncode == 2 and "is for link 'link1', not 'link0'" in link.stderr
    dev = _feed(tmp_path, lg, keydir, _stream(master, ledger_id), "--device-id", OTHER_DEVICE)
    assert dev.returncode == 2 and f"not the device {OTHER_DEVICE} required" in dev.stderr
    wrong_key = _feed(tmp_path, lg, keydir, _stream(bytes(32), ledger_id))
    assert wrong_key.returncode == 2 and "tag does not verify" in wrong_key.stderr
    ok = _feed(tmp_path, lg, keydir, _stream(master, ledger_id, stream_no=7))
    assert ok.returncode == 0, ok.stderr
    again = _feed(tmp_path, lg, keydir, _stream(master, ledger_id, stream_no=7))
    assert again.returncode == 2 and "a replayed or stale stream" in again.stderr
    later = _feed(tmp_path, lg, keydir, _stream(master, ledger_id, stream_no=8))
    assert later.returncode == 0, later.stderr
    assert len(_sealed(lg)) == 82


def test_plain_records_are_refused_when_a_device_is_required(tmp_path, keydir, ledger):
    lg, _, _ = ledger
    src = tmp_path / "plain.records"
    src.write_bytes(bytes(48))
    r = cli(*_capture(src, lg, keydir, "--device-id", DEVICE))
    assert r.returncode == 2
    assert re.search(r"plain records, not an authenticated stream", r.stderr)


def test_stream_without_the_digest_key_is_refused(tmp_path, keydir, ledger):
    lg, ledger_id, master = ledger
    src = tmp_path / "dev.lts"
    src.write_bytes(_stream(master, ledger_id))
    args = _capture(src, lg, keydir)
    i = args.index("--digest-key")
    r = cli(*args[:i], *args[i + 2 :])
    assert r.returncode == 2 and "needs the ledger's digest key" in r.stderr


def test_devices_page_states_the_bytes_the_sealer_checks():
    """docs/devices.md's key derivation, header and block layout are the ones the sealer uses (the
    independent device in tests/device_spec.py is written from the page)."""
    from ledgertool.source import stream

    doc = (Path(__file__).resolve().parents[2] / "docs/devices.md").read_text()
    assert (
        '"ledgertool record stream v1" 0x00 || ledger_id (16 bytes) || device_id (16 bytes)' in doc
    )
    assert stream.KEY_INFO == b"ledgertool record stream v1\x00"
    assert "| 0 | 8 | magic, ASCII `LTSTREAM` |" in doc and stream.MAGIC == b"LTSTREAM"
    assert (
        '| 56 + `link_len` | 32 | `header_tag = MAC("H" \\|\\| bytes 0 .. 56 + link_len)` |' in doc
    )
    assert stream.HEADER_FIXED == 56 and stream.BLOCK_HEADER == 16 and stream.TAG_BYTES == 32
    assert "| 8 | 8 | `index` u64, the block's number: 0, 1, 2, ... |" in doc
    assert "0.047 bytes per record" in doc
