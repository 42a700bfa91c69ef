"""recompute --pairs on a LocalCluster of worker processes equals the single-machine run."""

from __future__ import annotations

import json

import pytest
from conftest import cli
from test_digest_rotation import captures, keys, pristine  # noqa: F401  (the rotated ledger's fixtures)
from test_recompute_pairs import (  # noqa: F401  (shared with the in-process tests)
    SAMPLE,
    _keys_args,
    links,
)


def _no_elapsed(doc: dict) -> dict:
    for p in doc["pairs"]:
        p.pop("elapsed_s", None)
    return doc


def test_pairs_on_a_cluster_equal_single_machine(links, keydir, other_keydir, tmp_path):
    """All pairs' tasks go to the one cluster of the run (a LocalCluster of 2 worker processes);
    the JSON, the --details file and the text are the single-machine run's."""
    pytest.importorskip("distributed")
    d = links
    args = ("recompute", "--pairs", d / "pairs.toml", *_keys_args(keydir, other_keydir))
    here = cli(*args, "--json", "--details", tmp_path / "here.jsonl")
    there = cli(*args, "--json", "--details", tmp_path / "there.jsonl", "--cluster", "local:2")
    assert here.returncode == there.returncode == 1, there.stderr
    want, got = _no_elapsed(json.loads(here.stdout)), _no_elapsed(json.loads(there.stdout))
    for p in want["pairs"] + got["pairs"]:
        p.pop("details_file", None)
    assert got == want and want["total"]["matched"] == 587
    assert (tmp_path / "there.jsonl").read_text() == (tmp_path / "here.jsonl").read_text() != ""
    assert there.stderr == here.stderr
    text_here = cli(*args)
    text_there = cli(*args, "--cluster", "local:2")
    assert text_there.stdout == text_here.stdout and text_here.stdout.count("\n") == 5
