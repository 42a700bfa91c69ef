"""README's window-tier demo at a smaller size: a workload captured into a ledger that keeps window
records only, the capture a prover claims (frames removed and added by scripts/edit_capture.py),
and recompute against the windows names exactly the removed frames (ledger-only, by digest) and
the added ones (capture-only: index, offset, timestamp, digest) — the same frames, named the same
way, as per-frame recompute names them on a ledger that keeps both tiers."""

from __future__ import annotations

import importlib.util
import re

import pytest
from conftest import REPO, cli, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.reconcile.against_windows import reconcile_windows
from ledgertool.reconcile.recompute import reconcile

MS = 1_000_000
REMOVE, ADD = 40, 25
# the demo's spec (samples/demo/window-demo.toml) with 40,000 frames instead of 2,000,000
SPEC = (
    (REPO / "samples" / "demo" / "window-demo.toml")
    .read_text()
    .replace("frames = 1000000", "frames = 20000")
)


def _script():
    spec = importlib.util.spec_from_file_location(
        "edit_capture", REPO / "scripts" / "edit_capture.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def demo(tmp_path_factory, keydir):
    d = tmp_path_factory.mktemp("wdemo")
    (d / "demo.toml").write_text(SPEC)
    r = cli("workload", "generate", d / "demo.toml", "--out", d / "seen.pcap")
    assert r.returncode == 0, r.stderr
    edit = _script()
    linktype, frames = edit.read_pcap(d / "seen.pcap")
    assert len(frames) == 40_000
    rows, removed, added = edit.edit(frames, REMOVE, ADD, 7)
    edit.write_pcap(d / "claimed.pcap", rows, linktype)
    dk, sk, trust = load_keys(keydir)
    workload = f"workload:{d / 'demo.toml'}"
    capture_file(workload, d / "W", digest_key=dk, signing_key=sk, tiers=("windows",), window_ns=MS)
    capture_file(
        workload, d / "B", digest_key=dk, signing_key=sk, tiers=("windows", "frames"), window_ns=MS
    )
    return {
        "dir": d,
        "frames": frames,
        "rows": rows,
        "removed": removed,
        "added": added,
        "dk": dk,
        "trust": trust,
        "keydir": keydir,
    }


def test_the_windows_alone_name_exactly_the_removed_and_added_frames(demo):
    d = demo
    assert not list((d["dir"] / "W").glob("link=*"))  # no per-frame tier kept
    res = reconcile_windows(d["dir"] / "claimed.pcap", d["dir"] / "W", d["dk"], trust=d["trust"])
    assert not res.ok and res.frames == 40_000 - REMOVE + ADD
    assert all(w.status in ("match", "differ") for w in res.windows)  # none beyond capacity
    named = sorted((f for w in res.windows for f in w.capture_only), key=lambda f: f.seq)
    assert [f.seq for f in named] == d["added"]
    assert [(f.ts_ns, f.wire_len) for f in named] == [d["rows"][i][::2] for i in d["added"]]
    offsets, at = [], 24
    for _ts, data, _ in d["rows"]:
        offsets.append(at)
        at += 16 + len(data)
    assert [f.offset for f in named] == [offsets[i] for i in d["added"]]
    assert all(f.summary and "UDP" in f.summary for f in named)
    ledger_only = sorted(x for w in res.windows for x in w.ledger_only)
    assert len(ledger_only) == REMOVE
    # the per-frame tier of a ledger of the same workload names the same frames the same way
    per = reconcile(
        d["dir"] / "claimed.pcap", d["dir"] / "B", d["dk"], trust=d["trust"], examples=100
    )
    assert (per.ledger_only, per.capture_only) == (REMOVE, ADD)
    assert sorted(bytes.fromhex(e["digest"]) for e in per.examples_ledger_only) == ledger_only
    assert sorted(int(e["seq"]) for e in per.examples_ledger_only) == d["removed"]
    assert sorted(
        (int(e["index"]), int(e["ts_ns"]), e["wire_len"], bytes.fromhex(e["digest"]))
        for e in per.examples_capture_only
    ) == [(f.seq, f.ts_ns, f.wire_len, f.digest) for f in named]


def test_the_readme_shows_the_demo_commands(demo):
    text = (REPO / "README.md").read_text()
    for command in (
        "ledgertool workload generate samples/demo/window-demo.toml --out seen.pcap",
        "python scripts/edit_capture.py seen.pcap claimed.pcap --remove 40 --add 25",
        "--tiers windows --window 1ms",
        "ledgertool recompute claimed.pcap --ledger D",
    ):
        assert command in text, command
    r = cli(
        "recompute",
        demo["dir"] / "claimed.pcap",
        "--ledger",
        demo["dir"] / "W",
        "--digest-key",
        demo["keydir"] / "digest.key",
        "--trust",
        demo["keydir"] / "verifier.pub",
    )
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert re.match(
        r"DIFFER: 39,985 frames recomputed from .*claimed.pcap, against the window", lines[0]
    )
    assert sum(ln.startswith("    capture-only frame ") for ln in lines) == ADD
    assert sum(ln.startswith("    ledger-only  digest ") for ln in lines) == REMOVE
