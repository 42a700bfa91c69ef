"""capture's summary lines for the window tier alone: no per-frame segment or sequence number
(none is kept), and a capture without a frame says `windows none`, never Python's None."""

from __future__ import annotations

from conftest import SAMPLES, capture_windows


def _capture(tmp_path, keydir, src):
    return capture_windows(tmp_path / "W", keydir, src)


def test_the_summary_names_what_the_window_tier_keeps(tmp_path, keydir):
    r = _capture(tmp_path, keydir, SAMPLES / "sample.pcap")
    assert r.returncode == 0, r.stderr
    first, _, _ = r.stdout.splitlines()[:3]
    assert first.startswith("captured 294 frames (") and first.endswith(": drops 0")
    assert "seq" not in first and "segments" not in first
    assert "into windows=link0, windows " in r.stdout and "None" not in r.stdout


def test_a_capture_without_a_frame_has_no_windows(tmp_path, keydir):
    empty = tmp_path / "empty.pcap"
    empty.write_bytes((SAMPLES / "sample.pcap").read_bytes()[:24])  # the file header alone
    r = _capture(tmp_path, keydir, empty)
    assert r.returncode == 0, r.stderr
    assert "window tier: 0 windows (0 frames) into windows=link0, windows none" in r.stdout
    assert "None" not in r.stdout
