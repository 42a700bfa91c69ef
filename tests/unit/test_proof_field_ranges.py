"""check-proof: a record or window field outside the range its stored field has (seq a u64,
ts_ns an i64, wire_len a u32, flags a u16, a window's frames a u64, ...) is not a proof, exit 2
with one line naming the file and the field: it was read as a claim and reported INVALID (exit 1),
and `--json` echoed a seq of "-1" against schemas/proof.schema.json. The edges of each range
still parse (and then fail as the claims they are)."""

from __future__ import annotations

import json

import pytest
from conftest import capture_windows, cli

U64, I64 = 2**64, 2**63


def _proof(tmp_path, ledger, *how) -> dict:
    out = tmp_path / "p.json"
    r = cli("prove", ledger, *how, "--out", out)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(out.read_text())


def _check(tmp_path, keydir, doc):
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc))
    return f, cli("check-proof", f, "--trust", keydir / "verifier.pub")


RECORD_BAD = [
    ("seq", "-1"), ("seq", str(U64)), ("ts_ns", str(I64)), ("ts_ns", str(-I64 - 1)),
    ("wire_len", -1), ("wire_len", 2**32), ("cap_len", -5), ("flags", 2**16),
    ("linktype", -1), ("aux", 2**32),
]  # fmt: skip
RECORD_EDGE = [("seq", str(U64 - 1)), ("ts_ns", str(-I64)), ("wire_len", 2**32 - 1)]


@pytest.mark.parametrize(("field", "value"), RECORD_BAD)
def test_a_record_field_out_of_range_is_not_a_proof(sample_ledger, keydir, tmp_path, field, value):
    doc = _proof(tmp_path, sample_ledger, "--seq", 42)
    doc["record"][field] = value
    f, r = _check(tmp_path, keydir, doc)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert r.stderr.startswith(f"ledgertool: error: {f}: record.{field} {value} is outside ")
    assert r.stderr.count("\n") == 1


@pytest.mark.parametrize(("field", "value"), RECORD_EDGE)
def test_a_record_field_at_its_edge_is_a_claim(sample_ledger, keydir, tmp_path, field, value):
    doc = _proof(tmp_path, sample_ledger, "--seq", 42)
    doc["record"][field] = value
    _, r = _check(tmp_path, keydir, doc)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout.startswith("INVALID: the record differs from its entry in the leaf block")


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("frames", "-1", 2), ("frames", str(U64), 2), ("late", str(U64 + 7), 2),
        ("window_ns", "0", 2), ("window_ns", str(I64), 2), ("index", str(I64), 2),
        ("frames", str(U64 - 1), 1), ("index", str(-I64), 1),
    ],
)  # fmt: skip
def test_window_fields(tmp_path, keydir, field, value, code):
    w = tmp_path / "W"
    assert capture_windows(w, keydir, None, "--window", "1ms").returncode == 0
    doc = _proof(tmp_path, w, "--window", "1767225600002000000")
    doc["window"][field] = value
    f, r = _check(tmp_path, keydir, doc)
    assert r.returncode == code, (r.stdout, r.stderr)
    if code == 2:
        assert r.stderr == f"ledgertool: error: {f}: window.{field} {value} is outside " + (
            "1..9223372036854775807\n"
            if field == "window_ns"
            else "-9223372036854775808..9223372036854775807\n"
            if field == "index"
            else "0..18446744073709551615\n"
        )
    else:
        assert r.stdout.startswith("INVALID: ")
