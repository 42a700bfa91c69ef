"""recompute --cluster cuts a large pcapng file into chunks before packet blocks,
each chunk read behind the section header and interface descriptions in force where it starts:
on every pcapng file of the corpus (multi-section, mixed byte order, interfaces added mid-section,
126 interfaces, SPB, obsolete PB, truncated and corrupt ones included), cut as finely as the cutter
goes, the chunks' frames and digests, in order, are the whole file's, and the chunks stop where
the whole file stops, with the same message; a split pcapng recompute on a LocalCluster gives the
single-machine report."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import CORPUS, corpus_rows, load_keys, needs_corpus

pytest.importorskip("distributed")

from test_recompute_cluster import _same, case, client  # noqa: E402,F401  (the two-link ledger, a LocalCluster)

from ledgertool.algorithms import get_algorithm  # noqa: E402
from ledgertool.digest.reference import read_pcap  # noqa: E402
from ledgertool.errors import CaptureFormatError  # noqa: E402
from ledgertool.reconcile.cluster import (
    CaptureChunk,
    _chunk_reader,
    digest_chunk,
    plan_chunks,  # noqa: E402
    reconcile_on_cluster,
)
from ledgertool.reconcile.recompute import reconcile  # noqa: E402

PCAPNGS = [
    CORPUS / "files" / r["file"] for r in corpus_rows() if r["format"].startswith("pcapng")
] + [
    CORPUS / "derived" / r["file"]
    for r in corpus_rows("derived_manifest.csv")
    if r["format"].startswith("pcapng")
]


def _frames(reader) -> list[tuple]:
    """Every frame's fields but its offset (a chunk's own), and where reading ended."""
    out = []
    try:
        for f in reader.frames():
            out.append(
                (f.ts_ns, f.caplen, f.wire_len, f.linktype, f.interface_id, f.rflags, f.data)
            )
    except CaptureFormatError as e:
        return out + [("stop", e.offset, str(e))]
    return out


def _check_split(path: str, subkey: bytes, splits=(64, 200)) -> None:
    """`path` cut every `splits` bytes reads and digests as the whole file does."""
    alg = get_algorithm("siphash-1-3-128")
    try:
        whole_run, (whole,) = digest_chunk(CaptureChunk(path), subkey, alg.name, "frame", 1)
    except CaptureFormatError as e:  # not openable: the cutter refuses it the same way
        with pytest.raises(CaptureFormatError, match="^" + re.escape(str(e)) + "$"):
            plan_chunks([path], split_bytes=64)
        return
    with _chunk_reader(CaptureChunk(path)) as r:
        whole_frames = _frames(r)
    for split in splits:
        chunks, stop = plan_chunks([path], split_bytes=split)
        runs, parts, frames = [], [], []
        for c in chunks:
            r, (arr,) = digest_chunk(c, subkey, alg.name, "frame", 1)
            assert r.stopped is None  # every block of a cut chunk was read well by the client
            arr = arr.copy()
            arr["seq"] += np.uint64(sum(x.frames for x in runs))
            runs.append(r)
            parts.append(arr)
            with _chunk_reader(c) as reader:
                frames += _frames(reader)
        got = np.concatenate(parts) if parts else whole[:0]
        assert sum(r.frames for r in runs) == whole_run.frames == len(whole)
        assert got.tobytes() == whole.tobytes()
        assert frames + ([("stop", stop.offset, stop.message)] if stop else []) == whole_frames
        assert stop == whole_run.stopped
        assert [w for r in runs for w in r.warnings] == list(whole_run.warnings)
        if whole_run.frames > 1 and split == 64:  # cut finely: a chunk per packet block
            assert len(chunks) == whole_run.frames and all(
                a.end == b.start for a, b in zip(chunks, chunks[1:])
            )
            assert chunks[0].start == 0 and chunks[0].head == () and all(c.head for c in chunks[1:])


@needs_corpus
@pytest.mark.parametrize("path", PCAPNGS, ids=lambda p: p.name)
def test_split_pcapng_digests_equal_the_whole_file(path, keydir):
    alg = get_algorithm("siphash-1-3-128")
    _check_split(str(path), load_keys(keydir)[0].subkey(alg.name, alg.key_size))


@needs_corpus
def test_split_pcapng_cut_short_or_corrupt_anywhere(keydir, tmp_path):
    """Three sections (BE, LE, BE; SPB, ISB, NRB and custom blocks) cut short at every 4th byte,
    and with a 13 written over every 8th byte (in either byte order: a block length no block may
    have, an undefined interface, a caplen that overruns its block, a length past the end...):
    the split run ends where the whole file ends, with the same message and note."""
    alg = get_algorithm("siphash-1-3-128")
    subkey = load_keys(keydir)[0].subkey(alg.name, alg.key_size)
    raw = (CORPUS / "files" / "pcapngtg__be_test202.pcapng").read_bytes()
    f = tmp_path / "test202.pcapng"
    for at in range(4, len(raw), 4):
        f.write_bytes(raw[:at])
        _check_split(str(f), subkey, (64,))
        if at % 8 == 0:
            f.write_bytes(raw[:at] + struct.pack("<>"[at // 8 % 2] + "I", 13) + raw[at + 4 :])
            _check_split(str(f), subkey, (64,))


@needs_corpus
def test_corpus_has_the_hard_pcapng_cases():
    """The sweep above covers a later section's own header and byte order, and interfaces added
    after the section's first packet (what a chunk's head must carry)."""
    chunks, _ = plan_chunks([CORPUS / "files" / "pcapngtg__le_test202.pcapng"], split_bytes=64)
    # three sections, each chunk behind its own SHB
    assert len({c.head[0][0] for c in chunks[1:]}) == 3
    chunks, _ = plan_chunks([CORPUS / "files" / "pcapngtg__le_test005.pcapng"], split_bytes=64)
    # SHB, IDB 0, EPB, IDB 1, 3 EPBs: behind every later chunk the SHB with IDB 0, and IDB 1 (the
    # first EPB between them)
    assert [len(c.head) for c in chunks] == [0, 2, 2, 2] and chunks[1].head[1][0] > sum(
        chunks[1].head[0]
    )
    chunks, _ = plan_chunks(
        [CORPUS / "files" / "zeek__ldap_gap-data-missing.pcapng"], split_bytes=64
    )
    assert all(c.head[0][1] > 126 * 20 for c in chunks[1:])  # the SHB and all 126 IDBs, one range


def _block(e: str, btype: int, body: bytes) -> bytes:
    body += bytes(-len(body) % 4)
    return (
        struct.pack(e + "II", btype, 12 + len(body)) + body + struct.pack(e + "I", 12 + len(body))
    )


def _option(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def write_pcapng(path: Path, frames: list[tuple[int, int, bytes]]) -> list[tuple[int, str]]:
    """`frames` (ts_ns, wire_len, bytes) as pcapng, written independently of the reader: a
    little-endian section (one ns interface) with the first third, then a big-endian one whose
    interface 1 (ns, if_tsoffset 1000 s) is described after its first packet and carries every
    other frame of the rest, interface 0 the others, an NRB in between. Returns each EPB's offset
    and byte order (struct's "<" or ">")."""
    epbs = []
    out = bytearray()
    third = len(frames) // 3
    for e, part in (("<", frames[:third]), (">", frames[third:])):
        out += _block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))
        out += _block(
            e, 1, struct.pack(e + "HHI", 1, 0, 262144) + _option(e, 9, b"\x09") + _option(e, 0, b"")
        )
        for i, (ts, wire, data) in enumerate(part):
            ifid = i % 2 if e == ">" and i else 0
            if e == ">" and i == 1:
                out += _block(
                    e,
                    1,
                    struct.pack(e + "HHI", 1, 0, 0)
                    + _option(e, 9, b"\x09")
                    + _option(e, 14, struct.pack(e + "q", 1000))
                    + _option(e, 0, b""),
                )
                out += _block(e, 4, _option(e, 0, b""))  # an (empty) name resolution block
            epbs.append((len(out), e))
            t = ts - (1000 * 10**9 if ifid == 1 else 0)
            out += _block(
                e,
                6,
                struct.pack(e + "IIIII", ifid, t >> 32, t & 0xFFFFFFFF, len(data), wire) + data,
            )
    path.write_bytes(bytes(out))
    return epbs


def test_split_pcapng_report_and_details_equal_single_machine(case, client, tmp_path):
    d, dk, trust = case
    ng = tmp_path / "b.pcapng"
    epbs = write_pcapng(
        ng, [(ts, wire, data) for ts, _cap, wire, data in read_pcap((d / "b.pcap").read_bytes())]
    )
    details = tmp_path / "details.jsonl"
    want = reconcile(ng, d / "ledger", dk, trust=trust, details=details, examples=3)
    want_details = details.read_text()
    pcap = reconcile(d / "b.pcap", d / "ledger", dk, trust=trust, examples=3)  # the same frames
    assert (
        (want.ledger_only, want.capture_only, want.matched)
        == (pcap.ledger_only, pcap.capture_only, pcap.matched)
        == (5, 3, 294 - 5)
    )
    chunks, stop = plan_chunks([ng], split_bytes=4096)
    assert (
        stop is None
        and len(chunks) > 5
        and all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    )
    details.unlink()
    got = reconcile_on_cluster(
        client,
        ng,
        d / "ledger",
        dk,
        trust=trust,
        details=details,
        examples=3,
        split_bytes=4096,
        parts=5,
    )
    _same(want, got)
    assert details.read_text() == want_details and len(want_details.splitlines()) == 8
    # cut short inside a packet block of the second section: the same warning, every whole frame
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(ng.read_bytes()[:-7])
    want = reconcile(cut, d / "ledger", dk, trust=trust)
    assert want.warnings and "truncated" in want.warnings[0]
    _same(want, reconcile_on_cluster(client, cut, d / "ledger", dk, trust=trust, split_bytes=4096))
    # a corrupt block length in the second section: reconciled up to it, the same stop
    raw = bytearray(ng.read_bytes())
    pos, e = epbs[len(epbs) * 2 // 3]
    raw[pos + 4 : pos + 8] = struct.pack(e + "I", 13)  # not a multiple of 4
    bad = tmp_path / "bad.pcapng"
    bad.write_bytes(bytes(raw))
    want = reconcile(bad, d / "ledger", dk, trust=trust)
    assert (
        not want.complete
        and want.capture.stopped.offset == pos
        and want.frames == len(epbs) * 2 // 3
    )
    for split in (4096, 1 << 30):
        _same(
            want,
            reconcile_on_cluster(client, bad, d / "ledger", dk, trust=trust, split_bytes=split),
        )


@needs_corpus
def test_native_pause_and_context_on_a_known_layout():
    """lt_reader_next_before / lt_reader_pcapng_context against block offsets walked here from
    the lengths in the file (le_test005: SHB, IDB 0, EPB, IDB 1, 3 EPBs)."""
    from ledgertool._binding import ffi, lib
    from ledgertool.source.file import CaptureReader

    path = CORPUS / "files" / "pcapngtg__le_test005.pcapng"
    raw, blocks, pos = path.read_bytes(), [], 0
    while pos < len(raw):
        btype, blen = struct.unpack_from("<II", raw, pos)
        blocks.append((btype, pos, blen))
        pos += blen
    assert [b[0] for b in blocks] == [0x0A0D0D0A, 1, 6, 1, 6, 6, 6]
    (_, shb, shb_len), (_, idb0, idb0_len), (_, epb0, _), (_, idb1, idb1_len), (_, epb1, _) = (
        blocks[:5]
    )
    buf, n, paused = ffi.new("lt_frame[]", 16), ffi.new("size_t *"), ffi.new("int *")
    ranges, nxt = ffi.new("uint64_t[]", 16), ffi.new("uint64_t *")

    def context():
        assert lib.lt_reader_pcapng_context(h, ranges, 8, n, nxt) == lib.LT_OK
        return [(ranges[2 * i], ranges[2 * i + 1]) for i in range(n[0])], nxt[0]

    with CaptureReader(str(path)) as r:
        h = r.handle
        for _ in range(2):  # the same `before` pauses at the same block again
            assert lib.lt_reader_next_before(h, buf, 16, 0, n, paused) == lib.LT_OK and (
                n[0],
                paused[0],
            ) == (0, 1)
            assert context() == ([(shb, shb_len), (idb0, idb0_len)], epb0)
        assert lib.lt_reader_next_before(h, buf, 16, epb0 + 1, n, paused) == lib.LT_OK and (
            n[0],
            paused[0],
        ) == (1, 1)
        assert buf[0].offset == epb0
        assert context() == ([(shb, shb_len), (idb0, idb0_len), (idb1, idb1_len)], epb1)
        assert lib.lt_reader_pcapng_context(h, ranges, 2, n, nxt) == lib.LT_ERR_ARG and (
            n[0],
            nxt[0],
        ) == (3, epb1)
        assert lib.lt_reader_next_before(h, buf, 16, 1 << 40, n, paused) == lib.LT_OK and (
            n[0],
            paused[0],
        ) == (3, 0)
        assert lib.lt_reader_next_before(h, buf, 16, 1 << 40, n, paused) == lib.LT_EOF and n[0] == 0
        assert context()[1] == len(raw)
    pcap = next(
        CORPUS / "files" / x["file"] for x in corpus_rows() if x["format"].startswith("pcap ")
    )
    with CaptureReader(str(pcap)) as r:
        h = r.handle
        assert lib.lt_reader_next_before(h, buf, 16, 0, n, paused) == lib.LT_ERR_ARG
        assert lib.lt_reader_pcapng_context(h, ranges, 8, n, nxt) == lib.LT_ERR_ARG and n[0] == 0
