"""Ledgers at fsspec URLs verified on a LocalCluster of worker processes (`--cluster local:2`): the
same output as the local run."""

from __future__ import annotations

import pytest
from conftest import cli
from test_fsspec_urls import (  # noqa: F401  (shared with the in-process tests)
    SEG,
    fsspec,
    local,
)


def test_cli_verify_cluster_with_file_url(local, keydir):
    pytest.importorskip("distributed")
    trust = keydir / "verifier.pub"
    here = cli("verify", local, "--trust", trust)
    there = cli("verify", f"file://{local}", "--trust", trust, "--cluster", "local:2")
    assert here.returncode == there.returncode == 0 and there.stdout == here.stdout
