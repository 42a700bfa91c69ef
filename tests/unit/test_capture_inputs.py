"""Inputs people have: compressed captures, standard input, pcap 2.0-2.3 length order,
strip-mode fallbacks counted and reported, and a corrupt capture reconciled up to where it stops.

Compressed files are made on the fly in tmp_path from the corpus (never committed); records are
compared byte for byte with those of the plain file."""

from __future__ import annotations

import gzip
import json
import lzma
import struct

import numpy as np
import pyarrow.parquet as pq
import pytest
import zstandard
from conftest import CORPUS, cli, needs_corpus
from ledger_files import sealed_table

from ledgertool.algorithms import get_algorithm, get_strip_mode
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.record import (
    FLAG_MALFORMED,
    FLAG_NON_IP,
    FLAG_UNSUPPORTED_LINKTYPE,
    record_dtype,
)
from ledgertool.errors import CaptureFormatError
from ledgertool.source import open_source
from ledgertool.source.file import CaptureReader

FILES = CORPUS / "files"
ALG = get_algorithm("siphash-1-3-128")
COMPRESS = {
    "gz": gzip.compress,
    "xz": lzma.compress,
    "zst": lambda d: zstandard.ZstdCompressor(write_checksum=True).compress(d),
}
# plain and cut pcap, pcapng of three sections in both byte orders, SPBs, a corrupt record header
SAMPLES = [
    "gopacket__le_test301.pcapng",
    "dpkt__truncated_dns_2.pcap",
    "pcapngtg__le_test202.pcapng",
    "pcapngtg__be_test010.pcapng",
    "sv__smtp-to-comma.pcap",
    "libpcap__Network_Join_Nokia_Mobile.pcap",
]


def engine_records(source, strip: str = "l3", workers: int = 1) -> tuple[bytes, str | None]:
    """Every record of `source` (key 0) and the read error that ended it, the file name left out."""
    out = []
    with open_source(source) as r:
        e = DigestEngine(r, ALG, get_strip_mode(strip), bytes(ALG.key_size), workers=workers)
        try:
            while True:
                rec, n, _ = e.fill(sum(len(b) for b in out) // e.record_size)
                if n == 0:
                    return b"".join(out), None
                out.append(bytes(rec))
        except CaptureFormatError as ex:
            return b"".join(out), str(ex).replace(str(source), "FILE")


def compressed(tmp_path, name: str, ext: str, cut: int | None = None):
    data = COMPRESS[ext]((FILES / name).read_bytes())
    path = tmp_path / f"{name}.{ext}"
    path.write_bytes(data[:cut] if cut else data)
    return path


@pytest.mark.parametrize("ext", COMPRESS)
@pytest.mark.parametrize("name", SAMPLES)
@needs_corpus
def test_compressed_capture_records_equal_decompressed(tmp_path, name, ext):
    plain = engine_records(FILES / name)
    got = engine_records(compressed(tmp_path, name, ext), workers=2)
    assert got == plain and len(plain[0]) > 0  # the records and the same corrupt-record message


@needs_corpus
def test_compression_is_found_by_magic_not_name(tmp_path):
    name = "gopacket__le_test301.pcapng"
    plain = engine_records(FILES / name)
    disguised = tmp_path / "capture.pcapng"  # gzip data under a capture's name
    disguised.write_bytes(gzip.compress((FILES / name).read_bytes()))
    misnamed = tmp_path / "capture.pcapng.gz"  # a plain capture under a compressed name
    misnamed.write_bytes((FILES / name).read_bytes())
    assert engine_records(disguised) == plain == engine_records(misnamed)
    with open_source(disguised) as r:
        assert (r.info().compression, r.info().frames) == ("gzip", 0)
    with open_source(misnamed) as r:
        assert r.info().compression == ""


@pytest.mark.parametrize("ext", COMPRESS)
@needs_corpus
def test_cut_compressed_capture_names_file_and_offset(tmp_path, ext):
    name = "gopacket__le_test301.pcapng"
    full = len(COMPRESS[ext]((FILES / name).read_bytes()))
    path = compressed(tmp_path, name, ext, cut=full // 2)
    recs, err = engine_records(path)
    plain, _ = engine_records(FILES / name)
    assert err is not None and err.startswith(
        f"FILE: {'gzip' if ext == 'gz' else 'xz' if ext == 'xz' else 'zstd'} "
        f"data cut short at compressed byte {full // 2} ("
    )
    # the frames before it, as decompressed
    assert 0 < len(recs) < len(plain) and plain.startswith(recs)


@needs_corpus
def test_corrupt_gzip_is_an_error_not_a_short_capture(tmp_path):
    path = compressed(tmp_path, "gopacket__le_test301.pcapng", "gz")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    recs, err = engine_records(path)
    assert err is not None and err.startswith(
        "FILE: gzip data corrupt at or before compressed byte "
    ), err


def _ledger_records(ledger) -> list:
    """Every record column of every sealed segment (raw record file or Parquet), in order."""
    return [
        sealed_table(ledger, int(p.name[4:12]), p.parent.name.removeprefix("link=")).to_pydict()
        for p in sorted(ledger.glob("link=*/seg-*.seal.json"))
    ]


@needs_corpus
def test_capture_of_cut_gzip_seals_frames_before_and_exits_2(tmp_path, keydir):
    name = "gopacket__le_test301.pcapng"
    size = len(gzip.compress((FILES / name).read_bytes()))
    path = compressed(tmp_path, name, "gz", cut=size // 2)
    r = cli(
        "capture",
        path,
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--segment-records",
        "50",
    )
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert (
        f"{path}: gzip data cut short at compressed byte {size // 2}" in line
        and "Traceback" not in r.stderr
    )
    sealed = int(line.split("; ")[-1].split(" frames before it were sealed")[0])
    whole = cli(
        "recompute",
        FILES / name,
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
        "--out",
        tmp_path / "whole.parquet",
    )
    assert whole.returncode == 0, whole.stderr
    assert 0 < sealed < pq.read_metadata(tmp_path / "whole.parquet").num_rows
    rec = cli(
        "recompute",
        path,
        "--digest-key",
        keydir / "digest.key",
        "--ledger",
        tmp_path / "L",
        "--trust",
        keydir / "verifier.pub",
        "--json",
    )
    doc = json.loads(rec.stdout)
    assert rec.returncode == 1 and (doc["matched"], doc["ledger_only"], doc["capture_only"]) == (
        sealed,
        0,
        0,
    )
    assert doc["complete"] is False and doc["stopped"]["offset"] == size // 2


@needs_corpus
def test_capture_of_compressed_file_equals_capture_of_plain(tmp_path, keydir):
    name = "gopacket__le_test301.pcapng"
    keys = [
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--segment-records",
        "100",
    ]
    for src, led in ((FILES / name, "P"), (compressed(tmp_path, name, "zst"), "Z")):
        r = cli("capture", src, "--ledger", tmp_path / led, *keys, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["frames"] == 276
    assert _ledger_records(tmp_path / "P") == _ledger_records(tmp_path / "Z") != []


# ---- streams longer than the reader's window (4 MiB), records across its edges ----


def _pcap(records: list[tuple[int, int, bytes]], snaplen: int = 65535, minor: int = 4) -> bytes:
    """A little-endian µs pcap of (caplen field, len field, data) records as stored."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, minor, 0, 0, snaplen, 1)]
    for i, (a, b, data) in enumerate(records):
        out.append(struct.pack("<IIII", 1_700_000_000 + i, i, a, b) + data)
    return b"".join(out)


# ---- pcap header versions 2.0-2.3: caplen and wire length in the old order ----


@pytest.mark.parametrize("minor", [0, 1, 2])
def test_pcap_before_2_3_swaps_caplen_and_wire_length(tmp_path, minor):
    """libpcap (sf-pcap.c) and wiretap (libpcap.c): below 2.3 the record header holds the
    original length first. A 60-byte frame of a 100-byte packet is stored as (100, 60)."""
    path = tmp_path / f"v2{minor}.pcap"
    frame = bytes(range(60))
    path.write_bytes(_pcap([(100, 60, frame), (42, 42, frame[:42])], minor=minor))
    with CaptureReader(path) as r:
        frames = list(r.frames())
        assert r.info().version == f"2.{minor}" and not r.info().truncated
    assert [(f.caplen, f.wire_len, f.data) for f in frames] == [
        (60, 100, frame),
        (42, 42, frame[:42]),
    ]


def test_pcap_2_3_swaps_only_where_caplen_exceeds_wire_length(tmp_path):
    path = tmp_path / "v23.pcap"
    frame = bytes(range(60))
    # old order (100, 60) -> swapped; new order (60, 100) as stored; equal lengths either way
    path.write_bytes(_pcap([(100, 60, frame), (60, 100, frame), (60, 60, frame)], minor=3))
    with CaptureReader(path) as r:
        assert [(f.caplen, f.wire_len) for f in r.frames()] == [(60, 100), (60, 100), (60, 60)]


def test_pcap_2_4_keeps_the_order_as_stored(tmp_path):
    path = tmp_path / "v24.pcap"
    path.write_bytes(_pcap([(60, 50, bytes(60))], minor=4))  # caplen > len: stored so, flagged
    with CaptureReader(path) as r:
        assert [(f.caplen, f.wire_len) for f in r.frames()] == [(60, 50)]


# ---- strip-mode fallbacks, counted by the engine and reported ----


def _flag_counts(parquet) -> dict:
    flags = pq.read_table(parquet).column("flags").to_numpy()
    return {
        "unsupported_linktype": int(((flags & FLAG_UNSUPPORTED_LINKTYPE) != 0).sum()),
        "non_ip": int(((flags & FLAG_NON_IP) != 0).sum()),
        "malformed": int(((flags & FLAG_MALFORMED) != 0).sum()),
    }


@pytest.mark.parametrize(
    "name,strip,expect",
    [
        ("libpcap__Network_Join_Nokia_Mobile.pcap", "l3", {"unsupported_linktype": 10}),  # 802.11
        ("tcpreplay__test.pcap", "l3", {"non_ip": 19}),  # Ethernet: ARP and others among IP
        ("tcpdump__bgp_vpn_rt-oobr.pcap", "payload", {"malformed": 37}),  # TCP headers cut
    ],
)
@needs_corpus
def test_strip_fallbacks_counted_and_reported(tmp_path, keydir, name, strip, expect):
    out = tmp_path / "d.parquet"
    r = cli(
        "recompute",
        FILES / name,
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        strip,
        "--out",
        out,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)["strip_fallbacks"]
    counts = _flag_counts(out)  # the record flags say which frames fell back
    assert doc == {"total": sum(counts.values()), **counts} and doc["total"] > 0
    if expect:
        assert {k: v for k, v in counts.items() if v} == expect
    c = cli(
        "capture",
        FILES / name,
        "--ledger",
        tmp_path / "L",
        "--strip",
        strip,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--workers",
        "2",
        "--json",
    )
    assert c.returncode == 0, c.stderr
    assert json.loads(c.stdout)["strip_fallbacks"] == doc
    text = cli(
        "recompute",
        FILES / name,
        "--digest-key",
        keydir / "digest.key",
        "--ledger",
        tmp_path / "L",
        "--trust",
        keydir / "verifier.pub",
    )
    assert text.returncode == 0, text.stderr
    assert f"strip {strip} fell back on {doc['total']} of " in text.stdout


@needs_corpus
def test_strip_frame_never_falls_back(tmp_path, keydir):
    c = cli(
        "capture",
        FILES / "libpcap__Network_Join_Nokia_Mobile.pcap",
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    assert c.returncode == 0 and "fell back" not in c.stdout, c.stdout


@needs_corpus
def test_engine_counts_fallbacks_across_workers(tmp_path):
    with CaptureReader(FILES / "tcpreplay__test.pcap") as r:  # 179 frames, 19 not IP; x 30
        frames = [(f.caplen, f.wire_len, f.data) for f in r.frames()] * 30
    path = tmp_path / "many.pcap"
    path.write_bytes(_pcap(frames))
    totals = []
    for workers in (1, 3):  # passes of 4096 frames in chunks of 2048 on several threads
        with open_source(path) as r:
            e = DigestEngine(
                r, ALG, get_strip_mode("payload"), bytes(16), workers=workers, batch=4096
            )
            seq, recs = 0, []
            while (got := e.fill(seq))[1]:
                recs.append(np.frombuffer(got[0], dtype=record_dtype(16)).copy())
                seq += got[1]
            totals.append(e.strip_fallbacks())
        flags = np.concatenate(recs)["flags"]
    assert (
        totals[0] == totals[1]
        and totals[0].non_ip == int(((flags & FLAG_NON_IP) != 0).sum()) == 19 * 30
    )


# ---- a corrupt capture: recompute reconciles what was read and says where it stopped ----


@needs_corpus
def test_recompute_reconciles_a_corrupt_capture_up_to_where_it_stops(tmp_path, keydir):
    # a corrupt record header at byte 3695, 18 frames before it
    src = FILES / "sv__smtp-to-comma.pcap"
    c = cli(
        "capture",
        src,
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    assert c.returncode == 2 and "18 frames before it were sealed" in c.stderr, c.stderr
    r = cli(
        "recompute",
        src,
        "--digest-key",
        keydir / "digest.key",
        "--ledger",
        tmp_path / "L",
        "--trust",
        keydir / "verifier.pub",
        "--json",
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["matched"], doc["ledger_only"], doc["capture_only"], doc["matches"]) == (
        18,
        0,
        0,
        True,
    )
    assert doc["ok"] is False and doc["complete"] is False
    assert doc["stopped"]["file"] == str(src) and doc["stopped"]["offset"] == 3695
    assert "corrupt record header at byte 3695" in doc["stopped"]["message"]
    text = cli(
        "recompute",
        src,
        "--digest-key",
        keydir / "digest.key",
        "--ledger",
        tmp_path / "L",
        "--trust",
        keydir / "verifier.pub",
    )
    assert text.returncode == 1 and "(INCOMPLETE: the capture stopped early)" in text.stdout
    assert "warning: INCOMPLETE: " in text.stderr and "byte 3695" in text.stderr
    out = tmp_path / "d.parquet"
    o = cli(
        "recompute",
        src,
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
        "--out",
        out,
        "--json",
    )
    assert o.returncode == 2 and pq.read_metadata(out).num_rows == 18
    assert json.loads(o.stdout)["stopped"]["offset"] == 3695
    assert (
        o.stderr.strip()
        .splitlines()[-1]
        .endswith("the 18 frames before it were written to " + str(out))
    )
