"""Issue 14: on tmpfs the pages of an open segment are reserved (fallocate FALLOC_FL_KEEP_SIZE) on
a thread of their own, ahead of the writer thread, which then only copies into them
(ledger.segment.SegmentWriter.preallocate; docs/benchmarks.md, "capture:sealed on tmpfs: pages
allocated off the writer thread"). The file's size and bytes never change, what the records did
not use is given back at close, nothing is reserved elsewhere or when the file system is short."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.digest.record import record_dtype
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.openmac import OpenSegmentKey
from ledgertool.ledger.writer import LinkWriter, segment_bytes
from ledgertool.ledger.layout import checkpoint_path
from ledgertool.verify.ledger import verify_ledger

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
PAGE = 4096


def _tmpfs_dir() -> Path | None:
    if not os.path.isdir("/dev/shm"):
        return None
    fd = os.open("/dev/shm", os.O_RDONLY | os.O_DIRECTORY)
    try:
        return Path("/dev/shm") if segments._on_tmpfs(fd) else None
    finally:
        os.close(fd)


@pytest.fixture()
def shm():
    base = _tmpfs_dir()
    if base is None:
        pytest.skip("needs a tmpfs at /dev/shm")
    with tempfile.TemporaryDirectory(prefix="lt-prealloc-", dir=base) as d:
        yield Path(d)


def _header(key: OpenSegmentKey, created_ns: int) -> segments.SegmentHeader:
    return segments.SegmentHeader("0" * 31 + "1", "link0", 0, "siphash-1-3-128", "frame", "ab" * 16, 48, 16,
                                  256, 7, created_ns, key.key_id)


def _records(n: int, first_seq: int, rng: np.random.Generator) -> bytes:
    arr = np.zeros(n, dtype=record_dtype(16))
    arr["seq"] = np.arange(first_seq, first_seq + n, dtype=np.uint64)
    arr["ts_ns"] = np.sort(rng.integers(1, 1 << 62, n))
    arr["digest"] = np.frombuffer(rng.bytes(16 * n), dtype="V16")
    return arr.tobytes()


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def _pages(size: int) -> int:
    return -(-size // PAGE) * PAGE


def test_item14_prealloc_reserves_pages_and_changes_no_byte(shm):
    """4 MiB reserved at once (the size stays the header's), the records written into them are the
    bytes a writer without the reservation writes, and close gives back every page past the end."""
    rng = np.random.default_rng(5)
    key = OpenSegmentKey(rng.bytes(32), "cd" * 16)
    header = _header(key, time.time_ns())
    recs = _records(20_000, 7, rng)
    pre = segments.SegmentWriter(shm / "a.open", header, key)
    plain = segments.SegmentWriter(shm / "b.open", header, key)
    assert pre.preallocate(4 << 20) == 4 << 20
    assert os.stat(shm / "a.open").st_size == segments.HEADER_SIZE and _allocated(shm / "a.open") >= 4 << 20
    for w in (pre, plain):
        for a in range(0, 20_000, 3000):
            b = min(a + 3000, 20_000)
            w.append(memoryview(recs)[a * 48:b * 48], b - a)
    assert pre.finish() == plain.finish()
    pre.close()
    plain.close()
    raw = (shm / "a.open").read_bytes()
    assert raw == (shm / "b.open").read_bytes() and len(raw) > 20_000 * 48
    assert _allocated(shm / "a.open") == _pages(len(raw)) == _allocated(shm / "b.open")
    assert pre.preallocate(4 << 20) == 0  # closed: never an fallocate on a descriptor number reused since


def test_item14_prealloc_is_bounded_and_keeps_room(shm, monkeypatch):
    """At most PREALLOC_MAX from the file's start; none where the file system would keep less than
    PREALLOC_RESERVE free."""
    key = OpenSegmentKey(bytes(32), "cd" * 16)
    monkeypatch.setattr(segments, "PREALLOC_MAX", 3 << 20)
    w = segments.SegmentWriter(shm / "a.open", _header(key, 1), key)
    assert w.preallocate(1 << 30) == 3 << 20 and _allocated(shm / "a.open") == 3 << 20
    w.release()
    assert _allocated(shm / "a.open") == PAGE  # the header's page
    st = os.statvfs(shm)
    monkeypatch.setattr(segments, "PREALLOC_RESERVE", st.f_bavail * st.f_frsize)
    w2 = segments.SegmentWriter(shm / "b.open", _header(key, 1), key)
    assert w2.preallocate(4 << 20) == 0 and _allocated(shm / "b.open") == PAGE
    w.close()
    w2.close()


def test_item14_no_prealloc_off_tmpfs(tmp_path):
    """Elsewhere (ext4: measured slower, docs/benchmarks.md) nothing is reserved."""
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if segments._on_tmpfs(fd):
            pytest.skip("tmp_path is on tmpfs")
    finally:
        os.close(fd)
    key = OpenSegmentKey(bytes(32), "cd" * 16)
    w = segments.SegmentWriter(tmp_path / "a.open", _header(key, 1), key)
    before = _allocated(tmp_path / "a.open")
    assert w.preallocate(4 << 20) == 0 and _allocated(tmp_path / "a.open") == before
    w.close()


def test_item14_capture_preallocates_on_its_own_thread_and_leaves_nothing_reserved(shm, keydir, monkeypatch):
    """capture reserves each new segment (sized for a full one) on the ledgertool-prealloc thread;
    every sealed record file then holds exactly its pages, and the ledger verifies."""
    dk, sk, trust = load_keys(keydir)
    calls: list[tuple[str, int, int]] = []
    real = segments.SegmentWriter.preallocate

    def spy(self, nbytes):
        got = real(self, nbytes)
        calls.append((threading.current_thread().name, nbytes, got))
        return got

    monkeypatch.setattr(segments.SegmentWriter, "preallocate", spy)
    ledger = shm / "L"
    res = capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100, ledger_format=2)
    assert res.frames == 294 and len(calls) == 3
    want = segment_bytes(load_ledger(ledger), 100)
    assert all(t.startswith("ledgertool-prealloc") and n == want for t, n, _ in calls), calls
    assert want >= segments.HEADER_SIZE + 100 * 48
    for i in range(3):
        rec = layout.records_path(ledger, "link0", i)
        assert _allocated(rec) == _pages(rec.stat().st_size), i
    v = verify_ledger(ledger, trust, checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and v.records == 294, v.problems


def test_item14_segment_left_open_gives_back_its_reservation(shm, keydir):
    """A writer closed with its segment still open (left for `recover`): the file keeps its bytes,
    and the pages reserved past them are given back."""
    dk, sk, _ = load_keys(keydir)
    ledger = shm / "L"
    capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=1000, ledger_format=2)
    lg = load_ledger(ledger)
    w = LinkWriter.open(ledger, lg, "link0", sk, source="test", segment_records=1_000_000)
    try:
        w.append(_records(5000, w.next_seq, np.random.default_rng(2)), 5000)
        deadline = time.monotonic() + 10
        path = layout.open_segment_path(ledger, "link0", 1)
        while _allocated(path) <= _pages(path.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.01)  # the reservation, made on the prealloc thread
        assert _allocated(path) > _pages(path.stat().st_size)
        size = path.stat().st_size
    finally:
        w.close()
    assert path.stat().st_size == size == segments.HEADER_SIZE + 5000 * 48 + 2 * 36  # 19 leaves | 136
    assert _allocated(path) == _pages(path.stat().st_size)
