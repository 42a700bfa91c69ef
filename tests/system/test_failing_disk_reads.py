"""A disk that fails reads (EIO) under a ledger or a capture: every command that reads the file
ends at once with exit 2 and one line naming it, never hangs and never dies of a signal.

The failing device is real: an ext4 file system on a loop device (tests/loop_ext4.py) whose
backing image is cut at the first block of one file, placed above every other file, whose cached
pages are then dropped, so that reading the file goes to the block layer and gets EIO there
(`dd` fails the same way). Needs root, losetup, mkfs.ext4 and filefrag (e2fsprogs); skips with the
reason otherwise. Mapping such a file with MAP_POPULATE used to wait in the kernel for ever; a
capture file's mapped header killed the process with SIGBUS.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLES, load_keys, run_cli
from loop_ext4 import cut_image, ext4_on_loop

from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.capture.run import capture_file

TIMEOUT = 60  # s: a command that reads a few KiB and fails; a hang runs into it and fails the test
EIO_LINE = "Input/output error; the storage reported an I/O error: check the device (dmesg)"


@contextlib.contextmanager
def _ext4_on_loop(base: Path):
    """(mount point, cut(path, skip_blocks)) of an ext4 on a loop device (tests/loop_ext4.py);
    cut(path) makes reads of `path` from its block `skip_blocks` on fail with EIO."""
    if not shutil.which("filefrag"):
        pytest.skip("needs filefrag (e2fsprogs)")
    with ext4_on_loop(base) as (mnt, img, dev):

        def cut(path: Path, skip_blocks: int = 0) -> None:
            os.sync()
            cut_image(img, dev, (_extents(path)[0][0] + skip_blocks) * 1024)
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # clean pages: dropped
            finally:
                os.close(fd)
            probe = subprocess.run(
                ["dd", f"if={path}", "of=/dev/null", f"skip={skip_blocks}", "bs=1024", "count=1"],
                capture_output=True,
                text=True,
                check=False,
            )
            assert "Input/output error" in probe.stderr, probe.stderr  # the device really fails

        yield mnt, cut


def _extents(path: Path) -> list[tuple[int, int]]:
    """The physical (first, last) 1 KiB blocks of each extent of `path` (a file or directory)."""
    out = subprocess.run(
        ["filefrag", "-v", "-b1024", str(path)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    rows = [line.split(":") for line in out if line.strip()[:1].isdigit()]
    return [tuple(int(b) for b in row[2].replace(" ", "").split("..")) for row in rows]


def _place_above_the_rest(path: Path, tree: Path) -> None:
    """Give `path` blocks above every other file and directory of `tree`, so that cutting the
    image at its first block leaves the rest readable. Small files share a preallocated pool per
    CPU, so the order of allocation depends on which CPU wrote them: write copies from each CPU in
    turn (fsync in the writer's own context) until one lands above the rest, then rename it in."""
    data, spare = path.read_bytes(), tree.parent / "spare"
    spare.mkdir(exist_ok=True)
    others = [p for p in [tree, *tree.rglob("*")] if p != path]
    top = max(last for p in others for _, last in _extents(p))
    cpus, saved = sorted(os.sched_getaffinity(0)), os.sched_getaffinity(0)
    try:
        for attempt in range(4 * len(cpus)):
            os.sched_setaffinity(0, {cpus[attempt % len(cpus)]})
            copy = spare / f"copy{attempt}"
            with open(copy, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if _extents(copy)[0][0] > top:
                os.replace(copy, path)
                return
    finally:
        os.sched_setaffinity(0, saved)
    pytest.fail(f"no copy of {path.name} landed above block {top} of the other files")


def _one_line_naming(r: subprocess.CompletedProcess, path: Path) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"ledgertool: error: {path}: "), r.stderr
    assert EIO_LINE in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def ledger_on_failing_disk(tmp_path_factory, keydir):
    """A 294-record ledger (segments of 100) whose last sealed segment's `.rec` cannot be read."""
    base = tmp_path_factory.mktemp("eio")
    with _ext4_on_loop(base) as (mnt, cut):
        dk, sk, _ = load_keys(keydir)
        ledger = mnt / "L"
        capture_file(
            SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=sk, segment_records=100
        )
        rec = ledger / "link=link0" / "seg-00000002.rec"
        _place_above_the_rest(rec, ledger)
        cut(rec)
        for f in ledger.rglob("*"):  # every read now goes to the device: none is served from cache
            if f.is_file():
                fd = os.open(f, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
        yield ledger, rec


@pytest.mark.parametrize("command", ["verify", "query", "prove", "recompute"])
def test_unreadable_sealed_segment_ends_the_command_with_one_line(
    command, ledger_on_failing_disk, keydir, tmp_path
):
    ledger, rec = ledger_on_failing_disk
    args = {
        "verify": ["verify", ledger, "--trust", keydir / "verifier.pub"],
        "query": [
            "query",
            ledger,
            "SELECT count(*) FROM records",
            "--trust",
            keydir / "verifier.pub",
        ],
        "prove": ["prove", ledger, "--seq", "250", "--out", tmp_path / "proof.json"],
        "recompute": [
            "recompute",
            SAMPLES / "sample.pcap",
            "--ledger",
            ledger,
            "--digest-key",
            keydir / "digest.key",
            "--trust",
            keydir / "verifier.pub",
        ],
    }[command]
    line = _one_line_naming(run_cli(*args, timeout=TIMEOUT), rec)
    # the first byte read fails
    assert ": cannot read byte 0 of the raw record file: " in line, line
    assert not (tmp_path / "proof.json").exists()


@pytest.mark.parametrize("skip_blocks", [0, 96])
def test_unreadable_capture_file_is_one_line_not_a_signal(skip_blocks, tmp_path, keydir):
    """The capture reader maps its file: a page the disk fails faults (SIGBUS) like a page cut off
    by truncation. Its header (block 0) and a page in the middle (block 96 of ~160) are each one
    line naming the file and the byte, told apart from a file that shrank."""
    with _ext4_on_loop(tmp_path) as (mnt, cut):
        pcap = mnt / "c.pcap"
        write_synthetic_pcap(pcap, 2000, 64, seed=3)
        cut(pcap, skip_blocks)
        r = run_cli(
            "capture",
            pcap,
            "--ledger",
            tmp_path / "L",
            "--digest-key",
            keydir / "digest.key",
            "--signing-key",
            keydir / "signing.key",
            timeout=TIMEOUT,
        )
        line = _one_line_naming(r, pcap)
        byte = int(line.split(": cannot read byte ")[1].split(":")[0])
        # the first page that fails
        assert skip_blocks * 1024 <= byte < skip_blocks * 1024 + 4096, line
