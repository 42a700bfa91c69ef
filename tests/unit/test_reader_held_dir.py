"""verify holds one descriptor of each link directory while it reads the link's segments
(LedgerReader.holding_link; the per-segment cost): every segment file is then
one openat(2) by name relative to it, O_NOFOLLOW and the regular-file checks as before, and no
descriptor outlives the walk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import load_keys

from ledgertool import fsio
from ledgertool.errors import FileTypeError
from ledgertool.ledger.reader import LedgerReader
from ledgertool.verify.ledger import verify_ledger


@pytest.fixture()
def ledger(sample_ledger) -> Path:
    return sample_ledger


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_segment_files_are_opened_relative_to_one_held_directory(ledger, keydir, monkeypatch):
    _, _, trust = load_keys(keydir)
    opens: list[tuple[str, int | None]] = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *, dir_fd=None):
        opens.append((os.fspath(path), dir_fd))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    before = _fds()
    monkeypatch.setattr(fsio.os, "open", spy)
    res = verify_ledger(ledger, trust)
    monkeypatch.undo()
    assert res.ok and res.segments >= 3, res.problems
    seg_opens = [(p, d) for p, d in opens if p.startswith("seg-") or "/seg-" in p]
    # the seal and the raw record file of each segment, by bare name, all relative to one descriptor
    assert len(seg_opens) == 2 * res.segments
    assert all("/" not in p and d is not None for p, d in seg_opens), seg_opens[:4]
    assert len({d for _, d in seg_opens}) == 1
    # the link directory is opened once for the walk (and not walked from the root per file)
    # the walk's hold + the checkpoint read
    assert sum(1 for p, _ in opens if p == "link=link0") == 1 + 1
    assert _fds() == before  # nothing left open


def test_a_held_directory_is_the_one_read_even_if_its_name_is_swapped(ledger, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(ledger / "link=link0", other)
    (other / "seg-00000000.seal.json").write_text('{"not": "the seal"}')
    reader = LedgerReader(ledger)
    want = (ledger / "link=link0" / "seg-00000000.seal.json").read_bytes()
    with reader.holding_link("link0"):
        os.rename(ledger / "link=link0", ledger / "moved")
        os.symlink(other, ledger / "link=link0")
        assert reader.read_seal_bytes("link0", 0) == want
    # without the hold, the planted link in place of the link directory is refused, never followed
    with pytest.raises(FileTypeError, match="symbolic link"):
        reader.read_seal_bytes("link0", 0)


def test_a_link_in_place_of_a_segment_file_is_refused_under_the_hold(ledger, tmp_path):
    seal = ledger / "link=link0" / "seg-00000001.seal.json"
    target = tmp_path / "elsewhere.json"
    target.write_bytes(seal.read_bytes())
    seal.unlink()
    seal.symlink_to(target)
    reader = LedgerReader(ledger)
    before = _fds()
    with (
        reader.holding_link("link0"),
        reader.holding_link("link0"),
    ):  # nested holds share one descriptor
        assert len(_fds() - before) == 1
        with pytest.raises(FileTypeError, match="symbolic link"):
            reader.read_seal_bytes("link0", 1)
        assert reader.read_seal_bytes("link0", 0)
    assert _fds() == before


def test_an_unopenable_link_directory_falls_back_to_the_per_file_reads(ledger):
    reader = LedgerReader(ledger)
    shutil.rmtree(ledger / "link=link0")
    with reader.holding_link("link0"):  # nothing to hold: each read says what is wrong, as before
        with pytest.raises(Exception) as e:
            reader.read_seal_bytes("link0", 0)
    assert "link=link0" in str(e.value) and "Traceback" not in str(e.value)
