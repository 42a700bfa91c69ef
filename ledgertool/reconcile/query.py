"""query: DuckDB SQL over a ledger through two tables.

    records(link, segment, seq, ts_ns, wire_len, cap_len, flags, linktype, aux, digest)
    seals(link, segment, first_seq, last_seq, records, frames, drops_declared, first_ts_ns,
          last_ts_ns, merkle_root, parquet_sha256, prev_seal_hash, algorithm, strip, sealed_at,
          digest_key_id)
    windows(link, segment, window_index, window_start_ns, window_ns, frames, wire_bytes, drops,
            late, hash, cells)       the window records of the links' window logs (hash and
                                     cells as stored: masked, meaningful only to the key holder)

DuckDB never opens a ledger file: it reads the very bytes that verify checked
(ledgertool.verify.ledger, with the trust bundle when one is given, else the keyless checks),
decoded once (docs/threat-model.md, "What query and recompute read"). A ledger that does not verify
is not queried: no result of SQL over it is handed out. `link` comes from the verified seals, never
from a path.

Two ways to run the SQL, chosen per statement:
- Streamed, when one SELECT scans `records` once and reads no other table (count, group by, sums):
  verify runs on a thread while DuckDB scans `records` as Arrow batches built from each verified
  segment's checked copy (only the columns the SQL reads; no INSERT, no table), at most a couple of
  segments in memory at a time whatever the ledger's size. The result is held back until the whole
  ledger's verdict is in (verify runs on to the end even after a LIMIT is met).
- Materialised, for anything else (a self-join scans `records` twice, and a stream is read once;
  `seals` and `windows` are complete only at the end of verify): the tables are filled as before,
  under DuckDB's `memory_limit`, past which DuckDB spills them to the query's temporary directory.

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

import contextlib
import json
import queue
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads

from ..digest.record import record_dtype
from ..errors import DiscrepancyError, UsageError
from ..keyfiles import TrustBundle
from ..plural import plural
from ..progress import Progress, ProgressFn
from ..seal.document import Seal
from ..urls import location
from ..verify.ledger import VerifiedSegment, VerifyResult, verify_ledger
from ..verify.windows import VerifiedWindows

RECORDS_DDL = (
    "CREATE TABLE records (link VARCHAR, segment UINTEGER, seq UBIGINT, ts_ns BIGINT, wire_len "
    "UINTEGER, cap_len UINTEGER, flags USMALLINT, linktype USMALLINT, aux UINTEGER, digest BLOB)"
)
SEALS_DDL = (
    "CREATE TABLE seals (link VARCHAR, segment UINTEGER, first_seq UBIGINT, last_seq UBIGINT, "
    "records UBIGINT, frames UBIGINT, drops_declared UBIGINT, first_ts_ns BIGINT, last_ts_ns "
    "BIGINT, merkle_root VARCHAR, parquet_sha256 VARCHAR, prev_seal_hash VARCHAR, algorithm "
    "VARCHAR, strip VARCHAR, sealed_at VARCHAR, digest_key_id VARCHAR)"
)
WINDOWS_DDL = (
    "CREATE TABLE windows (link VARCHAR, segment UINTEGER, window_index BIGINT, window_start_ns "
    "BIGINT, window_ns UBIGINT, frames UBIGINT, wire_bytes UBIGINT, drops UBIGINT, late UBIGINT, "
    "hash BLOB, cells BLOB)"
)


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
    return DiscrepancyError(
        f"{res.ledger}: the ledger does not verify, so {what}: {where}{first.kind}: "
        f"{first.detail} ({more}run `ledgertool verify` for every problem)"
    )


def add_segment(con: duckdb.DuckDBPyConnection, seg: VerifiedSegment) -> None:
    """Insert one verified segment into `records` and `seals` (the checked bytes, decoded once)."""
    con.register("_segment", seg.table)
    try:
        con.execute(
            "INSERT INTO records SELECT ?, segment, seq, ts_ns, wire_len, cap_len, flags, "
            "linktype, aux, digest FROM _segment",
            [seg.link],
        )
    finally:
        con.unregister("_segment")
    add_seal(con, seg.link, seg.index, seg.seal)


def add_seal(con: duckdb.DuckDBPyConnection, link: str, index: int, s: Seal) -> None:
    """Insert one verified seal into `seals` (also of a segment whose records were pruned)."""
    con.execute(
        "INSERT INTO seals VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            link,
            index,
            int(s.first_seq),
            int(s.last_seq),
            s.records,
            s.frames,
            s.drops_declared,
            _int(s.first_ts_ns),
            _int(s.last_ts_ns),
            s.merkle_root,
            s.parquet_sha256,
            s.prev_seal_hash,
            s.algorithm,
            s.strip,
            s.sealed_at,
            s.digest_key_id,
        ],
    )


def add_windows(con: duckdb.DuckDBPyConnection, seg: VerifiedWindows) -> None:
    """Insert one verified window segment's records into `windows`."""
    con.executemany(
        "INSERT INTO windows VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [
            [
                seg.link,
                seg.index,
                w.index,
                w.start_ns,
                w.window_ns,
                w.frames,
                w.wire_bytes,
                w.drops,
                w.late,
                w.masked[:16],
                w.masked[16:],
            ]
            for w in seg.windows
        ],
    )


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple]  # empty when `table` holds the result
    verification: VerifyResult
    table: pa.Table | None = (
        None  # with run_query(arrow=True): the result with DuckDB's column types
    )
    # DuckDB's type of each column (DuckDBPyType), with `rows`
    types: list = field(default_factory=list)


def connect(
    ledger_dir: Path,
    trust: TrustBundle | None = None,
    checkpoint: bytes | None = None,
    checkpoint_name: str = "checkpoint",
    temp_dir: str | None = None,
    progress: ProgressFn | None = None,
    memory_limit: str | None = None,
) -> tuple[duckdb.DuckDBPyConnection, VerifyResult]:
    """An in-memory DuckDB connection with `records`, `seals` and `windows` filled from the
    verified ledger.

    Raises DiscrepancyError (exit 1) when the ledger does not verify, LedgerFormatError when DIR
    is not a ledger. `temp_dir` is where DuckDB may spill (default: its own); `progress` gets the
    verify phase (segments, records)."""
    con = open_duckdb(
        ({"temp_directory": temp_dir} if temp_dir else {})
        | ({"memory_limit": memory_limit} if memory_limit else {})
    )
    try:
        con.execute(RECORDS_DDL)
        con.execute(SEALS_DDL)
        con.execute(WINDOWS_DDL)
        res = verify_ledger(
            location(ledger_dir),
            trust,
            checkpoint,
            checkpoint_name,
            on_segment=lambda seg: add_segment(con, seg),
            progress=progress,
            on_windows=lambda seg: add_windows(con, seg),
            on_pruned=lambda link, index, seal: add_seal(con, link, index, seal),
        )
        if not res.ok:
            raise not_verified_error(res, "it is not queried")
    except BaseException:
        con.close()
        raise
    return con, res


#: `records` as the streamed scan gives it: DuckDB's types of RECORDS_DDL (the link a dictionary
#: of one value per segment, the digest a BLOB of whatever size the seals' layout says)
RECORDS_SCHEMA = pa.schema(
    [
        ("link", pa.dictionary(pa.int8(), pa.string())),
        ("segment", pa.uint32()),
        ("seq", pa.uint64()),
        ("ts_ns", pa.int64()),
        ("wire_len", pa.uint32()),
        ("cap_len", pa.uint32()),
        ("flags", pa.uint16()),
        ("linktype", pa.uint16()),
        ("aux", pa.uint32()),
        ("digest", pa.binary()),
    ]
)
_BATCH = 1 << 20  # records per Arrow batch: the digest's int32 offsets stay far from overflow
_END = object()


class _Stopped(Exception):
    """Raised inside verify's callbacks to end a streamed verify early (Ctrl-C, a failed query)."""


#: the columns of `records` that are not read from the records' bytes
_PLACE_COLUMNS = frozenset({"link", "segment"})


def segment_batches(seg: VerifiedSegment, names: list[str]):
    """Arrow record batches of the columns `names` of one verified segment, built from its checked
    record copy (`seg.records`): one copy of each column read, none of the others. Columns that
    only say where a record is (link, segment) need no copy: `seg.records` may then be None, its
    count `seg.count`."""
    import numpy as np

    recs = (
        np.frombuffer(seg.records, record_dtype(seg.digest_size))
        if seg.records is not None
        else None
    )
    total = len(recs) if recs is not None else seg.count
    schema = pa.schema([RECORDS_SCHEMA.field(n) for n in names])
    for start in range(0, total, _BATCH):
        part = recs[start : start + _BATCH] if recs is not None else None
        n = min(_BATCH, total - start)
        cols = []
        for name in names:
            if name == "link":
                cols.append(
                    pa.DictionaryArray.from_arrays(
                        pa.array(np.zeros(n, np.int8)), pa.array([seg.link])
                    )
                )
            elif name == "segment":
                cols.append(pa.array(np.full(n, seg.index, np.uint32)))
            elif name == "digest":
                size = seg.digest_size
                offsets = pa.py_buffer(np.arange(0, (n + 1) * size, size, dtype=np.int32))
                data = pa.py_buffer(np.ascontiguousarray(part["digest"]).view(np.uint8))
                cols.append(pa.Array.from_buffers(pa.binary(), n, [None, offsets, data]))
            else:
                cols.append(pa.array(np.ascontiguousarray(part[name])))
        yield pa.RecordBatch.from_arrays(cols, schema=schema)


class RecordStream:
    """verify_ledger on a thread, handing each verified segment's checked record copy to the one
    scan of `records` (at most `depth` segments wait); `finish()` lets verify run to its end,
    without keeping records, and returns its VerifyResult (or raises what verify raised). Verify
    starts with the scan (`start`), which says whether it reads the records' bytes at all: a scan
    of the link and segment columns only (count(*)) has every file checked where it was read, as
    `verify` checks it, nothing copied out."""

    def __init__(
        self,
        ledger_dir: Path,
        trust: TrustBundle | None,
        checkpoint: bytes | None,
        checkpoint_name: str,
        depth: int = 1,
    ):
        self._args = (location(ledger_dir), trust, checkpoint, checkpoint_name)
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop, self._discard = threading.Event(), threading.Event()
        self.result: VerifyResult | None = None
        self.error: BaseException | None = None
        self.progress: Progress | None = None  # verify's latest, for the main thread to show
        self._thread = threading.Thread(
            target=self._run, name="ledgertool-query-verify", daemon=True
        )
        self._keep_records = True
        self._started = threading.Lock()
        self.scanned = False

    def start(self, keep_records: bool = True) -> None:
        """Start verify (once; later calls do nothing), copying records out only when
        `keep_records`."""
        if self._started.acquire(blocking=False):
            self._keep_records = keep_records
            self._thread.start()

    def _run(self) -> None:
        try:
            self.result = verify_ledger(
                *self._args,
                on_segment=self._put,
                progress=self._progressed,
                keep_records=self._keep_records,
            )
        except _Stopped:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the main thread by finish()
            self.error = e
        finally:
            self._put(_END)

    def _progressed(self, p: Progress) -> None:
        if self._stop.is_set():
            raise _Stopped
        self.progress = p

    def _put(self, item) -> None:
        while not self._discard.is_set():
            if self._stop.is_set():
                if item is _END:
                    return
                raise _Stopped
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                pass

    def batches(self, names: list[str]):
        """The batches of the one scan: segment after segment as verify passes them."""
        while True:
            try:
                item = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._stop.is_set() or not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError("the verify that feeds `records` ended") from None
                continue
            if item is _END:
                if self.error is not None:
                    raise RuntimeError(f"verify failed: {self.error}")
                return
            yield from segment_batches(item, names)

    def finish(self) -> VerifyResult:
        """Verify's result once it has run to the end (records no longer kept; started here when
        no scan started it)."""
        self.start(keep_records=False)
        self._drain()
        if self.error is not None:
            raise self.error
        return self.result

    def stop(self) -> None:
        """End verify early (its result is not wanted)."""
        self._stop.set()
        self._drain()

    def _drain(self) -> None:
        """Let verify's thread run to its end, taking (and dropping) what it still hands over."""
        if not self._thread.ident:  # never started (stopped before any scan)
            return
        self._discard.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.1)
            except queue.Empty:
                pass
        self._thread.join()


class StreamedRecords(pads.InMemoryDataset):
    """`records` for DuckDB: an empty dataset of RECORDS_SCHEMA whose one scan (DuckDB asks for a
    scanner with the columns it reads and its filter) is the stream's verified segments."""

    def __init__(self, stream: RecordStream):
        super().__init__(RECORDS_SCHEMA.empty_table())
        self.stream = stream

    def scanner(self, columns=None, filter=None, **kwargs):  # noqa: A002 - DuckDB's keyword
        if self.stream.scanned:  # the plan was checked for one scan; a second would see nothing
            raise RuntimeError("`records` is streamed and can be scanned once")
        self.stream.scanned = True
        # a filter may read columns the result does not: then every column is built
        names = (
            list(RECORDS_SCHEMA.names) if filter is not None or columns is None else list(columns)
        )
        names = names or ["segment"]  # no column read (count(*)): the rows still count
        self.stream.start(keep_records=not _PLACE_COLUMNS.issuperset(names))
        schema = pa.schema([RECORDS_SCHEMA.field(n) for n in names])
        return pads.Scanner.from_batches(
            self.stream.batches(names), schema=schema, columns=columns, filter=filter, **kwargs
        )


def streams(sql: str, con: duckdb.DuckDBPyConnection | None = None) -> bool:
    """Whether `sql` can run over a streamed `records`: one SELECT statement that names no table
    but `records` and whose plan scans it once (checked with EXPLAIN over an empty `records`, on
    `con` when given: a connection costs ~30 ms of CPU to open; it is left as it was)."""
    try:
        stmts = duckdb.extract_statements(sql)
        if len(stmts) != 1 or stmts[0].type != duckdb.StatementType.SELECT:
            return False
        if {n.lower() for n in duckdb.get_table_names(sql)} != {"records"}:
            return False
        with contextlib.ExitStack() as stack:
            if con is None:
                con = stack.enter_context(duckdb.connect())
            con.register("records", RECORDS_SCHEMA.empty_table())
            stack.callback(con.unregister, "records")
            plan = con.execute(f"EXPLAIN (FORMAT json) {sql}").fetchall()
    except (duckdb.Error, RuntimeError):
        return False
    return sum(_scans(node) for node in json.loads(plan[0][1])) == 1


def _scans(node: dict) -> int:
    here = 1 if "ARROW_SCAN" in node.get("name", "") else 0
    return here + sum(_scans(c) for c in node.get("children", []))


def _int(v):
    return int(v) if v is not None else None


def run_query(
    ledger_dir: Path,
    sql: str,
    trust: TrustBundle | None = None,
    checkpoint: bytes | None = None,
    checkpoint_name: str = "checkpoint",
    arrow: bool = False,
    progress: ProgressFn | None = None,
    allow_files: bool = False,
    memory_limit: str | None = None,
) -> QueryResult:
    """Verify the ledger and run one SQL statement over what was verified (streamed or
    materialised: the module's doc); with `arrow` the result is a pyarrow Table (`table`) instead
    of Python rows. `progress` gets the verify phase ("verify": segments, records), then DuckDB's
    own estimate ("query": percent done). The SQL reads no file, URL or extension unless
    `allow_files` (the module's doc). `memory_limit`: DuckDB's (e.g. "4GB"; default DuckDB's own),
    past which it spills to a temporary directory.

    UsageError for an SQL error or a bad `memory_limit`, DiscrepancyError when the ledger does not
    verify; Ctrl-C (KeyboardInterrupt) interrupts DuckDB and verify and is re-raised."""
    _one_statement(sql)  # before the ledger is read: a refusal costs nothing
    with tempfile.TemporaryDirectory(prefix="ledgertool-query-") as tmp:
        config = {"temp_directory": tmp} | ({"memory_limit": memory_limit} if memory_limit else {})
        con = open_duckdb(config)
        if streams(sql, con):
            return _run_streamed(
                con,
                ledger_dir,
                sql,
                trust,
                checkpoint,
                checkpoint_name,
                arrow,
                progress,
                allow_files,
            )
        con.close()
        con, res = connect(
            ledger_dir,
            trust,
            checkpoint,
            checkpoint_name,
            temp_dir=tmp,
            progress=progress,
            memory_limit=memory_limit,
        )
        try:
            cols, rows, types = _interruptible(con, sql, arrow, progress, allow_files)
        except duckdb.Error as e:
            raise _sql_error(e, allow_files) from None
        finally:
            con.close()
        if arrow:
            return QueryResult(cols, [], res, rows)
        return QueryResult(cols, rows, res, types=types)


def _run_streamed(
    con: duckdb.DuckDBPyConnection,
    ledger_dir: Path,
    sql: str,
    trust: TrustBundle | None,
    checkpoint: bytes | None,
    checkpoint_name: str,
    arrow: bool,
    progress: ProgressFn | None,
    allow_files: bool,
) -> QueryResult:
    """One scan of `records` fed by verify as it goes, on `con` (closed here); the result only once
    the ledger verified."""
    stream = RecordStream(ledger_dir, trust, checkpoint, checkpoint_name)
    try:  # verify starts with the scan of `records`, which says what it reads
        shown = [None]

        def poll() -> None:  # verify's progress, shown from this thread while the scan runs
            if progress and stream.progress is not None and stream.progress is not shown[0]:
                shown[0] = stream.progress
                progress(stream.progress)

        try:
            cols, rows, types = _interruptible(
                con, sql, arrow, progress, allow_files, poll, {"records": StreamedRecords(stream)}
            )
        except duckdb.Error as e:
            failed: duckdb.Error | None = e
        except BaseException:
            stream.stop()
            raise
        else:
            failed = None
        res = stream.finish()  # raises what verify raised (not a ledger, storage failing)
        poll()
        if not res.ok:
            raise not_verified_error(res, "it is not queried")
        if failed is not None:
            raise _sql_error(failed, allow_files) from None
    finally:
        con.close()
    if arrow:
        return QueryResult(cols, [], res, rows)
    return QueryResult(cols, rows, res, types=types)


def _sql_error(e: duckdb.Error, allow_files: bool) -> UsageError:
    hint = (
        " (the SQL reads only `records`, `seals` and `windows`; --allow-files lets it read files)"
        if isinstance(e, duckdb.PermissionException) and not allow_files
        else ""
    )
    return UsageError(f"query failed: {str(e).splitlines()[0]}{hint}")


def _one_statement(sql: str) -> None:
    """UsageError unless `sql` is one statement: DuckDB would run them all and return only the last
    result, so the others' results would be lost without a word."""
    try:
        n = len(duckdb.extract_statements(sql))
    except duckdb.Error:
        return  # a syntax error: running it reports it
    if n == 0:
        raise UsageError("query failed: the SQL holds no statement")
    if n > 1:
        raise UsageError(
            f"query runs one SQL statement, got {n}: run one query for each, or "
            "combine them in one (UNION ALL, a WITH clause)"
        )


def _interruptible(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    arrow: bool = False,
    progress: ProgressFn | None = None,
    allow_files: bool = False,
    poll: Callable[[], None] | None = None,
    views: dict | None = None,
) -> tuple[list[str], list[tuple] | pa.Table, list]:
    """(column names, rows or with `arrow` a pyarrow Table, column types) of `sql`. DuckDB runs
    it on a worker thread so that Ctrl-C reaches the main thread, which interrupts the query and
    re-raises KeyboardInterrupt (a query blocked in DuckDB on the main thread never sees the
    signal)."""
    done: list = []
    finished = threading.Event()  # not Thread.is_alive(): a join() cut by Ctrl-C can leave it wrong
    cur = con.cursor()  # the connection itself refuses interrupt() while a call on it is running
    # Python objects are seen by the cursor they are registered on
    for name, obj in (views or {}).items():
        cur.register(name, obj)
    # DuckDB tracks progress only with its bar on; it never prints it (stdout is results)
    if progress:
        cur.execute("SET enable_progress_bar = true")
        cur.execute("SET enable_progress_bar_print = false")
    if not allow_files:  # last: once locked, not even these settings change
        cur.execute("SET enable_external_access = false")
        cur.execute("SET lock_configuration = true")

    def work() -> None:
        try:
            # a relation: Arrow straight from DuckDB (1.x names it arrow(), 2.x to_arrow_table())
            if arrow:
                rel = cur.sql(sql)
                table = (
                    (getattr(rel, "to_arrow_table", None) or rel.arrow)()
                    if rel is not None
                    else pa.table({})
                )
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
            if poll:  # a streamed scan's verify, before DuckDB's own estimate
                poll()
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
