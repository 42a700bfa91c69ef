"""recompute: digests of a capture recomputed with the ledger's engine, reconciled with DuckDB.

Reconciliation compares multisets of digests (a frame sent twice must appear twice): for each
digest d with count l(d) in the ledger (GAP records excluded) and c(d) in the capture,
matched += min(l, c), ledger_only += max(l - c, 0), capture_only += max(c - l, 0).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .algorithms import Algorithm, get_algorithm, get_strip_mode
from .engine import FLAG_GAP, CaptureReader, DigestEngine, record_dtype
from .errors import KeyFileError
from .keys import DigestKey
from .ledger import load_ledger, sealed_parquet_files, sql_parquet_source

Progress = Callable[[int, int], None]


def digests_schema(digest_size: int) -> pa.Schema:
    """Per-frame recompute output (schemas/recompute-digests.arrow.json)."""
    return pa.schema([("index", pa.uint64()), ("ts_ns", pa.int64()), ("wire_len", pa.uint32()),
                      ("cap_len", pa.uint32()), ("flags", pa.uint16()), ("linktype", pa.uint16()),
                      ("digest", pa.binary(digest_size))])


@dataclass
class DigestRun:
    frames: int = 0
    bytes: int = 0
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)


def digests_to_parquet(source: str | Path, out: Path, digest_key: DigestKey, alg: Algorithm, strip: str,
                       progress: Progress | None = None) -> DigestRun:
    """Digest every frame of `source` and write one row per frame to `out` (Parquet).

    Raises CaptureFormatError for a bad capture (nothing usable is left at `out` then).
    """
    run = DigestRun()
    t0 = time.perf_counter()
    with CaptureReader(source) as reader:
        engine = DigestEngine(reader, alg, get_strip_mode(strip), digest_key.subkey(alg.name, alg.key_size))
        schema = digests_schema(alg.digest_size)
        dtype = record_dtype(alg.digest_size)
        try:
            with pq.ParquetWriter(out, schema, compression="zstd") as w:
                while True:
                    records, n, nbytes = engine.fill(run.frames)
                    if n == 0:
                        break
                    arr = np.frombuffer(records, dtype=dtype, count=n)
                    dig = pa.FixedSizeBinaryArray.from_buffers(
                        pa.binary(alg.digest_size), n, [None, pa.py_buffer(arr["digest"].tobytes())])
                    w.write_table(pa.Table.from_arrays(
                        [pa.array(arr["seq"]), pa.array(arr["ts_ns"]), pa.array(arr["wire_len"]),
                         pa.array(arr["cap_len"]), pa.array(arr["flags"]), pa.array(arr["linktype"]), dig],
                        schema=schema))
                    run.frames += n
                    run.bytes += nbytes
                    if progress:
                        progress(run.frames, run.bytes)
        except BaseException:
            out.unlink(missing_ok=True)
            raise
        note = reader.info().truncation_note()
    if note:
        run.warnings.append(note)
    run.elapsed_s = time.perf_counter() - t0
    return run


@dataclass
class ReconcileResult:
    source: str
    ledger: str
    frames: int
    ledger_records: int
    matched: int
    ledger_only: int
    capture_only: int
    elapsed_s: float
    examples_ledger_only: list[dict] = field(default_factory=list)
    examples_capture_only: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.ledger_only == 0 and self.capture_only == 0

    def to_json(self) -> dict:
        return {"ok": self.ok, "source": self.source, "ledger": self.ledger, "frames": self.frames,
                "ledger_records": self.ledger_records, "matched": self.matched,
                "ledger_only": self.ledger_only, "capture_only": self.capture_only,
                "elapsed_s": round(self.elapsed_s, 6),
                "examples_ledger_only": self.examples_ledger_only,
                "examples_capture_only": self.examples_capture_only, "warnings": self.warnings}


def reconcile(source: str | Path, ledger_dir: Path, digest_key: DigestKey, *, examples: int = 10,
              progress: Progress | None = None, memory_limit: str = "4GB") -> ReconcileResult:
    """Recompute `source` with the ledger's algorithm and strip mode and reconcile as multisets.

    Raises KeyFileError when the digest key's id differs from the ledger's (wrong key), and
    CaptureFormatError / LedgerFormatError for bad inputs.
    """
    ledger_dir = Path(ledger_dir)
    ledger = load_ledger(ledger_dir)
    alg = get_algorithm(ledger["algorithm"])
    kid = digest_key.key_id(alg.name, alg.key_size)
    if kid != ledger["digest_key_id"]:
        raise KeyFileError(f"{digest_key.path}: digest key id {kid} does not match ledger {ledger_dir} "
                           f"(key id {ledger['digest_key_id']}): wrong key")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ledgertool-recompute-") as tmp:
        cap = Path(tmp) / "capture.parquet"
        run = digests_to_parquet(source, cap, digest_key, alg, ledger["strip"], progress)
        con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": tmp})
        try:
            files = sealed_parquet_files(ledger_dir)
            if files:
                con.execute(f"CREATE VIEW l AS SELECT digest, seq, ts_ns, wire_len FROM "
                            f"{sql_parquet_source(files)} WHERE (flags & {FLAG_GAP}) = 0")
            else:
                con.execute("CREATE VIEW l AS SELECT NULL::BLOB digest, 0::UBIGINT seq, 0::BIGINT ts_ns, "
                            "0::UINTEGER wire_len WHERE false")
            con.execute(f"CREATE VIEW c AS SELECT * FROM {sql_parquet_source([cap])}")
            con.execute("""
                CREATE TEMP TABLE diff AS
                WITH lc AS (SELECT digest, count(*) AS n FROM l GROUP BY digest),
                     cc AS (SELECT digest, count(*) AS n FROM c GROUP BY digest)
                SELECT coalesce(lc.digest, cc.digest) AS digest, coalesce(lc.n, 0) AS ln,
                       coalesce(cc.n, 0) AS cn
                FROM lc FULL OUTER JOIN cc ON lc.digest = cc.digest""")
            matched, lonly, conly, lrecs = con.execute("""
                SELECT coalesce(sum(least(ln, cn)), 0), coalesce(sum(greatest(ln - cn, 0)), 0),
                       coalesce(sum(greatest(cn - ln, 0)), 0), coalesce(sum(ln), 0) FROM diff""").fetchone()
            ex_l = con.execute("""
                SELECT lower(hex(l.digest)), l.seq, l.ts_ns, l.wire_len FROM l JOIN diff USING (digest)
                WHERE diff.ln > diff.cn ORDER BY l.seq LIMIT ?""", [examples]).fetchall()
            ex_c = con.execute("""
                SELECT lower(hex(c.digest)), c.index, c.ts_ns, c.wire_len FROM c JOIN diff USING (digest)
                WHERE diff.cn > diff.ln ORDER BY c.index LIMIT ?""", [examples]).fetchall()
        finally:
            con.close()
    return ReconcileResult(
        str(source), str(ledger_dir), run.frames, int(lrecs), int(matched), int(lonly), int(conly),
        time.perf_counter() - t0,
        [{"digest": d, "seq": int(s), "ts_ns": int(t), "wire_len": int(w)} for d, s, t, w in ex_l],
        [{"digest": d, "index": int(i), "ts_ns": int(t), "wire_len": int(w)} for d, i, t, w in ex_c],
        run.warnings,
    )
