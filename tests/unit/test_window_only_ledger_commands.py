"""Commands that take a per-frame link, given a ledger of window records alone, say what it holds
and what to ask instead: `prove --seq/--digest` points to `--window TIME`, `checkpoint` names the
window logs `--link` takes; `prove` with no selector names all three selectors."""

from __future__ import annotations

import pytest
from conftest import capture_windows, cli


@pytest.fixture()
def windows_ledger(tmp_path, keydir):
    led = tmp_path / "W"
    r = capture_windows(led, keydir)
    assert r.returncode == 0, r.stderr
    return led


def test_prove_a_record_points_to_window_proofs(windows_ledger, tmp_path):
    for sel in (("--seq", "1"), ("--digest", "00" * 16)):
        r = cli("prove", windows_ledger, *sel, "--out", tmp_path / "p.json")
        assert r.returncode == 2, (sel, r.stdout, r.stderr)
        assert (
            f"{windows_ledger}: the ledger keeps no per-frame records, only window records: "
            "prove a window record with --window TIME"
        ) in r.stderr
    assert not (tmp_path / "p.json").exists()


def test_prove_without_a_selector_names_every_selector(windows_ledger, tmp_path):
    r = cli("prove", windows_ledger, "--out", tmp_path / "p.json")
    assert r.returncode == 2
    assert "prove needs one of --seq N, --digest HEX or --window TIME" in r.stderr
    assert "--window TIME" in cli("prove", "--help").stdout


def test_checkpoint_names_the_window_logs(windows_ledger, tmp_path):
    r = cli("checkpoint", windows_ledger, "--out", tmp_path / "cp")
    assert r.returncode == 2
    assert "only window logs (windows=link0); choose one with --link" in r.stderr
    ok = cli("checkpoint", windows_ledger, "--link", "windows=link0", "--out", tmp_path / "cp")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "cp").read_text().startswith("ledgertool/")
