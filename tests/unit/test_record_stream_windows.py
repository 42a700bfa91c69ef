"""Window records from hardware: a device's authenticated stream carries window records (type 2
blocks, computed by tests/window_spec.py from docs/ledger-format.md and wrapped by
tests/device_spec.py from docs/devices.md, neither importing ledgertool); `capture records:` seals
them into the window log of a `--tiers windows` ledger, `verify` is OK and `recompute` of the
capture against the window tier is MATCH; a changed window block, a replayed window index and
window records for a ledger without the tier are refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, cli

from ledgertool.algorithms import get_algorithm
from ledgertool.device.conformance import compute_records
from ledgertool.digest.record import record_dtype
from ledgertool.keyfiles import DigestKey

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from device_spec import Device, parse_blocks  # noqa: E402
from window_spec import window_keys, windows  # noqa: E402

SAMPLE = SAMPLES / "sample.pcap"
DEVICE = "0f" * 16
ALG = "siphash-1-3-128"


def _args(src: Path, lg: Path, keydir: Path, *extra: str) -> list:
    return [
        "capture", f"records:{src}", "--ledger", lg, "--signing-key", keydir / "signing.key",
        "--digest-key", keydir / "digest.key", *extra,
    ]  # fmt: skip


@pytest.fixture()
def wledger(tmp_path, keydir):
    (tmp_path / "empty").write_bytes(b"")
    lg = tmp_path / "W"
    r = cli(*_args(tmp_path / "empty", lg, keydir, "--tiers", "windows", "--window", "1ms"))
    assert r.returncode == 0, r.stderr
    return lg, json.loads((lg / "ledger.json").read_text())


def _window_records(keydir: Path, head: dict) -> list[bytes]:
    master = bytes.fromhex((keydir / "digest.key").read_text().strip())
    recs = np.frombuffer(
        compute_records(SAMPLE, DigestKey(master), get_algorithm(ALG), "frame"),
        dtype=record_dtype(16),
    )
    win = head["window"]
    kf, kpad = window_keys(master, ALG, head["ledger_id"], "link0", int(win["window_ns"]))
    rows = [
        (int(r["ts_ns"]), int(r["wire_len"]), int(r["flags"]), int(r["aux"]), bytes(r["digest"]))
        for r in recs
    ]
    return windows(rows, kf, kpad, int(win["window_ns"]), int(win["cells"]), 16)


def _stream(keydir: Path, head: dict, wins: list[bytes], stream_no: int = 1) -> bytes:
    master = bytes.fromhex((keydir / "digest.key").read_text().strip())
    d = Device(master, head["ledger_id"], DEVICE, stream_no=stream_no)
    for w in wins:
        d.window(w)
    return d.close()


def test_device_window_records_are_sealed_and_recompute_matches(tmp_path, keydir, wledger):
    lg, head = wledger
    wins = _window_records(keydir, head)
    assert len(wins) >= 2
    (tmp_path / "w.lts").write_bytes(_stream(keydir, head, wins))
    r = cli(*_args(tmp_path / "w.lts", lg, keydir, "--device-id", DEVICE))
    assert r.returncode == 0, r.stderr
    seals = [json.loads(p.read_text()) for p in sorted(lg.glob("windows=link0/*.seal.json"))]
    assert seals and all(s["source"].endswith(f"device {DEVICE} stream 1") for s in seals)
    v = cli("verify", lg, "--trust", keydir / "verifier.pub")
    assert v.returncode == 0, v.stdout + v.stderr
    rc = cli(
        "recompute", SAMPLE, "--ledger", lg, "--digest-key", keydir / "digest.key",
        "--trust", keydir / "verifier.pub",
    )  # fmt: skip
    assert rc.returncode == 0, rc.stdout + rc.stderr
    assert "MATCH" in rc.stdout and "matched 6, differing 0" in rc.stdout
    again = tmp_path / "again.lts"
    again.write_bytes(_stream(keydir, head, wins[-1:], stream_no=2))
    replay = cli(*_args(again, lg, keydir))
    assert replay.returncode == 2 and "(a window is committed once)" in replay.stderr


def test_changed_window_block_is_refused(tmp_path, keydir, wledger):
    lg, head = wledger
    wins = _window_records(keydir, head)
    data = bytearray(_stream(keydir, head, wins))
    hdr, blocks = parse_blocks(bytes(data), window_bytes=len(wins[0]))
    at = len(hdr) + len(blocks[0]) + 16 + 40  # block 1's window record: its frame count
    data[at] ^= 1
    (tmp_path / "w.lts").write_bytes(bytes(data))
    r = cli(*_args(tmp_path / "w.lts", lg, keydir))
    assert r.returncode == 2
    assert f"block 1 (byte {len(hdr) + len(blocks[0])}) tag does not verify" in r.stderr


def test_window_records_for_a_ledger_without_the_tier_are_refused(tmp_path, keydir, wledger):
    _, head = wledger
    wins = _window_records(keydir, head)
    (tmp_path / "empty2").write_bytes(b"")
    lg = tmp_path / "F"
    assert cli(*_args(tmp_path / "empty2", lg, keydir)).returncode == 0
    other = json.loads((lg / "ledger.json").read_text())
    (tmp_path / "w.lts").write_bytes(_stream(keydir, other, wins))
    r = cli(*_args(tmp_path / "w.lts", lg, keydir))
    assert (
        r.returncode == 2 and "holds window records, but the ledger has no window tier" in r.stderr
    )


def test_plain_records_into_a_window_ledger_are_refused(tmp_path, keydir, wledger):
    lg, _ = wledger
    (tmp_path / "plain").write_bytes(bytes(48))
    r = cli(*_args(tmp_path / "plain", lg, keydir))
    assert r.returncode == 2 and "a ledger with a window tier takes its window records" in r.stderr


def test_replayed_window_stream_is_refused_by_its_stream_number(tmp_path, keydir, wledger):
    lg, head = wledger
    wins = _window_records(keydir, head)
    (tmp_path / "w.lts").write_bytes(_stream(keydir, head, wins[:2], stream_no=5))
    assert cli(*_args(tmp_path / "w.lts", lg, keydir)).returncode == 0
    r = cli(*_args(tmp_path / "w.lts", lg, keydir))
    assert r.returncode == 2 and "a replayed or stale stream" in r.stderr
