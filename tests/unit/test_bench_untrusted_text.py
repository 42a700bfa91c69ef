"""`bench --from-csv` renders a CSV someone else wrote: its text fields reach the Markdown table
and the HTML dashboard as text, never as markup (no tag, attribute, link or extra row)."""

from __future__ import annotations

import csv
import re

from conftest import cli_in_process

from ledgertool.bench.rows import BenchRow, append_csv, markdown_table

HOSTILE = {
    "host": "<svg onload=alert(1)>",
    "cpu_model": "</div><script>alert(2)</script>",
    "cpu_path": "avx2 | injected | cells\n| x | <img src=x onerror=alert(3)> |",
    "algorithm": "[click](javascript:alert(4)) ![i](http://x/y.png) <b>bold</b> &amp;",
}


def _hostile_csv(path) -> None:
    append_csv(
        path,
        [BenchRow("digest", "siphash-2-4-128", 64, 1, 1000, 0.001, time="2026-01-01T00:00:00Z")],
    )
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    rows[0].update(HOSTILE)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_bench_markdown_from_csv_escapes_untrusted_fields(tmp_path, monkeypatch, capsys):
    _hostile_csv(tmp_path / "b.csv")
    code, _, err = cli_in_process(
        "bench",
        "--from-csv",
        tmp_path / "b.csv",
        "--markdown",
        tmp_path / "b.md",
        "--html",
        tmp_path / "b.html",
    )
    assert code == 0, err
    md = (tmp_path / "b.md").read_text()
    lines = md.splitlines()
    assert len(lines) == 3  # header, rule, one row: a field cannot add a row
    cells = re.split(r"(?<!\\)\|", lines[2])[1:-1]
    assert len(cells) == len(re.split(r"(?<!\\)\|", lines[0])[1:-1])  # nor a cell
    assert "<" not in md and ">" not in md
    from ledgertool.bench.rows import markdown_text

    assert "](" not in md.replace("\\](", "")  # no link or image syntax left
    assert cells[1].strip() == markdown_text(HOSTILE["algorithm"])
    assert "&amp;amp;" in cells[1]
    assert markdown_text("a|b") == "a\\|b" and markdown_text("x\ny") == "x y"


def test_bench_html_dashboard_escapes_untrusted_fields(tmp_path, monkeypatch, capsys):
    _hostile_csv(tmp_path / "b.csv")
    code, _, err = cli_in_process(
        "bench",
        "--from-csv",
        tmp_path / "b.csv",
        "--html",
        tmp_path / "b.html",
    )
    assert code == 0, err
    page = (tmp_path / "b.html").read_text()
    for bad in ("<svg onload", "<script", "<img", "<b>bold", "onerror=alert(3)>"):
        assert bad not in page, bad
    assert "&lt;svg onload=alert(1)&gt;" in page and "&lt;/div&gt;&lt;script&gt;" in page


def test_markdown_table_of_ordinary_rows_is_unchanged():
    rows = [BenchRow("capture:engine", "blake3-keyed-128", 1500, 2, 10_000, 0.01, cpu_path="avx2")]
    line = markdown_table(rows).splitlines()[2]
    assert line.startswith("| capture:engine | blake3-keyed-128 | avx2 | 1500 B | 2 | 1.00 |")
