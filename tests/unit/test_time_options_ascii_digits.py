"""A time option (`prove --window`, `prune --before`, `recompute --from`) that is neither ASCII
digits nor ISO 8601 is one line naming the option, exit 2: '²' and '--5' passed str.isdigit()
and then failed in int(), an internal error."""

from __future__ import annotations

import pytest
from conftest import SAMPLES, cli


@pytest.mark.parametrize("text", ["²", "--5", "٣", "1²"])
def test_non_ascii_digits_are_bad_input(sample_ledger, keydir, tmp_path, text):
    runs = {
        "--window": ("prove", sample_ledger, f"--window={text}", "--out", tmp_path / "p.json"),
        "--before": (
            "prune", sample_ledger, f"--before={text}", "--signing-key", keydir / "signing.key",
        ),
        "--from": (
            "recompute", SAMPLES / "sample.pcapng", "--ledger", sample_ledger,
            "--digest-key", keydir / "digest.key", f"--from={text}",
        ),
    }  # fmt: skip
    for opt, args in runs.items():
        r = cli(*args)
        assert r.returncode == 2, (opt, r.stdout, r.stderr)
        assert r.stderr == (
            f"ledgertool: error: {opt} {text!r}: expected ns since the epoch or an ISO 8601 time\n"
        )


def test_ascii_digits_still_name_a_time(sample_ledger, tmp_path):
    r = cli("prove", sample_ledger, "--window=-5", "--out", tmp_path / "p.json")
    assert r.returncode == 2
    assert "has no window tier" in r.stderr  # parsed as -5 ns, then refused for the ledger
