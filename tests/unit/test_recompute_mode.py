"""recompute's mode is decided once from the options given (cli.recompute_mode): each mode from
the options that make it, and each combination that does not go together refused with the line
that names its options."""

from __future__ import annotations

import pytest

from ledgertool.cli.recompute_mode import Given, recompute_mode
from ledgertool.errors import UsageError
from ledgertool.reconcile.request import Mode, Window

NO_WINDOW = Window()


def _mode(windows_only: bool = False, window: Window = NO_WINDOW, **given) -> Mode:
    return recompute_mode(Given(**given), lambda: windows_only, lambda: window)


@pytest.mark.parametrize(
    "given,windows_only,mode",
    [
        ({"pairs": True}, False, Mode.PAIRS),
        ({"sources": 1, "algorithm": True, "strip": True, "out": True}, False, Mode.DIGESTS),
        ({"sources": 2, "ledger": True}, False, Mode.FRAMES),
        ({"sources": 1, "ledger": True}, True, Mode.WINDOWS),
        ({"sources": 1, "ledger": True, "against": "frames"}, True, Mode.FRAMES),
        ({"sources": 1, "ledger": True, "against": "windows"}, False, Mode.WINDOWS),
        ({"sources": 1, "ledger": True, "windows_range": True}, False, Mode.WINDOWS),
        ({"sources": 1, "ledger": True, "cluster": True}, False, Mode.CLUSTER),
        (
            {"sources": 1, "ledger": True, "cluster": True, "insecure_cluster": True},
            0,
            Mode.CLUSTER,
        ),
    ],
)
def test_each_mode_from_the_options_that_make_it(given, windows_only, mode):
    assert _mode(bool(windows_only), **given) is mode


@pytest.mark.parametrize(
    "given,window,message",
    [
        ({"insecure_cluster": True, "sources": 1, "ledger": True}, Window(), "--insecure-cluster"),
        ({"pairs": True, "sources": 1}, Window(), "--pairs FILE names every ledger"),
        ({"pairs": True, "links": True}, Window(), "--pairs FILE names every ledger"),
        ({}, Window(), "recompute needs CAPTURE"),
        ({"sources": 1, "algorithm": True}, Window(), "recompute needs --ledger DIR"),
        (
            {"sources": 2, "algorithm": True, "strip": True, "out": True},
            Window(),
            "takes one CAPTURE and no --cluster",
        ),
        (
            {"sources": 1, "algorithm": True, "strip": True, "out": True, "digest_keys": 2},
            Window(),
            "takes one --digest-key",
        ),
        (
            {"sources": 1, "algorithm": True, "strip": True, "out": True, "trust": True},
            Window(),
            "--trust and --checkpoint go with --ledger",
        ),
        ({"sources": 1, "ledger": True, "out": True}, Window(), "drop --algorithm/--strip/--out"),
        ({"sources": 1, "ledger": True, "against": "both"}, Window(), "frames or windows"),
        (
            {"sources": 1, "ledger": True, "against": "frames", "windows_range": True},
            Window(),
            "--windows-range goes with --against windows",
        ),
        (
            {"sources": 1, "ledger": True, "against": "windows", "details": True},
            Window(),
            "takes no --cluster, --details",
        ),
        (
            {"sources": 1, "ledger": True, "against": "windows"},
            Window(tolerance_ns=5),
            "takes no --cluster, --details, --from, --to or --tolerance",
        ),
    ],
)
def test_options_that_do_not_go_together_are_refused_once(given, window, message):
    with pytest.raises(UsageError, match=message.replace("-", r"\-")):
        _mode(window=window, **given)


def test_the_ledger_is_asked_only_when_against_is_not_given():
    asked = []
    given = Given(sources=1, ledger=True, against="frames")
    assert recompute_mode(given, lambda: asked.append(1) or True, Window) is Mode.FRAMES
    assert asked == []
    assert recompute_mode(Given(sources=1, ledger=True), lambda: asked.append(1) or True, Window)
    assert asked == [1]
