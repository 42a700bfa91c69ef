"""Reconciliation is exact: a ledger of capture A against A' (frames removed, added, duplicated,
one byte changed) reports exactly those counts and lists exactly those frames."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from conftest import SAMPLES, cli

from ledgertool.capture.run import capture_file
from ledgertool.digest.reference import read_pcap
from ledgertool.keyfiles import DigestKey, SigningKey, TrustBundle
from ledgertool.reconcile.recompute import reconcile

SAMPLE = SAMPLES / "sample.pcap"


def write_pcap(path: Path, frames: list[tuple[int, int, bytes]]) -> None:
    """Classic ns pcap from (ts_ns, wire_len, bytes) — written independently of the reader."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for ts, wire, data in frames:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), wire) + data)


@pytest.fixture(scope="module")
def base(tmp_path_factory, keydir):
    d = tmp_path_factory.mktemp("rec")
    frames = [(ts, wire, data) for ts, _cap, wire, data in read_pcap(SAMPLE.read_bytes())]
    a = d / "a.pcap"
    write_pcap(a, frames)
    dk = DigestKey.load(keydir / "digest.key")
    capture_file(
        a,
        d / "ledger",
        digest_key=dk,
        signing_key=SigningKey.load(keydir / "signing.key"),
        segment_records=64,
    )
    return d, frames, dk, TrustBundle.load(keydir / "verifier.pub")


def test_identical_capture_matches(base):
    d, frames, dk, trust = base
    r = reconcile(d / "a.pcap", d / "ledger", dk, trust=trust)
    assert (r.frames, r.matched, r.ledger_only, r.capture_only) == (len(frames), len(frames), 0, 0)


def test_removed_added_duplicated_and_changed_frames_are_exact(base, tmp_path):
    d, frames, dk, trust = base
    removed = {3, 50, 51}
    changed = 100
    mod = []
    for i, (ts, wire, data) in enumerate(frames):
        if i in removed:
            continue
        if i == changed:
            data = data[:20] + bytes([data[20] ^ 0x01]) + data[21:]
        mod.append((ts, wire, data))
        if i == 10:
            mod.append((ts + 1, wire, data))  # duplicate of frame 10
    added = (frames[-1][0] + 1000, 60, bytes(range(60)))
    mod.append(added)
    a2 = tmp_path / "a2.pcap"
    write_pcap(a2, mod)
    details = tmp_path / "details.jsonl"
    r = reconcile(a2, d / "ledger", dk, details=details, trust=trust)
    assert r.ledger_only == len(removed) + 1  # 3 removed + the original of the changed frame
    assert r.capture_only == 3  # duplicate, changed copy, added frame
    assert r.matched == len(frames) - len(removed) - 1
    assert sorted(e["seq"] for e in r.examples_ledger_only) == sorted(removed | {changed})
    rows = [json.loads(x) for x in details.read_text().splitlines()]
    # seq and ts_ns as decimal strings, exact (docs/cli.md#json-integers)
    assert sorted(int(x["seq"]) for x in rows if x["status"] == "ledger_only") == sorted(
        removed | {changed}
    )
    assert all(isinstance(x["ts_ns"], str) for x in rows)
    cap_only = sorted((x["index"], int(x["ts_ns"])) for x in rows if x["status"] == "capture_only")
    # Positions in A': frame 10's duplicate sits right after it; removed frames shift the rest.
    idx_changed = changed - len(removed) + 1
    assert cap_only == sorted(
        [
            (10 - 1 + 1, frames[10][0] + 1),
            (idx_changed, frames[changed][0]),
            (len(mod) - 1, added[0]),
        ]
    )
    assert all(x["summary"] for x in rows if x["status"] == "capture_only")
    assert sum(p["ledger_only"] for p in r.per_second) == r.ledger_only
    assert r.per_link[0]["link"] == "link0"


def test_time_window_and_tolerance(base, tmp_path):
    d, frames, dk, trust = base
    lo, hi = frames[20][0], frames[40][0]
    r = reconcile(d / "a.pcap", d / "ledger", dk, from_ns=lo, to_ns=hi, trust=trust)
    assert (r.matched, r.ledger_only, r.capture_only) == (20, 0, 0)
    # A second capture point sees every frame later, enough to push frame 39 past the window's
    # end: without tolerance the edges differ, with it every frame in the window pairs.
    shift = frames[40][0] - frames[39][0] + 1
    shifted = tmp_path / "shifted.pcap"
    write_pcap(shifted, [(ts + shift, w, b) for ts, w, b in frames])
    r = reconcile(shifted, d / "ledger", dk, from_ns=lo, to_ns=hi, trust=trust)
    assert not r.ok and r.ledger_only >= 1
    r = reconcile(shifted, d / "ledger", dk, from_ns=lo, to_ns=hi, tolerance_ns=shift, trust=trust)
    assert r.ok and r.matched == 20


def test_cli_recompute_reports_and_exit_codes(base, tmp_path, keydir):
    d, frames, _, trust = base
    cut = tmp_path / "cut.pcap"
    write_pcap(cut, frames[:-2])
    r = cli(
        "recompute",
        cut,
        "--ledger",
        d / "ledger",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--json",
        "--details",
        tmp_path / "d.jsonl",
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["ledger_only"], doc["capture_only"], doc["details_written"]) == (2, 0, 2)
    r = cli(
        "recompute",
        d / "a.pcap",
        "--ledger",
        d / "ledger",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--from",
        "2026-01-01T00:00:00",
        "--to",
        str(frames[10][0]),
    )
    assert r.returncode == 0 and "MATCH" in r.stdout
    r = cli(
        "recompute",
        d / "a.pcap",
        "--ledger",
        d / "ledger",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--from",
        "yesterday",
    )
    assert r.returncode == 2 and "--from" in r.stderr
    r = cli(
        "recompute",
        d / "a.pcap",
        "--ledger",
        d / "ledger",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--link",
        "nope",
    )
    assert r.returncode == 2 and "nope" in r.stderr


def test_duckdb_never_prints_a_progress_bar(base):
    # DuckDB draws its progress bar on stdout for long queries, which would break --json output.
    from ledgertool.reconcile.query import connect

    d, _, _, trust = base
    from ledgertool.reconcile.query import open_duckdb

    for con in (
        connect(d / "ledger", trust)[0],
        open_duckdb({"memory_limit": "1GB"}),
    ):  # query's and recompute's
        assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0] is False


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--from", "2026-01-01T00:00:01", "--to", "2026-01-01T00:00:00"], "empty time window"),
        (["--memory-limit", "lots"], "--memory-limit"),
        (["--details", "/nonexistent/dir/x.jsonl"], "/nonexistent/dir/x.jsonl"),
    ],
)
def test_recompute_bad_options_exit_2_with_one_line(base, keydir, args, needle):
    d, _, _, trust = base
    r = cli(
        "recompute",
        d / "a.pcap",
        "--ledger",
        d / "ledger",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        *args,
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and needle in lines[0], r.stderr


def test_recompute_refuses_a_changed_ledger(base, keydir, tmp_path):
    import shutil

    d, _, _, trust = base
    bad = tmp_path / "ledger"
    shutil.copytree(d / "ledger", bad)
    # segment 1's sealed records file, either form: v1's Parquet file (pinned by the seal) or v2's
    # raw record file
    (records,) = [
        p for p in (bad / "link=link0").glob("seg-00000001.*") if p.suffix in (".parquet", ".rec")
    ]
    records.write_bytes(b"garbage")
    finding = "parquet_hash_mismatch" if records.suffix == ".parquet" else "records_unreadable"
    r = cli(
        "recompute",
        d / "a.pcap",
        "--ledger",
        bad,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 1 and finding in r.stderr and "Traceback" not in r.stderr, r.stderr
