"""Tests for ledgertool.plan and the `plan` CLI commands (ledgertool.cli.plan).

Reference values are recomputed here by hand with math.* so that a slip in plan.py
cannot hide behind a shared helper; relative error bound 1e-9 throughout.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import SAMPLES, cli
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from ledgertool import plan
from ledgertool.cli.plan import plan_app
from ledgertool.errors import LedgerError, UsageError

REL = 1e-9
YEAR = 365.25 * 86400
PPS_400G_64 = 400e9 / ((64 + 20) * 8)  # 595,238,095.238... frames/s


def close(a: float, b: float, rel: float = REL) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("100G", 100e9),
        ("400G", 400e9),
        ("800G", 800e9),
        ("1.6T", 1.6e12),
        ("1.6t", 1.6e12),
        ("10M", 10e6),
        ("25G", 25e9),
        ("25Gbps", 25e9),
        ("25gb", 25e9),
        ("400 Gbit/s", 400e9),
        ("1000", 1000.0),
        ("1e9", 1e9),
        ("100k", 1e5),
        ("1000bps", 1000.0),
    ],
)
def test_parse_rate(text: str, bps: float) -> None:
    assert close(plan.parse_rate(text), bps)


@pytest.mark.parametrize(
    "text", ["", "G", "400X", "400GB/s/s", "-1G", "0", "0G", "inf", "nan", "4 00G", "1.6.1T"]
)
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        plan.parse_rate(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1y", 365.25 * 86400),
        ("30d", 30 * 86400),
        ("12h", 12 * 3600),
        ("1.5h", 5400),
        ("90s", 90),
        ("90", 90),
        ("15min", 900),
        ("15m", 900),
        ("2w", 14 * 86400),
        ("500ms", 0.5),
        ("1Y", 365.25 * 86400),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert close(plan.parse_duration(text), seconds)


@pytest.mark.parametrize("text", ["", "y", "1x", "1 year", "-1d", "0", "0s", "1h30m", "nan"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        plan.parse_duration(text)


def test_parse_frame() -> None:
    assert plan.parse_frame("64") == plan.FrameSize("64", 64.0)
    assert plan.parse_frame("1518").mean_bytes == 1518.0
    imix = plan.parse_frame("IMIX")
    assert imix.label == "imix"
    # simple IMIX 7:4:1 of 64/594/1518-byte frames
    assert close(imix.mean_bytes, (7 * 64 + 4 * 594 + 1 * 1518) / 12)
    assert close(imix.mean_bytes, 4342 / 12)


@pytest.mark.parametrize("text", ["", "63", "0", "-64", "jumbo", "nan", "inf"])
def test_parse_frame_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        plan.parse_frame(text)


def test_parse_pps() -> None:
    assert plan.parse_pps("600M") == 600e6
    assert plan.parse_pps("1.2e9") == 1.2e9
    assert plan.parse_pps("25kpps") == 25e3
    with pytest.raises(UsageError):
        plan.parse_pps("fast")


def test_usage_error_is_a_ledger_error_with_exit_2() -> None:
    with pytest.raises(LedgerError) as info:
        plan.parse_rate("400X")
    assert info.value.exit_code == 2
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------- frames per second


def test_frames_per_second_400g_64() -> None:
    fps = plan.frames_per_second(400e9, 64)
    assert close(fps, 400e9 / (84 * 8))
    assert round(fps, 1) == 595_238_095.2


@pytest.mark.parametrize(
    ("rate", "frame", "expected"),
    [
        (100e9, 64, 148_809_523.8),
        (100e9, 1518, 8_127_438.2),
        (800e9, 64, 1_190_476_190.5),
        (1.6e12, 64, 2_380_952_381.0),
        (10e9, 64, 14_880_952.4),
    ],
)
def test_frames_per_second_table(rate: float, frame: int, expected: float) -> None:
    assert round(plan.frames_per_second(rate, frame), 1) == expected


def test_imix_frames_per_second() -> None:
    t = plan.traffic_from_rate(400e9, plan.parse_frame("imix"))
    assert close(t.frames_per_second, 400e9 / ((4342 / 12 + 20) * 8))


# --------------------------------------------------------------------------- collisions


def test_expected_frames_formula() -> None:
    for bits in (32, 64, 128, 256, 512, 1024):
        hand = (
            math.sqrt(math.pi * 2.0**bits / 2) if bits < 1024 else math.sqrt(math.pi / 2) * 2.0**512
        )
        assert close(plan.expected_frames_to_collision(bits), hand)


def test_64_bit_at_400g_64b_is_about_9_seconds() -> None:
    traffic = plan.traffic_from_rate(plan.parse_rate("400G"), plan.parse_frame("64"))
    row = plan.collision_row(64, traffic, links=1, duration_seconds=YEAR)
    hand = math.sqrt(math.pi * 2**64 / 2) / (400e9 / (84 * 8))
    assert close(row.expected_seconds, hand)
    assert close(row.expected_seconds, 9.043344628726, rel=1e-11)
    assert plan.human_duration(row.expected_seconds) == "9.0 s"
    assert row.probability == 1.0  # a year holds ~1.9e16 frames against ~5.4e9 expected


def test_128_bit_at_400g_64b_is_about_1200_years() -> None:
    traffic = plan.traffic_from_rate(400e9, plan.parse_frame("64"))
    row = plan.collision_row(128, traffic, links=1, duration_seconds=YEAR)
    hand_seconds = math.sqrt(math.pi * 2**128 / 2) / (400e9 / (84 * 8))
    assert close(row.expected_seconds, hand_seconds)
    assert close(row.expected_seconds / YEAR, 1230.79, rel=1e-5)
    assert plan.human_duration(row.expected_seconds) == "1.2 thousand years"
    n = 400e9 / (84 * 8) * YEAR
    hand_p = -math.expm1(-n * (n - 1) / (2 * 2**128))
    assert close(row.frames_in_duration, n)
    assert close(row.probability, hand_p)
    assert close(row.probability, 5.18465446e-7, rel=1e-8)


def test_links_share_one_key_space() -> None:
    traffic = plan.traffic_from_pps(PPS_400G_64)
    one = plan.collision_row(128, traffic, links=1, duration_seconds=86400)
    eight = plan.collision_row(128, traffic, links=8, duration_seconds=86400)
    assert close(eight.combined_frames_per_second, 8 * PPS_400G_64)
    assert close(eight.expected_seconds, one.expected_seconds / 8)
    n = 8 * PPS_400G_64 * 86400
    assert close(eight.probability, -math.expm1(-n * (n - 1) / 2.0**129))
    # p ~ n^2: eight links are ~64 times as likely to collide within the same day
    assert close(eight.probability / one.probability, 64, rel=1e-6)


def test_tiny_probability_survives() -> None:
    # 1000 frames of a 128-bit digest: p = 1000*999 / 2^129 ~ 1.47e-33
    p = plan.collision_probability(1000, 128)
    assert p > 0
    assert close(p, 1000 * 999 / 2.0**129)
    assert plan.human_prob(p) == "1.5e-33"
    # naive 1 - exp(-x) loses it entirely
    assert 1 - math.exp(-1000 * 999 / 2.0**129) == 0.0


def test_probability_near_1e_30() -> None:
    row = plan.collision_row(128, plan.traffic_from_pps(1e4), links=3, duration_seconds=1.5)
    n = 1e4 * 3 * 1.5
    hand = -math.expm1(-n * (n - 1) / (2 * 2**128))
    assert close(row.probability, hand)
    assert 1e-31 < row.probability < 1e-29


def test_probability_edges() -> None:
    assert plan.collision_probability(0, 128) == 0.0
    assert plan.collision_probability(1, 128) == 0.0
    assert close(plan.collision_probability(2, 8), -math.expm1(-2 / 512))  # n(n-1) / 2^(B+1), B = 8
    assert plan.collision_probability(1e300, 64) == 1.0
    # 256-bit and 1024-bit widths neither overflow nor underflow to zero for n = 1e18
    assert plan.collision_probability(1e18, 256) > 0
    assert plan.collision_probability(1e18, 1024) == pytest.approx(
        math.ldexp(1e36, -1025), rel=1e-9
    )
    # n(n-1) overflows a double for n ~ 1.5e154, yet x = n^2 / 2^1025 is only ~0.6
    n = 1.5e154
    x = (n / 2.0**512) * (n / 2.0**513)
    assert close(plan.collision_probability(n, 1024), -math.expm1(-x))
    assert plan.collision_probability(2, 1024) > 0


@pytest.mark.parametrize("bits", [0, -1, 1, 4, 7, 9, 129, 255, 1025, 1032])
def test_bad_bits(bits: int) -> None:
    with pytest.raises(
        UsageError, match=f"bad digest width bits {bits}: must be a multiple of 8 in 8..1024"
    ):
        plan.collision_row(bits, plan.traffic_from_pps(1e6), 1, 1.0)


@pytest.mark.parametrize("bits", [8, 64, 128, 136, 256, 1024])
def test_whole_byte_bits_accepted(bits: int) -> None:
    assert plan.parse_bits(bits) == bits
    assert plan.collision_row(bits, plan.traffic_from_pps(1e6), 1, 1.0).bits == bits


@pytest.mark.parametrize("bits", ["129", "4", "1032", "0"])
def test_cli_bits_not_whole_bytes_exit_2(bits: str) -> None:
    """`--bits` that is not a whole number of bytes in 8..1024: exit 2, one line naming the flag
    (it was accepted: 129 bits gave a table)."""
    r = cli("plan", "collision", "--bits", bits, "--rate", "400G")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (
        f"ledgertool: error: bad digest width --bits {bits}: must be a multiple of 8 in 8..1024 "
        "(digests are whole bytes; ledgertool's are 64, 128 or 256 bits)\n"
    )


def test_bad_links_and_pps() -> None:
    with pytest.raises(UsageError):
        plan.collision_row(128, plan.traffic_from_pps(1e6), 0, 1.0)
    with pytest.raises(UsageError):
        plan.traffic_from_pps(0)
    with pytest.raises(UsageError):
        plan.storage_plan(1e6, 0, 1, 1.0)


def test_rows_are_frozen_and_ordered() -> None:
    rows = plan.collision_table(
        [64, 128], [plan.traffic_from_pps(1.0e6), plan.traffic_from_pps(2.0e6)], 1, 60.0
    )
    assert [(r.bits, r.frames_per_second) for r in rows] == [
        (64, 1e6),
        (64, 2e6),
        (128, 1e6),
        (128, 2e6),
    ]
    with pytest.raises(AttributeError):
        rows[0].bits = 32  # type: ignore[misc]


# --------------------------------------------------------------------------- storage


def test_default_record_bytes() -> None:
    assert plan.default_record_bytes() == 48
    assert plan.default_record_bytes(16) == 48
    assert plan.default_record_bytes(32) == 64


def test_storage_400g_64b() -> None:
    s = plan.storage_plan(PPS_400G_64, 48, links=4, duration=30 * 86400)
    per_s = PPS_400G_64 * 48
    assert close(s.bytes_per_second_per_link, per_s)
    assert close(s.bytes_per_second_per_link, 28_571_428_571.43, rel=1e-12)
    assert close(s.bytes_per_day_per_link, per_s * 86400)
    assert close(s.bytes_per_year_per_link, per_s * 365.25 * 86400)
    assert close(s.bytes_for_duration_per_link, per_s * 30 * 86400)
    assert close(s.bytes_per_second, 4 * per_s)
    assert close(s.bytes_per_day, 4 * per_s * 86400)
    assert close(s.bytes_per_year, 4 * per_s * 365.25 * 86400)
    assert close(s.bytes_for_duration, 4 * per_s * 30 * 86400)
    assert plan.human_bytes(s.bytes_per_second_per_link) == "28.6 GB"
    assert plan.human_bytes(s.bytes_per_day_per_link) == "2.5 PB"


# --------------------------------------------------------------------------- humane numbers


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (3e-9, "3.0 ns"),
        (2.5e-6, "2.5 µs"),
        (0.25, "250.0 ms"),
        (9.04, "9.0 s"),
        (90, "1.5 min"),
        (5400, "1.5 h"),
        (3 * 86400, "3.0 days"),
        (2 * YEAR, "2.0 years"),
        (1230.79 * YEAR, "1.2 thousand years"),
        (4.2e6 * YEAR, "4.2 million years"),
        (7e9 * YEAR, "7.0 billion years"),
        (2.3e22 * YEAR, "2.3e+22 years"),
        (math.inf, "forever"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert plan.human_duration(seconds) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (48, "48 B"),
        (999, "999 B"),
        (1000, "1.0 kB"),
        (28.57e9, "28.6 GB"),
        (2.47e15, "2.5 PB"),
        (3.6e18, "3.6 EB"),
    ],
)
def test_human_bytes(n: float, text: str) -> None:
    assert plan.human_bytes(n) == text


@pytest.mark.parametrize(
    ("p", "text"),
    [
        (0.0, "0"),
        (1.2e-15, "1.2e-15"),
        (1e-300, "1.0e-300"),
        (5e-324, "4.9e-324"),
        (0.3934, "0.393"),
        (0.99999, "> 0.999"),
        (1.0, "1"),
    ],
)
def test_human_prob(p: float, text: str) -> None:
    assert plan.human_prob(p) == text


@given(st.floats(min_value=5e-324, max_value=1.0, exclude_max=True))
def test_human_prob_never_zero_or_one_inside(p: float) -> None:
    text = plan.human_prob(p)
    assert text not in ("0", "1")
    assert float(text.lstrip("> ")) > 0


# --------------------------------------------------------------------------- monotonicity

bits_st = st.integers(min_value=2, max_value=64).map(lambda k: 8 * k)  # whole bytes, 16..512 bits
pps_st = st.floats(min_value=1.0, max_value=1e12, allow_nan=False)
dur_st = st.floats(min_value=1e-3, max_value=1e3 * YEAR, allow_nan=False)
links_st = st.integers(min_value=1, max_value=1024)


@given(
    st.integers(1, 128).map(lambda k: 8 * k),
    st.floats(1e-3, 1e18),
    st.integers(1, 1_000_000),
    st.floats(1e-3, 1e9 * YEAR),
)
def test_extremes_stay_finite(bits: int, pps: float, links: int, duration: float) -> None:
    row = plan.collision_row(bits, plan.traffic_from_pps(pps), links, duration)
    assert all(math.isfinite(v) for v in row.to_dict().values() if isinstance(v, float))
    json.dumps(row.to_dict(), allow_nan=False)


@given(bits_st, pps_st, pps_st, links_st)
def test_expected_time_falls_with_rate(bits: int, a: float, b: float, links: int) -> None:
    lo, hi = sorted((a, b))
    slow = plan.collision_row(bits, plan.traffic_from_pps(lo), links, 1.0)
    fast = plan.collision_row(bits, plan.traffic_from_pps(hi), links, 1.0)
    assert fast.expected_seconds <= slow.expected_seconds


@given(bits_st, bits_st, pps_st, dur_st)
def test_wider_digest_never_worse(a: int, b: int, pps: float, duration: float) -> None:
    narrow, wide = sorted((a, b))
    t = plan.traffic_from_pps(pps)
    rn = plan.collision_row(narrow, t, 1, duration)
    rw = plan.collision_row(wide, t, 1, duration)
    assert rw.expected_seconds >= rn.expected_seconds
    assert rw.probability <= rn.probability


@given(bits_st, pps_st, dur_st, dur_st, links_st)
def test_probability_grows_with_duration(
    bits: int, pps: float, a: float, b: float, links: int
) -> None:
    short, long = sorted((a, b))
    t = plan.traffic_from_pps(pps)
    ps = plan.collision_row(bits, t, links, short).probability
    pl = plan.collision_row(bits, t, links, long).probability
    assert 0.0 <= ps <= pl <= 1.0


@given(
    st.floats(min_value=1e6, max_value=1e13),
    st.floats(min_value=64, max_value=9216),
    st.floats(min_value=64, max_value=9216),
)
def test_frames_per_second_falls_with_frame_size(rate: float, a: float, b: float) -> None:
    small, big = sorted((a, b))
    assert plan.frames_per_second(rate, big) <= plan.frames_per_second(rate, small)


@given(st.integers(min_value=1, max_value=32).map(lambda k: 8 * k), pps_st, dur_st)
def test_probability_matches_hand_formula(bits: int, pps: float, duration: float) -> None:
    n = pps * duration
    p = plan.collision_probability(n, bits)
    hand = 0.0 if n <= 1 else -math.expm1(-n * (n - 1) / (2 * 2.0**bits))
    assert p == pytest.approx(hand, rel=1e-9, abs=0.0)


@given(pps_st, st.integers(min_value=1, max_value=4096), links_st, dur_st)
def test_storage_is_linear_in_links(pps: float, record: int, links: int, duration: float) -> None:
    one = plan.storage_plan(pps, record, 1, duration)
    many = plan.storage_plan(pps, record, links, duration)
    assert many.bytes_per_second == pytest.approx(links * one.bytes_per_second, rel=1e-12)
    assert many.bytes_for_duration >= one.bytes_for_duration_per_link


# --------------------------------------------------------------------------- CLI

runner = CliRunner()


def run_json(args: list[str]) -> dict:
    result = runner.invoke(plan_app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def test_cli_collision_json() -> None:
    doc = run_json(
        ["collision", "--bits", "64", "--bits", "128", "--rate", "400G", "--frame", "64", "--json"]
    )
    assert list(doc) == ["rows", "window_false_match"]
    rows = doc["rows"]
    assert [r["bits"] for r in rows] == [64, 128]
    r64, r128 = rows
    assert r64["rate_bps"] == 400e9 and r64["frame"] == "64" and r64["frame_bytes"] == 64
    assert close(r64["frames_per_second"], PPS_400G_64)
    assert close(r64["expected_frames"], math.sqrt(math.pi * 2**64 / 2))
    assert close(r64["expected_seconds"], math.sqrt(math.pi * 2**64 / 2) / PPS_400G_64)
    assert close(r128["expected_seconds"], math.sqrt(math.pi * 2**128 / 2) / PPS_400G_64)
    assert r64["duration_seconds"] == YEAR  # default --duration 1y
    assert r64["links"] == 1
    assert 0 < r128["probability"] < 1e-6


def test_cli_collision_grid_and_links() -> None:
    doc = run_json(
        [
            "collision",
            "--bits",
            "128",
            "--rate",
            "400G",
            "--rate",
            "1.6T",
            "--frame",
            "64",
            "--frame",
            "imix",
            "--links",
            "4",
            "--duration",
            "1d",
            "--json",
        ]
    )
    rows = doc["rows"]
    assert [(r["rate_bps"], r["frame"]) for r in rows] == [
        (400e9, "64"),
        (400e9, "imix"),
        (1.6e12, "64"),
        (1.6e12, "imix"),
    ]
    for r in rows:
        assert r["links"] == 4 and r["duration_seconds"] == 86400
        assert close(r["combined_frames_per_second"], 4 * r["frames_per_second"])


def test_cli_collision_pps_tiny_probability() -> None:
    doc = run_json(["collision", "--bits", "128", "--pps", "1000", "--duration", "1s", "--json"])
    (row,) = doc["rows"]
    assert row["rate_bps"] is None and row["frame"] is None
    assert close(row["probability"], 1000 * 999 / 2.0**129)


def test_cli_storage_json() -> None:
    doc = run_json(["storage", "--rate", "400G", "--frame", "64", "--links", "2", "--json"])
    (row,) = doc["rows"]
    assert row["record_bytes"] == 48
    assert row["duration_seconds"] == 86400  # default --duration 1d
    assert close(row["bytes_per_second_per_link"], PPS_400G_64 * 48)
    assert close(row["bytes_per_second"], 2 * PPS_400G_64 * 48)
    assert close(row["bytes_for_duration"], 2 * PPS_400G_64 * 48 * 86400)


def test_cli_storage_record_size_options() -> None:
    assert (
        run_json(["storage", "--pps", "1e6", "--digest-bytes", "32", "--json"])["rows"][0][
            "record_bytes"
        ]
        == 64
    )
    row = run_json(["storage", "--pps", "1e6", "--record-bytes", "40", "--json"])["rows"][0]
    assert row["record_bytes"] == 40 and row["bytes_per_second"] == 40e6


def test_cli_human_tables() -> None:
    result = runner.invoke(
        plan_app, ["collision", "--bits", "64", "--bits", "128", "--rate", "400G", "--frame", "64"]
    )
    assert result.exit_code == 0
    assert "9.0 s" in result.stdout and "1.2 thousand years" in result.stdout
    result = runner.invoke(plan_app, ["storage", "--rate", "400G", "--frame", "64"])
    assert result.exit_code == 0
    assert "28.6 GB" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["collision", "--bits", "128"],  # neither --rate nor --pps
        ["collision", "--bits", "128", "--rate", "400G", "--pps", "1000"],  # both
        ["collision", "--bits", "128", "--rate", "400X"],  # unknown unit
        ["collision", "--bits", "128", "--rate", "400G", "--frame", "tiny"],
        ["collision", "--bits", "128", "--pps", "1000", "--frame", "64"],
        ["collision", "--bits", "128", "--rate", "400G", "--duration", "forever"],
        ["collision", "--bits", "0", "--rate", "400G"],
        ["collision", "--bits", "128", "--rate", "400G", "--links", "0"],
        ["collision", "--bits", "128", "--rate", "1e300"],  # beyond the planner's limits
        ["collision", "--bits", "128", "--pps", "1e300", "--links", "1000"],
        ["collision", "--bits", "128", "--rate", "400G", "--duration", "1e300y"],
        ["storage"],
        ["storage", "--pps", "1e6", "--record-bytes", "10000000"],
        ["storage", "--rate", "400G", "--record-bytes", "0"],
    ],
)
def test_cli_bad_values_raise_usage_error(args: list[str]) -> None:
    result = runner.invoke(plan_app, args)
    assert result.exit_code != 0
    assert isinstance(result.exception, UsageError), result.output
    assert "\n" not in str(result.exception)
    assert result.stdout == ""


def test_cli_no_args_shows_help() -> None:
    result = runner.invoke(plan_app, [])
    assert "collision" in result.output and "storage" in result.output


# --------------------------------------------------------------------------- reference figures


def test_reference_figures() -> None:
    """400G, 64 B: 595.2 Mframes/s; 64-bit first collision ~9.0 s; 128-bit ~1.2 thousand years;
    48-byte records."""
    t = plan.traffic_from_rate(plan.parse_rate("400G"), plan.parse_frame("64"))
    assert close(t.frames_per_second, 400e9 / 672)
    assert f"{t.frames_per_second / 1e6:.1f}" == "595.2"
    r64 = plan.collision_row(64, t, 1, YEAR)
    r128 = plan.collision_row(128, t, 1, YEAR)
    assert close(r64.expected_seconds, math.sqrt(math.pi * 2.0**64 / 2) * 672 / 400e9)
    assert plan.human_duration(r64.expected_seconds) == "9.0 s"
    assert close(r128.expected_seconds, math.sqrt(math.pi * 2.0**128 / 2) * 672 / 400e9)
    assert plan.human_duration(r128.expected_seconds) == "1.2 thousand years"
    s = plan.storage_plan(t.frames_per_second, plan.default_record_bytes(16), 1, 86400)
    assert s.record_bytes == 48
    assert close(s.bytes_per_second_per_link, 400e9 / 672 * 48)
    assert close(s.bytes_per_year_per_link, 400e9 / 672 * 48 * YEAR)


def test_cli_storage_comma_lists_make_one_table() -> None:
    rates = ["100G", "400G", "800G", "1.6T"]
    frames = ["64", "512", "1500", "4096", "9000", "imix"]
    doc = run_json(
        [
            "storage",
            "--rate",
            ",".join(rates),
            "--frame",
            ",".join(frames),
            "--links",
            "3",
            "--json",
        ]
    )
    rows = doc["rows"]
    assert len(rows) == 24
    assert doc["record_bytes_source"] == {"kind": "format", "digest_bytes": 16}
    for row, (rate, frame) in zip(rows, [(r, f) for r in rates for f in frames]):
        bps = plan.parse_rate(rate)
        size = 4342 / 12 if frame == "imix" else float(frame)
        fps = bps / ((size + 20) * 8)
        assert row["frame"] == frame and row["rate_bps"] == bps
        assert close(row["frames_per_second"], fps)
        assert close(row["bytes_per_second_per_link"], fps * 48)
        assert close(row["bytes_per_day_per_link"], fps * 48 * 86400)
        assert close(row["bytes_per_year_per_link"], fps * 48 * YEAR)
        assert close(row["bytes_per_second"], 3 * fps * 48)
        assert close(row["bytes_per_year"], 3 * fps * 48 * YEAR)
    human = runner.invoke(plan_app, ["storage", "--rate", "100G,400G", "--frame", "64,imix"])
    assert human.exit_code == 0 and "901.6 PB" in human.stdout  # 400G/64 B per link per year


def test_cli_storage_empty_list_item_is_usage_error() -> None:
    result = runner.invoke(plan_app, ["storage", "--rate", "400G,", "--json"])
    assert isinstance(result.exception, UsageError)


def test_cli_storage_from_ledger(tmp_path) -> None:
    from ledgertool.demo import run_demo

    summary = run_demo(tmp_path / "demo")
    ledger = Path(summary["ledger"])
    # the sealed records in either form: raw record files (a v2 ledger) and Parquet (v1, or
    # compacted)
    parquet = sum(p.stat().st_size for p in ledger.rglob("seg-*.parquet"))
    raw = sum(p.stat().st_size for p in ledger.rglob("seg-*.rec"))
    seals = sum(p.stat().st_size for p in ledger.rglob("seg-*.seal.json"))
    records = sum(json.loads(p.read_text())["records"] for p in ledger.rglob("seg-*.seal.json"))
    assert records > 0 and parquet + raw > records * 8
    doc = run_json(
        ["storage", "--pps", "1e6", "--links", "2", "--from-ledger", str(ledger), "--json"]
    )
    src = doc["record_bytes_source"]
    assert src["kind"] == "ledger" and src["records"] == records
    assert (src["parquet_bytes"], src["raw_bytes"], src["seal_bytes"]) == (parquet, raw, seals)
    per = (parquet + raw + seals) / records
    (row,) = doc["rows"]
    assert close(row["record_bytes"], per)
    assert close(row["bytes_per_second"], 2 * 1e6 * per)
    result = runner.invoke(
        plan_app, ["storage", "--pps", "1e6", "--from-ledger", str(ledger), "--record-bytes", "48"]
    )
    assert isinstance(result.exception, UsageError)
    result = runner.invoke(plan_app, ["storage", "--pps", "1e6", "--from-ledger", str(tmp_path)])
    assert result.exception is not None and "not a ledger" in str(result.exception)


def test_cli_storage_from_a_v2_ledger_counts_its_raw_record_files(tmp_path, keydir) -> None:
    """A v2 ledger before compaction holds raw record files, not Parquet: they are what it weighs
    (before, a v2 ledger read as 'no sealed records to measure')."""
    ledger = tmp_path / "L"
    r = cli(
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--ledger-format",
        "v2",
        "--segment-records",
        "100",
    )
    assert r.returncode == 0, r.stderr
    raw = sum(p.stat().st_size for p in ledger.rglob("seg-*.rec"))
    seals = sum(p.stat().st_size for p in ledger.rglob("seg-*.seal.json"))
    assert raw > 294 * 48 and not list(ledger.rglob("seg-*.parquet"))
    src = run_json(["storage", "--pps", "1e6", "--from-ledger", str(ledger), "--json"])[
        "record_bytes_source"
    ]
    assert (
        src["records"],
        src["segments"],
        src["raw_bytes"],
        src["parquet_bytes"],
        src["seal_bytes"],
    ) == (294, 3, raw, 0, seals)
    assert close(src["bytes_per_record"], (raw + seals) / 294)
