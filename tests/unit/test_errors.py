"""Error roots and wording: library errors name a wrong setting by its
parameter (`errors.Setting`); the CLI prints the same message with its option (cli/flags.py), as it
did before the library stopped naming options."""

from __future__ import annotations

import pytest
from conftest import cli

from ledgertool import errors, plan
from ledgertool.cli.flags import cli_message, option
from ledgertool.device.provision import normalize_ledger_id
from ledgertool.source.bypass import BypassOptions
from ledgertool.source.live import LiveOptions


def test_two_error_roots() -> None:
    data = (
        errors.UsageError,
        errors.CaptureFormatError,
        errors.WorkloadSpecError,
        errors.KeyFileError,
        errors.LedgerFormatError,
        errors.FileTypeError,
        errors.AlgorithmError,
        errors.DiscrepancyError,
    )
    host = (
        errors.StorageError,
        errors.InterfaceError,
        errors.LedgerLockedError,
        errors.ClusterError,
    )
    assert all(
        issubclass(c, errors.DataError) and not issubclass(c, errors.HostError) for c in data
    )
    assert all(
        issubclass(c, errors.HostError) and not issubclass(c, errors.DataError) for c in host
    )
    assert issubclass(errors.DataError, errors.LedgerError) and issubclass(
        errors.HostError, errors.LedgerError
    )


@pytest.mark.parametrize(
    ("call", "library", "cli"),
    [
        (
            lambda: LiveOptions(ring_mb=0.001).check(),
            "ring_mb must be at least 0.0078125 (8 KiB)",
            "--ring-mb must be at least 0.0078125 (8 KiB)",
        ),
        (
            lambda: LiveOptions(pin_cpu=-1).check(),
            "pin_cpu must be a CPU number >= 0",
            "--pin must be a CPU number >= 0",
        ),
        (
            lambda: BypassOptions(rx_desc=40000).check(),
            "rx_desc must be 0 (automatic) .. 32768",
            "--rx-desc must be 0 (automatic) .. 32768",
        ),
        (
            lambda: plan.traffic_from_pps(0),
            "frames per second (pps) must be a positive finite number, got '0'",
            "frames per second (--pps) must be a positive finite number, got '0'",
        ),
        (
            lambda: normalize_ledger_id("xyz"),
            "ledger_id 'xyz': expected the ledger's id, 32 hex characters "
            "(ledger.json `ledger_id`) or a dashed UUID",
            "--ledger-id 'xyz': expected the ledger's id, 32 hex "
            "characters (ledger.json `ledger_id`) or a dashed UUID",
        ),
    ],
)
def test_library_names_the_setting_cli_the_option(call, library: str, cli: str) -> None:
    with pytest.raises(errors.UsageError) as e:
        call()
    assert str(e.value) == library
    assert cli_message(e.value) == cli


def test_options_that_differ_from_their_parameter() -> None:
    assert [
        option(n) for n in ("from_ns", "to_ns", "loops", "pin_cpu", "valid_for_s", "ring_mb")
    ] == ["--from", "--to", "--loop", "--pin", "--valid-for", "--ring-mb"]


def test_rewritten_message_is_kept() -> None:
    """capture/run.py appends to a caught error's args; the CLI must print the longer text."""
    e = errors.UsageError(errors.Setting("workers"), " must be at least 1")
    e.args = (f"{e}; and more",)
    assert cli_message(e) == "workers must be at least 1; and more"


def test_cli_prints_the_option(tmp_path) -> None:
    r = cli("plan", "storage", "--pps", "0")
    assert r.returncode == 2
    assert (
        r.stderr.strip()
        == "ledgertool: error: frames per second (--pps) must be a positive finite number, got '0'"
    )
    f = tmp_path / "file"
    f.write_text("x")
    r = cli("demo", "--workdir", f)
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"ledgertool: error: {f}: not a directory; --workdir needs a directory "
        "(it is created if absent)"
    )
