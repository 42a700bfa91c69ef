"""Sealing: an open segment becomes a Parquet file plus a signed seal document (v1 ledgers), or
stays the raw record file beside a signed seal document (v2 ledgers). The document's format, its
signed bytes and its parse are ledgertool.seal.document; this module writes the files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..digest.engine import merkle_leaves, merkle_root
from ..digest.record import FLAG_GAP, record_dtype
from ..fsio import read_regular, write_atomic
from ..keyfiles import SigningKey
from ..seal.document import (
    MAX_SEAL_BYTES,
    SEAL_FORMAT,
    SEAL_FORMAT_V2,
    Seal,
    parse_seal,
    seal_signed_bytes,
)
from .header import LedgerHeader
from .parquet import records_to_table, write_parquet_atomic


@dataclass(frozen=True)
class SealResult:
    index: int
    records: int
    frames: int
    drops: int
    first_seq: int
    last_seq: int
    seal_hash: str
    torn_bytes: int


@dataclass(frozen=True)
class SegmentTotals:
    """What a seal states about a segment's records (docs/ledger-format.md, "Seal document")."""

    records: int
    frames: int  # records without the GAP flag
    drops: int  # sum of aux over the GAP records
    last_seq: int  # of the last record (first_seq - 1 when there is none)
    first_ts_ns: int | None
    last_ts_ns: int | None
    merkle_root: bytes


def _sign_and_write(
    *,
    ledger_dir: Path,
    ledger: LedgerHeader,
    link: str,
    index: int,
    first_seq: int,
    totals: SegmentTotals,
    files: dict,
    prev_hash: str,
    signing_key: SigningKey,
    seal_file: Path,
    torn_bytes: int,
    source: str | None,
    seal_format: str,
) -> tuple[Seal, SealResult]:
    """The one builder of seal documents: the members common to every format, `files` (v1: the
    Parquet file's name, SHA-256 and size; v2: none) after merkle_root; signed, written
    atomically."""
    doc = {
        "format": seal_format,
        "ledger_id": ledger.ledger_id,
        "link": link,
        "segment": index,
        "algorithm": ledger.algorithm,
        "strip": ledger.strip,
        "digest_key_id": ledger.digest_key_id,
        "record_size": ledger.record_size,
        "leaf_records": ledger.leaf_records,
        # binds the unsigned ledger.json to the chain: verify names an edited header
        "ledger_header_sha256": ledger.sha256,
        "records": totals.records,
        "frames": totals.frames,
        "drops_declared": totals.drops,
        "first_seq": str(first_seq),
        # the last record's own seq: a seal never hides a jump in sequence numbers (verify reports
        # a range wider than the count as an undeclared gap)
        "last_seq": str(totals.last_seq),
        "first_ts_ns": None if totals.first_ts_ns is None else str(totals.first_ts_ns),
        "last_ts_ns": None if totals.last_ts_ns is None else str(totals.last_ts_ns),
        "merkle_root": totals.merkle_root.hex(),
        **files,
        "prev_seal_hash": prev_hash,
        "torn_bytes_discarded": torn_bytes,
        "source": source,
        "sealed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "signer": signing_key.trust_bundle().key_ids,
    }
    doc["signatures"] = signing_key.sign(seal_signed_bytes(doc))
    write_atomic(
        seal_file,
        (json.dumps(doc, indent=1) + "\n").encode(),
        root=ledger_dir,
        what="seal document",
    )
    seal = Seal.of(doc)
    return seal, SealResult(
        index,
        totals.records,
        totals.frames,
        totals.drops,
        first_seq,
        totals.last_seq,
        seal.hash(),
        torn_bytes,
    )


def leaves_file(seal_file: Path) -> Path:
    """The leaf-hash sidecar beside a seal document (seg-N.leaves)."""
    return seal_file.with_name(seal_file.name.removesuffix(".seal.json") + ".leaves")


def seal_records(
    *,
    ledger_dir: Path,
    ledger: LedgerHeader,
    link: str,
    index: int,
    first_seq: int,
    records: bytes,
    prev_hash: str,
    signing_key: SigningKey,
    parquet: Path,
    seal_file: Path,
    torn_bytes: int = 0,
    source: str | None = None,
) -> tuple[Seal, SealResult]:
    """Seal one segment's records in a v1 ledger: write Parquet, compute the Merkle root, sign,
    write the seal.

    `records` are whole fixed-size records (ledger.record_size bytes each), numbered from
    `first_seq`. Returns the seal document and a summary.
    """
    digest_size = ledger.digest_size
    record_size = ledger.record_size
    count = len(records) // record_size
    import numpy as np

    arr = np.frombuffer(records, dtype=record_dtype(digest_size))
    gaps = (arr["flags"] & FLAG_GAP) != 0
    drops = int(arr["aux"][gaps].sum()) if gaps.any() else 0
    table = records_to_table(records, digest_size, index)
    sha, size = write_parquet_atomic(table, parquet, ledger_dir)
    # C, SHA-NI (and BLAKE3 lanes); == merkle.records_leaf_hashes for sha256 leaves
    raw_leaves = merkle_leaves(records, record_size, ledger.leaf_records, ledger.leaf_hash)
    root = merkle_root(raw_leaves)  # C; == merkle.root_from_leaf_hashes
    write_atomic(leaves_file(seal_file), raw_leaves, root=ledger_dir, what="leaf-hash sidecar")
    totals = SegmentTotals(
        count,
        int(count - gaps.sum()),
        drops,
        int(arr["seq"][-1]) if count else first_seq - 1,
        int(arr["ts_ns"][0]) if count else None,
        int(arr["ts_ns"][-1]) if count else None,
        root,
    )
    files = {"parquet_file": parquet.name, "parquet_sha256": sha, "parquet_bytes": size}
    return _sign_and_write(
        ledger_dir=ledger_dir,
        ledger=ledger,
        link=link,
        index=index,
        first_seq=first_seq,
        totals=totals,
        files=files,
        prev_hash=prev_hash,
        signing_key=signing_key,
        seal_file=seal_file,
        torn_bytes=torn_bytes,
        source=source,
        seal_format=SEAL_FORMAT,
    )


def seal_committed(
    *,
    ledger_dir: Path,
    ledger: LedgerHeader,
    link: str,
    index: int,
    first_seq: int,
    totals: SegmentTotals,
    leaves: bytes,
    prev_hash: str,
    signing_key: SigningKey,
    seal_file: Path,
    torn_bytes: int = 0,
    source: str | None = None,
) -> tuple[Seal, SealResult]:
    """Seal one segment of a v2 ledger from what the writer committed to when the records were
    appended (`totals`: counters and Merkle root; `leaves`: the leaf hashes), nothing read back:
    write the seal document (format ledgertool-seal-v2, no Parquet members), then the leaf-hash
    sidecar. The caller then renames the open segment to seg-N.rec (docs/ledger-format.md)."""
    out = _sign_and_write(
        ledger_dir=ledger_dir,
        ledger=ledger,
        link=link,
        index=index,
        first_seq=first_seq,
        totals=totals,
        files={},
        prev_hash=prev_hash,
        signing_key=signing_key,
        seal_file=seal_file,
        torn_bytes=torn_bytes,
        source=source,
        seal_format=SEAL_FORMAT_V2,
    )
    write_atomic(leaves_file(seal_file), leaves, root=ledger_dir, what="leaf-hash sidecar")
    return out


def load_seal(path: Path, root: Path | None = None) -> Seal:
    """Read (fsio.read_regular, below the ledger directory `root` when given) and parse a seal
    document; LedgerFormatError naming the file when it is not one, StorageError / FileTypeError
    when it cannot be read or is not a regular file."""
    return parse_seal(read_regular(path, MAX_SEAL_BYTES, root=root, what="seal document"), path)
