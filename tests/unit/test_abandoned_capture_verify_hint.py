"""The `verify` a capture abandoned by a second Ctrl-C suggests runs as written (with the trust
bundle's path for `verifier.pub`): it once lacked `--trust`, which `verify` requires (exit 2)."""

from __future__ import annotations

import re
import shlex

from conftest import SAMPLES, cli

import ledgertool.capture.run as capture_run


def test_the_suggested_verify_runs(tmp_path, keydir, monkeypatch):
    ledger = tmp_path / "L"
    args = (
        "capture", SAMPLES / "sample.pcap", "--ledger", ledger, "--digest-key",
        keydir / "digest.key", "--signing-key", keydir / "signing.key",
    )  # fmt: skip
    assert cli(*args).returncode == 0

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(capture_run, "capture_file", interrupted)
    r = cli(*args)
    assert r.returncode == 130, r.stderr
    (hint,) = re.findall(r"`(ledgertool verify [^`]*)`", r.stderr)
    words = shlex.split(hint)[1:]
    words = [str(keydir / "verifier.pub") if w == "verifier.pub" else w for w in words]
    v = cli(*words)
    assert v.returncode == 0, v.stderr
    assert v.stdout.startswith("OK: 1 segment, 294 records"), v.stdout
