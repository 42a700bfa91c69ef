"""AES-128-GMAC through the batch entry (lt_digest_many, the engine's lt_dctx_run_many) on every
GMAC CPU path, above all the multi-frame path "vpclmul-avx512-mb": four frames per group of any
lengths, long frames in 512- and 256-byte chunks, tails read with masked loads, batches that are not
a multiple of four padded with empty frames.

Every tag is checked against `cryptography`'s AESGCM (an independent implementation: the tag of an
empty plaintext with the frame as AAD and the all-zero 96-bit IV) and against the single-message
scalar path (aesni-pclmul where the CPU has it, else portable). The published vectors
(tests/vectors/gcm_nist_gmac.json) and the per-length random tests run on every path in
test_digests.py, which picks up the new path through cpu_paths().
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledgertool.algorithms import ALGORITHMS
from ledgertool.digest.engine import (
    cpu_path,
    cpu_paths,
    digest_many,
    digest_one,
    force_cpu_path,
)

GMAC = ALGORITHMS["aes-128-gmac"]
MF = "vpclmul-avx512-mb"
PATHS = [(GMAC.name, p) for p in cpu_paths(GMAC)]
SCALAR = "aesni-pclmul" if "aesni-pclmul" in cpu_paths(GMAC) else "portable"

# block edges (16), zmm edges (64), the tail limit and chunk edges (256, 512), frame sizes of the
# bench
EDGES = [
    0,
    1,
    15,
    16,
    17,
    63,
    64,
    65,
    127,
    128,
    129,
    191,
    192,
    193,
    255,
    256,
    257,
    511,
    512,
    513,
    767,
    768,
    769,
    1023,
    1024,
    1025,
    1500,
    9000,
]


def aesgcm_tag(key: bytes, msg: bytes) -> bytes:
    return AESGCM(key).encrypt(bytes(12), b"", msg)  # empty plaintext: the output is the tag


def scalar_tags(key: bytes, msgs: list[bytes]) -> list[bytes]:
    """Single-message tags on the scalar path; the caller's forced path is restored after."""
    before = cpu_path(GMAC)
    force_cpu_path(GMAC, SCALAR)
    try:
        return [digest_one(GMAC, key, m) for m in msgs]
    finally:
        force_cpu_path(GMAC, before)


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_multiframe_path_is_listed_first_exactly_when_the_cpu_has_its_features():
    paths = cpu_paths(GMAC)
    if "aesni-pclmul" not in paths:
        pytest.skip("portable-only build or not x86-64: no x86 GMAC paths compiled")
    need = {"avx512f", "avx512bw", "avx512vl", "vpclmulqdq", "aes", "pclmulqdq", "ssse3"}
    has = need <= cpu_flags()
    assert (MF in paths) == has, (paths, need - cpu_flags())
    assert paths == ([MF] if has else []) + ["aesni-pclmul", "portable"]


@pytest.mark.parametrize("on_path", PATHS, indirect=True, ids=lambda p: "-".join(p))
def test_mixed_length_batches_equal_the_scalar_path_and_aesgcm(on_path):
    rng = random.Random(f"gmac-mf-{cpu_path(on_path)}")
    shapes = [[n] for n in EDGES] + [EDGES, EDGES[::-1], [0] * 9, [9000, 0, 0, 0, 1], [1500] * 7]
    # every batch size 1 .. 13 (groups of four, padded groups of one to three frames)
    shapes += [[rng.choice(EDGES) for _ in range(n)] for n in range(1, 14)]
    # each edge length in each lane of a group, next to frames of other lengths
    for n in EDGES:
        for lane in range(4):
            shape = [rng.choice(EDGES) for _ in range(4)]
            shape[lane] = n
            shapes.append(shape)
    for _ in range(6):  # longer batches of mixed lengths
        shapes.append(
            [rng.choice(EDGES + [rng.randint(0, 3000)]) for _ in range(rng.randint(14, 200))]
        )
    for lens in shapes:
        key = rng.randbytes(16)
        msgs = [rng.randbytes(n) for n in lens]
        got = digest_many(on_path, key, msgs)
        assert got == [aesgcm_tag(key, m) for m in msgs], lens
        assert got == scalar_tags(key, msgs), lens


@pytest.mark.parametrize("on_path", PATHS, indirect=True, ids=lambda p: "-".join(p))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_batches_equal_aesgcm(on_path, data):
    key = data.draw(st.binary(min_size=16, max_size=16))
    size = st.one_of(st.integers(0, 300), st.integers(0, 2100), st.integers(8000, 10000))
    lens = data.draw(st.lists(size, min_size=1, max_size=40))
    msgs = [
        data.draw(st.binary(min_size=n, max_size=n)) if n <= 64 else random.Random(n).randbytes(n)
        for n in lens
    ]
    assert digest_many(on_path, key, msgs) == [aesgcm_tag(key, m) for m in msgs]


@pytest.mark.parametrize("on_path", PATHS, indirect=True, ids=lambda p: "-".join(p))
def test_a_frame_tag_does_not_depend_on_its_neighbours(on_path):
    """Frames share a reduction in a group: changing one byte of one frame changes that tag only."""
    rng = random.Random(7)
    key = rng.randbytes(16)
    msgs = [rng.randbytes(n) for n in (64, 1500, 0, 17, 9000, 256, 513)]
    base = digest_many(on_path, key, msgs)
    for i, m in enumerate(msgs):
        if not m:
            continue
        flipped = list(msgs)
        flipped[i] = bytes([m[0] ^ 1]) + m[1:]
        got = digest_many(on_path, key, flipped)
        assert [j for j in range(len(msgs)) if got[j] != base[j]] == [i]
        assert got[i] == aesgcm_tag(key, flipped[i])
