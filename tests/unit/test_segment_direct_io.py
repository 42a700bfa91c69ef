"""Open segments written with O_DIRECT (native/src/segment_writer.c, lt_segment_writer_direct).

- The closed file's bytes are exactly those of the page-cache path, for any split into appends,
  on a disk file system and on tmpfs; while open, the file holds every appended block, then zeros
  to a 4 KiB boundary, which the parser counts as padding, not as a torn block.
- Where the file system refuses O_DIRECT the writer falls back to the page cache (same bytes).
- A crash mid-segment (the file as the last append left it, padding and all, or cut at a page
  boundary inside a block) is recovered like any open segment: the authenticated prefix is sealed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import load_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ledger_files import sealed_records

from ledgertool.digest.record import record_dtype
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.openmac import OpenSegmentKey
from ledgertool.ledger.recover import recover_ledger
from ledgertool.verify.ledger import verify_ledger

SHM = Path("/dev/shm")
PAGE = 4096


def takes_o_direct(directory: Path) -> bool:
    """Whether the file system of `directory` opens a file with O_DIRECT (asked of the kernel
    directly, not through ledgertool)."""
    probe = directory / "o_direct.probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
    except OSError as e:
        assert e.errno == errno.EINVAL
        return False
    finally:
        probe.unlink(missing_ok=True)
    os.close(fd)
    return True


def _records(n: int, rng: np.random.Generator) -> bytes:
    arr = np.zeros(n, dtype=record_dtype(16))
    arr["seq"] = np.arange(n) + 7
    arr["ts_ns"] = np.sort(rng.integers(1, 1 << 62, n))
    arr["aux"] = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    arr["digest"] = [rng.bytes(16) for _ in range(n)]
    return arr.tobytes()


def _writer(path: Path, key: OpenSegmentKey, leaf: int, mode: str, monkeypatch):
    monkeypatch.setenv(segments.SEGMENT_IO_ENV, mode)
    header = segments.SegmentHeader(
        "0" * 31 + "1",
        "link0",
        0,
        "siphash-1-3-128",
        "frame",
        "ab" * 16,
        48,
        16,
        leaf,
        7,
        1_700_000_000_000_000_000,
        key.key_id,
    )
    return segments.SegmentWriter(path, header, key)


def _o_direct(w: segments.SegmentWriter) -> bool:
    return bool(fcntl.fcntl(w._fd, fcntl.F_GETFL) & os.O_DIRECT)


def _write_both(directory: Path, batches: list[int], leaf: int, monkeypatch) -> tuple[bytes, bytes]:
    """The same records in the same appends by the page-cache writer and the direct one: the two
    closed files' bytes. After each append both open files frame the same blocks."""
    rng = np.random.default_rng(sum(batches) + leaf)
    key = OpenSegmentKey(rng.bytes(32), "cd" * 16)
    recs = _records(sum(batches), rng)
    paths = [directory / f"{mode}.open" for mode in ("buffered", "direct")]
    for p in paths:
        p.unlink(missing_ok=True)
    plain = _writer(paths[0], key, leaf, "buffered", monkeypatch)
    direct = _writer(paths[1], key, leaf, "direct", monkeypatch)
    assert not plain.direct and not _o_direct(plain)
    assert direct.direct == _o_direct(direct) == takes_o_direct(directory)
    at = 0
    for n in batches:
        for w in (plain, direct):
            w.append(memoryview(recs)[at * 48 : (at + n) * 48], n)
        at += n
        a, b = (segments.read_open_segment(p) for p in paths)
        assert b.blocks == a.blocks and b.torn_bytes == a.torn_bytes == a.padding == 0
        assert b.size % PAGE == 0 and b.padding == b.size - a.size < PAGE  # every block is in
    commits = [w.finish() if at else None for w in (plain, direct)]
    assert commits[0] == commits[1]
    for w in (plain, direct):
        w.close()
    return paths[0].read_bytes(), paths[1].read_bytes()


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=st.lists(st.integers(0, 12_000), min_size=1, max_size=5),
    leaf=st.sampled_from([1, 16, 256]),
)
def test_direct_segment_file_is_byte_identical_to_the_page_cache_one(
    tmp_path_factory, monkeypatch, batches, leaf
):
    """Appends of 0..12,000 records, on the disk under the test's temporary directory: the same
    bytes, the header-only file of no append included."""
    plain, direct = _write_both(tmp_path_factory.mktemp("dio"), batches, leaf, monkeypatch)
    assert direct == plain and len(plain) >= segments.HEADER_SIZE


def test_appends_past_the_staging_buffer_are_byte_identical(tmp_path, monkeypatch):
    """Appends that fill the 4 MiB staging buffer (87,381 48-byte records) and go on past it, one
    more than once: the same bytes."""
    plain, direct = _write_both(tmp_path, [70_000, 30_000, 1, 190_000], 64, monkeypatch)
    # blocks of 70,000 records: 65,536, 4,416 (whole leaves); 48 | 16, 29,952, 32 | 1 |
    # 31 (leaf completed), 65,536, 65,536, 58,880 (whole leaves), 17
    assert direct == plain and len(plain) == 256 + 12 * 36 + 290_001 * 48


@pytest.mark.skipif(not SHM.is_dir(), reason="no /dev/shm")
def test_tmpfs_segment_files_are_the_same_with_or_without_o_direct(tmp_path, monkeypatch):
    """On tmpfs the writer uses O_DIRECT where the kernel takes it there (Linux 6.6 and later) and
    the page cache where it answers EINVAL: the same bytes either way."""
    d = SHM / f"ledgertool-test-{os.getpid()}-{time.monotonic_ns()}"
    d.mkdir()
    try:
        plain, direct = _write_both(d, [3, 5000, 0, 9000, 17], 16, monkeypatch)
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()
    # blocks of 3 | 13, 4976, 11 | 5, 8992, 3 | 13, 4 records (leaf-aligned), each 4 + 48 n + 32
    assert direct == plain and len(plain) == 256 + 9 * 36 + 14_020 * 48


def test_a_file_system_refusing_o_direct_gets_the_page_cache_path(tmp_path, monkeypatch):
    """F_SETFL O_DIRECT answered EINVAL (tmpfs before Linux 6.6, FUSE): the segment is written
    through the page cache, still opened for appending only, with the same bytes."""
    real = fcntl.fcntl

    def refusing(fd, cmd, arg=0):
        if cmd == fcntl.F_SETFL and arg & os.O_DIRECT:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        return real(fd, cmd, arg)

    rng = np.random.default_rng(5)
    key = OpenSegmentKey(rng.bytes(32), "cd" * 16)
    recs = _records(3000, rng)
    monkeypatch.setattr(fcntl, "fcntl", refusing)
    w = _writer(tmp_path / "refused.open", key, 16, "direct", monkeypatch)
    flags = real(w._fd, fcntl.F_GETFL)
    assert not w.direct and not flags & os.O_DIRECT and flags & os.O_APPEND
    w.append(recs, 3000)
    w.finish()
    w.close()
    monkeypatch.undo()
    v = _writer(tmp_path / "buffered.open", key, 16, "buffered", monkeypatch)
    v.append(recs, 3000)
    v.finish()
    v.close()
    assert (tmp_path / "refused.open").read_bytes() == (tmp_path / "buffered.open").read_bytes()


# ---- crash mid-segment, then recover ---------------------------------------------------------


def _crashed_open_segment(ledger: Path, sk, monkeypatch, batches: list[int]) -> tuple[Path, int]:
    """Segment 3 of `ledger` (3 sealed segments), written with O_DIRECT in `batches` appends and
    left as a killed capture leaves it (no trim, no fsync): its path and the records appended."""
    lg = load_ledger(ledger)
    prev = np.frombuffer(sealed_records(ledger, 2), dtype=record_dtype(lg.digest_size))
    n = sum(batches)
    recs = np.resize(prev, n)
    recs["seq"] = np.arange(n) + int(prev["seq"][-1]) + 1
    key = OpenSegmentKey.derive(sk, lg.ledger_id)
    header = segments.SegmentHeader(
        lg.ledger_id,
        "link0",
        3,
        lg.algorithm,
        lg.strip,
        lg.digest_key_id,
        lg.record_size,
        lg.digest_size,
        lg.leaf_records,
        int(recs["seq"][0]),
        time.time_ns(),
        key.key_id,
    )
    path = layout.open_segment_path(ledger, "link0", 3)
    monkeypatch.setenv(segments.SEGMENT_IO_ENV, "direct")
    w = segments.SegmentWriter(path, header, key, ledger)
    raw, at = recs.tobytes(), 0
    for b in batches:
        w.append(memoryview(raw)[at * lg.record_size : (at + b) * lg.record_size], b)
        at += b
    os.close(w._fd)  # the process dies here: nothing trims the padding or syncs
    w._fd = -1
    return path, n


def test_crash_after_an_append_recovers_every_record(sample_ledger, keydir, monkeypatch):
    """Killed between appends: the file is every block and zero padding to 4 KiB; verify reports
    an open (not a torn) segment, recover seals every record and discards nothing."""
    _, sk, trust = load_keys(keydir)
    path, n = _crashed_open_segment(sample_ledger, sk, monkeypatch, [1, 7000, 333, 9001])
    seg = segments.read_open_segment(path)
    assert (seg.count, seg.torn_bytes) == (n, 0) and 0 < seg.padding < PAGE
    assert seg.size % PAGE == 0
    v = verify_ledger(sample_ledger, trust)
    assert v.ok and [(w.kind, w.segment) for w in v.warnings] == [("open_segment", 3)]
    rec = recover_ledger(sample_ledger, sk)
    assert [(r.index, r.records, r.torn_bytes) for _, r in rec.sealed] == [(3, n, 0)]
    cp = layout.checkpoint_path(sample_ledger, "link0").read_bytes()
    v = verify_ledger(sample_ledger, trust, cp)
    assert v.ok and v.records == 294 + n and not v.warnings


def test_crash_inside_an_append_recovers_the_authenticated_prefix(
    sample_ledger, keydir, monkeypatch
):
    """Killed inside an append, between two page writes: the file ends at a page boundary inside
    its block of whole leaves. recover seals the blocks before it and discards the rest as torn."""
    _, sk, trust = load_keys(keydir)
    path, n = _crashed_open_segment(sample_ledger, sk, monkeypatch, [5, 20_000])
    whole = segments.read_open_segment(path)
    i, big = max(enumerate(whole.blocks), key=lambda b: b[1].count)
    cut = (big.offset // PAGE + 2) * PAGE  # two pages into it
    assert cut < big.offset + 4 + len(big.records) and i > 0
    os.truncate(path, cut)
    seg = segments.read_open_segment(path)
    assert seg.blocks == whole.blocks[:i] and seg.torn_bytes == cut - big.offset
    assert seg.padding == 0
    rec = recover_ledger(sample_ledger, sk)
    kept = sum(b.count for b in whole.blocks[:i])
    assert [(r.index, r.records, r.torn_bytes) for _, r in rec.sealed] == [
        (3, kept, cut - big.offset)
    ]
    cp = layout.checkpoint_path(sample_ledger, "link0").read_bytes()
    v = verify_ledger(sample_ledger, trust, cp)
    assert v.ok and v.records == 294 + kept


@pytest.mark.parametrize(
    ("tail", "padding"),
    [
        ("to the page", True),  # what a direct writer leaves
        ("one short", False),  # zeros that end before the page boundary
        ("a page more", False),  # 4,096 zeros or more
        ("a one among them", False),  # any non-zero byte
    ],
)
def test_only_zeros_to_the_next_page_boundary_are_padding(tmp_path, monkeypatch, tail, padding):
    """Bytes after the last whole block are padding only when all zero, fewer than 4,096, ending
    at a multiple of 4,096; anything else is torn. Either way no record comes from them."""
    rng = np.random.default_rng(2)
    key = OpenSegmentKey(rng.bytes(32), "cd" * 16)
    w = _writer(tmp_path / "s.open", key, 16, "buffered", monkeypatch)
    w.append(_records(40, rng), 40)
    w.finish()
    w.close()
    raw = (tmp_path / "s.open").read_bytes()
    to_page = -len(raw) % PAGE
    extra = {
        "to the page": bytes(to_page),
        "one short": bytes(to_page - 1),
        "a page more": bytes(to_page + PAGE),
        "a one among them": bytes(to_page - 9) + b"\x01" + bytes(8),
    }[tail]
    seg = segments.parse_open_segment(raw + extra, "s.open")
    whole = segments.parse_open_segment(raw, "s.open")
    assert seg.blocks == whole.blocks and seg.count == 40
    assert (seg.padding, seg.torn_bytes) == ((len(extra), 0) if padding else (0, len(extra)))
