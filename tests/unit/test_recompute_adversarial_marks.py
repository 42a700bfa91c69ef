"""recompute's second reading of a capture that differs (ledgertool/reconcile/marks.py) under the
threat model's adversary, who holds the disks and changes a ledger file between the readings
without signing again: the rows reported come only from leaves hashed again and equal to the ones
the first reading verified, and a change is the ledger refused (exit 1, "does not verify"), never
a verdict over bytes that were not checked."""

from __future__ import annotations

import pytest
from conftest import cli, load_keys
from test_recompute_marks import (
    PCAP,
    SEG,
    _count_readings,
    _edit,
    _write,
    base,  # noqa: F401 - the fixture
)

from ledgertool.errors import DiscrepancyError
from ledgertool.reconcile import recompute as rc
from ledgertool.reconcile.msethash import accelerated
from ledgertool.reconcile.recompute import reconcile

pytestmark = pytest.mark.skipif(not accelerated(), reason="the fast verdict runs where AES-NI does")

CHANGED = 150  # the record whose digest differs from the capture's frame: segment 1, record 50


def _flip_record(d, index: int, row: int, offset: int = 8) -> None:
    """Flip one bit of record `row` of segment `index` at `offset` in the record (8: ts_ns, 32:
    the digest) in its raw record file (found by its blocks' counts), as the storage holder may,
    without signing again."""
    path = d / "link=link0" / f"seg-{index:08d}.rec"
    raw = bytearray(path.read_bytes())
    at, first = 256, 0
    while True:
        n = int.from_bytes(raw[at : at + 4], "little")
        if row < first + n:
            break
        at, first = at + 4 + n * 48 + 32, first + n
    raw[at + 4 + (row - first) * 48 + offset] ^= 1
    path.write_bytes(bytes(raw))


@pytest.fixture()
def differing(tmp_path, keydir, base):  # noqa: F811
    d = tmp_path / "L"
    _write(d, keydir, _edit(base, "digest", CHANGED, 0))
    return d


def test_the_rows_reported_are_only_those_of_leaves_hashed_again(differing, keydir, monkeypatch):
    """Every ledger row the marked second reading keeps was returned by a checked read (each of
    its leaves hashed and equal to the one verified), and the changed record is among them."""
    dk, _, trust = load_keys(keydir)
    calls, kept, real_rows = [], [], rc.ledger_rows
    real_took = rc.PartStore.took_ledger

    def rows(reader, seg, wanted, check=True):
        out = real_rows(reader, seg, wanted, check)
        calls.append((check, out))
        return out

    def took(self, link, raw, *a, **k):
        kept.append(raw)
        return real_took(self, link, raw, *a, **k)

    monkeypatch.setattr(rc, "ledger_rows", rows)
    monkeypatch.setattr(rc.PartStore, "took_ledger", took)
    res = reconcile(PCAP, differing, dk, trust=trust)
    assert (res.ledger_only, res.capture_only) == (1, 1)
    checked = [out for check, out in calls if check]
    assert kept and all(any(raw is out for out in checked) for raw in kept)
    assert res.examples_ledger_only[0]["seq"] == CHANGED


@pytest.mark.parametrize("offset", [8, 32], ids=["ts_ns", "digest"])
@pytest.mark.parametrize("when", ["before the unchecked read", "between the two reads"])
def test_a_record_changed_between_the_readings_is_the_ledger_refused(
    differing, keydir, monkeypatch, when, offset
):
    """The changed record's own leaf is rewritten after the first reading verified it: before the
    second reading looks, or after the unchecked read found the rows and before the checked one.
    A digest changed before makes its part hash otherwise (the marks give up); a ts_ns, which the
    parts do not hash, or any change after the unchecked read, leaves its leaf unequal to the one
    kept. Either way the ledger is read in full again, verified, and refused: DiscrepancyError,
    exit 1 at the CLI."""
    dk, _, trust = load_keys(keydir)
    readings: list[str] = []
    if when == "before the unchecked read":
        _count_readings(
            monkeypatch, readings, lambda: _flip_record(differing, 1, CHANGED - SEG, offset)
        )
    else:
        _count_readings(monkeypatch, readings, lambda: None)
        real = rc.ledger_rows

        def rows(reader, seg, wanted, check=True):
            if check and seg.index == 1:
                _flip_record(differing, 1, CHANGED - SEG, offset)
            return real(reader, seg, wanted, check)

        monkeypatch.setattr(rc, "ledger_rows", rows)
    with pytest.raises(DiscrepancyError, match="does not verify") as e:
        reconcile(PCAP, differing, dk, trust=trust)
    assert readings == ["marked", "full"]
    assert "merkle_mismatch" in str(e.value) and "segment 1" in str(e.value)


def test_the_cli_refuses_a_ledger_changed_between_the_readings(differing, keydir, monkeypatch):
    calls: list[str] = []
    _count_readings(monkeypatch, calls, lambda: _flip_record(differing, 1, CHANGED - SEG))
    r = cli(
        "recompute", PCAP, "--ledger", differing, "--digest-key", keydir / "digest.key",
        "--trust", keydir / "verifier.pub",
    )  # fmt: skip
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "does not verify" in r.stderr and "merkle_mismatch" in r.stderr
    assert "Traceback" not in r.stderr and calls == ["marked", "full"]
