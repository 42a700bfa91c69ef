"""`capture records:` fed authenticated streams (docs/devices.md "Authenticated record streams") by
a host that sits between device and sealer: a wrong tag, a count field far beyond a block, a close
block with another lane count, garbage between blocks, bytes or a second stream after the close
block, a header naming another device, a block replayed from the device's earlier stream. Each is
refused in one line naming the block and its byte offset (exit 2), and only the records of blocks
whose tags verified before it are sealed, untouched."""

from __future__ import annotations

import struct
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
T0 = 1_767_225_600_000_000_000


@pytest.fixture()
def ledger(tmp_path, keydir) -> tuple[Path, str, bytes]:
    """A new, empty ledger: its directory, ledger id and digest master key."""
    return new_ledger(tmp_path, keydir)


def _capture(src: Path, lg: Path, keydir: Path, *extra: str) -> list[str]:
    return capture_args(f"records:{src}", lg, keydir, 16, *extra)


def _frame(i: int, salt: int = 0) -> Frame:
    digest = ((i + 1000 * salt) * 2654435761 % 2**128).to_bytes(16, "little")
    return Frame(60 + i % 7, 60 + i % 7, 0, 1, digest)


def _stream(master, ledger_id, *, frames=40, device=DEVICE, stream_no=1, salt=0) -> bytes:
    d = Device(master, ledger_id, device, lanes=2, stream_no=stream_no)
    for i in range(frames):
        d.frame(i % 2, T0 + 1000 * i, _frame(i, salt))
    return d.close()


def _sealed(lg: Path) -> np.ndarray:
    n = len(list(lg.glob("link=link0/*.seal.json")))
    raw = b"".join(sealed_records(lg, i, "link0") for i in range(n))
    return np.frombuffer(raw, dtype=record_dtype(16))


def _feed(tmp_path, lg, keydir, data: bytes, *extra: str):
    src = tmp_path / "dev.lts"
    src.write_bytes(data)
    return cli(*_capture(src, lg, keydir, *extra))


def _refused(r, where: str) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, r.stderr
    assert where in line, line
    return line


def _records_in(blocks: list[bytes]) -> int:
    return sum(int.from_bytes(b[4:8], "little") for b in blocks if b[0] == 1)


def _only_sent(lg: Path, n: int, salt: int = 0) -> None:
    recs = _sealed(lg)
    assert len(recs) == n
    assert recs["seq"].tolist() == list(range(n))
    sent = {_frame(i, salt).digest for i in range(40)}
    assert all(bytes(d) in sent for d in recs["digest"])


def _at(head: bytes, blocks: list[bytes], k: int) -> int:
    return len(head) + sum(len(b) for b in blocks[:k])


def test_a_wrong_tag_is_refused_at_its_block(tmp_path, keydir, ledger):
    lg, lid, master = ledger
    head, blocks = parse_blocks(_stream(master, lid))
    bad = bytearray(blocks[2])
    bad[-1] ^= 0x80  # the tag itself, the records untouched
    data = head + b"".join(blocks[:2]) + bytes(bad) + b"".join(blocks[3:])
    line = _refused(_feed(tmp_path, lg, keydir, data), f"block 2 (byte {_at(head, blocks, 2)})")
    assert "tag does not verify" in line
    _only_sent(lg, _records_in(blocks[:2]))


@pytest.mark.parametrize("count", [0, 65537, 2**31, 2**32 - 1])
def test_a_count_beyond_a_block_is_refused_before_it_is_waited_for(tmp_path, keydir, ledger, count):
    lg, lid, master = ledger
    head, blocks = parse_blocks(_stream(master, lid))
    bad = blocks[2][:4] + struct.pack("<I", count) + blocks[2][8:]
    data = head + b"".join(blocks[:2]) + bad + b"".join(blocks[3:])
    line = _refused(_feed(tmp_path, lg, keydir, data), f"block 2 (byte {_at(head, blocks, 2)})")
    assert f"holds {count} records (1..65536)" in line
    _only_sent(lg, _records_in(blocks[:2]))


def test_a_count_within_the_limit_but_not_the_blocks_is_refused_at_the_end(
    tmp_path, keydir, ledger
):
    # 65536 records claimed: the sealer waits for at most that one block, then finds no more bytes
    lg, lid, master = ledger
    head, blocks = parse_blocks(_stream(master, lid))
    bad = blocks[2][:4] + struct.pack("<I", 65536) + blocks[2][8:]
    data = head + b"".join(blocks[:2]) + bad + b"".join(blocks[3:])
    line = _refused(_feed(tmp_path, lg, keydir, data), f"block 2 (byte {_at(head, blocks, 2)})")
    assert "missing: the stream ends with" in line and "cut short" in line
    _only_sent(lg, _records_in(blocks[:2]))


@pytest.mark.parametrize("lanes", [1, 3, 2**32 - 1])
def test_a_close_block_with_another_lane_count_is_refused(tmp_path, keydir, ledger, lanes):
    lg, lid, master = ledger
    head, blocks = parse_blocks(_stream(master, lid))
    k = len(blocks) - 1
    bad = blocks[k][:4] + struct.pack("<I", lanes) + blocks[k][8:]
    data = head + b"".join(blocks[:k]) + bad
    line = _refused(_feed(tmp_path, lg, keydir, data), f"block {k} (byte {_at(head, blocks, k)})")
    assert f"closes {lanes} lanes, not 2" in line
    _only_sent(lg, 40)


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00" * 16,
        b"\xff" * 100,
        b"\x01\x00\x00\x00\x01\x00\x00\x00" + b"\x00" * 90,  # a records header of one record
        b"LTSTREAM" + b"\x00" * 60,
    ],
    ids=["zeros", "ones", "fake-block", "fake-header"],
)
def test_garbage_between_blocks_is_refused_where_it_starts(tmp_path, keydir, ledger, garbage):
    lg, lid, master = ledger
    head, blocks = parse_blocks(_stream(master, lid))
    data = head + b"".join(blocks[:3]) + garbage + b"".join(blocks[3:])
    _refused(_feed(tmp_path, lg, keydir, data), f"block 3 (byte {_at(head, blocks, 3)})")
    _only_sent(lg, _records_in(blocks[:3]))


@pytest.mark.parametrize("after", ["bytes", "second-stream"])
def test_bytes_after_the_close_block_are_refused_not_ignored(tmp_path, keydir, ledger, after):
    lg, lid, master = ledger
    stream = _stream(master, lid)
    head, blocks = parse_blocks(stream)
    tail = b"junk" if after == "bytes" else _stream(master, lid, stream_no=2, salt=1)
    line = _refused(
        _feed(tmp_path, lg, keydir, stream + tail),
        f"block {len(blocks)} (byte {len(stream)})",
    )
    assert f"follows the close block: {len(tail)} bytes after the stream's end" in line
    _only_sent(lg, 40)  # every record of the closed stream verified; nothing of what follows


@pytest.mark.parametrize("limit", [["--frames", "40"], ["--frames", "41"]])
def test_bytes_after_the_close_block_are_not_an_end_of_capture(tmp_path, keydir, ledger, limit):
    # the frame limit reached with the last record: a capture that says its source ended must
    # not have left unread bytes after the stream's close block behind unremarked
    lg, lid, master = ledger
    stream = _stream(master, lid)
    r = _feed(tmp_path, lg, keydir, stream + b"junk", *limit)
    if limit[1] == "40":  # stopped by the limit: the bytes after it are declared unread
        assert r.returncode == 0 and "end of capture" not in r.stdout, r.stdout
        assert "stopped by --frames: any frames of records:" in r.stdout
    else:  # read on: refused
        _refused(r, "follows the close block: 4 bytes")
    _only_sent(lg, 40)


def test_a_pipe_that_goes_on_after_the_close_block_is_not_at_its_end(ledger):
    # the capture asks `at_end` when a limit is reached with the last record: bytes that arrive
    # after the close block in a later read must be read and refused, not left unread behind an
    # "end of capture"
    import os
    import threading

    from ledgertool.algorithms import ALGORITHMS
    from ledgertool.errors import LedgerFormatError
    from ledgertool.source.records import RecordsReader
    from ledgertool.source.stream import StreamBinding

    _, lid, master = ledger
    stream = _stream(master, lid)
    rfd, wfd = os.pipe()
    try:
        reader = RecordsReader(f"records:/dev/fd/{rfd}", ALGORITHMS["siphash-1-3-128"], "link0")
        reader.bind(StreamBinding(lid, master, "link0", 48))
        os.write(wfd, stream)
        got = 0
        for _ in range(100):
            _, n, _ = reader.fill(got)
            got += n
            if got == 40:
                break
        assert got == 40
        later = threading.Timer(0.05, os.write, (wfd, b"junk"))
        later.start()
        later.join()
        assert reader.at_end() is False
        os.close(wfd)
        wfd = -1
        with pytest.raises(LedgerFormatError, match="follows the close block: 4 bytes"):
            for _ in range(100):
                reader.fill(got)
        reader.close()
    finally:
        os.close(rfd)
        if wfd >= 0:
            os.close(wfd)


def test_a_header_naming_another_device_is_refused_at_byte_0(tmp_path, keydir, ledger):
    lg, lid, master = ledger
    stream = bytearray(_stream(master, lid))
    stream[32:48] = bytes.fromhex(OTHER_DEVICE)  # the device id field: its key no longer fits
    line = _refused(_feed(tmp_path, lg, keydir, bytes(stream)), "stream header (byte 0)")
    assert f"tag does not verify under device {OTHER_DEVICE}'s stream key" in line
    assert len(_sealed(lg)) == 0
    r = _feed(
        tmp_path, lg, keydir, _stream(master, lid, device=OTHER_DEVICE), "--device-id", DEVICE
    )
    _refused(r, f"is from device {OTHER_DEVICE}, not the device {DEVICE} required")
    assert len(_sealed(lg)) == 0


def test_a_block_replayed_from_the_devices_earlier_stream_is_refused(tmp_path, keydir, ledger):
    # the same records at the same block index of stream 1, spliced into stream 2: the chain
    # starts at stream 2's header tag, so the old block's tag cannot verify there
    lg, lid, master = ledger
    _, old = parse_blocks(_stream(master, lid, stream_no=1))
    new = _stream(master, lid, stream_no=2)
    head, blocks = parse_blocks(new)
    assert old[1][:-32] == blocks[1][:-32]  # byte for byte the same block but its tag
    data = head + blocks[0] + old[1] + b"".join(blocks[2:])
    line = _refused(_feed(tmp_path, lg, keydir, data), f"block 1 (byte {_at(head, blocks, 1)})")
    assert "tag does not verify" in line
    _only_sent(lg, _records_in(blocks[:1]))
