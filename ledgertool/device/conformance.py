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
"""Records per Merkle leaf in merkle.json and the golden ledger: small, so the vectors have many
leaves."""

LEDGER_ALGORITHMS = tuple(a for a in ALGORITHMS.values() if a.ledger_ok)
STRIPS = tuple(STRIP_MODES)
SEARCH = 8
CLOCKS = ("kit", "device")
"""`check_records`' clock modes: `kit`, every field byte-exact (the device replays the kit's
timestamps); `device`, `ts_ns` is the device's own clock: not compared byte for byte, but checked
monotone (never earlier than the record before) and, with a tolerance, paced like the capture:
|(ts_k - ts_0) - (kit_k - kit_0)| <= tolerance."""
BYTE_EXACT_FIELDS = ("seq", "wire_len", "cap_len", "flags", "linktype", "aux", "digest")
"""What a device must reproduce byte for byte in either clock mode; `ts_ns` is the one field a
device supplies from its own clock."""
TS = slice(8, 16)  # ts_ns's bytes in a record
MAX_CLOCK_NOTES = 10
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
    """One frame whose device record is not byte-exact (or a record with no frame, or the
    reverse)."""

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
    clock: str = "kit"
    clock_tolerance_ns: int | None = None
    clock_violations: int = 0
    first_clock_violations: list[ClockViolation] = field(default_factory=list)
    lanes: int = 1  # record files, one per lane (check_lanes)

    @property
    def ok(self) -> bool:
        return (
            self.differing == 0 and self.frames == self.device_records and not self.clock_violations
        )

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
            "lanes": self.lanes,
            "clock": {
                "mode": self.clock,
                "tolerance_ns": self.clock_tolerance_ns,
                "violations": self.clock_violations,
                "first_violations": [v.to_json() for v in self.first_clock_violations],
            },
        }


@dataclass(frozen=True)
class ClockViolation:
    """A device timestamp that goes back, or strays from the capture's pace (clock mode device)."""

    index: int
    ts_ns: int
    previous_ts_ns: int | None
    kit_ts_ns: int
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "ts_ns": str(self.ts_ns),
            "previous_ts_ns": None if self.previous_ts_ns is None else str(self.previous_ts_ns),
            "kit_ts_ns": str(self.kit_ts_ns),
            "why": self.why,
        }


class _Clock:
    """The device-clock check across batches (see CLOCKS)."""

    def __init__(self, tolerance_ns: int | None):
        self.tolerance = tolerance_ns
        self.prev: int | None = None
        self.origin: tuple[int, int] | None = None  # (device ts, kit ts) of the first record

    def check(self, lo: int, kit: np.ndarray, dev: np.ndarray, res: CheckResult) -> None:
        self.check_lane(list(range(lo, lo + len(dev))), kit, dev, res)

    def check_lane(self, index: list[int], kit: np.ndarray, dev: np.ndarray, res) -> None:
        """`dev[k]` is the device's timestamp of frame `index[k]`, whose kit time is `kit[k]`."""
        if not len(dev):
            return
        if self.origin is None:
            self.origin = (int(dev[0]), int(kit[0]))
        prev = np.concatenate(([dev[0] if self.prev is None else self.prev], dev[:-1]))
        back = dev < prev
        drift = (dev - self.origin[0]) - (kit - self.origin[1])
        far = np.zeros(len(dev), bool) if self.tolerance is None else abs(drift) > self.tolerance
        for k in np.flatnonzero(back | far).tolist():
            res.clock_violations += 1
            if len(res.first_clock_violations) >= MAX_CLOCK_NOTES:
                continue
            why = (
                f"earlier than the record before ({int(prev[k])}): device timestamps must not "
                "go back within a lane"
                if back[k]
                else f"{int(drift[k]):+d} ns off the capture's pace since record 0 (tolerance "
                f"{self.tolerance} ns)"
            )
            p = None if self.prev is None and k == 0 else int(prev[k])
            res.first_clock_violations.append(
                ClockViolation(index[k], int(dev[k]), p, int(kit[k]), why)
            )
        self.prev = int(dev[-1])


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
    clock: str = "kit",
    clock_tolerance_ns: int | None = None,
) -> CheckResult:
    """Compare a device's records for ``capture`` with ledgertool's, frame by frame, byte for byte.

    ``clock`` (CLOCKS): "kit" compares every byte; "device" takes `ts_ns` from the device's own
    clock: its bytes are left out of the comparison and checked instead to be monotone and, with
    ``clock_tolerance_ns``, within that of the capture's pace (ClockViolation, not ok).

    ``records_file`` holds whole records (docs/ledger-format.md "Records", 32 + digest bytes each,
    little-endian, nothing else), the first numbered 0, one per frame in capture order; it is read
    in step with the capture, so neither is held in memory whole. The first ``max_report``
    differing frames are explained (`Difference`). Raises LedgerFormatError, CaptureFormatError,
    AlgorithmError, KeyFileError (exit 2) for unreadable or mismatched input."""
    alg = get_algorithm(algorithm)
    strip_id = get_strip_mode(strip)
    if max_report < 0:
        raise UsageError(Setting("max_report"), " must be >= 0")
    if clock not in CLOCKS:
        raise UsageError(Setting("clock"), f" must be kit or device, not {clock!r}")
    if clock_tolerance_ns is not None and (clock != "device" or clock_tolerance_ns < 0):
        raise UsageError(Setting("clock_tolerance"), " is a duration >= 0, with clock device")
    rs = RECORD_FIXED + alg.digest_size
    cols = np.ones(rs, bool)
    if clock == "device":
        cols[TS] = False  # the device's own timestamps: checked by _Clock, not byte for byte
    clk = _Clock(clock_tolerance_ns) if clock == "device" else None
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
        clock=clock,
        clock_tolerance_ns=clock_tolerance_ns,
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
                    diff = np.flatnonzero((a[:, cols] != b[:, cols]).any(axis=1)).tolist()
                    if clk is not None:
                        ts = np.ascontiguousarray
                        clk.check(
                            lo, ts(a[:, TS]).view("<i8")[:, 0], ts(b[:, TS]).view("<i8")[:, 0], res
                        )
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
    if clk is not None:
        for d in res.first_differences:
            d.fields = [f for f in d.fields if f != "ts_ns"]
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
    """The byte range of ``frame`` whose digest under ``subkey`` is the device's: another strip
    mode's range first, then the expected start to the end of the captured frame (Ethernet
    padding or a trailer hashed: any number of bytes past the end), then ranges within `SEARCH`
    bytes of the expected start and end (closest first). ``matched``: records of the same check
    that matched (then the key and algorithm are not what is wrong)."""
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


# --------------------------------------------------------------------------- many lanes


def check_lanes(
    capture: str | os.PathLike[str],
    lane_files: list[str | os.PathLike[str]],
    digest_key: DigestKey,
    algorithm: str = "siphash-1-3-128",
    strip: str = "frame",
    max_report: int = 10,
    clock: str = "device",
    clock_tolerance_ns: int | None = None,
) -> CheckResult:
    """Compare the records of a device's N lanes for ``capture`` with ledgertool's (docs/devices.md
    "Many lanes"): lane ℓ's file holds that lane's records, its `seq` numbered from 0; which lane a
    frame went to is the device's choice (RSS, queues). Each device record is matched to the
    earliest unmatched frame whose byte-exact fields (BYTE_EXACT_FIELDS but seq) it carries; a
    lane's frames must come in capture order, and its timestamps (clock device) be monotone and,
    with a tolerance, paced like the capture. A record no frame matches is paired, for the
    explanation, with the frame missing between its lane neighbours. Everything is held in memory
    (the kit's captures are small)."""
    alg = get_algorithm(algorithm)
    rs = RECORD_FIXED + alg.digest_size
    if clock not in CLOCKS or max_report < 0:
        raise UsageError(Setting("clock"), f" must be kit or device, not {clock!r}")
    expected = np.frombuffer(
        compute_records(capture, digest_key, alg, strip), dtype=record_dtype(alg.digest_size)
    )
    lanes = [_lane_array(Path(f), rs, alg, i) for i, f in enumerate(lane_files)]
    res = CheckResult(
        str(capture),
        ",".join(map(str, lane_files)),
        alg.name,
        strip,
        digest_key.key_id(alg.name, alg.key_size),
        len(expected),
        sum(len(x) for x in lanes),
        0,
        0,
        clock=clock,
        clock_tolerance_ns=clock_tolerance_ns,
        lanes=len(lanes),
    )
    raw = expected.view(np.uint8).reshape(-1, rs)
    key = 16 if clock == "device" else 8  # the bytes matched: from ts_ns on, or from wire_len on
    todo: dict[bytes, list[int]] = {}
    for i in range(len(expected) - 1, -1, -1):  # popped from the end: earliest frame first
        todo.setdefault(raw[i, key:].tobytes(), []).append(i)
    placed = [_place(lane, todo, rs, key) for lane in lanes]
    res.matched = sum(1 for p in placed for i in p if i is not None)
    missing = sorted(i for idx in todo.values() for i in idx)
    report, pairs = _lane_report(lanes, placed, missing, raw, rs, max_report)
    # a record paired with the frame it should have been counts once, as in check_records
    res.differing = res.device_records - res.matched + len(missing) - pairs
    _lane_clocks(lanes, placed, expected, res)
    sub = digest_key.subkey(alg.name, alg.key_size)
    res.first_differences = _explain(capture, report, alg, sub, strip, res.matched)
    for d in res.first_differences:
        if clock == "device":
            d.fields = [f for f in d.fields if f != "ts_ns"]
        d.fields = [f for f in d.fields if f != "seq"] or d.fields
    return res


def _lane_array(path: Path, rs: int, alg: Algorithm, lane: int) -> np.ndarray:
    f, count = _open_device_records(path, rs, alg)
    with f:
        arr = np.frombuffer(f.read(count * rs), dtype=record_dtype(alg.digest_size))
    bad = np.flatnonzero(arr["seq"] != np.arange(count, dtype=np.uint64))
    if len(bad):
        k = int(bad[0])
        raise LedgerFormatError(
            f"{path}: record {k} (byte {k * rs}) of lane {lane} has seq {int(arr['seq'][k])}, "
            f"not {k}: each lane numbers its records from 0"
        )
    return arr


def _place(lane: np.ndarray, todo: dict[bytes, list[int]], rs: int, key: int) -> list[int | None]:
    """The frame index each record of a lane matches (None: no unmatched frame has its fields)."""
    raw = lane.view(np.uint8).reshape(-1, rs)
    out: list[int | None] = []
    for k in range(len(lane)):
        idx = todo.get(raw[k, key:].tobytes())
        out.append(idx.pop() if idx else None)
    return out


def _lane_report(lanes, placed, missing, raw, rs, max_report):
    """index -> (ledgertool's record, the device's) for the first differences: a record that
    matched nothing is paired with the first missing frame between its lane neighbours; and the
    number of such pairs."""
    report: dict[int, tuple[bytes | None, bytes | None]] = {}
    left = set(missing)
    extra = 0
    for lane, where in zip(lanes, placed):
        draw = lane.view(np.uint8).reshape(-1, rs)
        for k, i in enumerate(where):
            if i is not None:
                continue
            lo = max([j for j in where[:k] if j is not None], default=-1)
            hi = min([j for j in where[k + 1 :] if j is not None], default=len(raw))
            cand = [m for m in sorted(left) if lo < m < hi]
            if cand:
                left.discard(cand[0])
                if len(report) < max_report:
                    report[cand[0]] = (raw[cand[0]].tobytes(), draw[k].tobytes())
            else:
                extra += 1
                if len(report) < max_report:
                    report[len(raw) + extra - 1] = (None, draw[k].tobytes())
    for m in sorted(left):
        if len(report) < max_report:
            report[m] = (raw[m].tobytes(), None)
    return report, len(missing) - len(left)


def _lane_clocks(lanes, placed, expected, res) -> None:
    """Per lane: frames in capture order; with clock device, _Clock over the lane's records
    against the kit times of the frames they matched, from one origin for every lane."""
    matched = [
        (i, int(lane["ts_ns"][k]))
        for lane, where in zip(lanes, placed)
        for k, i in enumerate(where)
        if i is not None
    ]
    origin = min(matched) if matched else None
    for n, (lane, where) in enumerate(zip(lanes, placed)):
        got = [(k, i) for k, i in enumerate(where) if i is not None]
        order = [i for _, i in got]
        if any(b < a for a, b in zip(order, order[1:])):
            res.warnings.append(
                f"lane {n}: its records match frames out of capture order "
                f"({order[:8]}...): a lane hands out its frames in arrival order"
            )
            res.differing += 1
        if res.clock != "device" or not got:
            continue
        clk = _Clock(res.clock_tolerance_ns)
        if origin is not None:
            clk.origin = (origin[1], int(expected["ts_ns"][origin[0]]))
        ks = np.array([k for k, _ in got])
        clk.check_lane(order, expected["ts_ns"][order], lane["ts_ns"][ks], res)
