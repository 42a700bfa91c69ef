"""The multiset hash behind recompute's fast verdict (native lt_mset_add,
ledgertool.reconcile.msethash; docs/adr/0011): the sum modulo 2^127 - 1 of AES-128 of each frame
record's digest (the fixed-length CBC-MAC of a 32-byte one). Checked against the AES-128 known
answer of FIPS 197 Appendix C.1, against an independent implementation (`cryptography`'s AES) on
random records, path against path (AES-NI and the portable AES), and for what a multiset hash
must do: order and splitting do not matter, every change of the multiset does."""

from __future__ import annotations

import os

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool._binding import ffi, lib
from ledgertool.digest.record import FLAG_GAP, FLAG_TRUNCATED, record_dtype
from ledgertool.reconcile.msethash import MSET_P, MultisetHash, new_key
from ledgertool.reconcile.multiset import second_counts

# FIPS 197 (Advanced Encryption Standard), Appendix C.1, AES-128: key, plaintext, ciphertext
FIPS197_KEY = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
FIPS197_PLAIN = bytes.fromhex("00112233445566778899aabbccddeeff")
FIPS197_CIPHER = bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a")


def _records(n: int, digest_size: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = np.zeros(n, record_dtype(digest_size))
    a.view(np.uint8)[:] = rng.integers(0, 256, a.nbytes, dtype=np.uint8)
    a["flags"] = 0
    return a


def _reference(key: bytes, records: np.ndarray, skip: int = FLAG_GAP) -> tuple[int, int]:
    """(value, count) from `cryptography`'s AES: CBC with a zero IV is the CBC-MAC's last block."""
    total = count = 0
    for r in records:
        if int(r["flags"]) & skip:
            continue
        enc = Cipher(algorithms.AES(key), modes.CBC(bytes(16))).encryptor()
        out = enc.update(bytes(r["digest"])) + enc.finalize()
        total += int.from_bytes(out[-16:], "little")
        count += 1
    return total % MSET_P, count


@pytest.mark.parametrize("portable", [False, True])
def test_fips197_known_answer(portable):
    rec = np.zeros(1, record_dtype(16))
    rec["digest"] = np.void(FIPS197_PLAIN)
    h = MultisetHash(FIPS197_KEY, 16, portable=portable)
    assert h.add(rec) == 1
    assert h.state() == (int.from_bytes(FIPS197_CIPHER, "little") % MSET_P, 1)


@pytest.mark.parametrize("digest_size", [16, 32])
@pytest.mark.parametrize("portable", [False, True])
@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 300])
def test_matches_an_independent_aes_on_random_records(digest_size, portable, n):
    recs = _records(n, digest_size, seed=n)
    if n:
        recs["flags"][::5] = FLAG_GAP  # GAP records are not frames: skipped
        recs["flags"][1::7] |= FLAG_TRUNCATED  # other flags are frames
    key = os.urandom(16)
    h = MultisetHash(key, digest_size, portable=portable)
    h.add(recs)
    assert h.state() == _reference(key, recs)


def test_the_paths_agree_on_a_large_array():
    recs = _records(100_003, 16, seed=3)
    recs["flags"][::1000] = FLAG_GAP
    key = os.urandom(16)
    fast, slow = MultisetHash(key, 16), MultisetHash(key, 16, portable=True)
    fast.add(recs)
    slow.add(recs)
    assert fast.state() == slow.state() and fast.count == 100_003 - 101


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 200), cut=st.data(), seed=st.integers(0, 2**32 - 1))
def test_order_and_splitting_do_not_matter(n, cut, seed):
    recs = _records(n, 16, seed)
    key = os.urandom(16)
    whole = MultisetHash(key, 16)
    whole.add(recs)
    perm = np.random.default_rng(seed).permutation(n)
    k = cut.draw(st.integers(0, n))
    a, b = MultisetHash(key, 16), MultisetHash(key, 16)
    a.add(recs[perm][:k])
    b.add(recs[perm][k:])
    a.merge(*b.state())
    assert a.state() == whole.state()


def test_every_change_of_the_multiset_changes_the_hash():
    recs = _records(64, 16, seed=9)
    key = os.urandom(16)

    def state(a):
        h = MultisetHash(key, 16)
        h.add(a)
        return h.state()

    base = state(recs)
    flipped = recs.copy()
    d = bytearray(bytes(flipped["digest"][10]))
    d[15] ^= 0x80  # the last digest byte: the whole digest is hashed
    flipped["digest"][10] = np.void(bytes(d))
    twice = np.concatenate([recs, recs[3:4]])  # one frame twice: a multiset, not a set
    swapped_dup = recs.copy()
    swapped_dup["digest"][5] = recs["digest"][6]  # same count, one digest twice, one missing
    variants = [state(flipped), state(twice), state(recs[1:]), state(swapped_dup)]
    assert all(v != base for v in variants) and len(set(variants)) == 4
    other = recs.copy()
    other["seq"] += 1000  # only the digest counts: times, lengths, seq do not
    other["ts_ns"] -= 5
    assert state(other) == base
    # (another key: another value, same count)
    assert MultisetHash(os.urandom(16), 16).add(recs) == 64


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="16 bytes"):
        MultisetHash(b"short", 16)
    with pytest.raises(ValueError, match="multiple of 16"):
        MultisetHash(os.urandom(16), 24)
    key, acc, cnt = ffi.new("uint8_t[16]"), ffi.new("uint64_t[2]"), ffi.new("uint64_t *")
    buf = ffi.new("uint8_t[96]")
    assert lib.lt_mset_add(key, buf, 2, 48, 32, 16, 0, 0, acc, cnt) == lib.LT_OK
    # inside the fixed part
    assert lib.lt_mset_add(key, buf, 2, 48, 24, 16, 0, 0, acc, cnt) == lib.LT_ERR_ARG
    # past the record
    assert lib.lt_mset_add(key, buf, 2, 48, 40, 16, 0, 0, acc, cnt) == lib.LT_ERR_ARG
    assert lib.lt_mset_add(key, ffi.NULL, 2, 48, 32, 16, 0, 0, acc, cnt) == lib.LT_ERR_ARG
    acc[0], acc[1] = 2**64 - 1, 2**63 - 1  # p itself is not a value mod p
    assert lib.lt_mset_add(key, buf, 2, 48, 32, 16, 0, 0, acc, cnt) == lib.LT_ERR_ARG


def test_new_key_is_fresh_and_repr_hides_it():
    k1, k2 = new_key(), new_key()
    assert len(k1) == 16 and k1 != k2
    h = MultisetHash(k1, 16)
    assert k1.hex() not in repr(h) and "count=0" in repr(h)


@settings(max_examples=60, deadline=None)
@given(
    ts=st.lists(
        st.integers(-(2**63), 2**63 - 1) | st.integers(-3 * 10**9, 3 * 10**9), max_size=300
    ),
    gaps=st.lists(st.booleans(), max_size=300),
    skip=st.sampled_from([0, FLAG_GAP]),
)
def test_second_counts_equal_a_numpy_histogram(ts, gaps, skip):
    recs = np.zeros(len(ts), record_dtype(16))
    recs["ts_ns"] = ts
    recs["flags"][: len(gaps)] = np.where(np.array(gaps[: len(ts)], bool), FLAG_GAP, 0)[: len(ts)]
    keep = recs if not skip else recs[(recs["flags"] & skip) == 0]
    secs, counts = np.unique(keep["ts_ns"] // 10**9, return_counts=True)
    assert second_counts(recs, skip) == dict(zip(secs.tolist(), counts.tolist()))


def test_a_hashing_sink_skips_what_the_native_walk_skips():
    from ledgertool.reconcile.msethash import HashingSink

    with pytest.raises(ValueError, match="GAP records only"):
        HashingSink(record_dtype(16), MultisetHash(os.urandom(16), 16, skip_flags=0))
    assert HashingSink(record_dtype(16), MultisetHash(os.urandom(16), 16)).skip_flags == FLAG_GAP
