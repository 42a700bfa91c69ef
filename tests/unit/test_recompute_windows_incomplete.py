"""recompute against window records of a capture that stops early (a corrupt record header):
the verdict says INCOMPLETE and a warning names the file and the byte where reading stopped, in
text and in --json, as the per-frame report does."""

from __future__ import annotations

import json
import struct

from conftest import SAMPLES, capture_windows, cli


def _corrupt_at_record(src, dst, k: int) -> int:
    """`src` with record k's captured length made larger than the snap length: its offset."""
    data = bytearray(src.read_bytes())
    off = 24
    for _ in range(k):
        off += 16 + struct.unpack_from("<I", data, off + 8)[0]
    struct.pack_into("<I", data, off + 8, 0x7FFFFFFF)
    dst.write_bytes(bytes(data))
    return off


def test_an_early_stop_is_said_with_the_file_and_byte(tmp_path, keydir):
    bad = tmp_path / "bad.pcap"
    off = _corrupt_at_record(SAMPLES / "sample.pcap", bad, 40)
    keys = ("--digest-key", keydir / "digest.key")
    led = tmp_path / "W"
    c = capture_windows(led, keydir, bad)
    assert c.returncode == 2 and f"byte {off}" in c.stderr, c.stderr
    args = ("recompute", bad, "--ledger", led, *keys, "--trust", keydir / "verifier.pub")
    text = cli(*args)
    assert text.returncode == 1, (text.stdout, text.stderr)
    assert "(INCOMPLETE: the capture stopped early)" in text.stdout
    assert "warning: INCOMPLETE: " in text.stderr and f"byte {off}" in text.stderr
    assert "compared the 40 frames read before it" in text.stderr
    doc = json.loads(cli(*args, "--json").stdout)
    assert doc["complete"] is False and doc["frames"] == 40
    (w,) = [w for w in doc["warnings"] if w.startswith("INCOMPLETE: ")]
    assert str(bad) in w and f"byte {off}" in w
