"""The cluster tasks' own pieces, run in this process (no LocalCluster): segments batched per task,
a batch's error raised after the checks before it, the split by partition and the joins of record
arrays against plain numpy references, and the per-thread DuckDB database of the partition tasks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import SAMPLES, load_keys
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_files import sealed_records

distributed = pytest.importorskip("distributed")

from ledgertool.capture.run import capture_file  # noqa: E402
from ledgertool.digest.record import FLAG_GAP, record_dtype  # noqa: E402
from ledgertool.errors import ClusterError, LedgerFormatError, UsageError  # noqa: E402
from ledgertool.ledger.header import load_ledger  # noqa: E402
from ledgertool.ledger.reader import LedgerReader  # noqa: E402
from ledgertool.reconcile import cluster as rc  # noqa: E402
from ledgertool.reconcile.multiset import concat_records  # noqa: E402
from ledgertool.verify import cluster as vc  # noqa: E402
from ledgertool.verify.checks import SegmentPlace  # noqa: E402

SEG = 20  # sample.pcap's 294 records: 15 segments


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, keydir):
    out = tmp_path_factory.mktemp("ct") / "ledger"
    dk, sk, _ = load_keys(keydir)
    capture_file(
        SAMPLES / "sample.pcap",
        out,
        digest_key=dk,
        signing_key=sk,
        link="link0",
        segment_records=SEG,
    )
    return out


def _ctx(ledger):
    return vc.LedgerContext(str(ledger), load_ledger(ledger), None), LedgerReader(ledger).listing(
        "link0"
    )


def _records(n: int, digest_size: int, seed: int) -> np.ndarray:
    raw = np.random.default_rng(seed).integers(
        0, 256, n * record_dtype(digest_size).itemsize, dtype=np.uint8
    )
    return raw.view(record_dtype(digest_size))


def _partition(digest: bytes, parts: int) -> int:
    return ((digest[0] << 8 | digest[1]) * parts) >> 16


def test_task_batches_known_sizes():
    places = [SegmentPlace(None, "l", i, None, None) for i in range(100)]
    # 100 segments, 2 threads: ceil(100 / 8) = 13 a task, capped at 8
    assert [[p.index for p in b][:2] + [len(b)] for b in vc.task_batches(places, 2)][:3] == [
        [0, 1, 8],
        [8, 9, 8],
        [16, 17, 8],
    ]
    assert len(vc.task_batches(places, 2)) == 13 and len(vc.task_batches(places, 2)[-1]) == 4
    assert [len(b) for b in vc.task_batches(places[:20], 1)] == [5, 5, 5, 5]
    assert [len(b) for b in vc.task_batches(places[:5], 4)] == [1] * 5
    assert [p.index for b in vc.task_batches(places[:37], 3) for p in b] == list(range(37))
    assert vc.task_batches([], 2) == []


def test_batch_checks_every_segment_like_one_task_each(ledger):
    ctx, listing = _ctx(ledger)
    batch = vc.check_segments_task(ctx, vc.segment_part(listing, [3, 4, 5]), [3, 4, 5])
    assert batch.error is None and [c.seal.index for c in batch.checks] == [3, 4, 5]
    for c in batch.checks:
        one = vc.check_segment_task(ctx, vc.segment_part(listing, c.seal.index), c.seal.index)
        assert (
            c == one
            and c.records.table is None
            and c.records.records is None
            and c.seal.problems == ()
        )


def test_batch_error_is_raised_after_the_checks_before_it(ledger, monkeypatch):
    ctx, listing = _ctx(ledger)
    real = vc.check_segment

    def failing(reader, part, place):
        if place.index == 5:
            raise LedgerFormatError("segment 5 cannot be read")
        return real(reader, part, place)

    monkeypatch.setattr(vc, "check_segment", failing)
    batch = vc.check_segments_task(ctx, vc.segment_part(listing, [4, 5, 6]), [4, 5, 6])
    assert [c.seal.index for c in batch.checks] == [4] and str(
        batch.error
    ) == "segment 5 cannot be read"

    class Done:
        def __init__(self, value=None, exc=None):
            self.value, self.exc, self.released = value, exc, False

        def result(self):
            if self.exc is not None:
                raise self.exc
            return self.value

        def release(self):
            self.released = True

    ok = vc.SegmentBatch(
        vc.check_segments_task(ctx, vc.segment_part(listing, [0, 1]), [0, 1]).checks
    )
    futures = [
        ([0, 1], Done(ok)),
        ([4, 5, 6], Done(batch)),
        ([7], Done(exc=RuntimeError("never taken"))),
    ]
    got = []
    with pytest.raises(LedgerFormatError, match="segment 5 cannot be read"):
        for c in vc.ordered_results(futures, ledger, "link0"):
            got.append(c.seal.index)
    assert got == [0, 1, 4] and all(f.released for _, f in futures)
    worker = type("W", (), {"address": "tcp://w"})()
    lost = [([0, 1], Done(ok)), ([2, 3], Done(exc=distributed.KilledWorker("t", worker, 3)))]
    with pytest.raises(ClusterError, match=r"link link0 segments 2-3: the cluster lost its check"):
        list(vc.ordered_results(lost, ledger, "link0"))


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 400),
    parts=st.sampled_from([1, 2, 3, 7, 64, 65536]),
    size=st.sampled_from([16, 32]),
    seed=st.integers(0, 2**32 - 1),
    step=st.sampled_from([1, 2]),
)
def test_split_by_partition_is_a_stable_filter(n, parts, size, seed, step):
    arr = _records(n, size, seed)[::step]
    got = rc.split_by_partition(arr, parts)
    assert len(got) == parts
    rows: dict[int, list[int]] = {}  # partition -> its records' indexes, in order
    for i, d in enumerate(arr["digest"]):
        rows.setdefault(_partition(bytes(d), parts), []).append(i)
    for p, part in enumerate(got):
        want = arr[rows.get(p, [])]
        assert part.dtype == arr.dtype and part.tobytes() == want.tobytes()


@settings(max_examples=40, deadline=None)
@given(
    lens=st.lists(st.integers(0, 50), max_size=6),
    size=st.sampled_from([16, 32]),
    seed=st.integers(0, 2**32 - 1),
)
def test_concat_records_is_numpys_concatenate(lens, size, seed):
    arrays = [_records(k, size, seed + i)[:: (i % 2) + 1] for i, k in enumerate(lens)]
    got = concat_records(arrays, record_dtype(size))
    want = np.concatenate(arrays) if arrays else np.zeros(0, record_dtype(size))
    assert (
        got.dtype == record_dtype(size)
        and got.flags.c_contiguous
        and got.tobytes() == want.tobytes()
    )


def test_check_and_split_partitions_the_checked_records_in_segment_order(ledger):
    ctx, listing = _ctx(ledger)
    indexes = [2, 3, 4, 5]
    head, parts = rc.check_and_split(ctx, vc.segment_part(listing, indexes), indexes, 3)
    assert head.error is None and [c.seal.index for c in head.checks] == indexes and len(parts) == 3
    dt = record_dtype(16)
    recs = np.concatenate([np.frombuffer(sealed_records(ledger, i, "link0"), dt) for i in indexes])
    recs = recs[(recs["flags"] & FLAG_GAP) == 0]
    assert len(recs) == 4 * SEG
    kid = head.checks[0].seal.doc.digest_key_id
    for p, lps in enumerate(parts):
        assert [(lp.link, lp.kid) for lp in lps] == [("link0", kid)]  # one run: one key id
        want = recs[[_partition(bytes(d), 3) == p for d in recs["digest"]]]
        assert lps[0].records.tobytes() == want.tobytes() and len(want) > 0
    assert sum(len(lps[0].records) for lps in parts) == 4 * SEG


def test_check_and_split_error_is_the_batch_s(ledger):
    ctx, listing = _ctx(ledger)
    bad = vc.LedgerContext(str(ledger), replace(ctx.ledger, sha256="0" * 64), None)
    head, parts = rc.check_and_split(bad, vc.segment_part(listing, [0, 1]), [0, 1], 2)
    assert head.checks == [] and "is not the one verified" in str(head.error) and parts == ((), ())


def test_partition_connection_is_fresh_each_task(tmp_path):
    first = rc._partition_connection("1GB", str(tmp_path / "a"))
    first.execute("CREATE TEMP TABLE cap0 (index UBIGINT)")
    first.execute("INSERT INTO cap0 VALUES (1), (2)")
    first.execute("CREATE VIEW c AS SELECT * FROM cap0")  # recompute's views are the database's
    assert first.sql("SELECT count(*) FROM c").fetchall() == [(2,)]
    first.close()
    second = rc._partition_connection("2GB", str(tmp_path / "b"))
    assert second.sql("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchall() == [(0,)]
    second.execute("CREATE TEMP TABLE cap0 (index UBIGINT)")
    second.execute("CREATE VIEW c AS SELECT * FROM cap0")
    assert second.sql("SELECT count(*) FROM c").fetchall() == [(0,)]
    assert second.sql("SELECT current_setting('temp_directory')").fetchall() == [
        (str(tmp_path / "b"),)
    ]
    second.close()
    with pytest.raises(UsageError, match="Unknown unit for memory"):
        rc._partition_connection("4XB", str(tmp_path / "c"))
