"""The capture side filled in place: DigestEngine.fill(out=) writes the records into the caller's
array, and recompute's RecordSink takes every batch of a capture into one growing array with the
same records as copying each batch out of the engine's buffer and joining them."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import REPO, load_keys

from ledgertool.algorithms import get_algorithm
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.record import record_dtype
from ledgertool.digest.strip import get_strip_mode
from ledgertool.reconcile.recompute import DigestRun, RecordSink, _capture_records, digest_records
from ledgertool.source import open_source

sys.path.insert(0, str(REPO / "scripts"))
from scale_bench import SPEC  # noqa: E402

ALG = get_algorithm("siphash-1-3-128")


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    """150,000 64-byte frames: more than two engine batches (65,536)."""
    p = tmp_path_factory.mktemp("sink") / "w.toml"
    p.write_text(SPEC.format(n=150_000, a=75_000, b=75_000))
    return f"workload:{p}"


def _copied_batches(source, key) -> np.ndarray:
    run = DigestRun()
    return np.concatenate(
        [a.copy() for a in digest_records(source, key, ALG, "frame", run, None, 1)]
    )


def test_fill_out_writes_into_the_callers_array(spec, keydir):
    key = load_keys(keydir)[0].subkey(ALG.name, ALG.key_size)
    with open_source(spec) as a, open_source(spec) as b:
        own = DigestEngine(a, ALG, get_strip_mode("frame"), key)
        into = DigestEngine(b, ALG, get_strip_mode("frame"), key)
        out = np.zeros(1000, record_dtype(ALG.digest_size))
        want, n, _ = own.fill(7, 1000)
        got, m, _ = into.fill(7, 5000, out=out)  # at most len(out) records
    assert n == m == 1000 and bytes(got) == bytes(want) == out.tobytes()
    assert (
        out["seq"][0] == 7 and np.frombuffer(got, out.dtype)["ts_ns"][-1] == out["ts_ns"][-1] != 0
    )
    with pytest.raises(ValueError):
        into.fill(0, out=np.zeros(10, record_dtype(32)))  # not the engine's record layout


@pytest.mark.parametrize("hint", [0, 1_000_000])
def test_record_sink_grows_and_holds_every_batch(spec, keydir, hint):
    """A hint too small (the array doubles, twice) or large enough: the records are those of the
    batches copied and joined, in order, seq numbering every frame."""
    key = load_keys(keydir)[0]
    want = _copied_batches(spec, key)
    run = DigestRun()
    sink = RecordSink(record_dtype(ALG.digest_size), hint)
    for _ in digest_records(spec, key, ALG, "frame", run, None, 1, sink=sink):
        pass
    got = sink.records()
    assert len(got) == run.frames == 150_000 and got.tobytes() == want.tobytes()
    assert got["seq"].tolist() == list(range(150_000))
    # two captures, one array
    records, run = _capture_records([spec, spec], key, ALG, "frame", None, 1)
    assert (
        len(records) == 300_000
        and records[150_000:]["digest"].tobytes() == want["digest"].tobytes()
    )
    assert records["seq"][-1] == 299_999


def test_sink_reserves_at_most_max_hint_records_and_grows_past_it(monkeypatch):
    """A hint from a huge capture's size (a 100 TB pcap: 1.5 T records at 64 bytes each) would be a
    reservation no machine grants; the sink reserves MAX_HINT records and grows past them (a
    smaller MAX_HINT here, so that the growth copies little)."""
    assert RecordSink.MAX_HINT == 1 << 24
    monkeypatch.setattr(RecordSink, "MAX_HINT", 1 << 17)
    dtype = record_dtype(ALG.digest_size)
    sink = RecordSink(dtype, 100 * 10**12 // 64)
    assert len(sink.room()) == RecordSink.MAX_HINT
    sink.n = RecordSink.MAX_HINT - 10
    sink.room()[:1]["seq"] = 7
    # doubled once there was less than a batch left
    assert len(sink.room()) == RecordSink.MAX_HINT + 10
    sink.n += 1
    assert sink.records()[-1]["seq"] == 7
