"""recompute on a Dask cluster: the report of a partitioned comparison on a real
LocalCluster of 2 worker processes equals the single-machine report, field for field, JSON and
--details file included, on a two-link ledger with ledger-only and capture-only frames; so does
the fast verdict's (a multiset hash of each side, docs/adr/0011), which decides an agreeing
capture without partitions and sends every other one to the partitioned pairing (`exact`: that
pairing only)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, cli, load_keys, run_killing_a_worker

distributed = pytest.importorskip("distributed")

from test_digest_rotation import captures, keys, pristine  # noqa: E402,F401  (the rotated ledger's fixtures)
from test_recompute_fast import PCAP, _edit, _renumber, _write, base  # noqa: E402,F401  (v2 ledgers of edits)

from ledgertool.capture.run import capture_file  # noqa: E402
from ledgertool.digest.record import FLAG_GAP  # noqa: E402
from ledgertool.digest.reference import read_pcap  # noqa: E402
from ledgertool.errors import DiscrepancyError, UsageError  # noqa: E402
from ledgertool.reconcile import cluster as rcl  # noqa: E402
from ledgertool.reconcile.cluster import plan_chunks, reconcile_on_cluster  # noqa: E402
from ledgertool.reconcile.msethash import accelerated  # noqa: E402
from ledgertool.reconcile.recompute import reconcile  # noqa: E402
from ledgertool.verify.cluster import ClusterAddress, connect  # noqa: E402

SAMPLE = SAMPLES / "sample.pcap"
# the LocalClusters' workers run on this CPU: without AES instructions there is no fast verdict
# (the portable AES is slower than pairing) and every run pairs, the reports still compared
FAST = accelerated()


def write_pcap(path: Path, frames: list[tuple[int, int, bytes]]) -> None:
    """Classic ns pcap from (ts_ns, wire_len, bytes), written independently of the reader."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
        for ts, wire, data in frames:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), wire) + data)


@pytest.fixture(scope="module")
def client():
    with connect(ClusterAddress(local_workers=2)) as c:
        c.wait_for_workers(2)
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
        capture_file(
            d / f"{link}.pcap",
            d / "ledger",
            digest_key=dk,
            signing_key=sk,
            link=link,
            segment_records=40,
        )
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
        ("link0", 4, 0),
        ("link1", 1, 0),
        (None, 0, 3),
    ]
    chunks, stop = plan_chunks([d / "b.pcap"], split_bytes=4096)
    assert stop is None
    assert (
        len(chunks) > 5
        and chunks[0].start == 24
        and all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    )
    details.unlink()
    got = reconcile_on_cluster(
        client,
        d / "b.pcap",
        d / "ledger",
        dk,
        trust=trust,
        details=details,
        examples=3,
        split_bytes=4096,
        parts=5,
    )
    _same(want, got)
    assert details.read_text() == want_details and len(want_details.splitlines()) == 8


def test_many_captures_window_and_several_partitions(case, client):
    d, dk, trust = case
    frames = list(read_pcap((d / "b.pcap").read_bytes()))
    lo, hi = frames[20][0], frames[200][0]
    want = reconcile(
        [d / "b1.pcap", d / "b2.pcap"],
        d / "ledger",
        dk,
        trust=trust,
        from_ns=lo,
        to_ns=hi,
        tolerance_ns=10,
        links=["link1"],
    )
    assert want.source == f"{d / 'b1.pcap'}, {d / 'b2.pcap'}" and (
        want.ledger_only,
        want.capture_only,
    ) == (1, 128)
    # capture-only: link0's 128 frames in the window (only link1 is reconciled)
    # the split capture on one machine is the same capture
    whole = reconcile(
        d / "b.pcap",
        d / "ledger",
        dk,
        trust=trust,
        from_ns=lo,
        to_ns=hi,
        tolerance_ns=10,
        links=["link1"],
    )
    assert (
        whole.examples_capture_only == want.examples_capture_only
        and whole.per_second == want.per_second
    )
    for parts in (1, 3, 64):
        got = reconcile_on_cluster(
            client,
            [d / "b1.pcap", d / "b2.pcap"],
            d / "ledger",
            dk,
            trust=trust,
            from_ns=lo,
            to_ns=hi,
            tolerance_ns=10,
            links=["link1"],
            parts=parts,
        )
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
    # no trust bundle: keyless checks only
    got = reconcile_on_cluster(client, d / "b.pcap", d / "ledger", dk)
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
        _same(
            want,
            reconcile_on_cluster(client, cut, d / "ledger", dk, trust=trust, split_bytes=split),
        )
    assert "truncated last record" in want.warnings[0]
    bad = tmp_path / "bad.pcap"
    at = 24
    for _ in range(100):  # record 100's header
        at += 16 + struct.unpack_from("<I", raw, at + 8)[0]
    # an impossible length
    bad.write_bytes(raw[: at + 8] + struct.pack("<I", 0x7FFFFFFF) + raw[at + 12 :])
    want = reconcile(bad, d / "ledger", dk, trust=trust)  # reconciled up to the corrupt record
    assert not want.complete and want.capture.stopped.offset == at and want.frames == 100
    for split in (4096, 1 << 30):
        _same(
            want,
            reconcile_on_cluster(client, bad, d / "ledger", dk, trust=trust, split_bytes=split),
        )
    # a corrupt first capture ends the run there: the second is not read, on one machine or a
    # cluster
    want = reconcile([bad, d / "b.pcap"], d / "ledger", dk, trust=trust)
    assert want.frames == 100 and want.capture.stopped.file == str(bad)
    for split in (4096, 1 << 30):
        _same(
            want,
            reconcile_on_cluster(
                client, [bad, d / "b.pcap"], d / "ledger", dk, trust=trust, split_bytes=split
            ),
        )


def test_one_digest_key_on_a_cluster(case, client, keydir):
    d, dk, trust = case
    with pytest.raises(UsageError, match="one digest key"):
        reconcile_on_cluster(client, d / "b.pcap", d / "ledger", [dk, dk], trust=trust)


def test_cli_cluster_output_details_and_exit_code_equal_single_machine(case, keydir, tmp_path):
    d, _, _ = case
    args = [
        "recompute",
        d / "b1.pcap",
        d / "b2.pcap",
        "--ledger",
        d / "ledger",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--details",
        tmp_path / "details.jsonl",
    ]
    want = cli(*args)
    want_details = (tmp_path / "details.jsonl").read_text()
    got = cli(*args, "--cluster", "local:2")
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout) == (1, want.stdout)
    assert want.stdout.startswith(
        f"DIFFER: 292 frames recomputed from {d / 'b1.pcap'}, {d / 'b2.pcap'}, 294 frame"
    )
    assert (tmp_path / "details.jsonl").read_text() == want_details and len(
        want_details.splitlines()
    ) == 8
    one = cli(
        "recompute",
        d / "b1.pcap",
        d / "b2.pcap",
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
        "--out",
        tmp_path / "x.parquet",
    )
    assert one.returncode == 2 and "one CAPTURE" in one.stderr


@pytest.mark.parametrize("exact", [False, True])
def test_worker_killed_mid_run_gives_the_right_answer_or_a_clear_error(tmp_path, keydir, exact):
    """SIGKILL one of the two worker processes while the tasks run (the capture agrees: the kill
    lands in the fast verdict's tasks, or with `exact` in the partitioned pairing's): Dask
    re-runs the lost tasks (and recomputes the partitions that lived on that worker), so the
    report is the single-machine one; if the cluster gave up, the run is a ClusterError, never a
    partial report."""
    dk, sk, trust = load_keys(keydir)
    # 147 segments
    capture_file(SAMPLE, tmp_path / "ledger", digest_key=dk, signing_key=sk, segment_records=2)
    want = reconcile(SAMPLE, tmp_path / "ledger", dk, trust=trust)
    got = run_killing_a_worker(
        lambda c: reconcile_on_cluster(
            c, SAMPLE, tmp_path / "ledger", dk, trust=trust, parts=8, split_bytes=4096, exact=exact
        ),
        "tasks run",
    )
    if "err" in got:
        assert "no report" in str(got["err"]) or "no verdict" in str(got["err"])
    else:
        _same(want, got["res"])
        assert want.ok and want.matched == 294


def test_one_key_of_a_rotated_ledger_partial_as_on_one_machine(
    pristine, keys, captures, client, tmp_path
):
    """A ledger whose digest key was rotated, reconciled with one of its keys: the other key's
    segments are uncovered, and the frames sent again in the covered epoch pair with their covered
    copy (recompute's `away` order), on the cluster as on one machine."""
    det = tmp_path / "details.jsonl"
    for key in (keys["A"], keys["B"]):
        want = reconcile(
            captures["dir"] / "full.pcap", pristine, key, details=det, trust=keys["trust"]
        )
        want_details = det.read_text()
        got = reconcile_on_cluster(
            client,
            captures["dir"] / "full.pcap",
            pristine,
            key,
            details=det,
            trust=keys["trust"],
            parts=3,
        )
        _same(want, got)
        assert want.partial and det.read_text() == want_details and want.capture_only > 0


def test_v2_ledger_records_reach_the_partitions(case, client, keydir, tmp_path):
    """A v2 ledger's raw record files have no decoded table: the partition tasks still get the
    records verify checked (they were all capture-only before)."""
    d, dk, trust = case
    _, sk, _ = load_keys(keydir)
    led = tmp_path / "v2"
    capture_file(
        d / "link0.pcap",
        led,
        digest_key=dk,
        signing_key=sk,
        link="link0",
        segment_records=40,
        ledger_format=2,
    )
    assert list((led / "link=link0").glob("*.rec")) and not list(
        (led / "link=link0").glob("*.parquet")
    )
    want = reconcile(d / "b1.pcap", led, dk, trust=trust)
    got = reconcile_on_cluster(
        client, d / "b1.pcap", led, dk, trust=trust, split_bytes=4096, parts=3
    )
    _same(want, got)
    # ledger-only: frames 3, 50, 51 and 100's original; capture-only: 10's copy, 100 changed and
    # the two frames of link1 at the end of b1.pcap
    assert (got.matched, got.ledger_only, got.capture_only) == (146, 4, 4)


def _spy(client, monkeypatch) -> list[tuple[str, str, tuple]]:
    """Every task submitted to `client` from now on: (function name, task key, arguments)."""
    seen = []
    real = client.submit

    def submit(fn, *args, **kw):
        f = real(fn, *args, **kw)
        seen.append((getattr(fn, "__name__", repr(fn)), str(f.key), args))
        return f

    monkeypatch.setattr(client, "submit", submit)
    return seen


def _ran(seen) -> set[str]:
    return {name for name, _, _ in seen}


def test_agreeing_captures_are_decided_without_partitions(case, client, tmp_path, monkeypatch):
    """link0.pcap and link1.pcap are the ledger's frames: the fast verdict decides (no capture
    record is partitioned, no partition paired), and its report is the single-machine one and the
    exact cluster pairing's, whole or cut into chunks, with the trust bundle or keyless, and for
    one link; --details is the empty file one machine writes."""
    d, dk, trust = case
    caps = [d / "link0.pcap", d / "link1.pcap"]
    details = tmp_path / "details.jsonl"
    for kw in ({"trust": trust}, {}, {"trust": trust, "links": ["link1"]}):
        cap = caps if "links" not in kw else [d / "link1.pcap"]
        want = reconcile(cap, d / "ledger", dk, details=details, **kw)
        assert (
            details.read_bytes() == b""
            and want.matches
            and want.matched == want.frames == (294 if "links" not in kw else 144)
        )
        assert want.verified == ("trust" in kw)
        for split in (4096, 1 << 30):
            details.write_text("old\n")
            seen = _spy(client, monkeypatch)
            got = reconcile_on_cluster(
                client, cap, d / "ledger", dk, details=details, split_bytes=split, **kw
            )
            monkeypatch.undo()
            _same(want, got)
            assert details.read_bytes() == b""
            if FAST:
                assert {"check_and_hash", "hash_chunk"} <= _ran(seen)
                assert not {"check_and_split", "digest_chunk", "tally_partition"} & _ran(seen)
                assert (split == 4096) == (sum(n == "hash_chunk" for n, _, _ in seen) > 2)
            else:
                assert "tally_partition" in _ran(seen) and not {
                    "check_and_hash",
                    "hash_chunk",
                } & _ran(seen)
        seen = _spy(client, monkeypatch)
        details.write_text("old\n")
        _same(
            want,
            reconcile_on_cluster(client, cap, d / "ledger", dk, exact=True, details=details, **kw),
        )
        assert details.read_bytes() == b""
        monkeypatch.undo()
        assert "tally_partition" in _ran(seen) and not {"check_and_hash", "hash_chunk"} & _ran(seen)


def test_a_differing_capture_is_paired_from_the_start(case, client, tmp_path, monkeypatch):
    """b.pcap differs from the ledger: the fast verdict decides nothing, and the partitioned
    pairing, reading both sides again, gives the report and --details of one machine."""
    d, dk, trust = case
    details = tmp_path / "details.jsonl"
    want = reconcile(d / "b.pcap", d / "ledger", dk, trust=trust, details=details)
    want_details = details.read_text()
    seen = _spy(client, monkeypatch)
    got = reconcile_on_cluster(
        client, d / "b.pcap", d / "ledger", dk, trust=trust, details=details, split_bytes=4096
    )
    monkeypatch.undo()
    _same(want, got)
    assert details.read_text() == want_details and not got.ok
    names = [n for n, _, _ in seen]
    if not FAST:
        assert not {"check_and_hash", "hash_chunk"} & set(names)
        return
    # the fast pass first (all its tasks), then the pairing from the start: the ledger checked again
    assert names.index("check_and_split") > max(
        i for i, n in enumerate(names) if n in ("check_and_hash", "hash_chunk")
    )
    assert {"digest_chunk", "tally_partition"} <= set(names)


@pytest.mark.skipif(not FAST, reason="no AES instructions: no fast verdict, no hash key")
def test_the_hash_key_is_an_argument_never_in_a_task_key(case, client, monkeypatch):
    """The multiset hash key reaches the workers as an argument of their tasks only: task keys
    (and names) are on the dashboard, and whoever knows the key could make two different ledgers
    hash alike. It is drawn afresh for every run and is not in the report."""
    d, dk, trust = case
    mkey = bytes.fromhex("8f1e2d3c4b5a69788796a5b4c3d2e1f0")
    drawn = []
    monkeypatch.setattr(rcl, "new_key", lambda: drawn.append(1) or mkey)
    seen = _spy(client, monkeypatch)
    for cap in ([d / "link0.pcap", d / "link1.pcap"], d / "b.pcap"):  # decided, and not
        res = reconcile_on_cluster(client, cap, d / "ledger", dk, trust=trust, split_bytes=4096)
        assert mkey.hex() not in json.dumps(res.to_json())
    assert len(drawn) == 2
    with_key = {n for n, _, args in seen if mkey in args}
    assert with_key == {
        "check_and_hash",
        "hash_chunk",
    }  # (the spy sees the arguments: this can fail)
    for _, key, _ in seen:
        assert (
            mkey.hex() not in key.lower() and mkey.hex().upper() not in key and str(mkey) not in key
        )
        assert mkey.decode("latin-1") not in key and repr(mkey) not in key
    assert all(mkey.hex() not in repr(c) for c in (rcl.HashingChecker(client, mkey, 16),))


@pytest.mark.parametrize(
    "kind,decides",
    [
        ("drop", False),
        ("digest", False),
        ("gap", False),
        ("swap", True),
        ("time", True),
        ("gap-after", True),
    ],
)
# noqa: F811
def test_v2_ledgers_of_edits_as_on_one_machine(
    client, keydir, base, tmp_path, monkeypatch, kind, decides
):
    """The ways test_recompute_fast edits a ledger (sealed after the edit: it verifies), gap
    records included: the cluster's report is the single-machine one, decided by the fast verdict
    exactly when one machine's is (the same multiset of frame digests)."""
    dk, _, trust = load_keys(keydir)
    if kind == "gap-after":  # a GAP record after the frames: the frames' multiset unchanged
        recs = np.concatenate([base, base[:1]])
        recs["flags"][-1], recs["aux"][-1] = FLAG_GAP, 5
    else:
        recs = _edit(base, kind, 150)
    led = tmp_path / "L"
    _write(led, keydir, _renumber(recs))
    want = reconcile(PCAP, led, dk, trust=trust)
    seen = _spy(client, monkeypatch)
    got = reconcile_on_cluster(client, PCAP, led, dk, trust=trust, split_bytes=4096)
    monkeypatch.undo()
    _same(want, got)
    assert want.ok == decides and ("tally_partition" not in _ran(seen)) == (decides and FAST)
    if kind == "time":  # the ledger's frame 150 three seconds later: the ledger side's seconds
        assert len(got.per_second) == 2 and sum(s["matched"] for s in got.per_second) == 294
    _same(
        want, reconcile_on_cluster(client, PCAP, led, dk, trust=trust, split_bytes=4096, exact=True)
    )


def test_workers_without_aes_instructions_pair_every_run(case, client, monkeypatch):
    """A cluster whose workers lack AES instructions (msethash.accelerated is asked on the
    workers: False there) takes no fast verdict: an agreeing capture is paired by partition, the
    same report."""
    d, dk, trust = case
    caps = [d / "link0.pcap", d / "link1.pcap"]
    want = reconcile(caps, d / "ledger", dk, trust=trust)
    # (pickled by value: it runs on the workers)
    monkeypatch.setattr(rcl, "mset_accelerated", lambda: False)
    seen = _spy(client, monkeypatch)
    got = reconcile_on_cluster(client, caps, d / "ledger", dk, trust=trust)
    monkeypatch.undo()
    _same(want, got)
    assert (
        got.ok
        and "tally_partition" in _ran(seen)
        and not {"check_and_hash", "hash_chunk"} & _ran(seen)
    )
