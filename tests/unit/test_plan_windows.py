"""`plan storage` and `plan collision` for the window tier (docs/plan.md, docs/adr/0012): the record
size from the format, the volume per link-day next to the per-frame tier, the union bound of false
matches over every window, in the library and through the commands."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ledgertool import plan
from ledgertool.cli.plan import plan_app
from ledgertool.digest.window import cells_for_capacity, record_size
from ledgertool.errors import UsageError

runner = CliRunner()


@pytest.mark.parametrize("capacity,digest", [(1, 16), (64, 16), (64, 32), (1000, 16)])
def test_the_record_size_is_the_formats(capacity, digest):
    assert plan.window_record_bytes(capacity, digest) == record_size(
        cells_for_capacity(capacity), digest
    )


def test_a_400g_link_day_of_one_second_windows_fits_in_a_gigabyte():
    w = plan.window_plan(1.0, 64, 16, 10_000, 86_400.0)
    assert (w.cells, w.record_bytes) == (225, 6380)
    assert w.bytes_per_day_per_link == 6380 * 86_400 == 551_232_000
    assert w.bytes_per_day == 551_232_000 * 10_000
    frames = plan.storage_plan(plan.frames_per_second(400e9, 64), 48, 1, 86_400.0)
    assert frames.bytes_per_day_per_link / w.bytes_per_day_per_link > 1e6


def test_the_false_match_bound_is_a_union_over_windows():
    w = plan.window_plan(1.0, 64, 16, 10_000, 10 * plan.SECONDS_PER_YEAR)
    assert w.windows_in_duration == pytest.approx(3.15576e12)
    assert w.false_match_per_window == pytest.approx(3 / 2**128, rel=1e-5)
    assert w.false_match_bound == pytest.approx(3.15576e12 * 3 / 2**128, rel=1e-5)
    assert plan.window_plan(1.0, 64, 16, 1, 0.5).windows_in_duration == 1  # a part-window is one


@pytest.mark.parametrize(
    "args,says",
    [
        ((0, 16), "bad window capacity 0"),
        ((64, 24), "bad digest size 24"),
        ((2**21, 16), "needs 4194402 cells"),
    ],
)
def test_bad_window_settings_are_one_line(args, says):
    with pytest.raises(UsageError, match=says):
        plan.window_record_bytes(*args)


def test_plan_storage_reports_both_tiers():
    r = runner.invoke(
        plan_app, ["storage", "--rate", "400G", "--frame", "64", "--links", "10000", "--json"]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert (
        doc["windows"]["record_bytes"] == 6380
        and doc["windows"]["bytes_per_day"] == 5_512_320_000_000
    )
    assert doc["rows"][0]["bytes_per_day_per_link"] > 2e15
    r = runner.invoke(
        plan_app, ["storage", "--rate", "400G", "--window", "100ms", "--window-capacity", "128"]
    )
    assert r.exit_code == 0, r.output
    assert (
        "9,992-byte records (354 cells, capacity 128)" in r.output
        and "8.6 GB per link-day" in r.output
    )


def test_plan_collision_reports_the_window_bound():
    r = runner.invoke(
        plan_app,
        [
            "collision",
            "--bits",
            "128",
            "--rate",
            "400G",
            "--links",
            "10000",
            "--duration",
            "10y",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    fm = json.loads(r.output)["window_false_match"]
    assert (
        fm["windows_in_duration"] == pytest.approx(3.15576e12) and fm["false_match_bound"] < 1e-25
    )
    r = runner.invoke(plan_app, ["collision", "--bits", "128", "--rate", "400G", "--window", "0s"])
    assert isinstance(r.exception, UsageError) and "window must be a positive" in str(r.exception)
