"""The batch (multi-buffer) digest entry on every CPU path, against the single-message path and the
independent references; the engine's workers and batch size never change a record; the C Merkle
leaves equal merkle.records_leaf_hashes.

Multi-buffer paths ("avx512-mb", "avx2-mb" for SipHash and keyed BLAKE3) hash several frames at once
in SIMD lanes and refill a lane as soon as its frame ends, so batches of mixed lengths exercise lane
refills, frames that end in the same step, and short batches that leave lanes idle. BLAKE3 lanes
take chunks (1024 bytes) of any frame and then the parent nodes of each tree level; frames of more
than 512 chunks are hashed on their own in 512-chunk subtrees (native/src/blake3_mb.h).
"""

from __future__ import annotations

import hashlib
import random

import pytest
from conftest import SAMPLES, TESTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_digests import reference as independent_reference

from ledgertool.algorithms import ALGORITHMS
from ledgertool.digest.engine import (
    DigestEngine,
    cpu_path,
    cpu_paths,
    digest_many,
    digest_one,
    force_cpu_path,
    merkle_leaves,
)
from ledgertool.digest.reference import siphash
from ledgertool.seal import merkle
from ledgertool.source.file import CaptureReader

ALG_PATHS = [(a.name, p) for a in ALGORITHMS.values() for p in cpu_paths(a)]


def independent(name: str, key: bytes, msg: bytes) -> bytes:
    if name.startswith("siphash-"):
        c, d = (1, 3) if name.startswith("siphash-1-3") else (2, 4)
        return siphash(key, msg, c, d, ALGORITHMS[name].digest_size)
    return independent_reference(name, key, msg)


def single(alg, key, msgs):
    return [digest_one(alg, key, m) for m in msgs]


@pytest.mark.parametrize("name", ["siphash-1-3-128", "blake3-keyed-128"])
def test_multibuffer_paths_are_listed_and_best_first(name):
    paths = cpu_paths(ALGORITHMS[name])
    assert paths[-1] == "portable"
    mb = [p for p in paths if p.endswith("-mb")]
    assert paths[: len(mb)] == mb  # multi-buffer tiers first, best first
    if "avx512-mb" in mb and "avx2-mb" in mb:
        assert mb.index("avx512-mb") < mb.index("avx2-mb")


@pytest.mark.parametrize("on_path", ALG_PATHS, indirect=True, ids=lambda p: "-".join(p))
def test_batches_of_mixed_lengths_equal_single_and_reference(on_path):
    alg = on_path
    rng = random.Random(f"mb-{alg.name}-{cpu_path(alg)}")
    shapes = [
        [],
        [0],
        [64] * 8,
        [64] * 9,
        [1500] * 7,
        list(range(0, 70)),  # equal ends, idle lanes, every tail
        [0] * 17,
        [2000, 0, 0, 0, 0, 0, 0, 0, 0, 1],  # one long lane, many refills
    ]
    for _ in range(12):
        n = rng.randint(1, 300)
        shapes.append(
            [rng.choice((rng.randint(0, 2000), rng.randint(0, 24), 64, 1500)) for _ in range(n)]
        )
    for lens in shapes:
        key = rng.randbytes(alg.key_size)
        msgs = [rng.randbytes(n) for n in lens]
        got = digest_many(alg, key, msgs)
        assert got == single(alg, key, msgs), lens
        sample = rng.sample(range(len(msgs)), min(len(msgs), 20))  # the pure-Python SipHash is slow
        assert [got[i] for i in sample] == [independent(alg.name, key, msgs[i]) for i in sample], (
            lens
        )


MB_PATHS = [
    p for p in ALG_PATHS if p[0].startswith(("siphash-", "blake3-")) and p[1].endswith("-mb")
]


@pytest.mark.parametrize(
    "on_path",
    [p for p in ALG_PATHS if p[0].startswith("siphash-")]
    + [p for p in MB_PATHS if p[0].startswith("blake3-")],
    indirect=True,
    ids=lambda p: "-".join(p),
)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_batches_equal_the_single_message_path(on_path, data):
    key = data.draw(st.binary(min_size=on_path.key_size, max_size=on_path.key_size))
    msgs = data.draw(st.lists(st.binary(max_size=2000), min_size=1, max_size=300))
    assert digest_many(on_path, key, msgs) == single(on_path, key, msgs)


SIP_PATHS = [p for p in ALG_PATHS if p[0].startswith("siphash-")]
# every tail length of the last word, one and several 64-byte blocks, and long frames
LOCKSTEP_LENS = list(range(0, 72)) + [127, 128, 129, 200, 1023, 1500, 2000]


@pytest.mark.parametrize("on_path", SIP_PATHS, indirect=True, ids=lambda p: "-".join(p))
def test_runs_of_equal_lengths_equal_single_and_reference(on_path):
    """Multi-buffer SipHash digests runs of 16 equal lengths in lockstep (siphash_mb.h) and the
    rest lane by lane: groups at the start, middle and end of a batch, back to back, and cut by
    one frame."""
    alg = on_path
    rng = random.Random(f"lockstep-{alg.name}-{cpu_path(alg)}")
    for n in LOCKSTEP_LENS:
        other = (n + 1) % 70
        for lens in (
            [n] * 16,
            [n] * 35,
            [5] * 3 + [n] * 16 + [other] * 16 + [7] + [n] * 17,
            [n] * 15 + [other] + [n] * 16,
            [rng.randint(0, 100) for _ in range(9)] + [n] * 32 + [3],
        ):
            key = rng.randbytes(alg.key_size)
            msgs = [rng.randbytes(x) for x in lens]
            got = digest_many(alg, key, msgs)
            assert got == single(alg, key, msgs), lens
            i = rng.randrange(len(msgs))  # the pure-Python SipHash is slow: one frame per batch
            assert got[i] == independent(alg.name, key, msgs[i]), (lens, i)


def _frames_beside_no_access_pages(alg, seed: str, before: bool) -> None:
    """16 equal-length frames of every length 1..71 and 1500 digested in lockstep, each ending
    where an inaccessible page starts (`before` False) or starting where one ends (`before`
    True): a load outside a frame's bytes would crash the test process. The digests must equal
    one-at-a-time ones."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    mm = mmap.mmap(-1, 32 * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    mm[:] = random.Random(seed).randbytes(32 * page)

    # the frame's first byte: beside the guard page 2i (before) or 2i+1
    def start(i: int, n: int) -> int:
        return (2 * i + 1) * page - (0 if before else n)

    want = {
        n: [bytes(mm[start(i, n) : start(i, n) + n]) for i in range(16)]
        for n in list(range(1, 72)) + [1500]
    }
    guards = [(2 * i if before else 2 * i + 1) * page for i in range(16)]
    for g in guards:  # no access
        assert libc.mprotect(base + g, page, 0) == 0, ctypes.get_errno()
    try:
        view = memoryview(mm)
        key = bytes(range(alg.key_size))
        for n, copies in want.items():
            msgs = [view[start(i, n) : start(i, n) + n] for i in range(16)]
            assert digest_many(alg, key, msgs) == single(alg, key, copies), n
        del msgs, view
    finally:
        for g in guards:
            libc.mprotect(base + g, page, 3)  # PROT_READ | PROT_WRITE
        mm.close()


@pytest.mark.parametrize(
    "on_path",
    [p for p in SIP_PATHS if p[1].endswith("-mb")],
    indirect=True,
    ids=lambda p: "-".join(p),
)
def test_lockstep_reads_no_byte_past_a_frame(on_path):
    """A load past the last byte of a frame (the partial last word, the masked tail block) would
    crash."""
    _frames_beside_no_access_pages(on_path, f"guard-{on_path.name}", before=False)


@pytest.mark.parametrize(
    "on_path",
    [p for p in SIP_PATHS if p[1].endswith("-mb")],
    indirect=True,
    ids=lambda p: "-".join(p),
)
def test_lockstep_reads_no_byte_before_a_frame(on_path):
    """The lockstep tail reads the last word as the 8 (or 16) bytes that end the frame: a frame
    shorter than that load must not make it start before the frame's first byte."""
    _frames_beside_no_access_pages(on_path, f"guard-before-{on_path.name}", before=True)


# BLAKE3 block and chunk edges: empty, one byte, around one block, around one chunk, and frames
# of a few chunks between them
B3_EDGES = [0, 1, 63, 64, 65, 127, 128, 129, 1023, 1024, 1025, 2048, 3000, 9000]


@pytest.mark.parametrize(
    "on_path",
    [p for p in ALG_PATHS if p[0].startswith("blake3-")],
    indirect=True,
    ids=lambda p: "-".join(p),
)
def test_blake3_batches_at_block_and_chunk_edges_equal_the_blake3_package(on_path):
    alg = on_path
    rng = random.Random(f"b3-edges-{alg.name}-{cpu_path(alg)}")
    shapes = [
        B3_EDGES,
        B3_EDGES[::-1],
        [n for n in B3_EDGES for _ in range(17)],  # 17: lanes + 1
        [1025] * 5 + [64] * 20 + [1025] * 3,
        [0] * 33,
        [1024] * 16 + [1023] * 16 + [1025],
    ]
    for _ in range(8):
        shapes.append(
            [rng.choice(B3_EDGES + [rng.randint(0, 1100)]) for _ in range(rng.randint(1, 120))]
        )
    for lens in shapes:
        key = rng.randbytes(alg.key_size)
        msgs = [rng.randbytes(n) for n in lens]
        got = digest_many(alg, key, msgs)
        assert got == [independent_reference(alg.name, key, m) for m in msgs], lens
        assert got == single(alg, key, msgs), lens


KIB, MIB = 1024, 1024 * 1024
# around every chunk count that changes the tree's shape (2, 3, 4, 5, 8, 9, 16, 17 chunks), 9000 B
# jumbo frames, 64 KiB, the 512-chunk subtree of the lanes code (one window) and 1 MiB
B3_LONG = [
    0,
    1,
    63,
    64,
    65,
    1023,
    1024,
    1025,
    2047,
    2048,
    2049,
    3072,
    4095,
    4096,
    4097,
    8191,
    8192,
    8193,
    9000,
    16384,
    16385,
    65536,
    512 * KIB - 1,
    512 * KIB,
    512 * KIB + 1,
    MIB,
    MIB + 1,
    3 * MIB // 2 + 5,
]


@pytest.mark.parametrize(
    "on_path",
    [p for p in ALG_PATHS if p[0].startswith("blake3-")],
    indirect=True,
    ids=lambda p: "-".join(p),
)
def test_blake3_long_frames_equal_the_blake3_package(on_path):
    """Single messages and batches of long frames: chunk counters per lane, parent levels in lanes,
    the odd last node of a level, ROOT on the last merge only, windows that fill up (batches of
    mid-size frames), and frames of more than 512 chunks among short ones."""
    alg = on_path
    rng = random.Random(f"b3-long-{alg.name}-{cpu_path(alg)}")
    key = rng.randbytes(alg.key_size)
    msgs = [rng.randbytes(n) for n in B3_LONG]
    want = [independent_reference(alg.name, key, m) for m in msgs]
    assert [digest_one(alg, key, m) for m in msgs] == want
    assert digest_many(alg, key, msgs) == want
    assert digest_many(alg, key, msgs[::-1]) == want[::-1]
    # mid-size frames: more chunks than one window holds, windows ending inside the batch
    lens = [rng.randint(1025, 9 * KIB) for _ in range(150)] + [
        rng.choice(B3_EDGES) for _ in range(50)
    ]
    rng.shuffle(lens)
    mid = [rng.randbytes(n) for n in lens]
    assert digest_many(alg, key, mid) == [independent_reference(alg.name, key, m) for m in mid]
    # 17 frames of 513 chunks between short ones: more long frames than a window queues
    big = rng.randbytes(512 * KIB + 1)
    mixed = [big if i % 3 == 0 else rng.randbytes(rng.choice((64, 1500, 9000))) for i in range(51)]
    assert digest_many(alg, key, mixed) == [independent_reference(alg.name, key, m) for m in mixed]


def test_published_siphash_vectors_through_the_batch_entry():
    import json

    vec = json.loads((TESTS / "vectors" / "siphash_reference.json").read_text())
    key = bytes(range(16))
    msgs = [bytes(range(i)) for i in range(64)]
    for name, field in (
        ("siphash-2-4-128", "siphash_2_4_128"),
        ("siphash-2-4-64", "siphash_2_4_64"),
    ):
        alg = ALGORITHMS[name]
        for p in cpu_paths(alg):
            force_cpu_path(alg, p)
            try:
                assert [d.hex() for d in digest_many(alg, key, msgs)] == vec[field][:64], p
            finally:
                force_cpu_path(alg, None)


def _records(alg, key, **kw) -> bytes:
    with CaptureReader(SAMPLES / "sample.pcap") as r:
        e = DigestEngine(r, alg, 0, key, **kw)
        out, seq = [], 0
        while True:
            view, n, _ = e.fill(seq, 7)  # odd fills: passes end inside reader batches
            if n == 0:
                return b"".join(out)
            out.append(bytes(view))
            seq += n


@pytest.mark.parametrize("name", ["siphash-1-3-128", "blake3-keyed-128", "aes-128-gmac"])
def test_engine_records_do_not_depend_on_workers_or_batch(name):
    alg = ALGORITHMS[name]
    key = bytes(range(alg.key_size))
    want = _records(alg, key, workers=1, batch=1)
    for workers, batch in ((1, 0), (1, 3), (2, 0), (2, 5), (3, 64), (4, 4096)):
        assert _records(alg, key, workers=workers, batch=batch) == want, (workers, batch)


def test_engine_workers_on_a_big_capture(tmp_path):
    """Passes large enough to be split across threads (the sample is too small for that)."""
    from ledgertool.bench.measure import write_synthetic_pcap

    pcap = tmp_path / "big.pcap"
    write_synthetic_pcap(pcap, 20_000, 64)
    alg = ALGORITHMS["siphash-1-3-128"]
    key = bytes(16)

    def run(workers, batch):
        with CaptureReader(pcap) as r:
            e = DigestEngine(r, alg, 0, key, batch_records=6000, workers=workers, batch=batch)
            out, seq = [], 0
            while True:
                view, n, _ = e.fill(seq)
                if n == 0:
                    return b"".join(out)
                out.append(bytes(view))
                seq += n

    want = run(1, 0)
    assert len(want) == 20_000 * 48
    assert run(2, 0) == want and run(2, 1000) == want and run(5, 0) == want


def test_engine_rejects_bad_workers():
    from ledgertool.errors import UsageError

    alg = ALGORITHMS["siphash-1-3-128"]
    with CaptureReader(SAMPLES / "sample.pcap") as r:
        with pytest.raises(UsageError, match="workers"):
            DigestEngine(r, alg, 0, bytes(16), workers=0)


@pytest.mark.parametrize("path", ["default", "portable"])
@pytest.mark.parametrize(
    "record_size,count,leaf",
    [
        (48, 0, 4),
        (48, 1, 1),
        (48, 5, 2),
        (64, 1000, 256),
        (48, 4096, 1024),
        (48, 3, 1024),
        (64, 33, 8),
        (48, 70000, 65536),
    ],
)
def test_c_merkle_leaves_equal_python(path, record_size, count, leaf):
    hmac_alg = ALGORITHMS["hmac-sha256-128"]
    force_cpu_path(hmac_alg, None if path == "default" else path)
    try:
        data = random.Random(count).randbytes(record_size * count)
        assert merkle_leaves(data, record_size, leaf) == b"".join(
            merkle.records_leaf_hashes(data, record_size, leaf)
        )
    finally:
        force_cpu_path(hmac_alg, None)


@pytest.mark.parametrize("path", ["default", "portable"])
def test_c_merkle_root_equals_python_and_published(path):
    """lt_merkle_root against the RFC 9162 roots of tests/vectors (sizes 0..8, via
    ledgertool.seal.merkle's published-vector tests) and the pure-Python tree for every size up
    to 300 and a 1 M-record segment's 15,625 leaves."""
    from test_merkle import LEAF_HASHES, ROOTS

    from ledgertool.digest.engine import merkle_root

    hmac_alg = ALGORITHMS["hmac-sha256-128"]
    force_cpu_path(hmac_alg, None if path == "default" else path)
    try:
        for size in range(9):
            assert merkle_root(b"".join(LEAF_HASHES[:size])) == ROOTS[size]
        rng = random.Random(9162)
        for n in list(range(1, 301)) + [15625]:
            leaves = [rng.randbytes(32) for _ in range(n)]
            assert merkle_root(b"".join(leaves)) == merkle.root_from_leaf_hashes(leaves), n
        with pytest.raises(ValueError, match="multiple of 32"):
            merkle_root(bytes(33))
    finally:
        force_cpu_path(hmac_alg, None)


@pytest.mark.parametrize("tail", ["corrupt", "truncated", "clean"])
def test_engine_read_ahead_keeps_records_and_the_end(tmp_path, tail):
    """With several workers the reader reads the next batch while the workers digest the current
    one: records, their order, and how reading ends (clean EOF, truncated last record, corrupt
    header after every earlier frame) are those of one worker."""
    import struct

    from ledgertool.bench.measure import write_synthetic_pcap
    from ledgertool.errors import CaptureFormatError

    pcap = tmp_path / "ra.pcap"
    write_synthetic_pcap(pcap, 9_000, 80)
    with open(pcap, "ab") as f:
        if tail == "corrupt":
            f.write(struct.pack("<IIII", 0, 0, 1 << 30, 60) + bytes(60))  # caplen > 256 MiB
        elif tail == "truncated":
            f.write(struct.pack("<IIII", 0, 0, 100, 100) + bytes(40))
    alg = ALGORITHMS["siphash-1-3-128"]

    def run(workers, batch, fill):
        out, seq, err = [], 0, None
        with CaptureReader(pcap) as r:
            e = DigestEngine(r, alg, 0, bytes(16), batch_records=fill, workers=workers, batch=batch)
            try:
                while True:
                    view, n, _ = e.fill(seq)
                    if n == 0:
                        break
                    out.append(bytes(view))
                    seq += n
            except CaptureFormatError as exc:
                err = str(exc)
            return b"".join(out), err, r.info().truncated

    want = run(1, 0, 4096)
    assert len(want[0]) == 9_000 * 48 and (want[1] is not None) == (tail == "corrupt")
    assert want[2] == (tail == "truncated")
    for workers, batch, fill in ((2, 1024, 4096), (2, 1000, 700), (3, 2048, 2048), (2, 0, 65536)):
        assert run(workers, batch, fill) == want, (workers, batch, fill)


def test_engine_profile_runs_the_engine_loop_and_counts_every_frame():
    """lt_engine_profile (scripts/hotpath_account.py) times the engine's own stages: its records
    equal lt_engine_fill's, every frame is counted, each stage took time, and a skipped digest
    leaves the digest bytes alone."""
    from ledgertool._binding import ffi, lib

    alg = ALGORITHMS["siphash-1-3-128"]
    key = bytes(range(16))
    want = _records(alg, key)
    n = len(want) // (32 + 16)
    assert 0 < n < lib.LT_ENGINE_BATCH_DEFAULT  # one batch: `out` ends up holding every record
    for digest in (1, 0):
        with CaptureReader(SAMPLES / "sample.pcap") as r:
            e = DigestEngine(r, alg, 0, key)
            out = ffi.new("uint8_t[]", lib.LT_ENGINE_BATCH_DEFAULT * e.record_size)
            ns, frames = ffi.new("uint64_t[3]"), ffi.new("uint64_t *")
            assert (
                lib.lt_engine_profile(
                    e._e, out, lib.LT_ENGINE_BATCH_DEFAULT - 1, digest, ns, frames
                )
                == lib.LT_ERR_ARG
            )
            assert (
                lib.lt_engine_profile(e._e, out, lib.LT_ENGINE_BATCH_DEFAULT, digest, ns, frames)
                == lib.LT_OK
            )
            got = bytes(ffi.buffer(out, n * e.record_size))
        assert frames[0] == n
        assert ns[0] > 0 and ns[1] > 0 and (ns[2] > 0) == bool(digest)
        if digest:
            assert got == want
        else:
            recs = [got[i * 48 : (i + 1) * 48] for i in range(n)]
            assert [x[:32] for x in recs] == [want[i * 48 : i * 48 + 32] for i in range(n)]
            assert all(x[32:] == bytes(16) for x in recs)  # ffi.new zeroes; not written


@pytest.mark.parametrize("path", ["default", "portable"])
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    record_size=st.sampled_from([48, 64]),
    count=st.integers(0, 2100),
    leaf_log2=st.integers(0, 10),
    seed=st.integers(0, 2**32 - 1),
)
def test_merkle_leaves_four_streams_equal_hashlib(path, record_size, count, leaf_log2, seed):
    """lt_merkle_leaves hashes whole leaves four at a time (interleaved SHA-NI streams) and the
    rest one at a time: every count (groups of four, a remainder of 1-3 whole leaves, a short last
    leaf) and every leaf length (below one SHA-256 block up to many) gives hashlib's bytes, on the
    default path and on the forced portable one."""
    hmac_alg = ALGORITHMS["hmac-sha256-128"]
    force_cpu_path(hmac_alg, None if path == "default" else path)
    try:
        if path == "default" and "sha-ni" in cpu_paths(hmac_alg):
            assert cpu_path(hmac_alg) == "sha-ni"
        leaf = 1 << leaf_log2
        data = random.Random(seed).randbytes(record_size * count)
        want = b"".join(
            hashlib.sha256(b"\x00" + data[i : i + leaf * record_size]).digest()
            for i in range(0, len(data), leaf * record_size)
        )
        assert merkle_leaves(data, record_size, leaf) == want
    finally:
        force_cpu_path(hmac_alg, None)


def test_merkle_leaves_each_stream_is_its_own_leaf():
    """A change in one leaf of a group of four changes exactly that leaf's hash (the streams do not
    share a state or a staging buffer)."""
    data = bytearray(random.Random(14).randbytes(48 * 256 * 4))
    before = merkle_leaves(bytes(data), 48, 256)
    for k in range(4):
        changed = bytearray(data)
        changed[k * 48 * 256 + 100] ^= 1
        after = merkle_leaves(bytes(changed), 48, 256)
        assert [before[32 * i : 32 * i + 32] != after[32 * i : 32 * i + 32] for i in range(4)] == [
            i == k for i in range(4)
        ]
