"""Frames that end at an unmapped page are read without a fault (a guarded mapping in a child
process)."""

from __future__ import annotations

import pytest
from test_gmac_multiframe import (  # noqa: F401  (shared with the in-process tests)
    GMAC,
)

from ledgertool.digest.engine import (
    cpu_paths,
)

GUARD_SCRIPT = r"""
import ctypes, mmap, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from ledgertool._binding import ffi, lib
from ledgertool.algorithms import ALGORITHMS
from ledgertool.digest.engine import force_cpu_path

alg = ALGORITHMS["aes-128-gmac"]
force_cpu_path(alg, sys.argv[1])
page = mmap.PAGESIZE
lens = [1, 15, 16, 17, 63, 64, 65, 100, 191, 255, 256, 257, 511, 513, 1500, 9000]
data = -(-max(lens) // page) * page
slot = data + page  # each frame gets its own pages, followed by one PROT_NONE page
region = mmap.mmap(-1, slot * len(lens), prot=mmap.PROT_READ | mmap.PROT_WRITE)
base = ctypes.addressof(ctypes.c_char.from_buffer(region))
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
key = bytes(range(16))
msgs = []
for k, n in enumerate(lens):
    end = k * slot + data  # the frame ends exactly at its guard page
    region[end - n:end] = bytes((i * 7 + n) & 0xFF for i in range(n))
    if libc.mprotect(base + end, page, 0) != 0:  # any read past the frame faults
        sys.exit("mprotect failed")
    msgs.append((ffi.cast("const uint8_t *", base + end - n), bytes(region[end - n:end])))
ptrs = ffi.new("const uint8_t *[]", [p for p, _ in msgs])
cl = ffi.new("uint32_t[]", lens)
out = ffi.new("uint8_t[]", 16 * len(lens))
for i in range(len(lens)):  # each frame in each lane position and as the last of a padded group
    for j in range(1, 5):
        if i + j > len(lens):
            break
        assert lib.lt_digest_many(alg.native_id, key, ptrs + i, cl + i, j, out, 16) == 0
        got = [bytes(ffi.buffer(out + 16 * k, 16)) for k in range(j)]
        want = [AESGCM(key).encrypt(bytes(12), b"", m) for _, m in msgs[i:i + j]]
        assert got == want, lens[i:i + j]
print("ok", len(lens))
"""


@pytest.mark.parametrize("path", cpu_paths(GMAC))
def test_frames_ending_at_an_unmapped_page_are_read_without_a_fault(path):
    """The tails are read with masked loads: bytes past the frame are never touched, even where the
    next page is unmapped (a fault there would kill the child with SIGSEGV)."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", GUARD_SCRIPT, path], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert r.stdout.split() == ["ok", "16"]
