"""recompute names the frames that changed, also where their digests repeat elsewhere.

The corpus capture rusticata__wireshark_samples-test.pcapng holds many frames whose bytes (and so
digests) repeat minutes apart. Its ledger is built from the file; the capture reconciled against it
has frame 100 deleted and a payload bit of frame 200 flipped. The frames named must be those two
(ledger seq 100 and 200; the flipped frame is index 199 of the modified capture, one frame having
gone before it), and the per-second lines must point at their seconds, on every path of the
pairing: the fast verdict (only the differing parts paired), everything paired (`exact`), the
pairing spilled to bucket files (a small memory limit), a window, and the cluster's partition task.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import CORPUS, cli, load_keys, needs_corpus

from ledgertool.capture.run import capture_file
from ledgertool.reconcile.recompute import reconcile
from ledgertool.source.file import CaptureReader

NAME = "rusticata__wireshark_samples-test.pcapng"
DELETED, FLIPPED = 100, 200


def _write_pcap_ns(path: Path, frames: list[tuple[int, int, bytes]], linktype: int) -> None:
    """A nanosecond pcap from (ts_ns, wire_len, bytes), written without the project's writer."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, linktype))
        for ts, wire, data in frames:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), wire) + data)


@pytest.fixture(scope="module")
def changed(tmp_path_factory, keydir):
    """(ledger dir, modified capture, original frames) with the ledger built from the corpus
    file."""
    src = CORPUS / "files" / NAME
    d = tmp_path_factory.mktemp("changed")
    dk, sk, _ = load_keys(keydir)
    capture_file(src, d / "ledger", digest_key=dk, signing_key=sk, segment_records=1000)
    with CaptureReader(src) as r:
        frames = list(r.frames())
    rows = []
    for f in frames:
        if f.index == DELETED:
            continue
        data = bytearray(f.data)
        if f.index == FLIPPED:
            data[-1] ^= 0x01  # the last byte: payload, or a trailer every strip mode keeps
        rows.append((f.ts_ns, f.wire_len, bytes(data)))
    modified = d / "modified.pcap"
    _write_pcap_ns(modified, rows, frames[0].linktype)
    return d / "ledger", modified, frames


def _repeats(frames, index: int) -> int:
    return sum(1 for f in frames if f.data == frames[index].data)


def _check(res, frames) -> None:
    ledger_only = sorted(int(e["seq"]) for e in res.examples_ledger_only)
    capture_only = sorted(int(e["index"]) for e in res.examples_capture_only)
    assert (res.ledger_only, res.capture_only) == (2, 1)
    assert ledger_only == [DELETED, FLIPPED]
    assert capture_only == [FLIPPED - 1]
    assert sorted(int(e["ts_ns"]) for e in res.examples_ledger_only) == [
        frames[DELETED].ts_ns,
        frames[FLIPPED].ts_ns,
    ]
    differing = {
        row["second"]: (row["ledger_only"], row["capture_only"])
        for row in res.per_second
        if row["ledger_only"] or row["capture_only"]
    }
    want: dict[int, list[int]] = {}
    want.setdefault(frames[DELETED].ts_ns // 10**9, [0, 0])[0] += 1
    want.setdefault(frames[FLIPPED].ts_ns // 10**9, [0, 0])[0] += 1
    want.setdefault(frames[FLIPPED].ts_ns // 10**9, [0, 0])[1] += 1
    assert differing == {s: tuple(v) for s, v in want.items()}


@needs_corpus
def test_the_corpus_capture_repeats_the_changed_frames(changed):
    """The case the pairing rule is about: both changed frames' bytes occur again later."""
    _, _, frames = changed
    assert _repeats(frames, DELETED) > 1
    assert _repeats(frames, FLIPPED) > 1


@needs_corpus
@pytest.mark.parametrize(
    "how",
    [
        {},
        {"exact": True},
        {"exact": True, "budget": 2000},
        {"budget": 2000},
        {"budget": 0},
        {"from_ns": 1, "to_ns": 2**62, "tolerance_ns": 5000},
    ],
    ids=["fast-verdict", "exact", "exact-spilled", "fast-spilled", "fast-oversized", "window"],
)
def test_recompute_names_the_deleted_and_the_flipped_frame(
    changed, keydir, how, tmp_path, monkeypatch
):
    """`budget`: the bytes of rows kept before they spill to bucket files (0: every bucket is
    paired through DuckDB's statements)."""
    import ledgertool.reconcile.recompute as rc

    ledger, modified, frames = changed
    dk, _, trust = load_keys(keydir)
    details = tmp_path / "details.jsonl"
    how = dict(how)
    if "budget" in how:
        budget = how.pop("budget")
        monkeypatch.setattr(rc, "keep_budget", lambda limit: budget)
    res = reconcile(modified, ledger, dk, trust=trust, details=details, **how)
    _check(res, frames)
    lines = [json.loads(x) for x in details.read_text().splitlines()]
    assert sorted(int(x["seq"]) for x in lines if x["status"] == "ledger_only") == [
        DELETED,
        FLIPPED,
    ]
    assert [x["index"] for x in lines if x["status"] == "capture_only"] == [FLIPPED - 1]


@needs_corpus
def test_recompute_json_names_the_changed_frames(changed, keydir):
    ledger, modified, frames = changed
    r = cli(
        "recompute",
        "--json",
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--ledger",
        ledger,
        modified,
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert sorted(int(e["seq"]) for e in doc["examples_ledger_only"]) == [DELETED, FLIPPED]
    assert [e["index"] for e in doc["examples_capture_only"]] == [FLIPPED - 1]


@needs_corpus
def test_cluster_partition_task_names_the_changed_frames(changed, keydir):
    """The cluster's partition task pairs its rows as one machine does: with the whole ledger and
    capture as one partition, the frames named are the changed ones."""
    pytest.importorskip("distributed")
    from ledgertool.algorithms import get_algorithm
    from ledgertool.digest.record import FLAG_GAP, record_dtype
    from ledgertool.ledger.header import load_ledger
    from ledgertool.reconcile.cluster import (
        CaptureChunk,
        PartitionJob,
        digest_chunk,
        tally_partition,
    )
    from ledgertool.reconcile.multiset import LedgerPart
    from ledgertool.verify.ledger import verify_ledger

    ledger, modified, frames = changed
    dk, _, trust = load_keys(keydir)
    head = load_ledger(ledger)
    alg = get_algorithm(head.algorithm)
    kid = dk.key_id(alg.name, alg.key_size)
    dtype = record_dtype(alg.digest_size)
    parts = []

    def keep(seg) -> None:
        arr = np.frombuffer(seg.records, dtype)
        parts.append(LedgerPart(seg.link, kid, arr[(arr["flags"] & FLAG_GAP) == 0].copy()))

    assert verify_ledger(ledger, trust, on_segment=keep).ok
    subkey = dk.subkey(alg.name, alg.key_size)
    _, (cap,) = digest_chunk(CaptureChunk(str(modified)), subkey, alg.name, head.strip, 1)
    job = PartitionJob(str(ledger), (kid,), (), (), None, None, 0, 10, 100, "1GB", alg.digest_size)
    got = tally_partition(job, [0], [tuple(parts)], [cap.copy()])
    t = got.tally
    res = SimpleNamespace(
        ledger_only=t.ledger_only,
        capture_only=t.capture_only,
        examples_ledger_only=[{"seq": e[2], "ts_ns": e[3]} for e in t.examples_ledger_only],
        examples_capture_only=[{"index": e[1]} for e in t.examples_capture_only],
        per_second=t.per_second,
    )
    _check(res, frames)
    rows = got.details.to_pylist()
    assert sorted(r["seq"] for r in rows if r["status"] == "ledger_only") == [DELETED, FLIPPED]
    assert [r["index"] for r in rows if r["status"] == "capture_only"] == [FLIPPED - 1]
