"""`prove --window`: an inclusion proof of one window record of a link's window log, under its
seal and the log's checkpoint, and `check-proof` of it: round trips, a tamper matrix over every
field, the record, the path, the root and the checkpoint, and another ledger's checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys
from test_schemas_reports import is_valid, validate

from ledgertool.capture.run import capture_file
from ledgertool.errors import LedgerFormatError, UsageError
from ledgertool.seal.checkpoint import parse_note
from ledgertool.verify.ledger import verify_ledger
from ledgertool.verify.proof import build_window_proof, check_proof, parse_proof
from ledgertool.verify.proofdoc import WINDOW_FIELDS, WindowProof

MS = 1_000_000
SAMPLE = SAMPLES / "sample.pcapng"  # 294 frames over 5.8 ms: six 1 ms windows


def _capture(keydir: Path, out: Path, tiers=("windows", "frames")) -> Path:
    dk, sk, _ = load_keys(keydir)
    capture_file(
        SAMPLE, out, digest_key=dk, signing_key=sk, segment_records=100, tiers=tiers, window_ns=MS
    )
    return out


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory, keydir):
    d = tmp_path_factory.mktemp("window-proofs")
    return _capture(keydir, d / "A"), _capture(keydir, d / "B"), d


@pytest.fixture(scope="module")
def windows(ledgers, keydir):
    """The stored window records of ledger A, as verify hands them on."""
    _, _, trust = load_keys(keydir)
    got = []
    res = verify_ledger(ledgers[0], trust, on_windows=got.append)
    assert res.ok, res.problems
    return [w for seg in got for w in seg.windows]


def test_every_window_proves_and_checks_with_its_fields(ledgers, windows, keydir):
    _, _, trust = load_keys(keydir)
    assert len(windows) == 6
    for k, w in enumerate(windows):
        # any instant inside the window names it
        for at in (w.start_ns, w.start_ns + MS - 1):
            proof = build_window_proof(ledgers[0], at_ns=at)
            assert isinstance(proof, WindowProof) and proof.link == "windows=link0"
            assert proof.window.record == w.serialize() and proof.leaf_index == k
            assert (proof.window.index, proof.window.frames, proof.window.drops) == (
                w.index,
                w.frames,
                w.drops,
            )
            assert proof.checkpoint is not None and proof.tree_size == 6
            res = check_proof(parse_proof(proof.to_bytes()), trust)
            assert res.ok, res.reason
            assert res.checkpoint.size == proof.checkpoint.tree_size
    # the typed value and its JSON round-trip exactly; the JSON follows its schema
    proof = build_window_proof(ledgers[0], at_ns=windows[2].start_ns)
    validate(proof.to_json(), "window-proof.schema.json")
    assert not is_valid(dict(proof.to_json(), extra=1), "window-proof.schema.json")
    assert parse_proof(proof.to_bytes()) == proof
    assert parse_proof(proof.to_bytes()).to_bytes() == proof.to_bytes()
    assert sum(w.frames for w in windows) == 294


def test_prove_window_cli_and_check_proof_prints_the_window(ledgers, windows, keydir, tmp_path):
    w = windows[3]
    out = tmp_path / "w.json"
    r = cli("prove", ledgers[0], "--window", w.start_ns, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    validate(summary, "prove-report.schema.json")
    assert summary["window_index"] == str(w.index) and summary["start_ns"] == str(w.start_ns)
    assert summary["record_index"] == 3 and summary["link"] == "windows=link0"
    assert summary["checkpoint_size"] == 1 and summary["audit_path"] == 3
    r = cli("check-proof", out, "--trust", keydir / "verifier.pub")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(
        f"VALID: window {w.index} (start {w.start_ns} ns, {MS} ns long: {w.frames} frames, "
        f"{w.wire_bytes} bytes, {w.drops} drops, {w.late} late) is record 3 of ledger "
    ), r.stdout
    r = cli("check-proof", out, "--trust", keydir / "verifier.pub", "--json")
    rep = json.loads(r.stdout)
    validate(rep, "check-proof-report.schema.json")
    assert rep["ok"] and rep["record"] is None and rep["record_index"] is None
    assert rep["window"]["frames"] == str(w.frames) and rep["window"]["index"] == str(w.index)
    assert rep["window"]["start_ns"] == str(w.start_ns)
    assert rep["window"]["drops"] == str(w.drops) and rep["window"]["wire_bytes"] == str(
        w.wire_bytes
    )
    # the ISO 8601 spelling of the same instant names the same window
    iso = cli("prove", ledgers[0], "--window", "1970-01-01T00:00:00Z", "--out", tmp_path / "x")
    assert iso.returncode == 2 and "no sealed window" in iso.stderr


def _tamper(doc: dict, how: str) -> None:
    win = doc["window"]
    if how in WINDOW_FIELDS:
        win[how] = str(int(win[how]) + 1)
    elif how == "record_clear":  # the frames field of the record itself (bytes 32..39)
        b = bytearray(bytes.fromhex(win["record"]))
        b[32] ^= 1
        win["record"] = b.hex()
    elif how == "record_masked":  # a byte of the masked hash and cells
        b = bytearray(bytes.fromhex(win["record"]))
        b[-1] ^= 1
        win["record"] = b.hex()
    elif how == "record_and_fields":  # frames changed in the record and the fields alike
        b = bytearray(bytes.fromhex(win["record"]))
        b[32] ^= 1
        win["record"] = b.hex()
        win["frames"] = str(int(win["frames"]) ^ 1)
    elif how == "audit_path":
        doc["audit_path"][0] = "00" * 32
    elif how == "audit_path_short":
        doc["audit_path"].pop()
    elif how == "leaf_index":
        doc["leaf_index"] ^= 1
    elif how == "tree_size":
        doc["tree_size"] += 1
    elif how == "seal_root":
        doc["seal"]["merkle_root"] = "00" * 32
    elif how == "seal_frames":
        doc["seal"]["frames"] += 1
    elif how == "segment":
        doc["segment"] += 1
    elif how == "link":
        doc["link"] = "link0"
    elif how == "checkpoint_path":
        doc["checkpoint"]["audit_path"] = ["00" * 32]
    else:
        raise AssertionError(how)


TAMPERS = [
    *WINDOW_FIELDS,
    "record_clear",
    "record_masked",
    "record_and_fields",
    "audit_path",
    "audit_path_short",
    "leaf_index",
    "tree_size",
    "seal_root",
    "seal_frames",
    "segment",
    "link",
]


@pytest.mark.parametrize("how", TAMPERS)
def test_a_tampered_window_proof_is_invalid(ledgers, windows, keydir, tmp_path, how):
    _, _, trust = load_keys(keydir)
    good = build_window_proof(ledgers[0], at_ns=windows[2].start_ns).to_json()
    assert check_proof(good, trust).ok
    bad = json.loads(json.dumps(good))
    _tamper(bad, how)
    res = check_proof(bad, trust)
    assert not res.ok and res.reason, how
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    r = cli("check-proof", path, "--trust", keydir / "verifier.pub")
    assert r.returncode in (1, 2) and "VALID:" not in r.stdout.replace("INVALID", ""), (how, r)


def test_a_window_proof_with_a_checkpoint_path_of_another_window_is_invalid(
    ledgers, windows, keydir
):
    """The checkpoint part's path leads from the seal hash; one that does not is refused. The log
    here has one segment, so the path is empty: any hash added breaks it."""
    _, _, trust = load_keys(keydir)
    good = build_window_proof(ledgers[0], at_ns=windows[0].start_ns).to_json()
    bad = json.loads(json.dumps(good))
    _tamper(bad, "checkpoint_path")
    res = check_proof(bad, trust)
    assert not res.ok and "checkpoint" in res.reason


def test_a_window_proof_of_one_ledger_fails_against_anothers_checkpoint(
    ledgers, windows, keydir, tmp_path
):
    a, b, _ = ledgers
    _, _, trust = load_keys(keydir)
    proof = build_window_proof(a, at_ns=windows[1].start_ns)
    theirs = (b / "windows=link0" / "checkpoint").read_bytes()
    ours = (a / "windows=link0" / "checkpoint").read_bytes()
    assert check_proof(proof, trust, parse_note(ours)).ok
    res = check_proof(proof, trust, parse_note(theirs))
    assert not res.ok and "the given checkpoint is for" in res.reason
    # on the command line another ledger's checkpoint is bad input
    path = tmp_path / "p.json"
    path.write_bytes(proof.to_bytes())
    (tmp_path / "b.cp").write_bytes(theirs)
    r = cli(
        "check-proof", path, "--trust", keydir / "verifier.pub", "--checkpoint", tmp_path / "b.cp"
    )
    assert r.returncode == 2 and "checkpoint is for" in r.stderr
    # the other ledger's checkpoint note spliced into the proof: refused
    doc = proof.to_json()
    doc["checkpoint"]["note"] = theirs.decode()
    res = check_proof(doc, trust)
    assert not res.ok and "the proof's checkpoint is for" in res.reason
    # the proof renamed to the other ledger: its seal is not that ledger's
    doc = proof.to_json()
    doc["ledger_id"] = json.loads((b / "ledger.json").read_text())["ledger_id"]
    res = check_proof(doc, trust)
    assert not res.ok and "another ledger" in res.reason
    # and the link's (per-frame) checkpoint of the same ledger is not the window log's
    frames_cp = parse_note((a / "link=link0" / "checkpoint").read_bytes())
    res = check_proof(proof, trust, frames_cp)
    assert not res.ok and "the given checkpoint is for" in res.reason


def test_a_windows_only_ledger_proves_its_windows(tmp_path, keydir):
    _, _, trust = load_keys(keydir)
    led = _capture(keydir, tmp_path / "W", tiers=("windows",))
    assert not (led / "link=link0").exists()
    got = []
    assert verify_ledger(led, trust, on_windows=got.append).ok
    w = got[0].windows[-1]
    proof = build_window_proof(led, at_ns=w.start_ns, link="link0")
    assert proof.window.record == w.serialize()
    assert check_proof(proof, trust).ok


def test_prove_window_refusals(ledgers, windows, keydir, tmp_path, sample_ledger):
    a = ledgers[0]
    with pytest.raises(UsageError, match="no window tier"):
        build_window_proof(sample_ledger, at_ns=0)
    with pytest.raises(UsageError, match="has no window log"):
        build_window_proof(a, at_ns=windows[0].start_ns, link="link9")
    with pytest.raises(LedgerFormatError, match="no sealed window holding"):
        build_window_proof(a, at_ns=windows[-1].start_ns + 10 * MS)
    out = tmp_path / "p.json"
    r = cli("prove", a, "--window", windows[0].start_ns, "--seq", 1, "--out", out)
    assert r.returncode == 2 and "--window" in r.stderr
    r = cli("prove", sample_ledger, "--window", 0, "--out", out)
    assert r.returncode == 2 and "no window tier" in r.stderr and not out.exists()


def test_prove_window_refuses_a_tampered_window_log(ledgers, windows, keydir, tmp_path):
    import shutil

    bad = tmp_path / "T"
    shutil.copytree(ledgers[0], bad)
    rec = bad / "windows=link0" / "seg-00000000.rec"
    raw = bytearray(rec.read_bytes())
    raw[-40] ^= 1  # inside the last window record's cells: the Merkle root differs
    rec.write_bytes(bytes(raw))
    r = cli("prove", bad, "--window", windows[0].start_ns, "--out", tmp_path / "p.json")
    assert r.returncode == 1 and "does not verify" in r.stderr, r.stderr
