"""`recompute` of a capture corrupt after its first frames: the INCOMPLETE warning counts the frames
reconciled before the bad structure in words that agree with the number ("the 1 frame", "the 2
frames"), as capture's own message does."""

from __future__ import annotations

import json
import struct

import pytest
from conftest import SAMPLES, cli


def _cut(src: bytes, keep: int) -> bytes:
    """The sample's header and first `keep` records, then a record header whose caplen (1 GiB)
    exceeds every limit: corrupt after `keep` good frames."""
    pos = 24
    for _ in range(keep):
        pos += 16 + struct.unpack_from("<I", src, pos + 8)[0]
    return src[:pos] + struct.pack("<IIII", 0, 0, 1 << 30, 60) + bytes(40)


@pytest.mark.parametrize(("keep", "words"), [(1, "the 1 frame read"), (2, "the 2 frames read")])
def test_incomplete_warning_counts_in_agreement(tmp_path, keydir, keep, words):
    cap = tmp_path / "bad.pcap"
    cap.write_bytes(_cut((SAMPLES / "sample.pcap").read_bytes(), keep))
    keys = ("--digest-key", keydir / "digest.key")
    r = cli(
        "capture", cap, "--ledger", tmp_path / "L", *keys, "--signing-key", keydir / "signing.key"
    )
    assert r.returncode == 2 and f"{keep} frame" in r.stderr, r.stderr
    r = cli(
        "recompute", cap, "--ledger", tmp_path / "L", *keys,
        "--trust", keydir / "verifier.pub", "--json",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert rep["matched"] == keep and rep["ledger_only"] == 0 and rep["capture_only"] == 0
    (warning,) = [w for w in rep["warnings"] if w.startswith("INCOMPLETE")]
    assert warning.endswith(f"reconciled {words} before it"), warning
