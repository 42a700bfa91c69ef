"""Raw record files (ledger format v2 sealed segments): the native block walk (lt_rec_records,
through ledger.recfile.parse_record_file) against the spec's framing, written by the tests' own
reference writer; every framing fault is one line naming the file, block and byte offset."""

from __future__ import annotations

import re

import pytest
from conftest import load_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from v2_reference import leaf_hashes, rec_bytes, synthetic_records, write_ledger_json

from ledgertool.errors import LedgerFormatError
from ledgertool.ledger.recfile import parse_record_file


@pytest.fixture(scope="module")
def signing_key(keydir):
    return load_keys(keydir)[1]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    digest_size=st.sampled_from([16, 32]),
    blocks=st.lists(st.integers(1, 700), min_size=0, max_size=6),
    leaf_log2=st.integers(0, 9),
)
def test_rec_records_equal_the_blocks_records(
    tmp_path_factory, signing_key, digest_size, blocks, leaf_log2
):
    """Any block split (aligned to leaves or not) yields the records, framing stripped, and the
    segment's leaves (chunks counted from the segment's start, not the blocks')."""
    leaf = 1 << leaf_log2
    led = write_ledger_json(
        tmp_path_factory.mktemp("L"),
        algorithm="blake3-keyed-256" if digest_size == 32 else "siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=digest_size,
        leaf_records=leaf,
    )
    recs = synthetic_records(sum(blocks), 5, digest_size, seed=len(blocks))
    raw = rec_bytes(led, "link0", 3, 5, recs, signing_key, blocks)
    f = parse_record_file(raw, "seg-00000003.rec", 32 + digest_size, leaf, 5)
    assert (f.count, f.blocks, f.header.index, f.header.first_seq) == (
        sum(blocks),
        len(blocks),
        3,
        5,
    )
    assert f.facts.seq_contiguous and (f.facts.gaps, f.facts.drops) == (0, 0)
    assert f.records.to_pybytes() == recs
    assert f.leaves == b"".join(leaf_hashes(recs, 32 + digest_size, leaf))


def test_rec_framing_faults_are_named(tmp_path, signing_key):
    led = write_ledger_json(
        tmp_path,
        algorithm="siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=16,
    )
    recs = synthetic_records(300, 0, 16)
    raw = rec_bytes(led, "link0", 0, 0, recs, signing_key, [256, 44])
    end0 = 256 + 4 + 256 * 48 + 32
    cases = {
        raw[:-1]: f"block 1 at byte {end0} (44 records) runs past the end of the file",
        raw + b"\x01\x00": "2 bytes after the last whole block (block 2 would start at byte "
        f"{len(raw)})",
        raw + bytes(4): f"block 2 at byte {len(raw)}: record count 0 is not in 1..65536",
        raw[:256]
        + (65537).to_bytes(4, "little")
        + raw[260:]: "block 0 at byte 256: record count 65537 is not in",
        raw[:200]: "file cut inside its 256-byte header (200 bytes)",
    }
    for data, message in cases.items():
        with pytest.raises(LedgerFormatError, match=f"^seg-00000000.rec: {re.escape(message)}"):
            parse_record_file(data, "seg-00000000.rec", 48, 256)
    with pytest.raises(
        LedgerFormatError, match="^seg-00000000.rec: unsupported segment format version 2 at byte 8"
    ):
        parse_record_file(b"LTSEGv1\n" + raw[8:], "seg-00000000.rec", 48, 256)
    # an empty segment: a header and no blocks
    f = parse_record_file(raw[:256], "seg-00000000.rec", 48, 256)
    assert (f.count, f.blocks, f.leaves, f.records.size) == (0, 0, b"", 0)


def test_rec_records_bounds_in_c():
    from ledgertool._binding import ffi, lib

    info = ffi.new("lt_rec_info *")
    raw = bytes(256) + (2).to_bytes(4, "little") + bytes(96 + 32)
    out = ffi.new("uint8_t[]", 95)  # one byte short of the two records
    assert lib.lt_rec_records(raw, len(raw), 48, 0, out, 95, 1, ffi.NULL, 0, info) == lib.LT_ERR_ARG
    assert lib.lt_rec_records(raw, len(raw), 47, 0, out, 95, 1, ffi.NULL, 0, info) == lib.LT_ERR_ARG
    out = ffi.new("uint8_t[]", 96)
    assert lib.lt_rec_records(raw, len(raw), 48, 0, out, 96, 1, ffi.NULL, 0, info) == lib.LT_OK
    assert (info.records, info.blocks) == (2, 1)


def test_rec_facts_counted_in_c(tmp_path, signing_key):
    """GAP records, drops, first/last ts and seq contiguity, as verify's fast path takes them."""
    led = write_ledger_json(
        tmp_path,
        algorithm="siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=16,
        leaf_records=4,
    )
    recs = synthetic_records(50, 1000, 16, gaps={0: 7, 33: 2**32 - 1})
    raw = rec_bytes(led, "link0", 0, 1000, recs, signing_key, [3, 40, 7])
    f = parse_record_file(raw, "r", 48, 4, 1000).facts
    assert (f.gaps, f.drops, f.seq_contiguous) == (2, 7 + 2**32 - 1, True)
    assert (f.first_ts_ns, f.last_ts_ns) == (
        1_700_000_000_000_000_000 + 1000 * 1000,
        1_700_000_000_000_000_000 + 1049 * 1000,
    )
    assert not parse_record_file(raw, "r", 48, 4, 999).facts.seq_contiguous
    swapped = bytearray(recs)
    swapped[10 * 48 : 11 * 48], swapped[11 * 48 : 12 * 48] = (
        recs[11 * 48 : 12 * 48],
        recs[10 * 48 : 11 * 48],
    )
    raw = rec_bytes(led, "link0", 0, 1000, bytes(swapped), signing_key, [3, 40, 7])
    assert not parse_record_file(raw, "r", 48, 4, 1000).facts.seq_contiguous


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    digest_size=st.sampled_from([16, 32]),
    blocks=st.lists(st.integers(1, 700), min_size=0, max_size=6),
    leaf_log2=st.integers(0, 9),
    gap_at=st.integers(0, 4000),
)
def test_rec_leaves_in_place_equal_the_copied_ones(
    tmp_path_factory, signing_key, digest_size, blocks, leaf_log2, gap_at
):
    """lt_rec_leaves (no copy; leaves split across blocks gathered) gives the leaves, counts and
    facts of lt_rec_records for any block split, and the spec's leaves."""
    leaf = 1 << leaf_log2
    led = write_ledger_json(
        tmp_path_factory.mktemp("L"),
        algorithm="blake3-keyed-256" if digest_size == 32 else "siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=digest_size,
        leaf_records=leaf,
    )
    n = sum(blocks)
    recs = synthetic_records(
        n, 5, digest_size, seed=len(blocks), gaps={gap_at % n: 9} if n else None
    )
    raw = rec_bytes(led, "link0", 3, 5, recs, signing_key, blocks)
    copied = parse_record_file(raw, "seg-00000003.rec", 32 + digest_size, leaf, 5)
    in_place = parse_record_file(
        raw, "seg-00000003.rec", 32 + digest_size, leaf, 5, keep_records=False
    )
    assert in_place.records is None
    assert in_place.leaves == copied.leaves == b"".join(leaf_hashes(recs, 32 + digest_size, leaf))
    assert (in_place.count, in_place.blocks, in_place.facts) == (n, len(blocks), copied.facts)
    assert in_place.facts.drops == (9 if n else 0)


def test_rec_leaves_in_place_name_the_same_faults(tmp_path, signing_key):
    led = write_ledger_json(
        tmp_path,
        algorithm="siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=16,
    )
    raw = rec_bytes(led, "link0", 0, 0, synthetic_records(300, 0, 16), signing_key, [256, 44])
    for data in (raw[:-1], raw + b"\x01\x00", raw + bytes(4), raw[:200]):
        with pytest.raises(LedgerFormatError) as copied:
            parse_record_file(data, "seg-00000000.rec", 48, 256)
        with pytest.raises(LedgerFormatError) as in_place:
            parse_record_file(data, "seg-00000000.rec", 48, 256, keep_records=False)
        assert str(in_place.value) == str(copied.value)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    digest_size=st.sampled_from([16, 32]),
    leaf_log2=st.integers(0, 8),
    groups=st.integers(0, 3),
    extra_leaves=st.integers(0, 4),
    short=st.integers(0, 3),
    per_block=st.sampled_from([0, 1, 3]),
)
def test_verifyrec_mapped_walk_equals_the_spec_leaves(
    tmp_path_factory, signing_key, digest_size, leaf_log2, groups, extra_leaves, short, per_block
):
    """The walk over a map of the file (lt_rec_file: in place, into a fresh buffer, into a
    RecordSink's tail) gives the spec's leaves and records when the file ends right after a group
    of four leaves or inside one: the group hashing prefetches the bytes after each group up to
    the end of the map, and the last group's range ends exactly there. Blocks of one leaf, of three
    leaves, or one block for the whole segment."""
    import os

    import numpy as np

    from ledgertool.digest.record import RecordSink, record_dtype
    from ledgertool.ledger.reader import OpenRecordFile

    leaf = 1 << leaf_log2
    rs = 32 + digest_size
    n = (4 * groups + extra_leaves) * leaf + (short % leaf if leaf > 1 else 0)
    led = write_ledger_json(
        tmp_path_factory.mktemp("L"),
        algorithm="blake3-keyed-256" if digest_size == 32 else "siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=digest_size,
        leaf_records=leaf,
    )
    recs = synthetic_records(n, 7, digest_size, seed=n)
    split = None
    if n and per_block:
        step = per_block * leaf
        split = [min(step, n - i) for i in range(0, n, step)]
    elif n:
        split = [n]
    raw = rec_bytes(led, "link0", 2, 7, recs, signing_key, split)
    path = tmp_path_factory.mktemp("R") / "seg-00000002.rec"
    path.write_bytes(raw)
    spec = b"".join(leaf_hashes(recs, rs, leaf))
    fd = os.open(path, os.O_RDONLY)
    try:
        opened = OpenRecordFile(fd, len(raw))
        in_place = parse_record_file(opened, path, rs, leaf, 7, keep_records=False)
        copied = parse_record_file(opened, path, rs, leaf, 7)
        sink = RecordSink(record_dtype(digest_size))
        into = parse_record_file(opened, path, rs, leaf, 7, into=sink)
    finally:
        os.close(fd)
    for f in (in_place, copied, into):
        assert (f.count, f.leaves, f.facts.seq_contiguous) == (n, spec, True)
    assert copied.records.to_pybytes() == recs == into.records.to_pybytes()
    assert np.asarray(sink.room(max(n, 1)).view(np.uint8))[: n * rs].tobytes() == recs


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(blocks=st.lists(st.integers(1, 300), min_size=1, max_size=5), data=st.data())
def test_verifyrec_facts_equal_a_per_record_model(tmp_path_factory, signing_key, blocks, data):
    """The tally (seq run OR-ed, flags' high byte OR-ed, GAP blocks walked again) against a
    per-record model: any flags value (GAP with other bits, every other bit without GAP), any
    drops, a seq off by one bit anywhere (or a first_seq off the file's) in any block split."""
    import numpy as np

    from ledgertool.digest.record import record_dtype

    n = sum(blocks)
    led = write_ledger_json(
        tmp_path_factory.mktemp("L"),
        algorithm="siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=16,
        leaf_records=4,
    )
    recs = np.frombuffer(synthetic_records(n, 40, 16, seed=n), dtype=record_dtype(16)).copy()
    flag_values = st.one_of(
        st.sampled_from([0x8000, 0x8001, 0x7FFF, 0x4000, 0x0080, 0x00FF, 0xFFFF]),
        st.integers(0, 0xFFFF),
    )
    marks = data.draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), flag_values, st.integers(0, 2**32 - 1)), max_size=6
        )
    )
    for at, flags, aux in marks:
        recs["flags"][at], recs["aux"][at] = flags, aux
    bad_seq = data.draw(st.one_of(st.none(), st.tuples(st.integers(0, n - 1), st.integers(0, 63))))
    if bad_seq is not None:
        recs["seq"][bad_seq[0]] ^= np.uint64(1 << bad_seq[1])
    first = data.draw(st.sampled_from([40, 40, 39, 41]))
    raw = rec_bytes(led, "link0", 0, 40, recs.tobytes(), signing_key, blocks)
    gap = (recs["flags"] & 0x8000) != 0
    want = (
        int(gap.sum()),
        int(recs["aux"][gap].astype(np.uint64).sum()),
        bool((recs["seq"] == np.arange(first, first + n, dtype=np.uint64)).all()),
    )
    for keep in (True, False):
        f = parse_record_file(raw, "r", 48, 4, first, keep_records=keep).facts
        assert (f.gaps, f.drops, f.seq_contiguous) == want
