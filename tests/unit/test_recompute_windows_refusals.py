"""recompute of a ledger that keeps window records alone: asked for what the ledger cannot
answer (per-frame records it does not keep, a range of windows it has none in), it says so as bad
input (exit 2, naming the ledger), not as a discrepancy."""

from __future__ import annotations

from conftest import SAMPLES, capture_windows, cli

PCAP = SAMPLES / "sample.pcap"


def _windows_ledger(tmp_path, keydir, *extra):
    led = tmp_path / "W"
    r = capture_windows(led, keydir, PCAP, *extra)
    assert r.returncode == 0, r.stderr
    return led, ("--digest-key", keydir / "digest.key", "--trust", keydir / "verifier.pub")


def test_a_windows_only_ledger_is_not_recomputed_against_per_frame_records(tmp_path, keydir):
    led, common = _windows_ledger(tmp_path, keydir)
    frames = cli("recompute", PCAP, "--ledger", led, "--against", "frames", *common)
    assert frames.returncode == 2, (frames.stdout, frames.stderr)
    assert f"{led}: the ledger keeps no per-frame records, only window records" in frames.stderr
    windows = cli("recompute", PCAP, "--ledger", led, *common)
    assert windows.returncode == 0, (windows.stdout, windows.stderr)
    assert windows.stdout.startswith("MATCH")


def test_a_windows_range_that_misses_every_window_is_bad_input(tmp_path, keydir):
    led, common = _windows_ledger(tmp_path, keydir, "--window", "100ms")
    every = cli("recompute", PCAP, "--ledger", led, "--windows-range", "all", *common)
    assert every.returncode == 0, (every.stdout, every.stderr)
    for rng in ("-5..-1", "1..2"):
        r = cli("recompute", PCAP, "--ledger", led, "--windows-range", rng, *common)
        assert r.returncode == 2, (rng, r.stdout, r.stderr)
        assert f"--windows-range {rng}: no window of {led} link link0 lies in it" in r.stderr
        assert "(its windows are " in r.stderr


def test_a_time_window_is_refused_against_windows_even_at_the_epoch(tmp_path, keydir):
    led, common = _windows_ledger(tmp_path, keydir)
    for opt in (("--from", "0"), ("--to", "0"), ("--from", "1970-01-01T00:00:00Z")):
        r = cli("recompute", PCAP, "--ledger", led, *opt, *common)
        assert r.returncode == 2, (opt, r.stdout, r.stderr)
        assert "recompute against windows takes no --cluster, --details, --from" in r.stderr


def test_a_ledger_without_window_records_yet_says_so(tmp_path, keydir):
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(PCAP.read_bytes()[:24])  # the file header alone
    led = tmp_path / "E"
    r = capture_windows(led, keydir, empty)
    assert r.returncode == 0, r.stderr
    r = cli("recompute", PCAP, "--ledger", led, "--digest-key", keydir / "digest.key")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"{led}: the ledger has no window records yet (no window log)" in r.stderr
    assert "--link" not in r.stderr
