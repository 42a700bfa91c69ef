"""verify on a Dask cluster and over several ledgers in one run.

The cluster runs are compared with the single-machine verify of the same ledgers: same problems,
same order, same JSON, same exit code. The cluster is a real LocalCluster of 2 worker processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from conftest import REPO, SAMPLES, cli, load_keys, run_killing_a_worker
from ledger_files import FORMATS, records_kind, rewrite_sealed_records, sealed_records

distributed = pytest.importorskip("distributed")

from ledgertool.capture.run import capture_file  # noqa: E402
from ledgertool.digest.record import record_dtype  # noqa: E402
from ledgertool.errors import LedgerFormatError, UsageError  # noqa: E402
from ledgertool.ledger.header import load_ledger  # noqa: E402
from ledgertool.ledger.reader import LedgerReader  # noqa: E402
from ledgertool.verify.cluster import (  # noqa: E402
    ClusterAddress,
    ClusterChecker,
    LedgerContext,
    check_segment_task,
    connect,
    parse_address,
)
from ledgertool.verify.ledger import verify_ledger  # noqa: E402

SEG = 20  # records per segment: sample.pcap (294 records) gives 15 segments a link


@pytest.fixture(scope="module")
def client():
    with connect(ClusterAddress(local_workers=2)) as c:
        c.wait_for_workers(2)
        yield c


def _capture(
    out: Path, keydir: Path, links=("link0", "link1"), seg: int = SEG, fmt: str | None = None
) -> Path:
    dk, sk, _ = load_keys(keydir)
    for link in links:
        capture_file(
            SAMPLES / "sample.pcap",
            out,
            digest_key=dk,
            signing_key=sk,
            link=link,
            segment_records=seg,
            ledger_format=FORMATS.get(fmt),
        )
    return out


@pytest.fixture()
def tampered(request, tmp_path, keydir) -> Path:
    """Two links; link0 segment 3 has one record digest changed (in its Parquet or raw record
    file), link1 segment 5 a missing ML-DSA signature and segment 9 a broken chain link, and a stray
    file beside them. A new ledger's format, or the one an indirect parameter names ("v1", "v2")."""
    out = _capture(tmp_path / "ledger", keydir, fmt=getattr(request, "param", None))
    arr = np.frombuffer(sealed_records(out, 3), dtype=record_dtype(16)).copy()
    arr["digest"][7] = b"\x00" * 16
    rewrite_sealed_records(out, 3, arr.tobytes(), load_keys(keydir)[1])
    for index, edit in (
        (5, lambda d: d["signatures"].pop("ml-dsa-65")),
        (9, lambda d: d.__setitem__("prev_seal_hash", "00" * 32)),
    ):
        seal = out / "link=link1" / f"seg-{index:08d}.seal.json"
        doc = json.loads(seal.read_text())
        edit(doc)
        seal.write_text(json.dumps(doc))
    (out / "link=link1" / "notes.txt").write_text("not part of the ledger")
    return out


@pytest.mark.parametrize("tampered", list(FORMATS), indirect=True)
def test_cluster_report_is_the_single_machine_report(tampered, keydir, client):
    trust = load_keys(keydir)[2]
    here = verify_ledger(tampered, trust)
    kinds = [(p.link, p.segment, p.kind) for p in here.problems]
    # a v1 seal also pins the Parquet file's bytes; a v2 seal only the records' Merkle root
    pinned = {"parquet_hash_mismatch"} if records_kind(tampered) == "parquet" else set()
    assert {k for link, i, k in kinds if (link, i) == ("link0", 3)} == {"merkle_mismatch"} | pinned
    assert ("link1", 5, "signature_missing") in kinds and ("link1", 9, "chain_broken") in kinds
    assert [w.kind for w in here.warnings] == ["stray_file"] and here.segments == 30
    there = verify_ledger(tampered, trust, checker=ClusterChecker(client))
    assert there.problems == here.problems and there.warnings == here.warnings
    assert json.dumps(there.to_json()) == json.dumps(here.to_json())
    # the tasks ran on the workers, not in this process
    assert (
        client.run(lambda: os.getpid()).keys()
        and os.getpid() not in client.run(lambda: os.getpid()).values()
    )


def test_cli_cluster_output_and_exit_code_equal_single_machine(tampered, keydir):
    """The text report through the command line (the JSON is compared above, and in the test of
    several ledgers with --cluster); each --cluster run starts its own LocalCluster."""
    trust = keydir / "verifier.pub"
    here = cli("verify", tampered, "--trust", trust)
    there = cli("verify", tampered, "--trust", trust, "--cluster", "local:2")
    assert here.returncode == there.returncode == 1
    assert there.stdout == here.stdout and there.stderr == here.stderr
    assert here.stdout.splitlines()[0].startswith(
        "FAIL merkle_mismatch link link0 segment 3 record 0: "
        f"{tampered}/link=link0/seg-00000003.rec: Merkle root "
        "differs from the seal; changed leaf blocks: records 0..19"
    )  # segments of 20 records: one leaf of a v2 ledger (256 records a leaf)


def test_several_ledgers_per_ledger_and_total_worst_exit(tampered, keydir, tmp_path):
    good = _capture(tmp_path / "good", keydir, links=("link0",))
    trust = keydir / "verifier.pub"
    single = cli("verify", good, "--trust", trust, "--json")
    assert (
        single.returncode == 0
        and json.loads(single.stdout) == verify_ledger(good, load_keys(keydir)[2]).to_json()
    )
    both = cli("verify", good, tampered, "--trust", trust, "--json")
    assert both.returncode == 1
    doc = json.loads(both.stdout)
    assert doc["ledgers"][0] == json.loads(single.stdout)
    assert doc["ledgers"][1] == json.loads(
        cli("verify", tampered, "--trust", trust, "--json").stdout
    )
    assert doc["total"] == {
        "ledgers": 2,
        "ok_ledgers": 1,
        "failed_ledgers": 1,
        "error_ledgers": 0,
        "segments": 45,
        "records": 3 * 294,
        "frames": 3 * 294,
        "drops_declared": 0,
        "problems": len(doc["ledgers"][1]["problems"]),
        "warnings": 1,
        "exit_code": 1,
    }
    worst = cli(
        "verify",
        good,
        tmp_path / "nope",
        tampered,
        "--trust",
        trust,
        "--json",
        "--cluster",
        "local:2",
    )
    assert worst.returncode == 2
    doc2 = json.loads(worst.stdout)
    assert doc2["ledgers"][1] == {
        "ok": False,
        "ledger": str(tmp_path / "nope"),
        "error": f"{tmp_path / 'nope'}: no such ledger directory",
    }
    assert [doc2["ledgers"][0], doc2["ledgers"][2]] == doc["ledgers"] and doc2["total"][
        "error_ledgers"
    ] == 1
    schema = json.loads((REPO / "schemas" / "verify-ledgers-report.schema.json").read_text())
    one = json.loads((REPO / "schemas" / "verify-report.schema.json").read_text())
    registry = (
        __import__("referencing")
        .Registry()
        .with_resources(
            [(s["$id"], __import__("referencing").Resource.from_contents(s)) for s in (schema, one)]
        )
    )
    for d in (doc, doc2):
        jsonschema.Draft202012Validator(schema, registry=registry).validate(d)
    text = cli("verify", good, tampered, "--trust", trust)
    lines = text.stdout.splitlines()
    assert (
        lines[0]
        == f"{good}: OK: 15 segments, 294 records, 294 frames, 0 drops declared, links link0"
    )
    assert lines[-1].startswith(
        f"total: {doc['total']['problems']} problems: 2 ledgers (1 OK, 1 with problems"
    )
    # every line names its ledger (results per ledger), the FAIL lines too
    one = cli("verify", tampered, "--trust", trust)
    assert lines[1:-1] == [f"{tampered}: {x}" for x in one.stdout.splitlines()]
    first = (
        "parquet_hash_mismatch link link0 segment 3: "
        if records_kind(tampered) == "parquet"
        else "merkle_mismatch link link0 segment 3 record 0: "
    )  # v1 pins the file, v2 the root
    assert lines[1].startswith(f"{tampered}: FAIL {first}")
    assert f"{tampered}: warning stray_file link link1: " in text.stderr
    assert f"{good}: note: append-only not checked" in text.stderr
    there = cli("verify", good, tampered, "--trust", trust, "--cluster", "local:2")
    assert (there.returncode, there.stdout, there.stderr) == (1, text.stdout, text.stderr)


def test_checkpoint_with_several_ledgers_is_usage_error(tampered, keydir):
    r = cli(
        "verify",
        tampered,
        tampered,
        "--trust",
        keydir / "verifier.pub",
        "--checkpoint",
        tampered / "link=link0" / "checkpoint",
    )
    assert r.returncode == 2 and "give one DIR" in r.stderr and "Traceback" not in r.stderr


def test_without_dask_cluster_exits_2_naming_the_extra(tampered, keydir):
    code = (
        "import sys; sys.modules['distributed'] = None; "  # as if the extra were not installed
        "from ledgertool.cli.app import main; main()"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "verify",
            str(tampered),
            "--trust",
            str(keydir / "verifier.pub"),
            "--cluster",
            "local:2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert "install ledgertool[cluster]" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_cluster_addresses(tampered, keydir):
    assert parse_address("local:2") == ClusterAddress(local_workers=2)
    assert parse_address("tcp://10.0.0.5:8786") == ClusterAddress(scheduler="tcp://10.0.0.5:8786")
    assert parse_address("tls://10.0.0.5:8786") == ClusterAddress(scheduler="tls://10.0.0.5:8786")
    for bad in ("local:0", "local:x", "local:2000", "10.0.0.5:8786", "tcp://host", "http://h:1"):
        with pytest.raises(UsageError):
            parse_address(bad)
    r = cli("verify", tampered, "--trust", keydir / "verifier.pub", "--cluster", "tcp://127.0.0.1")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1] == (
        "ledgertool: error: cluster address 'tcp://127.0.0.1' is neither "
        "tls://HOST:PORT or tcp://HOST:PORT (a Dask scheduler) nor local:N (N worker processes "
        "on this machine, 1..1024)"
    )


def test_worker_that_sees_another_ledger_refuses(tampered, keydir, tmp_path):
    other = _capture(tmp_path / "other", keydir, links=("link0",))
    reader = LedgerReader(tampered)
    ledger = load_ledger(tampered)
    part = reader.listing("link0")
    ok = check_segment_task(LedgerContext(str(tampered), ledger, None), part, 0)
    # the verdict only
    assert ok.seal.readable and ok.records is not None and ok.records.table is None
    with pytest.raises(LedgerFormatError, match="is not the one verified"):
        check_segment_task(LedgerContext(str(other), ledger, None), part, 0)
    with pytest.raises(LedgerFormatError):
        check_segment_task(
            LedgerContext(str(tampered), replace(ledger, sha256="0" * 64), None), part, 0
        )


def test_worker_killed_mid_run_gives_the_right_answer_or_a_clear_error(tmp_path, keydir):
    """SIGKILL one of the two worker processes while the segments are being checked: the nanny
    starts another and Dask re-runs the lost tasks, so the report is the single-machine one; if
    the cluster gave up, the run is a ClusterError, never a partial verdict."""
    # 147 segments: a few seconds of tasks
    led = _capture(tmp_path / "big", keydir, links=("link0",), seg=2)
    trust = load_keys(keydir)[2]
    want = verify_ledger(led, trust)
    got = run_killing_a_worker(
        lambda c: verify_ledger(led, trust, checker=ClusterChecker(c)), "segments are being checked"
    )
    if "err" in got:
        assert "no verdict" in str(got["err"])
    else:
        assert (
            json.dumps(got["res"].to_json()) == json.dumps(want.to_json())
            and want.ok
            and want.segments == 147
        )
    shutil.rmtree(led)


def test_cluster_verifies_v2_ledgers_like_one_machine(tmp_path, keydir, client):
    """A v2 ledger (raw record files, one segment compacted, one tampered, one with a compaction
    leftover): the cluster's report is the single machine's, problems and warnings alike."""
    from v2_reference import capture_records, parquet_bytes, write_v2_ledger

    dk, sk, trust = load_keys(keydir)
    recs = capture_records(SAMPLES / "sample.pcap", dk)
    segs = [recs[i : i + 60 * 48] for i in range(0, len(recs), 60 * 48)]
    w = write_v2_ledger(
        tmp_path / "L", sk, segs, digest_key_id=dk.key_id("siphash-1-3-128", 16), leaf_records=16
    )
    w.path(1, "parquet").write_bytes(parquet_bytes(segs[1], 16, 1))
    w.path(1, "rec").unlink()
    w.path(2, "parquet").write_bytes(parquet_bytes(segs[2], 16, 2))  # leftover beside its .rec
    raw = bytearray(w.path(3, "rec").read_bytes())
    raw[256 + 4 + 5 * 48 + 40] ^= 1  # a digest byte of record 5 (block 0)
    w.path(3, "rec").write_bytes(bytes(raw))
    here = verify_ledger(tmp_path / "L", trust)
    assert [(p.segment, p.kind) for p in here.problems] == [(3, "merkle_mismatch")]
    assert [(p.segment, p.kind) for p in here.warnings] == [
        (2, "compaction_leftover")
    ] and here.records == 294
    there = verify_ledger(tmp_path / "L", trust, checker=ClusterChecker(client))
    assert json.dumps(there.to_json()) == json.dumps(here.to_json())
