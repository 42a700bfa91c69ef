"""`ledgertool prune`: old per-frame record files removed behind a signed prune statement, so a
pruned ledger verifies (and says what it no longer holds), while a record file removed without one,
or under a statement that was forged, altered, extended, moved to other seals or claims more than
its seals, still fails verify."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys
from test_schemas_reports import validate

from ledgertool.capture.run import capture_file
from ledgertool.errors import UsageError
from ledgertool.keyfiles import SigningKey, generate_keys
from ledgertool.ledger import layout
from ledgertool.ledger.prune import prune_ledger
from ledgertool.ledger.sealer import load_seal
from ledgertool.reconcile.against_windows import reconcile_windows
from ledgertool.seal.prune import prune_genesis, prune_message
from ledgertool.verify.ledger import verify_ledger

MS = 1_000_000
SAMPLE = SAMPLES / "sample.pcap"  # 294 frames over 5.8 ms
CUT = 1767225600003000000  # segments 0..2 (50 records each) end before it, segment 3 after


@pytest.fixture(scope="module")
def built(tmp_path_factory, keydir):
    d = tmp_path_factory.mktemp("prune")
    dk, sk, trust = load_keys(keydir)
    both = d / "both"
    capture_file(
        SAMPLE,
        both,
        digest_key=dk,
        signing_key=sk,
        tiers=("windows", "frames"),
        window_ns=MS,
        segment_records=50,
    )
    frames = d / "frames"
    capture_file(SAMPLE, frames, digest_key=dk, signing_key=sk, segment_records=50)
    return {"both": both, "frames": frames, "dk": dk, "sk": sk, "trust": trust, "keys": keydir}


@pytest.fixture()
def ledger(built, tmp_path) -> Path:
    out = tmp_path / "L"
    shutil.copytree(built["both"], out)
    return out


def _rec(lg: Path, i: int) -> Path:
    return layout.segment_path(lg, "link0", i, layout.RECORDS)


def _kinds(v) -> set[str]:
    return {p.kind for p in v.problems}


def test_prune_then_verify_is_ok_and_says_what_is_no_longer_held(built, ledger):
    r = cli(
        "prune",
        ledger,
        "--before",
        str(CUT),
        "--signing-key",
        built["keys"] / "signing.key",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    validate(rep, "prune-report.schema.json")
    (p,) = rep["pruned"]
    assert (p["link"], p["from_segment"], p["to_segment"], p["records"]) == ("link0", 0, 2, 150)
    assert p["window_frames"] == 294 and p["bytes_removed"] > 150 * 48
    statement = json.loads(Path(rep["statement"]).read_text())
    validate(statement, "prune.schema.json")
    for i in range(3):
        assert not _rec(ledger, i).exists() and layout.seal_path(ledger, "link0", i).exists()
    assert _rec(ledger, 3).exists()
    v = verify_ledger(ledger, built["trust"])
    assert v.ok, [p.to_json() for p in v.problems]
    assert (v.segments, v.records) == (6, 144)
    (s,) = v.pruned
    assert (s.first_segment, s.last_segment, s.records, s.frames) == (0, 2, 150, 150)
    doc = v.to_json()
    validate(doc, "verify-report.schema.json")
    r = cli("verify", ledger, "--trust", built["keys"] / "verifier.pub")
    assert r.returncode == 0 and "pruned link0: segments 0..2 (150 records" in r.stdout
    # the window tier still covers every frame: recompute against it matches the whole capture
    res = reconcile_windows(SAMPLE, ledger, built["dk"], trust=built["trust"])
    assert res.ok and res.frames == 294


def test_a_record_file_deleted_without_a_statement_still_fails(built, ledger):
    _rec(ledger, 1).unlink()
    v = verify_ledger(ledger, built["trust"])
    assert not v.ok and _kinds(v) == {"records_missing"}


def test_removing_the_statement_brings_records_missing_back(built, ledger):
    prune_ledger(ledger, CUT, built["sk"])
    layout.prune_path(ledger, 1).unlink()
    v = verify_ledger(ledger, built["trust"])
    assert _kinds(v) == {"records_missing"} and not v.pruned


def _edit(path: Path, change, sign_with: SigningKey | None = None) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    if sign_with is not None:
        doc["signatures"] = sign_with.sign(prune_message(doc))
    path.write_text(json.dumps(doc))


def _link(doc: dict) -> dict:
    return doc["links"]["link0"]


@pytest.fixture(scope="module")
def stranger(tmp_path_factory) -> SigningKey:
    d = tmp_path_factory.mktemp("stranger")
    generate_keys(d)
    return SigningKey.load(d / "signing.key")


# name -> (the change, signed by: None (unsigned edit), "device", "stranger"), the kinds verify
# reports: a statement that fails removes nothing, so its segments' records are missing too
TAMPER = {
    "seal_hash_changed": (
        lambda d: _link(d)["seal_hashes"].__setitem__(1, "0" * 64),
        None,
        {"prune_invalid", "records_missing"},
    ),
    "records_claim_changed": (
        lambda d: _link(d).__setitem__("records", 10),
        None,
        {"prune_invalid", "records_missing"},
    ),
    "signed_by_a_stranger": (lambda d: None, "stranger", {"prune_invalid", "records_missing"}),
    "extended_by_a_stranger": (
        lambda d: _link(d)["seal_hashes"].append(load_seal_hash(d, 3)),
        "stranger",
        {"prune_invalid", "records_missing"},
    ),
    "other_ledger": (
        lambda d: d.__setitem__("ledger_id", "0" * 32),
        "device",
        {"prune_invalid", "records_missing"},
    ),
    "bound_to_other_seals": (
        lambda d: _link(d)["seal_hashes"].__setitem__(1, "ab" * 32),
        "device",
        {"prune_invalid", "records_missing"},
    ),
    "claims_a_segment_without_a_seal": (
        lambda d: _link(d)["seal_hashes"].extend(["cd" * 32] * 5),
        "device",
        {"prune_invalid"},
    ),
    "claims_more_records_than_its_seals": (
        lambda d: _link(d).__setitem__("records", 151),
        "device",
        {"prune_invalid"},
    ),
    "names_a_link_the_ledger_lacks": (
        lambda d: d["links"].__setitem__("ghost", {**_link(d)}),
        "device",
        {"prune_invalid"},
    ),
    "starts_after_a_gap": (
        lambda d: _link(d).__setitem__("from_segment", 1),
        "device",
        {"prune_invalid", "records_missing"},
    ),
}

_LEDGER_OF_CASE: dict[str, Path] = {}


def load_seal_hash(doc: dict, i: int) -> str:
    return load_seal(layout.seal_path(_LEDGER_OF_CASE["L"], "link0", i)).hash()


@pytest.mark.parametrize("case", list(TAMPER))
def test_a_forged_or_altered_statement_fails(built, ledger, stranger, case):
    change, signer, kinds = TAMPER[case]
    _LEDGER_OF_CASE["L"] = ledger
    prune_ledger(ledger, CUT, built["sk"])
    key = {"device": built["sk"], "stranger": stranger, None: None}[signer]
    _edit(layout.prune_path(ledger, 1), change, key)
    v = verify_ledger(ledger, built["trust"])
    assert not v.ok and _kinds(v) == kinds, [p.to_json() for p in v.problems]


def test_an_extension_of_a_valid_statement_is_refused(built, ledger, stranger):
    """Statement 1 valid, statement 2 (chained to it) claims segment 3 but is not the device's:
    segment 3's records are missing, not pruned."""
    prune_ledger(ledger, CUT, built["sk"])
    one = json.loads(layout.prune_path(ledger, 1).read_text())
    from ledgertool.seal.prune import prune_hash

    two = {
        **one,
        "number": 2,
        "prev_prune_hash": prune_hash(one),
        "links": {
            "link0": {
                **_link(one),
                "from_segment": 3,
                "seal_hashes": [load_seal(layout.seal_path(ledger, "link0", 3)).hash()],
                "records": 50,
                "frames": 50,
            }
        },
    }
    two["signatures"] = stranger.sign(prune_message(two))
    layout.prune_path(ledger, 2).write_text(json.dumps(two))
    _rec(ledger, 3).unlink()
    v = verify_ledger(ledger, built["trust"])
    assert _kinds(v) == {"prune_invalid", "records_missing"}
    assert {p.segment for p in v.problems if p.kind == "records_missing"} == {3}
    assert v.pruned[0].last_segment == 2


def test_removing_an_earlier_statement_breaks_the_chain(built, ledger):
    prune_ledger(ledger, CUT, built["sk"])
    prune_ledger(ledger, CUT + 2 * MS, built["sk"])
    assert layout.prune_path(ledger, 2).exists()
    assert verify_ledger(ledger, built["trust"]).ok
    layout.prune_path(ledger, 1).unlink()
    layout.prune_path(ledger, 2).rename(layout.prune_path(ledger, 1))
    v = verify_ledger(ledger, built["trust"])
    assert "prune_invalid" in _kinds(v) and "records_missing" in _kinds(v)


def test_prune_is_repeatable_and_continues_the_chain(built, ledger):
    a = prune_ledger(ledger, CUT, built["sk"])
    again = prune_ledger(ledger, CUT, built["sk"])
    assert a.statement and again.statement is None and not again.pruned
    b = prune_ledger(ledger, 2**62, built["sk"])
    (p,) = b.pruned
    assert (p.from_segment, p.to_segment) == (3, 5)
    v = verify_ledger(ledger, built["trust"])
    assert v.ok and v.records == 0 and v.pruned[0].records == 294
    assert v.pruned[0].statements == [str(layout.prune_path(ledger, n)) for n in (1, 2)]


def test_an_interrupted_prune_is_finished_by_the_next(built, ledger):
    """The statement is written first: records it names that are still there verify as usual,
    and the next prune removes them."""
    keep = _rec(ledger, 1).read_bytes()
    prune_ledger(ledger, CUT, built["sk"])
    _rec(ledger, 1).write_bytes(keep)  # as if the removal had not happened
    v = verify_ledger(ledger, built["trust"])
    assert v.ok and v.records == 144 + 50 and v.pruned[0].segments == 2
    res = prune_ledger(ledger, CUT, built["sk"])
    assert not _rec(ledger, 1).exists() and any("segment 1" in k for k in res.kept)


def test_records_the_window_tier_does_not_cover_are_refused_unless_forced(built, tmp_path):
    lg = tmp_path / "F"
    shutil.copytree(built["frames"], lg)
    with pytest.raises(UsageError, match="not covered by the window tier"):
        prune_ledger(lg, CUT, built["sk"])
    assert _rec(lg, 0).exists() and not layout.prune_path(lg, 1).exists()
    r = cli("prune", lg, "--before", str(CUT), "--signing-key", built["keys"] / "signing.key")
    assert r.returncode == 2 and "--force" in r.stderr
    res = prune_ledger(lg, CUT, built["sk"], force=True)
    assert res.pruned[0].window_frames is None
    v = verify_ledger(lg, built["trust"])
    assert v.ok and [w.kind for w in v.warnings if w.kind == "pruned_uncovered"] == [
        "pruned_uncovered"
    ]


def test_windows_not_sealed_yet_do_not_cover(built, ledger):
    """A window segment lost (its seal and records set aside): the frames tier is ahead of the
    window tier, and prune refuses what the windows do not hold."""
    shutil.rmtree(ledger / layout.window_log("link0"))
    v = verify_ledger(ledger, built["trust"])
    assert "windows_missing" in _kinds(v)
    with pytest.raises(UsageError, match="not covered by the window tier"):
        prune_ledger(ledger, CUT, built["sk"])


def test_only_sealed_segments_before_the_cut_off_are_pruned(built, ledger):
    res = prune_ledger(ledger, CUT, built["sk"])
    last = load_seal(layout.seal_path(ledger, "link0", 2))
    assert (
        int(last.last_ts_ns)
        < CUT
        <= int(load_seal(layout.seal_path(ledger, "link0", 3)).last_ts_ns)
    )
    assert res.pruned[0].to_segment == 2


def test_prune_needs_the_ledgers_signing_key(built, ledger, stranger):
    from ledgertool.errors import KeyFileError

    with pytest.raises(KeyFileError):
        prune_ledger(ledger, CUT, stranger)
    assert not layout.prune_path(ledger, 1).exists()


def test_prove_and_query_say_what_is_no_longer_held(built, ledger, tmp_path):
    prune_ledger(ledger, CUT, built["sk"])
    r = cli("prove", ledger, "--seq", "10", "--out", tmp_path / "p.json")
    assert r.returncode == 2 and not (tmp_path / "p.json").exists()
    assert "link link0 segment 0: its per-frame records were pruned" in r.stderr
    assert "windows=link0" in r.stderr and "Traceback" not in r.stderr
    r = cli("prove", ledger, "--seq", "200", "--out", tmp_path / "p.json")
    assert r.returncode == 0, r.stderr
    r = cli(
        "query",
        ledger,
        "--trust",
        built["keys"] / "verifier.pub",
        "--format",
        "csv",
        "select count(*) as n from records",
    )
    assert r.returncode == 0 and r.stdout.split() == ["n", "144"], (r.stdout, r.stderr)
    assert "segments 0..2 (150 records" in r.stderr and "records table does not hold" in r.stderr


def test_prove_by_digest_searches_the_records_still_held(built, ledger, tmp_path):
    from ledgertool.ledger.header import load_ledger
    from ledgertool.ledger.reader import LedgerReader
    from ledgertool.verify.ledger import verified_segment

    head = load_ledger(ledger)
    size = head.record_size
    held = bytes(verified_segment(LedgerReader(ledger), head, "link0", 4).records)
    gone = bytes(verified_segment(LedgerReader(ledger), head, "link0", 1).records)
    digest_held, digest_gone = held[size - 16 : size].hex(), gone[size - 16 : size].hex()
    prune_ledger(ledger, CUT, built["sk"])
    r = cli("prove", ledger, "--digest", digest_held, "--out", tmp_path / "p.json", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "p.json").read_text())["segment"] == 4
    r = cli("prove", ledger, "--digest", digest_gone, "--out", tmp_path / "q.json")
    assert r.returncode == 2 and "segments 0..2 were pruned" in r.stderr


def test_a_retired_signing_key_prunes_only_what_was_sealed_before_its_retirement(
    built, ledger, tmp_path
):
    """After `keys rotate`, a statement signed by the old key vouches for segments sealed before
    the rotation only (the checkpoint rule); the new key prunes what the old key may not."""
    from test_reconcile import write_pcap

    from ledgertool.digest.reference import read_pcap
    from ledgertool.keyfiles import generate_keys as gen

    gen(tmp_path / "k2")
    sk2 = SigningKey.load(tmp_path / "k2" / "signing.key")
    r = cli(
        "keys",
        "rotate",
        ledger,
        "--old",
        built["keys"] / "signing.key",
        "--new",
        tmp_path / "k2" / "signing.key",
    )
    assert r.returncode == 0, r.stderr
    later = [(ts + 3600 * 10**9, w, x) for ts, _c, w, x in read_pcap(SAMPLE.read_bytes())]
    write_pcap(tmp_path / "later.pcap", later)
    capture_file(tmp_path / "later.pcap", ledger, digest_key=built["dk"], signing_key=sk2)
    seals = sorted((ledger / "link=link0").glob("*.seal.json"))
    assert len(seals) == 7  # 6 under the old key, 1 under the new one

    def statement(upto: int, key: SigningKey) -> None:
        docs = [load_seal(layout.seal_path(ledger, "link0", i)) for i in range(upto + 1)]
        doc = {
            "format": "ledgertool-prune-v1",
            "ledger_id": json.loads((ledger / "ledger.json").read_text())["ledger_id"],
            "number": 1,
            "prev_prune_hash": prune_genesis(
                json.loads((ledger / "ledger.json").read_text())["ledger_id"]
            ),
            "before_ns": str(2**62),
            "links": {
                "link0": {
                    "from_segment": 0,
                    "seal_hashes": [d.hash() for d in docs],
                    "records": sum(int(d.records) for d in docs),
                    "frames": sum(int(d.frames) for d in docs),
                    "first_ts_ns": str(min(int(d.first_ts_ns) for d in docs)),
                    "last_ts_ns": str(max(int(d.last_ts_ns) for d in docs)),
                    "window_frames": 10**6,
                }
            },
        }
        doc["signatures"] = key.sign(prune_message(doc))
        path = layout.prune_path(ledger, 1)
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(doc))
        for i in range(upto + 1):
            _rec(ledger, i).unlink(missing_ok=True)

    statement(5, built["sk"])  # the old key, over what it sealed: valid
    v = verify_ledger(ledger, built["trust"])
    assert v.ok and v.pruned[0].last_segment == 5, [p.to_json() for p in v.problems]
    statement(6, built["sk"])  # the old key over a segment sealed after its retirement
    v = verify_ledger(ledger, built["trust"])
    assert _kinds(v) == {"prune_invalid", "records_missing"}
    statement(6, sk2)  # the current key may sign it
    assert verify_ledger(ledger, built["trust"]).ok


def test_compact_skips_pruned_segments_and_prune_removes_parquet_files(built, ledger):
    from ledgertool.ledger.compact import compact_ledger

    prune_ledger(ledger, CUT, built["sk"])
    res = compact_ledger(ledger)
    assert [c.index for c in res.compacted] == [3, 4, 5]
    assert verify_ledger(ledger, built["trust"]).ok
    (p,) = prune_ledger(ledger, 2**62, built["sk"]).pruned
    assert (p.from_segment, p.to_segment) == (3, 5) and p.bytes_removed > 0
    assert not list((ledger / "link=link0").glob("*.parquet"))
    v = verify_ledger(ledger, built["trust"])
    assert v.ok and v.pruned[0].records == 294


def test_per_frame_recompute_of_a_pruned_link_says_why_frames_are_capture_only(built, ledger):
    prune_ledger(ledger, CUT, built["sk"])
    args = ("--digest-key", built["keys"] / "digest.key", "--trust", built["keys"] / "verifier.pub")
    r = cli("recompute", SAMPLE, "--ledger", ledger, "--against", "frames", *args, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and (doc["matched"], doc["capture_only"]) == (144, 150)
    (w,) = [w for w in doc["warnings"] if "pruned" in w]
    assert "segments 0..2" in w and "--against windows" in w
    r = cli("recompute", SAMPLE, "--ledger", ledger, "--against", "windows", *args)
    assert r.returncode == 0 and r.stdout.startswith("MATCH")


def test_a_statement_checks_independently_of_ledgertool(built, ledger):
    """The statement's bytes as docs/ledger-format.md "Prune statements" specifies them, checked
    with hashlib, json and cryptography only: the genesis label, the signed bytes (RFC 8785 of a
    document of ASCII strings and integers is json.dumps with sorted keys and no spaces), both
    signatures, and each seal hash against the seal's own hash."""
    import base64
    import hashlib

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.asymmetric.mldsa import MLDSA65PublicKey

    prune_ledger(ledger, CUT, built["sk"])
    doc = json.loads(layout.prune_path(ledger, 1).read_text())
    lid = json.loads((ledger / "ledger.json").read_text())["ledger_id"]
    genesis = hashlib.sha256(b"ledgertool prune genesis v1\0" + bytes.fromhex(lid)).hexdigest()
    assert doc["prev_prune_hash"] == genesis and doc["number"] == 1
    body = {k: v for k, v in doc.items() if k != "signatures"}
    msg = (
        b"ledgertool prune v1\n"
        + json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    pub = {
        k["algorithm"]: base64.b64decode(k["public_key"]) for k in built["trust"].to_dict()["keys"]
    }
    Ed25519PublicKey.from_public_bytes(pub["ed25519"]).verify(
        base64.b64decode(doc["signatures"]["ed25519"]), msg
    )
    MLDSA65PublicKey.from_public_bytes(pub["ml-dsa-65"]).verify(
        base64.b64decode(doc["signatures"]["ml-dsa-65"]), msg
    )
    link = doc["links"]["link0"]
    assert link["from_segment"] == 0 and len(link["seal_hashes"]) == 3
    for i, h in enumerate(link["seal_hashes"]):
        seal = json.loads(layout.seal_path(ledger, "link0", i).read_text())
        signed = {k: v for k, v in seal.items() if k != "signatures"}
        assert (
            h
            == hashlib.sha256(
                json.dumps(signed, sort_keys=True, separators=(",", ":")).encode()
            ).hexdigest()
        )


def test_a_segment_whose_records_do_not_verify_is_not_pruned(built, ledger):
    """The device signs "pruned" only over records that match their seal: a changed record stays
    (and stays a finding of verify), and nothing after it is pruned."""
    rec = _rec(ledger, 1)
    raw = bytearray(rec.read_bytes())
    raw[-40] ^= 1
    rec.write_bytes(bytes(raw))
    res = prune_ledger(ledger, CUT, built["sk"])
    (p,) = res.pruned
    assert (p.from_segment, p.to_segment) == (0, 0)
    assert res.kept == ["link link0 segment 1: does not verify; not pruned"]
    assert rec.exists() and _rec(ledger, 2).exists()
    v = verify_ledger(ledger, built["trust"])
    assert not v.ok and {p.segment for p in v.problems} == {1}
