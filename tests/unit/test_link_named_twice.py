"""A link given twice with `--link` is exported once: `export` wrote every one of its segments
twice (twice the records in the dataset)."""

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
