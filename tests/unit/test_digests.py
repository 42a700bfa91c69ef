"""AES-128-GMAC, BLAKE3 keyed and HMAC-SHA-256 in C, on every CPU path this machine can run.

Known answers come from the published vector files in tests/vectors/ (each names its source);
random inputs are checked against independent implementations: `cryptography`'s AESGCM, the
`blake3` package, and Python's hmac + hashlib. Paths are switched in-process with
engine.force_cpu_path (tests/system/test_cpu_path_env.py checks LEDGERTOOL_CPU_PATH itself).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random

import blake3
import pytest
from conftest import SAMPLES, TESTS, cli
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgertool.algorithms import ALGORITHMS, get_algorithm
from ledgertool.digest.engine import (
    DigestEngine,
    cpu_path,
    cpu_paths,
    digest_one,
    force_cpu_path,
    gmac_tag,
    hmac_sha256,
)
from ledgertool.source.file import CaptureReader

VECTORS = TESTS / "vectors"
GCM = json.loads((VECTORS / "gcm_nist_gmac.json").read_text())
B3 = json.loads((VECTORS / "blake3_keyed.json").read_text())
RFC4231 = json.loads((VECTORS / "hmac_sha256_rfc4231.json").read_text())

GMAC = ALGORITHMS["aes-128-gmac"]
B3_128 = ALGORITHMS["blake3-keyed-128"]
B3_256 = ALGORITHMS["blake3-keyed-256"]
HMAC128 = ALGORITHMS["hmac-sha256-128"]
NEW = (GMAC, B3_128, B3_256, HMAC128)


def reference(name: str, key: bytes, msg: bytes) -> bytes:
    """Independent implementation of each ledger algorithm (not ours)."""
    if name == "aes-128-gmac":
        return AESGCM(key).encrypt(bytes(12), b"", msg)  # empty plaintext: the output is the tag
    if name == "blake3-keyed-128":
        return blake3.blake3(msg, key=key).digest(16)
    if name == "blake3-keyed-256":
        return blake3.blake3(msg, key=key).digest(32)
    if name == "hmac-sha256-128":
        return hmac.new(key, msg, hashlib.sha256).digest()[:16]
    raise AssertionError(name)


ALG_PATHS = [(a.name, p) for a in NEW for p in cpu_paths(a)]


def test_every_algorithm_has_a_portable_path_and_sizes_match_the_registry():
    from ledgertool._binding import lib

    for a in ALGORITHMS.values():
        assert cpu_paths(a)[-1] == "portable"
        assert lib.lt_key_size(a.native_id) == a.key_size
        assert lib.lt_digest_size(a.native_id) == a.digest_size
        assert lib.lt_record_size(a.native_id) == 32 + a.digest_size
    assert {a.key_size for a in NEW} == {16, 32} and GMAC.key_size == 16


@pytest.mark.parametrize(
    "on_path", [(GMAC.name, p) for p in cpu_paths(GMAC)], indirect=True, ids=lambda p: p[1]
)
@pytest.mark.parametrize("case", GCM["cases"], ids=lambda c: c["name"])
def test_gmac_nist_vectors(on_path, case):
    key, iv, aad = (bytes.fromhex(case[k]) for k in ("key", "iv", "aad"))
    tag = gmac_tag(key, iv, aad)
    assert tag.hex().startswith(case["tag"])
    if iv == bytes(12):  # the ledger's IV: the ledger digest itself must give the published tag
        assert digest_one(GMAC, key, aad).hex() == case["tag"]


@pytest.mark.parametrize(
    "on_path",
    [(a.name, p) for a in (B3_128, B3_256) for p in cpu_paths(a)],
    indirect=True,
    ids=lambda p: "-".join(p),
)
@pytest.mark.parametrize("case", B3["cases"], ids=lambda c: str(c["input_len"]))
def test_blake3_official_keyed_vectors(on_path, case):
    key = B3["key"].encode()
    data = bytes(i % 251 for i in range(case["input_len"]))
    want = bytes.fromhex(case["keyed_hash_32"])[: on_path.digest_size]
    assert digest_one(on_path, key, data) == want


@pytest.mark.parametrize(
    "on_path", [(HMAC128.name, p) for p in cpu_paths(HMAC128)], indirect=True, ids=lambda p: p[1]
)
@pytest.mark.parametrize("case", RFC4231["cases"], ids=lambda c: f"case{c['case']}")
def test_hmac_sha256_rfc4231(on_path, case):
    key, data = bytes.fromhex(case["key"]), bytes.fromhex(case["data"])
    full = hmac_sha256(key, data)
    if "hmac_sha256" in case:
        assert full.hex() == case["hmac_sha256"]
    else:  # case 5 is published truncated to 128 bits, which is exactly our ledger output size
        assert full[:16].hex() == case["hmac_sha256_128"]


def test_hmac_ledger_digest_is_truncated_full_hmac():
    key = bytes(range(32))
    assert digest_one(HMAC128, key, b"frame") == hmac_sha256(key, b"frame")[:16]


LENGTHS = [
    0,
    1,
    15,
    16,
    17,
    55,
    56,
    63,
    64,
    65,
    119,
    120,
    127,
    128,
    129,
    1023,
    1024,
    1025,
    1500,
    2048,
    3073,
    8192,
    9000,
    65537,
]


@pytest.mark.parametrize("on_path", ALG_PATHS, indirect=True, ids=lambda p: "-".join(p))
def test_lengths_agree_with_independent_references(on_path):
    rng = random.Random(f"{on_path.name}-lengths")
    for n in LENGTHS:
        key, msg = rng.randbytes(on_path.key_size), rng.randbytes(n)
        assert digest_one(on_path, key, msg) == reference(on_path.name, key, msg), n


@pytest.mark.parametrize("on_path", ALG_PATHS, indirect=True, ids=lambda p: "-".join(p))
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())  # the forced path is meant to hold for every generated input
def test_random_inputs_agree_with_independent_references(on_path, data):
    key = data.draw(st.binary(min_size=on_path.key_size, max_size=on_path.key_size))
    msg = data.draw(st.binary(max_size=2100))
    assert digest_one(on_path, key, msg) == reference(on_path.name, key, msg)


def test_unknown_or_unavailable_path_is_refused():
    with pytest.raises(ValueError, match="no CPU path"):
        force_cpu_path(GMAC, "sha-ni")
    with pytest.raises(ValueError, match="no CPU path"):
        force_cpu_path(HMAC128, "no-such-path")
    assert cpu_path(GMAC) == cpu_paths(GMAC)[0]


@pytest.mark.parametrize("name", [a.name for a in NEW])
def test_engine_records_match_reference_on_every_path(name, keydir):
    """The batch engine (its keyed context, 48- or 64-byte records) on every path."""
    alg = get_algorithm(name)
    key = bytes(range(alg.key_size))
    with CaptureReader(SAMPLES / "sample.pcap") as r:
        frames = [f.data for f in r.frames()]
    for path in cpu_paths(alg):
        force_cpu_path(alg, path)
        try:
            with CaptureReader(SAMPLES / "sample.pcap") as r:
                e = DigestEngine(r, alg, 0, key)
                force_cpu_path(alg, None)  # an engine keeps the path it was made with
                view, n, _ = e.fill(0)
                recs = bytes(view)
        finally:
            force_cpu_path(alg, None)
        assert n == len(frames) and len(recs) == n * (32 + alg.digest_size)
        size = 32 + alg.digest_size  # slice raw bytes: numpy "S" fields drop trailing zero bytes
        digests = [recs[i * size + 32 : (i + 1) * size] for i in range(n)]
        assert digests == [reference(name, key, f) for f in frames], path


@pytest.mark.parametrize("name", ["blake3-keyed-256", "aes-128-gmac", "hmac-sha256-128"])
def test_ledger_end_to_end_with_new_algorithms(name, tmp_path, keydir):
    """capture -> verify -> recompute through the CLI; 32-byte digests go through Parquet too."""
    led = tmp_path / "L"
    risk = ["--accept-gmac-forgery-risk"] if name == "aes-128-gmac" else []  # refused without it
    r = cli(
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--algorithm",
        name,
        "--segment-records",
        "100",
        *risk,
    )
    assert r.returncode == 0, r.stderr
    assert ("forge" in r.stderr) == (name == "aes-128-gmac")  # the fixed-IV warning, on creation
    r = cli(
        "recompute",
        SAMPLES / "sample.pcap",
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--json",
        "--trust",
        keydir / "verifier.pub",
    )
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["ok"] and doc["matched"] == doc["frames"] > 0, r.stdout
    r = cli(
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    assert r.returncode == 0 and "forge" not in r.stderr  # appending warns no more
    r = cli("verify", led, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"], r.stdout
    r = cli(
        "query", led, "SELECT octet_length(digest) AS n FROM records LIMIT 1", "--format", "json"
    )
    assert json.loads(r.stdout) == [{"n": get_algorithm(name).digest_size}]  # BIGINT: a number
