"""ERF captures (Endace DAG cards): records built here byte by byte from the record layout (the
16-byte header, extension headers, the Ethernet pad, padding to rlen), read by the native reader
and captured into a ledger; the loss counter becomes declared drops; a bad record is one line
naming the file and its byte offset. The corpus' ERF files (if any) against the manifest's
reference counts. Also pcapng blocks that wiretap stops at (damaged options, a short statistics
block): read past, with a warning naming the block."""

from __future__ import annotations

import json
import os
import struct
import threading

import pytest
from conftest import CORPUS, cli_in_process, corpus_rows, needs_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_option_and_format_messages import _capture

from ledgertool.errors import CaptureFormatError
from ledgertool.source.file import CaptureReader, open_capture, stream_reader

ETH, COLOR_ETH, IPV4, META, PAD = 2, 11, 22, 27, 48
SEC = 1_700_000_000


def erf_record(
    payload: bytes,
    *,
    type_: int = ETH,
    ts_frac: int = 0,
    sec: int = SEC,
    lctr: int = 0,
    wlen: int | None = None,
    ext: list[bytes] = (),
    flags: int = 0x04,
    pad_to: int = 8,
    rlen: int | None = None,
) -> bytes:
    """One ERF record: timestamp (u64 LE: seconds << 32 | binary fraction), type (bit 7: an
    extension header follows), flags, then rlen, lctr, wlen big-endian; extension headers (bit 7
    of each one's first byte: another follows); the 2-byte pad of Ethernet types; padding."""
    exts = b""
    for i, e in enumerate(ext):
        more = 0x80 if i + 1 < len(ext) else 0
        exts += bytes([e[0] | more]) + e[1:8]
    body = exts + (b"\0\0" if type_ in (ETH, COLOR_ETH) else b"") + payload
    size = 16 + len(body)
    size += -size % pad_to
    hdr = struct.pack("<Q", sec << 32 | ts_frac) + bytes([type_ | (0x80 if ext else 0), flags])
    hdr += struct.pack(">HHH", rlen if rlen is not None else size, lctr, wlen or len(payload))
    return (hdr + body).ljust(size, b"\0")


def frame(n: int, fill: int) -> bytes:
    """An Ethernet frame of n bytes (n >= 14) whose bytes after the header are `fill`."""
    return bytes.fromhex("02000000000102000000000208") + b"\x00" + bytes([fill]) * (n - 14)


def _frames(path, losses: bool = True):
    """The frames of `path` (with its loss counters as GAP pseudo-frames, as capture reads it)."""
    with CaptureReader(path) as r:
        if losses:
            r.declare_losses()
        return list(r.frames()), r.info()


def test_erf_records_are_read_with_timestamps_lengths_and_losses(tmp_path):
    f1, f2, f3 = frame(60, 1), frame(61, 2), frame(20, 3)
    data = (
        # half a second; wlen 64 with 62 bytes after the headers (the record's padding): caplen 62
        erf_record(f1, ts_frac=0x80000000, wlen=64)
        + erf_record(b"", type_=PAD, pad_to=32)  # a PAD record: skipped
        + erf_record(f2, ts_frac=1, lctr=7, ext=[bytes(8), bytes([3]) + bytes(7)])
        + erf_record(b"E" + bytes(19), type_=IPV4, ts_frac=0xFFFFFFFF, wlen=20)
        + erf_record(f3 + bytes(10), type_=COLOR_ETH, lctr=5, wlen=20, flags=0x05)
    )
    p = tmp_path / "dag.erf"
    p.write_bytes(data)
    frames, info = _frames(p)
    assert info.format == "ERF" and info.linktype == 1 and info.skipped_blocks == 1
    # the loss counter of the ETH record comes first as a GAP pseudo-frame; a colour is not a count
    assert [(f.rflags, f.wire_len, f.caplen) for f in frames] == [
        (0, 64, 62),
        (16, 7, 0),
        (0, 61, 61),
        (0, 20, 20),
        (0, 20, 20),
    ]
    assert [f.data for f in frames] == [f1 + b"\0\0", b"", f2, b"E" + bytes(19), f3]
    # seconds * 1e9 + the binary fraction rounded to the nearest ns
    assert [f.ts_ns - SEC * 10**9 for f in frames] == [500_000_000, 0, 0, 1_000_000_000, 0]
    assert [f.linktype for f in frames] == [1, 1, 1, 228, 1]
    assert frames[4].interface_id == 1
    offsets = [0, 80 + 32, 80 + 32, 80 + 32 + 96, 80 + 32 + 96 + 40]
    assert [f.offset for f in frames] == offsets


def test_a_gap_and_its_record_survive_a_batch_of_one(tmp_path):
    p = tmp_path / "dag.erf"
    p.write_bytes(erf_record(frame(60, 1), lctr=3) + erf_record(frame(60, 2), lctr=2))
    with CaptureReader(p) as r:
        r.declare_losses()
        got = [(f.rflags, f.wire_len) for f in r.frames(batch=1)]
    assert got == [(16, 3), (0, 60), (16, 2), (0, 60)]


def test_erf_through_a_pipe_reads_the_same(tmp_path):
    data = b"".join(erf_record(frame(60 + i, i), lctr=i % 2) for i in range(50))
    (tmp_path / "dag.erf").write_bytes(data)
    want, _ = _frames(tmp_path / "dag.erf")
    rfd, wfd = os.pipe()
    t = threading.Thread(target=lambda: (os.write(wfd, data), os.close(wfd)))
    t.start()
    with stream_reader(rfd, b"", "pipe", "pipe") as r:
        r.declare_losses()
        got = list(r.frames())
    t.join()
    assert [(f.data, f.rflags, f.wire_len, f.ts_ns) for f in got] == [
        (f.data, f.rflags, f.wire_len, f.ts_ns) for f in want
    ]


def test_without_declared_losses_only_the_frames_are_read(tmp_path):
    p = tmp_path / "dag.erf"
    p.write_bytes(erf_record(frame(60, 1), lctr=3) + erf_record(frame(60, 2), lctr=2))
    frames, _ = _frames(p, losses=False)
    assert [(f.rflags, f.wire_len) for f in frames] == [(0, 60), (0, 60)]


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (erf_record(frame(60, 1), rlen=12), "corrupt ERF record at byte 80: length 12 below"),
        (erf_record(b"", rlen=16), "corrupt ERF record at byte 80: length 16 leaves no room"),
        (
            erf_record(b"", ext=[bytes(8)], rlen=20),
            "corrupt ERF record at byte 80: its extension headers run past",
        ),
        (erf_record(bytes(40), type_=3), "ERF record at byte 80 has type 3: only Ethernet"),
    ],
)
def test_a_bad_record_is_one_line_naming_file_and_offset(tmp_path, keydir, bad, says):
    p = tmp_path / "bad.erf"
    p.write_bytes(erf_record(frame(60, 1), wlen=64) + bad + erf_record(frame(60, 2)))
    rc, out, err = _capture(keydir, tmp_path, p)
    assert rc == 2 and f"{p}" in err and says in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_cut_last_record_is_a_truncation_warning(tmp_path):
    p = tmp_path / "cut.erf"
    whole = erf_record(frame(60, 1))
    p.write_bytes(whole + erf_record(frame(60, 2))[:50])
    frames, info = _frames(p)
    assert len(frames) == 1 and info.truncated and info.truncated_offset == len(whole)


def test_erf_capture_declares_the_losses_as_drops_and_verifies(tmp_path, keydir):
    p = tmp_path / "dag.erf"
    p.write_bytes(b"".join(erf_record(frame(60, i), lctr=3 if i == 5 else 0) for i in range(20)))
    rc, out, err = _capture(keydir, tmp_path, p, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["frames"] == 20 and doc["drops"] == 3, doc
    assert "DROPS: 3 frames were not digested (the capture declares them lost: ERF" in err, err
    rc, out, err = cli_in_process(
        "verify", tmp_path / "L", "--trust", keydir / "verifier.pub", "--json"
    )
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["frames"] == 20 and doc["drops_declared"] == 3, doc
    # recompute reads the frames alone and pairs them with the ledger's frame records
    rc, out, err = cli_in_process(
        "recompute",
        p,
        "--digest-key",
        keydir / "digest.key",
        "--ledger",
        tmp_path / "L",
        "--trust",
        keydir / "verifier.pub",
        "--json",
    )
    assert rc == 0, (out, err)


def test_a_text_file_is_not_taken_for_erf(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_bytes(b"ERF records are read by ledgertool\n" * 4)
    with pytest.raises(Exception, match="unknown magic"):
        CaptureReader(p)


ERF_ROWS = [r for r in corpus_rows() if r["format"].lower().startswith("erf")]


@needs_corpus
@pytest.mark.skipif(not ERF_ROWS, reason="the corpus has no ERF capture")
@pytest.mark.parametrize("row", ERF_ROWS, ids=lambda r: r["file"])
def test_corpus_erf_frame_counts_match_the_reference(row):
    with open_capture(CORPUS / "files" / row["file"]) as r:
        r.declare_losses()
        frames = list(r.frames())
    packets = [f for f in frames if not f.rflags & 16]
    assert len(packets) == int(row["records"])
    assert sum(f.caplen for f in packets) == int(row["caplen_sum"])
    if row.get("drops"):
        assert sum(f.wire_len for f in frames if f.rflags & 16) == int(row["drops"])


# ------------------------------------------------------------------ pcapng blocks wiretap stops at


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def _pcapng(*blocks: bytes) -> bytes:
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = _block(1, struct.pack("<HHI", 1, 0, 0))
    return shb + idb + b"".join(blocks)


def _epb(data: bytes, options: bytes = b"") -> bytes:
    pad = data + b"\0" * (-len(data) % 4)
    return _block(6, struct.pack("<IIIII", 0, 0, 0, len(data), len(data)) + pad + options)


@pytest.mark.parametrize(
    ("damaged", "says"),
    [
        (
            _epb(frame(60, 9), struct.pack("<HH", 1, 400) + b"abcd"),
            "damaged pcapng enhanced packet block at byte 140: option 1 of length 400 overruns",
        ),
        (
            _block(5, struct.pack("<II", 0, 0)),
            "damaged pcapng interface statistics block at byte 140: block length 20 below",
        ),
        (
            _block(5, struct.pack("<III", 0, 0, 0) + struct.pack("<HH", 2, 64) + bytes(8)),
            "damaged pcapng interface statistics block at byte 140: option 2 of length 64",
        ),
    ],
)
def test_pcapng_damaged_blocks_are_read_past_with_a_warning(tmp_path, keydir, damaged, says):
    p = tmp_path / "d.pcapng"
    p.write_bytes(_pcapng(_epb(frame(60, 1)), damaged, _epb(frame(60, 2)), _epb(frame(60, 3))))
    _, info = _frames(p)
    assert info.damaged_blocks == 1 and info.damage.startswith(says), info.damage
    rc, out, err = _capture(keydir, tmp_path, p, "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["frames"] == 3 + (damaged[0] == 6)
    assert any(says in w and str(p) in w and "tshark" in w for w in doc["warnings"]), doc


def test_pcapng_sound_options_give_no_warning(tmp_path):
    opt = struct.pack("<HH", 1, 5) + b"hello\0\0\0" + struct.pack("<HH", 0, 0)
    isb = _block(5, struct.pack("<III", 0, 0, 0) + opt)
    p = tmp_path / "ok.pcapng"
    p.write_bytes(_pcapng(_epb(frame(60, 1), opt), isb, _epb(frame(60, 2))))
    frames, info = _frames(p)
    assert len(frames) == 2 and info.damaged_blocks == 0 and info.damage == ""


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(st.integers(0, 31), st.integers(0, 2**16 - 1)), min_size=1, max_size=40),
    st.binary(min_size=1, max_size=2000),
)
def test_damaged_erf_never_crashes_and_frames_stay_inside_the_file(tmp_path, flips, tail):
    """Any bytes after a valid first record: reading ends with frames, a truncation or one error,
    and every frame's bytes lie inside its own record."""
    data = bytearray(erf_record(frame(60, 1)) + erf_record(frame(70, 2), lctr=1) + tail)
    for pos, val in flips:  # damage the second record's header and what follows
        at = 80 + pos * 3
        if at < len(data):
            data[at] = val & 0xFF
    p = tmp_path / "fuzz.erf"
    p.write_bytes(bytes(data))
    try:
        with CaptureReader(p) as r:
            r.declare_losses()
            frames = list(r.frames(batch=3))
    except CaptureFormatError as e:
        assert str(p) in str(e) and "\n" not in str(e)
        return
    offsets = [f.offset for f in frames]
    assert offsets == sorted(offsets) and all(o < len(data) for o in offsets)
    for f in frames:
        rlen = int.from_bytes(data[f.offset + 10 : f.offset + 12], "big")
        assert f.caplen <= rlen - 16 and f.offset + rlen <= len(data)
