"""A capture of the window tier alone (DigestEngine.fill's `window_only`, lt_engine_fill_window's
`scratch`): most passes are digested over one another in one area of the buffer, and the window
records are byte for byte those of a capture that keeps every record, for windows longer than a
pass, a few windows a pass, and more windows a pass than the accumulator's output holds (the rest
added from their places, whether the output fills in the call's first pass or a later one)."""

from __future__ import annotations

import numpy as np
import pytest

from ledgertool.algorithms import get_algorithm
from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.window import WindowAccumulator, WindowKeys
from ledgertool.source.file import CaptureReader

KEYS = WindowKeys(bytes(range(16)), bytes(range(16, 32)))
FRAMES = 40_000  # frames 1 µs apart (write_synthetic_pcap)


@pytest.fixture(scope="module")
def pcap(tmp_path_factory):
    path = tmp_path_factory.mktemp("scratch") / "f.pcap"
    write_synthetic_pcap(path, FRAMES, 64)
    return path


def _windows(pcap, alg, window_ns, ask, window_only):
    """(window records, (first seq, count, first record) of every fill) of one capture."""
    windows, fills, seq = [], [], 0
    with CaptureReader(pcap) as r:
        e = DigestEngine(r, alg, 0, bytes(alg.key_size), workers=1)
        acc = WindowAccumulator(KEYS, alg.digest_size, window_ns=window_ns)
        while True:
            recs, n, _ = e.fill(seq, ask, window=acc, window_only=window_only)
            windows += acc.take_closed()
            if n == 0:
                break
            assert len(recs) == (e.record_size if window_only else n * e.record_size)
            fills.append((seq, n, bytes(recs[: e.record_size])))
            seq += n
        windows += acc.finish()
    return [w.serialize() for w in windows], fills


@pytest.mark.parametrize(
    ("name", "window_ns", "ask"),
    [
        ("siphash-1-3-128", 1_000_000_000, None),  # one window
        ("siphash-1-3-128", 300_000, None),  # a few windows a pass
        ("siphash-1-3-128", 40_000, None),  # the output (64 windows) fills in a later pass
        ("siphash-1-3-128", 4_000, None),  # ... and in the call's first pass
        ("siphash-1-3-128", 2_000_000, 700),  # fills shorter than two passes: no scratch
        ("blake3-keyed-256", 9_000_000, None),  # 32-byte digests
    ],
)
def test_a_window_only_capture_gives_the_windows_of_one_that_keeps_its_records(
    pcap, name, window_ns, ask
):
    alg = get_algorithm(name)
    kept, kept_fills = _windows(pcap, alg, window_ns, ask, False)
    only, only_fills = _windows(pcap, alg, window_ns, ask, True)
    assert len(kept) == -(-FRAMES * 1000 // window_ns)  # frames start on a whole second
    assert only == kept
    assert sum(n for _, n, _ in only_fills) == FRAMES
    # every fill's first record is the one a capture that keeps them all has at that seq
    with CaptureReader(pcap) as r:
        e = DigestEngine(r, alg, 0, bytes(alg.key_size), workers=1)
        every = np.frombuffer(b"".join(bytes(e.fill(s, n)[0]) for s, n, _ in only_fills), np.uint8)
    rs = 32 + alg.digest_size
    for s, _, first in only_fills:
        assert first == every[s * rs : (s + 1) * rs].tobytes()
