"""recompute's fast verdict (reconcile without pairing, _fast_verdict; docs/adr/0011): when the
ledger's frame records and the recomputed capture hold the same multiset of digests the report
comes from the ledger side's counts alone, and it must be byte for byte the report of the exact
pairing (`exact=True`); when they differ the fast verdict must not decide anything. Ledgers from
tests/v2_reference.py over the records of samples/sample.pcap (294 frames), edited before sealing
(so that they verify) the ways a prover's ledger can differ from the traffic."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SAMPLES, load_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from v2_reference import capture_records, write_v2_ledger

from ledgertool.digest.record import FLAG_GAP, record_dtype
from ledgertool.reconcile import limits, pairing
from ledgertool.reconcile import recompute as rc
from ledgertool.reconcile.msethash import accelerated
from ledgertool.reconcile.recompute import reconcile

# without AES instructions recompute never takes the fast verdict (the portable AES is slower than
# pairing): every run pairs, and the reports are still compared
FAST = accelerated()

PCAP = SAMPLES / "sample.pcap"
DTYPE = record_dtype(16)
SEG = 100


def _write(directory, keydir, recs: np.ndarray) -> None:
    dk, sk, _ = load_keys(keydir)
    raw = recs.tobytes()
    write_v2_ledger(
        directory,
        sk,
        [raw[i : i + SEG * 48] for i in range(0, len(raw), SEG * 48)],
        digest_key_id=dk.key_id("siphash-1-3-128", 16),
        leaf_records=32,
    )


@pytest.fixture(scope="module")
def base(keydir):
    dk = load_keys(keydir)[0]
    return np.frombuffer(capture_records(PCAP, dk), DTYPE).copy()


def _report(res) -> dict:
    doc = res.to_json()
    doc.pop("elapsed_s", None)
    return doc


def _both(d, keydir, monkeypatch, **kw) -> tuple[dict, dict, bool]:
    """(fast report, exact report, whether the fast verdict decided: no pairing ran)."""
    dk, _, trust = load_keys(keydir)
    kw.setdefault("trust", trust)
    paired = []
    real = pairing.pair_records
    monkeypatch.setattr(pairing, "pair_records", lambda *a, **k: paired.append(1) or real(*a, **k))
    fast = _report(reconcile(PCAP, d, dk, **kw))
    decided = not paired
    exact = _report(reconcile(PCAP, d, dk, exact=True, **kw))
    assert paired  # the exact run paired
    return fast, exact, decided


def _edit(base: np.ndarray, kind: str, k: int) -> np.ndarray:
    recs = base.copy()
    if kind == "drop":  # a frame the ledger lacks
        return np.delete(recs, k)
    if kind == "add":  # a frame the ledger has twice
        return np.insert(recs, k, recs[k])
    if kind == "digest":  # a frame's digest altered
        d = bytearray(bytes(recs["digest"][k]))
        d[k % 16] ^= 1 << (k % 8)
        recs["digest"][k] = np.void(bytes(d))
        return recs
    if kind == "swap":  # two frames in the other order: the same multiset
        recs[[k, (k + 37) % len(recs)]] = recs[[(k + 37) % len(recs), k]]
        return recs
    if kind == "time":  # a frame's time moved by more than a second: the same digests
        recs["ts_ns"][k] += 3 * 10**9
        return recs
    if kind == "gap":  # the device declared drops in place of a frame
        recs["flags"][k], recs["aux"][k] = FLAG_GAP, 2
        return recs
    raise AssertionError(kind)


def _renumber(recs: np.ndarray) -> np.ndarray:
    recs = recs.copy()
    recs["seq"] = np.arange(len(recs))  # seq stays contiguous, as a device writes it
    return recs


def test_an_agreeing_capture_is_decided_without_pairing(tmp_path, keydir, base, monkeypatch):
    d = tmp_path / "L"
    _write(d, keydir, base)
    if FAST:
        monkeypatch.setattr(
            limits, "open_duckdb", lambda *a, **k: pytest.fail("the fast verdict opened DuckDB")
        )
    fast = reconcile(PCAP, d, load_keys(keydir)[0], trust=load_keys(keydir)[2])
    assert fast.ok and (fast.frames, fast.matched, fast.ledger_only, fast.capture_only) == (
        294,
        294,
        0,
        0,
    )
    monkeypatch.undo()
    f, e, decided = _both(d, keydir, monkeypatch)
    assert decided == FAST and f == e


def test_without_aes_instructions_every_run_pairs(tmp_path, keydir, base, monkeypatch):
    d = tmp_path / "L"
    _write(d, keydir, base)
    monkeypatch.setattr(rc, "mset_accelerated", lambda: False)
    f, e, decided = _both(d, keydir, monkeypatch)
    assert not decided and f == e and f["matched"] == 294


@pytest.mark.parametrize(
    "kind,decides",
    [
        ("drop", False),
        ("add", False),
        ("digest", False),
        ("gap", False),
        ("swap", True),
        ("time", True),
    ],
)
def test_each_way_of_differing_gives_the_exact_report(
    tmp_path, keydir, base, monkeypatch, kind, decides
):
    d = tmp_path / "L"
    _write(d, keydir, _renumber(_edit(base, kind, 150)))
    f, e, decided = _both(d, keydir, monkeypatch)
    assert f == e and decided == (decides and FAST)
    if not decides:
        assert e["ledger_only"] + e["capture_only"] > 0


def test_details_unverified_and_links(tmp_path, keydir, base, monkeypatch):
    d = tmp_path / "L"
    _write(d, keydir, base)
    # keyless: verified False
    f, e, decided = _both(d, keydir, monkeypatch, trust=None, links=["link0"])
    assert (
        decided == FAST
        and f == e
        and f["verified"] is False
        and any("UNVERIFIED" in w for w in f["warnings"])
    )
    out = tmp_path / "details.jsonl"
    out.write_text("old\n")
    dk, _, trust = load_keys(keydir)
    res = reconcile(PCAP, d, dk, trust=trust, details=out)
    assert res.ok and out.read_bytes() == b""  # replaced by the (empty) list of differing frames
    # a window goes to the exact pairing, which counts the frames inside it
    ts = sorted(int(t) for t in base["ts_ns"])
    win = reconcile(PCAP, d, dk, trust=trust, from_ns=ts[0], to_ns=ts[100])
    assert win.matched == sum(1 for t in ts if t < ts[100])


def test_a_capture_cut_short_is_paired(tmp_path, keydir, base, monkeypatch):
    """A capture that stops early (corrupt after its start) is never decided by the fast verdict,
    even when what was read agrees with the ledger."""
    cut = tmp_path / "cut.pcap"
    raw = PCAP.read_bytes()
    cut.write_bytes(raw[:-7])  # the last frame's record is incomplete
    d = tmp_path / "L"
    _write(d, keydir, base[:293])
    dk, _, trust = load_keys(keydir)
    res = reconcile(cut, d, dk, trust=trust)
    exact = reconcile(cut, d, dk, trust=trust, exact=True)
    assert _report(res) == _report(exact)
    assert res.matched == 293 and (res.capture.stopped is not None or res.warnings)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(
            st.sampled_from(["drop", "add", "digest", "swap", "time", "gap"]), st.integers(0, 280)
        ),
        max_size=3,
    )
)
def test_random_edits_fast_equals_exact(tmp_path_factory, keydir, base, edits):
    recs = base
    for kind, k in edits:
        recs = _edit(recs, kind, min(k, len(recs) - 1))
    d = tmp_path_factory.mktemp("fast") / "L"
    _write(d, keydir, _renumber(recs))
    dk, _, trust = load_keys(keydir)
    fast = _report(reconcile(PCAP, d, dk, trust=trust))
    exact = _report(reconcile(PCAP, d, dk, trust=trust, exact=True))
    assert json.dumps(fast, sort_keys=True) == json.dumps(exact, sort_keys=True)


def test_gap_records_do_not_count_as_frames(tmp_path, keydir, base, monkeypatch):
    """A GAP record appended after the frames (the device declared drops it never saw) leaves the
    frames' multiset unchanged: decided, and the drops are the verify result's."""
    recs = np.concatenate([base, base[:1]])
    recs["flags"][-1], recs["aux"][-1] = FLAG_GAP, 5
    d = tmp_path / "L"
    _write(d, keydir, _renumber(recs))
    f, e, decided = _both(d, keydir, monkeypatch)
    assert decided == FAST and f == e and f["matched"] == 294


def test_the_walk_that_copies_a_raw_record_file_hashes_it_as_python_does(tmp_path, keydir, base):
    """lt_rec_file_mset (HashingSink): each raw record file's records are added to the multiset hash
    and counted per second by the native walk that copies and hashes them; the result must equal
    MultisetHash.add and second_counts over the same records, GAP records left out."""
    from ledgertool.reconcile.msethash import HashingSink, MultisetHash, new_key
    from ledgertool.reconcile.multiset import second_counts
    from ledgertool.verify.ledger import verify_ledger

    recs = _renumber(_edit(_edit(base, "gap", 7), "time", 200))
    d = tmp_path / "L"
    _write(d, keydir, recs)
    key = new_key()
    sink = HashingSink(DTYPE, MultisetHash(key, 16))
    held = []
    res = verify_ledger(
        d,
        load_keys(keydir)[2],
        on_segment=lambda s: held.append(sink.holds(s.records)),
        records_into=sink,
    )
    assert res.ok and held == [True, True, True]
    want = MultisetHash(key, 16)
    assert want.add(recs) == 293
    assert sink.mset.state() == want.state()
    assert sink.seconds == second_counts(recs, FLAG_GAP) and sum(sink.seconds.values()) == 293


def test_a_segment_whose_times_jump_between_seconds_is_counted_from_the_same_copy(
    tmp_path, keydir, base
):
    """More per-second runs than the native walk's room (1,024 + 1/16 of the records): the seconds
    are counted from the copy it hashed (HashingSink.count_seconds), with the same result."""
    from ledgertool.reconcile.msethash import HashingSink, MultisetHash, new_key
    from ledgertool.reconcile.multiset import second_counts
    from ledgertool.verify.ledger import verify_ledger

    recs = _renumber(np.concatenate([base] * 11))  # 3,234 records in one segment
    # every record another second
    recs["ts_ns"] = 1_700_000_000 * 10**9 + (np.arange(len(recs)) % 2) * 2 * 10**9
    dk, sk, trust = load_keys(keydir)
    d = tmp_path / "L"
    write_v2_ledger(
        d, sk, [recs.tobytes()], digest_key_id=dk.key_id("siphash-1-3-128", 16), leaf_records=32
    )
    key = new_key()
    counted = []

    class Sink(HashingSink):
        def count_seconds(self, records):
            counted.append(len(records))
            super().count_seconds(records)

    sink = Sink(DTYPE, MultisetHash(key, 16))
    held = []
    assert verify_ledger(
        d, trust, on_segment=lambda s: held.append(sink.holds(s.records)), records_into=sink
    ).ok
    want = MultisetHash(key, 16)
    want.add(recs)
    assert held == [True] and counted == [3234] and sink.mset.state() == want.state()
    assert (
        sink.seconds == second_counts(recs, FLAG_GAP) == {1_700_000_000: 1617, 1_700_000_002: 1617}
    )
