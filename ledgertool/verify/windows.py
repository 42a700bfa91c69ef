"""verify's checks of a link's window log (DIR/windows=NAME; docs/ledger-format.md, "Window
logs"): its seals are checked by the same pure functions and chain reduction as a link's
(check_seal, LinkChain: signatures, the chain from the log's own genesis, sequence continuity of
the window ordinals, the checkpoint), against the ledger's window view (record size a window
record's, one record a leaf). Its raw record files are walked here: the framing, the header
against the seal, the count and the Merkle root over the window records, then every record's own
framing and parameters, frames and drops against the seal, and window indexes that strictly
increase across the log. Nothing of a window log is handed on before it is checked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..digest.engine import merkle_leaves, merkle_root
from ..digest.window import WindowRecord
from ..errors import DataError, FileTypeError, LedgerFormatError, StorageError
from ..ledger.header import LedgerHeader
from ..ledger.layout import LEAVES, LEDGER_FILE, OPEN, RECORDS, window_log_link
from ..ledger.reader import LedgerReader
from ..ledger.segment import (
    HEADER_SIZE,
    MAX_SEGMENT_RECORDS,
    SegmentHeader,
    survey_open_segment,
)
from ..plural import plural
from ..seal.checkpoint import LinkTree
from ..seal.document import Seal
from ..seal.rotation import Schedule
from .chain import (
    LinkChain,
    OpenRead,
    SegmentCheck,
    listing_findings,
    open_segment_finding,
    open_segments,
    unsealed_candidates,
)
from .checks import (
    RecordsCheck,
    SealCheck,
    SegmentPlace,
    changed_leaves,
    check_seal,
    raw_records_file_bytes,
    unreadable_seal,
)
from .problems import Kind, Problem

_COUNT = struct.Struct("<I")
_MAC = 32
MAX_BLOCK_RECORDS = 65536


@dataclass(frozen=True)
class VerifiedWindows:
    """One window segment that passed every check: its seal and its window records, in order."""

    log: str
    index: int
    seal: Seal
    windows: tuple[WindowRecord, ...]

    @property
    def link(self) -> str:
        return window_log_link(self.log)


@dataclass
class WindowLogSummary:
    """What verify found in one window log (verify --json `windows`)."""

    log: str
    segments: int = 0
    windows: int = 0
    frames: int = 0
    drops: int = 0
    first_index: int | None = None
    last_index: int | None = None
    verified: list[VerifiedWindows] = field(default_factory=list, repr=False)

    @property
    def link(self) -> str:
        return window_log_link(self.log)

    def to_json(self) -> dict:
        return {
            "log": self.log,
            "link": self.link,
            "segments": self.segments,
            "windows": self.windows,
            "frames": self.frames,
            "drops_declared": self.drops,
            "first_index": None if self.first_index is None else str(self.first_index),
            "last_index": None if self.last_index is None else str(self.last_index),
        }


def verify_window_log(
    reader: LedgerReader, ledger: LedgerHeader, log: str, sched: Schedule | None, add
) -> tuple[WindowLogSummary, LinkTree]:
    """Every check of the window log `log` ('windows=NAME'); each finding goes to `add`. The
    summary (with the segments that passed, for query and recompute) and the log's tree."""
    view = ledger.window_view()
    listing = reader.listing(log)
    log_dir = reader.link_dir(log)
    unsealed = [
        i
        for i in unsealed_candidates(listing)
        if not reader.exists(log, i, "seal.json", follow_symlinks=True)
    ]
    for finding in listing_findings(listing, log_dir, unsealed):
        add(finding)
    chain = LinkChain(view, log, log_dir, reader.directory / LEDGER_FILE)
    summary = WindowLogSummary(log)
    prev: int | None = None
    with reader.holding_link(log):
        for index in listing.sealed:
            place = SegmentPlace(view, log, index, log_dir, sched)
            try:
                seal = check_seal(reader.read_seal_bytes(log, index), place)
            except LedgerFormatError as e:
                seal = unreadable_seal(place, str(e))
            recs, windows = None, ()
            if seal.reads_records:
                recs, windows = _window_records(reader, seal, place, prev)
                if windows:
                    prev = windows[-1].index
            found = chain.add(SegmentCheck(seal, recs))
            for f in found:
                add(f)
            if recs is not None and not any(not f.kind.is_warning for f in found):
                summary.verified.append(VerifiedWindows(log, index, seal.doc, windows))
    for f in chain.finish():
        add(f)
    _open_findings(reader, view, log, listing, chain, sched, add)
    for v in summary.verified:
        summary.segments += 1
        summary.windows += len(v.windows)
        summary.frames += sum(w.frames for w in v.windows)
        summary.drops += sum(w.drops for w in v.windows)
        if v.windows:
            if summary.first_index is None:
                summary.first_index = v.windows[0].index
            summary.last_index = v.windows[-1].index
    return summary, chain.tree


def _open_findings(reader, view, log, listing, chain: LinkChain, sched, add) -> None:
    """A warning per open window segment (a capture running, or killed: `recover` seals its
    authenticated prefix), as for a link's open segments."""
    nxt = chain.next_open
    for i in open_segments(listing):
        path = reader.segment_path(log, i, OPEN)
        try:
            with reader.open_growing(log, i) as (f, size):
                read = OpenRead(survey_open_segment(f, size, path))
        except StorageError:
            read = OpenRead()  # sealed and removed since the listing
        except LedgerFormatError as e:
            read = OpenRead(error=e)
        key_id = sched.digest_key_id_for(log, nxt[0]) if sched is not None else None
        w, nxt = open_segment_finding(read, path, i, view, window_log_link(log), nxt, key_id)
        if w is not None:
            add(replace(w, link=log))


def _read(reader: LedgerReader, log: str, index: int, limit: int) -> tuple[bytes | None, str]:
    """The raw record file's bytes (or, sealed but not yet renamed, the open file's), or None and
    why; a file larger than `limit` bytes (what its seal allows) is not read."""
    for kind in (RECORDS, OPEN):
        if reader.exists(log, index, kind, follow_symlinks=False):
            try:
                return reader.read_segment_file(log, index, kind, limit).to_pybytes(), kind
            except (LedgerFormatError, FileTypeError, StorageError) as e:
                return None, str(e)
    return None, f"neither {reader.segment_path(log, index, RECORDS)} nor its .open file is there"


def _merkle_problem(
    reader: LedgerReader, place: SegmentPlace, records: bytes, rsize: int, root: str
) -> Problem:
    """merkle_mismatch of a window segment, naming the changed window records (a leaf each) when
    the leaf sidecar is authentic (its own root is the seal's), as a per-frame segment's does."""
    path = place.path(RECORDS)
    try:  # the sidecar only names records: optional
        # one leaf a record: a longer sidecar cannot be the sealed one, and is not read whole
        limit = 32 * (len(records) // rsize + 1)
        raw = reader.read_segment_file(place.link, place.index, LEAVES, limit).to_pybytes()
    except (LedgerFormatError, FileTypeError, StorageError):
        raw = None
    changed = changed_leaves(raw, records, (rsize, 1), root, "sha256")
    if not changed:
        return place.problem(
            Kind.MERKLE_MISMATCH, f"{path}: Merkle root of the window records is not the seal's"
        )
    more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
    return place.problem(
        Kind.MERKLE_MISMATCH,
        f"{path}: Merkle root of the window records is not the seal's; changed window records "
        f"of the segment (from 0): {', '.join(map(str, changed[:4]))}{more}",
        changed[0],
    )


def _window_records(
    reader: LedgerReader, seal: SealCheck, place: SegmentPlace, prev: int | None
) -> tuple[RecordsCheck, tuple[WindowRecord, ...]]:
    """Steps 5-7 for one window segment: the file, its records against the seal, each record."""
    # bounded as a link's raw record file is (checks.V2Segments.file_limit): a file larger than its
    # seal allows is a finding, never read whole into memory; and, the seal's count being the
    # storage holder's word until its signatures verify, never more than a segment of the format's
    # most records (MAX_SEGMENT_RECORDS)
    limit = raw_records_file_bytes(min(seal.seq.count, MAX_SEGMENT_RECORDS), seal.layout[0])
    raw, kind = _read(reader, place.link, place.index, limit)
    path = place.path(RECORDS)
    if raw is None:
        why = Kind.RECORDS_UNREADABLE if "neither" not in kind else Kind.RECORDS_MISSING
        return RecordsCheck((place.problem(why, kind),)), ()
    out: list[Problem] = []
    records = _walk(raw, seal, place, path, out)
    if records is None:
        return RecordsCheck(tuple(out)), ()
    rsize, doc = seal.layout[0], seal.doc
    n = len(records) // rsize
    if n != seal.seq.count:
        out.append(
            place.problem(
                Kind.COUNT_MISMATCH,
                f"{path}: {plural(n, 'window record')}, the seal says {seal.seq.count}",
            )
        )
    root = merkle_root(merkle_leaves(records, rsize, 1)).hex() if n else None
    if n and root != doc.merkle_root:
        out.append(_merkle_problem(reader, place, records, rsize, str(doc.merkle_root)))
        return RecordsCheck(tuple(out), records=records, n=n, merkle_ok=True), ()
    windows = _each_window(records, rsize, place, path, prev, out)
    frames, drops = sum(w.frames for w in windows), sum(w.drops for w in windows)
    if frames != doc.frames:
        out.append(
            place.problem(
                Kind.COUNT_MISMATCH,
                f"{path}: the windows hold {plural(frames, 'frame')}, the seal says {doc.frames}",
            )
        )
    if drops != doc.drops_declared:
        out.append(
            place.problem(
                Kind.DROPS_MISMATCH,
                f"{path}: the windows declare {drops} drops, the seal {doc.drops_declared}",
            )
        )
    if windows and (str(windows[0].start_ns), str(windows[-1].start_ns)) != (
        doc.first_ts_ns,
        doc.last_ts_ns,
    ):
        out.append(
            place.problem(
                Kind.TIMESTAMP_MISMATCH,
                f"{path}: the first and last window start at "
                f"{windows[0].start_ns} and {windows[-1].start_ns} ns, not the seal's",
            )
        )
    return RecordsCheck(tuple(out), records=records, n=n, frames=frames, drops=drops), tuple(
        windows
    )


def _walk(
    raw: bytes, seal: SealCheck, place: SegmentPlace, path: Path, out: list[Problem]
) -> bytes | None:
    """The records of a raw record file (framing stripped), its header checked against the seal;
    None (the problem in `out`) when the header or a block does not frame."""
    try:
        header = SegmentHeader.decode(raw[:HEADER_SIZE], str(path))
    except LedgerFormatError as e:
        out.append(place.problem(Kind.RECORDS_UNREADABLE, str(e)))
        return None
    doc, view = seal.doc, place.ledger
    want = (
        ("tier", header.tier, "windows"),
        ("ledger id", header.ledger_id, doc.ledger_id),
        ("link", header.link, window_log_link(place.link)),
        ("segment", header.index, place.index),
        ("first seq", header.first_seq, seal.seq.first),
        ("algorithm", header.algorithm, doc.algorithm),
        ("strip", header.strip, doc.strip),
        ("record size", header.record_size, seal.layout[0]),
        ("leaf records", header.leaf_records, 1),
        ("digest key id", header.key_id, doc.digest_key_id),
        ("digest size", header.digest_size, view.digest_size),
    )
    for name, got, expected in want:
        if got != expected:
            out.append(
                place.problem(
                    Kind.RECORDS_HEADER_MISMATCH,
                    f"{path}: header {name} {got!r} is not the seal's {expected!r}",
                )
            )
            return None
    rsize, at, parts, block = seal.layout[0], HEADER_SIZE, [], 0
    while at < len(raw):
        count = _COUNT.unpack_from(raw, at)[0] if len(raw) - at >= 4 else 0
        end = at + 4 + count * rsize + _MAC
        if not 1 <= count <= MAX_BLOCK_RECORDS or end > len(raw):
            out.append(
                place.problem(
                    Kind.RECORDS_UNREADABLE,
                    f"{path}: block {block} at byte {at}: "
                    f"count {count} / {len(raw) - at} bytes left do not frame a block",
                )
            )
            return None
        parts.append(raw[at + 4 : end - _MAC])
        at, block = end, block + 1
    return b"".join(parts)


def _each_window(
    records: bytes,
    rsize: int,
    place: SegmentPlace,
    path: Path,
    prev: int | None,
    out: list[Problem],
) -> list[WindowRecord]:
    """Every window record parsed and held to the ledger's window parameters; indexes strictly
    increasing, from `prev` (the log's window before this segment)."""
    params, windows = place.ledger.window, []
    for k in range(len(records) // rsize):
        try:
            w = WindowRecord.parse(
                records[k * rsize : (k + 1) * rsize], f"{path}: window record {k}", k * rsize
            )
        except DataError as e:
            out.append(place.problem(Kind.RECORDS_UNREADABLE, str(e), k))
            continue
        if (w.window_ns, w.cells, w.digest_size) != (
            params.window_ns,
            params.cells,
            params.digest_size,
        ):
            out.append(
                place.problem(
                    Kind.PARAMETER_MISMATCH,
                    f"{path}: window record {k} has {w.window_ns} ns "
                    f"windows of {w.cells} cells, the ledger {params.window_ns} ns and "
                    f"{params.cells}",
                    k,
                )
            )
        if prev is not None and w.index <= prev:
            out.append(
                place.problem(
                    Kind.RECORD_REORDERED,
                    f"{path}: window record {k} is window {w.index}, "
                    f"not after window {prev}: a window is committed once",
                    k,
                )
            )
        prev = w.index
        windows.append(w)
    return windows
