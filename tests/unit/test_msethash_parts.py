"""The multiset hash kept in parts (native lt_mset_add_parts, MultisetHash(part_bits=...)), which
recompute uses to find the parts of a capture that differ from its ledger: each record's value
goes to the part a keyed multiply-shift hash of its digest names (part_ids, the same in numpy
and C), the parts add up to the one-part hash, and a change of the multiset changes exactly the
parts of the digests it touches. Values are checked against `cryptography`'s AES per part."""

from __future__ import annotations

import os

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool._binding import ffi, lib
from ledgertool.digest.record import FLAG_GAP, record_dtype
from ledgertool.reconcile.msethash import MSET_P, MultisetHash, new_key, new_part_key, part_ids


def _records(n: int, digest_size: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = np.zeros(n, record_dtype(digest_size))
    a.view(np.uint8)[:] = rng.integers(0, 256, a.nbytes, dtype=np.uint8)
    a["flags"] = 0
    return a


def _aes_value(key: bytes, digest: bytes) -> int:
    enc = Cipher(algorithms.AES(key), modes.CBC(bytes(16))).encryptor()
    return int.from_bytes((enc.update(digest) + enc.finalize())[-16:], "little")


def test_part_of_a_digest_is_the_keyed_multiply_shift_of_its_first_eight_bytes():
    recs = _records(50)
    k0, k1 = 0x0123456789ABCDEF, 0xFEDCBA9876543210
    want = [
        (((int.from_bytes(bytes(r["digest"])[:8], "little") ^ k0) * (k1 | 1)) % 2**64) >> (64 - 5)
        for r in recs
    ]
    assert part_ids(recs, (k0, k1), 5).tolist() == want
    assert part_ids(recs, (k0, k1), 0).tolist() == [0] * 50


@pytest.mark.parametrize("digest_size,portable", [(16, False), (16, True), (32, False), (32, True)])
def test_each_part_holds_the_sum_of_its_digests_values(digest_size, portable):
    recs = _records(203, digest_size, seed=digest_size)
    recs["flags"][::17] = FLAG_GAP
    key, pk = new_key(), new_part_key()
    h = MultisetHash(key, digest_size, part_bits=3, part_key=pk, portable=portable)
    assert h.add(recs) == 203 - len(recs[::17])
    ids = part_ids(recs, pk, 3)
    for part in range(8):
        mine = recs[(ids == part) & (recs["flags"] == 0)]
        want = sum(_aes_value(key, bytes(r["digest"])) for r in mine) % MSET_P
        assert (int(h.sums[part, 0]) | int(h.sums[part, 1]) << 64, int(h.counts[part])) == (
            want,
            len(mine),
        )
    whole = MultisetHash(key, digest_size)
    whole.add(recs)
    assert h.state()[0] == whole.value and h.count == whole.count


def test_the_native_paths_agree_over_many_records():
    recs = _records(100_003, seed=7)
    recs["flags"][::1000] = FLAG_GAP
    key, pk = new_key(), new_part_key()
    fast = MultisetHash(key, 16, part_bits=12, part_key=pk)
    slow = MultisetHash(key, 16, part_bits=12, part_key=pk, portable=True)
    fast.add(recs[:50_000])
    fast.add(recs[50_000:])  # split across calls: the parts accumulate
    slow.add(recs)
    assert not len(fast.differing_parts(slow)) and (fast.sums == slow.sums).all()
    assert (
        fast.counts.tolist()
        == np.bincount(part_ids(recs[recs["flags"] == 0], pk, 12), minlength=4096).tolist()
    )


@settings(max_examples=30, deadline=None)
@given(
    changes=st.lists(
        st.tuples(st.sampled_from(["digest", "drop", "dup"]), st.integers(0, 499)),
        min_size=1,
        max_size=6,
    ),
    bits=st.integers(1, 10),
)
def test_a_change_shows_in_the_parts_of_the_digests_it_touches_and_nowhere_else(changes, bits):
    recs = _records(500, seed=3)
    key, pk = new_key(), new_part_key()
    other = recs.copy()
    touched = set()
    for kind, k in changes:
        k %= len(other)
        touched.add(int(part_ids(other[k : k + 1], pk, bits)[0]))
        if kind == "digest":
            other["digest"][k] = np.void(os.urandom(16))
            touched.add(int(part_ids(other[k : k + 1], pk, bits)[0]))
        elif kind == "drop":
            other = np.delete(other, k)
        else:
            other = np.insert(other, k, other[k])
    a = MultisetHash(key, 16, part_bits=bits, part_key=pk)
    b = MultisetHash(key, 16, part_bits=bits, part_key=pk)
    a.add(recs)
    b.add(other[::-1].copy())  # the order does not matter
    diff = set(a.differing_parts(b).tolist())
    assert diff <= touched
    # a part differs exactly when the multiset of its digests differs
    ids_a, ids_b = part_ids(recs, pk, bits), part_ids(other, pk, bits)
    for part in touched:
        same = sorted(bytes(d) for d in recs["digest"][ids_a == part]) == sorted(
            bytes(d) for d in other["digest"][ids_b == part]
        )
        assert (part in diff) == (not same)


def test_parts_refuse_what_they_cannot_do():
    key = new_key()
    with pytest.raises(ValueError):
        MultisetHash(key, 16, part_bits=lib.LT_MSET_MAX_PART_BITS + 1)
    with pytest.raises(ValueError):  # a whole value cannot be added to one part
        MultisetHash(key, 16, part_bits=2).merge(1, 1)
    with pytest.raises(ValueError):  # parts under another part key are not comparable
        MultisetHash(key, 16, part_bits=2).differing_parts(
            MultisetHash(key, 16, part_bits=2, part_key=(1, 2))
        )
    buf = ffi.new("uint8_t[96]")
    acc, cnt = ffi.new("uint64_t[8]"), ffi.new("uint64_t[4]")
    pk = ffi.new("uint64_t[2]")
    assert lib.lt_mset_add_parts(bytes(16), pk, 2, buf, 2, 48, 32, 16, 0, 0, acc, cnt) == lib.LT_OK
    assert sum(cnt[i] for i in range(4)) == 2
    assert (
        lib.lt_mset_add_parts(bytes(16), ffi.NULL, 2, buf, 2, 48, 32, 16, 0, 0, acc, cnt)
        == lib.LT_ERR_ARG
    )
    assert (
        lib.lt_mset_add_parts(bytes(16), pk, 21, buf, 2, 48, 32, 16, 0, 0, acc, cnt)
        == lib.LT_ERR_ARG
    )
    assert (
        lib.lt_mset_add_parts(bytes(16), pk, 2, buf, 2, 48, 24, 16, 0, 0, acc, cnt)
        == lib.LT_ERR_ARG
    )
