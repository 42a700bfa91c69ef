"""The pairing engine of recompute: ledger records and capture frames paired one to one by digest,
every frame classified once as matched, ledger-only or capture-only, and the counts, examples and
per-link and per-second lines tallied; on one machine, a bucket at a time, and in a cluster's
partition task alike.

The rule (docs/cli.md, "recompute"): for each digest (its identity `pk`, see `pairing_views`), a
ledger record and a capture frame with the same timestamp pair first; the occurrences left pair in
time order. `pair_records` is the engine for rows in memory: the rows that pair one to one whatever
the rule (multiset.paired_masks, in C) are counted in numpy and only the others go through
DuckDB's statements (`pair_tables`, `tally_tables`), which also pair everything when the rows are
in DuckDB's tables already (several digest keys, a bucket too large for memory). A few rows left
without a window or uncovered segments, and no --details to write, are paired in Python instead
(`pair_few`, the same rule: opening DuckDB and its queries cost ~80 ms). `pair_store` pairs what a
PartStore kept, a group at a time.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from ..keyfiles import DigestKey
from .multiset import Tally, matched_tally, merge_tallies, paired_masks, window_mask
from .partstore import PartStore
from .segments import Segment

__all__ = [
    "CAPTURE_COLUMNS",
    "J_COLUMNS",
    "append_rows",
    "digest_array",
    "load_rows",
    "pair_few",
    "pair_records",
    "pair_store",
    "pair_tables",
    "pairing_views",
    "tally_tables",
    "window_sql",
]


def window_sql(col: str, lo: int | None, hi: int | None) -> str:
    parts = ([f"{col} >= {int(lo)}"] if lo is not None else []) + (
        [f"{col} < {int(hi)}"] if hi is not None else []
    )
    return " AND ".join(parts) or "true"


def pair_store(
    con,
    kid: str,
    segments: tuple[list[Segment], list[dict]],
    store: PartStore,
    wanted: np.ndarray | None,
    window: tuple[int | None, int | None, int],
    examples: int,
) -> Tally:
    """Pair and tally the rows `store` kept (of the parts `wanted` marks; None: all) as pair_records
    does over all of them (`segments`: the ledger's segments and the uncovered runs). The store's
    groups pair on their own (one, or a bucket at a time once it spilled); a bucket past the
    budget goes through DuckDB's pairing, which spills. Table `j` on `con` then holds the
    differing rows of every group (for --details). `con` may be a function that opens the
    connection when it is first needed (pair_records); table `j` is then not made."""
    if callable(con) and store.spilled:
        con = con()
    segs, uncovered = segments
    from_ns, to_ns, tolerance_ns = window
    several = store.spilled
    if several:
        con.execute(f"CREATE TEMP TABLE jall ({J_COLUMNS})")
    tallies = []

    def collect(tally: Tally) -> None:
        tallies.append(tally)
        if several:
            con.execute("INSERT INTO jall SELECT * FROM j WHERE status <> 'matched'")
            _drop_pairing(con)

    for g in store.groups(wanted):
        collect(
            pair_records(
                con, kid, segs, uncovered, (g.names, g.codes, g.ledger), g.capture, window, examples
            )
        )
    for bucket in store.oversized(wanted):
        load_rows(con, kid, np.zeros(0, dtype=object), store.empty, store.empty)
        for g in store.chunks(bucket, wanted):
            links = np.array(g.names + [""], dtype=object)[g.codes]
            append_rows(con, kid, links, g.ledger, g.capture)
        pair_tables(con, [(kid, None)], segs, uncovered, from_ns, to_ns, tolerance_ns)
        collect(tally_tables(con, from_ns, to_ns, examples))
    if several:
        con.execute("ALTER TABLE jall RENAME TO j")
    elif not tallies and not callable(con):
        con.execute(f"CREATE TEMP TABLE j ({J_COLUMNS})")
    return merge_tallies(tallies, examples)


def _drop_pairing(con) -> None:
    """Drop what one pairing made on `con` (pair_records, pair_tables), for the next group's."""
    for view in ("l", "c"):
        con.execute(f"DROP VIEW IF EXISTS {view}")
    for table in ("contested", "cov", "j", "lrec", "cap0"):
        con.execute(f"DROP TABLE IF EXISTS {table}")


def digest_array(arr: np.ndarray, digest_size: int) -> pa.FixedSizeBinaryArray:
    """The digests of `arr` (record_dtype) as an Arrow fixed-size binary column."""
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(digest_size),
        len(arr),
        [None, pa.py_buffer(np.ascontiguousarray(arr["digest"]).tobytes())],
    )


CAPTURE_COLUMNS = (
    "index UBIGINT, ts_ns BIGINT, wire_len UINTEGER, cap_len UINTEGER, flags USMALLINT, "
    "linktype USMALLINT, digest BLOB"
)


def load_rows(con, kid: str, links: np.ndarray, ledger: np.ndarray, capture: np.ndarray) -> None:
    """Tables `lrec` (ledger rows under key `kid`, `links` each one's link) and `cap0` (capture
    rows, `seq` the frame index) from record_dtype arrays, as _load_ledger_side and
    _load_capture_side make them."""
    con.execute(
        "CREATE TEMP TABLE lrec (link VARCHAR, kid VARCHAR, digest BLOB, seq UBIGINT, ts_ns "
        "BIGINT, wire_len UINTEGER)"
    )
    con.execute(f"CREATE TEMP TABLE cap0 ({CAPTURE_COLUMNS})")
    append_rows(con, kid, links, ledger, capture)


def append_rows(con, kid: str, links: np.ndarray, ledger: np.ndarray, capture: np.ndarray) -> None:
    """Append ledger rows (`links` each one's link) to table `lrec` and capture rows to `cap0`
    (both made already), as load_rows fills them."""
    size = ledger.dtype.fields["digest"][0].itemsize
    if len(ledger):
        con.register(
            "_l",
            pa.table(
                {
                    "link": pa.array(links.tolist(), pa.string()),
                    "kid": pa.array([kid] * len(ledger), pa.string()),
                    "digest": digest_array(ledger, size),
                    "seq": ledger["seq"],
                    "ts_ns": ledger["ts_ns"],
                    "wire_len": ledger["wire_len"],
                }
            ),
        )
        con.execute("INSERT INTO lrec SELECT * FROM _l")
        con.unregister("_l")
    if len(capture):
        con.register(
            "_c",
            pa.table(
                {
                    "index": capture["seq"],
                    "ts_ns": capture["ts_ns"],
                    "wire_len": capture["wire_len"],
                    "cap_len": capture["cap_len"],
                    "flags": capture["flags"],
                    "linktype": capture["linktype"],
                    "digest": digest_array(capture, size),
                }
            ),
        )
        con.execute("INSERT INTO cap0 SELECT * FROM _c")
        con.unregister("_c")


# table j's columns as pair_tables's CREATE TABLE AS makes them
J_COLUMNS = (
    "status VARCHAR, digest BLOB, link VARCHAR, seq UBIGINT, l_ts BIGINT, l_wire UINTEGER, index "
    "UBIGINT, c_ts BIGINT, c_wire UINTEGER, cap_len UINTEGER"
)


def pair_records(
    con,
    kid: str,
    segs: list[Segment],
    uncovered: list[dict],
    ledger_side: tuple[list[str], np.ndarray, np.ndarray],
    capture: np.ndarray,
    window: tuple[int | None, int | None, int],
    examples: int,
) -> Tally:
    """Pair and tally the ledger rows under key `kid` (`ledger_side`: link names, each row's link
    as an index into them, the records) with the capture rows, as pair_tables and tally_tables do
    over all of them (`window`: from_ns, to_ns, tolerance_ns): the rows that pair one to one
    (multiset.paired_masks: the ordered walk, then once_each, in C) are counted in numpy; only
    the others go through DuckDB, and table `j` on `con` holds their pairing (for --details).
    `con` may instead be a function that opens the connection: then up to FEW_ROWS rows left
    without a window or uncovered segments are paired by pair_few (no table `j`: for a run
    without --details), and DuckDB is opened only for more."""
    names, codes, ledger = ledger_side
    from_ns, to_ns, tolerance_ns = window
    lo = None if from_ns is None else from_ns - tolerance_ns
    hi = None if to_ns is None else to_ns + tolerance_ns
    if lo is not None or hi is not None:  # both sides are read over the widened window only
        lwide, cwide = window_mask(ledger["ts_ns"], lo, hi), window_mask(capture["ts_ns"], lo, hi)
        codes, ledger, capture = codes[lwide], ledger[lwide], capture[cwide]
    # with uncovered segments the capture's pairing order is not its array order (see pair_tables)
    # (one link: no codes for the walk to read)
    lpair, cpair, ts_sorted = paired_masks(
        ledger, codes if len(names) > 1 else None, capture, ordered=not uncovered, with_order=True
    )
    # the rest is usually a few rows: taken by index, and the paired side not copied when it is all
    lrest, crest = np.flatnonzero(~lpair), np.flatnonzero(~cpair)
    few = callable(con) and lo is None and hi is None and not uncovered
    if few and len(lrest) + len(crest) <= FEW_ROWS:
        exact = pair_few(names, codes[lrest], ledger[lrest], capture[crest], examples)
    elif len(lrest) or len(crest):
        con = con() if callable(con) else con
        load_rows(
            con,
            kid,
            np.array(names + [""], dtype=object)[codes[lrest]],
            ledger[lrest],
            capture[crest],
        )
        pair_tables(con, [(kid, None)], segs, uncovered, from_ns, to_ns, tolerance_ns)
        exact = tally_tables(con, from_ns, to_ns, examples)
    else:  # every row paired: DuckDB's queries (~40 ms) would pair nothing
        (con() if callable(con) else con).execute(f"CREATE TEMP TABLE j ({J_COLUMNS})")
        exact = Tally(0, 0, 0, 0, [], [], [], [])
    lsel, csel = (
        (slice(None) if not len(lrest) else lpair),
        (slice(None) if not len(crest) else cpair),
    )
    # (a selection of a non-decreasing column is one too)
    matched = matched_tally(
        names, codes[lsel], ledger["ts_ns"][lsel], capture["ts_ns"][csel], from_ns, to_ns, ts_sorted
    )
    return merge_tallies([exact, matched], examples)


#: the most rows left to the exact pairing that pair_records pairs in Python (a few µs a row)
#: rather than in DuckDB when it may choose
FEW_ROWS = 20_000


def pair_few(
    names: list[str], codes: np.ndarray, ledger: np.ndarray, capture: np.ndarray, examples: int
) -> Tally:
    """tally_tables after pair_tables over these rows (one digest key, no window, no uncovered
    segments; `codes` each ledger row's link as an index into `names`), computed in Python by the
    same rule: a digest whose counts agree is matched; a contested one pairs its occurrences of
    the same time first (k-th with k-th, ledger by link and seq, capture by index), the rest in
    time order (ledger by time, link and seq, capture by time and index)."""
    links = [names[c] for c in codes.tolist()]
    lrows = list(
        zip(
            ledger["digest"].tolist(),
            links,
            ledger["seq"].tolist(),
            ledger["ts_ns"].tolist(),
            ledger["wire_len"].tolist(),
        )
    )
    crows = list(
        zip(
            capture["digest"].tolist(),
            capture["seq"].tolist(),
            capture["ts_ns"].tolist(),
            capture["wire_len"].tolist(),
        )
    )
    lonly, conly = _pair_contested(lrows, crows)
    per_link = []
    lo_links = Counter(r[1] for r in lonly)
    for link, total in sorted(Counter(links).items()):
        lo_ = lo_links.get(link, 0)
        per_link.append(
            {"link": link, "matched": total - lo_, "ledger_only": lo_, "capture_only": 0}
        )
    if conly:
        per_link.append({"link": None, "matched": 0, "ledger_only": 0, "capture_only": len(conly)})
    seconds: dict[int, list[int]] = {}
    for r in lrows:
        seconds.setdefault(_second(r[3]), [0, 0, 0])[0] += 1
    for r in lonly:
        row = seconds[_second(r[3])]
        row[0] -= 1
        row[1] += 1
    for r in conly:
        seconds.setdefault(_second(r[2]), [0, 0, 0])[2] += 1
    return Tally(
        len(crows),
        len(lrows) - len(lonly),
        len(lonly),
        len(conly),
        per_link,
        [
            {"second": sec, "matched": m, "ledger_only": lo_, "capture_only": co}
            for sec, (m, lo_, co) in sorted(seconds.items())
        ],
        [(d.hex(), *rest) for d, *rest in sorted(lonly, key=lambda r: (r[1], r[2]))[:examples]],
        [(d.hex(), *rest) for d, *rest in sorted(conly, key=lambda r: r[1])[:examples]],
    )


def _pair_contested(lrows: list[tuple], crows: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """The ledger-only and capture-only rows of pair_few's rows (ledger: digest, link, seq, time,
    wire length; capture: digest, index, time, wire length)."""
    lby: dict[bytes, list[tuple]] = {}
    cby: dict[bytes, list[tuple]] = {}
    for r in lrows:
        lby.setdefault(r[0], []).append(r)
    for r in crows:
        cby.setdefault(r[0], []).append(r)
    lonly: list[tuple] = []
    conly: list[tuple] = []
    for pk in lby.keys() | cby.keys():
        ls, cs = lby.get(pk, []), cby.get(pk, [])
        if len(ls) == len(cs):  # not contested: every occurrence matched
            continue
        lt: dict[int, list[tuple]] = {}
        ct: dict[int, list[tuple]] = {}
        for r in sorted(ls, key=lambda r: (r[1], r[2])):
            lt.setdefault(r[3], []).append(r)
        for r in sorted(cs, key=lambda r: r[1]):
            ct.setdefault(r[2], []).append(r)
        # the first min(l, c) of each time on each side pair at their own time
        lleft = [r for ts, rows in lt.items() for r in rows[len(ct.get(ts, ())) :]]
        cleft = [r for ts, rows in ct.items() for r in rows[len(lt.get(ts, ())) :]]
        lleft.sort(key=lambda r: (r[3], r[1], r[2]))
        cleft.sort(key=lambda r: (r[2], r[1]))
        n = min(len(lleft), len(cleft))
        lonly.extend(lleft[n:])
        conly.extend(cleft[n:])
    return lonly, conly


def _second(ts: int) -> int:
    """ts (ns) // 10^9 as DuckDB's integer division takes it (towards zero)."""
    return ts // 1_000_000_000 if ts >= 0 else -(-ts // 1_000_000_000)


def pair_tables(
    con,
    keys: list[tuple[str, DigestKey]],
    segs: list[Segment],
    uncovered: list[dict],
    from_ns: int | None,
    to_ns: int | None,
    tolerance_ns: int,
) -> None:
    """Pair ledger records with capture frames into table `j` (status matched, ledger_only or
    capture_only), restricted to the window."""
    # Both sides are read over the window widened by the tolerance, paired, and then each
    # row counts where it belongs: matched and ledger-only by the ledger's timestamp,
    # capture-only by the capture's. Unpaired frames in the margins are ignored.
    lo = None if from_ns is None else from_ns - tolerance_ns
    hi = None if to_ns is None else to_ns + tolerance_ns
    pairing_views(con, keys, lo, hi)
    # Digests whose counts agree on both sides pair up completely; only the others
    # ("contested") need the per-frame pairing, which keeps the heavy work to aggregations
    # that DuckDB runs out of core.
    # Frames pair by identity `pk` (the digest itself with one key; see the module doc).
    con.execute("""
        CREATE TEMP TABLE contested AS
        WITH lc AS (SELECT pk, count(*) AS n FROM l GROUP BY pk),
             cc AS (SELECT pk, count(*) AS n FROM c GROUP BY pk)
        SELECT coalesce(lc.pk, cc.pk) AS pk FROM lc FULL OUTER JOIN cc ON lc.pk = cc.pk
        WHERE coalesce(lc.n, 0) <> coalesce(cc.n, 0)""")
    # With some segments uncovered (a key not given), the same bytes may have been captured
    # in a covered and an uncovered epoch: their capture occurrences are then paired
    # first from the frames whose time falls in a covered segment (within the tolerance),
    # so the uncovered epoch's copies are the capture-only ones. Counts do not depend on it.
    first = "0"
    if uncovered:  # the covered segments' time ranges, from their (hash-checked) seals
        given = {kid for kid, _ in keys}
        con.execute("CREATE TEMP TABLE cov (lo BIGINT, hi BIGINT)")
        ranges = [
            (g.ts_range[0] - tolerance_ns, g.ts_range[1] + tolerance_ns)
            for g in segs
            if g.digest_key_id in given and g.ts_range
        ]
        if ranges:
            con.executemany("INSERT INTO cov VALUES (?, ?)", ranges)
        first = "NOT EXISTS (SELECT 1 FROM cov WHERE c.ts_ns BETWEEN cov.lo AND cov.hi)"
    # The pairing rule (docs/cli.md, "recompute"): a digest's ledger record and capture frame with
    # the same timestamp pair first, k-th with k-th among those of that time (ledger by link and
    # seq, capture by index): the same frame seen on both sides, so a frame missing or changed is
    # named itself, not a later frame with the same bytes. The rest of each digest's occurrences
    # pair in time order, k-th with k-th. `e` marks the rows paired at their own time, and the join
    # key is (pk, e, ts_ns, k) for those, (pk, e, rank among the rest, 0) for the others.
    con.execute(f"""
        CREATE TEMP TABLE j AS
        WITH l1 AS (SELECT *, row_number() OVER (PARTITION BY pk, ts_ns ORDER BY link, seq) AS k
                    FROM l SEMI JOIN contested USING (pk)),
             c1 AS (SELECT *, row_number() OVER (PARTITION BY pk, ts_ns ORDER BY away, index) AS k
                    FROM (SELECT c.*, {first} AS away FROM c SEMI JOIN contested USING (pk)) c),
             e AS (SELECT pk, ts_ns, k FROM l1 SEMI JOIN c1 USING (pk, ts_ns, k)),
             l2 AS (SELECT l1.*, e.pk IS NOT NULL AS e FROM l1 LEFT JOIN e USING (pk, ts_ns, k)),
             c2 AS (SELECT c1.*, e.pk IS NOT NULL AS e FROM c1 LEFT JOIN e USING (pk, ts_ns, k)),
             lk AS (SELECT *, CASE WHEN e THEN ts_ns ELSE row_number() OVER
                                   (PARTITION BY pk, e ORDER BY ts_ns, link, seq) END AS a,
                              CASE WHEN e THEN k ELSE 0 END AS b FROM l2),
             ck AS (SELECT *, CASE WHEN e THEN ts_ns ELSE row_number() OVER
                                   (PARTITION BY pk, e ORDER BY away, ts_ns, index) END AS a,
                              CASE WHEN e THEN k ELSE 0 END AS b FROM c2)
        SELECT CASE WHEN lk.pk IS NULL THEN 'capture_only'
                    WHEN ck.pk IS NULL THEN 'ledger_only' ELSE 'matched' END AS status,
               coalesce(lk.digest, ck.digest) AS digest, lk.link, lk.seq, lk.ts_ns AS l_ts,
               lk.wire_len AS l_wire, ck.index, ck.ts_ns AS c_ts, ck.wire_len AS c_wire, ck.cap_len
        FROM lk FULL OUTER JOIN ck
          ON lk.pk = ck.pk AND lk.e = ck.e AND lk.a = ck.a AND lk.b = ck.b""")
    con.execute(f"""DELETE FROM j WHERE
        (status <> 'capture_only' AND NOT ({window_sql("l_ts", from_ns, to_ns)})) OR
        (status = 'capture_only' AND NOT ({window_sql("c_ts", from_ns, to_ns)}))""")


def tally_tables(con, from_ns: int | None, to_ns: int | None, examples: int) -> Tally:
    lonly, conly = con.execute("""SELECT count(*) FILTER (status = 'ledger_only'),
        count(*) FILTER (status = 'capture_only') FROM j""").fetchone()
    # Every ledger frame in the window is either matched or ledger-only.
    lwin = window_sql("ts_ns", from_ns, to_ns)
    ledger_in_window = con.execute(f"SELECT count(*) FROM l WHERE {lwin}").fetchone()[0]
    matched = ledger_in_window - lonly
    frames_in_window = con.execute(f"SELECT count(*) FROM c WHERE {lwin}").fetchone()[0]
    per_link = []
    for link, total, lo_ in con.execute(f"""
            WITH t AS (SELECT link, count(*) AS n FROM l WHERE {lwin} GROUP BY link),
                 o AS (SELECT link, count(*) AS n FROM j WHERE status = 'ledger_only' GROUP BY link)
            SELECT t.link, t.n, coalesce(o.n, 0) FROM t LEFT JOIN o USING (link)
            ORDER BY t.link""").fetchall():
        per_link.append(
            {"link": link, "matched": total - lo_, "ledger_only": lo_, "capture_only": 0}
        )
    if conly:
        per_link.append({"link": None, "matched": 0, "ledger_only": 0, "capture_only": conly})
    seconds: dict[int, list[int]] = {}
    for sec, n in con.execute(
        f"SELECT ts_ns // 1000000000, count(*) FROM l WHERE {lwin} GROUP BY 1"
    ).fetchall():
        seconds.setdefault(int(sec), [0, 0, 0])[0] += n
    for (
        sec,
        status,
        n,
    ) in con.execute("""SELECT coalesce(l_ts, c_ts) // 1000000000, status, count(*) FROM j
            WHERE status <> 'matched' GROUP BY ALL""").fetchall():
        row = seconds.setdefault(int(sec), [0, 0, 0])
        if status == "ledger_only":
            row[0] -= n
            row[1] += n
        else:
            row[2] += n
    per_second = [
        {"second": sec, "matched": m, "ledger_only": lo_, "capture_only": co}
        for sec, (m, lo_, co) in sorted(seconds.items())
    ]
    ex_l = con.execute(
        """SELECT lower(hex(digest)), link, seq, l_ts, l_wire FROM j
        WHERE status = 'ledger_only' ORDER BY link, seq LIMIT ?""",
        [examples],
    ).fetchall()
    ex_c = con.execute(
        """SELECT lower(hex(digest)), index, c_ts, c_wire FROM j
        WHERE status = 'capture_only' ORDER BY index LIMIT ?""",
        [examples],
    ).fetchall()
    return Tally(frames_in_window, matched, lonly, conly, per_link, per_second, ex_l, ex_c)


def pairing_views(con, keys: list[tuple[str, DigestKey]], lo: int | None, hi: int | None) -> None:
    """Views `l` (ledger frame records, from table `lrec`) and `c` (capture frames, from `cap0`),
    each with a pairing identity `pk`.

    With one key `pk` is the digest. With several, a capture frame's `pk` (and the `digest` shown in
    examples) is its digest under the first key in the ledger's key order; a ledger record
    of key i > 0 takes the `pk` of a capture frame whose digest under key i equals its own (map
    `m{i}`), or, with no such frame, its key id followed by its digest: longer than any digest, so
    it pairs with nothing and stays ledger-only."""
    win = window_sql("ts_ns", lo, hi)
    con.execute(
        "CREATE VIEW c AS SELECT index, digest, digest AS pk, ts_ns, wire_len, cap_len FROM cap0 "
        f"WHERE {win}"
    )
    parts = []
    for i, (kid, _) in enumerate(keys):
        rows = (
            f"(SELECT * FROM lrec WHERE kid = '{kid}' AND {win})"  # kid: 32 hex (DigestKey.key_id)
        )
        if i == 0:
            parts.append(f"SELECT link, digest, digest AS pk, seq, ts_ns, wire_len FROM {rows}")
            continue
        # one row per digest under key i (any_value: two frames colliding under key i alone
        # must not duplicate ledger rows)
        con.execute(
            f"CREATE TEMP TABLE m{i} AS SELECT ci.digest AS d, min(c0.digest) AS pk FROM "
            f"cap0 c0 JOIN cap{i} ci USING (index) GROUP BY ci.digest"
        )
        parts.append(
            f"SELECT r.link, r.digest, coalesce(m{i}.pk, unhex('{kid}') || r.digest) AS pk, r.seq, "
            f"r.ts_ns, r.wire_len FROM {rows} r LEFT JOIN m{i} ON r.digest = m{i}.d"
        )
    con.execute("CREATE VIEW l AS " + " UNION ALL ".join(parts))
