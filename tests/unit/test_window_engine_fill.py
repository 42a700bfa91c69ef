"""The window tier fed inside the engine (lt_engine_fill_window, DigestEngine.fill's `window`):
each digest pass's records go to the accumulator while they are in cache, and the records and
window records are byte for byte those of lt_engine_fill followed by lt_window_add, for windows
longer and much shorter than a pass (more windows closed in one fill than the accumulator's
output holds: the rest is added after), fills shorter than a pass, 16- and 32-byte digests and
engine passes of several sizes."""

from __future__ import annotations

import numpy as np
import pytest

from ledgertool.algorithms import get_algorithm
from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.window import WindowAccumulator, WindowKeys
from ledgertool.source.file import CaptureReader

KEYS = WindowKeys(bytes(range(16)), bytes(range(16, 32)))
FRAMES = 70_000  # frames 1 µs apart (write_synthetic_pcap): more than four 16,384-frame passes


@pytest.fixture(scope="module")
def pcap(tmp_path_factory):
    path = tmp_path_factory.mktemp("fill") / "f.pcap"
    write_synthetic_pcap(path, FRAMES, 64)
    return path


def _capture(pcap, alg, window_ns, fused, ask, batch):
    """(records, window records) of one pass over the capture."""
    records, windows, seq = [], [], 0
    with CaptureReader(pcap) as r:
        e = DigestEngine(r, alg, 0, bytes(alg.key_size), batch=batch)
        acc = WindowAccumulator(KEYS, alg.digest_size, window_ns=window_ns)
        while True:
            if fused:
                recs, n, _ = e.fill(seq, ask, window=acc)
                windows += acc.take_closed()
            else:
                recs, n, _ = e.fill(seq, ask)
                windows += acc.add(np.frombuffer(recs, dtype=e.dtype, count=n))
            if n == 0:
                break
            records.append(bytes(recs))
            seq += n
        windows += acc.finish()
    return b"".join(records), [w.serialize() for w in windows]


@pytest.mark.parametrize(
    ("name", "window_ns", "ask", "batch"),
    [
        ("siphash-1-3-128", 1_000_000_000, None, 0),  # one window, 65,536-record fills
        ("siphash-1-3-128", 300_000, None, 0),  # ~218 windows a fill: past the output's 64
        ("siphash-1-3-128", 7_000_000, 5_000, 0),  # fills shorter than a pass
        ("siphash-1-3-128", 2_500_000, None, 1_000),  # many short passes a fill
        ("blake3-keyed-256", 9_000_000, None, 0),  # 32-byte digests
    ],
)
def test_windows_fed_in_the_engine_match_windows_added_after_the_fill(
    pcap, name, window_ns, ask, batch
):
    alg = get_algorithm(name)
    plain = _capture(pcap, alg, window_ns, False, ask, batch)
    fused = _capture(pcap, alg, window_ns, True, ask, batch)
    assert len(plain[0]) == FRAMES * (32 + alg.digest_size)
    expected_windows = -(-FRAMES * 1000 // window_ns)  # frames start on a whole second
    assert len(plain[1]) == expected_windows
    assert fused == plain


def test_an_accumulator_of_another_digest_size_is_refused(pcap):
    alg = get_algorithm("siphash-1-3-128")
    with CaptureReader(pcap) as r:
        e = DigestEngine(r, alg, 0, bytes(alg.key_size))
        acc = WindowAccumulator(KEYS, 32)
        with pytest.raises(ValueError, match="16-byte digests for a window of 32-byte ones"):
            e.fill(0, window=acc)
