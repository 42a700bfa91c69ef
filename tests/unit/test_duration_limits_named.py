"""A value past what its option takes is refused naming that option and its own limit: `keys
provision --valid-for` says 366 days (what a key package may be valid for), not the planner's 1e9
years; no option outside `plan` speaks of the planner; `plan storage --digest-bytes` takes the
digest sizes a ledger holds."""

from __future__ import annotations

import pytest
from conftest import cli

from ledgertool.errors import UsageError
from ledgertool.plan import MAX_DURATION_SECONDS, parse_duration


@pytest.mark.parametrize("text", ["367d", "99999999999999999999d", "1e300y"])
def test_valid_for_past_366_days_names_366_days(text, tmp_path):
    res = cli(
        "keys", "provision", "--digest-key", str(tmp_path / "d.key"), "--device",
        str(tmp_path / "device.pub"), "--signing-key", str(tmp_path / "s.key"), "--ledger-id",
        "0" * 32, "--out", str(tmp_path / "p.json"), "--valid-for", text,
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr == (
        f"ledgertool: error: --valid-for {text!r} is longer than 366 days, the longest taken\n"
    )
    assert not (tmp_path / "p.json").exists()


def test_capture_window_past_the_longest_duration_does_not_speak_of_the_planner(tmp_path, keydir):
    res = cli(
        "capture", "samples/sample.pcap", "--ledger", str(tmp_path / "L"), "--digest-key",
        str(keydir / "digest.key"), "--signing-key", str(keydir / "signing.key"), "--tiers",
        "windows", "--window", "1e300s",
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr == (
        "ledgertool: error: --window '1e300s' is longer than 1e9 years, the longest taken\n"
    )
    assert not (tmp_path / "L").exists()


def test_the_limit_is_inclusive_and_exact():
    assert parse_duration("366d", "valid_for", (366 * 86400, "366d")) == 366 * 86400
    with pytest.raises(UsageError, match="'31622401s' is longer than 366d"):
        parse_duration("31622401s", "valid_for", (366 * 86400, "366d"))
    assert parse_duration("1e9y") == MAX_DURATION_SECONDS
    with pytest.raises(UsageError, match="longer than 1e9 years"):
        parse_duration("1000000001y")


@pytest.mark.parametrize("value", ["0", "8", "64", "99999999999999999999"])
def test_plan_storage_digest_bytes_other_than_16_or_32_names_the_option(value):
    res = cli("plan", "storage", "--rate", "400G", "--digest-bytes", value)
    assert res.returncode == 2
    assert res.stderr == (
        f"ledgertool: error: --digest-bytes {value}: a ledger's digests are 16 or 32 bytes "
        "(--record-bytes plans records of another size)\n"
    )
