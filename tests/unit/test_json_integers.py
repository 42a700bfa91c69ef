"""One rule for integers in JSON (docs/cli.md#json-integers). Sequence numbers and
nanosecond timestamps, and in query results every 64-bit integer column, are decimal strings in
every JSON document (reports, query json/jsonl, proofs, recompute --details), so a seq above 2^53
comes back exactly in any JSON parser, also one that reads numbers as doubles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys

from ledgertool.algorithms import get_algorithm
from ledgertool.device.conformance import compute_records
from ledgertool.ledger.header import create_ledger
from ledgertool.ledger.writer import LinkWriter

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
BIG = 2**53 + 1  # the first integer a double cannot hold: float(BIG) == 2**53
SAFE = 2**53 - 1


def _numbers(doc) -> list[int]:
    """Every JSON integer in `doc`, at any depth."""
    if isinstance(doc, bool):
        return []
    if isinstance(doc, int):
        return [doc]
    if isinstance(doc, dict):
        return [n for v in doc.values() for n in _numbers(v)]
    if isinstance(doc, list):
        return [n for v in doc for n in _numbers(v)]
    return []


def _as_doubles(text: str):
    """`text` parsed as JavaScript or jq 1.6 would: every number a double."""
    return json.loads(text, parse_int=float)


def _assert_safe(text: str) -> None:
    """No integer in the document is beyond what a double holds exactly."""
    assert all(abs(n) <= SAFE for n in _numbers(json.loads(text))), text[:500]


@pytest.fixture(scope="module", params=[1, 2], ids=["v1", "v2"])
def big(request, tmp_path_factory, keydir) -> Path:
    """A ledger whose link starts at seq 2^53 + 1 (one segment of the sample's 294 records),
    written with the ledger's own writer: no real ledger gets there without 2^53 records first.
    Both ledger formats: a v1 seal's Parquet file and a v2 seal's record file."""
    dk, sk, _ = load_keys(keydir)
    alg = get_algorithm("siphash-1-3-128")
    led = tmp_path_factory.mktemp(f"big-v{request.param}") / "L"
    header = create_ledger(
        led,
        algorithm=alg.name,
        strip="frame",
        digest_key_id=dk.key_id(alg.name, alg.key_size),
        digest_size=alg.digest_size,
        version=request.param,
    )
    assert header.version == request.param
    w = LinkWriter.open(led, header, "link0", sk, source="records:big", segment_records=1000)
    try:
        w.next_seq = BIG
        w.room()
        w.append(compute_records(SAMPLE, dk, alg, "frame", BIG), 294)
        w.seal()
        w.drain()
        w.checkpoint()
    finally:
        w.close()
    return led


def test_prove_and_check_proof_keep_a_seq_above_2_53(big, keydir, tmp_path):
    seq = BIG + 7
    out = tmp_path / "p.json"
    r = cli("prove", big, "--seq", seq, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    _assert_safe(r.stdout)
    assert json.loads(r.stdout)["seq"] == str(seq) and _as_doubles(r.stdout)["seq"] == str(seq)
    proof = json.loads(out.read_text())
    assert proof["record"]["seq"] == str(seq) and proof["seal"]["first_seq"] == str(BIG)
    _assert_safe(out.read_text())
    r = cli("check-proof", out, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    _assert_safe(r.stdout)
    assert json.loads(r.stdout)["record"]["seq"] == str(seq)


def test_capture_report_keeps_a_seq_above_2_53(big, keydir, tmp_path):
    dk, _, _ = load_keys(keydir)
    f = tmp_path / "more.records"
    f.write_bytes(compute_records(SAMPLE, dk, get_algorithm("siphash-1-3-128"), "frame", BIG + 294))
    r = cli(
        "capture",
        f"records:{f}",
        "--ledger",
        big,
        "--signing-key",
        keydir / "signing.key",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    _assert_safe(r.stdout)
    rep = _as_doubles(r.stdout)
    assert (rep["first_seq"], rep["next_seq"]) == (str(BIG + 294), str(BIG + 588))
    # verify --json has counts (numbers, exact) and names the seq in its text: exact too
    r = cli("verify", big, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode == 1
    _assert_safe(r.stdout)
    doc = json.loads(r.stdout)
    assert (doc["records"], doc["segments"]) == (588, 2)
    assert [p["detail"] for p in doc["problems"] if p["kind"] == "sequence_gap"] == [
        f"segment 0 starts at seq {BIG}, expected 0 (+{BIG} records undeclared)"
    ]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, keydir) -> Path:
    led = tmp_path_factory.mktemp("plain") / "L"
    r = cli(
        "capture",
        SAMPLE,
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--segment-records",
        "100",
    )
    assert r.returncode == 0, r.stderr
    return led


def test_query_json_writes_every_integer_as_a_number_as_duckdb_does(ledger, keydir):
    """DuckDB's types decide: BIGINT (count(*)), UBIGINT (seq, ts_ns) and HUGEINT values are JSON
    numbers with their exact digits, as DuckDB's own JSON output writes them, at any depth."""
    import duckdb

    sql = (
        f"SELECT seq + {BIG} AS big, ts_ns, wire_len, [seq + {BIG}] AS l, {{'s': seq + {BIG}, 'w': "
        f"wire_len}} AS st, count(*) OVER () AS n, seq::HUGEINT AS h FROM records ORDER BY seq "
        "LIMIT 2"
    )
    want_ts = [
        int(x)
        for x in cli(
            "query", ledger, "SELECT ts_ns FROM records ORDER BY seq LIMIT 2", "--format", "csv"
        ).stdout.split()[1:]
    ]
    assert min(want_ts) > SAFE  # a nanosecond timestamp is past 2^53: exact only as an integer
    for fmt in ("json", "jsonl"):
        r = cli("query", ledger, sql, "--format", fmt, "--trust", keydir / "verifier.pub")
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        rows = json.loads(r.stdout) if fmt == "json" else [json.loads(ln) for ln in lines]
        assert [x["big"] for x in rows] == [BIG, BIG + 1]
        assert [x["ts_ns"] for x in rows] == want_ts
        assert [x["l"] for x in rows] == [[BIG], [BIG + 1]]
        assert [x["st"]["s"] for x in rows] == [BIG, BIG + 1]
        assert [x["n"] for x in rows] == [294, 294] and [x["h"] for x in rows] == [0, 1]
        assert all(type(x["wire_len"]) is int for x in rows)
    # the same values DuckDB's own JSON writer gives for a count
    (n,) = json.loads(
        cli(
            "query",
            ledger,
            "SELECT count(*) AS n FROM records",
            "--json",
            "--trust",
            keydir / "verifier.pub",
        ).stdout
    )
    duck = duckdb.sql("SELECT to_json({'n': 294::BIGINT})").fetchall()[0][0]
    assert n == json.loads(duck) == {"n": 294}


def test_recompute_report_and_details_carry_seq_and_ts_as_strings(ledger, keydir, tmp_path):
    data = SAMPLE.read_bytes()
    off, recs = 24, []
    while off < len(data):
        cap = int.from_bytes(data[off + 8 : off + 12], "little")
        recs.append(data[off : off + 16 + cap])
        off += 16 + cap
    short = tmp_path / "short.pcap"
    short.write_bytes(data[:24] + b"".join(recs[:10] + recs[11:]))
    details = tmp_path / "d.jsonl"
    lo = 1767225600000000001  # --from/--to in ns: past 2^53
    r = cli(
        "recompute",
        short,
        "--digest-key",
        keydir / "digest.key",
        "--ledger",
        ledger,
        "--trust",
        keydir / "verifier.pub",
        "--from",
        lo,
        "--to",
        2**62,
        "--details",
        details,
        "--json",
    )
    assert r.returncode == 1, r.stderr
    _assert_safe(r.stdout)
    rep = _as_doubles(r.stdout)
    (ex,) = rep["examples_ledger_only"]
    ts10 = cli(
        "query", ledger, "SELECT ts_ns FROM records WHERE seq = 10", "--format", "csv"
    ).stdout.split()[1]
    assert (ex["seq"], ex["ts_ns"]) == ("10", ts10) and int(ts10) > SAFE
    assert (rep["window"]["from_ns"], rep["window"]["to_ns"]) == (str(lo), str(2**62))
    (line,) = details.read_text().splitlines()
    _assert_safe(line)
    assert {k: _as_doubles(line)[k] for k in ("status", "seq", "ts_ns")} == {
        "status": "ledger_only",
        "seq": "10",
        "ts_ns": ts10,
    }
