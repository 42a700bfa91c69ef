"""The per-segment checks of verify (steps 1-3 and 5-7 of ledgertool.verify.ledger), pure: each
is a function of bytes already read, the trust (key schedule) and what the ledger header says,
and returns a typed, picklable result. Nothing here opens a file: the caller reads through
LedgerReader before and between the calls (a local raw record file is handed over open, and
read by one native call), in this order:

    check_seal(seal bytes)  ->  SealCheck      (reads_records: whether its records file is needed)
    check_records(SealCheck, RecordsRead) -> RecordsCheck  (merkle_ok False: leaf sidecar wanted)
    merkle_finding(SealCheck, RecordsCheck, leaf sidecar bytes or None) -> merkle_mismatch Problem

What differs between the segment formats (v2: a raw record file or an unpinned Parquet file,
authenticated by the signed root; v1: a Parquet file pinned by the seal) is behind one interface,
`SegmentFormat`, chosen once from the seal (`SealCheck.format`): V2 here, V1 in verify/v1.py.

Checks across segments (the chain, sequence continuity, duplicates, the link tree) are the
per-link reduction in ledgertool.verify.chain.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..digest.engine import merkle_leaves, merkle_root, valid_leaf_records
from ..digest.record import FLAG_GAP, RECORD_FIXED, RecordSink, record_dtype
from ..errors import LedgerFormatError
from ..keyfiles import BAD_SIGNATURE, SignatureFinding, seal_message
from ..ledger.header import LedgerHeader
from ..ledger.layout import OPEN, PARQUET, RECORDS, SEAL
from ..ledger.openmac import MAC_SIZE
from ..ledger.parquet import (
    arrow_schema,
    decode_parquet,
    table_to_records_counted,
)
from ..ledger.reader import OpenRecordFile
from ..ledger.recfile import RecordFacts, RecordFile, parse_record_file
from ..ledger.segment import BLOCK_PREFIX, HEADER_SIZE, MAX_SEGMENT_RECORDS
from ..plural import plural
from ..seal.document import SEAL_FORMAT, SEAL_FORMAT_V2, Seal, parse_seal
from ..seal.rotation import Schedule
from .checked import RecordsCheck, RecordsRead, SealCheck, SegmentPlace, SeqRange
from .problems import Kind, Problem
from .v1 import PARQUET_SLACK, V1

if TYPE_CHECKING:  # imported where used: a v2 ledger whose records verify needs neither
    import numpy as np
    import pyarrow as pa

MAX_PER_KIND = 8  # per segment: record-level findings beyond this are summarised
MAX_LEAVES_BYTES = 32 << 26  # the largest leaf sidecar read (2**26 leaf hashes)


def unreadable_seal(place: SegmentPlace, why: str) -> SealCheck:
    return SealCheck(place.index, None, (place.problem(Kind.SEAL_UNREADABLE, why),))


def check_seal(raw: bytes, place: SegmentPlace) -> SealCheck:
    """Steps 1-3 for the seal bytes `raw` of segment `place`: identity, no downgrade, digest key
    id and signatures (against the schedule's key set for this segment); then the record layout
    and sequence range the record checks rely on, and the Parquet file the seal names."""
    path = place.path(SEAL)
    try:
        doc = parse_seal(raw, path)
    except LedgerFormatError as e:
        return unreadable_seal(place, str(e))
    ledger, link, index = place.ledger, place.link, place.index
    out: list[Problem] = []
    # 1. identity
    if doc.ledger_id != ledger.ledger_id:
        out.append(
            place.problem(Kind.FOREIGN_SEAL, f"{path}: seal belongs to ledger {doc.ledger_id}")
        )
    if doc.link != link or doc.segment != index:
        out.append(
            place.problem(
                Kind.SEAL_MISPLACED, f"{path}: seal is for link {doc.link!r} segment {doc.segment}"
            )
        )
    # 2. no downgrade: the signed hash of ledger.json (seals since it was added), and the
    # parameters each seal repeats (every seal)
    bound = doc.ledger_header_sha256
    for key in ("algorithm", "strip", "record_size", "leaf_records"):
        if getattr(doc, key) != getattr(ledger, key):
            out.append(
                place.problem(
                    Kind.PARAMETER_MISMATCH,
                    f"{path}: {key} {getattr(doc, key)!r} differs from the "
                    f"ledger's {getattr(ledger, key)!r}",
                )
            )
    # the signed body canonicalised once: its SHA-256 is the seal hash, and the signatures sign it
    try:
        body, unsigned_why = doc.signed_body(), None
    except (TypeError, ValueError) as e:
        body, unsigned_why = None, str(e)
    if place.sched is not None:
        out += _key_problems(doc, place, path, body, unsigned_why)
    own_hash = hashlib.sha256(body).hexdigest() if body is not None else None
    records = doc.records
    layout, seq, range_problems = _seal_range(doc, place)
    fmt = segment_format(doc)
    name_problem = fmt.members_problem(doc, place, path)
    check = SealCheck(
        index,
        doc,
        tuple(out),
        own_hash,
        doc.prev_seal_hash,
        records if isinstance(records, int) else 0,
        bound is not None and bound != ledger.sha256,
        layout,
        seq,
        range_problems,
        name_problem,
        place.ledger.leaf_hash,
    )
    return replace(check, records_named=fmt.records_named(check))


#: the members of a ledgertool-seal-v2 document, all required (schemas/seal.schema.json): v1's
#: without parquet_file, parquet_sha256 and parquet_bytes, with ledger_header_sha256
V2_MEMBERS = frozenset(
    (
        "format",
        "ledger_id",
        "link",
        "segment",
        "algorithm",
        "strip",
        "digest_key_id",
        "record_size",
        "leaf_records",
        "ledger_header_sha256",
        "records",
        "frames",
        "drops_declared",
        "first_seq",
        "last_seq",
        "first_ts_ns",
        "last_ts_ns",
        "merkle_root",
        "prev_seal_hash",
        "torn_bytes_discarded",
        "source",
        "sealed_at",
        "signer",
        "signatures",
    )
)


def _v2_members_problem(doc: Seal, place: SegmentPlace, path: Path) -> Problem | None:
    """seal_malformed when a v2 seal lacks a member or has one v2 does not define (a v1 member
    such as parquet_sha256 in a v2 seal would claim a pin that v2 readers never check)."""
    missing, extra = sorted(V2_MEMBERS - doc.members), sorted(doc.members - V2_MEMBERS)
    if not missing and not extra:
        return None
    what = (
        f"lacks {', '.join(missing)}"
        if missing
        else f"has {', '.join(_shown(k) for k in extra[:4])}, not v2 members"
    )
    return place.problem(Kind.SEAL_MALFORMED, f"{path}: {SEAL_FORMAT_V2} seal {what}")


def _key_problems(
    doc: Seal, place: SegmentPlace, path: Path, body: bytes | None, unsigned_why: str | None
) -> list[Problem]:
    """Step 2's digest key id and step 3's signatures, with the keys the schedule assigns here."""
    sched, link, index = place.sched, place.link, place.index
    out = []
    want_kid = sched.digest_key_id_for(link, index)
    if doc.digest_key_id != want_kid:
        out.append(
            place.problem(
                Kind.DIGEST_KEY_MISMATCH,
                f"{path}: digest_key_id {doc.digest_key_id!r} is "
                f"not {want_kid}, the digest key of link {link} segment {index}"
                f"{_digest_key_note(sched, doc.digest_key_id, want_kid)}",
            )
        )
    bundle = sched.bundle_for(link, index)
    if body is None:
        findings = [
            SignatureFinding(BAD_SIGNATURE, None, f"seal cannot be canonicalised ({unsigned_why})")
        ]
    else:
        findings = bundle.verify_detailed(seal_message(body), doc.signatures or {})
    out += [place.problem(Kind(f.kind), f"{path}: {f.detail}") for f in findings]
    return out


def _digest_key_note(sched: Schedule, kid: object, want: str | None) -> str:
    """Why a seal's digest key id is wrong: an old key after its rotation, a key before it takes
    effect, or one no valid statement introduced."""
    numbers = {e.key_id: e.number for e in sched.digest_epochs if e.key_id is not None}
    if not isinstance(kid, str) or kid not in numbers:
        return " (that key was never introduced by a valid rotation)"
    if want in numbers and numbers[kid] < numbers[want]:
        return f" (that key was retired by rotation {sched.retired_by(kid)})"
    return f" (that key takes over at a later segment, by rotation {numbers[kid]})"


def _record_layout(ledger: LedgerHeader, doc: Seal) -> tuple[int, int] | None:
    """(record_size, leaf_records) the segment's records are decoded and hashed with: the seal's
    (signed) values, not the unsigned header's; None when the seal's are out of bounds."""
    rsize = doc.record_size if doc.has("record_size") else ledger.record_size
    leaf = doc.leaf_records if doc.has("leaf_records") else ledger.leaf_records
    if ledger.record_size > RECORD_FIXED + 32 and (rsize, leaf) == (ledger.record_size, 1):
        return rsize, leaf  # a window log's (LedgerHeader.window_view): one window record a leaf
    if (
        type(rsize) is not int
        or rsize not in (RECORD_FIXED + 16, RECORD_FIXED + 32)
        or not valid_leaf_records(leaf)
    ):
        return None
    return rsize, leaf


def _seal_range(
    doc: Seal, place: SegmentPlace
) -> tuple[tuple[int, int] | None, SeqRange | None, tuple[Problem, ...]]:
    """The seal's record layout and sequence range, or the seal_malformed finding that they are
    missing or out of bounds."""
    index = place.index
    layout = _record_layout(place.ledger, doc)
    if layout is None:
        return (
            None,
            None,
            (
                place.problem(
                    Kind.SEAL_MALFORMED,
                    f"segment {index}: record_size "
                    f"{_shown(doc.record_size)} / leaf_records "
                    f"{_shown(doc.leaf_records)} out of bounds",
                ),
            ),
        )
    try:
        first_seq, last_seq = int(doc.first_seq), int(doc.last_seq)  # TypeError: absent (None)
        count = int(doc.records)
    except (TypeError, ValueError, OverflowError):
        return (
            layout,
            None,
            (
                place.problem(
                    Kind.SEAL_MALFORMED, f"segment {index}: seal lacks sequence range or count"
                ),
            ),
        )
    # u64 sequence numbers, and a range no wider than the records could cover (plus the gaps a
    # sealer may skip): a tampered seal must not make the verifier allocate its range.
    if (
        not (0 <= first_seq < 2**64 and first_seq - 1 <= last_seq < 2**64 and 0 <= count <= 2**40)
        or last_seq - first_seq + 1 > max(count, 1) * 1024
    ):
        return (
            layout,
            None,
            (
                place.problem(
                    Kind.SEAL_MALFORMED,
                    f"segment {index}: implausible sequence range "
                    f"{first_seq}..{last_seq} for {plural(count, 'record')}",
                ),
            ),
        )
    return layout, SeqRange(first_seq, last_seq, count), ()


def check_records(
    seal: SealCheck,
    read: RecordsRead,
    place: SegmentPlace,
    into: RecordSink | None = None,
    ahead: int = 0,
) -> RecordsCheck:
    """Steps 5-7 for a seal whose `reads_records`: the records file as the seal's format reads it
    (v2: the raw record file's header and framing, or the Parquet file's schema; v1: the Parquet
    bytes against the seal's SHA-256 and size), then for every format its records (count,
    sequence numbers, timestamps, drops) and Merkle root. Records are decoded with the seal's
    signed layout. `into`: a raw record file's records are copied into that sink's free tail
    (ledgertool.ledger.recfile.parse_record_file, `ahead` passed on) and `records` is that copy,
    the bytes hashed (not counted in the sink: its reader takes them)."""
    if read.not_regular:  # named as a stray already, not read
        return RecordsCheck(())
    path = place.path(read.kind)
    if read.missing:
        return RecordsCheck((segment_format(seal.doc).missing(seal, read, place),))
    if read.error is not None or read.data is None:
        kind = Kind.RECORDS_UNREADABLE if read.kind == RECORDS else Kind.PARQUET_UNREADABLE
        return RecordsCheck((place.problem(kind, str(read.error)),))
    out: list[Problem] = []
    if read.leftover:
        out.append(
            place.problem(
                Kind.COMPACTION_LEFTOVER,
                f"{place.path(PARQUET)}: beside {path}, which was read: "
                "a compaction that did not finish (`ledgertool compact` finishes it)",
            )
        )
    got = segment_format(seal.doc).decode(seal, read, place, out, into, ahead)
    if isinstance(got, RecordsCheck):
        return got
    table, records, leaves, facts = got
    if records is None:
        return RecordsCheck(tuple(out))
    return _record_findings(seal, table, records, leaves, place, out, facts)


class SegmentFormat(Protocol):
    """What the per-segment checks ask of a segment format: V2 (below) and V1 (verify/v1.py)."""

    name: str
    raw_files: bool  # records may be in a raw record file (or, sealed before its rename, .open)

    def members_problem(self, doc: Seal, place: SegmentPlace, path: Path) -> Problem | None:
        """seal_malformed when the seal's members do not name this segment's records as the
        format does; None when they do."""

    def records_named(self, seal: SealCheck) -> bool:
        """Whether the seal names this segment's records (else its records file is not read)."""

    def file_limit(self, seal: SealCheck) -> int | None:
        """The most bytes the segment's records file can hold by what its seal signs."""

    def missing(self, seal: SealCheck, read: RecordsRead, place: SegmentPlace) -> Problem:
        """The finding for a records file that is not there."""

    def decode(
        self,
        seal: SealCheck,
        read: RecordsRead,
        place: SegmentPlace,
        out: list[Problem],
        into: RecordSink | None = None,
        ahead: int = 0,
    ) -> RecordsCheck | tuple:
        """(table, records, leaves, facts) of the file read, findings into `out` (records None
        when they cannot be had); or a whole RecordsCheck when the format settled it."""


def raw_records_file_bytes(records: int, record_size: int) -> int:
    """The most bytes a raw record file of `records` records of `record_size` bytes can hold: its
    header and, per block, at most a 4-byte count and a 32-byte MAC per record (a block of one
    record)."""
    return HEADER_SIZE + records * (record_size + BLOCK_PREFIX + MAC_SIZE)


def records_file_bytes(records: int, record_size: int) -> int:
    """raw_records_file_bytes, or a Parquet file of the same records (within the slack)."""
    return raw_records_file_bytes(records, record_size) + PARQUET_SLACK


def most_records_file_bytes(record_size: int) -> int:
    """records_file_bytes of a segment of the most records any writer seals (MAX_SEGMENT_RECORDS,
    the largest `--segment-records`): the bound of every records file read, whatever a seal
    claims."""
    return records_file_bytes(MAX_SEGMENT_RECORDS, record_size)


class V2Segments:
    """The v2 segment format: a raw record file (framed, MAC-chained blocks) or, once compacted,
    a Parquet file, either authenticated by the seal's signed Merkle root alone."""

    name = "v2"
    raw_files = True

    def members_problem(self, doc: Seal, place: SegmentPlace, path: Path) -> Problem | None:
        return _v2_members_problem(doc, place, path)

    def records_named(self, seal: SealCheck) -> bool:
        return seal.name_problem is None

    def file_limit(self, seal: SealCheck) -> int | None:
        """The raw record file of the seal's records (header, and per block at most a 4-byte
        count and a 32-byte MAC per record) or a Parquet file of them."""
        if seal.seq is None or seal.layout is None:
            return None
        return records_file_bytes(seal.seq.count, seal.layout[0])

    def missing(self, seal: SealCheck, read: RecordsRead, place: SegmentPlace) -> Problem:
        return _v2_missing(seal, read, place)

    def decode(
        self,
        seal: SealCheck,
        read: RecordsRead,
        place: SegmentPlace,
        out: list[Problem],
        into: RecordSink | None = None,
        ahead: int = 0,
    ) -> RecordsCheck | tuple:
        if read.kind != RECORDS:
            return _v2_parquet_records(seal, read.data, place, out)
        if not place.records_wanted:
            done = _rec_in_place(seal, read.data, place, list(out))
            if done is not None:
                return done
        return _rec_records(seal, read.data, place, out, into, ahead)


V2 = V2Segments()
_FORMATS: dict[str, SegmentFormat] = {SEAL_FORMAT_V2: V2, SEAL_FORMAT: V1}


def segment_format(doc: Seal | None) -> SegmentFormat:
    """The format the seal `doc` was written in (V2 for none: nothing of it is read then)."""
    return _FORMATS.get(doc.format, V2) if doc is not None else V2


def _v2_missing(seal: SealCheck, read: RecordsRead, place: SegmentPlace) -> Problem:
    why = (
        f"; {place.path(OPEN)} is still there: `ledgertool recover` renames it when its records "
        "match the seal's root"
        if read.open_file
        else ""
    )
    return place.problem(
        Kind.RECORDS_MISSING,
        f"segment {place.index}: neither {place.path(RECORDS)} nor "
        f"{place.path(PARQUET)} exists{why}",
    )


def _rec_in_place(
    seal: SealCheck, data: pa.Buffer | OpenRecordFile, place: SegmentPlace, out: list[Problem]
) -> RecordsCheck | None:
    """A v2 raw record file whose records no reader wants: its leaves hashed in `data`, nothing
    copied. The check when every finding is a warning and the root is the seal's; otherwise None,
    and the caller checks the file again with its records copied out (whose findings name them; an
    open file is read again, so the findings are those of the records that pass copied)."""
    rec = _rec_file(seal, data, place, out, keep_records=False)
    if rec is None or any(not p.kind.is_warning for p in out):
        return None
    seq, facts = seal.seq, rec.facts
    if not (
        facts.seq_contiguous and rec.count == seq.count and seq.last == seq.first + rec.count - 1
    ):
        return None
    check = _fast_findings(seal, None, rec.leaves, place, out, facts)
    return (
        replace(check, in_place=True)
        if check.merkle_ok and not any(not p.kind.is_warning for p in check.problems)
        else None
    )


def _rec_records(
    seal: SealCheck,
    data: pa.Buffer | OpenRecordFile,
    place: SegmentPlace,
    out: list[Problem],
    into: RecordSink | None = None,
    ahead: int = 0,
) -> tuple[None, pa.Buffer | None, bytes | None, RecordFacts | None]:
    """A v2 raw record file: framing (natively), the header against the seal; its records (and
    leaves) are exactly the bytes that are hashed (copied into `into`'s free tail when given)."""
    rec = _rec_file(seal, data, place, out, into=into, ahead=ahead)
    if rec is None:
        return None, None, None, None
    return (
        None,
        rec.records,
        rec.leaves,
        rec.facts,
    )  # the table: for the readers that want one (verify.ledger)


def _rec_file(
    seal: SealCheck,
    data: pa.Buffer | OpenRecordFile,
    place: SegmentPlace,
    out: list[Problem],
    *,
    keep_records: bool = True,
    into: RecordSink | None = None,
    ahead: int = 0,
) -> RecordFile | None:
    """The raw record file parsed with the seal's layout and its header compared with the seal
    (findings into `out`); None when it does not parse."""
    record_size, leaf_records = seal.layout
    path = place.path(RECORDS)
    try:
        rec = parse_record_file(
            data,
            path,
            record_size,
            leaf_records,
            seal.seq.first,
            keep_records=keep_records,
            leaf_hash=seal.leaf_hash,
            into=into,
            ahead=ahead,
        )
    except LedgerFormatError as e:
        out.append(place.problem(Kind.RECORDS_UNREADABLE, str(e)))
        return None
    doc, h = seal.doc, rec.header
    fields = (
        ("ledger id", h.ledger_id, place.ledger.ledger_id),
        ("link", h.link, place.link),
        ("segment index", h.index, place.index),
        ("first seq", h.first_seq, seal.seq.first),
        ("algorithm", h.algorithm, doc.algorithm),
        ("strip mode", h.strip, doc.strip),
        ("record size", h.record_size, record_size),
        ("leaf records", h.leaf_records, leaf_records),
        ("digest key id", h.key_id, doc.digest_key_id),
    )
    differ = [f"{name} {got!r} (seal: {_shown(want)})" for name, got, want in fields if got != want]
    if differ:
        out.append(
            place.problem(
                Kind.RECORDS_HEADER_MISMATCH, f"{path}: header says {'; '.join(differ[:3])}"
            )
        )
    return rec


def _v2_parquet_records(
    seal: SealCheck, data: pa.Buffer, place: SegmentPlace, out: list[Problem]
) -> tuple[pa.Table | None, memoryview | None, bytes | None, RecordFacts | None]:
    """A v2 segment's Parquet file (written by compaction; not pinned by the seal): exactly the
    columns of docs/ledger-format.md, no nulls, `segment` this segment's index; the records the
    other columns rebuild are then authenticated by the Merkle root like a raw file's."""
    import pyarrow.compute as pc

    record_size = seal.layout[0]
    pq_path = place.path(PARQUET)
    try:
        table = decode_parquet(data)
        want = arrow_schema(record_size - 32)
        if not table.schema.remove_metadata().equals(want):
            raise ValueError(
                f"columns {table.schema.names} / types differ from the sealed-records schema"
            )
        if any(table.column(c).null_count for c in want.names):
            raise ValueError("a column holds nulls")
        segs = table.column("segment")
        if table.num_rows and not (pc.min(segs).as_py() == pc.max(segs).as_py() == place.index):
            raise ValueError(f"column segment is not {place.index} in every row")
        # the columns in bulk, interleaved natively with the counts the raw file's walk makes
        records, counted = table_to_records_counted(table, record_size - 32, seal.seq.first)
        return table, records, None, RecordFacts(*counted)
    except Exception as e:  # noqa: BLE001 - any unreadable Parquet is a finding, not a crash
        out.append(place.problem(Kind.PARQUET_UNREADABLE, f"{pq_path}: {type(e).__name__}: {e}"))
        return None, None, None, None


def _record_findings(
    seal: SealCheck,
    table: pa.Table | None,
    records,
    leaves: bytes | None,
    place: SegmentPlace,
    out: list[Problem],
    facts: RecordFacts | None = None,
) -> RecordsCheck:
    """Step 6 and 7 over the decoded records: count, sequence, timestamps, drops, Merkle root
    (`leaves` when the decoder already hashed them; `facts` when it already counted GAP records,
    drops and timestamps and found seq contiguous: then no pass over the records is made here)."""
    doc, seq = seal.doc, seal.seq
    record_size, leaf_records = seal.layout
    n = len(records) // record_size
    if (
        facts is not None
        and facts.seq_contiguous
        and n == seq.count
        and seq.last == seq.first + n - 1
    ):
        return _fast_findings(seal, records, leaves, place, out, facts, table)
    import numpy as np

    arr = np.frombuffer(records, dtype=record_dtype(record_size - 32))
    gaps = (arr["flags"] & FLAG_GAP) != 0
    frames = int(n - gaps.sum())
    drops = int(arr["aux"][gaps].sum())
    if n != seq.count:
        form = "its raw record file" if table is None else "Parquet"
        out.append(
            place.problem(
                Kind.COUNT_MISMATCH,
                f"segment {place.index}: {plural(n, 'record')} in {form}, seal says {seq.count}",
            )
        )
    elif frames != doc.frames:
        out.append(
            place.problem(
                Kind.COUNT_MISMATCH,
                f"segment {place.index}: {frames} frame records, seal's frames says {doc.frames}",
            )
        )
    if n:
        out += sequence_findings(arr["seq"].astype(np.int64), seq, place)
        if (
            str(int(arr["ts_ns"][0])) != doc.first_ts_ns
            or str(int(arr["ts_ns"][-1])) != doc.last_ts_ns
        ):
            out.append(
                place.problem(
                    Kind.TIMESTAMP_MISMATCH,
                    f"segment {place.index}: first/last timestamps differ from the seal",
                )
            )
    if drops != doc.drops_declared:
        out.append(
            place.problem(
                Kind.DROPS_MISMATCH,
                f"segment {place.index}: GAP records declare {drops} drops, "
                f"seal says {doc.drops_declared}",
            )
        )
    # in C (SHA-NI leaves and tree); ledgertool.seal.merkle is the pure-Python reference the tests
    # compare with
    if leaves is None:
        leaves = merkle_leaves(records, record_size, leaf_records, seal.leaf_hash)
    root = merkle_root(leaves).hex()
    return RecordsCheck(tuple(out), table, records, n, frames, drops, root == doc.merkle_root)


def _fast_findings(
    seal: SealCheck,
    records,
    leaves: bytes | None,
    place: SegmentPlace,
    out: list[Problem],
    facts: RecordFacts,
    table: pa.Table | None = None,
) -> RecordsCheck:
    """_record_findings for records whose count and seq the decoder found exactly as sealed
    (`table`: the decoded Parquet file they were rebuilt from, if so)."""
    doc = seal.doc
    n = seal.seq.count
    frames = n - facts.gaps
    if frames != doc.frames:
        out.append(
            place.problem(
                Kind.COUNT_MISMATCH,
                f"segment {place.index}: {frames} frame records, seal's frames says {doc.frames}",
            )
        )
    if n and (str(facts.first_ts_ns) != doc.first_ts_ns or str(facts.last_ts_ns) != doc.last_ts_ns):
        out.append(
            place.problem(
                Kind.TIMESTAMP_MISMATCH,
                f"segment {place.index}: first/last timestamps differ from the seal",
            )
        )
    if facts.drops != doc.drops_declared:
        out.append(
            place.problem(
                Kind.DROPS_MISMATCH,
                f"segment {place.index}: GAP records declare {facts.drops} "
                f"drops, seal says {doc.drops_declared}",
            )
        )
    if leaves is None:
        leaves = merkle_leaves(records, *seal.layout, seal.leaf_hash)
    root = merkle_root(leaves).hex()
    return RecordsCheck(tuple(out), table, records, n, frames, facts.drops, root == doc.merkle_root)


def merkle_finding(
    seal: SealCheck,
    recs: RecordsCheck,
    leaves: bytes | None,
    place: SegmentPlace,
    kind: str = PARQUET,
) -> RecordsCheck:
    """`recs` with its merkle_mismatch finding added: the changed leaf blocks when the leaf-hash
    sidecar `leaves` is authentic (its own root is the seal's), else the plain mismatch. The detail
    starts with the records file read (`kind`: PARQUET or RECORDS, RecordsRead.kind), as the other
    kinds of a file's finding do."""
    leaf, path = seal.layout[1], place.path(kind)
    changed = changed_leaves(
        leaves, recs.records, seal.layout, str(seal.doc.merkle_root), seal.leaf_hash
    )
    if changed:
        blocks = ", ".join(
            f"{c * leaf}..{min((c + 1) * leaf, max(recs.n, seal.seq.count)) - 1}"
            for c in changed[:4]
        )
        more = f" and {len(changed) - 4} more blocks" if len(changed) > 4 else ""
        p = place.problem(
            Kind.MERKLE_MISMATCH,
            f"{path}: Merkle root differs from the seal; changed "
            f"leaf blocks: records {blocks}{more} (leaf {changed[0]}, {plural(leaf, 'record')} per "
            "leaf)",
            changed[0] * leaf,
        )
    else:
        p = place.problem(
            Kind.MERKLE_MISMATCH,
            f"{path}: Merkle root over its {plural(recs.n, 'record')} "
            "differs from the seal (a record was changed)",
        )
    return replace(recs, problems=recs.problems + (p,), merkle_ok=True)


def changed_leaves(
    raw: bytes | None, records: bytes, layout: tuple[int, int], root: str, leaf_hash: str
) -> list[int] | None:
    """Indexes of leaves whose hash differs from the sealed tree, using the leaf-hash sidecar when
    its own root equals the seal's (so it is authentic); None when that is not possible."""
    if raw is None or len(raw) % 32 or merkle_root(raw).hex() != root:
        return None
    sealed = [raw[i : i + 32] for i in range(0, len(raw), 32)]
    fresh = merkle_leaves(records, *layout, leaf_hash)
    now = [fresh[i : i + 32] for i in range(0, len(fresh), 32)]
    return [
        i
        for i in range(max(len(now), len(sealed)))
        if i >= len(now) or i >= len(sealed) or now[i] != sealed[i]
    ]


def sequence_findings(seqs: np.ndarray, seq: SeqRange, place: SegmentPlace) -> list[Problem]:
    """Name deleted, duplicated, reordered records and undeclared gaps by record index.

    The seal fixes the range [first, last] and the count. A seal whose own range is wider than
    its count was sealed over a sequence gap (`sequence_gap`); a value of the range missing from
    a consistent seal's records was deleted afterwards (`record_missing`)."""
    import numpy as np

    first_seq, last_seq, count, index = seq.first, seq.last, seq.count, place.index
    n = len(seqs)
    # The common case, an untouched segment: seqs are exactly first_seq, first_seq + 1, ...,
    # last_seq. One vectorised pass decides it; the sorting and set work below is only for naming
    # what broke.
    if (
        n
        and n == count
        and int(seqs[0]) == first_seq
        and int(seqs[-1]) == last_seq
        and last_seq - first_seq + 1 == n
        and bool(np.all(np.diff(seqs) == 1))
    ):
        return []
    out: list[Problem] = []
    found: dict[Kind, int] = {}

    def add(kind: Kind, k: int | None, detail: str) -> None:
        found[kind] = found.get(kind, 0) + 1
        if found[kind] <= MAX_PER_KIND:
            out.append(place.problem(kind, detail, k))

    # duplicates: every occurrence after the first
    order = np.argsort(seqs, kind="stable")
    srt = seqs[order]
    dup_pos = np.sort(order[1:][srt[1:] == srt[:-1]]) if n > 1 else np.array([], dtype=np.int64)
    for k in dup_pos:
        add(
            Kind.RECORD_DUPLICATED,
            int(k),
            f"segment {index} record {int(k)}: seq {int(seqs[k])} appears again",
        )
    uniq = np.unique(seqs)
    outside = uniq[(uniq < first_seq) | (uniq > last_seq)]
    for v in outside[:MAX_PER_KIND]:
        k = int(np.nonzero(seqs == v)[0][0])
        add(
            Kind.RANGE_MISMATCH,
            k,
            f"segment {index} record {k}: seq {int(v)} outside the seal's {first_seq}..{last_seq}",
        )
    inside = uniq[(uniq >= first_seq) & (uniq <= last_seq)]
    span = last_seq - first_seq + 1
    if len(inside) < span:
        sealed_over_gap = count < span
        # runs of consecutive missing values: the holes between the values present (and before the
        # first, after the last), found from the records read; never a bitmap of the seal's range,
        # whose width is the seal's (the storage holder's, unsigned without --trust) number: a
        # range of 2^40 over 100 records asked for a 1 TiB array
        holes = np.flatnonzero(np.diff(inside) > 1)
        runs = list(zip((inside[holes] + 1).tolist(), (inside[holes + 1] - 1).tolist()))
        if not len(inside):
            runs = [(first_seq, last_seq)]
        else:
            if int(inside[0]) > first_seq:
                runs.insert(0, (first_seq, int(inside[0]) - 1))
            if int(inside[-1]) < last_seq:
                runs.append((int(inside[-1]) + 1, last_seq))
        for lo, hi in runs:
            k = int(np.searchsorted(srt, lo))  # (srt: seqs sorted, once)
            what = f"seq {lo}" if lo == hi else f"seq {lo}..{hi} ({hi - lo + 1} records)"
            if sealed_over_gap:
                add(
                    Kind.SEQUENCE_GAP,
                    k,
                    f"segment {index} record {k}: {what} skipped and not declared as drops",
                )
            else:
                add(
                    Kind.RECORD_MISSING,
                    k,
                    f"segment {index} record {k}: {what} deleted (the seal covers it)",
                )
    if not len(dup_pos) and np.any(np.diff(seqs) < 0):
        k = int(np.nonzero(seqs != np.sort(seqs))[0][0])
        add(
            Kind.RECORD_REORDERED, k, f"segment {index} record {k}: seq {int(seqs[k])} out of order"
        )
    for kind, c in found.items():
        if c > MAX_PER_KIND:
            out.append(
                place.problem(
                    kind,
                    f"segment {index}: {plural(c - MAX_PER_KIND, f'more {kind} finding')} not "
                    "listed",
                )
            )
    return out


def _shown(value: object) -> str:
    """An untrusted seal value for a message: repr, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
