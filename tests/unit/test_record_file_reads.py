"""A raw record file read from its descriptor (lt_rec_file: pread(2) into a window, the stage or
the caller's copy; never mapped) gives exactly what the walk over the same bytes in memory gives
(records, leaves, facts) for any block split, files larger than the read window, and blocks that
straddle its end; and a file shorter than the size it was opened with fails at the first byte
that is gone."""

from __future__ import annotations

import os

import pytest
from conftest import load_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from v2_reference import leaf_hashes, rec_bytes, synthetic_records, write_ledger_json

from ledgertool.digest.record import RecordSink, record_dtype
from ledgertool.errors import LedgerFormatError
from ledgertool.ledger.reader import OpenRecordFile
from ledgertool.ledger.recfile import parse_record_file


@pytest.fixture(scope="module")
def signing_key(keydir):
    return load_keys(keydir)[1]


def _walks(path, size: int, rs: int, leaf: int, first: int):
    fd = os.open(path, os.O_RDONLY)
    try:
        opened = OpenRecordFile(fd, size)
        return (
            parse_record_file(opened, path, rs, leaf, first, keep_records=False),
            parse_record_file(opened, path, rs, leaf, first),
            parse_record_file(
                opened, path, rs, leaf, first, into=RecordSink(record_dtype(rs - 32))
            ),
        )
    finally:
        os.close(fd)


# blocks of a few records up to whole segments' worth: a file of up to ~1.5 MB, several read windows
_BLOCKS = st.lists(
    st.one_of(
        st.integers(1, 40), st.integers(200, 3000), st.sampled_from([256, 1024, 4096, 16384])
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    digest_size=st.sampled_from([16, 32]),
    leaf_log2=st.sampled_from([0, 2, 6, 8, 9]),
    blocks=_BLOCKS,
)
def test_read_walk_equals_the_walk_in_memory(
    tmp_path_factory, signing_key, digest_size, leaf_log2, blocks
):
    leaf, rs, n = 1 << leaf_log2, 32 + digest_size, sum(blocks)
    led = write_ledger_json(
        tmp_path_factory.mktemp("L"),
        algorithm="blake3-keyed-256" if digest_size == 32 else "siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=digest_size,
        leaf_records=leaf,
    )
    recs = synthetic_records(n, 9, digest_size, seed=n)
    raw = rec_bytes(led, "link0", 1, 9, recs, signing_key, blocks)
    path = tmp_path_factory.mktemp("R") / "seg-00000001.rec"
    path.write_bytes(raw)
    spec = b"".join(leaf_hashes(recs, rs, leaf))
    memory = parse_record_file(raw, path, rs, leaf, 9)
    for f in _walks(path, len(raw), rs, leaf, 9):
        assert (f.count, f.blocks, f.leaves, f.facts, f.header) == (
            n,
            len(blocks),
            spec,
            memory.facts,
            memory.header,
        )
        assert f.records is None or f.records.to_pybytes() == recs


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(blocks=_BLOCKS, data=st.data())
def test_file_shorter_than_its_size_fails_at_the_first_byte_gone(
    tmp_path_factory, signing_key, blocks, data
):
    """The storage holder cut the file after it was opened: every walk names a byte at or just
    after the cut (a cut inside a block's MAC is noticed at the next count), never one before it,
    and a cut inside the last block's MAC, which no walk reads, is not an error."""
    n = sum(blocks)
    led = write_ledger_json(
        tmp_path_factory.mktemp("L"),
        algorithm="siphash-1-3-128",
        strip="frame",
        digest_key_id="11" * 16,
        digest_size=16,
        leaf_records=64,
    )
    raw = rec_bytes(led, "link0", 0, 0, synthetic_records(n, 0, 16, seed=n), signing_key, blocks)
    cut = data.draw(st.integers(0, len(raw) - 1))
    path = tmp_path_factory.mktemp("R") / "seg-00000000.rec"
    path.write_bytes(raw[:cut])
    if cut >= len(raw) - 32:
        assert all(f.count == n for f in _walks(path, len(raw), 48, 64, 0))
        return
    for keep in (False, True):
        fd = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(LedgerFormatError) as e:
                parse_record_file(OpenRecordFile(fd, len(raw)), path, 48, 64, keep_records=keep)
        finally:
            os.close(fd)
        msg = str(e.value)
        assert msg.startswith(f"{path}: the file shrank while it was read: byte "), msg
        byte = int(msg.split("byte ")[1].split()[0])
        assert cut <= byte <= cut + 32 and f" of {len(raw)} is gone" in msg, (cut, msg)
