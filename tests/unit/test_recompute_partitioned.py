"""recompute's partitioned pairing (docs/adr/0011, "Parts"): both sides hashed in parts by a keyed
hash of the digest; when some parts differ, only their rows are read again and paired, the rest
counted as matched. The report must be byte for byte the exact pairing's (`exact=True`) for every
way a ledger can differ from the traffic, including a frame moved far in time, timestamps out of
order and duplicates of a frame elsewhere in the capture, and it must pair only the rows of the
differing parts. Ledgers from tests/v2_reference.py over the records of samples/sample.pcap."""

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

pytestmark = pytest.mark.skipif(
    not accelerated(), reason="the partitioned pairing runs where AES-NI does"
)

PCAP = SAMPLES / "sample.pcap"
DTYPE = record_dtype(16)
SEG = 100


@pytest.fixture(scope="module")
def base(keydir):
    return np.frombuffer(capture_records(PCAP, load_keys(keydir)[0]), DTYPE).copy()


def _write(directory, keydir, recs: np.ndarray) -> None:
    dk, sk, _ = load_keys(keydir)
    recs = recs.copy()
    recs["seq"] = np.arange(len(recs))  # seq stays contiguous, as a device writes it
    raw = recs.tobytes()
    write_v2_ledger(
        directory,
        sk,
        [raw[i : i + SEG * 48] for i in range(0, len(raw), SEG * 48)],
        digest_key_id=dk.key_id("siphash-1-3-128", 16),
        leaf_records=32,
    )


def _edit(recs: np.ndarray, kind: str, k: int, j: int) -> np.ndarray:
    recs = recs.copy()
    k, j = k % len(recs), j % len(recs)
    if kind == "drop":
        return np.delete(recs, k)
    if kind == "dup_far":  # frame k recorded again at position j (another time, the same digest)
        dup = recs[k : k + 1].copy()
        dup["ts_ns"] = recs["ts_ns"][j]
        return np.insert(recs, j, dup)
    if kind == "digest":
        d = bytearray(bytes(recs["digest"][k]))
        d[k % 16] ^= 1 << (k % 8)
        recs["digest"][k] = np.void(bytes(d))
        return recs
    if kind == "move":  # frame k moved to position j with j's time
        row = recs[k : k + 1].copy()
        row["ts_ns"] = recs["ts_ns"][j]
        return np.insert(np.delete(recs, k), min(j, len(recs) - 1), row)
    if kind == "time":  # a frame re-timed by hours: the same digest
        recs["ts_ns"][k] += 3600 * 10**9
        return recs
    if kind == "reverse":  # the times of a run of frames in the other order
        lo, hi = min(k, j), max(k, j) + 1
        recs["ts_ns"][lo:hi] = recs["ts_ns"][lo:hi][::-1].copy()
        return recs
    if kind == "gap":
        recs["flags"][k], recs["aux"][k] = FLAG_GAP, 2
        return recs
    raise AssertionError(kind)


def _report(res) -> str:
    doc = res.to_json()
    doc.pop("elapsed_s", None)
    return json.dumps(doc, sort_keys=True)


def _paired_sizes(monkeypatch) -> list[tuple[int, int]]:
    sizes = []
    real = pairing.pair_records

    def spy(con, kid, segs, uncovered, ledger_side, capture, *a, **k):
        sizes.append((len(ledger_side[2]), len(capture)))
        return real(con, kid, segs, uncovered, ledger_side, capture, *a, **k)

    monkeypatch.setattr(pairing, "pair_records", spy)
    return sizes


KINDS = ["drop", "dup_far", "digest", "move", "time", "reverse", "gap"]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    edits=st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(0, 300), st.integers(0, 300)),
        min_size=1,
        max_size=4,
    ),
    bits=st.sampled_from([0, 1, 3, 6, 12]),
    spill=st.booleans(),
)
def test_the_partitioned_report_is_the_exact_report(
    tmp_path_factory, keydir, base, monkeypatch, edits, bits, spill
):
    recs = base
    for kind, k, j in edits:
        recs = _edit(recs, kind, k, j)
    d = tmp_path_factory.mktemp("part") / "L"
    _write(d, keydir, recs)
    dk, _, trust = load_keys(keydir)
    with monkeypatch.context() as m:
        m.setattr(rc, "PART_BITS", bits)
        if spill:  # every pooled row goes to DuckDB's tables at once
            m.setattr(limits, "memory_budget", lambda limit: 0)
        part = reconcile(PCAP, d, dk, trust=trust)
    exact = reconcile(PCAP, d, dk, trust=trust, exact=True)
    assert _report(part) == _report(exact)


def test_only_the_rows_of_the_differing_parts_are_paired(tmp_path, keydir, base, monkeypatch):
    recs = _edit(_edit(base, "digest", 40, 0), "drop", 200, 0)
    d = tmp_path / "L"
    _write(d, keydir, recs)
    dk, _, trust = load_keys(keydir)
    sizes = _paired_sizes(monkeypatch)
    monkeypatch.setattr(rc, "PART_BITS", 6)  # 64 parts of ~5 rows
    res = reconcile(PCAP, d, dk, trust=trust)
    assert (res.matched, res.ledger_only, res.capture_only) == (292, 1, 2)
    # at most 3 parts of 64
    assert len(sizes) == 1 and 0 < sizes[0][0] <= 30 and 0 < sizes[0][1] <= 30
    monkeypatch.undo()
    assert _report(res) == _report(reconcile(PCAP, d, dk, trust=trust, exact=True))


def test_a_duplicate_elsewhere_is_paired_as_the_exact_pairing_pairs_it(tmp_path, keydir, base):
    """The frame at 150 recorded a second time at the capture's end: the exact pairing numbers a
    digest's occurrences in time order, so the later copy is the ledger-only one, and pairing
    only the differing part must name the same record (its seq and time)."""
    recs = _edit(base, "dup_far", 150, 293)
    d = tmp_path / "L"
    _write(d, keydir, recs)
    dk, _, trust = load_keys(keydir)
    res = reconcile(PCAP, d, dk, trust=trust)
    assert (res.ledger_only, res.capture_only) == (1, 0)
    assert res.examples_ledger_only[0]["seq"] == 293
    assert _report(res) == _report(reconcile(PCAP, d, dk, trust=trust, exact=True))


def test_a_ledger_that_changes_between_the_readings_is_paired_in_full(
    tmp_path, keydir, base, monkeypatch
):
    """When the second reading does not meet what the first one hashed, nothing of the first is
    used: everything is paired again (the report is the exact one)."""
    d = tmp_path / "L"
    _write(d, keydir, _edit(base, "digest", 10, 0))
    dk, _, trust = load_keys(keydir)
    monkeypatch.setattr(rc, "_gather_marked", lambda *a, **k: None)
    monkeypatch.setattr(rc, "_gather_parts", lambda *a, **k: False)
    sizes = _paired_sizes(monkeypatch)
    res = reconcile(PCAP, d, dk, trust=trust)
    assert sizes == [(294, 294)]
    monkeypatch.undo()
    assert _report(res) == _report(reconcile(PCAP, d, dk, trust=trust, exact=True))
