"""docs/ledger-format.md's v2 worked example, run as written (after the v1 one, whose functions it
reuses) against v2 ledgers from the tests' reference writer: raw record files with unaligned blocks,
a compacted (Parquet) segment, and tampered copies it must refuse."""

from __future__ import annotations

import base64
import re

import pytest
from conftest import SAMPLES, load_keys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA65PublicKey
from v2_reference import parquet_bytes, synthetic_records, write_v2_ledger

DOC = SAMPLES.parent / "docs" / "ledger-format.md"


def example() -> dict:
    text = DOC.read_text()
    v1 = re.search(
        r"```python\n(.*?)```", text.split("## Worked example: an independent check", 1)[1], re.S
    ).group(1)
    v2 = re.search(r"```python\n(.*?)```", text.split("## Worked example, v2", 1)[1], re.S).group(1)
    for code in (v1, v2):
        assert not re.search(r"^\s*(import|from)\s+ledgertool", code, re.M)
    ns: dict = {}
    exec(compile(v1, "ledger-format.md (worked example)", "exec"), ns)
    exec(compile(v2, "ledger-format.md (worked example, v2)", "exec"), ns)
    return ns


@pytest.fixture()
def ledger(tmp_path, keydir):
    _, sk, trust = load_keys(keydir)
    segs = [
        synthetic_records(300, 0, 16, 1),
        synthetic_records(70, 300, 16, 2, gaps={3: 5}),
        synthetic_records(0, 370),
    ]
    w = write_v2_ledger(
        tmp_path / "L", sk, segs, leaf_records=64, block_records=[[1, 63, 200, 36], None, []]
    )
    w.path(1, "parquet").write_bytes(parquet_bytes(segs[1], 16, 1))  # compacted
    w.path(1, "rec").unlink()
    return w, segs, trust


def check_link(ex: dict, w, trust) -> list[bytes]:
    pub = trust.public_keys
    prev, out = ex["genesis_hash"](w.ledger.ledger_id, "link0"), []
    for i, seal in enumerate(w.seals):
        rec, pqf = w.path(i, "rec"), w.path(i, "parquet")
        out.append(
            ex["check_v2_records"](
                seal, rec if rec.exists() else None, None if rec.exists() else pqf
            )
        )
        assert seal["prev_seal_hash"] == prev
        msg = ex["signed_bytes"](seal)
        Ed25519PublicKey.from_public_bytes(pub["ed25519"]).verify(
            base64.b64decode(seal["signatures"]["ed25519"]), msg
        )
        MLDSA65PublicKey.from_public_bytes(pub["ml-dsa-65"]).verify(
            base64.b64decode(seal["signatures"]["ml-dsa-65"]), msg
        )
        prev = ex["seal_hash"](seal)
    return out


def test_worked_example_v2_checks_a_v2_ledger(ledger):
    w, segs, trust = ledger
    assert check_link(example(), w, trust) == segs


@pytest.mark.parametrize(
    "tamper", ["record byte", "cut", "trailing", "header segment", "parquet row"]
)
def test_worked_example_v2_refuses_tampered_segments(ledger, tamper, tmp_path):
    w, _, trust = ledger
    ex = example()
    raw = bytearray(w.path(0, "rec").read_bytes())
    if tamper == "record byte":
        raw[256 + 4 + 40] ^= 1
    elif tamper == "cut":
        raw = raw[:-1]
    elif tamper == "trailing":
        raw += b"\0"
    elif tamper == "header segment":
        raw[32] = 1
    if tamper == "parquet row":
        w.path(1, "parquet").write_bytes(parquet_bytes(synthetic_records(70, 300, 16, 9), 16, 1))
    else:
        w.path(0, "rec").write_bytes(bytes(raw))
    with pytest.raises((AssertionError, ValueError)):
        check_link(ex, w, trust)


def test_worked_example_v2_ledger_verifies_with_ledgertool(ledger):
    """The same ledger (an empty segment, GAP records, a compacted one) through `verify`."""
    from ledgertool.verify.ledger import verify_ledger

    w, _, trust = ledger
    res = verify_ledger(w.ledger.directory, trust)
    assert res.ok, res.problems
    assert (res.segments, res.records, res.frames, res.drops_declared) == (3, 370, 369, 5)
