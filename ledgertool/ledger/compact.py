"""Compaction: a v2 segment's raw record file becomes its Parquet file (docs/ledger-format.md,
"Sealed segment: Parquet"; ADR 0010).

A v2 seal signs the Merkle root of the records, not a file, so either form of a sealed segment is
authenticated by recomputing that root from the records it yields. Compaction takes the writer lock,
and for each v2 segment that still has `seg-N.rec`: reads it once, checks its framing, its header
against the seal and the root over its records against the seal's `merkle_root`, writes the Parquet
file from exactly those checked records (atomically: temporary file, fsync, rename, directory fsync;
`seal.PARQUET_OPTIONS`), then unlinks the `.rec` and fsyncs the directory. A crash between the two
leaves both files; readers take the `.rec` (the Parquet file is a leftover), and the next compaction
rewrites the Parquet file from the `.rec` again and finishes. A `.rec` whose records do not match
its seal is refused (DiscrepancyError, naming the segment) and left as it is: nothing is written
from bytes that are not the sealed ones.

Compaction does not check signatures (it holds no trust bundle): a forged seal stays forged, and
`ledgertool verify` finds it in either form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import fsio
from ..digest.engine import merkle_root, valid_leaf_records
from ..digest.record import RECORD_FIXED
from ..errors import DiscrepancyError, LedgerFormatError
from ..plural import plural
from ..progress import Progress, ProgressFn
from ..seal.document import parse_seal
from ..seal.prune import check_prunes, parse_prune
from .header import parse_ledger_header
from .layout import LEDGER_FILE, OPEN, PARQUET, RECORDS, SEAL, segment_name
from .lock import writer_lock
from .parquet import records_to_table, write_parquet_atomic
from .reader import LedgerReader
from .recfile import parse_record_file


@dataclass(frozen=True)
class Compacted:
    """One segment compacted: its records, the Parquet file's size, and whether a Parquet file of
    an interrupted compaction was already there (and was rewritten)."""

    link: str
    index: int
    records: int
    parquet_bytes: int
    finished_leftover: bool

    def to_json(self) -> dict:
        return {
            "link": self.link,
            "segment": self.index,
            "records": self.records,
            "parquet_bytes": self.parquet_bytes,
            "finished_leftover": self.finished_leftover,
        }


@dataclass
class CompactResult:
    ledger: str
    compacted: list[Compacted] = field(default_factory=list)
    already_parquet: int = (
        0  # sealed segments that were Parquet already (v1, or v2 compacted before)
    )

    @property
    def records(self) -> int:
        return sum(c.records for c in self.compacted)

    def to_json(self) -> dict:
        return {
            "ok": True,
            "ledger": self.ledger,
            "compacted": [c.to_json() for c in self.compacted],
            "segments_compacted": len(self.compacted),
            "records": self.records,
            "already_parquet": self.already_parquet,
        }


def compact_ledger(
    directory: Path, links: list[str] | None = None, progress: ProgressFn | None = None
) -> CompactResult:
    """Compact every v2 segment of `links` (default: all) that is still a raw record file, in
    link and segment order, under the writer lock. v1 segments (Parquet pinned by their seal) are
    left alone. LedgerLockedError when another writer holds the lock; LedgerFormatError when DIR
    is not a ledger or a link is unknown; DiscrepancyError (the segment named, nothing of it
    written) when a raw record file does not frame, or its header or records do not match its
    seal, when a sealed segment has no record file in either form (LedgerFormatError, asking for
    `recover`, when it is still the .open file a capture stopped before renaming), or when
    something not a regular file (a FIFO, a symbolic link, a directory, a device) is at its
    record file's name (named, never opened); segments before it in the link are compacted
    already. StorageError / FileTypeError from the file system. `progress` gets sealed segments
    done of all of the chosen links' (and records compacted), one update a segment."""
    directory = Path(directory)
    reader = LedgerReader(directory)
    header = parse_ledger_header(reader.read_header_bytes(), directory / LEDGER_FILE)
    chosen = reader.links if links is None else list(dict.fromkeys(links))  # each link once
    unknown = sorted(set(chosen) - set(reader.links))
    if unknown:
        raise LedgerFormatError(
            f"{directory}: no link named {', '.join(unknown)} (links: "
            f"{', '.join(reader.links) or 'none'})"
        )
    res = CompactResult(str(directory))
    with writer_lock(directory, "compact"):
        reader = LedgerReader(directory)  # listed again under the lock: no writer moves files now
        # record files `prune` removed under its statements (verify checks those) are not missing
        statements = [parse_prune(raw, str(p)) for p, raw in reader.read_prune_files()]
        pruned = check_prunes(header.ledger_id, statements, None)
        listings = {link: reader.listing(link) for link in chosen}
        total, done = sum(len(x.sealed) for x in listings.values()), 0

        def report(link: str, index: int) -> None:
            if progress is not None:
                progress(
                    Progress(
                        "compact",
                        done,
                        total,
                        "segments",
                        res.records,
                        "records",
                        f"link {link} segment {index}",
                    )
                )

        for link in chosen:
            listing = listings[link]
            # a non-regular file (FIFO, link, directory, device) at a segment file's name is never
            # opened; compaction names it and stops, as verify lists it, instead of skipping it
            shadowed = {
                s.shadows: s
                for s in listing.strays
                if s.shadows is not None
                and s.path.name
                in (segment_name(s.shadows, RECORDS), segment_name(s.shadows, PARQUET))
            }
            for index in listing.sealed:
                if index in shadowed:
                    raise DiscrepancyError(
                        f"{shadowed[index].path}: {shadowed[index].why}; segment {index} of "
                        f"link {link} not compacted (`ledgertool verify`)"
                    )
                if not listing.has(index, RECORDS):
                    # a capture stopped between the seal and the rename
                    if listing.has(index, OPEN):
                        raise LedgerFormatError(
                            f"{reader.segment_path(link, index, OPEN)}: segment {index} of link "
                            f"{link} is sealed but not yet renamed to "
                            f"{segment_name(index, RECORDS)}; run `ledgertool recover {directory}` "
                            "first, then compact"
                        )
                    if not listing.has(index, PARQUET) and index in pruned.of(link):
                        continue
                    if not listing.has(index, PARQUET):
                        raise DiscrepancyError(
                            f"{reader.segment_path(link, index, RECORDS)}: segment {index} of link "
                            f"{link} is sealed but has neither {segment_name(index, RECORDS)} nor "
                            f"{segment_name(index, PARQUET)}; not compacted (`ledgertool verify`)"
                        )
                    res.already_parquet += 1
                    done += 1
                    continue
                report(link, index)
                res.compacted.append(
                    _compact_segment(reader, link, index, listing.has(index, PARQUET))
                )
                done += 1
                report(link, index)
    return res


def _compact_segment(reader: LedgerReader, link: str, index: int, leftover: bool) -> Compacted:
    """Check one raw record file against its seal, write its Parquet file, unlink it."""
    rec_path = reader.segment_path(link, index, RECORDS)
    seal = parse_seal(reader.read_seal_bytes(link, index), reader.segment_path(link, index, SEAL))
    if not seal.v2:
        raise DiscrepancyError(
            f"{rec_path}: segment {index} of link {link} has a {seal.format} seal, which "
            "pins a Parquet file: a raw record file does not belong to it (`ledgertool verify`)"
        )
    record_size, leaf_records = seal.record_size, seal.leaf_records
    if (
        type(record_size) is not int
        or record_size not in (RECORD_FIXED + 16, RECORD_FIXED + 32)
        or not valid_leaf_records(leaf_records)
    ):
        raise DiscrepancyError(
            f"{reader.segment_path(link, index, SEAL)}: record_size / leaf_records out of bounds"
        )
    try:
        rec = parse_record_file(
            reader.read_segment_file(link, index, RECORDS), rec_path, record_size, leaf_records
        )
    except LedgerFormatError as e:
        raise DiscrepancyError(f"{e}; segment {index} of link {link} not compacted") from None
    h = rec.header
    if (h.ledger_id, h.link, h.index, str(h.first_seq), h.record_size) != (
        seal.ledger_id,
        link,
        index,
        seal.first_seq,
        record_size,
    ):
        raise DiscrepancyError(
            f"{rec_path}: its header names ledger {h.ledger_id} link {h.link} segment {h.index} "
            f"first seq {h.first_seq}, not its seal's; segment {index} of link {link} not compacted"
        )
    if rec.count != seal.records or merkle_root(rec.leaves).hex() != seal.merkle_root:
        raise DiscrepancyError(
            f"{rec_path}: its {plural(rec.count, 'record')} {'does' if rec.count == 1 else 'do'} "
            f"not match the seal's Merkle root ({seal.records} records); segment {index} of link "
            f"{link} not compacted "
            "(`ledgertool verify` names what differs)"
        )
    table = records_to_table(rec.records, record_size - RECORD_FIXED, index)
    _, size = write_parquet_atomic(
        table, reader.segment_path(link, index, PARQUET), reader.directory
    )
    fsio.unlink(rec_path, root=reader.directory)
    fsio.fsync_dir(rec_path.parent, reader.directory)
    return Compacted(link, index, rec.count, size, leftover)
