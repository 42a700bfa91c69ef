"""The window accumulator's CPU paths (portable, AES-NI, AVX-512 VAES; native/src/window.c and
window_vaes.c): each path this CPU runs, forced, gives the portable path's records byte for byte
on random batches (16- and 32-byte digests, batch sizes off the paths' 8- and 16-frame groups,
late frames and GAP records in between), and a path the CPU cannot run is refused."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ledgertool._binding import lib
from ledgertool.digest.record import record_dtype
from ledgertool.digest.window import (
    WINDOW_PATHS,
    WindowAccumulator,
    WindowKeys,
    WindowRecord,
    window_paths,
)

KEYS = WindowKeys(bytes(range(16)), bytes(range(16, 32)))
GAP = 0x8000
FAST = [p for p in window_paths() if p != "portable"]


def _batch(rng: random.Random, n: int, dsize: int, t0: int) -> np.ndarray:
    r = np.zeros(n, record_dtype(dsize))
    r["ts_ns"] = [t0 + 37 * i + rng.randrange(-200, 40) for i in range(n)]  # some late
    r["wire_len"] = [rng.randrange(60, 9000) for _ in range(n)]
    r["digest"] = np.frombuffer(rng.randbytes(n * dsize), f"V{dsize}")
    for i in rng.sample(range(n), n // 50):  # GAP records: declared drops in aux
        r["flags"][i], r["aux"][i] = GAP, rng.randrange(1, 100)
    return r


def _run(path: str, batches: list[np.ndarray], dsize: int, cells: int) -> list[WindowRecord]:
    acc = WindowAccumulator(KEYS, dsize, window_ns=2_000, cells=cells, path=path)
    assert acc.path == path
    out: list[WindowRecord] = []
    for b in batches:
        out += acc.add(b)
    return out + acc.finish()


def test_the_paths_are_named_and_portable_always_runs():
    assert "portable" in window_paths()
    assert set(window_paths()) <= set(WINDOW_PATHS) - {"best"}
    best = WindowAccumulator(KEYS, 16, path="best").path
    assert best == (FAST[-1] if FAST else "portable")  # the fastest: the last listed


@pytest.mark.parametrize("path", FAST)
@pytest.mark.parametrize("dsize", [16, 32])
@pytest.mark.parametrize("cells", [9, 225])
def test_a_forced_path_gives_the_portable_records_on_random_batches(path, dsize, cells):
    rng = random.Random(f"{path}/{dsize}/{cells}")
    sizes = [1, 7, 8, 15, 16, 17, 255, 256, 257, 300, 1000, 3]  # around the groups and chunks
    batches, t = [], 10**12
    for n in sizes:
        batches.append(_batch(rng, n, dsize, t))
        t += 37 * n
    fast = _run(path, batches, dsize, cells)
    portable = _run("portable", batches, dsize, cells)
    assert len(fast) >= 30 and any(w.late for w in fast) and any(w.drops for w in fast)
    assert [w.serialize() for w in fast] == [w.serialize() for w in portable]
    assert sum(w.frames for w in fast) + sum(int((b["flags"] == GAP).sum()) for b in batches) == (
        sum(sizes)
    )


@pytest.mark.parametrize("path", FAST)
def test_a_forced_path_gives_the_other_fast_paths_records_on_a_long_run(path):
    """Every fast path against the first one on 200,000 frames of 1,000 windows (the portable
    AES would take minutes here): identical bytes, and each window's frames accounted for."""
    rng = random.Random(7)
    batches = [_batch(rng, 20_000, 16, 10**12 + 37 * 20_000 * k) for k in range(10)]
    ref = _run(FAST[0], batches, 16, 225)
    got = _run(path, batches, 16, 225)
    assert [w.serialize() for w in got] == [w.serialize() for w in ref]
    assert len(got) > 3000


@pytest.mark.parametrize(
    "path", [p for p in WINDOW_PATHS if p not in window_paths() and p != "best"]
)
def test_a_path_this_cpu_cannot_run_is_refused(path):
    assert not lib.lt_window_path_supported(WINDOW_PATHS[path])
    with pytest.raises(ValueError, match=f"window path '{path}': this CPU runs portable"):
        WindowAccumulator(KEYS, 16, path=path)


def test_an_unknown_path_is_refused_by_the_library():
    out = __import__("ledgertool._binding", fromlist=["ffi"]).ffi.new("lt_window_acc **")
    assert lib.lt_window_new(KEYS.element, KEYS.pad, 10**9, 9, 16, 99, out) == lib.LT_ERR_ARG
    with pytest.raises(ValueError, match="window path 'avx9'"):
        WindowAccumulator(KEYS, 16, path="avx9")
