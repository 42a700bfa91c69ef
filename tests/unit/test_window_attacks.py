"""The two attacks on a window commitment that a prover holding all storage can run
(docs/adr/0012-window-commitments.md, "Attacks ruled out"), each shown to work against the naive
design and to fail against window records:

A. an unkeyed sum of values the prover sees (the digests): a lattice reduction over 16 of them finds
   two different multisets with the same count and the same sum mod 2^127 - 1;
B. a keyed sum with one key for every window, stored in the clear: single-frame windows the prover
   sends hand it F(d) for frames it chose, and attack A runs on those.

The lattice reduction is an exact LLL in pure Python (integers and fractions)."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np

from ledgertool.digest.record import record_dtype
from ledgertool.digest.window import WindowAccumulator, WindowKeys, cells_for_capacity
from ledgertool.reconcile.msethash import MultisetHash
from ledgertool.reconcile.windows import compare_windows

P = 2**127 - 1
KEYS = WindowKeys(bytes(range(100, 116)), bytes(range(200, 216)))
N = 16


def lll(basis: list[list[int]], delta: Fraction = Fraction(99, 100)) -> list[list[int]]:
    """The LLL-reduced basis (A. K. Lenstra, H. W. Lenstra, L. Lovasz, 1982), exact arithmetic."""
    b = [list(r) for r in basis]
    n = len(b)

    def dot(x, y):
        return sum(i * j for i, j in zip(x, y))

    star, mu, big = [], [[Fraction(0)] * n for _ in range(n)], []
    for i in range(n):
        v = [Fraction(x) for x in b[i]]
        for j in range(i):
            mu[i][j] = dot(b[i], star[j]) / big[j]
            v = [a - mu[i][j] * c for a, c in zip(v, star[j])]
        star.append(v)
        big.append(dot(v, v))
    k = 1
    while k < n:
        for j in range(k - 1, -1, -1):
            q = round(mu[k][j])
            if q:
                b[k] = [a - q * c for a, c in zip(b[k], b[j])]
                for m in range(j):
                    mu[k][m] -= q * mu[j][m]
                mu[k][j] -= q
        if big[k] >= (delta - mu[k][k - 1] ** 2) * big[k - 1]:
            k += 1
            continue
        b[k], b[k - 1] = b[k - 1], b[k]
        m = mu[k][k - 1]
        bk = big[k] + m * m * big[k - 1]
        mu[k][k - 1] = m * big[k - 1] / bk
        big[k] = big[k - 1] * big[k] / bk
        big[k - 1] = bk
        for j in range(k - 1):
            mu[k - 1][j], mu[k][j] = mu[k][j], mu[k - 1][j]
        for i in range(k + 1, n):
            t = mu[i][k]
            mu[i][k] = mu[i][k - 1] - m * t
            mu[i][k - 1] = t + mu[k][k - 1] * mu[i][k]
        k = max(k - 1, 1)
    return b


def substitution(values: list[int]) -> list[int]:
    """Coefficients c, not all zero, with sum c = 0 and sum c * v = 0 (mod p): taking c copies of
    frame i where c > 0, and -c where c < 0, gives two multisets of equal count and equal sum."""
    w = 2**200
    rows = [[int(i == j) for j in range(len(values))] + [w, w * v] for i, v in enumerate(values)]
    rows.append([0] * len(values) + [0, w * P])
    for r in lll(rows):
        if r[-1] == 0 and r[-2] == 0 and any(r[:-2]):
            return r[:-2]
    raise AssertionError("no substitution found")


def _frames(digests: list[bytes], copies: list[int], ts: int) -> np.ndarray:
    ds = [d for d, c in zip(digests, copies) for _ in range(c)]
    r = np.zeros(len(ds), record_dtype(16))
    r["ts_ns"] = ts
    r["wire_len"] = 64
    r["digest"] = np.frombuffer(b"".join(ds), "V16")
    return r


def _window(frames: np.ndarray):
    acc = WindowAccumulator(KEYS, 16, window_ns=1000, cells=cells_for_capacity(64))
    (rec,) = acc.add(frames) + acc.finish()
    return rec


def _sides(digests, c, ts):
    return (
        _frames(digests, [max(x, 0) for x in c], ts),
        _frames(digests, [max(-x, 0) for x in c], ts),
    )


def test_an_unkeyed_sum_of_visible_digests_is_forged_and_a_window_record_is_not():
    rng = random.Random(1)
    digests = [rng.randbytes(16) for _ in range(N)]
    c = substitution([int.from_bytes(d, "little") for d in digests])
    ledger, claim = _sides(digests, c, 5_000)
    assert len(ledger) == len(claim) > 0 and sum(abs(x) for x in c) < 5000
    naive = [
        sum(int.from_bytes(bytes(d), "little") for d in side["digest"]) % P
        for side in (ledger, claim)
    ]
    assert naive[0] == naive[1]  # the naive commitment cannot tell the two apart
    d = compare_windows(KEYS, _window(ledger), _window(claim))
    assert not d.equal and d.frames_difference == 0


def test_one_key_reused_in_the_clear_is_learned_and_forged_and_masked_records_teach_nothing():
    rng = random.Random(2)
    digests = [rng.randbytes(16) for _ in range(N)]
    # the naive design: H_w = sum F(d) mod p, one key for all windows, stored as is. The prover
    # sends one frame per window and reads F(d) off the stored values.
    learned = []
    for i, dg in enumerate(digests):
        h = MultisetHash(KEYS.element, 16)
        h.add(_frames([dg], [1], i * 1000))
        learned.append(h.value)
    c = substitution(learned)
    ledger, claim = _sides(digests, c, 99_000)
    naive = []
    for side in (ledger, claim):
        h = MultisetHash(KEYS.element, 16)
        h.add(side)
        naive.append((h.count, h.value))
    assert naive[0] == naive[1]  # forged: equal count and equal keyed sum
    # window records: what the prover reads from single-frame windows is masked by a pad bound
    # to the window, so the same procedure on those bytes finds nothing that holds
    seen = [
        int.from_bytes(_window(_frames([dg], [1], i * 1000)).masked[:16], "little") % P
        for i, dg in enumerate(digests)
    ]
    c2 = substitution(seen)
    ledger2, claim2 = _sides(digests, c2, 99_000)
    d = compare_windows(KEYS, _window(ledger2), _window(claim2))
    assert not d.equal and d.frames_difference == 0
