"""CLI habits: output, interaction and mistakes, each through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES, CliResult, cli

SAMPLE = SAMPLES / "sample.pcapng"


def _keys(keydir: Path) -> list[str]:
    return [
        "--digest-key",
        str(keydir / "digest.key"),
        "--signing-key",
        str(keydir / "signing.key"),
    ]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, keydir) -> Path:
    """The sample in 3 segments, with the checkpoint after them saved as cp3.txt, then 3 more
    segments and cp6.txt."""
    d = tmp_path_factory.mktemp("habits")
    led = d / "L"
    for cp in ("cp3.txt", "cp6.txt"):
        r = cli("capture", SAMPLE, "--ledger", led, *_keys(keydir), "--segment-records", "100")
        assert r.returncode == 0, r.stderr
        r = cli("checkpoint", led, "--out", d / cp)
        assert r.returncode == 0, r.stderr
    return led


def _one_error_line(r: CliResult, code: int = 2) -> str:
    """The one error line (beside a query's UNVERIFIED warning)."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.strip().splitlines() if "UNVERIFIED" not in ln]
    assert len(lines) == 1 and lines[0].startswith("ledgertool: error: "), r.stderr
    assert ".tmp" not in r.stderr and "Traceback" not in r.stderr
    return lines[0]


# ---- 1. --debug keeps the exit code -------------------------------------------------------------


def test_debug_keeps_exit_code(tmp_path, keydir):
    plain = cli("verify", tmp_path / "absent", "--trust", keydir / "verifier.pub")
    debug = cli("--debug", "verify", tmp_path / "absent", "--trust", keydir / "verifier.pub")
    assert plain.returncode == debug.returncode == 2
    assert "Traceback" in debug.stderr and "Traceback" not in plain.stderr
    assert debug.stderr.strip().splitlines()[-1] == plain.stderr.strip()


# ---- 2. bad output paths
# --------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["missing-dir", "a-dir"])
def test_bad_output_paths(ledger, keydir, tmp_path, where):
    out = tmp_path / "nodir" / "x.out" if where == "missing-dir" else tmp_path
    cmds = [
        ["prove", ledger, "--seq", "1", "--out", out],
        ["checkpoint", ledger, "--out", out],
        [
            "recompute",
            SAMPLE,
            "--digest-key",
            keydir / "digest.key",
            "--algorithm",
            "siphash-1-3-128",
            "--strip",
            "frame",
            "--out",
            out,
        ],
    ]
    for cmd in cmds:
        line = _one_error_line(cli(*cmd))
        assert str(tmp_path) in line, line
        assert ("No such file or directory" if where == "missing-dir" else "Is a directory") in line


def test_capture_ledger_is_a_file(tmp_path, keydir):
    f = tmp_path / "afile"
    f.write_text("mine\n")
    line = _one_error_line(cli("capture", SAMPLE, "--ledger", f, *_keys(keydir)))
    assert (
        line
        == f"ledgertool: error: {f}: is a regular file; expected a ledger directory (a new, empty "
        "or existing one)"
    )
    assert f.read_text() == "mine\n"


def test_capture_refuses_a_directory_of_other_files(tmp_path, keydir):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "notes.txt").write_text("mine\n")
    line = _one_error_line(cli("capture", SAMPLE, "--ledger", d, *_keys(keydir)))
    assert "not a ledger; refusing to write a ledger among them" in line
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("capture", SAMPLE, "--ledger", empty, *_keys(keydir))
    assert r.returncode == 0, r.stderr
    assert (empty / "ledger.json").is_file()


# ---- 4. check-consistency with OLD and NEW swapped -----------------------------------------------


def test_check_consistency_swapped_is_usage(ledger, keydir):
    cp3, cp6 = ledger.parent / "cp3.txt", ledger.parent / "cp6.txt"
    trust = ["--ledger", ledger, "--trust", keydir / "verifier.pub"]
    r = cli("check-consistency", cp3, cp6, *trust)
    assert r.returncode == 0 and r.stdout.startswith("CONSISTENT"), r.stdout + r.stderr
    line = _one_error_line(cli("check-consistency", cp6, cp3, *trust))
    assert "swapped" in line and f"check-consistency {cp3} {cp6}" in line
    assert cli("check-consistency", cp6, cp3, *trust, "--json").returncode == 2


# ---- 3. Ctrl-C
# ------------------------------------------------------------------------------------


# ---- 5. query formats ---------------------------------------------------------------------------

WIDE = "SELECT seq, ts_ns, digest, digest AS again, link FROM records ORDER BY seq LIMIT 3"


def _expected(ledger) -> list[dict]:
    from ledgertool.reconcile.query import run_query

    res = run_query(ledger, WIDE)
    return [
        {"seq": r[0], "ts_ns": r[1], "digest": r[2].hex(), "again": r[3].hex(), "link": r[4]}
        for r in res.rows
    ]


def test_query_piped_table_keeps_full_values(ledger):
    r = cli("query", ledger, WIDE)
    assert r.returncode == 0, r.stderr
    rows = _expected(ledger)
    for row in rows:
        line = next(ln for ln in r.stdout.splitlines() if f" {row['ts_ns']} " in ln)
        assert line.count(row["digest"]) == 2, line  # whole, twice: nothing cut at 80 columns
        assert "…" not in line
    assert len(r.stdout.splitlines()[0]) > 100  # wider than an 80-column terminal


def test_query_formats(ledger, tmp_path):
    rows = _expected(ledger)
    as_json = rows  # every integer a JSON number, as DuckDB writes it
    r = cli("query", ledger, WIDE, "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == as_json, r.stderr
    r = cli("query", ledger, WIDE, "--format", "jsonl")
    assert [json.loads(ln) for ln in r.stdout.splitlines()] == as_json
    r = cli("query", ledger, WIDE, "--format", "markdown")
    lines = r.stdout.splitlines()
    assert lines[:2] == [
        "| seq | ts_ns | digest | again | link |",
        "| --- | --- | --- | --- | --- |",
    ]
    assert (
        lines[2]
        == f"| 0 | {rows[0]['ts_ns']} | {rows[0]['digest']} | {rows[0]['digest']} | link0 |"
    )
    out = tmp_path / "q.csv"
    r = cli("query", ledger, WIDE, "--format", "csv", "--output", out)
    assert r.returncode == 0 and r.stdout == "" and f"wrote 3 rows to {out}" in r.stderr
    assert (
        out.read_text().splitlines()[1]
        == f"0,{rows[0]['ts_ns']},{rows[0]['digest']},{rows[0]['digest']},link0"
    )


def test_query_parquet(ledger, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "q.parquet"
    r = cli("query", ledger, WIDE, "--format", "parquet", "--output", out)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    t = pq.read_table(out)
    assert (
        t.schema.field("seq").type == pa.uint64() and t.schema.field("digest").type == pa.binary()
    )
    assert [
        {**d, "digest": d["digest"].hex(), "again": d["again"].hex()} for d in t.to_pylist()
    ] == _expected(ledger)
    line = _one_error_line(cli("query", ledger, WIDE, "--format", "parquet"))
    assert line == "ledgertool: error: --format parquet writes a file: give --output FILE.parquet"
    _one_error_line(cli("query", ledger, WIDE, "--json", "--format", "csv"))
    _one_error_line(cli("query", ledger, WIDE, "--output", tmp_path / "nodir" / "q.txt"))


# ---- 6. help
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cmd",
    [
        ["capture"],
        ["verify"],
        ["recompute"],
        ["query"],
        ["check-proof"],
        ["keys", "generate"],
        ["compact"],
        ["prune"],
    ],
)
def test_help_says_exit_codes_and_example(cmd):
    for flag in ("-h", "--help"):
        r = cli(*cmd, flag)
        assert r.returncode == 0, r.stderr
        assert (
            "Exit codes: 0 " in r.stdout
            and "\n  Example:\n    ledgertool " + " ".join(cmd) in r.stdout
        )
        assert "Reads: " in r.stdout and "Writes: " in r.stdout
        assert "<bool>" not in r.stdout and "{" not in r.stdout.splitlines()[0]
    assert r.stdout.startswith(f"Usage: ledgertool {' '.join(cmd)} [OPTIONS] ")


def test_capture_help_lists_algorithms_and_strip_modes():
    from ledgertool.algorithms import ALGORITHMS, STRIP_MODES
    from ledgertool.cli import helptext

    assert helptext.LEDGER_ALGORITHMS == tuple(n for n, a in ALGORITHMS.items() if a.ledger_ok)
    assert helptext.STRIP_MODES == tuple(STRIP_MODES)
    out = cli("capture", "--help").stdout
    flat = " ".join(out.split())  # the epilog's lines are wrapped at 78 columns
    assert f"Algorithms (new ledger): {', '.join(helptext.LEDGER_ALGORITHMS)}." in flat
    assert f"Strip modes (new ledger): {', '.join(helptext.STRIP_MODES)}." in flat
    assert "Usage: ledgertool capture [OPTIONS] SOURCE\n" in out


# ---- 7. small ones
# ----------------------------------------------------------------------------------


def test_zero_frame_capture_says_seq_none(tmp_path, keydir):
    import struct

    empty = tmp_path / "empty.pcap"
    # a header, no frame
    empty.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    r = cli("capture", empty, "--ledger", tmp_path / "L", *_keys(keydir))
    assert r.returncode == 0, r.stderr
    assert (
        "captured 0 frames (0 bytes)" in r.stdout and "segments none, seq none, drops 0" in r.stdout
    ), r.stdout
    assert "..-1" not in r.stdout
