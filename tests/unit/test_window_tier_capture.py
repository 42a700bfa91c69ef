"""capture's window tier: window records sealed in the link's window log like segments are, checked
by verify, exposed by query, and fixed per ledger (docs/ledger-format.md, "Window logs")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, cli_in_process, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.digest.record import record_dtype
from ledgertool.digest.window import WindowAccumulator, WindowKeys, WindowRecord
from ledgertool.errors import UsageError
from ledgertool.ledger.header import load_ledger
from ledgertool.reconcile.query import run_query
from ledgertool.verify.ledger import verify_ledger

MS = 1_000_000
SAMPLE = SAMPLES / "sample.pcapng"  # 294 frames over 5.8 ms: six 1 ms windows


def _capture(keydir: Path, out: Path, **kw):
    dk, sk, _ = load_keys(keydir)
    return capture_file(SAMPLE, out, digest_key=dk, signing_key=sk, segment_records=100, **kw)


def _verified(ledger: Path, trust):
    segs, wins = [], []
    res = verify_ledger(
        ledger, trust, on_segment=lambda s: segs.append(bytes(s.records)), on_windows=wins.append
    )
    return res, segs, wins


def test_window_records_are_the_accumulation_of_the_frames_and_verify(tmp_path, keydir):
    dk, _, trust = load_keys(keydir)
    res = _capture(keydir, tmp_path / "L", tiers=("windows", "frames"), window_ns=MS)
    assert res.tiers == ("frames", "windows")
    assert (res.windows.windows, res.windows.frames) == (6, 294)
    ledger = load_ledger(tmp_path / "L")
    assert ledger.tiers == ("frames", "windows") and ledger.window.window_ns == MS
    assert ledger.window.cells == 225 and ledger.window.capacity == 64
    v, segs, wins = _verified(tmp_path / "L", trust)
    assert v.ok, v.problems
    [summary] = v.windows
    assert (summary.log, summary.segments, summary.windows, summary.frames) == (
        "windows=link0",
        1,
        6,
        294,
    )
    stored = [w for seg in wins for w in seg.windows]
    # an accumulator of our own over the sealed per-frame records gives the same bytes
    keys = WindowKeys.derive(dk.master, ledger.algorithm, ledger.ledger_id, "link0", MS)
    acc = WindowAccumulator(keys, 16, window_ns=MS, cells=225)
    recs = np.frombuffer(b"".join(segs), dtype=record_dtype(16))
    again = acc.add(recs) + acc.finish()
    assert [w.serialize() for w in again] == [w.serialize() for w in stored]
    assert [w.index for w in stored] == sorted({int(t) // MS for t in recs["ts_ns"]})
    assert sum(w.frames for w in stored) == len(recs) == 294
    seal = json.loads((tmp_path / "L" / "windows=link0" / "seg-00000000.seal.json").read_text())
    assert (seal["link"], seal["records"], seal["frames"], seal["leaf_records"]) == (
        "windows=link0",
        6,
        294,
        1,
    )
    assert seal["record_size"] == 80 + 225 * 28 == stored[0].size


def test_windows_only_writes_no_per_frame_records_and_query_reads_the_windows(tmp_path, keydir):
    _, _, trust = load_keys(keydir)
    res = _capture(keydir, tmp_path / "L", tiers=("windows",), window_ns=MS)
    assert res.segments == [] and res.windows.windows == 6
    assert not (tmp_path / "L" / "link=link0").exists()
    v, segs, _ = _verified(tmp_path / "L", trust)
    assert v.ok and v.links == ["link0"] and segs == [] and v.windows[0].frames == 294
    q = run_query(
        tmp_path / "L",
        "SELECT count(*), sum(frames), min(octet_length(hash)), "
        "min(octet_length(cells)), count(DISTINCT window_index) FROM windows",
        trust,
    )
    assert q.rows == [(6, 294, 16, 225 * 28, 6)]


def test_window_parameters_and_windows_are_fixed_per_ledger(tmp_path, keydir):
    _capture(keydir, tmp_path / "L", tiers=("windows", "frames"), window_ns=MS)
    with pytest.raises(UsageError, match="window length 1ms, not 2ms"):
        _capture(keydir, tmp_path / "L", window_ns=2 * MS)
    with pytest.raises(UsageError, match="tiers frames,windows, not frames"):
        _capture(keydir, tmp_path / "L", tiers=("frames",))
    before = sorted(p.name for p in (tmp_path / "L" / "link=link0").iterdir())
    # the same frames again: their windows were sealed already (a pad would be reused)
    with pytest.raises(UsageError, match="at or before window"):
        _capture(keydir, tmp_path / "L")
    assert sorted(p.name for p in (tmp_path / "L" / "link=link0").iterdir()) == before
    # another link has its own windows
    res = _capture(keydir, tmp_path / "L", link="link1")
    assert res.windows.log == "windows=link1" and res.windows.windows == 6


def test_cli_capture_tiers_and_window_options(tmp_path, keydir, capsys):
    args = [
        "capture",
        SAMPLE,
        "--ledger",
        tmp_path / "L",
        "--signing-key",
        keydir / "signing.key",
        "--digest-key",
        keydir / "digest.key",
    ]
    rc, out, err = cli_in_process(
        *args, "--json", "--tiers", "windows", "--window", "2ms", "--window-capacity", "16"
    )
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["tiers"] == ["windows"] and doc["windows"]["windows"] == 3 and doc["segments"] == []
    assert load_ledger(tmp_path / "L").window.cells == 3 * (11 + 32)
    rc, out, err = cli_in_process(*args, "--tiers", "bogus")
    assert rc == 2 and "--tiers must be some of frames, windows" in err
    rc, out, err = cli_in_process("verify", tmp_path / "L", "--trust", keydir / "verifier.pub")
    assert rc == 0 and "windows=link0: 1 segment, 3 windows, 294 frames" in out


def test_verify_finds_a_changed_window_and_a_deleted_window_log(tmp_path, keydir):
    _, _, trust = load_keys(keydir)
    _capture(keydir, tmp_path / "L", tiers=("windows", "frames"), window_ns=MS)
    rec = tmp_path / "L" / "windows=link0" / "seg-00000000.rec"
    raw = bytearray(rec.read_bytes())
    raw[256 + 4 + 40] ^= 1  # the first window's wire bytes
    rec.write_bytes(bytes(raw))
    v = verify_ledger(tmp_path / "L", trust)
    assert [(p.kind, p.link) for p in v.problems] == [("merkle_mismatch", "windows=link0")]
    shutil.rmtree(tmp_path / "L" / "windows=link0")
    v = verify_ledger(tmp_path / "L", trust)
    assert [(p.kind, p.link) for p in v.problems] == [("windows_missing", "link0")]


def test_a_window_seal_does_not_verify_in_the_frames_chain(tmp_path, keydir):
    """The window log's seals chain from their own genesis and name their own log: a window
    segment moved into the link's directory is caught (chain and misplaced seal)."""
    _, _, trust = load_keys(keydir)
    _capture(keydir, tmp_path / "L", tiers=("windows", "frames"), window_ns=MS)
    link, win = tmp_path / "L" / "link=link0", tmp_path / "L" / "windows=link0"
    for kind in ("seal.json", "rec", "leaves"):
        shutil.copy(win / f"seg-00000000.{kind}", link / f"seg-00000000.{kind}")
    kinds = {p.kind for p in verify_ledger(tmp_path / "L", trust).problems}
    assert {"seal_misplaced", "parameter_mismatch"} <= kinds


def test_window_record_bytes_parse_back(tmp_path, keydir):
    _, _, trust = load_keys(keydir)
    _capture(keydir, tmp_path / "L", tiers=("windows",), window_ns=MS)
    _, _, wins = _verified(tmp_path / "L", trust)
    for w in wins[0].windows:
        assert WindowRecord.parse(w.serialize()) == w
