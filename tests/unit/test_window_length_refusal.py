"""Capturing into a ledger with another window length than it was created with is refused, the
two lengths written as --window takes them (1s, 100ms, 250us, 7ns), not in raw nanoseconds."""

from __future__ import annotations

import pytest
from conftest import capture_windows

from ledgertool.capture.run import _shown_window


@pytest.mark.parametrize(
    ("ns", "text"),
    [(10**9, "1s"), (10 * 10**9, "10s"), (10**8, "100ms"), (250_000, "250us"), (7, "7ns"),
     (1_500_000_001, "1500000001ns"), (None, "none")],
)  # fmt: skip
def test_window_lengths_read_as_the_option_takes_them(ns, text):
    assert _shown_window(ns) == text


def test_another_window_length_is_refused_with_both_named(tmp_path, keydir):
    led = tmp_path / "W"
    assert capture_windows(led, keydir).returncode == 0
    r = capture_windows(led, keydir, None, "--window", "100ms")
    assert r.returncode == 2
    assert f"{led}: ledger has window length 1s, not 100ms (fixed when" in r.stderr
