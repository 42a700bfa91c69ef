"""Crash safety: `capture` killed with SIGKILL at several points, then `recover` (or the next
capture) seals every whole record of the torn segment and the ledger verifies; SIGINT/SIGTERM
seal the open segment before exit; no temporary file is left for verify to trip on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SAMPLES, cli

from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.capture.run import capture_file
from ledgertool.keyfiles import DigestKey, SigningKey, TrustBundle
from ledgertool.ledger.layout import checkpoint_path
from ledgertool.ledger.recover import recover_ledger
from ledgertool.verify.ledger import verify_ledger

FRAMES = 400_000


@pytest.fixture(scope="module")
def big_pcap(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("crash") / "synthetic.pcap"
    write_synthetic_pcap(p, FRAMES, 64, seed=7)
    return p


def _start_capture(
    src: Path | str, ledger: Path, keydir: Path, segment_records: int = 5000, stdin=None
) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ledgertool.cli.app import main; main()",
            "capture",
            str(src),
            "--ledger",
            str(ledger),
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
            "--segment-records",
            str(segment_records),
            "--json",
        ],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_open_segment(ledger: Path, proc: subprocess.Popen, timeout: float = 30) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if any(ledger.glob("link=*/*.open")):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.005)
    return False


# delay after the first open segment appears (ms), and how the next run recovers
KILLS = [
    (0, "recover"),
    (15, "capture"),
    (40, "recover"),
    (90, "capture"),
    (160, "recover"),
    (260, "recover"),
]


@pytest.mark.parametrize("delay_ms,how", KILLS)
def test_sigkill_then_recover_seals_whole_records(delay_ms, how, big_pcap, tmp_path, keydir):
    ledger = tmp_path / "L"
    proc = _start_capture(big_pcap, ledger, keydir)
    started = _wait_for_open_segment(ledger, proc)
    time.sleep(delay_ms / 1000)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert started, "capture never opened a segment"
    trust = TrustBundle.load(keydir / "verifier.pub")
    before = verify_ledger(ledger, trust)
    assert before.ok, before.problems  # a torn ledger is reported (warnings), never failed
    sk = SigningKey.load(keydir / "signing.key")
    if how == "recover":
        rec = recover_ledger(ledger, sk)
        sealed = sum(r.records for _, r in rec.sealed)
        assert rec.torn_bytes == sum(r.torn_bytes for _, r in rec.sealed) + sum(
            d["bytes"] for d in rec.discarded
        )
    else:
        res = capture_file(
            SAMPLES / "sample.pcap",
            ledger,
            digest_key=DigestKey.load(keydir / "digest.key"),
            signing_key=sk,
        )
        sealed = sum(r.records for r in res.recovered)
        # the recovery's own lines (a ledger path may also hold the word)
        recovery = [w for w in res.warnings if w.startswith("recover")]
        assert all("torn bytes" in w or "discarded" in w for w in recovery)
    assert not list(ledger.rglob("*.open")) and not list(ledger.rglob("*.tmp"))
    after = verify_ledger(ledger, trust, checkpoint_path(ledger, "link0").read_bytes())
    assert after.ok and not after.warnings, (after.problems, after.warnings)
    assert after.records >= before.records and sealed >= 0
    # every whole record that reached the open segment is now sealed: the sequence is unbroken
    assert after.records == verify_ledger(ledger, trust).records


def test_recover_cli_reports_bytes_discarded(big_pcap, tmp_path, keydir):
    """A capture killed with records in its open segment: the capture reads a pipe that is given
    the first half of the file and then stays open, so the kill always lands mid-segment (a whole
    file of 400,000 frames is captured faster than a poll of the directory on a quiet machine)."""
    ledger = tmp_path / "L"
    proc = _start_capture("-", ledger, keydir, segment_records=FRAMES, stdin=subprocess.PIPE)
    data = big_pcap.read_bytes()
    proc.stdin.buffer.write(data[: len(data) // 2])  # (text=True: the binary stream beneath)
    proc.stdin.buffer.flush()
    assert _wait_for_open_segment(ledger, proc)
    seg = next(ledger.glob("link=*/*.open"))
    deadline = time.monotonic() + 30
    while seg.stat().st_size < 1 << 20 and time.monotonic() < deadline:  # some blocks written
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    open_seg = next(ledger.glob("link=*/*.open"))
    with open(open_seg, "ab") as f:
        f.write(b"\x07" * 5)  # make sure the tail is torn
    r = cli("recover", ledger, "--signing-key", keydir / "signing.key", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["bytes_discarded"] == doc["sealed"][0]["torn_bytes_discarded"] > 0
    r = cli(
        "verify", ledger, "--trust", keydir / "verifier.pub", "--checkpoint", ledger / "checkpoint"
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigint_sigterm_seal_the_open_segment(sig, big_pcap, tmp_path, keydir):
    ledger = tmp_path / "L"
    proc = _start_capture(big_pcap, ledger, keydir, segment_records=50_000)
    assert _wait_for_open_segment(ledger, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert not list(ledger.rglob("*.open")) and not list(ledger.rglob("*.tmp"))
    v = verify_ledger(
        ledger,
        TrustBundle.load(keydir / "verifier.pub"),
        checkpoint_path(ledger, "link0").read_bytes(),
    )
    assert v.ok and not v.warnings and v.records == doc["frames"]
    if doc["interrupted"]:
        assert doc["frames"] < FRAMES
