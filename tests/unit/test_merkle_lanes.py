"""Merkle leaves hashed side by side (lt_merkle_lanes): sixteen AVX-512 lanes, four SHA-NI streams
or one at a time give the same RFC 9162 leaves as hashlib, for the leaf hashing alone, for the
segment writer `capture` runs and for the record-file walk `verify` runs."""

from __future__ import annotations

import contextlib
import hashlib

import pytest
from conftest import load_keys
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool._binding import lib
from ledgertool.algorithms import get_algorithm
from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.capture.run import capture_file
from ledgertool.digest.engine import cpu_path, force_cpu_path, merkle_leaves
from ledgertool.seal.document import parse_seal
from ledgertool.verify.ledger import verify_ledger

HMAC = get_algorithm("hmac-sha256-128")


def _force(lanes: int) -> None:
    if lib.lt_merkle_lanes_force(lanes) != lib.LT_OK:
        pytest.skip(f"this CPU cannot hash {lanes} leaves side by side")


@contextlib.contextmanager
def _lanes(n: int):
    _force(n)
    try:
        assert lib.lt_merkle_lanes() == n
        yield
    finally:
        lib.lt_merkle_lanes_force(0)


@pytest.fixture(params=[1, 4, 16])
def lanes(request):
    with _lanes(request.param):
        yield request.param


def _reference(records: bytes, record_size: int, leaf_records: int) -> bytes:
    block = record_size * leaf_records
    return b"".join(
        hashlib.sha256(b"\x00" + records[i : i + block]).digest()
        for i in range(0, len(records), block)
    )


@pytest.mark.parametrize("n", [1, 4, 16])
@given(
    record_size=st.sampled_from([48, 64]),
    leaf_log=st.integers(0, 9),
    whole=st.integers(0, 40),
    part=st.integers(0, 511),
    seed=st.binary(min_size=1, max_size=4),
)
@settings(max_examples=40, deadline=None)
def test_every_lane_count_gives_hashlibs_leaves(n, record_size, leaf_log, whole, part, seed):
    leaf_records = 1 << leaf_log
    count = whole * leaf_records + part % leaf_records  # whole leaves and a shorter last one
    records = hashlib.shake_256(seed).digest(record_size * count) if count else b""
    with _lanes(n):
        got = merkle_leaves(records, record_size, leaf_records)
    assert got == _reference(records, record_size, leaf_records)


def test_window_records_one_per_leaf_in_every_lane_count(lanes):
    size = lib.LT_WINDOW_HEADER + 3 * 28 + 44 * 5  # window records of any size, one a leaf
    records = hashlib.shake_256(b"windows").digest(size * 37)
    assert merkle_leaves(records, size, 1) == _reference(records, size, 1)


def test_lanes_follow_the_hmac_path_and_refuse_what_the_cpu_lacks():
    assert lib.lt_merkle_lanes_force(3) == lib.LT_ERR_ARG
    assert lib.lt_merkle_lanes_force(32) == lib.LT_ERR_ARG
    before = cpu_path(HMAC)
    force_cpu_path(HMAC, "portable")
    try:
        assert lib.lt_merkle_lanes() == 1  # the portable leaves stay portable
    finally:
        force_cpu_path(HMAC, None)
    assert cpu_path(HMAC) == before
    assert lib.lt_merkle_lanes() in (1, 4, 16)


def _capture(pcap, ledger, keydir, lanes: int):
    dk, sk, trust = load_keys(keydir)
    with _lanes(lanes):
        capture_file(pcap, ledger, digest_key=dk, signing_key=sk, segment_records=5000)
    return trust


def _roots(ledger) -> list[str]:
    seals = sorted((ledger / "link=link0").glob("seg-*.seal.json"))
    return [parse_seal(p.read_bytes(), p).merkle_root for p in seals]


def test_writer_and_walk_agree_across_lane_counts(tmp_path, keydir):
    """19.5 leaves a segment and 2 in the next: the writer's roots with 16 lanes are those with one,
    and each ledger verifies with the other count (and fails on one changed record)."""
    pcap = tmp_path / "f.pcap"
    write_synthetic_pcap(pcap, 5500, 64, seed=7)
    wide, narrow = tmp_path / "wide", tmp_path / "narrow"
    trust = _capture(pcap, wide, keydir, 16)
    _capture(pcap, narrow, keydir, 1)
    assert _roots(wide) == _roots(narrow) and len(_roots(wide)) == 2
    for ledger, lanes in ((wide, 1), (narrow, 16)):
        with _lanes(lanes):
            assert verify_ledger(ledger, trust=trust).ok
    rec = wide / "link=link0" / "seg-00000000.rec"
    data = bytearray(rec.read_bytes())
    data[-100] ^= 1  # a digest byte of the segment's last leaf
    rec.write_bytes(bytes(data))
    with _lanes(16):
        res = verify_ledger(wide, trust=trust)
    assert not res.ok
    assert any(p.kind == "merkle_mismatch" for p in res.problems), res.problems


def test_sixteen_lanes_on_the_portable_path():
    """A CPU with AVX-512 and no SHA-NI (Skylake-SP, Cascade Lake) hashes its leaves sixteen at a
    time on the portable path, the rest one at a time; here the portable path is forced and the
    lanes with it: hashlib's leaves all the same."""
    force_cpu_path(HMAC, "portable")
    try:
        if lib.lt_merkle_lanes_force(16) != lib.LT_OK:
            pytest.skip("this CPU cannot hash 16 leaves side by side")
        assert lib.lt_merkle_lanes() == 16
        lib.lt_merkle_lanes_force(4)
        assert lib.lt_merkle_lanes() == 1  # no SHA-NI streams on the portable path
        lib.lt_merkle_lanes_force(16)
        for record_size, leaf_records, count in ((48, 256, 16 * 256 + 300), (64, 8, 37 * 8 + 3)):
            records = hashlib.shake_256(b"portable").digest(record_size * count)
            got = merkle_leaves(records, record_size, leaf_records)
            assert got == _reference(records, record_size, leaf_records)
    finally:
        lib.lt_merkle_lanes_force(0)
        force_cpu_path(HMAC, None)
