"""Ledgers at fsspec URLs verified on a LocalCluster of worker processes (`--cluster local:2`): the
same output as the local run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys

fsspec = pytest.importorskip("fsspec")

from ledgertool.capture.run import capture_file  # noqa: E402

SEG = 100  # records per segment: sample.pcap's 294 records give segments 0..2


@pytest.fixture(scope="module", params=[1, 2], ids=["v1", "v2"])
def local(tmp_path_factory, keydir, request) -> Path:
    """Two links of sample.pcap, in ledger format v1 (Parquet at seal) and v2 (raw record files)."""
    dk, sk, _ = load_keys(keydir)
    out = tmp_path_factory.mktemp("fsspec") / "ledger"
    for link in ("link0", "link1"):
        capture_file(SAMPLES / "sample.pcap", out, digest_key=dk, signing_key=sk, link=link, segment_records=SEG,
                     ledger_format=request.param)
    return out


def test_cli_verify_cluster_with_file_url(local, keydir):
    pytest.importorskip("distributed")
    trust = keydir / "verifier.pub"
    here = cli("verify", local, "--trust", trust)
    there = cli("verify", f"file://{local}", "--trust", trust, "--cluster", "local:2")
    assert here.returncode == there.returncode == 0 and there.stdout == here.stdout
