"""A capture of a file (or workload) that --duration or --frames stops says so in its summary:
the frames after that point are not in the ledger. One that reads its source to the end does not."""

from __future__ import annotations

from conftest import SAMPLES, capture_cli


def _capture(tmp_path, keydir, *extra):
    return capture_cli(SAMPLES / "sample.pcap", tmp_path / "L", keydir, *extra)


def test_a_frame_count_that_stops_a_file_is_named(tmp_path, keydir):
    r = _capture(tmp_path, keydir, "--frames", "100")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("captured 100 frames ")
    want = f"stopped by --frames: any frames of {SAMPLES / 'sample.pcap'} after that point are"
    assert any(line.startswith(want) for line in r.stdout.splitlines()), r.stdout


def test_a_file_read_to_its_end_says_nothing_of_a_stop(tmp_path, keydir):
    r = _capture(tmp_path, keydir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("captured 294 frames ")
    assert "stopped by" not in r.stdout
