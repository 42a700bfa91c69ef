"""`bench --from-csv` with a line that has fewer or more fields than the header (a CSV cut short,
or two files pasted together): one line naming the file, the line and both counts, exit 2, not
Python's "float() argument must be ... not 'NoneType'"."""

from __future__ import annotations

import pytest
from conftest import cli

from ledgertool.bench.rows import CSV_FIELDS

ROW = {
    "time": "2026-11-30T12:38:39+00:00", "host": "vm", "cpu_model": "cpu", "cpu_path": "avx512-mb",
    "cores": "2", "benchmark": "digest", "algorithm": "siphash-1-3-128", "size": "64",
    "threads": "1", "frames": "1000", "repeats": "3", "seconds": "0.001",
    "frames_per_s": "1000000.0", "gbit_per_s": "0.512", "ns_per_frame": "1000.0", "cv": "0.01",
    "noisy": "false", "tsc_ghz": "2.0", "cycles_per_frame": "2000.0", "cycles_per_byte": "31.25",
}  # fmt: skip


def _line(cut: int = 0, extra: int = 0) -> str:
    vals = [ROW.get(c, "") for c in CSV_FIELDS]
    vals = vals[: len(vals) - cut] + ["x"] * extra
    return ",".join(vals)


def test_a_whole_line_reads(tmp_path):
    p = tmp_path / "b.csv"
    p.write_text(",".join(CSV_FIELDS) + "\n" + _line() + "\n")
    r = cli("bench", "--from-csv", p, "--json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(("cut", "extra"), [(16, 0), (1, 0), (0, 2)])
def test_a_short_or_long_line_is_named(tmp_path, cut, extra):
    p = tmp_path / "b.csv"
    p.write_text(",".join(CSV_FIELDS) + "\n" + _line() + "\n" + _line(cut, extra) + "\n")
    r = cli("bench", "--from-csv", p)
    n = len(CSV_FIELDS)
    assert r.returncode == 2
    assert r.stderr == (
        f"ledgertool: error: {p}: line 3: {n - cut + extra} fields, the header has {n}\n"
    ), r.stderr
