"""`query`'s reads under the threat model's adversary, who holds the disks (docs/threat-model.md,
"What query and recompute read"): each test changes the ledger as a storage holder could, runs the
streamed scan (count(*): checked where read, nothing copied; other columns: the checked copy) or
verify_ledger as the scan runs it, and asserts the outcome: the right count, or exit 1 with the
finding named, or one line naming the file. Nothing of a segment that failed is ever counted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, capture_cli, cli, load_keys
from hypothesis import given, settings
from hypothesis import strategies as st
from test_query_streamed_records import multi_link_ledger  # noqa: F401 - the fixture

from ledgertool.errors import DiscrepancyError
from ledgertool.reconcile import query as q
from ledgertool.reconcile.query import run_query
from ledgertool.verify.ledger import verify_ledger

COUNT = "SELECT count(*) FROM records"
PER_SEGMENT = "SELECT segment, count(*) FROM records GROUP BY ALL ORDER BY ALL"
WIRE = "SELECT sum(wire_len) FROM records"  # reads record bytes: the checked copy
SCANS = [COUNT, PER_SEGMENT, WIRE]


def _seg(ledger: Path, index: int, kind: str = "rec", link: str = "link0") -> Path:
    return ledger / f"link={link}" / f"seg-{index:08d}.{kind}"


def _refused(ledger: Path, sql: str, kind: str, trust=None, **kw) -> str:
    with pytest.raises(DiscrepancyError, match="does not verify") as e:
        run_query(ledger, sql, trust, **kw)
    assert f": {kind}: " in str(e.value), str(e.value)
    return str(e.value)


def _cli_refused(*args) -> str:
    r = cli("query", *args)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ledgertool: error:")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == ""  # no row of a ledger that does not verify
    return lines[0]


# ---- the file changes after verify read it: the scan never reads it again --------------------


@pytest.mark.parametrize("sql", SCANS)
def test_the_scan_counts_what_verify_read_not_what_the_file_holds_after(
    sample_ledger, monkeypatch, sql
):
    """Once verify hands a segment to the scan, the storage holder swaps its file for another
    segment's (the last, 94 records) or cuts it: the answer is the one of the bytes verify
    checked, whether the scan counts in place (count(*)) or reads the checked copy."""
    want = run_query(sample_ledger, sql).rows
    real, changed = q.verify_ledger, []
    last = _seg(sample_ledger, 2).read_bytes()

    def swapping(*args, on_segment, **kw):
        def handed(seg):
            on_segment(seg)
            path = _seg(sample_ledger, seg.index)
            path.write_bytes(last if seg.index != 2 else last[:300])
            changed.append(seg.index)

        return real(*args, on_segment=handed, **kw)

    monkeypatch.setattr(q, "verify_ledger", swapping)
    assert run_query(sample_ledger, sql).rows == want
    assert changed == [0, 1, 2]
    assert want[-1][-1] in (294, 94) or sql == WIRE


# ---- a segment file replaced by another segment's, or a seal swapped -------------------------


@pytest.mark.parametrize("sql", SCANS)
def test_a_segment_file_replaced_by_another_index_is_refused(sample_ledger, sql):
    shutil.copyfile(_seg(sample_ledger, 1), _seg(sample_ledger, 0))
    msg = _refused(sample_ledger, sql, "records_header_mismatch")
    assert "link link0 segment 0" in msg and "segment index 1 (seal: 0)" in msg


@pytest.mark.parametrize("sql", SCANS)
def test_another_links_segment_with_the_very_same_records_is_refused(
    multi_link_ledger,  # noqa: F811
    sql,
):
    """east and west captured the same frames: their segment 0 holds byte-identical records under
    the same Merkle root (the blocks' MACs, which verify does not read, differ), so only the raw
    record file's header (its link) tells them apart."""
    east, west = _seg(multi_link_ledger, 0, link="east"), _seg(multi_link_ledger, 0, link="west")
    records = slice(256 + 4, 256 + 4 + 40 * 48)  # one block of 40 records (then its MAC)
    assert east.read_bytes()[records] == west.read_bytes()[records]
    shutil.copyfile(east, west)
    msg = _refused(multi_link_ledger, sql, "records_header_mismatch")
    assert "link west segment 0" in msg and "link 'east'" in msg


@pytest.mark.parametrize("trusted", [False, True])
def test_swapped_seals_are_refused_with_or_without_trust(sample_ledger, keydir, trusted):
    a, b = _seg(sample_ledger, 0, "seal.json"), _seg(sample_ledger, 1, "seal.json")
    raw_a, raw_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(raw_b)
    b.write_bytes(raw_a)
    trust = load_keys(keydir)[2] if trusted else None
    msg = _refused(sample_ledger, COUNT, "seal_misplaced", trust)
    assert "link link0 segment 0" in msg and "segment 1" in msg
    args = ("--trust", keydir / "verifier.pub") if trusted else ()
    assert "seal_misplaced" in _cli_refused(sample_ledger, COUNT, *args)


# ---- a segment that fails is never counted ---------------------------------------------------


@pytest.mark.parametrize("keep", [False, True])
def test_a_segment_that_fails_is_never_handed_to_the_scan(sample_ledger, keydir, keep):
    """verify_ledger as the streamed scan runs it (keep_records False for count(*)): a changed
    record in segment 1 hands on segments 0 and 2 only, and the result is not ok, so the count
    of the other two is never given out."""
    rec = _seg(sample_ledger, 1)
    raw = bytearray(rec.read_bytes())
    raw[256 + 4 + 50 * 48 + 40] ^= 1  # a digest byte of record 50
    rec.write_bytes(bytes(raw))
    handed = []
    res = verify_ledger(
        sample_ledger,
        load_keys(keydir)[2],
        on_segment=lambda s: handed.append((s.index, s.count, s.records is None)),
        keep_records=keep,
    )
    assert not res.ok and [p.kind.value for p in res.problems] == ["merkle_mismatch"]
    assert [(i, n) for i, n, _ in handed] == [(0, 100), (2, 94)]
    assert all(no_copy is not keep for *_, no_copy in handed)
    assert "merkle_mismatch" in _cli_refused(sample_ledger, COUNT)


# ---- --trust omitted ---------------------------------------------------------------------------


def test_without_trust_a_ledger_of_other_keys_is_read_unverified_and_with_it_refused(
    tmp_path, keydir, other_keydir
):
    """A ledger the storage holder made with keys of its own is consistent with its own seals:
    without --trust the count is given with the UNVERIFIED warning on stderr, with the verifier's
    trust bundle it is refused naming the signature."""
    forged = tmp_path / "F"
    assert capture_cli(SAMPLES / "sample.pcapng", forged, other_keydir).returncode == 0
    r = cli("query", forged, COUNT, "--json")
    assert r.returncode == 0 and "294" in r.stdout, (r.stdout, r.stderr)
    assert "UNVERIFIED" in r.stderr and "--trust" in r.stderr
    line = _cli_refused(forged, COUNT, "--trust", keydir / "verifier.pub")
    assert "bad_signature" in line or "signature" in line


# ---- open, torn, unsealed and non-regular files -----------------------------------------------


def test_an_open_or_torn_segment_is_not_counted(sample_ledger):
    """An open segment (a capture running, or killed) is a warning, never records: the count is
    the sealed segments' whatever it holds."""
    torn = _seg(sample_ledger, 3, "open")
    torn.write_bytes(_seg(sample_ledger, 2).read_bytes()[:1000])
    assert run_query(sample_ledger, PER_SEGMENT).rows == [(0, 100), (1, 100), (2, 94)]
    res = verify_ledger(sample_ledger, None)
    assert res.ok and "torn_segment" in {w.kind.value for w in res.warnings}


def _sparse(path: Path, size: int) -> None:
    """A file of `size` bytes that holds none (a hole): what a storage holder makes in no time."""
    try:
        with open(path, "wb") as f:
            f.truncate(size)
    except OSError as e:  # a file system without files this large
        pytest.skip(f"cannot make a sparse file of {size} bytes: {e}")


def test_an_open_segment_too_large_to_read_is_a_warning_naming_it(sample_ledger):
    """A 1 TiB hole named seg-3.open: not read into memory (no MemoryError, no internal error),
    a warning naming the file; the sealed segments are still counted."""
    if Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1":
        pytest.skip("memory overcommitted without a limit: the allocation would succeed")
    big = _seg(sample_ledger, 3, "open")
    _sparse(big, 1 << 40)
    assert run_query(sample_ledger, COUNT).rows == [(294,)]
    res = verify_ledger(sample_ledger, None)
    torn = [w for w in res.warnings if w.kind.value == "torn_segment"]
    assert res.ok and len(torn) == 1 and str(big) in torn[0].detail
    r = cli("query", sample_ledger, COUNT)
    assert r.returncode == 0 and "internal error" not in r.stderr


@pytest.mark.parametrize("index", [3, 7])
@pytest.mark.parametrize("kind", ["rec", "parquet"])
def test_a_segment_file_no_seal_covers_is_refused(sample_ledger, index, kind):
    """Records on disk that no seal covers (after the last seal, or past a hole) are a problem,
    never counted."""
    _seg(sample_ledger, index, kind).write_bytes(_seg(sample_ledger, 2).read_bytes())
    msg = _refused(sample_ledger, COUNT, "unsealed_parquet")
    assert f"segment {index}" in msg and f"seg-{index:08d}.{kind}" in msg


@pytest.mark.parametrize("kind", ["rec", "seal.json"])
def test_a_symlink_to_the_very_same_bytes_outside_is_not_followed(sample_ledger, tmp_path, kind):
    """A segment file replaced by a link to an identical copy outside the ledger: the bytes would
    verify, so only the rule that files are opened without following a link refuses it."""
    path = _seg(sample_ledger, 0, kind)
    outside = tmp_path / "outside"
    shutil.copyfile(path, outside)
    path.unlink()
    os.symlink(outside, path)
    msg = _refused(sample_ledger, COUNT, "segment_name_shadow")
    assert str(path) in msg and "symbolic link" in msg


# ---- a whole link removed: the checkpoint the verifier holds --------------------------------


@pytest.mark.parametrize("how", ["removed", "symlinked"])
def test_a_held_checkpoint_of_a_link_removed_from_the_ledger_is_not_extended(
    sample_ledger, keydir, tmp_path, how
):
    """The storage holder removes link0's directory (or puts a link to it there, which is not
    read): the ledger has no per-frame link left. The checkpoint the verifier holds covers 3
    segments of link0, so the ledger does not extend it: refused, never a count of 0."""
    held = tmp_path / "held.checkpoint"
    shutil.copyfile(sample_ledger / "link=link0" / "checkpoint", held)
    link_dir = sample_ledger / "link=link0"
    if how == "removed":
        shutil.rmtree(link_dir)
    else:
        moved = tmp_path / "moved"
        link_dir.rename(moved)
        os.symlink(moved, link_dir)
    trust = load_keys(keydir)[2]
    res = verify_ledger(sample_ledger, trust, held.read_bytes(), str(held))
    assert not res.ok
    assert [p.kind.value for p in res.problems] == ["checkpoint_not_extended"]
    assert "3 segments of link link0" in res.problems[0].detail
    with pytest.raises(DiscrepancyError, match="checkpoint_not_extended"):
        run_query(sample_ledger, COUNT, trust, held.read_bytes(), str(held))
    line = _cli_refused(
        sample_ledger, COUNT, "--trust", keydir / "verifier.pub", "--checkpoint", held
    )
    assert "checkpoint_not_extended" in line
    # without the held checkpoint the storage's word is all there is, and the result says so
    assert verify_ledger(sample_ledger, trust).ok


# ---- very large counts ----------------------------------------------------------------------


def test_a_block_count_past_the_bound_is_refused_naming_the_byte(sample_ledger):
    rec = _seg(sample_ledger, 1)
    raw = bytearray(rec.read_bytes())
    raw[256:260] = (0xFFFFFFFF).to_bytes(4, "little")
    rec.write_bytes(bytes(raw))
    msg = _refused(sample_ledger, COUNT, "records_unreadable")
    assert "byte 256" in msg and "4294967295" in msg


def test_a_seal_claiming_2_to_the_40_records_is_refused_without_reading_that_many(
    sample_ledger,
):
    """Without --trust the seal's numbers are the storage holder's: a record count of 2^40 (a
    range that wide) over a file of 100 records is a count mismatch, found without allocating
    for the count (the read is bounded by the file, the sink's hint by its cap)."""
    import json

    path = _seg(sample_ledger, 1, "seal.json")
    doc = json.loads(path.read_bytes())
    doc["records"] = 1 << 40
    doc["last_seq"] = str(int(doc["first_seq"]) + (1 << 40) - 1)
    path.write_text(json.dumps(doc))
    msg = _refused(sample_ledger, COUNT, "count_mismatch")
    assert "link link0 segment 1" in msg


# ---- the missing runs are found from the records, not from a bitmap of the seal's range ------


@settings(max_examples=200, deadline=None)
@given(
    first=st.integers(0, 2**40),
    width=st.integers(1, 300),
    picks=st.lists(st.integers(-5, 305), max_size=120),
    count=st.integers(0, 400),
)
def test_missing_runs_are_those_of_the_range_value_by_value(first, width, picks, count):
    """sequence_findings' record_missing / sequence_gap findings, in order, against the runs a walk
    over every value of the seal's range finds (small ranges, where that walk is cheap)."""
    import numpy as np

    from ledgertool.verify.checked import SeqRange
    from ledgertool.verify.checks import MAX_PER_KIND, sequence_findings

    last = first + width - 1
    seqs = np.array([first + p for p in picks if first + p >= 0], np.int64)
    if not len(seqs):
        return
    place = type("P", (), {"index": 3, "problem": lambda self, k, d, r=None: (k.value, r, d)})()
    got = [
        (kind, d)
        for kind, _, d in sequence_findings(seqs, SeqRange(first, last, count), place)
        if kind in ("record_missing", "sequence_gap")
    ]
    present, runs, lo = set(seqs.tolist()), [], None
    for v in range(first, last + 2):
        if v <= last and v not in present:
            lo = v if lo is None else lo
        elif lo is not None:
            runs.append((lo, v - 1))
            lo = None
    kind = "sequence_gap" if count < width else "record_missing"
    srt = np.sort(seqs)
    want = []
    for lo, hi in runs[:MAX_PER_KIND]:
        k = int(np.searchsorted(srt, lo))
        what = f"seq {lo}" if lo == hi else f"seq {lo}..{hi} ({hi - lo + 1} records)"
        want.append((kind, f"segment 3 record {k}: {what}"))
    assert [(k, d.split(" skipped")[0].split(" deleted")[0]) for k, d in got[:MAX_PER_KIND]] == want
    more = len(runs) - MAX_PER_KIND
    assert len(got) == len(want) + (more > 0)
    if more > 0:
        assert got[-1][1].startswith(f"segment 3: {more} more {kind} finding")
