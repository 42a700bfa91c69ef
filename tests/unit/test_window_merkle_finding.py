"""A changed window record is named: verify's merkle_mismatch of a window segment says which of
its records changed when the leaf sidecar is authentic (its root is the seal's), and only that the
root differs when the sidecar was changed too (it is never believed)."""

from __future__ import annotations

import pytest
from conftest import capture_windows

from ledgertool.keyfiles import TrustBundle
from ledgertool.verify.ledger import verify_ledger

SEG = "windows=link0/seg-00000000"


@pytest.fixture()
def ledger(tmp_path, keydir):
    led = tmp_path / "W"
    r = capture_windows(led, keydir, None, "--window", "1ms")
    assert r.returncode == 0, r.stderr
    return led


def _verify(led, keydir):
    got = []
    v = verify_ledger(led, TrustBundle.load(keydir / "verifier.pub"), on_windows=got.append)
    return v, [w.serialize() for seg in got for w in seg.windows]


def _flip_in_record(led, record: bytes):
    path = led / f"{SEG}.rec"
    data = bytearray(path.read_bytes())
    at = data.find(record)
    assert at > 0 and data.find(record, at + 1) < 0  # stored once, as written
    data[at + len(record) // 2] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("k", [0, 2, 5])
def test_the_changed_window_record_is_named(ledger, keydir, k):
    v, records = _verify(ledger, keydir)
    assert v.ok and len(records) == 6  # 294 frames over 5.8 ms, in 1 ms windows
    _flip_in_record(ledger, records[k])
    v, _ = _verify(ledger, keydir)
    (p,) = [p for p in v.problems if p.kind == "merkle_mismatch"]
    assert p.record == k
    assert p.detail.endswith(f"changed window records of the segment (from 0): {k}")


def test_a_changed_sidecar_is_not_believed(ledger, keydir):
    _, records = _verify(ledger, keydir)
    _flip_in_record(ledger, records[3])
    leaves = ledger / f"{SEG}.leaves"
    data = bytearray(leaves.read_bytes())
    data[0] ^= 1  # the sidecar no longer hashes to the seal's root
    leaves.write_bytes(bytes(data))
    v, _ = _verify(ledger, keydir)
    (p,) = [p for p in v.problems if p.kind == "merkle_mismatch"]
    assert p.record is None
    assert p.detail.endswith("Merkle root of the window records is not the seal's")
