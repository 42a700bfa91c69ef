"""Reading a v1 ledger's segments (docs/adr/0014-v1-behind-one-reader.md): everything verify does
differently for a ledgertool-seal-v1 segment, behind the interface every segment format gives the
per-segment checks (`SegmentFormat`, verify/checks.py). The rest of verify asks the seal's format
and never which version it is.

A v1 seal pins one file, its segment's Parquet file, by name (`parquet_file`), SHA-256
(`parquet_sha256`) and size (`parquet_bytes`); its records are that file's decoded rows, and
nothing else of the segment (no raw record file, no open file) is read. Pure, like the checks.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from ..ledger.layout import PARQUET, segment_name
from ..ledger.parquet import decode_parquet, table_to_records
from .checked import RecordsRead, SealCheck, SegmentPlace
from .problems import Kind, Problem

if TYPE_CHECKING:  # annotations only
    from pathlib import Path

    import pyarrow as pa

    from ..seal.document import Seal

#: a Parquet file beyond its records (footer, schema, page headers): the margin past the size a
#: seal signs within which a longer file is still read (and reported by its size)
PARQUET_SLACK = 1 << 20


class V1Segments:
    """The v1 segment format, read: its one records file is the pinned Parquet file."""

    name = "v1"
    raw_files = False  # no raw record file or open file holds sealed records

    def members_problem(self, doc: Seal, place: SegmentPlace, path: Path) -> Problem | None:
        """seal_malformed when `parquet_file` is not this segment's file name (a seal moved from
        another segment names that segment's file: seal_misplaced says so already)."""
        index = place.index
        if doc.parquet_file == segment_name(index, PARQUET):
            return None
        claimed = doc.segment
        own = (
            isinstance(claimed, int)
            and not isinstance(claimed, bool)
            and 0 <= claimed < 10**8
            and doc.parquet_file == segment_name(claimed, PARQUET)
        )
        if own:
            return None
        shown = repr(doc.parquet_file)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return place.problem(
            Kind.SEAL_MALFORMED,
            f"{path}: parquet_file {shown} is not {segment_name(index, PARQUET)}",
        )

    def records_named(self, seal: SealCheck) -> bool:
        """The seal names its own segment's Parquet file (else its records are not read)."""
        return seal.doc.parquet_file == segment_name(seal.index, PARQUET)

    def file_limit(self, seal: SealCheck) -> int | None:
        """The signed `parquet_bytes` and the slack (a longer file is still its size finding)."""
        size = seal.doc.parquet_bytes
        return size + PARQUET_SLACK if type(size) is int and size >= 0 else None

    def missing(self, seal: SealCheck, read: RecordsRead, place: SegmentPlace) -> Problem:
        return place.problem(Kind.PARQUET_MISSING, f"{place.path(PARQUET)} is missing")

    def decode(
        self,
        seal: SealCheck,
        read: RecordsRead,
        place: SegmentPlace,
        out: list[Problem],
        into=None,
        ahead: int = 0,
    ) -> tuple[pa.Table | None, bytes | None, bytes | None, None]:
        """The Parquet bytes against the seal's SHA-256 and size, then the decoded table and
        records (table, records, leaves None, facts None); findings into `out`."""
        doc, data, pq_path = seal.doc, read.data, place.path(PARQUET)
        if hashlib.sha256(data).hexdigest() != doc.parquet_sha256:
            out.append(
                place.problem(
                    Kind.PARQUET_HASH_MISMATCH,
                    f"{pq_path}: SHA-256 differs from the seal's parquet_sha256",
                )
            )
        elif len(data) != doc.parquet_bytes:  # the signed size must agree too
            out.append(
                place.problem(
                    Kind.PARQUET_HASH_MISMATCH,
                    f"{pq_path}: {len(data)} bytes, seal's parquet_bytes says {doc.parquet_bytes}",
                )
            )
        try:
            table = decode_parquet(data)
            return table, table_to_records(table, seal.layout[0] - 32), None, None
        except Exception as e:  # noqa: BLE001 - any unreadable Parquet is a finding, not a crash
            out.append(
                place.problem(Kind.PARQUET_UNREADABLE, f"{pq_path}: {type(e).__name__}: {e}")
            )
            return None, None, None, None


V1 = V1Segments()
