"""`query` runs the operator's SQL over the verified tables only: DuckDB's file access (reading a
file, writing one, a glob over the ledger's own unverified files) is refused unless
`--allow-files` is given, and the SQL cannot turn it back on."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import cli_in_process

from ledgertool.errors import UsageError
from ledgertool.reconcile.query import run_query


def _queries(tmp_path: Path, ledger: Path) -> dict[str, str]:
    secret = tmp_path / "secret.csv"
    secret.write_text("name\nprover-only\n")
    return {
        "read a file": f"SELECT * FROM read_csv('{secret}')",
        "write a file": f"COPY (SELECT seq FROM records) TO '{tmp_path / 'out.csv'}'",
        "glob the ledger's files": f"SELECT count(*) FROM glob('{ledger}/**')",
    }


@pytest.mark.parametrize("what", ["read a file", "write a file", "glob the ledger's files"])
def test_query_sql_cannot_touch_files_by_default(
    tmp_path, sample_ledger, what, monkeypatch, capsys
):
    sql = _queries(tmp_path, sample_ledger)[what]
    code, out, err = cli_in_process("query", sample_ledger, sql, "--quiet")
    assert code == 2 and out == "", err
    assert err.startswith("ledgertool: error: query failed: Permission Error")
    assert "disabled by configuration" in err and "--allow-files" in err
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("what", ["read a file", "write a file", "glob the ledger's files"])
def test_query_allow_files_lets_the_sql_touch_files(
    tmp_path, sample_ledger, what, monkeypatch, capsys
):
    sql = _queries(tmp_path, sample_ledger)[what]
    code, out, err = cli_in_process(
        "query",
        sample_ledger,
        sql,
        "--allow-files",
        "--quiet",
        "--format",
        "csv",
    )
    assert code == 0, err
    if what == "read a file":
        assert out.splitlines() == ["name", "prover-only"]
    elif what == "write a file":
        assert (tmp_path / "out.csv").read_text().splitlines()[:3] == ["seq", "0", "1"]
    else:
        assert int(out.splitlines()[1]) > 3  # ledger.json, seals, records files


@pytest.mark.parametrize(
    "sql",
    [
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "RESET enable_external_access",
    ],
)
def test_query_sql_cannot_turn_file_access_back_on(sample_ledger, sql):
    with pytest.raises(UsageError, match="configuration"):
        run_query(sample_ledger, sql)


def test_query_without_files_still_answers_with_progress(sample_ledger):
    seen = []
    res = run_query(
        sample_ledger, "SELECT count(*), sum(wire_len) FROM records", progress=seen.append
    )
    assert res.rows == [(294, 125445)]
    assert any(p.phase == "verify" for p in seen)
