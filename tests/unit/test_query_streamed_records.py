"""`query` scans `records` straight from the bytes verify checked: the streamed scan gives the
same answers as the materialised tables, sees the checked copy (not the file, which may change
after verify read it) and holds memory flat in the ledger's size."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_keys

from ledgertool.reconcile import query as q
from ledgertool.reconcile.query import connect, run_query, streams

QUERIES = {
    "count": ("SELECT count(*) FROM records", True),
    "by segment": (
        "SELECT link, segment, count(*), min(seq), max(ts_ns) FROM records GROUP BY ALL "
        "ORDER BY ALL",
        True,
    ),
    "sum of wire lengths": ("SELECT sum(wire_len), sum(cap_len), bit_or(flags) FROM records", True),
    "digests as blobs": (
        "SELECT seq, digest, octet_length(digest) FROM records ORDER BY seq",
        True,
    ),
    "filtered": (
        "SELECT count(*), sum(aux) FROM records WHERE wire_len > 100 AND seq % 3 = 1",
        True,
    ),
    "rows per link and segment": (
        "SELECT link, segment, count(*) FROM records GROUP BY ALL ORDER BY ALL",
        True,
    ),
    "self-join": ("SELECT count(*) FROM records a JOIN records b ON a.seq = b.seq + 1", False),
    "with seals": ("SELECT count(*) FROM records JOIN seals USING (segment)", False),
}


def _materialised(ledger: Path, sql: str) -> list[tuple]:
    con, res = connect(ledger)  # every record INSERTed into a table, as the query always did
    try:
        assert res.ok
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture()
def multi_link_ledger(tmp_path, keydir) -> Path:
    """Two links' captures of the sample, 40 records a segment (8 segments each)."""
    from conftest import SAMPLES

    from ledgertool.capture.run import capture_file

    dk, sk, _ = load_keys(keydir)
    out = tmp_path / "M"
    for link in ("east", "west"):
        capture_file(
            SAMPLES / "sample.pcapng",
            out,
            digest_key=dk,
            signing_key=sk,
            segment_records=40,
            link=link,
        )
    return out


@pytest.mark.parametrize("what", list(QUERIES))
@pytest.mark.parametrize("which", ["sample_ledger", "multi_link_ledger"])
def test_query_answers_as_the_materialised_tables(what, which, request):
    ledger = request.getfixturevalue(which)
    sql, streamed = QUERIES[what]
    assert streams(sql) is streamed
    want = _materialised(ledger, sql)
    assert want and want[-1][0] not in (0, None)  # a query with something to compare
    assert run_query(ledger, sql).rows == want


def test_query_of_a_ledger_that_does_not_verify_hands_out_no_rows(sample_ledger):
    from ledgertool.errors import DiscrepancyError

    rec = sorted(sample_ledger.glob("link=link0/*.rec"))[-1]
    raw = bytearray(rec.read_bytes())
    raw[len(raw) // 2] ^= 1
    rec.write_bytes(bytes(raw))
    with pytest.raises(DiscrepancyError, match="does not verify"):
        run_query(sample_ledger, "SELECT count(*) FROM records")


def test_query_sees_the_checked_copy_not_a_file_changed_after_verify_read_it(
    sample_ledger, monkeypatch
):
    sql = "SELECT sum(wire_len), string_agg(hex(digest), '' ORDER BY seq) FROM records"
    want = run_query(sample_ledger, sql).rows
    files = sorted(sample_ledger.glob("link=link0/*.rec"))
    real = q.verify_ledger

    def tampering(*args, on_segment, **kw):
        def seen(seg):
            on_segment(seg)  # handed to the scan; now the adversary rewrites every record byte
            path = files[seg.index]
            raw = bytearray(path.read_bytes())
            raw[-400:] = bytes(400)
            path.write_bytes(bytes(raw))

        return real(*args, on_segment=seen, **kw)

    monkeypatch.setattr(q, "verify_ledger", tampering)
    assert run_query(sample_ledger, sql).rows == want
    assert all(f.read_bytes()[-400:] == bytes(400) for f in files)  # each was changed


@pytest.mark.parametrize(
    "sql, copied",
    [
        ("SELECT count(*) FROM records", False),
        ("SELECT segment, count(*) FROM records GROUP BY ALL ORDER BY ALL", False),
        ("SELECT count(*) FROM records WHERE link = 'link0'", True),  # a filter: every column
        ("SELECT sum(wire_len) FROM records", True),
    ],
)
def test_a_scan_of_no_record_bytes_verifies_without_copying_them(
    sample_ledger, monkeypatch, sql, copied
):
    """count(*) and counts per segment read no record byte: verify checks each file where it was
    read, as `verify` does, and the scan counts the seals' records; any other column is copied."""
    want, real, kept = _materialised(sample_ledger, sql), q.verify_ledger, []

    def recording(*args, keep_records=True, **kw):
        kept.append(keep_records)
        return real(*args, keep_records=keep_records, **kw)

    monkeypatch.setattr(q, "verify_ledger", recording)
    assert run_query(sample_ledger, sql).rows == want
    assert kept == [copied]


def test_a_count_of_a_ledger_that_does_not_verify_still_hands_out_no_rows(sample_ledger):
    """The no-copy scan is verify all the same: a changed record, a count refused."""
    from ledgertool.errors import DiscrepancyError

    rec = sorted(sample_ledger.glob("link=link0/*.rec"))[0]
    raw = bytearray(rec.read_bytes())
    raw[-40] ^= 1  # a digest byte of the segment's last record
    rec.write_bytes(bytes(raw))
    with pytest.raises(DiscrepancyError, match="does not verify"):
        run_query(sample_ledger, "SELECT segment, count(*) FROM records GROUP BY ALL")
