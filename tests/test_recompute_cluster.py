"""recompute on a Dask cluster (issue 16): the report of a partitioned comparison on a real
LocalCluster of 2 worker processes equals the single-machine report, field for field, JSON and
--details file included, on a two-link ledger with ledger-only and capture-only frames."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from conftest import SAMPLES, load_keys, run_cli, run_killing_a_worker

distributed = pytest.importorskip("distributed")

from ledgertool.capture.run import capture_file  # noqa: E402
from ledgertool.digest.reference import read_pcap  # noqa: E402
from ledgertool.errors import DiscrepancyError, UsageError  # noqa: E402
from ledgertool.reconcile.cluster import plan_chunks, reconcile_on_cluster  # noqa: E402
from ledgertool.reconcile.recompute import reconcile  # noqa: E402
from ledgertool.verify.cluster import ClusterAddress, connect  # noqa: E402
from test_digest_rotation import captures, keys, pristine  # noqa: E402,F401  (the rotated ledger's fixtures)

SAMPLE = SAMPLES / "sample.pcap"


def write_pcap(path: Path, frames: list[tuple[int, int, bytes]]) -> None:
    """Classic ns pcap from (ts_ns, wire_len, bytes), written independently of the reader."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for ts, wire, data in frames:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), wire) + data)


@pytest.fixture(scope="module")
def client():
    with connect(ClusterAddress(local_workers=2)) as c:
        c.wait_for_workers(2, timeout=60)
        yield c


@pytest.fixture(scope="module")
def case(tmp_path_factory, keydir):
    """A two-link ledger of sample.pcap (link0 saw its first 150 frames, link1 the rest) and a
    capture that lost frames 3, 50, 51 and 200, has frame 100 changed, frame 10 twice and one frame
    more; it is also written as two files (its first 150 frames, the rest)."""
    d = tmp_path_factory.mktemp("rc")
    frames = [(ts, wire, data) for ts, _cap, wire, data in read_pcap(SAMPLE.read_bytes())]
    dk, sk, trust = load_keys(keydir)
    for link, part in (("link0", frames[:150]), ("link1", frames[150:])):
        write_pcap(d / f"{link}.pcap", part)
        capture_file(d / f"{link}.pcap", d / "ledger", digest_key=dk, signing_key=sk, link=link, segment_records=40)
    mod = []
    for i, (ts, wire, data) in enumerate(frames):
        if i in (3, 50, 51, 200):
            continue
        if i == 100:
            data = data[:20] + bytes([data[20] ^ 1]) + data[21:]
        mod.append((ts, wire, data))
        if i == 10:
            mod.append((ts + 1, wire, data))
    mod.append((frames[-1][0] + 1000, 60, bytes(range(60))))
    write_pcap(d / "b.pcap", mod)
    write_pcap(d / "b1.pcap", mod[:150])
    write_pcap(d / "b2.pcap", mod[150:])
    return d, dk, trust


def _same(want, got) -> None:
    a, b = want.to_json(), got.to_json()
    a.pop("elapsed_s"), b.pop("elapsed_s")
    assert json.dumps(b) == json.dumps(a)


def test_split_pcap_report_and_details_equal_single_machine(case, client, tmp_path):
    d, dk, trust = case
    details = tmp_path / "details.jsonl"
    want = reconcile(d / "b.pcap", d / "ledger", dk, trust=trust, details=details, examples=3)
    want_details = details.read_text()
    # ledger-only: frames 3, 50, 51, 100's original (link0) and 200 (link1); capture-only: 10's
    # copy, 100 changed, the added frame
    assert (want.ledger_only, want.capture_only, want.matched) == (5, 3, 294 - 5)
    assert [(p["link"], p["ledger_only"], p["capture_only"]) for p in want.per_link] == [
        ("link0", 4, 0), ("link1", 1, 0), (None, 0, 3)]
    chunks, stop = plan_chunks([d / "b.pcap"], split_bytes=4096)
    assert stop is None
    assert len(chunks) > 5 and chunks[0].start == 24 and all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    details.unlink()
    got = reconcile_on_cluster(client, d / "b.pcap", d / "ledger", dk, trust=trust, details=details,
                               examples=3, split_bytes=4096, parts=5)
    _same(want, got)
    assert details.read_text() == want_details and len(want_details.splitlines()) == 8


def test_many_captures_window_and_several_partitions(case, client):
    d, dk, trust = case
    frames = list(read_pcap((d / "b.pcap").read_bytes()))
    lo, hi = frames[20][0], frames[200][0]
    want = reconcile([d / "b1.pcap", d / "b2.pcap"], d / "ledger", dk, trust=trust, from_ns=lo, to_ns=hi,
                     tolerance_ns=10, links=["link1"])
    assert want.source == f"{d / 'b1.pcap'}, {d / 'b2.pcap'}" and (want.ledger_only, want.capture_only) == (1, 128)
    # capture-only: link0's 128 frames in the window (only link1 is reconciled)
    # the split capture on one machine is the same capture
    whole = reconcile(d / "b.pcap", d / "ledger", dk, trust=trust, from_ns=lo, to_ns=hi, tolerance_ns=10,
                      links=["link1"])
    assert whole.examples_capture_only == want.examples_capture_only and whole.per_second == want.per_second
    for parts in (1, 3, 64):
        got = reconcile_on_cluster(client, [d / "b1.pcap", d / "b2.pcap"], d / "ledger", dk, trust=trust,
                                   from_ns=lo, to_ns=hi, tolerance_ns=10, links=["link1"], parts=parts)
        _same(want, got)


def test_unverified_ledger_is_not_reconciled_on_the_cluster(case, client, tmp_path):
    d, dk, trust = case
    import shutil

    led = tmp_path / "ledger"
    shutil.copytree(d / "ledger", led)
    seal = led / "link=link0" / "seg-00000002.seal.json"
    doc = json.loads(seal.read_text())
    doc["frames"] += 1
    seal.write_text(json.dumps(doc))
    with pytest.raises(DiscrepancyError) as want:
        reconcile(d / "b.pcap", led, dk, trust=trust)
    with pytest.raises(DiscrepancyError) as got:
        reconcile_on_cluster(client, d / "b.pcap", led, dk, trust=trust)
    assert str(got.value) == str(want.value)
    got = reconcile_on_cluster(client, d / "b.pcap", d / "ledger", dk)  # no trust bundle: keyless checks only
    want = reconcile(d / "b.pcap", d / "ledger", dk)
    _same(want, got)
    assert not got.verified and "UNVERIFIED" in got.warnings[0]


def test_corrupt_and_truncated_captures_as_on_one_machine(case, client, tmp_path):
    d, dk, trust = case
    raw = (d / "b.pcap").read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(raw[:-7])  # the last record is cut: a warning, every whole frame reconciled
    want = reconcile(cut, d / "ledger", dk, trust=trust)
    for split in (4096, 1 << 30):
        _same(want, reconcile_on_cluster(client, cut, d / "ledger", dk, trust=trust, split_bytes=split))
    assert "truncated last record" in want.warnings[0]
    bad = tmp_path / "bad.pcap"
    at = 24
    for _ in range(100):  # record 100's header
        at += 16 + struct.unpack_from("<I", raw, at + 8)[0]
    bad.write_bytes(raw[:at + 8] + struct.pack("<I", 0x7FFFFFFF) + raw[at + 12:])  # an impossible length
    want = reconcile(bad, d / "ledger", dk, trust=trust)  # reconciled up to the corrupt record
    assert not want.complete and want.capture.stopped.offset == at and want.frames == 100
    for split in (4096, 1 << 30):
        _same(want, reconcile_on_cluster(client, bad, d / "ledger", dk, trust=trust, split_bytes=split))
    # a corrupt first capture ends the run there: the second is not read, on one machine or a cluster
    want = reconcile([bad, d / "b.pcap"], d / "ledger", dk, trust=trust)
    assert want.frames == 100 and want.capture.stopped.file == str(bad)
    for split in (4096, 1 << 30):
        _same(want, reconcile_on_cluster(client, [bad, d / "b.pcap"], d / "ledger", dk, trust=trust,
                                         split_bytes=split))


def test_one_digest_key_on_a_cluster(case, client, keydir):
    d, dk, trust = case
    with pytest.raises(UsageError, match="one digest key"):
        reconcile_on_cluster(client, d / "b.pcap", d / "ledger", [dk, dk], trust=trust)


def test_cli_cluster_output_details_and_exit_code_equal_single_machine(case, keydir, tmp_path):
    d, _, _ = case
    args = ["recompute", d / "b1.pcap", d / "b2.pcap", "--ledger", d / "ledger", "--digest-key", keydir / "digest.key",
            "--trust", keydir / "verifier.pub", "--details", tmp_path / "details.jsonl"]
    want = run_cli(*args)
    want_details = (tmp_path / "details.jsonl").read_text()
    got = run_cli(*args, "--cluster", "local:2")
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout) == (1, want.stdout)
    assert want.stdout.startswith(f"DIFFER: 292 frames recomputed from {d / 'b1.pcap'}, {d / 'b2.pcap'}, 294 frame")
    assert (tmp_path / "details.jsonl").read_text() == want_details and len(want_details.splitlines()) == 8
    one = run_cli("recompute", d / "b1.pcap", d / "b2.pcap", "--digest-key", keydir / "digest.key",
                  "--algorithm", "siphash-1-3-128", "--strip", "frame", "--out", tmp_path / "x.parquet")
    assert one.returncode == 2 and "one CAPTURE" in one.stderr


def test_worker_killed_mid_run_gives_the_right_answer_or_a_clear_error(tmp_path, keydir):
    """SIGKILL one of the two worker processes while the tasks run: Dask re-runs the lost tasks
    (and recomputes the partitions that lived on that worker), so the report is the
    single-machine one; if the cluster gave up, the run is a ClusterError, never a partial report."""
    dk, sk, trust = load_keys(keydir)
    capture_file(SAMPLE, tmp_path / "ledger", digest_key=dk, signing_key=sk, segment_records=2)  # 147 segments
    want = reconcile(SAMPLE, tmp_path / "ledger", dk, trust=trust)
    got = run_killing_a_worker(lambda c: reconcile_on_cluster(c, SAMPLE, tmp_path / "ledger", dk, trust=trust, parts=8), "tasks run")
    if "err" in got:
        assert "no report" in str(got["err"])
    else:
        _same(want, got["res"])
        assert want.ok and want.matched == 294


def test_one_key_of_a_rotated_ledger_partial_as_on_one_machine(pristine, keys, captures, client, tmp_path):
    """A ledger whose digest key was rotated, reconciled with one of its keys: the other key's
    segments are uncovered, and the frames sent again in the covered epoch pair with their covered
    copy (recompute's `away` order), on the cluster as on one machine."""
    det = tmp_path / "details.jsonl"
    for key in (keys["A"], keys["B"]):
        want = reconcile(captures["dir"] / "full.pcap", pristine, key, details=det, trust=keys["trust"])
        want_details = det.read_text()
        got = reconcile_on_cluster(client, captures["dir"] / "full.pcap", pristine, key, details=det,
                                   trust=keys["trust"], parts=3)
        _same(want, got)
        assert want.partial and det.read_text() == want_details and want.capture_only > 0


def test_item_v2_ledger_records_reach_the_partitions(case, client, keydir, tmp_path):
    """A v2 ledger's raw record files have no decoded table: the partition tasks still get the
    records verify checked (they were all capture-only before)."""
    d, dk, trust = case
    _, sk, _ = load_keys(keydir)
    led = tmp_path / "v2"
    capture_file(d / "link0.pcap", led, digest_key=dk, signing_key=sk, link="link0", segment_records=40,
                 ledger_format=2)
    assert list((led / "link=link0").glob("*.rec")) and not list((led / "link=link0").glob("*.parquet"))
    want = reconcile(d / "b1.pcap", led, dk, trust=trust)
    got = reconcile_on_cluster(client, d / "b1.pcap", led, dk, trust=trust, split_bytes=4096, parts=3)
    _same(want, got)
    # ledger-only: frames 3, 50, 51 and 100's original; capture-only: 10's copy, 100 changed and
    # the two frames of link1 at the end of b1.pcap
    assert (got.matched, got.ledger_only, got.capture_only) == (146, 4, 4)
