"""A windows-only capture (`--tiers windows`) opens no per-frame writer: only the window log's
LinkWriter is opened, no per-frame writer thread runs, and the ledger it writes verifies with
the windows (indices, frames, wire bytes) of a capture of both tiers."""

from __future__ import annotations

import threading
from pathlib import Path

from conftest import SAMPLES, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.ledger import writer as writer_mod
from ledgertool.verify.ledger import verify_ledger

MS = 1_000_000
SAMPLE = SAMPLES / "sample.pcapng"  # 294 frames over 5.8 ms: six 1 ms windows


def _windows(ledger: Path, trust) -> list[tuple[int, int, int]]:
    """(index, frames, wire bytes) of the ledger's verified windows (their sums and cells are
    keyed per ledger)."""
    wins = []
    res = verify_ledger(ledger, trust, on_windows=wins.append)
    assert res.ok, res.problems
    return [(w.index, w.frames, w.wire_bytes) for seg in wins for w in seg.windows]


def test_a_windows_only_capture_opens_only_the_window_logs_writer(tmp_path, keydir, monkeypatch):
    dk, sk, trust = load_keys(keydir)
    opened: list[str] = []
    appenders: list[str] = []
    real_open = writer_mod.LinkWriter.open.__func__

    def spy(cls, ledger_dir, ledger, link, *a, **kw):
        opened.append(link)
        return real_open(cls, ledger_dir, ledger, link, *a, **kw)

    def count_threads():
        appenders.extend(t.name for t in threading.enumerate() if "append" in t.name)

    monkeypatch.setattr(writer_mod.LinkWriter, "open", classmethod(spy))
    res = capture_file(
        SAMPLE,
        tmp_path / "W",
        digest_key=dk,
        signing_key=sk,
        tiers=("windows",),
        window_ns=MS,
        progress=lambda *_: count_threads(),
    )
    assert opened == ["windows=link0"]
    assert appenders == []
    assert (res.frames, res.segments, res.windows.windows, res.first_seq) == (294, [], 6, 0)
    both = capture_file(
        SAMPLE,
        tmp_path / "B",
        digest_key=dk,
        signing_key=sk,
        tiers=("windows", "frames"),
        window_ns=MS,
        progress=lambda *_: count_threads(),
    )
    assert opened == ["windows=link0", "link0", "windows=link0"]
    assert appenders  # the per-frame writer's thread, which a windows-only capture lacks
    assert both.windows.windows == 6
    assert _windows(tmp_path / "W", trust) == _windows(tmp_path / "B", trust)
