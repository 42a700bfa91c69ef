"""query: DuckDB SQL over a ledger through two tables.

    records(link, segment, seq, ts_ns, wire_len, cap_len, flags, linktype, aux, digest)
    seals(link, segment, first_seq, last_seq, records, frames, drops_declared, first_ts_ns,
          last_ts_ns, merkle_root, parquet_sha256, prev_seal_hash, algorithm, strip, sealed_at,
          digest_key_id)
    windows(link, segment, window_index, window_start_ns, window_ns, frames, wire_bytes, drops,
            late, hash, cells)       the window records of the links' window logs (hash and
                                     cells as stored: masked, meaningful only to the key holder)

DuckDB never opens a ledger file: the ledger is verified first (ledgertool.verify.ledger, with the trust
bundle when one is given, else the keyless checks) and the tables are filled from the very bytes
that were checked, decoded once (docs/threat-model.md, "What query and recompute read"). A ledger
that does not verify is not queried. `link` comes from the verified seals, never from a path.

The SQL reads exactly those tables: DuckDB's access to files, the network and extensions is off
(`enable_external_access=false`, then the configuration locked so that the SQL cannot turn it back
on), so `read_csv(...)`, `COPY ... TO` and a glob over the ledger's own unverified files are
refused. `allow_files=True` (`query --allow-files`) leaves it on, for an operator who joins other
files in on purpose.

`seals.digest_key_id` is the digest key each segment was digested with: it changes at a digest-key
rotation (docs/transparency.md), so `SELECT DISTINCT digest_key_id FROM seals` lists the keys a
`recompute` of the whole ledger needs.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from ..errors import DiscrepancyError, UsageError
from ..keyfiles import TrustBundle
from ..plural import plural
from ..progress import Progress, ProgressFn
from ..urls import location
from ..verify.ledger import VerifiedSegment, VerifyResult, verify_ledger
from ..verify.windows import VerifiedWindows

RECORDS_DDL = ("CREATE TABLE records (link VARCHAR, segment UINTEGER, seq UBIGINT, ts_ns BIGINT, wire_len UINTEGER, "
               "cap_len UINTEGER, flags USMALLINT, linktype USMALLINT, aux UINTEGER, digest BLOB)")
SEALS_DDL = ("CREATE TABLE seals (link VARCHAR, segment UINTEGER, first_seq UBIGINT, last_seq UBIGINT, "
             "records UBIGINT, frames UBIGINT, drops_declared UBIGINT, first_ts_ns BIGINT, last_ts_ns BIGINT, "
             "merkle_root VARCHAR, parquet_sha256 VARCHAR, prev_seal_hash VARCHAR, algorithm VARCHAR, "
             "strip VARCHAR, sealed_at VARCHAR, digest_key_id VARCHAR)")
WINDOWS_DDL = ("CREATE TABLE windows (link VARCHAR, segment UINTEGER, window_index BIGINT, window_start_ns BIGINT, "
               "window_ns UBIGINT, frames UBIGINT, wire_bytes UBIGINT, drops UBIGINT, late UBIGINT, hash BLOB, "
               "cells BLOB)")


def open_duckdb(config: dict | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that never draws its progress bar: DuckDB prints it on stdout,
    which carries only results and `--json` documents. UsageError for a bad `config` value."""
    try:
        con = duckdb.connect(config=config or {})
    except duckdb.Error as e:
        raise UsageError(str(e).splitlines()[0]) from None
    con.execute("SET enable_progress_bar = false")
    return con


def not_verified_error(res: VerifyResult, what: str) -> DiscrepancyError:
    """The one-line refusal to read a ledger that did not verify (exit 1)."""
    first = res.problems[0]
    where = f"link {first.link} segment {first.segment}: " if first.segment is not None else ""
    more = f"{plural(len(res.problems) - 1, 'more problem')}; " if len(res.problems) > 1 else ""
    return DiscrepancyError(f"{res.ledger}: the ledger does not verify, so {what}: {where}{first.kind}: "
                            f"{first.detail} ({more}run `ledgertool verify` for every problem)")


def add_segment(con: duckdb.DuckDBPyConnection, seg: VerifiedSegment) -> None:
    """Insert one verified segment into `records` and `seals` (the checked bytes, decoded once)."""
    con.register("_segment", seg.table)
    try:
        con.execute("INSERT INTO records SELECT ?, segment, seq, ts_ns, wire_len, cap_len, flags, linktype, aux, "
                    "digest FROM _segment", [seg.link])
    finally:
        con.unregister("_segment")
    s = seg.seal
    con.execute("INSERT INTO seals VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [seg.link, seg.index, int(s.first_seq), int(s.last_seq), s.records, s.frames,
                 s.drops_declared, _int(s.first_ts_ns), _int(s.last_ts_ns), s.merkle_root,
                 s.parquet_sha256, s.prev_seal_hash, s.algorithm, s.strip, s.sealed_at,
                 s.digest_key_id])


def add_windows(con: duckdb.DuckDBPyConnection, seg: VerifiedWindows) -> None:
    """Insert one verified window segment's records into `windows`."""
    con.executemany("INSERT INTO windows VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    [[seg.link, seg.index, w.index, w.start_ns, w.window_ns, w.frames, w.wire_bytes, w.drops,
                      w.late, w.masked[:16], w.masked[16:]] for w in seg.windows])


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple]  # empty when `table` holds the result
    verification: VerifyResult
    table: pa.Table | None = None  # with run_query(arrow=True): the result with DuckDB's column types
    types: list = field(default_factory=list)  # DuckDB's type of each column (DuckDBPyType), with `rows`


def connect(ledger_dir: Path, trust: TrustBundle | None = None, checkpoint: bytes | None = None,
            checkpoint_name: str = "checkpoint", temp_dir: str | None = None, progress: ProgressFn | None = None
            ) -> tuple[duckdb.DuckDBPyConnection, VerifyResult]:
    """An in-memory DuckDB connection with `records`, `seals` and `windows` filled from the
    verified ledger.

    Raises DiscrepancyError (exit 1) when the ledger does not verify, LedgerFormatError when DIR
    is not a ledger. `temp_dir` is where DuckDB may spill (default: its own); `progress` gets the
    verify phase (segments, records)."""
    con = open_duckdb({"temp_directory": temp_dir} if temp_dir else None)
    try:
        con.execute(RECORDS_DDL)
        con.execute(SEALS_DDL)
        con.execute(WINDOWS_DDL)
        res = verify_ledger(location(ledger_dir), trust, checkpoint, checkpoint_name,
                            on_segment=lambda seg: add_segment(con, seg), progress=progress,
                            on_windows=lambda seg: add_windows(con, seg))
        if not res.ok:
            raise not_verified_error(res, "it is not queried")
    except BaseException:
        con.close()
        raise
    return con, res


def _int(v):
    return int(v) if v is not None else None


def run_query(ledger_dir: Path, sql: str, trust: TrustBundle | None = None, checkpoint: bytes | None = None,
              checkpoint_name: str = "checkpoint", arrow: bool = False,
              progress: ProgressFn | None = None, allow_files: bool = False) -> QueryResult:
    """Verify the ledger, then run one SQL statement over what was verified; with `arrow` the
    result is a pyarrow Table (`table`) instead of Python rows. `progress` gets the verify phase
    ("verify": segments, records), then DuckDB's own estimate ("query": percent done). The SQL
    reads no file, URL or extension unless `allow_files` (the module's doc).

    UsageError for an SQL error, DiscrepancyError when the ledger does not verify; Ctrl-C
    (KeyboardInterrupt) interrupts DuckDB and is re-raised."""
    with tempfile.TemporaryDirectory(prefix="ledgertool-query-") as tmp:
        con, res = connect(ledger_dir, trust, checkpoint, checkpoint_name, temp_dir=tmp, progress=progress)
        try:
            cols, rows, types = _interruptible(con, sql, arrow, progress, allow_files)
            if arrow:
                return QueryResult(cols, [], res, rows)
            return QueryResult(cols, rows, res, types=types)
        except duckdb.Error as e:
            hint = (" (the SQL reads only `records` and `seals`; --allow-files lets it read files)"
                    if isinstance(e, duckdb.PermissionException) and not allow_files else "")
            raise UsageError(f"query failed: {str(e).splitlines()[0]}{hint}") from None
        finally:
            con.close()


def _interruptible(con: duckdb.DuckDBPyConnection, sql: str, arrow: bool = False,
                   progress: ProgressFn | None = None, allow_files: bool = False
                   ) -> tuple[list[str], list[tuple] | pa.Table, list]:
    """(column names, rows or with `arrow` a pyarrow Table, column types) of `sql`. DuckDB runs it on a worker thread so that Ctrl-C reaches the
    main thread, which interrupts the query and re-raises KeyboardInterrupt (a query blocked in
    DuckDB on the main thread never sees the signal)."""
    done: list = []
    finished = threading.Event()  # not Thread.is_alive(): a join() cut by Ctrl-C can leave it wrong
    cur = con.cursor()  # the connection itself refuses interrupt() while a call on it is running
    if progress:  # DuckDB tracks progress only with its bar on; it never prints it (stdout is results)
        cur.execute("SET enable_progress_bar = true")
        cur.execute("SET enable_progress_bar_print = false")
    if not allow_files:  # last: once locked, not even these settings change
        cur.execute("SET enable_external_access = false")
        cur.execute("SET lock_configuration = true")

    def work() -> None:
        try:
            if arrow:  # a relation: Arrow straight from DuckDB (1.x names it arrow(), 2.x to_arrow_table())
                rel = cur.sql(sql)
                table = (getattr(rel, "to_arrow_table", None) or rel.arrow)() if rel is not None else pa.table({})
                done.append((table.column_names, table, []))
            else:
                cur.execute(sql)
                desc = cur.description or []
                done.append(([d[0] for d in desc], cur.fetchall(), [d[1] for d in desc]))
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            done.append(e)
        finally:
            finished.set()

    threading.Thread(target=work, name="ledgertool-query", daemon=True).start()
    try:
        while not finished.wait(0.1):
            if progress:  # DuckDB's estimate, -1 while it has none; reading it costs nothing
                pct = cur.query_progress()
                if pct >= 0:
                    progress(Progress("query", int(pct), 100, "%"))
    finally:
        if not finished.is_set():  # Ctrl-C while DuckDB works: stop it before the connection closes
            cur.interrupt()
            finished.wait()
        cur.close()
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]
