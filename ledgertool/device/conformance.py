"""The conformance kit: what the kit and the check share, and the check itself. The export of the
kit (pcaps crafted with scapy, vectors, the golden ledger) is ledgertool.device.kit.

`check_records` compares the records a device produced for a capture with the records ledgertool
computes (the engine `capture` runs, sequence numbers from 0), byte for byte, and explains the
first differing frames: which fields differ, a scapy dissection, the range ledgertool hashes, and
the byte range (if any: another strip mode's, the expected one run to the end of the captured
frame, or one near the expected one) whose digest is the device's, which names an off-by-one in
strip offsets or hashed Ethernet padding at once. No such range points at the key, algorithm or
digest code instead, unless other records match: a record matches only with the right key and
algorithm, so then the note says the key is right and these frames are hashed differently.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..algorithms import (
    ALGORITHMS,
    STRIP_MODES,
    Algorithm,
    get_algorithm,
    get_strip_mode,
)
from ..digest.engine import DigestEngine, digest_one
from ..digest.record import RECORD_FIXED, record_dtype
from ..digest.strip import explain, flag_names, strip_range
from ..errors import LedgerFormatError, Setting, UsageError
from ..keyfiles import DigestKey
from ..reconcile.dissect import dissect_line
from ..source.file import CaptureReader

KIT_VERSION = 1
KIT_FORMAT = f"ledgertool-conformance-kit-v{KIT_VERSION}"
KIT_MASTER_KEY = bytes(range(32))
"""The kit's digest master key: public, for vectors only (digest.key = 000102...1f)."""
VECTOR_LEAF_RECORDS = 4
"""Records per Merkle leaf in merkle.json and the golden ledger: small, so the vectors have many leaves."""

LEDGER_ALGORITHMS = tuple(a for a in ALGORITHMS.values() if a.ledger_ok)
STRIPS = tuple(STRIP_MODES)
SEARCH = 8
"""`check_records` looks for the device's digest among byte ranges whose start and end are within
this many bytes of the expected ones."""


def records_path(capture: str, algorithm: str, strip: str) -> str:
    """Kit-relative path of a record file."""
    return f"records/{capture}/{algorithm}.{strip}.records"


# --------------------------------------------------------------------------- the records


def compute_records(
    capture: str | os.PathLike[str], key: DigestKey, alg: Algorithm, strip: str, first_seq: int = 0
) -> bytes:
    """The records `capture` writes for every frame of a capture file, numbered from ``first_seq``
    (the native engine: reader, strip, digest, record), as one bytes object. CaptureFormatError
    (exit 2) for an unreadable or corrupt capture."""
    out = bytearray()
    with CaptureReader(capture) as reader:
        engine = DigestEngine(
            reader, alg, get_strip_mode(strip), key.subkey(alg.name, alg.key_size)
        )
        seq = first_seq
        while True:
            recs, n, _ = engine.fill(seq)
            if n == 0:
                return bytes(out)
            out += recs
            seq += n


@dataclass(frozen=True)
class Record:
    """One fixed-size record, decoded (docs/ledger-format.md "Records")."""

    seq: int
    ts_ns: int
    wire_len: int
    cap_len: int
    flags: int
    linktype: int
    aux: int
    digest: bytes

    FIELDS = ("seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux", "digest")

    @classmethod
    def decode(cls, raw: bytes, digest_size: int) -> Record:
        r = np.frombuffer(raw, dtype=record_dtype(digest_size), count=1)[0]
        return cls(
            int(r["seq"]),
            int(r["ts_ns"]),
            int(r["wire_len"]),
            int(r["cap_len"]),
            int(r["flags"]),
            int(r["linktype"]),
            int(r["aux"]),
            bytes(r["digest"]),
        )

    def to_json(self) -> dict[str, Any]:
        # seq and ts_ns as decimal strings, as in every JSON document (docs/cli.md#json-integers)
        return {
            "seq": str(self.seq),
            "ts_ns": str(self.ts_ns),
            "wire_len": self.wire_len,
            "cap_len": self.cap_len,
            "flags": self.flags,
            "flag_names": flag_names(self.flags),
            "linktype": self.linktype,
            "aux": self.aux,
            "digest": self.digest.hex(),
        }


# --------------------------------------------------------------------------- check


@dataclass
class Difference:
    """One frame whose device record is not byte-exact (or a record with no frame, or the reverse)."""

    index: int
    fields: list[str]
    expected: Record | None
    device: Record | None
    summary: str | None = None
    explanation: str | None = None
    expected_range: tuple[int, int] | None = None
    device_range: tuple[int, int] | None = None
    device_range_note: str | None = None
    frame: bytes | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "fields": self.fields,
            "expected": self.expected.to_json() if self.expected else None,
            "device": self.device.to_json() if self.device else None,
            "summary": self.summary,
            "explanation": self.explanation,
            "expected_range": list(self.expected_range) if self.expected_range else None,
            "device_range": list(self.device_range) if self.device_range else None,
            "device_range_note": self.device_range_note,
            "frame": self.frame.hex() if self.frame is not None else None,
        }


@dataclass
class CheckResult:
    """Outcome of `check_records` (schemas/conformance-check-report.schema.json)."""

    capture: str
    records_file: str
    algorithm: str
    strip: str
    digest_key_id: str
    frames: int
    device_records: int
    matched: int
    differing: int
    first_differences: list[Difference] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.differing == 0 and self.frames == self.device_records

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "capture": self.capture,
            "records_file": self.records_file,
            "algorithm": self.algorithm,
            "strip": self.strip,
            "digest_key_id": self.digest_key_id,
            "frames": self.frames,
            "device_records": self.device_records,
            "matched": self.matched,
            "differing": self.differing,
            "first_differences": [d.to_json() for d in self.first_differences],
            "warnings": self.warnings,
        }


def _open_device_records(path: Path, rs: int, alg: Algorithm):
    """The device's record file, opened, and its number of records; LedgerFormatError (exit 2)
    naming the file, and the byte where the last record is cut, when it is not whole records."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise LedgerFormatError(f"{path}: file not found (expected device records)") from None
    except IsADirectoryError:
        raise LedgerFormatError(f"{path}: is a directory (expected device records)") from None
    except OSError as e:
        raise LedgerFormatError(f"{path}: cannot read device records: {e.strerror or e}") from None
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode):
        f.close()
        raise LedgerFormatError(f"{path}: not a regular file (expected device records)")
    size = st.st_size
    if size % rs:
        f.close()
        whole = size // rs
        others = [
            f"{a.name} ({RECORD_FIXED + a.digest_size} B)"
            for a in LEDGER_ALGORITHMS
            if size % (RECORD_FIXED + a.digest_size) == 0 and a.digest_size != alg.digest_size
        ]
        hint = f"; whole records of {others[0]}?" if others else ""
        raise LedgerFormatError(
            f"{path}: {size} bytes is not a whole number of {rs}-byte {alg.name} records: "
            f"record {whole} is cut at byte {whole * rs}{hint}"
        )
    return f, size // rs


def check_records(
    capture: str | os.PathLike[str],
    records_file: str | os.PathLike[str],
    digest_key: DigestKey,
    algorithm: str = "siphash-1-3-128",
    strip: str = "frame",
    max_report: int = 10,
) -> CheckResult:
    """Compare a device's records for ``capture`` with ledgertool's, frame by frame, byte for byte.

    ``records_file`` holds whole records (docs/ledger-format.md "Records", 32 + digest bytes each,
    little-endian, nothing else), the first numbered 0, one per frame in capture order; it is read
    in step with the capture, so neither is held in memory whole. The first ``max_report``
    differing frames are explained (`Difference`). Raises LedgerFormatError, CaptureFormatError,
    AlgorithmError, KeyFileError (exit 2) for unreadable or mismatched input."""
    alg = get_algorithm(algorithm)
    strip_id = get_strip_mode(strip)
    if max_report < 0:
        raise UsageError(Setting("max_report"), " must be >= 0")
    rs = RECORD_FIXED + alg.digest_size
    subkey = digest_key.subkey(alg.name, alg.key_size)
    f, count = _open_device_records(Path(records_file), rs, alg)
    res = CheckResult(
        str(capture),
        str(records_file),
        alg.name,
        strip,
        digest_key.key_id(alg.name, alg.key_size),
        0,
        count,
        0,
        0,
    )
    # index -> (ledgertool's record, the device's)
    report: dict[int, tuple[bytes | None, bytes | None]] = {}
    with f:
        with CaptureReader(capture) as reader:
            engine = DigestEngine(reader, alg, strip_id, subkey)
            while True:
                recs, n, _ = engine.fill(res.frames)
                if n == 0:
                    break
                lo = res.frames
                theirs = f.read(max(0, min(n, count - lo)) * rs)
                both = len(theirs) // rs
                diff: list[int] = []
                if both:
                    a = np.frombuffer(recs, dtype=np.uint8, count=both * rs).reshape(-1, rs)
                    b = np.frombuffer(theirs, dtype=np.uint8).reshape(-1, rs)
                    diff = np.flatnonzero((a != b).any(axis=1)).tolist()
                res.differing += len(diff)
                res.matched += both - len(diff)
                for k in [
                    *diff,
                    *range(both, n),
                ]:  # differing records, then frames with no device record
                    if len(report) < max_report:
                        report[lo + k] = (
                            bytes(recs[k * rs : (k + 1) * rs]),
                            theirs[k * rs : (k + 1) * rs] if k < both else None,
                        )
                res.frames += n
            note = reader.info().truncation_note()
        res.differing += abs(res.frames - count)
        for i in range(res.frames, count):  # device records past the capture's last frame
            if len(report) >= max_report:
                break
            f.seek(i * rs)
            report[i] = (None, f.read(rs))
    if note:
        res.warnings.append(note)
    res.first_differences = _explain(capture, report, alg, subkey, strip, res.matched)
    return res


def _explain(
    capture,
    report: dict[int, tuple[bytes | None, bytes | None]],
    alg: Algorithm,
    subkey: bytes,
    strip: str,
    matched: int = 0,
) -> list[Difference]:
    if not report:
        return []
    wanted = {i for i, (mine, theirs) in report.items() if mine is not None and theirs is not None}
    frames: dict[int, Any] = {}
    if wanted:
        with CaptureReader(capture) as reader:
            for fr in reader.frames():
                if fr.index in wanted:
                    frames[fr.index] = fr
                    if len(frames) == len(wanted):
                        break
    out = []
    for i, (mine, theirs) in sorted(report.items()):
        exp = Record.decode(mine, alg.digest_size) if mine is not None else None
        dev = Record.decode(theirs, alg.digest_size) if theirs is not None else None
        if exp is None:
            out.append(Difference(i, ["extra record"], None, dev))
            continue
        if dev is None:
            out.append(Difference(i, ["missing record"], exp, None))
            continue
        fr = frames[i]
        d = Difference(
            i,
            [n for n in Record.FIELDS if getattr(exp, n) != getattr(dev, n)],
            exp,
            dev,
            summary=dissect_line(fr.data, fr.linktype),
            explanation=explain(fr.data, fr.linktype, strip, fr.wire_len),
            frame=fr.data,
        )
        rng = strip_range(fr.data, fr.linktype, strip, fr.wire_len)
        d.expected_range = (rng.offset, rng.end)
        if "digest" in d.fields:
            d.device_range, d.device_range_note = _find_device_range(
                fr.data, fr.linktype, fr.wire_len, rng, dev.digest, alg, subkey, strip, matched
            )
        out.append(d)
    return out


def _find_device_range(
    frame: bytes,
    linktype: int,
    wire_len: int,
    rng,
    digest: bytes,
    alg: Algorithm,
    subkey: bytes,
    strip: str,
    matched: int = 0,
) -> tuple[tuple[int, int] | None, str]:
    """The byte range of ``frame`` whose digest under ``subkey`` is the device's: another strip mode's
    range first, then the expected start to the end of the captured frame (Ethernet padding or a
    trailer hashed: any number of bytes past the end), then ranges within `SEARCH` bytes of the
    expected start and end (closest first). ``matched``: records of the same check that matched
    (then the key and algorithm are not what is wrong)."""
    for mode in STRIPS:
        if mode == strip:
            continue
        other = strip_range(frame, linktype, mode, wire_len)
        if (other.offset, other.end) != (rng.offset, rng.end) and digest_one(
            alg, subkey, frame[other.offset : other.end]
        ) == digest:
            return (
                other.offset,
                other.end,
            ), f"the device hashed strip {mode}'s range [{other.offset}, {other.end})"
    if rng.end < len(frame) and digest_one(alg, subkey, frame[rng.offset :]) == digest:
        return (rng.offset, len(frame)), (
            f"the device hashed [{rng.offset}, {len(frame)}), to the end of the captured frame, "
            f"instead of [{rng.offset}, {rng.end}): the {len(frame) - rng.end} bytes after the "
            f"packet's end (Ethernet padding or a trailer) are not hashed in strip {strip}"
        )
    shifts = sorted(
        (
            (ds, de)
            for ds in range(-SEARCH, SEARCH + 1)
            for de in range(-SEARCH, SEARCH + 1)
            if (ds, de) != (0, 0)
        ),
        key=lambda t: (abs(t[0]) + abs(t[1]), t),
    )
    for ds, de in shifts:
        a, b = rng.offset + ds, rng.end + de
        if 0 <= a <= b <= len(frame) and digest_one(alg, subkey, frame[a:b]) == digest:
            parts = [f"start {ds:+d}" if ds else "", f"end {de:+d}" if de else ""]
            return (a, b), (
                f"the device hashed [{a}, {b}) instead of [{rng.offset}, {rng.end}) "
                f"({', '.join(p for p in parts if p)})"
            )
    none = (
        f"no byte range within {SEARCH} bytes of [{rng.offset}, {rng.end}), to the end of the "
        "frame, or of another strip mode gives the device's digest under this key"
    )
    if matched:
        return None, (
            f"{none}; yet {matched} other record(s) match under this key and algorithm, "
            "so neither is wrong: the device hashes frames like this one differently "
            "(compare its dissection with those that match)"
        )
    return None, (
        f"{none}: look at the key, the algorithm and the digest code rather than the strip offsets"
    )
