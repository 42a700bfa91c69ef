"""recompute --pairs on a LocalCluster of worker processes equals the single-machine run."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import SAMPLES, cli, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.digest.reference import read_pcap
from test_digest_rotation import captures, keys, pristine  # noqa: F401  (the rotated ledger's fixtures)
from test_recompute_cluster import write_pcap

SAMPLE = SAMPLES / "sample.pcap"


@pytest.fixture(scope="module")
def links(tmp_path_factory, keydir, other_keydir):
    """Three ledgers of sample.pcap: `a` (keydir's keys), `b` (other_keydir's keys: another device),
    `t` (keydir's keys, segment 1's seal chain broken: it does not verify); `short.pcap` is
    sample.pcap without frame 290; and a pairs file naming them with relative paths."""
    d = tmp_path_factory.mktemp("pairs")
    for name, kd in (("a", keydir), ("b", other_keydir), ("t", keydir)):
        dk, sk, _ = load_keys(kd)
        capture_file(SAMPLE, d / "ledgers" / name, digest_key=dk, signing_key=sk, segment_records=100)
    seal = d / "ledgers" / "t" / "link=link0" / "seg-00000001.seal.json"
    doc = json.loads(seal.read_text())
    doc["prev_seal_hash"] = "00" * 32
    seal.write_text(json.dumps(doc))
    frames = [(ts, wire, data) for ts, _cap, wire, data in read_pcap(SAMPLE.read_bytes())]
    (d / "caps").mkdir()
    write_pcap(d / "caps" / "short.pcap", frames[:290] + frames[291:])
    shutil.copy(SAMPLE, d / "caps" / "sample.pcap")
    (d / "pairs.toml").write_text(f"""
[[pair]]
ledger = "ledgers/a"
captures = ["caps/sample.pcap"]

[[pair]]
ledger = "ledgers/b"
captures = ["caps/short.pcap"]
trust = "{other_keydir / 'verifier.pub'}"

[[pair]]
ledger = "ledgers/t"
captures = ["caps/sample.pcap"]
link = ["link0"]
""")
    return d


def _keys_args(keydir, other_keydir):
    return ("--digest-key", keydir / "digest.key", "--digest-key", other_keydir / "digest.key",
            "--trust", keydir / "verifier.pub")


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
