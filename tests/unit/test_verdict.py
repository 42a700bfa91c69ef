"""A verdict nobody can fool: verify, query, recompute and prove read the same
authenticated bytes. Each test reproduces one attack by someone who holds the ledger's storage
(and no key) and is named after the attack; each failed on the code before the fix.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES, cli, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.digest.reference import read_pcap
from ledgertool.errors import DiscrepancyError
from ledgertool.ledger.parquet import records_to_table
from ledgertool.reconcile.query import run_query
from ledgertool.reconcile.recompute import reconcile
from ledgertool.verify.ledger import verify_ledger

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
SEG = 100  # records per segment: segments 0..2 hold 100, 100, 94


def write_pcap(path: Path, frames: list[tuple[int, int, bytes]]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))
        for ts, wire, data in frames:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), wire) + data)


@pytest.fixture(scope="module")
def frames() -> list[tuple[int, int, bytes]]:
    return [(ts, wire, data) for ts, _cap, wire, data in read_pcap(SAMPLE.read_bytes())]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, keydir) -> Path:
    dk, sk, _ = load_keys(keydir)
    out = tmp_path_factory.mktemp("verdict") / "pristine"
    capture_file(SAMPLE, out, digest_key=dk, signing_key=sk, segment_records=SEG)
    return out


@pytest.fixture()
def ledger(pristine, tmp_path) -> Path:
    out = tmp_path / "ledger"
    shutil.copytree(pristine, out)
    return out


def _seg(ledger: Path, index: int, suffix: str) -> Path:
    return ledger / "link=link0" / f"seg-{index:08d}.{suffix}"


def _delete_segment(ledger: Path, index: int) -> None:
    """Every file of a sealed segment: its seal, leaf sidecar and records file (either form)."""
    files = list((ledger / "link=link0").glob(f"seg-{index:08d}.*"))
    assert {p.name.split(".", 1)[1] for p in files} in (
        {"parquet", "leaves", "seal.json"},
        {"rec", "leaves", "seal.json"},
    ), files
    for p in files:
        p.unlink()


def _kinds(v) -> set[str]:
    return {p.kind for p in v.problems}


# ---- 1. the segment index is ASCII and comes from the seals --------------------------------

BENGALI_ZERO = "\u09e6"


def _forged_parquet(path: Path, rows: int, digest_size: int = 16) -> None:
    """A valid Parquet file of `rows` forged records (seq 0.., digest 0xee...)."""
    import numpy as np

    from ledgertool.digest.record import record_dtype

    arr = np.zeros(rows, dtype=record_dtype(digest_size))
    arr["seq"] = np.arange(rows)
    arr["digest"] = b"\xee" * digest_size
    import pyarrow.parquet as pq

    pq.write_table(records_to_table(arr.tobytes(), digest_size, 0), path)


def test_unicode_digit_segment_name_is_never_read(ledger, keydir):
    _, _, trust = load_keys(keydir)
    shadow = ledger / "link=link0" / f"seg-0000000{BENGALI_ZERO}.parquet"
    _forged_parquet(shadow, 110)
    v = verify_ledger(ledger, trust)
    assert "segment_name_shadow" in _kinds(v), v.problems
    p = next(p for p in v.problems if p.kind == "segment_name_shadow")
    assert p.segment == 0 and "seg-00000000.parquet" in p.detail
    # the sealed segments themselves are intact and counted once
    assert v.records == 294 and v.segments == 3
    with pytest.raises(DiscrepancyError, match="segment_name_shadow"):
        run_query(ledger, "SELECT count(*) FROM records", trust)
    r = cli(
        "query",
        ledger,
        "SELECT count(*) AS n FROM records",
        "--format",
        "json",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 1 and "does not verify" in r.stderr and r.stdout == ""


def test_stray_files_are_warned_and_not_read(ledger, keydir):
    _, _, trust = load_keys(keydir)
    _forged_parquet(ledger / "link=link0" / "seg-00000003.parquet.bak", 50)
    _forged_parquet(ledger / "link=link0" / "extra.parquet", 50)
    (ledger / f"link=l{BENGALI_ZERO}nk0").mkdir()  # not a valid (ASCII) link name: not a link
    _forged_parquet(ledger / f"link=l{BENGALI_ZERO}nk0" / "seg-00000000.parquet", 50)
    v = verify_ledger(ledger, trust)
    assert v.ok, v.problems
    strays = sorted(Path(w.detail.split(":")[0]).name for w in v.warnings if w.kind == "stray_file")
    assert strays == ["extra.parquet", "link=l\u09e6nk0", "seg-00000003.parquet.bak"]
    assert v.links == ["link0"]
    assert run_query(ledger, "SELECT count(*), count(DISTINCT link) FROM records", trust).rows == [
        (294, 1)
    ]


def test_fifo_at_a_seal_name_is_not_opened(ledger, keydir):
    import os

    _, _, trust = load_keys(keydir)
    seal = _seg(ledger, 2, "seal.json")
    seal.unlink()
    os.mkfifo(seal)  # opening it for reading would block forever
    v = verify_ledger(ledger, trust)
    kinds = _kinds(v)
    assert "segment_name_shadow" in kinds and "checkpoint_not_extended" in kinds, v.problems
    assert any("FIFO" in p.detail for p in v.problems)


@pytest.mark.parametrize(
    "ledger_format,form", [(2, "rec"), (1, "parquet")], ids=["v2-rec", "v1-parquet"]
)
def test_record_file_without_a_seal_is_unsealed_parquet_in_either_form(
    ledger_format, form, tmp_path, keydir
):
    """The kind keeps its name (report contract) and covers a v2 seg-N.rec as well as a .parquet:
    the last segment's seal removed, its record file is named and its records are not counted."""
    dk, sk, trust = load_keys(keydir)
    led = tmp_path / "L"
    capture_file(
        SAMPLE, led, digest_key=dk, signing_key=sk, segment_records=SEG, ledger_format=ledger_format
    )
    _seg(led, 2, "seal.json").unlink()
    v = verify_ledger(led, trust)
    found = [p for p in v.problems if p.kind == "unsealed_parquet"]
    assert [(p.segment, p.detail) for p in found] == [
        (2, f"{_seg(led, 2, form)} has no seal document")
    ], v.problems
    assert v.records == 200 and not v.ok
    schema = json.loads((REPO / "schemas" / "verify-report.schema.json").read_text())
    desc = schema["properties"]["problems"]["items"]["properties"]["kind"]["description"]
    assert "unsealed_parquet" in desc and "seg-N.rec" in desc and "seg-N.parquet" in desc


# ---- 2. DuckDB never sees a path -----------------------------------------------------------


def test_glob_characters_in_the_ledger_path(tmp_path, keydir, frames):
    """A ledger at run[1]/ beside a doctored run1/: DuckDB's globbing once read run1/."""
    dk, sk, trust = load_keys(keydir)
    real, doctored = tmp_path / "run[1]", tmp_path / "run1"
    capture_file(SAMPLE, real, digest_key=dk, signing_key=sk, segment_records=SEG)
    cut = tmp_path / "cut.pcap"
    write_pcap(cut, frames[:-40])
    capture_file(cut, doctored, digest_key=dk, signing_key=sk, segment_records=SEG)
    r = reconcile(cut, real, dk, trust=trust)
    assert (r.matched, r.ledger_only, r.capture_only) == (254, 40, 0) and not r.ok
    assert run_query(real, "SELECT count(*) FROM records", trust).rows == [(294,)]
    assert run_query(doctored, "SELECT count(*) FROM records", trust).rows == [(254,)]
    rc = cli(
        "recompute",
        cut,
        "--ledger",
        real,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--json",
    )
    assert rc.returncode == 1 and json.loads(rc.stdout)["ledger_only"] == 40, rc.stdout + rc.stderr


def test_query_sql_cannot_read_files_of_the_ledger(ledger, keydir):
    """The tables hold the verified bytes; the SQL itself is the user's own (it may read any file
    the user can), but nothing the ledger says becomes a path."""
    _, _, trust = load_keys(keydir)
    res = run_query(ledger, "SELECT link, count(*) FROM records GROUP BY ALL", trust)
    assert res.rows == [("link0", 294)] and res.verification.ok


# ---- 3. recompute verifies what it reads ---------------------------------------------------


def test_recompute_with_a_deleted_segment_is_not_a_match(ledger, keydir, frames, tmp_path):
    dk, _, trust = load_keys(keydir)
    _delete_segment(ledger, 1)
    short = tmp_path / "short.pcap"
    write_pcap(short, frames[:SEG] + frames[2 * SEG :])
    with pytest.raises(DiscrepancyError, match="segment_missing"):
        reconcile(short, ledger, dk, trust=trust)
    with pytest.raises(DiscrepancyError, match="segment_missing"):
        reconcile(short, ledger, dk)  # the keyless checks see the hole too
    r = cli(
        "recompute",
        short,
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 1 and "not reconciled" in r.stderr and "MATCH" not in r.stdout, (
        r.stdout + r.stderr
    )


def test_recompute_without_trust_is_unverified(pristine, keydir):
    dk, _, _ = load_keys(keydir)
    r = reconcile(SAMPLE, pristine, dk)
    assert r.matches and not r.verified and not r.ok
    assert any("UNVERIFIED" in w for w in r.warnings)
    rc = cli(
        "recompute", SAMPLE, "--ledger", pristine, "--digest-key", keydir / "digest.key", "--json"
    )
    doc = json.loads(rc.stdout)
    assert (
        rc.returncode == 1
        and doc["ok"] is False
        and doc["verified"] is False
        and doc["matches"] is True
    )
    rc = cli("recompute", SAMPLE, "--ledger", pristine, "--digest-key", keydir / "digest.key")
    assert rc.returncode == 1 and "UNVERIFIED" in rc.stdout and "UNVERIFIED" in rc.stderr


def test_recompute_with_another_signer_is_refused(pristine, keydir, other_keydir):
    dk, _, _ = load_keys(keydir)
    _, _, other = load_keys(other_keydir)
    with pytest.raises(DiscrepancyError, match="bad_signature"):
        reconcile(SAMPLE, pristine, dk, trust=other)


# ---- 6. verify says when append-only was not checked ---------------------------------------


def test_deleted_checkpoint_is_a_problem(ledger, keydir):
    _, _, trust = load_keys(keydir)
    (ledger / "link=link0" / "checkpoint").unlink()
    (ledger / "checkpoint").unlink()
    _delete_segment(ledger, 2)  # and the tail cut
    v = verify_ledger(ledger, trust)
    assert _kinds(v) == {"checkpoint_missing"}, v.problems
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["append_only"]["unchecked_links"] == ["link0"]


def test_verify_says_append_only_was_not_checked(pristine, keydir):
    r = cli("verify", pristine, "--trust", keydir / "verifier.pub")
    assert (
        r.returncode == 0
        and "note: append-only not checked against a checkpoint you hold" in r.stderr
    )
    assert r.stdout.startswith("OK: 3 segments")
    held = pristine / "link=link0" / "checkpoint"
    r = cli("verify", pristine, "--trust", keydir / "verifier.pub", "--checkpoint", held, "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["append_only"] == {
        "given_checkpoint_link": "link0",
        "unchecked_links": [],
        "note": None,
    }
    r = cli("verify", pristine, "--trust", keydir / "verifier.pub", "--checkpoint", held)
    assert "append-only not checked" not in r.stdout + r.stderr


# ---- 16. the top-level checkpoint copy is checked ------------------------------------------


def test_top_level_checkpoint_is_checked(ledger, keydir, tmp_path):
    dk, sk, trust = load_keys(keydir)
    top = ledger / "checkpoint"
    text = top.read_bytes()
    top.write_bytes(
        text.replace(b"\n294\n", b"\n295\n", 1) if b"\n294\n" in text else text[:-2] + b"X\n"
    )
    v = verify_ledger(ledger, trust)
    assert not v.ok and {p.kind for p in v.problems} <= {
        "checkpoint_bad_signature",
        "checkpoint_unreadable",
        "checkpoint_mismatch",
    }
    assert all(str(top) in p.detail for p in v.problems)
    # another ledger's checkpoint (same signing key) in its place
    other = tmp_path / "other"
    capture_file(SAMPLE, other, digest_key=dk, signing_key=sk, segment_records=SEG)
    shutil.copy(other / "checkpoint", top)
    v = verify_ledger(ledger, trust)
    assert not v.ok and any(str(top) in p.detail for p in v.problems), v.problems


def test_checkpoint_after_every_seal(tmp_path, keydir, monkeypatch):
    """A capture signs a checkpoint after each seal, so a killed capture leaves a link whose
    stored checkpoint covers what was sealed (verify's `checkpoint_missing` stays for deletions)."""
    from ledgertool.seal.checkpoint import parse_note

    dk, sk, _ = load_keys(keydir)
    seen: list[int] = []
    import ledgertool.ledger.writer as writer

    real = writer.write_checkpoint

    def spy(directory, ledger, link, key, tree=None, **kw):
        path = real(directory, ledger, link, key, tree, **kw)
        seen.append(parse_note(path.read_bytes()).checkpoint.size)
        return path

    # LinkWriter signs every checkpoint of a capture
    monkeypatch.setattr(writer, "write_checkpoint", spy)
    capture_file(SAMPLE, tmp_path / "L", digest_key=dk, signing_key=sk, segment_records=SEG)
    assert seen == [
        0,
        1,
        2,
        3,
        3,
    ]  # an empty one before the first seal, one per seal, the run's closing one


# ---- 12. deterministic exit codes ----------------------------------------------------------


def test_parquet_bytes_are_arrow_owned(pristine, keydir):
    """The bytes verify hashes and decodes live in Arrow-allocated memory, not in a Python object
    an Arrow thread might release during interpreter shutdown (apache/arrow#34314: `terminate
    called without an active exception`, exit 134 after a correct report)."""
    import pyarrow as pa

    from ledgertool.ledger.header import load_ledger
    from ledgertool.ledger.layout import PARQUET, RECORDS
    from ledgertool.ledger.reader import LedgerReader

    reader = LedgerReader(pristine)
    # the sealed records file, either form
    kind = PARQUET if load_ledger(pristine).version == 1 else RECORDS
    buf = reader.read_segment_file("link0", 0, kind)
    # pa.allocate_buffer; py_buffer(bytes) is read-only
    assert isinstance(buf, pa.Buffer) and buf.is_mutable
