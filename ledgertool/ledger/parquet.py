"""Sealed records as Arrow tables and Parquet files: the schema (schemas/records.arrow.json), the
conversions to and from the fixed-size record bytes the Merkle root covers, and the one Parquet
writer (v1 sealing, compaction) and decoder (verify).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from .._binding import ffi, lib
from ..digest.record import record_dtype
from ..fsio import write_atomic

if TYPE_CHECKING:  # imported by the functions: a v2 capture and verify load neither
    import pyarrow as pa


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
        pa.binary(digest_size),
        n,
        [None, pa.py_buffer(np.ascontiguousarray(arr["digest"]).tobytes())],
    )
    cols = [
        pa.array(np.full(n, segment, dtype=np.uint32)),
        pa.array(arr["seq"]),
        pa.array(arr["ts_ns"]),
        pa.array(arr["wire_len"]),
        pa.array(arr["cap_len"]),
        pa.array(arr["flags"]),
        pa.array(arr["linktype"]),
        pa.array(arr["aux"]),
        digests,
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


_FIXED_COLUMNS = (
    ("seq", "uint64_t *"),
    ("ts_ns", "int64_t *"),
    ("wire_len", "uint32_t *"),
    ("cap_len", "uint32_t *"),
    ("flags", "uint16_t *"),
    ("linktype", "uint16_t *"),
    ("aux", "uint32_t *"),
)


def table_to_records_counted(table: pa.Table, digest_size: int, first_seq: int):
    """table_to_records in one native pass (lt_rec_from_columns): the columns' buffers, decoded
    in bulk by pyarrow, interleaved into the record layout, with what verify counts per record
    (GAP records, drops, first and last ts_ns, seq running from `first_seq`) made in that pass.
    (the records as a bytes-like buffer, the fields of a recfile.RecordFacts in its order)."""
    import numpy as np

    n = table.num_rows
    cols = []
    for name, _ in _FIXED_COLUMNS:  # one contiguous array each (a copy only across row groups)
        col = table.column(name)
        arr = col.chunk(0).to_numpy() if col.num_chunks == 1 else col.to_numpy()
        cols.append(np.ascontiguousarray(arr))
    dig = table.column("digest").combine_chunks()
    digests = np.frombuffer(
        dig.buffers()[1], dtype=np.uint8, count=n * digest_size, offset=dig.offset * digest_size
    )
    out = np.empty(n * (32 + digest_size), dtype=np.uint8)
    info = ffi.new("lt_rec_info *")
    ptrs = [ffi.cast(t, ffi.from_buffer(c)) for c, (_, t) in zip(cols, _FIXED_COLUMNS)]
    st = lib.lt_rec_from_columns(
        n,
        digest_size,
        first_seq,
        *ptrs,
        ffi.cast("uint8_t *", ffi.from_buffer(digests)),
        ffi.cast("uint8_t *", ffi.from_buffer(out)),
        len(out),
        info,
    )
    if st != lib.LT_OK:
        raise ValueError(f"columns do not make {n} records (status {st})")
    facts = (
        int(info.gaps),
        int(info.drops),
        int(info.first_ts_ns),
        int(info.last_ts_ns),
        bool(info.seq_contiguous),
    )
    return memoryview(out), facts


#: Parquet writer settings, measured on 1M 48-byte records (docs/adr/0010, "Measurements"): zstd
#: for every column but the digest (random bytes: compressing them costs time and saves nothing),
#: delta encoding for the monotone seq / ts_ns, dictionaries only for the low-cardinality columns.
#: 9.6 M records/s and 16.0 MB against 5.9 M records/s and 18.9 MB for zstd on every column.
#: Readers see the same schema and values; only the encodings differ.
PARQUET_OPTIONS = dict(
    compression={
        c: ("none" if c == "digest" else "zstd")
        for c in (
            "segment",
            "seq",
            "ts_ns",
            "wire_len",
            "cap_len",
            "flags",
            "linktype",
            "aux",
            "digest",
        )
    },
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
