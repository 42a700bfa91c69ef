"""Compacted (Parquet) segments are turned back into records in one native pass
(lt_rec_from_columns): the bytes equal the per-field conversion's, and the counts verify takes from
that pass (GAP records, drops, first/last ts_ns, seq contiguity) equal the ones numpy computes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ledgertool.digest.record import FLAG_GAP, record_dtype
from ledgertool.ledger.parquet import (
    records_to_table,
    table_to_records,
    table_to_records_counted,
)
from ledgertool.ledger.recfile import RecordFacts


def _records(n: int, digest_size: int, seed: int, first: int = 1000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    arr = np.zeros(n, dtype=record_dtype(digest_size))
    arr["seq"] = np.arange(first, first + n, dtype=np.uint64)
    arr["ts_ns"] = np.sort(rng.integers(-(2**62), 2**62, n))
    arr["wire_len"] = rng.integers(0, 2**32, n, dtype=np.uint32)
    arr["cap_len"] = rng.integers(0, 2**32, n, dtype=np.uint32)
    arr["flags"] = rng.integers(0, 2**16, n, dtype=np.uint16)
    arr["linktype"] = rng.integers(0, 2**16, n, dtype=np.uint16)
    arr["aux"] = rng.integers(0, 2**32, n, dtype=np.uint32)
    arr["digest"] = np.frombuffer(rng.bytes(n * digest_size), dtype=f"V{digest_size}")
    return arr


@pytest.mark.parametrize(("n", "digest_size"), [(0, 16), (1, 16), (5000, 16), (3000, 32)])
def test_one_pass_equals_the_per_field_conversion_and_counts(n, digest_size):
    arr = _records(n, digest_size, seed=n)
    table = records_to_table(arr.tobytes(), digest_size, segment=3)
    records, counted = table_to_records_counted(table, digest_size, first_seq=1000)
    facts = RecordFacts(*counted)
    assert bytes(records) == table_to_records(table, digest_size) == arr.tobytes()
    gaps = (arr["flags"] & FLAG_GAP) != 0
    assert facts.gaps == int(gaps.sum())
    assert facts.drops == int(arr["aux"][gaps].astype(np.uint64).sum())
    assert (facts.first_ts_ns, facts.last_ts_ns) == (
        (int(arr["ts_ns"][0]), int(arr["ts_ns"][-1])) if n else (0, 0)
    )
    assert facts.seq_contiguous


def test_row_groups_and_a_seq_out_of_place_are_seen():
    arr = _records(4000, 16, seed=7)
    arr["seq"][2500] += 1  # a record renumbered: not contiguous any more
    t = records_to_table(arr.tobytes(), 16, segment=0)
    chunked = pa.Table.from_batches(t.to_batches(max_chunksize=1000))  # several chunks a column
    assert chunked.column("seq").num_chunks == 4
    records, counted = table_to_records_counted(chunked, 16, first_seq=1000)
    assert bytes(records) == arr.tobytes() and not RecordFacts(*counted).seq_contiguous
    _, shifted = table_to_records_counted(t, 16, first_seq=999)
    assert not RecordFacts(*shifted).seq_contiguous
