"""A link given twice with `--link` is exported and compacted once: `export` wrote every one of
its segments twice (twice the records in the dataset) and `compact` counted each segment twice."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from conftest import cli


def test_export_writes_a_link_named_twice_once(sample_ledger, keydir, tmp_path):
    out = tmp_path / "out"
    r = cli("export", sample_ledger, out, "--trust", keydir / "verifier.pub", "--json",
            "--link", "link0", "--link", "link0")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["rows"], doc["files"], doc["links"]) == (294, 3, ["link0"])
    assert sorted(p.name for p in out.iterdir()) == [f"part-{i:08d}.parquet" for i in range(3)]
    assert sum(pq.read_metadata(p).num_rows for p in out.iterdir()) == 294


def test_compact_counts_a_link_named_twice_once(sample_ledger):
    args = ("compact", sample_ledger, "--json", "--link", "link0", "--link", "link0")
    first = json.loads(cli(*args).stdout)
    assert (first["segments_compacted"], first["records"], first["already_parquet"]) == (3, 294, 0)
    again = json.loads(cli(*args).stdout)
    assert (again["segments_compacted"], again["records"], again["already_parquet"]) == (0, 0, 3)
