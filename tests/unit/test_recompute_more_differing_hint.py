"""recompute's text report shows a few differing frames and says how many more there are and how
to get them all (--details FILE); with --details it does not."""

from __future__ import annotations

import struct

from conftest import SAMPLES, cli


def _first_frames(src, dst, n: int) -> None:
    data = src.read_bytes()
    at = 24
    for _ in range(n):
        at += 16 + struct.unpack_from("<I", data, at + 8)[0]
    dst.write_bytes(data[:at])


def test_the_report_says_how_many_more_differ(sample_ledger, keydir, tmp_path):
    cut = tmp_path / "first100.pcap"
    _first_frames(SAMPLES / "sample.pcap", cut, 100)
    args = ("recompute", cut, "--ledger", sample_ledger, "--digest-key", keydir / "digest.key")
    r = cli(*args, "--trust", keydir / "verifier.pub")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "matched 100, ledger-only 194, capture-only 0" in r.stdout
    shown = [line for line in r.stdout.splitlines() if line.startswith("  ledger-only ")]
    assert 0 < len(shown) < 194
    more = 194 - len(shown)
    assert f"  … {more} more differing frames: --details FILE writes every one" in r.stdout
    d = cli(*args, "--trust", keydir / "verifier.pub", "--details", tmp_path / "d.jsonl")
    assert d.returncode == 1 and "more differing frames" not in d.stdout
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 194
