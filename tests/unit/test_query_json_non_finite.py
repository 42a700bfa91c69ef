"""query --format json|jsonl (and --json, --output FILE) writes a double that is inf, -inf or NaN
as DuckDB's SQL text ("inf", "-inf", "nan"), as it writes other values JSON has no number for: it
wrote Infinity and NaN, which no strict JSON parser reads. Finite doubles stay JSON numbers."""

from __future__ import annotations

import json

import pytest
from conftest import cli

SQL = {
    "constant": "SELECT 1/0 AS a, -1/0 AS b, 'nan'::DOUBLE AS c, 0.5::DOUBLE AS d",
    "over records": "SELECT count(*) / 0 AS a, -count(*) / 0 AS b, 'nan'::DOUBLE AS c, "
    "avg(wire_len) / 0 + 0.5 - 'inf'::DOUBLE AS d2, 0.5::DOUBLE AS d FROM records",
}


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("sql", SQL.values(), ids=SQL.keys())
@pytest.mark.parametrize("how", [("--format", "json"), ("--json",), ("--format", "jsonl")])
def test_non_finite_doubles_are_their_sql_text(sample_ledger, sql, how):
    r = cli("query", sample_ledger, sql, *how, "-q")
    assert r.returncode == 0, (r.stdout, r.stderr)
    text = r.stdout if how[-1] != "jsonl" else "[" + r.stdout.strip() + "]"
    row = _strict(text)[0]
    assert (row["a"], row["b"], row["c"], row["d"]) == ("inf", "-inf", "nan", 0.5)


def test_the_output_file_too(sample_ledger, tmp_path):
    out = tmp_path / "r.json"
    r = cli("query", sample_ledger, SQL["constant"], "--format", "json", "-o", out, "-q")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert _strict(out.read_text()) == [{"a": "inf", "b": "-inf", "c": "nan", "d": 0.5}]
