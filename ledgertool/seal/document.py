"""Sealing: an open segment becomes a Parquet file plus a signed seal document (v1 ledgers), or
stays the raw record file beside a signed seal document (v2 ledgers).

The seal document (docs/ledger-format.md, "Seal") is JSON; its signed bytes are the RFC 8785
canonical encoding of the document without its "signatures" member, prefixed with the domain
separator of keys.seal_message. u64 values (sequence numbers, timestamps) are decimal strings
because RFC 8785 numbers are IEEE doubles. Seals are hash-chained per link: each names the
SHA-256 of the previous seal's signed body; the first names a genesis hash derived from the
ledger id and link.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ..digest.engine import merkle_leaves, merkle_root
from ..digest.record import FLAG_GAP, record_dtype
from ..errors import LedgerFormatError
from ..fsio import read_regular, write_atomic
from ..keyfiles import SigningKey, seal_message
from ..ledger.header import LedgerHeader
from .canonical import canonical_json, loads_strict

if TYPE_CHECKING:  # imported where Parquet is written or read: a v2 capture and verify load neither
    import pyarrow as pa

SEAL_FORMAT = "ledgertool-seal-v1"
#: ledger format v2: the records are a raw record file or Parquet, authenticated by the root alone
SEAL_FORMAT_V2 = "ledgertool-seal-v2"
SEAL_FORMATS = (SEAL_FORMAT, SEAL_FORMAT_V2)
MAX_SEAL_BYTES = 1 << 20  # a hybrid-signed seal is about 6 KB


def arrow_schema(digest_size: int) -> pa.Schema:
    """Arrow/Parquet schema of sealed records (schemas/records.arrow.json)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("segment", pa.uint32()),
            ("seq", pa.uint64()),
            ("ts_ns", pa.int64()),
            ("wire_len", pa.uint32()),
            ("cap_len", pa.uint32()),
            ("flags", pa.uint16()),
            ("linktype", pa.uint16()),
            ("aux", pa.uint32()),
            ("digest", pa.binary(digest_size)),
        ]
    )


def records_to_table(records: bytes, digest_size: int, segment: int) -> pa.Table:
    """Fixed-size record bytes -> Arrow table (zero Python work per record)."""
    import numpy as np
    import pyarrow as pa

    arr = np.frombuffer(records, dtype=record_dtype(digest_size))
    n = len(arr)
    digests = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(digest_size), n, [None, pa.py_buffer(np.ascontiguousarray(arr["digest"]).tobytes())]
    )
    cols = [
        pa.array(np.full(n, segment, dtype=np.uint32)),
        pa.array(arr["seq"]), pa.array(arr["ts_ns"]), pa.array(arr["wire_len"]),
        pa.array(arr["cap_len"]), pa.array(arr["flags"]), pa.array(arr["linktype"]),
        pa.array(arr["aux"]), digests,
    ]
    return pa.Table.from_arrays(cols, schema=arrow_schema(digest_size))


def table_to_records(table: pa.Table, digest_size: int) -> bytes:
    """Arrow table -> the exact fixed-size record bytes the Merkle root covers."""
    import numpy as np

    n = table.num_rows
    arr = np.zeros(n, dtype=record_dtype(digest_size))
    for name in ("seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux"):
        arr[name] = table.column(name).to_numpy(zero_copy_only=False)
    dig = table.column("digest").combine_chunks()
    raw = dig.buffers()[1]
    start = dig.offset * digest_size
    arr["digest"] = np.frombuffer(raw, dtype=f"V{digest_size}", count=n, offset=start)
    return arr.tobytes()


#: Parquet writer settings, measured on 1M 48-byte records (docs/adr/0010, "Measurements"): zstd
#: for every column but the digest (random bytes: compressing them costs time and saves nothing),
#: delta encoding for the monotone seq / ts_ns, dictionaries only for the low-cardinality columns.
#: 9.6 M records/s and 16.0 MB against 5.9 M records/s and 18.9 MB for zstd on every column.
#: Readers see the same schema and values; only the encodings differ.
PARQUET_OPTIONS = dict(
    compression={c: ("none" if c == "digest" else "zstd") for c in
                 ("segment", "seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux", "digest")},
    use_dictionary=["segment", "linktype", "flags"],
    column_encoding={"seq": "DELTA_BINARY_PACKED", "ts_ns": "DELTA_BINARY_PACKED"},
)


def write_parquet_atomic(table: pa.Table, path: Path, root: Path | None = None) -> tuple[str, int]:
    """Write a Parquet file atomically (fsio.write_atomic, below `root`); return (sha256 hex, size
    in bytes). The file is encoded in memory and hashed there, so it is not read back from disk to
    be hashed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, write_statistics=True, row_group_size=1 << 20, **PARQUET_OPTIONS)
    data = sink.getvalue()
    write_atomic(path, data, root=root, what="segment Parquet file")
    return hashlib.sha256(data).hexdigest(), data.size


def decode_parquet(data: pa.Buffer) -> pa.Table:
    """The table of a sealed Parquet file held in memory (the very bytes that were hashed);
    pyarrow's errors for a file that does not decode."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(data))


def genesis_hash(ledger_id: str, link: str) -> str:
    """The 'previous seal hash' of a link's first seal: SHA-256 over a fixed label, the ledger id
    (16 bytes) and the link name."""
    return hashlib.sha256(b"ledgertool genesis v1\0" + uuid.UUID(hex=ledger_id).bytes + b"\0"
                          + link.encode()).hexdigest()


def seal_body(doc: dict) -> dict:
    """The signed part of a seal document: everything but "signatures"."""
    return {k: v for k, v in doc.items() if k != "signatures"}


def seal_signed_bytes(doc: dict) -> bytes:
    return seal_message(canonical_json(seal_body(doc)))


def seal_hash(doc: dict) -> str:
    """SHA-256 (hex) of the canonical signed body; the next seal's prev_seal_hash."""
    return hashlib.sha256(canonical_json(seal_body(doc))).hexdigest()


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


def _sign_and_write(*, ledger_dir: Path, ledger: LedgerHeader, link: str, index: int, first_seq: int,
                    totals: SegmentTotals, files: dict, prev_hash: str, signing_key: SigningKey, seal_file: Path,
                    torn_bytes: int, source: str | None, seal_format: str) -> tuple[dict, SealResult]:
    """The one builder of seal documents: the members common to every format, `files` (v1: the
    Parquet file's name, SHA-256 and size; v2: none) after merkle_root; signed, written atomically."""
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
        "sealed_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "signer": signing_key.trust_bundle().key_ids,
    }
    doc["signatures"] = signing_key.sign(seal_signed_bytes(doc))
    write_atomic(seal_file, (json.dumps(doc, indent=1) + "\n").encode(), root=ledger_dir, what="seal document")
    return doc, SealResult(index, totals.records, totals.frames, totals.drops, first_seq, totals.last_seq,
                           seal_hash(doc), torn_bytes)


def leaves_file(seal_file: Path) -> Path:
    """The leaf-hash sidecar beside a seal document (seg-N.leaves)."""
    return seal_file.with_name(seal_file.name.removesuffix(".seal.json") + ".leaves")


def seal_records(
    *, ledger_dir: Path, ledger: LedgerHeader, link: str, index: int, first_seq: int, records: bytes,
    prev_hash: str, signing_key: SigningKey, parquet: Path, seal_file: Path, torn_bytes: int = 0,
    source: str | None = None,
) -> tuple[dict, SealResult]:
    """Seal one segment's records in a v1 ledger: write Parquet, compute the Merkle root, sign,
    write the seal.

    `records` are whole fixed-size records (ledger.record_size bytes each), numbered from
    `first_seq`. Returns the seal document and a summary.
    """
    import numpy as np

    digest_size = ledger.digest_size
    record_size = ledger.record_size
    count = len(records) // record_size
    arr = np.frombuffer(records, dtype=record_dtype(digest_size))
    gaps = (arr["flags"] & FLAG_GAP) != 0
    drops = int(arr["aux"][gaps].sum()) if gaps.any() else 0
    table = records_to_table(records, digest_size, index)
    sha, size = write_parquet_atomic(table, parquet, ledger_dir)
    raw_leaves = merkle_leaves(records, record_size, ledger.leaf_records)  # C, SHA-NI; == merkle.records_leaf_hashes
    root = merkle_root(raw_leaves)  # C; == merkle.root_from_leaf_hashes
    write_atomic(leaves_file(seal_file), raw_leaves, root=ledger_dir, what="leaf-hash sidecar")
    totals = SegmentTotals(count, int(count - gaps.sum()), drops,
                           int(arr["seq"][-1]) if count else first_seq - 1,
                           int(arr["ts_ns"][0]) if count else None, int(arr["ts_ns"][-1]) if count else None, root)
    files = {"parquet_file": parquet.name, "parquet_sha256": sha, "parquet_bytes": size}
    return _sign_and_write(ledger_dir=ledger_dir, ledger=ledger, link=link, index=index, first_seq=first_seq,
                           totals=totals, files=files, prev_hash=prev_hash, signing_key=signing_key,
                           seal_file=seal_file, torn_bytes=torn_bytes, source=source, seal_format=SEAL_FORMAT)


def seal_committed(
    *, ledger_dir: Path, ledger: LedgerHeader, link: str, index: int, first_seq: int, totals: SegmentTotals,
    leaves: bytes, prev_hash: str, signing_key: SigningKey, seal_file: Path, torn_bytes: int = 0,
    source: str | None = None,
) -> tuple[dict, SealResult]:
    """Seal one segment of a v2 ledger from what the writer committed to when the records were
    appended (`totals`: counters and Merkle root; `leaves`: the leaf hashes), nothing read back:
    write the seal document (format ledgertool-seal-v2, no Parquet members), then the leaf-hash
    sidecar. The caller then renames the open segment to seg-N.rec (docs/ledger-format.md)."""
    out = _sign_and_write(ledger_dir=ledger_dir, ledger=ledger, link=link, index=index, first_seq=first_seq,
                          totals=totals, files={}, prev_hash=prev_hash, signing_key=signing_key,
                          seal_file=seal_file, torn_bytes=torn_bytes, source=source, seal_format=SEAL_FORMAT_V2)
    write_atomic(leaves_file(seal_file), leaves, root=ledger_dir, what="leaf-hash sidecar")
    return out


def load_seal(path: Path, root: Path | None = None) -> dict:
    """Read (fsio.read_regular, below the ledger directory `root` when given) and parse a seal
    document; LedgerFormatError naming the file when it is not one, StorageError / FileTypeError
    when it cannot be read or is not a regular file."""
    return parse_seal(read_regular(path, MAX_SEAL_BYTES, root=root, what="seal document"), path)


def parse_seal(data: bytes, where: Path | str) -> dict:
    """Parse the bytes of a seal document (v1 or v2) (strict JSON: `canonical.loads_strict`); LedgerFormatError
    naming `where` when it is not one."""
    doc = loads_strict(data, str(where))
    if not isinstance(doc, dict) or doc.get("format") not in SEAL_FORMATS:
        raise LedgerFormatError(f"{where}: not a {SEAL_FORMAT} or {SEAL_FORMAT_V2} document")
    return doc
