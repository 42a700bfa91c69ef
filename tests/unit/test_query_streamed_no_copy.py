"""The streamed `records` scan that copies no record bytes (verify_ledger keep_records=False): it
hands on only segments whose records were read and checked (a pruned segment goes to on_pruned, as
with a copy), its counts are the seals' record counts (raw, compacted to Parquet, several links, a
pruned ledger), and the stream's start, stop and finish hold in any order."""

from __future__ import annotations

import shutil
import threading

import pyarrow.compute as pc
import pytest
from test_prune import CUT, built  # noqa: F401 - the fixture
from test_query_streamed_records import multi_link_ledger  # noqa: F401 - the fixture

from ledgertool.ledger.compact import compact_ledger
from ledgertool.ledger.prune import prune_ledger
from ledgertool.reconcile import query as q
from ledgertool.reconcile.query import RecordStream, StreamedRecords, connect, run_query
from ledgertool.verify.ledger import verify_ledger

PER_SEGMENT = "SELECT link, segment, count(*) FROM records GROUP BY ALL ORDER BY ALL"
SEALED = "SELECT link, segment, records FROM seals WHERE records > 0 ORDER BY ALL"


def _materialised(ledger, sql: str) -> list[tuple]:
    con, res = connect(ledger)
    try:
        assert res.ok
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _handed(ledger, trust, keep: bool):
    segs, pruned = [], []
    res = verify_ledger(
        ledger,
        trust,
        on_segment=lambda s: segs.append((s.link, s.index, s.count, s.records is None)),
        on_pruned=lambda link, i, seal: pruned.append((link, i)),
        keep_records=keep,
    )
    return res, segs, pruned


@pytest.fixture()
def pruned_ledger(built, tmp_path):  # noqa: F811
    out = tmp_path / "P"
    shutil.copytree(built["both"], out)
    prune_ledger(out, CUT, built["sk"])
    return out


def test_a_pruned_segment_goes_to_on_pruned_whether_or_not_records_are_kept(
    built,  # noqa: F811
    pruned_ledger,
):
    """keep_records=False handed each pruned segment to on_segment (no records, count 0) and
    never to on_pruned: on_segment sees only segments whose records were read and checked."""
    kept, kept_segs, kept_pruned = _handed(pruned_ledger, built["trust"], True)
    bare, bare_segs, bare_pruned = _handed(pruned_ledger, built["trust"], False)
    assert kept.ok and bare.ok
    assert kept_pruned == bare_pruned == [("link0", 0), ("link0", 1), ("link0", 2)]
    assert [s[:3] for s in bare_segs] == [s[:3] for s in kept_segs]
    assert [s[1] for s in bare_segs] == list(range(3, 3 + len(bare_segs))) and bare_segs
    assert all(no_copy for *_, no_copy in bare_segs)
    assert not any(no_copy for *_, no_copy in kept_segs)


def test_counts_of_a_pruned_ledger_are_those_of_the_records_still_held(pruned_ledger):
    for sql in ("SELECT count(*) FROM records", PER_SEGMENT):
        assert run_query(pruned_ledger, sql).rows == _materialised(pruned_ledger, sql)
    held = [r for r in _materialised(pruned_ledger, SEALED) if r[1] >= 3]
    assert run_query(pruned_ledger, PER_SEGMENT).rows == held


def test_counts_of_compacted_segments_are_the_seals(built, tmp_path):  # noqa: F811
    """Parquet segments (compacted v2) beside raw ones: count(*) per segment, read without a
    record copy, is each seal's record count."""
    lg = tmp_path / "C"
    shutil.copytree(built["frames"], lg)
    compact_ledger(lg)
    assert list(lg.glob("link=link0/*.parquet"))
    sealed = _materialised(lg, SEALED)
    assert run_query(lg, PER_SEGMENT).rows == sealed
    assert run_query(lg, "SELECT count(*) FROM records").rows == [(sum(r[2] for r in sealed),)]


def test_counts_over_several_links_are_the_seals(multi_link_ledger):  # noqa: F811
    sealed = _materialised(multi_link_ledger, SEALED)
    assert {r[0] for r in sealed} == {"east", "west"}
    assert run_query(multi_link_ledger, PER_SEGMENT).rows == sealed


def _stream(ledger) -> RecordStream:
    return RecordStream(ledger, None, None, "checkpoint")


def test_stop_before_any_scan_starts_nothing(sample_ledger):
    s = _stream(sample_ledger)
    s.stop()
    assert s._thread.ident is None and s.result is None


def test_finish_without_a_scan_verifies_without_copying(sample_ledger, monkeypatch):
    real, kept = q.verify_ledger, []

    def recording(*args, keep_records=True, **kw):
        kept.append(keep_records)
        return real(*args, keep_records=keep_records, **kw)

    monkeypatch.setattr(q, "verify_ledger", recording)
    res = _stream(sample_ledger).finish()
    assert res.ok and res.records > 0 and kept == [False]


@pytest.mark.parametrize(
    "columns, filtered, copied",
    [
        (None, False, True),  # a plan that names no columns: every column, from the copy
        ([], False, False),  # count(*): the rows still count
        (["segment", "link"], False, False),
        (["segment"], True, True),  # a filter may read any column
        (["seq"], False, True),
    ],
)
def test_the_scanner_copies_records_only_for_columns_of_their_bytes(
    sample_ledger, monkeypatch, columns, filtered, copied
):
    real, kept = q.verify_ledger, []

    def recording(*args, keep_records=True, **kw):
        kept.append(keep_records)
        return real(*args, keep_records=keep_records, **kw)

    monkeypatch.setattr(q, "verify_ledger", recording)
    s = _stream(sample_ledger)
    ds = StreamedRecords(s)
    flt = (pc.field("segment") >= 0) if filtered else None
    table = ds.scanner(columns=columns, filter=flt).to_table()
    res = s.finish()
    assert res.ok and kept == [copied]
    assert table.num_rows == res.records
    with pytest.raises(RuntimeError, match="scanned once"):
        ds.scanner(columns=columns)


def test_stop_while_verify_waits_on_a_full_queue_ends_its_thread(sample_ledger):
    s = _stream(sample_ledger)
    s.start(keep_records=False)
    deadline = threading.Event()
    for _ in range(50):  # verify has handed over its first segment and waits for room
        if s._queue.full():
            break
        deadline.wait(0.05)
    s.stop()
    assert not s._thread.is_alive() and s.error is None


def test_the_no_copy_counts_are_the_seals(sample_ledger):
    sealed = _materialised(sample_ledger, SEALED)
    assert run_query(sample_ledger, PER_SEGMENT).rows == sealed
