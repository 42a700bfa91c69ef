"""End to end through the library and the CLI: capture -> verify -> recompute -> query, tampering,
appending, and the documented errors and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import SAMPLES, cli, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.digest.record import RECORD_FIXED
from ledgertool.ledger.segment import BLOCK_PREFIX, parse_open_segment
from ledgertool.reconcile.query import run_query
from ledgertool.reconcile.recompute import reconcile
from ledgertool.verify.ledger import verify_ledger

SAMPLE = SAMPLES / "sample.pcapng"
SAMPLE_PCAP = SAMPLES / "sample.pcap"


@pytest.fixture()
def ledger(tmp_path, built_ledger) -> Path:
    built = built_ledger(SAMPLE, segment_records=100)
    assert built.result.frames > 200 and len(built.result.segments) >= 3
    return built.copy_to(tmp_path / "ledger")


def frames_in(path: Path) -> int:
    from ledgertool.source.file import CaptureReader

    with CaptureReader(path) as r:
        return sum(1 for _ in r.frames())


def test_intact_ledger_verifies_recomputes_and_queries(ledger, keydir):
    dk, _, trust = load_keys(keydir)
    n = frames_in(SAMPLE)
    v = verify_ledger(ledger, trust)
    assert v.ok, v.problems
    assert v.records == n and v.segments == -(-n // 100)
    r = reconcile(SAMPLE, ledger, dk, trust=trust)
    assert (r.frames, r.matched, r.ledger_only, r.capture_only) == (n, n, 0, 0)
    rows = run_query(
        ledger, "SELECT count(*), min(seq), max(seq), count(DISTINCT segment) FROM records"
    ).rows
    assert rows[0] == (n, 0, n - 1, -(-n // 100))
    rows = run_query(ledger, "SELECT count(*), sum(records) FROM seals").rows
    assert rows[0] == (-(-n // 100), n)


def test_pcap_and_pcapng_of_same_frames_reconcile(ledger, keydir):
    dk, _, trust = load_keys(keydir)
    r = reconcile(SAMPLE_PCAP, ledger, dk, trust=trust)
    assert r.ok and r.matched == frames_in(SAMPLE)


def test_append_continues_chain_and_sequence(ledger, keydir):
    dk, sk, trust = load_keys(keydir)
    n = frames_in(SAMPLE)
    before = len(list(ledger.glob("link=link0/*.seal.json")))
    res = capture_file(SAMPLE_PCAP, ledger, digest_key=dk, signing_key=sk, segment_records=100)
    assert res.first_seq == n and res.next_seq == 2 * n
    assert res.segments[0].index == before
    v = verify_ledger(ledger, trust)
    assert v.ok, v.problems
    assert v.records == 2 * n
    r = reconcile(SAMPLE, ledger, dk, trust=trust)  # every frame is in the ledger twice now
    assert (r.matched, r.ledger_only, r.capture_only) == (n, n, 0)


def _rewrite_parquet(path: Path, mutate) -> None:
    t = pq.read_table(path)
    t = mutate(t)
    pq.write_table(t, path)


@pytest.mark.parametrize("ledger_format", [1, 2], ids=["v1", "v2"])
def test_modified_record_is_named(ledger_format, tmp_path, keydir):
    """Record 5's digest of segment 1 zeroed in the sealed file: v1, the Parquet file (which its
    seal pins by SHA-256 too); v2, the raw record file."""
    import pyarrow as pa

    dk, sk, trust = load_keys(keydir)
    ledger = tmp_path / "ledger"
    capture_file(
        SAMPLE,
        ledger,
        digest_key=dk,
        signing_key=sk,
        segment_records=100,
        ledger_format=ledger_format,
    )

    def flip(t):
        d = t.column("digest").to_pylist()
        d[5] = bytes(16)
        return t.set_column(
            t.schema.get_field_index("digest"), "digest", pa.array(d, pa.binary(16))
        )

    if ledger_format == 1:
        _rewrite_parquet(ledger / "link=link0" / "seg-00000001.parquet", flip)
    else:
        rec = ledger / "link=link0" / "seg-00000001.rec"
        raw = bytearray(rec.read_bytes())
        (block,) = parse_open_segment(bytes(raw), rec).blocks  # 100 records: one block
        at = block.offset + BLOCK_PREFIX + 5 * (RECORD_FIXED + 16) + RECORD_FIXED
        raw[at : at + 16] = bytes(16)
        rec.write_bytes(bytes(raw))
    v = verify_ledger(ledger, trust)
    kinds = {(p.kind, p.segment) for p in v.problems}
    assert ("merkle_mismatch", 1) in kinds
    assert (("parquet_hash_mismatch", 1) in kinds) == (ledger_format == 1)
    assert all(p.segment == 1 for p in v.problems)


def test_deleted_segment_is_named(ledger, keydir):
    _, _, trust = load_keys(keydir)
    # the seal and the records file, either form
    for p in (ledger / "link=link0").glob("seg-00000001.*"):
        p.unlink()
    v = verify_ledger(ledger, trust)
    kinds = {(p.kind, p.segment) for p in v.problems}
    assert ("segment_missing", 1) in kinds
    assert ("chain_broken", 2) in kinds and ("sequence_gap", 2) in kinds


def test_wrong_trust_key_fails_every_segment(ledger, other_keydir):
    _, _, other = load_keys(other_keydir)
    v = verify_ledger(ledger, other)
    bad = {p.segment for p in v.problems if p.kind == "bad_signature"}
    assert bad == set(range(v.segments)) and v.segments >= 3


def test_cli_exit_codes_and_json(ledger, keydir, other_keydir, tmp_path):
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["problems"] == [] and doc["records"] == frames_in(SAMPLE)

    r = cli("verify", ledger, "--trust", other_keydir / "verifier.pub")
    assert r.returncode == 1 and "bad_signature" in r.stdout and "segment 0" in r.stdout

    r = cli(
        "recompute",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--json",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["matched"] == frames_in(SAMPLE)

    r = cli(
        "recompute",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        other_keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 2 and "wrong key" in r.stderr and "Traceback" not in r.stderr

    r = cli(
        "query", ledger, "SELECT seq, digest FROM records ORDER BY seq LIMIT 2", "--format", "json"
    )
    rows = json.loads(r.stdout)
    assert [x["seq"] for x in rows] == [0, 1] and all(len(x["digest"]) == 32 for x in rows)

    out = tmp_path / "d.parquet"
    r = cli(
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
    )
    assert r.returncode == 0, r.stderr
    t = pq.read_table(out)
    assert t.num_rows == frames_in(SAMPLE) and t.column("index").to_pylist()[:3] == [0, 1, 2]


@pytest.mark.parametrize("case", ["missing", "not_capture", "empty", "directory"])
def test_bad_capture_inputs_exit_2_with_one_line(case, tmp_path, keydir):
    src = {
        "missing": tmp_path / "nope.pcap",
        "not_capture": tmp_path / "x.pcap",
        "empty": tmp_path / "e.pcap",
        "directory": tmp_path,
    }[case]
    if case == "not_capture":
        src.write_text("hello, this is not a capture\n")
    if case == "empty":
        src.write_bytes(b"")
    r = cli(
        "capture",
        src,
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(src) in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "L" / "ledger.json").exists()  # nothing half-made


def test_wrong_key_files_and_non_ledger_dir_exit_2(tmp_path, keydir):
    r = cli(
        "capture",
        SAMPLE,
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "verifier.pub",
        "--signing-key",
        keydir / "signing.key",
    )
    assert r.returncode == 2 and "verifier.pub" in r.stderr
    r = cli(
        "capture",
        SAMPLE,
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "digest.key",
    )
    assert r.returncode == 2 and "digest.key" in r.stderr
    r = cli("verify", tmp_path, "--trust", keydir / "verifier.pub")
    assert r.returncode == 2 and "not a ledger" in r.stderr
    r = cli("verify", tmp_path, "--trust", keydir / "signing.key")
    assert r.returncode == 2 and "signing.key" in r.stderr


def test_corrupt_capture_seals_frames_before_and_names_offset(tmp_path, keydir):
    data = bytearray(SAMPLE_PCAP.read_bytes())
    # Third record's caplen -> absurd: corrupt structure (not a mere cut at the end).
    off = 24
    for _ in range(2):
        caplen = int.from_bytes(data[off + 8 : off + 12], "little")
        off += 16 + caplen
    data[off + 8 : off + 12] = (0x7FFFFFF0).to_bytes(4, "little")
    bad = tmp_path / "corrupt.pcap"
    bad.write_bytes(bytes(data))
    r = cli(
        "capture",
        bad,
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    assert r.returncode == 2 and str(bad) in r.stderr and str(off) in r.stderr, r.stderr
    assert "2 frames before it were sealed" in r.stderr
    v = cli("verify", tmp_path / "L", "--trust", keydir / "verifier.pub", "--json")
    assert json.loads(v.stdout)["records"] == 2


def test_truncated_capture_keeps_whole_records_and_warns(tmp_path, keydir):
    data = SAMPLE_PCAP.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-5])
    r = cli(
        "capture",
        cut,
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["frames"] == frames_in(SAMPLE_PCAP) - 1
    assert any("truncated" in w for w in doc["warnings"]) and "truncated" in r.stderr


def test_demo_runs(tmp_path):
    r = cli("demo", "--workdir", tmp_path / "w", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] and doc["verify"]["ok"] and doc["recompute"]["matched"] == doc["frames"] > 200


def test_other_signing_key_is_refused_for_an_existing_ledger(ledger, keydir, other_keydir):
    r = cli(
        "capture",
        SAMPLE,
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        other_keydir / "signing.key",
    )
    assert r.returncode == 2 and "keys rotate" in r.stderr
    r = cli("recover", ledger, "--signing-key", other_keydir / "signing.key")
    assert r.returncode == 2
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub")
    assert r.returncode == 0, r.stdout  # nothing was rewritten with the wrong key


def test_demo_workdir_that_is_a_file_exits_2(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = cli("demo", "--workdir", f)
    assert r.returncode == 2 and "not a directory" in r.stderr and "Traceback" not in r.stderr


def test_query_json_nested_binary_and_repeated_columns(ledger):
    r = cli(
        "query",
        ledger,
        "SELECT list(digest ORDER BY seq)[1:2] AS d, 1 AS a, 2 AS a FROM records",
        "--format",
        "json",
    )
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["a"] == 1 and row["a_2"] == 2
    assert len(row["d"]) == 2 and all(len(x) == 32 and int(x, 16) >= 0 for x in row["d"])
