"""`ledgertool algorithms` says how the SHA-256 Merkle leaves are hashed on this machine: sixteen
side by side in AVX-512 lanes, four in SHA-NI streams, or one at a time."""

from __future__ import annotations

import json

import pytest
from conftest import cli

from ledgertool._binding import lib
from ledgertool.algorithms import get_algorithm
from ledgertool.digest.engine import force_cpu_path, merkle_lanes

LINES = {
    16: "Merkle leaves (SHA-256): 16 side by side (AVX-512 lanes)",
    4: "Merkle leaves (SHA-256): 4 side by side (SHA-NI streams)",
    1: "Merkle leaves (SHA-256): one at a time",
}


@pytest.mark.parametrize("lanes", [16, 4, 1])
def test_the_lanes_in_use_in_text_and_json(lanes):
    if lib.lt_merkle_lanes_force(lanes) != lib.LT_OK:
        pytest.skip(f"this CPU cannot hash {lanes} leaves side by side")
    try:
        assert merkle_lanes() == lanes
        text, doc = cli("algorithms"), cli("algorithms", "--json")
    finally:
        lib.lt_merkle_lanes_force(0)
    assert text.returncode == 0 and doc.returncode == 0
    assert LINES[lanes] in text.stdout.splitlines()
    assert json.loads(doc.stdout)["merkle_leaf_lanes"] == lanes


def test_portable_sha256_hashes_leaves_one_at_a_time():
    hmac = get_algorithm("hmac-sha256-128")
    force_cpu_path(hmac, "portable")
    try:
        doc = json.loads(cli("algorithms", "--json").stdout)
    finally:
        force_cpu_path(hmac, None)
    assert doc["merkle_leaf_lanes"] == 1
    assert json.loads(cli("algorithms", "--json").stdout)["merkle_leaf_lanes"] == merkle_lanes()
