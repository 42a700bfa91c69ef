"""recompute of a capture that differs from its ledger in a few frames: the few rows that the
fast paths leave of the differing parts are paired in Python (pairing.pair_few), without opening
DuckDB. The report and the --details file must be the exact pairing's, and pair_few must tally as
DuckDB's statements do (pair_tables, tally_tables) for any rows, repeats and equal times included.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SAMPLES, emptied_duckdb, load_keys
from hypothesis import given, settings
from hypothesis import strategies as st
from v2_reference import capture_records, write_v2_ledger

from ledgertool.digest.record import record_dtype
from ledgertool.reconcile import limits, pairing
from ledgertool.reconcile.msethash import accelerated
from ledgertool.reconcile.recompute import reconcile

PCAP = SAMPLES / "sample.pcap"
DTYPE = record_dtype(16)
fast = pytest.mark.skipif(not accelerated(), reason="the fast verdict runs where AES-NI does")


def _ledger(directory, keydir, edit) -> None:
    dk, sk, _ = load_keys(keydir)
    recs = np.frombuffer(capture_records(PCAP, dk), DTYPE).copy()
    edit(recs)
    raw = recs.tobytes()
    write_v2_ledger(
        directory,
        sk,
        [raw[i : i + 100 * 48] for i in range(0, len(raw), 100 * 48)],
        digest_key_id=dk.key_id("siphash-1-3-128", 16),
        leaf_records=32,
    )


def _changed(recs: np.ndarray) -> None:
    for k in (7, 150, 151):  # three frames whose bytes differ from the capture's
        d = bytearray(bytes(recs["digest"][k]))
        d[0] ^= 1
        recs["digest"][k] = np.void(bytes(d))
    recs["digest"][200] = recs["digest"][40]  # and one recorded with another frame's bytes


def _report(res) -> str:
    doc = res.to_json()
    doc.pop("elapsed_s", None)
    doc.pop("details_file", None)  # its name
    return json.dumps(doc, sort_keys=True)


@fast
def test_a_few_changed_frames_pair_without_duckdb(tmp_path, keydir, monkeypatch):
    d = tmp_path / "L"
    _ledger(d, keydir, _changed)
    dk, _, trust = load_keys(keydir)
    exact = reconcile(PCAP, d, dk, trust=trust, exact=True)

    def no_duckdb(*a, **k):
        raise AssertionError("DuckDB opened for a few differing rows")

    monkeypatch.setattr(limits, "open_pairing", no_duckdb)
    res = reconcile(PCAP, d, dk, trust=trust)
    assert (res.matched, res.ledger_only, res.capture_only) == (290, 4, 4)
    assert _report(res) == _report(exact)


@fast
def test_the_details_of_a_few_changed_frames_are_the_exact_ones(tmp_path, keydir):
    d = tmp_path / "L"
    _ledger(d, keydir, _changed)
    dk, _, trust = load_keys(keydir)
    got, want = tmp_path / "got.jsonl", tmp_path / "want.jsonl"
    res = reconcile(PCAP, d, dk, trust=trust, details=got)
    exact = reconcile(PCAP, d, dk, trust=trust, details=want, exact=True)
    assert _report(res) == _report(exact)
    assert got.read_text() == want.read_text()
    assert len(got.read_text().splitlines()) == 8


def _rows(draw_rows, digests: list[bytes], links: list[str]):
    """Records (record_dtype) and link codes from hypothesis' (digest, time, link) triples."""
    recs = np.zeros(len(draw_rows), DTYPE)
    codes = np.zeros(len(draw_rows), np.int32)
    for i, (di, t, li) in enumerate(draw_rows):
        recs["digest"][i] = np.void(digests[di])
        recs["ts_ns"][i] = t
        recs["seq"][i] = i
        recs["wire_len"][i] = 60 + di
        codes[i] = li % len(links)
    return recs, codes


_triples = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.sampled_from([-1_500_000_000, 0, 999_999_999, 1_000_000_000, 2_000_000_001]),
        st.integers(0, 1),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(lside=_triples, cside=_triples, nlinks=st.integers(1, 2), examples=st.integers(1, 10))
def test_pair_few_tallies_as_the_duckdb_pairing(lside, cside, nlinks, examples):
    digests = [bytes([i]) * 16 for i in range(6)]
    links = ["eth0", "eth1"][:nlinks]
    ledger, codes = _rows(lside, digests, links)
    capture, _ = _rows(cside, digests, links)
    capture["seq"] += 1000  # frame indexes apart from the ledger's sequence numbers
    got = pairing.pair_few(links, codes, ledger, capture, examples)
    con = emptied_duckdb()
    pairing.load_rows(con, "k", np.array(links, dtype=object)[codes], ledger, capture)
    pairing.pair_tables(con, [("k", None)], [], [], None, None, 0)
    want = pairing.tally_tables(con, None, None, examples)
    assert got == want
