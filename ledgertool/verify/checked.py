"""The values the per-segment checks of verify take and give (verify/checks.py, and each segment
format's reader: verify/v1.py): which segment is checked against what, what its seal and its
records file gave. Typed, frozen and picklable (the cluster tasks send them between processes).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..ledger.header import LedgerHeader
from ..ledger.layout import PARQUET
from ..ledger.reader import OpenRecordFile, segment_file
from ..seal.document import Seal
from ..seal.rotation import Schedule
from .problems import Kind, Problem

if TYPE_CHECKING:  # imported where used: a v2 ledger whose records verify needs neither
    import pyarrow as pa


@dataclass(frozen=True)
class SegmentPlace:
    """Which segment is checked, and against what: the ledger header and the key schedule
    (None: the keyless checks, signatures and digest key ids unchecked)."""

    ledger: LedgerHeader
    link: str
    index: int
    link_dir: Path
    sched: Schedule | None
    # False when no reader wants this segment's records (plain verify): a raw record file's leaves
    # are then hashed where they lie and its records are not copied out (RecordsCheck.records None)
    records_wanted: bool = True

    def path(self, kind: str) -> Path:
        return segment_file(self.link_dir, self.index, kind)

    def problem(self, kind: Kind, detail: str, record: int | None = None) -> Problem:
        return Problem(kind, self.index, detail, self.link, record)


@dataclass(frozen=True)
class SeqRange:
    """The seal's sequence range and record count, checked to be plausible."""

    first: int
    last: int
    count: int


@dataclass(frozen=True)
class SealCheck:
    """Steps 1-3 of one seal, and what the chain reduction needs from it. `doc` None: the seal
    did not read or parse (`problems` says why). `range_problems` non-empty (layout or sequence
    range out of bounds) stops the segment's record checks and its sequence-continuity check."""

    index: int
    doc: Seal | None
    problems: tuple[Problem, ...]
    seal_hash: str | None = None  # None when the seal cannot be canonicalised
    prev_seal_hash: object = None  # as the seal claims it (untrusted)
    tree_records: int = 0
    signs_other_header: bool = (
        False  # ledger_header_sha256 names another ledger.json than the one read
    )
    layout: tuple[int, int] | None = None  # (record_size, leaf_records), the seal's signed values
    seq: SeqRange | None = None
    range_problems: tuple[Problem, ...] = ()
    name_problem: Problem | None = None  # parquet_file names a file that is not this segment's
    leaf_hash: str = "sha256"  # ledger.json's (bound by ledger_header_sha256)
    # the seal names this segment's records as its format does (v2: its members are v2's; v1: its
    # own segment's Parquet file): SegmentFormat.records_named, set by check_seal
    records_named: bool = False

    @property
    def readable(self) -> bool:
        return self.doc is not None

    @property
    def reads_records(self) -> bool:
        """Whether the record checks run, so the segment's records file is to be read."""
        return self.seq is not None and not self.range_problems and self.records_named


@dataclass(frozen=True)
class RecordsRead:
    """What reading a segment's records file gave: its bytes, or why there are none (`missing`:
    no such file; `not_regular`: a non-regular file there, reported as a stray and never read;
    `error`: the reader's message). `kind` is the file read: PARQUET, or (formats with raw files)
    RECORDS, the raw record file, which a reader takes when present; `leftover` says that a
    Parquet file is beside it (a compaction that did not finish: not read); `open_file` (missing)
    that the segment's .open file is still there (a seal written before its rename)."""

    # OpenRecordFile: a local raw record file, read by its walk
    data: pa.Buffer | OpenRecordFile | None = None
    missing: bool = False
    not_regular: bool = False
    error: str | None = None
    kind: str = PARQUET
    leftover: bool = False
    open_file: bool = False


@dataclass(frozen=True)
class RecordsCheck:
    """Steps 5-7 of one segment. `table`/`records` are the decoded Parquet file and its record
    bytes (None when it could not be read or decoded; a raw record file has records and no table:
    verify.ledger builds it for the readers that want one); `merkle_ok` False asks for the merkle
    finding (`merkle_finding`, with the leaf sidecar)."""

    problems: tuple[Problem, ...]
    table: pa.Table | None = None
    records: bytes | None = None
    n: int = 0
    frames: int = 0
    drops: int = 0
    merkle_ok: bool = True
    # a raw record file checked where it was read, nothing copied out (records None): its records
    # passed every check all the same (a missing or unreadable file has records None too)
    in_place: bool = False
