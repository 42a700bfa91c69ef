"""Native capture reader (native/src/reader.c): the real corpus + crafted bytes + fuzzing.

Build the extension first: `python native/build_ffi.py` (in-place ledgertool/_native*.so).
The corpus is read from $LEDGERTOOL_CORPUS (default: <repo>/../shared/corpus); corpus tests
skip with a reason when it is absent. Corpus files are never copied into the repo.

Where our documented policy (header comment of native/src/reader.c) deliberately differs from
the reference facts of the corpus (tshark, or libpcap where the manifest says so), the
difference is written down in the tables below, each with its reason; nothing is skipped
silently: every corpus file whose reference run reported an error or truncation must appear in
ENDINGS or CLEAN_DESPITE_REFERENCE_ERROR.
"""

from __future__ import annotations

import csv
import hashlib
import os
import random
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgertool._binding import ffi, lib  # an unbuilt extension is an error, not a skip

CORPUS = Path(os.environ.get("LEDGERTOOL_CORPUS", REPO.parent / "shared" / "corpus"))
HAVE_CORPUS = (CORPUS / "manifest.csv").is_file()
needs_corpus = pytest.mark.skipif(
    not HAVE_CORPUS, reason=f"capture corpus not found at {CORPUS} (set LEDGERTOOL_CORPUS)"
)

OK, EOF = lib.LT_OK, lib.LT_EOF
E_FORMAT, E_CORRUPT = lib.LT_ERR_FORMAT, lib.LT_ERR_CORRUPT
RF_NO_TS, RF_GT_SNAP, RF_GT_WIRE, RF_BE = (
    lib.LT_RF_NO_TIMESTAMP,
    lib.LT_RF_CAPLEN_GT_SNAPLEN,
    lib.LT_RF_CAPLEN_GT_WIRELEN,
    lib.LT_RF_BIG_ENDIAN,
)


# ----------------------------------------------------------------------------- reading helper


@dataclass
class Frame:
    offset: int
    caplen: int
    wire_len: int
    ts_ns: int
    linktype: int
    interface_id: int
    rflags: int
    section: int
    data: bytes
    ptr: int  # address of data (to check it lies inside the map)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class Result:
    open_status: int
    open_message: str = ""
    status: int | None = None  # last lt_reader_next status (EOF or an error)
    frames: list[Frame] = field(default_factory=list)
    info: dict | None = None


INFO_FIELDS = (
    "format",
    "version_major",
    "version_minor",
    "snaplen",
    "linktype",
    "sections",
    "interfaces",
    "file_size",
    "frames",
    "skipped_blocks",
    "truncated",
    "truncated_offset",
    "truncated_bytes",
    "error",
    "error_offset",
)


def read_capture(path: os.PathLike | str, batch: int = 64) -> Result:
    err = ffi.new("char[256]")
    pr = ffi.new("lt_reader **")
    st = lib.lt_reader_open(os.fsencode(path), pr, err, 256)
    if st != OK:
        assert pr[0] == ffi.NULL
        return Result(open_status=st, open_message=ffi.string(err).decode())
    r = pr[0]
    res = Result(open_status=OK)
    arr = ffi.new("lt_frame[]", batch)
    n = ffi.new("size_t *")
    try:
        while True:
            st = lib.lt_reader_next(r, arr, batch, n)
            if st == OK:
                assert 0 < n[0] <= batch
            else:
                assert n[0] == 0
            for i in range(n[0]):
                f = arr[i]
                res.frames.append(
                    Frame(
                        f.offset,
                        f.caplen,
                        f.wire_len,
                        f.ts_ns,
                        f.linktype,
                        f.interface_id,
                        f.rflags,
                        f.section,
                        bytes(ffi.buffer(f.data, f.caplen)),
                        int(ffi.cast("uintptr_t", f.data)),
                    )
                )
            if st != OK:
                res.status = st
                # the end is sticky
                assert lib.lt_reader_next(r, arr, batch, n) == st and n[0] == 0
                break
        info = ffi.new("lt_reader_info *")
        lib.lt_reader_get_info(r, info)
        res.info = {k: getattr(info, k) for k in INFO_FIELDS}
        res.info["message"] = ffi.string(info.message).decode()
    finally:
        lib.lt_reader_close(r)
    return res


def read_bytes(tmp_path: Path, blob: bytes, name: str = "cap.bin", batch: int = 64) -> Result:
    p = tmp_path / name
    p.write_bytes(blob)
    return read_capture(p, batch)


# ----------------------------------------------------------------------------- corpus tables


def _csv(name: str) -> list[dict]:
    if not HAVE_CORPUS:
        return []
    with open(CORPUS / name, newline="") as fh:
        return list(csv.DictReader(fh))


MANIFEST = [(r, CORPUS / "files" / r["file"]) for r in _csv("manifest.csv")] + [
    (r, CORPUS / "derived" / r["file"]) for r in _csv("derived_manifest.csv")
]
FRAMES_FIRST = _csv("frames_sha256.csv") + _csv("derived_frames_sha256.csv")
FRAMES_ALL = _csv("frames_all.csv") + _csv("derived_frames_all.csv")

# How reading ends where it does not end cleanly. ("open", status) = lt_reader_open fails;
# ("next", status, offset, truncated_bytes) = frames then an error (offset = error_offset) or a
# truncated tail (status EOF, offset = truncated_offset).
ENDINGS: dict[str, tuple] = {
    # truncated tails: whole records kept, cut reported
    "dpkt__truncated_dns_2.pcap": ("next", EOF, 240, 7),  # 7 of 16 header bytes
    "scapy__bad_rsn_parsing_overrides_ssid.pcap": ("next", EOF, 359, 1),
    "derived__cut_mid_record_header.pcap": ("next", EOF, 71728, 9),
    "derived__cut_mid_record_data.pcap": (
        "next",
        EOF,
        71728,
        60,
    ),  # caplen 144 <= snaplen: a cut packet
    "derived__cut_mid_epb.pcapng": ("next", EOF, 1132, 176),  # EPB of 216 bytes, 176 present
    # corrupt record headers (caplen beyond both snaplen/262144 and the file): error after the good
    # frames
    "sv__bug-1450-04_tls_DER-incomplete-header.pcap": ("next", E_CORRUPT, 5035, None),
    "sv__bug-6875-01_fuzz.pcap": ("next", E_CORRUPT, 228, None),
    "sv__smtp-to-comma.pcap": ("next", E_CORRUPT, 3695, None),
    "derived__cat_two_pcaps.pcap": ("next", E_CORRUPT, 636, None),
    "derived__huge_caplen.pcap": ("next", E_CORRUPT, 24, None),
    # pcapng structure
    "derived__trailing_zeros.pcapng": ("next", E_CORRUPT, 560, None),  # block length 0 < 12
    "pythonpcapng__test006.ntar": ("next", E_CORRUPT, 96, None),  # length 167, not a multiple of 4
    "gopacket__be_test901.pcapng": ("next", E_FORMAT, 480, None),  # 2nd section is SHB v2.0
    "gopacket__le_test901.pcapng": ("next", E_FORMAT, 480, None),
    "libpcap__shb-option-too-long.pcapng": ("open", E_CORRUPT),  # SHB trailer != header length
    # versions / not a capture
    "libpcap__pcap-invalid-version-1.pcap": ("open", E_FORMAT),  # pcap 1.4: only major 2 is read
    "libpcap__pcapng-invalid-vers-1.pcapng": ("open", E_FORMAT),  # SHB 0.1
    "libpcap__pcapng-invalid-vers-2.pcapng": ("open", E_FORMAT),  # SHB 1.1 (1.0 and 1.2 accepted)
    "rusticata__err-eof.bin": ("open", E_FORMAT),  # starts with an EPB: unknown magic
    "derived__zero_bytes.pcap": ("open", E_FORMAT),  # empty file is an error, not 0 frames
    "derived__short_global_header.pcap": ("open", E_CORRUPT),  # pcap magic, 10 of 24 header bytes
}

# Files whose reference run reported an error, but which we read to a clean end, and why.
CLEAN_DESPITE_REFERENCE_ERROR: dict[str, str] = {
    "libpcap__brcm-tag-stp.pcap": "wiretap 4.0 does not know link type 281; we read every type",
    "tcpdump__vtp_asan.pcap": "wiretap 4.0 does not know link type 182; we read every link type",
    "libpcap__linktype-reserved-field-not-zero.pcap": "link type field masked to 16 bits (header "
    "only, 0 frames)",
    "libpcap__pcap-invalid-version-2.pcap": "pcap 2.5: major 2 accepted like wiretap (libpcap "
    "rejects)",
    "pcapngtg__be_test202.pcapng": "libpcap refuses IDBs of different link types; we do not",
    "pcapngtg__le_test202.pcapng": "libpcap refuses IDBs of different link types; we do not",
    "pcapngtg__le_test006.pcapng": "libpcap refuses IDBs of different link types; we do not",
    "pcapngtg__le_test100.pcapng": "libpcap refuses IDBs of different link types; we do not",
    "pcapngtg__le_test101.pcapng": "libpcap refuses IDBs of different link types; we do not",
    "pcapngtg__le_test102.pcapng": "libpcap refuses IDBs of different link types; we do not",
    "pcapngtg__le_test201.pcapng": "libpcap refuses IDBs of different link types; we do not",
    "pcapngtg__le_test005.pcapng": "libpcap refuses IDBs of different snaplens; we do not",
    "pcapngtg__le_test008.pcapng": "libpcap refuses IDBs of different snaplens; we do not",
    "pcapngtg__le_test200.pcapng": "libpcap refuses IDBs of different snaplens; we do not",
    "zeek__ldap_gap-data-missing.pcapng": "libpcap refuses IDBs of different snaplens; we do not",
    "pcapngtg__le_test002.pcapng": "libpcap wants an IDB; an SHB-only file is 0 frames for us",
    "pcapngtg__le_test017.pcapng": "libpcap wants an IDB; SHB + custom blocks is 0 frames for us",
    "pythonpcapng__test003.ntar": "libpcap does not know link type 1240; we read every link type",
    "pythonpcapng__test008.ntar": "libpcap does not know link type 1240; we read every link type",
    "pythonpcapng__test006-fixed.ntar": "libpcap maps IDB link type 2 to nothing; we read every "
    "link type",
}

# Record totals where our policy gives a different answer than the manifest: file -> (records,
# caplen_sum, origlen_sum, reason).
COUNT_DIFFERS: dict[str, tuple[int, int, int, str]] = {
    "pythonpcapng__test006.ntar": (
        0,
        0,
        0,
        "its Packet Block length is 167, not a multiple of 4: policy is LT_ERR_CORRUPT at byte 96 "
        "(wiretap tolerates the missing pad byte; dpkt and python-pcapng fail as well)",
    ),
}

# Single frame fields where our policy differs from the reference: (file, 1-based index) -> fields.
FRAME_DIFFERS: dict[tuple[str, int], tuple[dict, str]] = {
    ("tcpdump__timestamp_invalid_micro.pcap", 3): (
        {"ts_ns": 1418145370 * 10**9 + 0x80000000 * 1000},
        "fraction field 0x80000000 µs: policy sec*1e9 + fraction*1000 (corpus README); wiretap "
        "multiplies by 1000 in 32 bits (2^31*1000 mod 2^32 = 0), and this reference row was not "
        "recomputed",
    ),
}

# Files where libpcap hands over different bytes (caplen > snaplen): we follow wiretap (full
# caplen).
LIBPCAP_CAPLEN_FILES = {
    "tcpdump__802_15_4-oobr-1.pcap",
    "tcpdump__slip-compressed_sl_print-oobr.pcap",
    "tcpdump__bootp_asan.pcap",
    "tcpdump__ipv6_missing_jumbo_payload_option.pcap",
    "zeek__trunc_trunc-hdr.pcap",
}


def _expected_format(fmt: str) -> int | None:
    if fmt.startswith("pcapng"):
        return lib.LT_FMT_PCAPNG
    if fmt.startswith("pcap-modified"):
        return lib.LT_FMT_PCAP_MODIFIED
    if fmt.startswith("pcap") and "nsec" in fmt:
        return lib.LT_FMT_PCAP_NS
    if fmt.startswith("pcap") and "usec" in fmt:
        return lib.LT_FMT_PCAP_US
    return None


def _section_orders(fmt: str) -> list[bool]:
    """'pcap BE usec v2.4' -> [True]; 'pcapng LE+BE(v2.0)+LE' -> [False, True, False]."""
    parts = fmt.split()[1].split("+")
    return [p.startswith("BE") for p in parts]


_cache: dict[str, Result] = {}


def _read_cached(path: Path) -> Result:
    key = str(path)
    if key not in _cache:
        _cache[key] = read_capture(path)
    return _cache[key]


def _frames_by_file(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["file"], []).append(row)
    return out


def _expected_frame(row: dict) -> dict:
    exp = {
        "caplen": int(row["caplen"]),
        "wire_len": int(row["origlen"]),
        "ts_ns": int(row["ts_ns"]) if row["ts_ns"] else 0,
        "sha256": row["sha256"],
    }
    if row["interface_id"]:
        exp["interface_id"] = int(row["interface_id"])
    override = FRAME_DIFFERS.get((row["file"], int(row["index"])))
    if override:
        exp.update(override[0])
    return exp


def _actual_frame(f: Frame, keys) -> dict:
    d = {
        "caplen": f.caplen,
        "wire_len": f.wire_len,
        "ts_ns": f.ts_ns,
        "sha256": f.sha256,
        "interface_id": f.interface_id,
    }
    return {k: d[k] for k in keys}


# ----------------------------------------------------------------------------- corpus tests


@needs_corpus
def test_corpus_tables_are_consistent():
    names = {row["file"] for row, _ in MANIFEST}
    assert len(names) == 129, "expected the 120 real + 9 derived corpus files"
    for table in (ENDINGS, CLEAN_DESPITE_REFERENCE_ERROR, COUNT_DIFFERS, LIBPCAP_CAPLEN_FILES):
        assert set(table) <= names
    assert not set(ENDINGS) & set(CLEAN_DESPITE_REFERENCE_ERROR)
    # every reference error/truncation is accounted for: no silent skips
    flagged = {row["file"] for row, _ in MANIFEST if row["truncated_or_error"]}
    assert flagged == set(ENDINGS) | set(CLEAN_DESPITE_REFERENCE_ERROR)
    for (name, _), _ in FRAME_DIFFERS.items():
        assert name in names


@needs_corpus
@pytest.mark.parametrize("row,path", MANIFEST, ids=[r["file"] for r, _ in MANIFEST])
def test_corpus_file_matches_manifest(row, path):
    name = row["file"]
    res = _read_cached(path)
    ending = ENDINGS.get(name)

    if ending and ending[0] == "open":
        assert res.open_status == ending[1], res.open_message
        assert name in res.open_message  # the message names the file
        assert res.open_message.count("\n") == 0
        assert int(row["records"]) == 0 or name in COUNT_DIFFERS
        return
    assert res.open_status == OK, res.open_message

    # totals
    records, caplen_sum, origlen_sum = (
        int(row["records"]),
        int(row["caplen_sum"]),
        int(row["origlen_sum"]),
    )
    if name in COUNT_DIFFERS:
        records, caplen_sum, origlen_sum, _reason = COUNT_DIFFERS[name]
    assert len(res.frames) == records
    assert sum(f.caplen for f in res.frames) == caplen_sum
    assert sum(f.wire_len for f in res.frames) == origlen_sum
    assert res.info["frames"] == records

    # format, version, byte order per section
    fmt = row["format"]
    assert res.info["format"] == _expected_format(fmt)
    m = re.search(r" v(\d+)\.(\d+)$", fmt)  # pcap header version
    if m:
        major, minor = m.groups()
        assert (res.info["version_major"], res.info["version_minor"]) == (int(major), int(minor))
    orders = _section_orders(fmt)
    for f in res.frames:
        assert bool(f.rflags & RF_BE) == orders[f.section], (f.section, fmt)
        if res.info["format"] != lib.LT_FMT_PCAPNG:
            assert f.section == 0 and f.interface_id == 0
    if res.info["format"] == lib.LT_FMT_PCAPNG:
        assert res.info["sections"] >= 1
        if res.frames:
            assert max(f.section for f in res.frames) < len(orders)

    # link types: every frame's link type is one the manifest lists
    lts = {int(tok.split("(")[0]) for tok in row["linktypes"].split(" [")[0].split(";") if tok}
    for f in res.frames:
        assert f.linktype in lts
    if res.info["format"] != lib.LT_FMT_PCAPNG and lts:
        assert res.info["linktype"] in lts

    # how reading ended
    info = res.info
    if ending is None:
        assert res.status == EOF and not info["truncated"] and info["error"] == 0, info["message"]
        assert info["message"] == ""
    else:
        _, status, offset, tbytes = ending
        assert res.status == status, info["message"]
        assert str(offset) in info["message"]
        if status == EOF:
            assert info["truncated"] == 1 and info["error"] == 0
            assert (info["truncated_offset"], info["truncated_bytes"]) == (offset, tbytes)
            assert offset + tbytes == info["file_size"]
        else:
            assert (
                info["error"] == status and info["error_offset"] == offset and not info["truncated"]
            )
        # frames before the end are all there and lie before it
        assert all(f.offset < offset for f in res.frames)


@needs_corpus
@pytest.mark.parametrize("row,path", MANIFEST, ids=[r["file"] for r, _ in MANIFEST])
def test_corpus_first_frames(row, path):
    expected = _frames_by_file(FRAMES_FIRST).get(row["file"], [])
    res = _read_cached(path)
    expected = expected[: len(res.frames) if row["file"] in COUNT_DIFFERS else None]
    got = [_actual_frame(f, e.keys()) for f, e in zip(res.frames, map(_expected_frame, expected))]
    assert got == [_expected_frame(e) for e in expected]


@needs_corpus
def test_corpus_all_frames():
    by_file = _frames_by_file(FRAMES_ALL)
    checked = 0
    for row, path in MANIFEST:
        name = row["file"]
        res = _read_cached(path)
        expected = by_file.get(name, [])
        if name in COUNT_DIFFERS:
            expected = expected[: COUNT_DIFFERS[name][0]]
        assert len(res.frames) == len(expected), name
        for f, e in zip(res.frames, expected):
            exp = _expected_frame(e)
            assert _actual_frame(f, exp.keys()) == exp, (name, e["index"])
            assert bool(f.rflags & RF_NO_TS) == (e["ts_ns"] == ""), (name, e["index"])
            checked += 1
    assert checked == 7646 + 548 - 1  # all reference frames but the one of test006.ntar


@needs_corpus
def test_corpus_libpcap_caplen_policy():
    """caplen > snaplen: we hash the full caplen (wiretap), flag it, and libpcap's bytes are a
    prefix."""
    rows = [r for r in FRAMES_ALL if r["caplen_libpcap"]]
    assert {r["file"] for r in rows} == LIBPCAP_CAPLEN_FILES
    paths = {row["file"]: path for row, path in MANIFEST}
    for r in rows:
        f = _read_cached(paths[r["file"]]).frames[int(r["index"]) - 1]
        assert f.caplen == int(r["caplen"]) > int(r["caplen_libpcap"])
        assert f.sha256 == r["sha256"] != r["sha256_libpcap"]
        assert hashlib.sha256(f.data[: int(r["caplen_libpcap"])]).hexdigest() == r["sha256_libpcap"]
        assert f.rflags & RF_GT_SNAP
    slip = _read_cached(paths["tcpdump__slip-compressed_sl_print-oobr.pcap"]).frames[0]
    assert slip.rflags & RF_GT_WIRE and slip.caplen == 255 and slip.wire_len == 225


@needs_corpus
def test_corpus_nano_matches_micro():
    a = _read_cached(CORPUS / "files" / "tcpreplay__test.pcap").frames
    b = _read_cached(CORPUS / "files" / "tcpreplay__test_nano.pcap").frames
    c = _read_cached(CORPUS / "derived" / "derived__be_nsec.pcap").frames
    key = lambda f: (f.caplen, f.wire_len, f.data)  # noqa: E731
    assert len(a) == 179 and list(map(key, a)) == list(map(key, b)) == list(map(key, c))
    # same µs part; the ns file carries the finer digits, and the BE ns copy the same ones
    assert [f.ts_ns // 1000 for f in a] == [f.ts_ns // 1000 for f in b]
    assert [f.ts_ns for f in b] == [f.ts_ns for f in c]


@needs_corpus
def test_corpus_frames_lie_inside_file():
    for _row, path in MANIFEST:
        res = _read_cached(path)
        _assert_frames_inside(path.read_bytes(), res)


@needs_corpus
@pytest.mark.parametrize("batch", [1, 3, 1000])
def test_corpus_batch_size_does_not_matter(batch):
    for name in (
        "pcapngtg__le_test202.pcapng",
        "sv__smtp-to-comma.pcap",
        "derived__cut_mid_epb.pcapng",
        "gopacket__le_test901.pcapng",
    ):
        sub = "derived" if name.startswith("derived__") else "files"
        ref = _read_cached(CORPUS / sub / name)
        got = read_capture(CORPUS / sub / name, batch=batch)
        assert [(f.offset, f.sha256, f.ts_ns) for f in got.frames] == [
            (f.offset, f.sha256, f.ts_ns) for f in ref.frames
        ]
        assert got.status == ref.status and got.info == ref.info


# ----------------------------------------------------------------------------- byte builders


def _data_offset(blob: bytes, res: Result, f: Frame) -> int:
    """Where the frame's bytes must start in the file, by format and block type."""
    fmt = res.info["format"]
    if fmt in (lib.LT_FMT_PCAP_US, lib.LT_FMT_PCAP_NS):
        return f.offset + 16
    if fmt == lib.LT_FMT_PCAP_MODIFIED:
        return f.offset + 24
    btype_le = struct.unpack_from("<I", blob, f.offset)[0]
    btype = btype_le if not f.rflags & RF_BE else struct.unpack_from(">I", blob, f.offset)[0]
    return f.offset + (12 if btype == 3 else 28)


def _assert_frames_inside(blob: bytes, res: Result) -> None:
    if res.open_status != OK or not res.frames:
        return
    first = res.frames[0]
    base = first.ptr - _data_offset(blob, res, first)
    for f in res.frames:
        start = _data_offset(blob, res, f)
        assert f.ptr - base == start
        assert 0 <= f.offset < start and start + f.caplen <= len(blob)
        assert f.data == blob[start : start + f.caplen]


PCAP_MAGIC = {"us": 0xA1B2C3D4, "ns": 0xA1B23C4D, "mod": 0xA1B2CD34}


def pcap(frames, *, kind="us", be=False, snaplen=65535, linktype=1, version=(2, 4), cut=0) -> bytes:
    """frames: (sec, frac, data[, wire_len[, caplen]]); frac in the file's unit."""
    e = ">" if be else "<"
    out = bytearray(struct.pack(e + "IHHiIII", PCAP_MAGIC[kind], *version, 0, 0, snaplen, linktype))
    for fr in frames:
        sec, frac, data = fr[:3]
        wire = fr[3] if len(fr) > 3 else len(data)
        caplen = fr[4] if len(fr) > 4 else len(data)
        out += struct.pack(e + "IIII", sec, frac, caplen, wire)
        if kind == "mod":
            out += struct.pack(e + "IHBB", 2, 0x0800, 0, 0)
        out += data
    return bytes(out[: len(out) - cut])


def _pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def block(btype: int, body: bytes, be=False, length=None, trailer=None) -> bytes:
    e = ">" if be else "<"
    body = _pad4(body)
    n = 12 + len(body)
    return (
        struct.pack(e + "II", btype, n if length is None else length)
        + body
        + struct.pack(e + "I", n if trailer is None else trailer)
    )


def opts(items, be=False) -> bytes:
    e = ">" if be else "<"
    out = b""
    for code, val in items:
        out += struct.pack(e + "HH", code, len(val)) + _pad4(val)
    return out + (struct.pack(e + "HH", 0, 0) if items else b"")


def shb(be=False, version=(1, 0)) -> bytes:
    e = ">" if be else "<"
    return block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, *version, -1), be)


def idb(linktype=1, snaplen=0, be=False, tsresol=None, tsoffset=None) -> bytes:
    e = ">" if be else "<"
    o = []
    if tsresol is not None:
        o.append((9, bytes([tsresol])))
    if tsoffset is not None:
        o.append((14, struct.pack(e + "q", tsoffset)))
    return block(1, struct.pack(e + "HHI", linktype, 0, snaplen) + opts(o, be), be)


def epb(ifid, ts, data, wire=None, be=False, caplen=None) -> bytes:
    e = ">" if be else "<"
    return block(
        6,
        struct.pack(
            e + "IIIII",
            ifid,
            ts >> 32,
            ts & 0xFFFFFFFF,
            len(data) if caplen is None else caplen,
            len(data) if wire is None else wire,
        )
        + _pad4(data),
        be,
    )


def spb(data, wire=None, be=False) -> bytes:
    e = ">" if be else "<"
    return block(3, struct.pack(e + "I", len(data) if wire is None else wire) + data, be)


def pb(ifid, ts, data, be=False) -> bytes:
    e = ">" if be else "<"
    return block(
        2,
        struct.pack(e + "HHIIII", ifid, 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
        + _pad4(data),
        be,
    )


PKTS = [bytes(range(i, i + 40 + 7 * i)) for i in range(5)] + [b""]


# ----------------------------------------------------------------------------- crafted pcap


@pytest.mark.parametrize("be", [False, True], ids=["le", "be"])
def test_pcap_variants_round_trip(tmp_path, be):
    secs = [1_600_000_000 + i for i in range(len(PKTS))]
    usec = [123456 + i for i in range(len(PKTS))]
    expected_ts = [s * 10**9 + u * 1000 for s, u in zip(secs, usec)]
    results = {}
    for kind, mult in (("us", 1), ("ns", 1000), ("mod", 1)):
        frames = [(s, u * mult, d) for s, u, d in zip(secs, usec, PKTS)]
        res = read_bytes(tmp_path, pcap(frames, kind=kind, be=be), f"{kind}.pcap")
        assert res.open_status == OK and res.status == EOF and res.info["message"] == ""
        assert (
            res.info["format"]
            == {
                "us": lib.LT_FMT_PCAP_US,
                "ns": lib.LT_FMT_PCAP_NS,
                "mod": lib.LT_FMT_PCAP_MODIFIED,
            }[kind]
        )
        assert [f.ts_ns for f in res.frames] == expected_ts
        assert all(bool(f.rflags & RF_BE) == be for f in res.frames)
        assert (res.info["version_major"], res.info["version_minor"], res.info["snaplen"]) == (
            2,
            4,
            65535,
        )
        results[kind] = [(f.data, f.caplen, f.wire_len, f.ts_ns, f.linktype) for f in res.frames]
        _assert_frames_inside(pcap(frames, kind=kind, be=be), res)
    assert results["us"] == results["ns"] == results["mod"]
    assert [r[0] for r in results["us"]] == PKTS


def test_pcap_le_and_be_agree(tmp_path):
    frames = [(1_700_000_000, 999_999_999, b"abc")]
    a = read_bytes(tmp_path, pcap(frames, kind="ns"), "a")
    b = read_bytes(tmp_path, pcap(frames, kind="ns", be=True), "b")
    assert (
        [(f.data, f.ts_ns) for f in a.frames]
        == [(f.data, f.ts_ns) for f in b.frames]
        == [(b"abc", 1_700_000_000_999_999_999)]
    )


def test_pcap_lengths_and_flags(tmp_path):
    frames = [(1, 0, b"x" * 100), (2, 0, b"y" * 10, 5), (3, 0, b"", 60), (4, 0, b"z" * 64, 64)]
    blob = pcap(frames, snaplen=64, linktype=0x04000001)
    res = read_bytes(tmp_path, blob)
    f = res.frames
    assert [x.caplen for x in f] == [100, 10, 0, 64]
    assert f[0].rflags & RF_GT_SNAP and f[0].data == b"x" * 100  # hashed in full, flagged
    assert f[1].rflags & RF_GT_WIRE and not f[1].rflags & RF_GT_SNAP
    assert f[2].data == b"" and f[2].wire_len == 60 and f[2].rflags == 0
    assert f[3].rflags == 0
    assert {x.linktype for x in f} == {1} and res.info["linktype"] == 1  # upper 16 bits masked
    assert [x.offset for x in f] == [24, 24 + 116, 24 + 116 + 26, 24 + 116 + 26 + 16]


def test_pcap_snaplen_zero_is_unlimited(tmp_path):
    res = read_bytes(tmp_path, pcap([(1, 0, b"q" * 300)], snaplen=0))
    assert res.frames[0].rflags == 0


def test_pcap_timestamps_wide(tmp_path):
    # u32 seconds past 2038; fraction out of range converted, not rejected
    frames = [
        (0xFFFFFFFF, 999_999, b"a"),
        (2**31, 0, b"b"),
        (1, 2_000_000, b"c"),
        (5, 0xFFFFFFFF, b"d"),
    ]
    res = read_bytes(tmp_path, pcap(frames))
    assert [f.ts_ns for f in res.frames] == [
        0xFFFFFFFF * 10**9 + 999_999_000,
        2**31 * 10**9,
        10**9 + 2_000_000_000,
        5 * 10**9 + 0xFFFFFFFF * 1000,
    ]
    res = read_bytes(tmp_path, pcap([(5, 0xFFFFFFFF, b"d")], kind="ns"), "ns")
    assert res.frames[0].ts_ns == 5 * 10**9 + 0xFFFFFFFF


@pytest.mark.parametrize(
    "version,ok",
    [
        ((2, 4), True),
        ((2, 1), True),
        ((2, 5), True),
        ((1, 4), False),
        ((3, 0), False),
        ((0, 0), False),
    ],
)
def test_pcap_versions(tmp_path, version, ok):
    res = read_bytes(tmp_path, pcap([(1, 0, b"abc")], version=version))
    if ok:
        assert res.open_status == OK and len(res.frames) == 1
    else:
        assert res.open_status == E_FORMAT and "version" in res.open_message


@pytest.mark.parametrize("kind,hl", [("us", 16), ("mod", 24)])
@pytest.mark.parametrize("cut", [1, 7, 15, 16, 17, 30, 39])
def test_pcap_truncated_tail(tmp_path, kind, hl, cut):
    frames = [(1, 0, b"a" * 10), (2, 0, b"b" * 20), (3, 0, b"c" * 23 + b"!" * (hl - 16))]
    blob = pcap(frames, kind=kind, cut=cut)
    last = 24 + 2 * hl + 30
    rest = hl + 23 + hl - 16 - cut  # bytes of the last record present
    res = read_bytes(tmp_path, blob)
    if rest == 0:  # cut exactly at a record boundary: a clean end
        assert res.status == EOF and len(res.frames) == 2 and not res.info["truncated"]
        return
    assert res.status == EOF and res.info["truncated"] == 1 and res.info["error"] == 0
    if rest > 0:
        assert len(res.frames) == 2
        assert (res.info["truncated_offset"], res.info["truncated_bytes"]) == (last, rest)
    else:  # cut went into the second record
        assert len(res.frames) == 1
    assert f"at byte {res.info['truncated_offset']}" in res.info["message"]
    assert "\n" not in res.info["message"]


def test_pcap_truncated_header_message(tmp_path):
    blob = pcap([(1, 0, b"a" * 8)]) + b"\1" * 7
    res = read_bytes(tmp_path, blob)
    assert res.info["message"] == "truncated record at byte 48: 7 of 16 header bytes"


@pytest.mark.parametrize(
    "caplen,snaplen,status",
    [
        (200, 65535, EOF),  # cut packet: plausible
        (262144, 100, EOF),  # plausible floor 262144
        (262145, 100, E_CORRUPT),  # beyond snaplen and the floor, past EOF: garbage header
        (262145, 300000, EOF),  # within the file's snaplen
        (0x7FFFFFF0, 0x7FFFFFFF, E_CORRUPT),  # over the 256 MiB hard limit
    ],
)
def test_pcap_cut_vs_corrupt(tmp_path, caplen, snaplen, status):
    blob = pcap([(1, 0, b"good"), (2, 0, b"x" * 50, 9999, caplen)], snaplen=snaplen)
    res = read_bytes(tmp_path, blob)
    assert len(res.frames) == 1 and res.frames[0].data == b"good"
    assert res.status == status
    if status == EOF:
        assert res.info["truncated"] and res.info["truncated_offset"] == 44
    else:
        assert res.info["error_offset"] == 44 and "44" in res.info["message"]


def test_pcap_huge_caplen_with_data_present_is_corrupt(tmp_path):
    blob = pcap([(1, 0, b"a")]) + struct.pack("<IIII", 1, 0, (256 << 20) + 1, 5)
    res = read_bytes(tmp_path, blob)
    assert res.status == E_CORRUPT and res.info["error_offset"] == 41


# ----------------------------------------------------------------------------- crafted pcapng


def _two_section_file():
    s0 = (
        shb(False)
        + idb(1, 0, tsresol=6)
        + idb(101, 128, tsresol=9)
        + epb(0, 1_600_000_000_123_456, b"A" * 60)
        + epb(1, 1_600_000_000_123_456_789, b"B" * 30)
        + epb(0, 1_600_000_001_000_000, b"C" * 5)
    )
    s1 = (
        shb(True)
        + idb(0, 0, be=True, tsresol=0x80 | 10, tsoffset=1_000_000_000)
        + idb(228, 0, be=True, tsresol=0x80 | 20)
        + epb(0, (5 << 10) | 512, b"D" * 10, be=True)
        + epb(1, 3 << 20, b"E" * 11, be=True)
        + epb(0, 0, b"F" * 12, wire=99, be=True)
    )
    return s0 + s1, len(s0)


def test_pcapng_sections_byte_orders_and_interfaces(tmp_path):
    blob, s0len = _two_section_file()
    res = read_bytes(tmp_path, blob)
    assert res.status == EOF and res.info["message"] == ""
    got = [
        (f.section, f.interface_id, f.linktype, f.ts_ns, f.data, bool(f.rflags & RF_BE))
        for f in res.frames
    ]
    assert got == [
        (0, 0, 1, 1_600_000_000_123_456_000, b"A" * 60, False),
        (0, 1, 101, 1_600_000_000_123_456_789, b"B" * 30, False),
        (0, 0, 1, 1_600_000_001_000_000_000, b"C" * 5, False),
        (1, 0, 0, (1_000_000_000 + 5) * 10**9 + 500_000_000, b"D" * 10, True),  # 2^-10 + tsoffset
        (1, 1, 228, 3 * 10**9, b"E" * 11, True),  # 2^-20
        (1, 0, 0, 1_000_000_000 * 10**9, b"F" * 12, True),
    ]
    assert res.frames[5].wire_len == 99
    info = res.info
    assert (
        info["format"],
        info["sections"],
        info["interfaces"],
        info["linktype"],
        info["snaplen"],
    ) == (lib.LT_FMT_PCAPNG, 2, 4, 1, 0)
    assert (info["version_major"], info["version_minor"]) == (1, 0)
    assert res.frames[3].offset > s0len
    _assert_frames_inside(blob, res)


def test_pcapng_interface_ids_are_per_section(tmp_path):
    blob = shb() + idb(1) + idb(0) + shb() + idb(101) + epb(1, 0, b"x")
    res = read_bytes(tmp_path, blob)
    assert res.status == E_CORRUPT and res.frames == []
    assert res.info["error_offset"] == len(blob) - len(epb(1, 0, b"x"))
    assert "interface 1" in res.info["message"]


@pytest.mark.parametrize(
    "tsresol,ts,expected",
    [
        (None, 1_500_000_000_000_001, 1_500_000_000_000_001_000),  # default 10^-6
        (9, 1_500_000_000_000_000_001, 1_500_000_000_000_000_001),
        (0, 1_500_000_000, 1_500_000_000 * 10**9),
        (
            12,
            1_500_000_000_123_456_789_999 & (2**64 - 1),
            (1_500_000_000_123_456_789_999 & (2**64 - 1)) // 1000,
        ),
        (0x88, (1519128000 << 8) | 50, 1_519_128_000_195_312_500),  # gopacket test902
        (
            0x80 | 30,
            (4_300_000_000 << 30) | (1 << 29),
            4_300_000_000_500_000_000,
        ),  # past 2106, 128-bit math
        (0x80 | 0, 7, 7 * 10**9),
        (0x80 | 127, 2**64 - 1, 0),
        (100, 2**64 - 1, 0),
    ],
)
def test_pcapng_tsresol(tmp_path, tsresol, ts, expected):
    res = read_bytes(tmp_path, shb() + idb(1, tsresol=tsresol) + epb(0, ts, b"p"))
    assert res.frames[0].ts_ns == expected


def test_pcapng_timestamp_saturates(tmp_path):
    res = read_bytes(tmp_path, shb() + idb(1, tsresol=0) + epb(0, 2**64 - 1, b"p"))
    assert res.frames[0].ts_ns == 2**63 - 1


def test_pcapng_spb(tmp_path):
    blob = (
        shb()
        + idb(1, snaplen=8)
        + spb(b"0123456789", wire=10)
        + spb(b"abc", wire=3)
        + spb(b"abcd", wire=100)
        + shb()
        + idb(1, snaplen=0)
        + spb(b"z" * 13, wire=13)
        + spb(b"w" * 5, wire=2)
    )
    res = read_bytes(tmp_path, blob)
    assert res.status == EOF
    assert [(f.caplen, f.wire_len, f.data) for f in res.frames] == [
        (8, 10, b"01234567"),  # snaplen 8
        (3, 3, b"abc"),
        (4, 100, b"abcd"),  # bytes in the block
        (13, 13, b"z" * 13),  # snaplen 0: unlimited; padding not included
        (2, 2, b"ww"),  # wire length
    ]
    assert all(f.rflags & RF_NO_TS and f.ts_ns == 0 and f.interface_id == 0 for f in res.frames)
    _assert_frames_inside(blob, res)


def test_pcapng_spb_without_interface_is_corrupt(tmp_path):
    blob = shb() + spb(b"abc")
    res = read_bytes(tmp_path, blob)
    assert res.status == E_CORRUPT and res.info["error_offset"] == len(shb())


def test_pcapng_obsolete_packet_block(tmp_path):
    blob = shb(True) + idb(1, be=True) + pb(0, 1_000_000, b"hello", be=True)
    res = read_bytes(tmp_path, blob)
    assert [(f.data, f.ts_ns, f.interface_id) for f in res.frames] == [(b"hello", 10**9, 0)]
    assert res.frames[0].rflags & RF_BE


def test_pcapng_unknown_blocks_skipped(tmp_path):
    blob = (
        shb()
        + block(0x0BAD, b"custom stuff")
        + idb(1)
        + block(4, b"\0" * 8)
        + block(5, b"\0" * 12)
        + epb(0, 1, b"one")
        + block(0x40000BAD, b"")
        + block(0x0A, b"\1" * 20)
        + block(0x12345678, b"x")
        + epb(0, 2, b"two")
    )
    res = read_bytes(tmp_path, blob)
    assert [f.data for f in res.frames] == [b"one", b"two"]
    assert res.info["skipped_blocks"] == 6 and res.status == EOF


@pytest.mark.parametrize(
    "bad,expect",
    [
        (lambda: block(6, b"\0" * 20, length=37), "not a multiple of 4"),
        (lambda: block(6, b"\0" * 20, length=8), "below the 12-byte minimum"),
        (lambda: block(6, b"\0" * 20, trailer=36), "trailer"),
        (lambda: block(99, b"\0" * 20, length=0x7FFFFFFC), "limit"),  # past EOF, absurd
        (lambda: epb(0, 0, b"abcd", caplen=5000), "overruns"),
        (lambda: epb(3, 0, b"abcd"), "interface 3"),
        (lambda: block(6, b"\0" * 12), "minimum"),  # EPB too short
        (
            lambda: block(1, struct.pack("<HHI", 1, 0, 0) + struct.pack("<HH", 9, 200)),
            "overruns",
        ),  # IDB option
        (lambda: block(0x0A0D0D0A, struct.pack("<I", 0x11223344) + b"\0" * 12), "byte-order"),
    ],
)
def test_pcapng_bad_block(tmp_path, bad, expect):
    head = shb() + idb(1) + epb(0, 7, b"before")
    blob = head + bad() + epb(0, 8, b"after")
    res = read_bytes(tmp_path, blob)
    assert [f.data for f in res.frames] == [b"before"]
    assert res.status == E_CORRUPT and res.info["error"] == E_CORRUPT
    assert res.info["error_offset"] == len(head)
    assert f"at byte {len(head)}" in res.info["message"] and expect in res.info["message"]


def test_pcapng_block_past_eof_is_truncation(tmp_path):
    """A block that passes the structural checks but runs past EOF is a cut file, not garbage."""
    head = shb() + idb(1) + epb(0, 7, b"before")
    whole = epb(0, 8, b"x" * 100)
    for keep in (1, 7, 8, 50, len(whole) - 1):
        res = read_bytes(tmp_path, head + whole[:keep])
        assert [f.data for f in res.frames] == [b"before"]
        assert res.status == EOF and res.info["truncated"] == 1
        assert (res.info["truncated_offset"], res.info["truncated_bytes"]) == (len(head), keep)
        assert f"at byte {len(head)}" in res.info["message"]


def test_pcapng_version_policy(tmp_path):
    for version, ok in (
        ((1, 0), True),
        ((1, 2), True),
        ((1, 1), False),
        ((2, 0), False),
        ((0, 1), False),
    ):
        res = read_bytes(tmp_path, shb(version=version) + idb(1) + epb(0, 0, b"x"))
        assert (res.open_status == OK) == ok, version
        if not ok:
            assert res.open_status == E_FORMAT and "version" in res.open_message
    # a later section of an unsupported version: frames before it are handed out first
    blob = shb() + idb(1) + epb(0, 0, b"x") + shb(version=(2, 0)) + idb(1) + epb(0, 0, b"y")
    res = read_bytes(tmp_path, blob)
    assert [f.data for f in res.frames] == [b"x"]
    assert res.status == E_FORMAT and res.info["error_offset"] == len(
        shb() + idb(1) + epb(0, 0, b"x")
    )


def test_pcapng_bad_first_shb(tmp_path):
    assert read_bytes(tmp_path, shb()[:10]).open_status == E_CORRUPT
    assert (
        read_bytes(
            tmp_path, block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1), trailer=4)
        ).open_status
        == E_CORRUPT
    )
    res = read_bytes(tmp_path, shb())  # SHB only: 0 frames, clean
    assert (
        res.open_status == OK
        and res.frames == []
        and res.status == EOF
        and res.info["sections"] == 1
    )


def test_pcapng_batches_stop_before_error(tmp_path):
    blob = (
        shb()
        + idb(1)
        + b"".join(epb(0, i, bytes([i])) for i in range(5))
        + block(6, b"", length=13)
    )
    for batch in (1, 2, 5, 64):
        res = read_bytes(tmp_path, blob, batch=batch)
        assert len(res.frames) == 5 and res.status == E_CORRUPT and res.info["frames"] == 5


# ----------------------------------------------------------------------------- not a capture


def test_empty_and_garbage_are_format_errors(tmp_path):
    for name, blob in (
        ("empty.pcap", b""),
        ("three", b"\xd4\xc3\xb2"),
        ("text.pcap", b"hello, world\n" * 10),
        ("zeros", b"\0" * 100),
        ("rand", random.Random(7).randbytes(4096)),
    ):
        res = read_bytes(tmp_path, blob, name)
        assert res.open_status == E_FORMAT, name
        assert name in res.open_message and "\n" not in res.open_message


def test_missing_file_and_directory(tmp_path):
    assert read_capture(tmp_path / "nope.pcap").open_status == lib.LT_ERR_IO
    assert read_capture(tmp_path).open_status == lib.LT_ERR_IO


def test_short_pcap_header_is_corrupt(tmp_path):
    res = read_bytes(tmp_path, pcap([])[:10])
    assert res.open_status == E_CORRUPT and "10 of 24" in res.open_message


def test_header_only_files(tmp_path):
    res = read_bytes(tmp_path, pcap([]))
    assert (
        res.open_status == OK
        and res.status == EOF
        and res.frames == []
        and not res.info["truncated"]
    )


# ----------------------------------------------------------------------------- fuzzing

SEEDS = [
    pcap([(1, 2, b"a" * 30), (3, 4, b"b" * 3, 90), (5, 6, b"")]),
    pcap([(1, 2, b"a" * 30), (3, 4, b"b" * 3)], kind="ns", be=True),
    pcap([(1, 2, b"a" * 30), (3, 4, b"b" * 3)], kind="mod"),
    _two_section_file()[0],
    shb()
    + idb(1, snaplen=4)
    + spb(b"abcdefgh")
    + block(0x0BAD, b"zz")
    + pb(0, 5, b"pb")
    + epb(0, 1, b"e"),
]


@st.composite
def mutated(draw):
    blob = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut"]))
        if not blob:
            break
        i = draw(st.integers(0, len(blob) - 1))
        if op == "flip":
            blob[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            blob[i] = draw(st.sampled_from([0, 0xFF, 0x7F, 0x80, draw(st.integers(0, 255))]))
        elif op == "insert":
            blob[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del blob[i : i + draw(st.integers(1, 8))]
        else:
            del blob[i:]
    return bytes(blob)


@settings(
    max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(blob=mutated(), batch=st.sampled_from([1, 3, 64]))
def test_fuzz_never_crashes_and_stays_inside(tmp_path, blob, batch):
    res = read_bytes(tmp_path, blob, "fuzz.bin", batch=batch)
    if res.open_status != OK:
        assert res.open_status in (E_FORMAT, E_CORRUPT)
        return
    assert res.status in (EOF, E_FORMAT, E_CORRUPT)
    assert res.info["frames"] == len(res.frames)
    _assert_frames_inside(blob, res)
    if res.info["truncated"]:
        assert res.status == EOF
        assert res.info["truncated_offset"] + res.info["truncated_bytes"] == len(blob)
    if res.status != EOF:
        assert res.info["error"] == res.status and res.info["error_offset"] < len(blob)
        assert all(f.offset < res.info["error_offset"] for f in res.frames)
