"""Audit challenges: the sample re-derived by an implementation written from the docs alone
(tests/challenge_spec.py), a prover who altered 5 % of the windows caught by a 100-window
challenge as often as the hypergeometric bound says, and `challenge draw` / `recompute
--challenge` end to end on a window-tier ledger (partial reveals, missing and altered windows,
tampered documents)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import sys
from pathlib import Path

import pytest
from conftest import REPO, cli, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.errors import LedgerFormatError, UsageError
from ledgertool.seal import challenge as chmod
from ledgertool.seal.challenge import Randomness, commitment, parse_challenge
from ledgertool.seal.checkpoint import parse_note

sys.path.insert(0, str(REPO / "tests"))
import challenge_spec as spec  # noqa: E402

MS = 1_000_000
BASE = 10**18
WINDOWS = 200


def _frame(w: int, i: int, altered: bool = False) -> bytes:
    body = (b"X" if altered else b"A") * 40
    return bytes(12) + b"\x08\x00" + w.to_bytes(4, "big") + i.to_bytes(2, "big") + body


def _frames(altered: frozenset[int] = frozenset()) -> list[tuple[int, bytes]]:
    return [
        (BASE + w * MS + i * 1000, _frame(w, i, w in altered and i == 0))
        for w in range(WINDOWS)
        for i in range(3)
    ]


def _pcap(path: Path, frames) -> Path:
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)]
    for ts, data in frames:
        out.append(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), 60) + data)
    path.write_bytes(b"".join(out))
    return path


@pytest.fixture(scope="module")
def audit(tmp_path_factory, keydir):
    """A window-tier ledger of 200 one-millisecond windows, 3 frames each, and its capture."""
    d = tmp_path_factory.mktemp("audit")
    dk, sk, _ = load_keys(keydir)
    cap = _pcap(d / "cap.pcap", _frames())
    capture_file(cap, d / "L", digest_key=dk, signing_key=sk, tiers=("windows",), window_ns=MS)
    return d, d / "L", d / "L" / "windows=link0" / "checkpoint"


def _joint(text: bytes, vn: bytes = b"v" * 32, pn: bytes = b"p" * 32) -> Randomness:
    return Randomness("joint", vn, pn, commitment(text, pn))


def _text(note: bytes) -> bytes:
    return note[: note.index(b"\n\n") + 1]


# ---- the derivation, independently --------------------------------------------------------


def test_commitment_seed_and_sample_equal_the_independent_implementation():
    text = b"ledgertool/00112233445566778899aabbccddeeff/windows=link0\n3\nAAAA\nrecords 9000\n"
    for n, k, vn in ((9000, 100, b"\x01" * 16), (7, 7, b"\x02" * 40), (1, 1, os.urandom(32))):
        pn = os.urandom(32)
        assert commitment(text, pn) == spec.commitment(text, pn)
        assert commitment(text + b"x", pn) != commitment(text, pn)
        s = chmod.seed(text, "windows", 1, k, _joint(text, vn, pn))
        assert s == spec.seed(text, "windows", 1, k, "joint", vn, pn)
        assert chmod.sample(s, n, k) == spec.sample(s, n, k)
        assert sorted(set(spec.sample(s, n, k))) == sorted(spec.sample(s, n, k))
    b = bytes(range(20))
    s = chmod.seed(text, "frames", 64, 5, Randomness("beacon", beacon=b))
    assert s == spec.seed(text, "frames", 64, 5, "beacon", b, b"")


def test_known_answer_of_the_sample():
    """A fixed input's sample (computed by tests/challenge_spec.py; a change of the derivation
    changes it)."""
    e = hashlib.sha256(b"").digest()
    assert chmod.sample(e, 10, 3) == spec.sample(e, 10, 3) == [2, 5, 8]
    assert chmod.sample(e, 1000, 5) == [932, 505, 918, 780, 656]


def test_escape_probability_is_the_exact_hypergeometric():
    for n, k, bad in ((200, 100, 10), (2000, 100, 100), (50, 10, 1), (10, 10, 1)):
        assert chmod.escape_probability(n, k, bad) == pytest.approx(
            float(spec.escape(n, k, bad)), rel=1e-9, abs=1e-300
        )
    (b95, b99) = chmod.detection_bounds(2000, 100)
    # the smallest number of altered windows caught with probability >= 95 %
    assert spec.escape(2000, 100, b95.items) <= 0.05 < spec.escape(2000, 100, b95.items - 1)
    assert spec.escape(2000, 100, b99.items) <= 0.01 < spec.escape(2000, 100, b99.items - 1)
    assert b95.fraction_with_replacement == pytest.approx(1 - 0.05 ** (1 / 100))
    assert b95.fraction <= b95.fraction_with_replacement


def test_five_percent_altered_is_caught_by_100_windows_at_the_stated_rate():
    """Over 4000 draws with fresh nonces, a prover who altered 100 of 2000 windows escapes a
    100-window challenge as often as the hypergeometric says (about 0.52 %; (0.95)^100 = 0.59 %
    with replacement), within a 5-sigma binomial band."""
    n, k, altered = 2000, 100, set(range(0, 2000, 20))
    text = b"ledgertool/00112233445566778899aabbccddeeff/windows=link0\n9\nAAAA\nrecords 2000\n"
    draws, escaped = 4000, 0
    for t in range(draws):
        pn = hashlib.sha256(b"p%d" % t).digest()
        s = chmod.seed(text, "windows", 1, k, _joint(text, hashlib.sha256(b"v%d" % t).digest(), pn))
        escaped += not altered.intersection(chmod.sample(s, n, k))
    p = chmod.escape_probability(n, k, len(altered))
    assert 0.0050 < p < (1 - 0.05) ** 100
    sigma = math.sqrt(draws * p * (1 - p))
    assert abs(escaped - draws * p) <= 5 * sigma, (escaped, draws * p)


def test_randomness_is_checked():
    with pytest.raises(UsageError, match="does not open"):
        Randomness("joint", b"v" * 32, b"p" * 32, commitment(b"T\n", b"q" * 32)).check(b"T\n")
    with pytest.raises(UsageError, match="does not open"):  # another checkpoint
        Randomness("joint", b"v" * 32, b"p" * 32, commitment(b"T\n", b"p" * 32)).check(b"U\n")
    with pytest.raises(UsageError, match="bytes"):
        Randomness("joint", b"v" * 8, b"p" * 32, commitment(b"T\n", b"p" * 32)).check(b"T\n")
    with pytest.raises(UsageError, match="beacon"):
        Randomness("beacon", beacon=b"").check(b"T\n")


# ---- draw and recompute ---------------------------------------------------------------------


def test_draw_writes_a_document_an_independent_reader_re_derives(audit, keydir, tmp_path):
    _, ledger, cp = audit
    out = tmp_path / "ch.json"
    pn = tmp_path / "nonce"
    r = cli("challenge", "commit", "--checkpoint", cp, "--out", pn, "--json")
    assert r.returncode == 0, r.stderr
    commit_out = r.stdout
    c = json.loads(r.stdout)["prover_commitment"]
    nonce = bytes.fromhex(pn.read_text().strip())
    assert spec.commitment(_text(cp.read_bytes()), nonce).hex() == c
    vn = "ab" * 32
    r = cli(
        "challenge",
        "draw",
        ledger,
        "--checkpoint",
        cp,
        "--trust",
        keydir / "verifier.pub",
        "-k",
        "100",
        "--verifier-nonce",
        vn,
        "--prover-nonce",
        f"@{pn}",
        "--prover-commitment",
        c,
        "--out",
        out,
    )
    assert r.returncode == 0, r.stderr
    data = out.read_bytes()
    assert hashlib.sha256(data).hexdigest() in r.stdout
    doc = json.loads(data)
    assert (
        data == json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    jsonschema = pytest.importorskip("jsonschema")
    draw_rep = {"ok": True, "out": "x", "challenge_sha256": "0" * 64, **doc}
    for name, rep in (
        ("challenge-commit-report.schema.json", json.loads(commit_out)),
        ("challenge-draw-report.schema.json", draw_rep),
    ):
        schema = json.loads((REPO / "schemas" / name).read_text())
        jsonschema.Draft202012Validator(schema).validate(rep)
    note = doc["checkpoint"].encode()
    text = note[: note.index(b"\n\n") + 1]
    assert doc["population"] == WINDOWS == int(text.split(b"records ")[1].split(b"\n")[0])
    s = spec.seed(text, "windows", 1, 100, "joint", bytes.fromhex(vn), nonce)
    assert doc["seed"] == s.hex()
    positions = sorted(spec.sample(s, WINDOWS, 100))
    assert [it["position"] for it in doc["items"]] == positions
    # one window a record, in order: position p is window index BASE/MS + p
    assert [int(it["index"]) for it in doc["items"]] == [BASE // MS + p for p in positions]


def _draw(ledger, cp, keydir, k=100, vn=b"v" * 32):
    from ledgertool.keyfiles import TrustBundle
    from ledgertool.reconcile.challenge import draw_challenge

    trust = TrustBundle.load(keydir / "verifier.pub")
    return draw_challenge(ledger, cp.read_bytes(), trust, k, _joint(_text(cp.read_bytes()), vn))


def test_recompute_a_challenge_from_a_partial_reveal(audit, keydir, tmp_path):
    d, ledger, cp = audit
    ch = _draw(ledger, cp, keydir)
    doc = tmp_path / "ch.json"
    doc.write_bytes(ch.canonical())
    chosen = {it.index for it in ch.items}
    part = _pcap(tmp_path / "part.pcap", [f for f in _frames() if f[0] // MS in chosen])
    extra = [f for f in _frames() if f[0] // MS not in chosen][:6]  # two windows outside
    both = _pcap(tmp_path / "both.pcap", sorted([*_frames_of(part), *extra]))
    args = ("--ledger", ledger, "--digest-key", keydir / "digest.key", "--trust")
    for reveal, ignored in ((part, 0), (both, 2)):
        r = cli("recompute", reveal, *args, keydir / "verifier.pub", "--challenge", doc, "--json")
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert (rep["ok"], rep["matched"], rep["challenged"]) == (True, 100, 100)
        assert rep["ignored_windows"] == ignored and rep["ignored_frames"] == 3 * ignored
        assert rep["challenge_sha256"] == hashlib.sha256(doc.read_bytes()).hexdigest()
        assert [x["confidence"] for x in rep["detection"]] == [0.95, 0.99]
    # a challenged window left out of the reveal is a finding
    short = _pcap(
        tmp_path / "short.pcap", [f for f in _frames_of(part) if f[0] // MS != min(chosen)]
    )
    r = cli("recompute", short, *args, keydir / "verifier.pub", "--challenge", doc, "--json")
    rep = json.loads(r.stdout)
    assert r.returncode == 1 and rep["missing"] == 1 and rep["matched"] == 99
    miss = [x for x in rep["per_item"] if x["status"] == "missing"]
    assert [int(x["index"]) for x in miss] == [min(chosen)]


def _frames_of(path: Path) -> list[tuple[int, bytes]]:
    from ledgertool.source import open_source

    with open_source(path) as r:
        return [(f.ts_ns, bytes(f.data)) for f in r.frames()]


def test_a_prover_who_altered_five_percent_is_caught(audit, keydir, tmp_path):
    """10 of 200 windows altered (5 %); a 100-window challenge escapes with probability
    C(190,100)/C(200,100) < 0.1 %: each of three draws catches it, naming exactly the altered
    windows it sampled."""
    _, ledger, cp = audit
    altered = frozenset(range(3, WINDOWS, 20))
    reveal = _pcap(tmp_path / "alt.pcap", _frames(altered))
    assert chmod.escape_probability(WINDOWS, 100, len(altered)) < 1e-3
    for t in range(3):
        ch = _draw(ledger, cp, keydir, vn=hashlib.sha256(b"%d" % t).digest())
        doc = tmp_path / f"ch{t}.json"
        doc.write_bytes(ch.canonical())
        r = cli(
            "recompute",
            reveal,
            "--ledger",
            ledger,
            "--digest-key",
            keydir / "digest.key",
            "--trust",
            keydir / "verifier.pub",
            "--challenge",
            doc,
            "--json",
        )
        rep = json.loads(r.stdout)
        sampled = {it.index - BASE // MS for it in ch.items} & altered
        assert r.returncode == 1 and sampled
        assert {
            int(x["index"]) - BASE // MS for x in rep["per_item"] if x["status"] != "match"
        } == sampled
        assert rep["differing"] == len(sampled)


def test_a_tampered_challenge_document_is_refused(audit, keydir, tmp_path):
    _, ledger, cp = audit
    ch = _draw(ledger, cp, keydir, k=10)
    doc = ch.to_json()
    parse_challenge(ch.canonical(), "ch", parse_note)  # the untampered one parses
    cases = {
        "another item": lambda d: d["items"].__setitem__(0, {**d["items"][0], "position": 199}),
        "another k": lambda d: d.__setitem__("k", 11),
        "another seed": lambda d: d.__setitem__("seed", "00" * 32),
        "another nonce": lambda d: d["randomness"].__setitem__("verifier_nonce", "00" * 32),
        "an unknown member": lambda d: d.__setitem__("note", 1),
        "another checkpoint": lambda d: d.__setitem__(
            "checkpoint", d["checkpoint"].replace("records 200", "records 201")
        ),
    }
    for name, change in cases.items():
        d = json.loads(json.dumps(doc))
        change(d)
        with pytest.raises(LedgerFormatError):
            parse_challenge(json.dumps(d).encode(), name, parse_note)
    bad = tmp_path / "bad.json"
    d = json.loads(json.dumps(doc))
    cases["another seed"](d)
    bad.write_text(json.dumps(d))
    r = cli(
        "recompute",
        audit[0] / "cap.pcap",
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--challenge",
        bad,
    )
    assert r.returncode == 2 and "seed" in r.stderr and "Traceback" not in r.stderr


def test_draw_refuses_an_unopened_commitment_and_a_ledger_that_does_not_extend(
    audit, keydir, tmp_path
):
    _, ledger, cp = audit
    args = ("challenge", "draw", ledger, "--trust", keydir / "verifier.pub", "-k", "3")
    r = cli(
        *args,
        "--checkpoint",
        cp,
        "--verifier-nonce",
        "11" * 32,
        "--prover-nonce",
        "22" * 32,
        "--prover-commitment",
        "33" * 32,
        "--out",
        tmp_path / "x.json",
    )
    assert r.returncode == 2 and "does not open" in r.stderr
    # a checkpoint of another history: same size, another root
    text = cp.read_bytes()
    lines = text.split(b"\n")
    forged = b"\n".join([lines[0], lines[1], b"A" * 43 + b"=", *lines[3:]])
    (tmp_path / "forged").write_bytes(forged)
    r = cli(
        *args, "--checkpoint", tmp_path / "forged", "--beacon", "44" * 16, "--out", tmp_path / "y"
    )
    assert r.returncode == 1 and "does not verify" in r.stderr


def test_per_frame_ranges_are_drawn_over_the_records(tmp_path, keydir):
    from ledgertool.reconcile.challenge import draw_challenge

    dk, sk, trust = load_keys(keydir)
    cap = _pcap(tmp_path / "cap.pcap", _frames()[:300])
    capture_file(cap, tmp_path / "F", digest_key=dk, signing_key=sk)
    cp = (tmp_path / "F" / "checkpoint").read_bytes()
    ch = draw_challenge(
        tmp_path / "F", cp, trust, 4, Randomness("beacon", beacon=b"b" * 16), range_records=64
    )
    assert ch.tier == "frames" and ch.population == 5  # 300 records in ranges of 64
    s = spec.seed(cp[: cp.index(b"\n\n") + 1], "frames", 64, 4, "beacon", b"b" * 16, b"")
    assert [i.position for i in ch.items] == sorted(spec.sample(s, 5, 4))
    assert all(i.first_record == 64 * i.position for i in ch.items)
    assert [i.records for i in ch.items if i.position == 4] in ([], [300 - 256])
    assert parse_challenge(ch.canonical(), "ch", parse_note) == ch


def test_a_per_frame_challenge_recomputes_its_record_ranges(tmp_path, keydir):
    """Ranges of 64 records of a link: the honest capture matches every range, a reveal with one
    challenged frame altered differs in exactly that range, one without a range's frames is
    missing."""
    from ledgertool.keyfiles import DigestKey
    from ledgertool.reconcile.challenge import draw_challenge, recompute_challenge

    dk, sk, trust = load_keys(keydir)
    frames = _frames()[:600]
    cap = _pcap(tmp_path / "cap.pcap", frames)
    capture_file(cap, tmp_path / "F", digest_key=dk, signing_key=sk, segment_records=100)
    cp = (tmp_path / "F" / "checkpoint").read_bytes()
    ch = draw_challenge(tmp_path / "F", cp, trust, 3, Randomness("beacon", beacon=b"c" * 16))
    assert ch.population == 10 and all(i.records in (64, 600 - 576) for i in ch.items)
    dk = DigestKey.load(keydir / "digest.key")
    res = recompute_challenge(cap, tmp_path / "F", dk, ch, ch.sha256(), trust=trust)
    assert res.ok and [o.status for _, o in res.items] == ["match"] * 3
    assert sum(o.ledger_frames for _, o in res.items) == sum(i.records for i in ch.items)
    target = ch.items[1]
    k = target.first_record + 10  # a frame inside the second challenged range
    altered = [*frames[:k], (frames[k][0], frames[k][1][:-1] + b"Z"), *frames[k + 1 :]]
    res = recompute_challenge(
        _pcap(tmp_path / "alt.pcap", altered), tmp_path / "F", dk, ch, ch.sha256(), trust=trust
    )
    got = {it.position: o for it, o in res.items}
    assert not res.ok and got[target.position].status == "differ"
    assert len(got[target.position].ledger_only) == len(got[target.position].capture_only) == 1
    assert [o.status for p, o in got.items() if p != target.position] == ["match"] * 2
    first = ch.items[0]
    gone = [
        f
        for n, f in enumerate(frames)
        if not first.first_record <= n < first.first_record + first.records
    ]
    res = recompute_challenge(
        _pcap(tmp_path / "gone.pcap", gone), tmp_path / "F", dk, ch, ch.sha256(), trust=trust
    )
    assert {it.position: o.status for it, o in res.items}[first.position] == "missing"


def test_challenge_reports_follow_the_recompute_report_schema(audit, keydir, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "schemas" / "recompute-report.schema.json").read_text())
    d, ledger, cp = audit
    ch = _draw(ledger, cp, keydir, k=5)
    doc = tmp_path / "ch.json"
    doc.write_bytes(ch.canonical())
    r = cli(
        "recompute",
        d / "cap.pcap",
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--challenge",
        doc,
        "--json",
    )
    rep = json.loads(r.stdout)
    jsonschema.Draft202012Validator(schema).validate(rep)
    assert rep["against"] == "challenge" and rep["per_item"][0]["status"] == "match"


def test_verify_checks_a_window_log_checkpoint_against_the_window_log(audit, keydir, tmp_path):
    """A `--checkpoint` of `windows=link0` is compared with the window log (a challenge rests on
    it): another root of the same size signed by the ledger's key is checkpoint_mismatch; the
    real one is enough for append-only in a ledger without per-frame records."""
    from ledgertool.seal.checkpoint import Checkpoint, sign_checkpoint

    _, ledger, cp = audit
    _, sk, _ = load_keys(keydir)
    pub = keydir / "verifier.pub"
    r = cli("verify", ledger, "--trust", pub, "--checkpoint", cp)
    assert r.returncode == 0 and "append-only not checked" not in r.stderr, r.stderr
    real = parse_note(cp.read_bytes()).checkpoint
    forged = tmp_path / "forged"
    forged.write_bytes(
        sign_checkpoint(
            Checkpoint(real.origin, real.size, hashlib.sha256(b"x").digest(), real.records), sk
        )
    )
    r = cli("verify", ledger, "--trust", pub, "--checkpoint", forged, "--json")
    assert r.returncode == 1
    assert [p["kind"] for p in json.loads(r.stdout)["problems"]] == ["checkpoint_mismatch"]
