"""A real block device that fails (tests/test_fs_safety.py, tests/test_failing_disk_reads.py): an
ext4 file system with 1 KiB blocks on a loop device over a 64 MiB image on its own tmpfs. Cutting
the image (`os.truncate(img, n)`, then `losetup -c dev`) under the mounted file system makes every
read or write of a block past the new end fail with EIO in the block layer. Root only; skips the
test with the reason where root, losetup, mkfs.ext4, a tmpfs or a loop device is missing."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def ext4_on_loop(base: Path) -> Iterator[tuple[Path, Path, str]]:
    """(mount point, backing image, loop device) under `base`; all undone on exit."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root, losetup and mkfs.ext4")
    back, mnt = base / "back", base / "ext4"
    back.mkdir()
    mnt.mkdir()
    tmpfs = ["mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", str(back)]
    if subprocess.run(tmpfs, capture_output=True, check=False).returncode:
        pytest.skip("cannot mount tmpfs")
    img, dev = back / "img", None
    try:
        subprocess.run(["truncate", "-s", "64M", str(img)], check=True)
        mkfs = ["mkfs.ext4", "-q", "-F", "-b", "1024", "-O", "^has_journal", str(img)]
        subprocess.run(mkfs, check=True)
        loop = subprocess.run(
            ["losetup", "-f", "--show", str(img)], capture_output=True, text=True, check=False
        )
        if loop.returncode:
            pytest.skip(f"no loop device here: {loop.stderr.strip()}")
        dev = loop.stdout.strip()
        if subprocess.run(["mount", dev, str(mnt)], capture_output=True, check=False).returncode:
            pytest.skip("cannot mount the ext4 image")
        yield mnt, img, dev
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        if dev:
            subprocess.run(["losetup", "-d", dev], check=False)
        subprocess.run(["umount", "-l", str(back)], check=False)


def cut_image(img: Path, dev: str, size: int) -> None:
    """Make the loop device `size` bytes long: blocks past it fail from now on (EIO)."""
    os.sync()
    os.truncate(img, size)
    subprocess.run(["losetup", "-c", dev], check=True)
