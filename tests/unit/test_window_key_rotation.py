"""Window keys across key rotations: window keys are derived from the digest key, so a digest-key
rotation starts a new key period in the link's window log. The rotation statement names the window
log's boundary, the log keeps verifying, and recompute against windows uses each window's own key
(and refuses a key set that does not cover the log). A signing-key rotation covers the window log
the same way."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys
from test_reconcile import write_pcap

from ledgertool.capture.run import capture_file
from ledgertool.digest.reference import read_pcap
from ledgertool.digest.window import WindowKeys
from ledgertool.errors import KeyFileError, UsageError
from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.rotations import load_rotations
from ledgertool.reconcile.against_windows import reconcile_windows
from ledgertool.verify.ledger import verify_ledger

MS = 1_000_000
HALF = 147
SHIFT = 10 * MS  # the second capture starts 10 windows after the first one's last


@pytest.fixture(scope="module")
def setup(tmp_path_factory, keydir):
    """A windows,frames ledger: first half under digest key A, `keys rotate-digest` A -> B, second
    half under B; the captures of each half and of both."""
    d = tmp_path_factory.mktemp("wrot")
    generate_keys(d / "b")
    a, sk, trust = load_keys(keydir)
    b = DigestKey.load(d / "b" / "digest.key")
    rows = [(ts, w, x) for ts, _c, w, x in read_pcap((SAMPLES / "sample.pcap").read_bytes())]
    first, second = rows[:HALF], [(ts + SHIFT, w, x) for ts, w, x in rows[HALF:]]
    write_pcap(d / "first.pcap", first)
    write_pcap(d / "second.pcap", second)
    write_pcap(d / "full.pcap", first + second)
    lg = d / "L"
    capture_file(
        d / "first.pcap",
        lg,
        digest_key=a,
        signing_key=sk,
        tiers=("windows", "frames"),
        window_ns=MS,
    )
    r = cli(
        "keys",
        "rotate-digest",
        lg,
        "--signing-key",
        keydir / "signing.key",
        "--old-digest-key",
        keydir / "digest.key",
        "--new-digest-key",
        d / "b" / "digest.key",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["effective_from"] == {"link0": 1, "windows=link0": 1}
    capture_file(d / "second.pcap", lg, digest_key=b, signing_key=sk)
    return {"dir": d, "ledger": lg, "A": a, "B": b, "trust": trust, "rows": first + second}


def test_the_window_log_verifies_across_a_digest_key_rotation(setup):
    v = verify_ledger(setup["ledger"], setup["trust"])
    assert v.ok, [p.to_json() for p in v.problems]
    (log,) = v.windows
    assert log.frames == 294 and log.segments == 2


def test_recompute_against_windows_uses_each_periods_key(setup):
    s = setup
    for keys in ([s["A"], s["B"]], [s["B"], s["A"]]):
        res = reconcile_windows(s["dir"] / "full.pcap", s["ledger"], keys, trust=s["trust"])
        assert res.ok and (res.frames, res.ledger_frames) == (294, 294)
        assert res.windows and all(w.status == "match" for w in res.windows)
    # each half alone matches its own period's windows and reports the other period's as missing
    res = reconcile_windows(
        s["dir"] / "second.pcap", s["ledger"], [s["A"], s["B"]], trust=s["trust"]
    )
    only_ledger = [w for w in res.windows if w.status != "match"]
    assert sum(w.ledger_frames for w in only_ledger) == HALF
    assert all(w.capture_frames == 0 for w in only_ledger)


def test_the_keys_of_the_two_periods_differ(setup):
    s = setup
    head = load_ledger(s["ledger"])
    ka, kb = (
        WindowKeys.derive(k.master, head.algorithm, head.ledger_id, "link0", MS)
        for k in (s["A"], s["B"])
    )
    assert ka != kb


def test_a_frame_changed_after_the_rotation_is_named_with_the_new_key(setup, tmp_path):
    s = setup
    rows = list(s["rows"])
    k = HALF + 20
    ts, wire, data = rows[k]
    rows[k] = (ts, wire, data[:-1] + bytes([data[-1] ^ 0x5A]))
    write_pcap(tmp_path / "changed.pcap", rows)
    res = reconcile_windows(
        tmp_path / "changed.pcap", s["ledger"], [s["A"], s["B"]], trust=s["trust"]
    )
    assert not res.ok
    (w,) = res.differing
    assert w.status == "differ" and len(w.ledger_only) == 1
    assert [(f.seq, f.ts_ns) for f in w.capture_only] == [(k, ts)]


def test_keys_that_do_not_cover_the_log_are_refused(setup, tmp_path):
    s = setup
    for keys, said in (
        ([s["A"]], "no digest key given has id"),
        ([s["B"]], "no digest key given has id"),
    ):
        with pytest.raises(KeyFileError, match=said):
            reconcile_windows(s["dir"] / "full.pcap", s["ledger"], keys, trust=s["trust"])
    generate_keys(tmp_path / "x")
    x = DigestKey.load(tmp_path / "x" / "digest.key")
    with pytest.raises(KeyFileError, match="digests no window of it"):
        reconcile_windows(
            s["dir"] / "full.pcap", s["ledger"], [s["A"], s["B"], x], trust=s["trust"]
        )


def test_a_range_verdict_stays_on_one_side_of_the_rotation(setup):
    s = setup
    keys = [s["A"], s["B"]]
    with pytest.raises(UsageError, match="span a digest-key rotation"):
        reconcile_windows(
            s["dir"] / "full.pcap", s["ledger"], keys, trust=s["trust"], windows_range=(None, None)
        )
    res = reconcile_windows(s["dir"] / "full.pcap", s["ledger"], keys, trust=s["trust"])
    starts = sorted(w.index for w in res.windows)
    cut = min(w.index for w in res.windows if w.start_ns >= s["rows"][HALF][0] // MS * MS)
    assert cut in starts
    second = reconcile_windows(
        s["dir"] / "second.pcap", s["ledger"], keys, trust=s["trust"], windows_range=(cut, None)
    )
    assert second.ok and second.range_equal and second.frames == 294 - HALF
    first = reconcile_windows(
        s["dir"] / "first.pcap", s["ledger"], keys, trust=s["trust"], windows_range=(None, cut - 1)
    )
    assert first.ok and first.range_equal and first.frames == HALF


def test_the_cli_takes_both_keys(setup):
    s = setup
    kd = s["dir"]
    r = cli(
        "recompute",
        kd / "full.pcap",
        "--ledger",
        s["ledger"],
        "--digest-key",
        s["A"].path,
        "--digest-key",
        kd / "b" / "digest.key",
        "--trust",
        Path(s["A"].path).parent / "verifier.pub",
        "--against",
        "windows",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["against"] == "windows" and doc["matches"] and doc["frames"] == 294
    assert Counter(w["status"] for w in doc["per_window"]) == {"match": len(doc["per_window"])}


def test_a_signing_key_rotation_covers_the_window_log(tmp_path, keydir):
    a, sk, trust = load_keys(keydir)
    generate_keys(tmp_path / "k2")
    sk2 = SigningKey.load(tmp_path / "k2" / "signing.key")
    lg = tmp_path / "L"
    capture_file(SAMPLES / "sample.pcap", lg, digest_key=a, signing_key=sk, tiers=("windows",))
    r = cli(
        "keys",
        "rotate",
        lg,
        "--old",
        keydir / "signing.key",
        "--new",
        tmp_path / "k2" / "signing.key",
    )
    assert r.returncode == 0, r.stderr
    (rot,) = load_rotations(lg)
    assert rot.effective_from == {"windows=link0": 1}
    rows = [
        (ts + 3600 * 10**9, w, x)
        for ts, _c, w, x in read_pcap((SAMPLES / "sample.pcap").read_bytes())
    ]
    write_pcap(tmp_path / "later.pcap", rows)
    capture_file(tmp_path / "later.pcap", lg, digest_key=a, signing_key=sk2)
    v = verify_ledger(lg, trust)  # the genesis keys, followed through the rotation
    assert v.ok, [p.to_json() for p in v.problems]
    assert v.windows[0].segments == 2
