"""Working with other tools: `ledgertool export` writes a verified ledger as a Parquet
dataset that DuckDB, pyarrow and polars read correctly with the one line docs/interop.md gives
(link a real string column, a UTC timestamp beside ts_ns, seq int64, only Parquet files)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import jsonschema
import numpy as np
import polars
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from conftest import REPO, SAMPLES, cli

LINKS = ("0042", "0007")  # links that look like integers: hive inference turns them into 42 and 7


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, keydir) -> Path:
    """The sample captured into two links, 3 segments each (100, 100, 94 records)."""
    led = tmp_path_factory.mktemp("export") / "L"
    for link in LINKS:
        r = cli(
            "capture",
            SAMPLES / "sample.pcapng",
            "--ledger",
            led,
            "--link",
            link,
            "--digest-key",
            keydir / "digest.key",
            "--signing-key",
            keydir / "signing.key",
            "--segment-records",
            "100",
        )
        assert r.returncode == 0, r.stderr
    return led


@pytest.fixture(scope="module", params=["v1", "v2"])
def own_parquet(request, ledger, keydir, tmp_path_factory) -> Path:
    """`ledger` with its sealed segments as Parquet files, the form engines read in place: v1, as
    captured (`--ledger-format v1`); v2, after `ledgertool compact` (a capture writes raw record
    files, seg-N.rec)."""
    led = tmp_path_factory.mktemp("own") / "L"
    if request.param == "v2":
        shutil.copytree(ledger, led)
        r = cli("compact", led)
        assert r.returncode == 0, r.stderr
        assert (
            not list(led.glob("link=*/seg-*.rec"))
            and len(list(led.glob("link=*/seg-*.parquet"))) == 6
        )
        return led
    for link in LINKS:
        r = cli(
            "capture",
            SAMPLES / "sample.pcapng",
            "--ledger",
            led,
            "--link",
            link,
            "--digest-key",
            keydir / "digest.key",
            "--signing-key",
            keydir / "signing.key",
            "--segment-records",
            "100",
            "--ledger-format",
            "v1",
        )
        assert r.returncode == 0, r.stderr
    return led


def _verified_records(led: Path, keydir: Path) -> list[dict]:
    r = cli(
        "query",
        led,
        "SELECT link, seq, ts_ns, flags, digest FROM records ORDER BY link, seq",
        "--format",
        "jsonl",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 0, r.stderr
    rows = [json.loads(ln) for ln in r.stdout.splitlines()]
    return rows  # every integer a JSON number, as DuckDB writes it


@pytest.fixture(scope="module")
def exported(ledger, keydir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("exported") / "out"
    r = cli("export", ledger, out, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(
        doc, json.loads((REPO / "schemas" / "export-report.schema.json").read_text())
    )
    assert doc == {
        "ok": True,
        "out": str(out),
        "files": 6,
        "rows": 588,
        "links": sorted(LINKS),
        "signatures_checked": True,
    }
    assert r.stderr == ""
    return out


def _rows(seq, link, ts, ts_ns, digest) -> list[tuple]:
    return sorted(zip(link, seq, ts, ts_ns, digest))


def test_ledger_directory_is_misread_by_engines(own_parquet):
    """What the export is for: read as a hive dataset, the ledger's links become integers, and the
    directory itself is refused because it holds files that are not Parquet."""
    ledger = own_parquet
    t = ds.dataset(
        ledger, format="parquet", partitioning="hive", exclude_invalid_files=True
    ).to_table()
    assert t.schema.field("link").type == pa.int32() and sorted(
        set(t.column("link").to_pylist())
    ) == [7, 42]
    with pytest.raises(pa.ArrowInvalid):
        pq.read_table(ledger)
    assert sorted(
        polars.read_parquet(f"{ledger}/link=*/seg-*.parquet", hive_partitioning=True)["link"]
        .unique()
        .to_list()
    ) == [7, 42]


def test_export_reads_the_same_in_duckdb_pyarrow_and_polars(exported, ledger, keydir):
    want = _verified_records(ledger, keydir)
    assert {r["link"] for r in want} == set(LINKS) and len(want) == 588
    assert sorted(p.name for p in exported.iterdir()) == [f"part-{i:08d}.parquet" for i in range(6)]
    expect = sorted(
        (r["link"], r["seq"], r["ts_ns"] // 1000, r["ts_ns"], r["digest"]) for r in want
    )
    epoch = np.datetime64(0, "us")

    # the documented one-liners (docs/interop.md)
    t = ds.dataset(exported).to_table()
    assert t.schema.field("link").type == pa.string() and t.schema.field("seq").type == pa.int64()
    assert t.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    ts_us = [
        (v - epoch) // np.timedelta64(1, "us")
        for v in t.column("ts").to_numpy(zero_copy_only=False)
    ]
    got = _rows(
        t.column("seq").to_pylist(),
        t.column("link").to_pylist(),
        ts_us,
        t.column("ts_ns").to_pylist(),
        [d.hex() for d in t.column("digest").to_pylist()],
    )
    assert got == expect

    df = polars.read_parquet(exported)
    assert df.schema["link"] == polars.String and df.schema["seq"] == polars.Int64
    assert df.schema["ts"] == polars.Datetime("us", "UTC")
    got = _rows(
        df["seq"].to_list(),
        df["link"].to_list(),
        df["ts"].dt.epoch("us").to_list(),
        df["ts_ns"].to_list(),
        [d.hex() for d in df["digest"].to_list()],
    )
    assert got == expect

    con = duckdb.connect()
    rel = con.sql(
        "SELECT link, seq, epoch_us(ts), ts_ns, hex(digest), typeof(link), typeof(seq), "
        f"typeof(ts) FROM read_parquet('{exported}/*.parquet')"
    )
    rows = rel.fetchall()
    assert {r[5:] for r in rows} == {("VARCHAR", "BIGINT", "TIMESTAMP WITH TIME ZONE")}
    assert sorted((r[0], r[1], r[2], r[3], r[4].lower()) for r in rows) == expect


def test_duckdb_reads_the_ledgers_own_files_with_link_as_text(own_parquet, keydir):
    """The documented direct read of DIR/link=*/seg-*.parquet (unverified bytes) keeps `link`
    text."""
    ledger = own_parquet
    rows = duckdb.sql(
        f"SELECT link, seq FROM read_parquet('{ledger}/link=*/seg-*.parquet', hive_partitioning = "
        "true, hive_types = {'link': VARCHAR}) ORDER BY link, seq"
    ).fetchall()
    assert len(rows) == 588 and rows == [
        (r["link"], r["seq"]) for r in _verified_records(ledger, keydir)
    ]


def test_export_refuses_what_does_not_verify(ledger, keydir, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(ledger, bad)
    seg = bad / "link=0042" / "seg-00000001.rec"  # the raw record file a v2 capture seals
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 1
    seg.write_bytes(bytes(data))
    out = tmp_path / "out"
    r = cli("export", bad, out, "--trust", keydir / "verifier.pub")
    assert r.returncode == 1, r.stderr
    assert "the ledger does not verify, so it is not exported: link 0042 segment 1" in r.stderr
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == [
        "bad"
    ]  # no stage left either
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    r = cli("export", ledger, tmp_path / "full")
    assert r.returncode == 2 and "full: exists and is not an empty directory" in r.stderr, r.stderr
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["x"]


def test_export_one_link_into_an_empty_directory(ledger, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    r = cli("export", ledger, out, "--link", "0007")
    assert r.returncode == 0, r.stderr
    assert "UNVERIFIED: no --trust given" in r.stderr
    assert r.stdout == f"exported 294 records of 1 link in 3 Parquet files to {out}\n"
    t = ds.dataset(out).to_table()
    assert set(t.column("link").to_pylist()) == {"0007"} and t.column("seq").to_pylist() == list(
        range(294)
    )


def test_export_refuses_seq_past_int64_and_nulls_ts_without_time():
    from ledgertool.digest.record import FLAG_GAP, FLAG_NO_TIMESTAMP
    from ledgertool.errors import DataError
    from ledgertool.reconcile.export import export_table
    from ledgertool.verify.ledger import VerifiedSegment

    def seg(seqs, flags):
        n = len(seqs)
        t = pa.table(
            {
                "segment": pa.array([3] * n, pa.uint32()),
                "seq": pa.array(seqs, pa.uint64()),
                "ts_ns": pa.array([1767225600123456789] * n, pa.int64()),
                "wire_len": pa.array([60] * n, pa.uint32()),
                "cap_len": pa.array([60] * n, pa.uint32()),
                "flags": pa.array(flags, pa.uint16()),
                "linktype": pa.array([1] * n, pa.uint16()),
                "aux": pa.array([0] * n, pa.uint32()),
                "digest": pa.array([b"\0" * 16] * n, pa.binary(16)),
            }
        )
        return VerifiedSegment("link0", 3, {}, t, b"")

    t = export_table(seg([2**63 - 2, 2**63 - 1, 5], [0, FLAG_GAP, FLAG_NO_TIMESTAMP]))
    assert t.column("seq").to_pylist() == [2**63 - 2, 2**63 - 1, 5]
    assert t.column("ts").cast(pa.int64()).to_pylist() == [1767225600123456, None, None]
    with pytest.raises(
        DataError,
        match=r"^link link0 segment 3: seq 9223372036854775808 does not fit a signed "
        r"64-bit integer",
    ):
        export_table(seg([2**63 - 1, 2**63], [0, 0]))


def test_spark_reads_the_export(exported, ledger, keydir):
    """The documented Spark line, where PySpark and a Java runtime are installed (not in the test
    extra: ~400 MB and a JVM); checked by hand with PySpark 4.3.0 on OpenJDK 17."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    if not shutil.which("java"):
        pytest.skip("no Java runtime for PySpark")
    spark = (
        pyspark_sql.SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    try:
        df = spark.read.parquet(str(exported))
        types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        assert (types["link"], types["seq"], types["ts"], types["ts_ns"]) == (
            "string",
            "bigint",
            "timestamp",
            "bigint",
        )
        got = sorted(
            (r["link"], r["seq"], r["ts_ns"]) for r in df.select("link", "seq", "ts_ns").collect()
        )
        assert got == sorted(
            (r["link"], r["seq"], r["ts_ns"]) for r in _verified_records(ledger, keydir)
        )
    finally:
        spark.stop()
