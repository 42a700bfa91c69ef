"""query: DuckDB SQL over a ledger through two views.

    records(link, segment, seq, ts_ns, wire_len, cap_len, flags, linktype, aux, digest)
    seals(link, segment, first_seq, last_seq, records, frames, drops_declared, first_ts_ns,
          last_ts_ns, merkle_root, parquet_sha256, prev_seal_hash, algorithm, strip, sealed_at,
          digest_key_id)

`seals.digest_key_id` is the digest key each segment was digested with: it changes at a digest-key
rotation (docs/transparency.md), so `SELECT DISTINCT digest_key_id FROM seals` lists the keys a
`recompute` of the whole ledger needs.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from .errors import UsageError
from .ledger import links, load_ledger, sealed_parquet_files, segment_files, sql_parquet_source
from .seal import load_seal

_EMPTY_RECORDS = ("SELECT NULL::VARCHAR link, 0::UINTEGER segment, 0::UBIGINT seq, 0::BIGINT ts_ns, "
                  "0::UINTEGER wire_len, 0::UINTEGER cap_len, 0::USMALLINT flags, 0::USMALLINT linktype, "
                  "0::UINTEGER aux, NULL::BLOB digest WHERE false")


def open_duckdb(config: dict | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that never draws its progress bar: DuckDB prints it on stdout,
    which carries only results and `--json` documents. UsageError for a bad `config` value."""
    try:
        con = duckdb.connect(config=config or {})
    except duckdb.Error as e:
        raise UsageError(str(e).splitlines()[0]) from None
    con.execute("SET enable_progress_bar = false")
    return con


def connect(ledger_dir: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the `records` and `seals` views over DIR."""
    ledger_dir = Path(ledger_dir)
    load_ledger(ledger_dir)
    con = open_duckdb()
    files = sealed_parquet_files(ledger_dir)
    if files:
        con.execute("CREATE VIEW records AS SELECT link, segment, seq, ts_ns, wire_len, cap_len, flags, "
                    f"linktype, aux, digest FROM {sql_parquet_source(files)}")
    else:
        con.execute(f"CREATE VIEW records AS {_EMPTY_RECORDS}")
    rows = []
    for link in links(ledger_dir):
        for index, files in sorted(segment_files(ledger_dir, link).items()):
            if "seal.json" in files:
                d = load_seal(files["seal.json"])
                rows.append((link, index, int(d["first_seq"]), int(d["last_seq"]), d["records"], d["frames"],
                             d["drops_declared"], _int(d.get("first_ts_ns")), _int(d.get("last_ts_ns")),
                             d["merkle_root"], d["parquet_sha256"], d["prev_seal_hash"], d["algorithm"],
                             d["strip"], d["sealed_at"], d.get("digest_key_id")))
    con.execute("""CREATE TABLE seals (link VARCHAR, segment UINTEGER, first_seq UBIGINT, last_seq UBIGINT,
                   records UBIGINT, frames UBIGINT, drops_declared UBIGINT, first_ts_ns BIGINT, last_ts_ns BIGINT,
                   merkle_root VARCHAR, parquet_sha256 VARCHAR, prev_seal_hash VARCHAR, algorithm VARCHAR,
                   strip VARCHAR, sealed_at VARCHAR, digest_key_id VARCHAR)""")
    if rows:
        con.executemany("INSERT INTO seals VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    return con


def _int(v):
    return int(v) if v is not None else None


def run_query(ledger_dir: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Run one SQL statement; return (column names, rows). UsageError for an SQL error."""
    con = connect(ledger_dir)
    try:
        cur = con.execute(sql)
        cols = [d[0] for d in cur.description] if cur.description else []
        return cols, cur.fetchall()
    except duckdb.Error as e:
        raise UsageError(f"query failed: {str(e).splitlines()[0]}") from None
    finally:
        con.close()
