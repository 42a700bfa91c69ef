"""The window tier's reads (ledgertool/verify/windows.py, `prove --window`) under the threat
model's adversary, who holds the disks: a window segment file too large for its seal, one replaced
by a per-frame segment or its seal swapped for one, an open window segment too large to read, and
a held checkpoint of a tier whose directory is gone. Each outcome is a finding named (exit 1) or a
warning naming the file, never a MemoryError or a proof from bytes that failed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import cli, load_keys
from test_prove_window import _capture
from test_query_adversarial_reads import _sparse

from ledgertool.errors import DiscrepancyError
from ledgertool.reconcile.query import run_query
from ledgertool.verify.ledger import verify_ledger
from ledgertool.verify.proof import build_window_proof, check_proof

COUNT = "SELECT count(*) FROM windows"


@pytest.fixture(scope="module")
def built(tmp_path_factory, keydir) -> Path:
    return _capture(keydir, tmp_path_factory.mktemp("window-attacks") / "W")


@pytest.fixture()
def wl(built, tmp_path) -> Path:
    """A fresh copy of a ledger with both tiers (six 1 ms windows in one window segment; link0's
    294 records in three segments)."""
    return Path(shutil.copytree(built, tmp_path / "W", symlinks=True))


def _win(ledger: Path, kind: str, index: int = 0) -> Path:
    return ledger / "windows=link0" / f"seg-{index:08d}.{kind}"


def _frames(ledger: Path, kind: str, index: int = 0) -> Path:
    return ledger / "link=link0" / f"seg-{index:08d}.{kind}"


def _kinds(res) -> list[str]:
    return [p.kind.value for p in res.problems]


def _first_start(ledger: Path, trust) -> int:
    got = []
    assert verify_ledger(ledger, trust, on_windows=got.append).ok
    return got[0].windows[0].start_ns


def test_a_window_segment_larger_than_its_seal_allows_is_not_read(wl, keydir):
    """A 64 MiB hole as the window segment's raw record file: refused by its size against what
    the seal's six windows can take, before any byte is read. (It was read whole: a hole of 1 TiB
    had the verifier killed for memory; this one is small enough to be read safely where the
    bound is missing, and then the finding is another.)"""
    trust = load_keys(keydir)[2]
    start = _first_start(wl, trust)
    rec = _win(wl, "rec")
    rec.unlink()
    _sparse(rec, 64 << 20)
    res = verify_ledger(wl, trust)
    assert _kinds(res) == ["records_unreadable"]
    assert str(rec) in res.problems[0].detail and "larger than" in res.problems[0].detail
    r = cli("verify", wl, "--trust", keydir / "verifier.pub")
    assert r.returncode == 1 and "records_unreadable" in r.stdout + r.stderr
    assert "internal error" not in r.stderr
    with pytest.raises(DiscrepancyError, match="records_unreadable"):
        run_query(wl, COUNT, trust)
    with pytest.raises(DiscrepancyError, match="records_unreadable"):
        build_window_proof(wl, at_ns=start)


def test_a_window_segment_one_block_too_long_is_refused(wl, keydir):
    """The bound is the seal's: a window segment with one more (well framed) block than its seal
    covers is larger than its seal allows, or a count mismatch; never handed on."""
    rec = _win(wl, "rec")
    raw = rec.read_bytes()
    n = int.from_bytes(raw[256:260], "little")
    size = (len(raw) - 256 - 4 - 32) // n  # one block of n window records
    rec.write_bytes(raw + (1).to_bytes(4, "little") + raw[260 : 260 + size] + bytes(32))
    handed = []
    res = verify_ledger(wl, load_keys(keydir)[2], on_windows=handed.append)
    assert handed == [] and not res.ok
    assert _kinds(res)[0] in ("records_unreadable", "count_mismatch"), res.problems


def test_a_window_segment_replaced_by_a_per_frame_segment_is_refused(wl, keydir):
    trust = load_keys(keydir)[2]
    start = _first_start(wl, trust)
    shutil.copyfile(_frames(wl, "rec"), _win(wl, "rec"))
    res = verify_ledger(wl, trust)
    assert _kinds(res)[0] in ("records_header_mismatch", "records_unreadable"), res.problems
    assert str(_win(wl, "rec")) in res.problems[0].detail
    with pytest.raises(DiscrepancyError, match="does not verify"):
        build_window_proof(wl, at_ns=start)
    r = cli("query", wl, COUNT)
    assert r.returncode == 1 and "does not verify" in r.stderr and r.stdout == ""


def test_a_window_seal_swapped_for_a_per_frame_seal_is_refused(wl, keydir):
    trust = load_keys(keydir)[2]
    start = _first_start(wl, trust)
    shutil.copyfile(_frames(wl, "seal.json"), _win(wl, "seal.json"))
    for t in (None, trust):
        res = verify_ledger(wl, t)
        assert "seal_misplaced" in _kinds(res), res.problems
    with pytest.raises(DiscrepancyError, match="does not verify"):
        build_window_proof(wl, at_ns=start)


def test_a_proof_of_a_window_log_signed_by_other_keys_does_not_check(
    tmp_path, keydir, other_keydir
):
    """`prove --window` runs the keyless checks (the proof carries the seal): a window log the
    storage holder signed with keys of its own proves, and check-proof with the verifier's trust
    refuses it, naming the signature."""
    forged = _capture(other_keydir, tmp_path / "F")
    got = []
    assert verify_ledger(forged, None, on_windows=got.append).ok
    proof = build_window_proof(forged, at_ns=got[0].windows[0].start_ns)
    assert check_proof(proof, load_keys(other_keydir)[2]).ok
    verdict = check_proof(proof, load_keys(keydir)[2])
    assert not verdict.ok and "signature" in verdict.reason


def test_an_open_window_segment_too_large_to_read_is_a_warning_naming_it(wl, keydir):
    if Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1":
        pytest.skip("memory overcommitted without a limit: the allocation would succeed")
    big = _win(wl, "open", 1)
    _sparse(big, 1 << 40)
    res = verify_ledger(wl, load_keys(keydir)[2])
    torn = [w for w in res.warnings if w.kind.value == "torn_segment"]
    assert res.ok and len(torn) == 1 and str(big) in torn[0].detail
    assert run_query(wl, COUNT).rows == [(6,)]


@pytest.mark.parametrize("tier", ["windows=link0", "link=link0"])
def test_a_held_checkpoint_of_a_tier_whose_directory_is_gone_is_not_extended(
    wl, keydir, tmp_path, tier
):
    """The window log's directory removed (the checkpoint held is the log's), or the per-frame
    link's while its window log stays: the held checkpoint is not extended."""
    held = tmp_path / "held"
    shutil.copyfile(wl / tier / "checkpoint", held)
    shutil.rmtree(wl / tier)
    trust = load_keys(keydir)[2]
    res = verify_ledger(wl, trust, held.read_bytes(), str(held))
    assert "checkpoint_not_extended" in _kinds(res), res.problems
    r = cli("verify", wl, "--trust", keydir / "verifier.pub", "--checkpoint", held)
    assert r.returncode == 1 and "checkpoint_not_extended" in r.stdout + r.stderr


def test_windows_are_the_checked_copy_when_the_file_changes_after_verify_read_it(
    wl, keydir, monkeypatch
):
    """verify hands each window segment on once it is checked, and `query` fills `windows` from
    those records: a window file rewritten after verify read it changes nothing."""
    from ledgertool.reconcile import query as q

    want = run_query(wl, "SELECT sum(frames), string_agg(hex(hash), '') FROM windows").rows
    real = q.verify_ledger

    def rewriting(*args, on_windows, **kw):
        def handed(seg):
            on_windows(seg)
            rec = _win(wl, "rec", seg.index)
            rec.write_bytes(rec.read_bytes()[:256] + bytes(rec.stat().st_size - 256))

        return real(*args, on_windows=handed, **kw)

    monkeypatch.setattr(q, "verify_ledger", rewriting)
    sql = "SELECT sum(frames), string_agg(hex(hash), '') FROM windows"
    assert run_query(wl, sql).rows == want and want[0][0] == 294
    assert not any(_win(wl, "rec").read_bytes()[256:])
