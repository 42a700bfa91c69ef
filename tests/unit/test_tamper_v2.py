"""The tamper matrix for ledger format v2 (sealed segments as raw record files, or Parquet after
compaction; docs/ledger-format.md, "Verification"): each row changes a fresh copy of a v2 ledger
written by the tests' reference writer (tests/v2_reference.py) from the records of
samples/sample.pcap, and pins the problem verify must raise (kind, segment, record where one
applies, words of the detail) and the exact set of kinds.

Ledger: 294 records in segments of 100, 100, 94; 16 records per leaf; segment 1's raw file has
blocks of 7, 50 and 43 records (not leaf-aligned), the others leaf-aligned blocks.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SAMPLES, load_keys
from v2_reference import capture_records, parquet_bytes, seal_v2, synthetic_records, write_v2_ledger

from ledgertool.keyfiles import SigningKey
from ledgertool.verify.ledger import verify_ledger

SEG, LEAF = 100, 16
SEG1 = 256 + 4 + 7 * 48 + 32  # byte offset of segment 1's second block (its count field)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, keydir) -> tuple[Path, list[bytes]]:
    dk, sk, _ = load_keys(keydir)
    recs = capture_records(SAMPLES / "sample.pcap", dk)
    segs = [recs[i * SEG * 48 : (i + 1) * SEG * 48] for i in range(3)]
    out = tmp_path_factory.mktemp("tamper2") / "pristine"
    write_v2_ledger(
        out,
        sk,
        segs,
        digest_key_id=dk.key_id("siphash-1-3-128", 16),
        leaf_records=LEAF,
        block_records=[None, [7, 50, 43], None],
    )
    return out, segs


def seg(d: Path, i: int, kind: str) -> Path:
    return d / "link=link0" / f"seg-{i:08d}.{kind}"


def edit(path: Path, f: Callable[[bytearray], bytes | bytearray]) -> None:
    path.write_bytes(bytes(f(bytearray(path.read_bytes()))))


def flip(offset: int) -> Callable[[bytearray], bytearray]:
    def go(b: bytearray) -> bytearray:
        b[offset] ^= 0x01
        return b

    return go


def to_parquet(d: Path, i: int, segs: list[bytes], change=None) -> None:
    """Compact segment i by hand (the reference writer's Parquet), optionally from changed
    records."""
    recs = segs[i] if change is None else change(bytearray(segs[i]))
    seg(d, i, "parquet").write_bytes(parquet_bytes(bytes(recs), 16, i))
    seg(d, i, "rec").unlink()


def resign(d: Path, i: int, segs: list[bytes], **override) -> None:
    """Re-sign segment i's seal with the ledger's key, changed (the signer is the attacker here)."""
    doc = json.loads(seg(d, i, "seal.json").read_text())
    from v2_reference import Ledger

    raw = (d / "ledger.json").read_bytes()
    h = json.loads(raw)
    led = Ledger(
        d,
        h["ledger_id"],
        h["algorithm"],
        h["strip"],
        h["digest_key_id"],
        16,
        h["leaf_records"],
        raw,
    )
    new = seal_v2(
        led, "link0", i, int(doc["first_seq"]), segs[i], doc["prev_seal_hash"], KEY[0], **override
    )
    seg(d, i, "seal.json").write_text(json.dumps(new))


KEY: list[SigningKey] = []


@dataclass(frozen=True)
class Tamper:
    name: str
    apply: Callable[[Path, list[bytes]], None]
    kind: str
    segment: int | None
    record: int | None
    words: tuple[str, ...]
    kinds: frozenset[str]
    warnings: frozenset[str] = frozenset()


def _swap(d: Path, segs) -> None:
    a, b = seg(d, 0, "rec"), seg(d, 2, "rec")
    ta, tb = a.read_bytes(), b.read_bytes()
    a.write_bytes(tb)
    b.write_bytes(ta)


def _both(d: Path, segs) -> None:
    seg(d, 1, "parquet").write_bytes(parquet_bytes(segs[1], 16, 1))


def _both_parquet_differs(d: Path, segs) -> None:
    seg(d, 1, "parquet").write_bytes(parquet_bytes(synthetic_records(100, 100, 16), 16, 1))


def _both_rec_bad(d: Path, segs) -> None:
    seg(d, 1, "parquet").write_bytes(parquet_bytes(segs[1], 16, 1))
    edit(seg(d, 1, "rec"), flip(SEG1 + 4 + 40))


def _digest_changed(b: bytearray) -> bytearray:
    b[20 * 48 + 40] ^= 0x80
    return b


def _appended_block(d: Path, segs) -> None:
    extra = synthetic_records(2, 200, 16)
    edit(seg(d, 0, "rec"), lambda b: b + struct.pack("<I", 2) + extra + bytes(32))


MATRIX = [
    Tamper(
        "rec record byte flipped",
        lambda d, s: edit(seg(d, 1, "rec"), flip(SEG1 + 4 + 9 * 48 + 33)),
        "merkle_mismatch",
        1,
        16,
        ("changed leaf blocks: records 16..31",),
        frozenset({"merkle_mismatch"}),
    ),
    Tamper(
        "rec seq byte flipped",
        lambda d, s: edit(seg(d, 1, "rec"), flip(SEG1 + 4 + 9 * 48 + 1)),
        "merkle_mismatch",
        1,
        16,
        ("leaf blocks",),
        frozenset({"merkle_mismatch", "record_missing", "range_mismatch", "record_reordered"}),
    ),
    Tamper(
        "rec cut by one byte",
        lambda d, s: edit(seg(d, 2, "rec"), lambda b: b[:-1]),
        "records_unreadable",
        2,
        None,
        ("runs past the end of the file",),
        frozenset({"records_unreadable"}),
    ),
    Tamper(
        "rec cut inside the header",
        lambda d, s: edit(seg(d, 2, "rec"), lambda b: b[:100]),
        "records_unreadable",
        2,
        None,
        ("256-byte header",),
        frozenset({"records_unreadable"}),
    ),
    Tamper(
        "rec trailing bytes",
        lambda d, s: edit(seg(d, 0, "rec"), lambda b: b + b"\0\0"),
        "records_unreadable",
        0,
        None,
        ("2 bytes after the last whole block",),
        frozenset({"records_unreadable"}),
    ),
    Tamper(
        "rec block appended",
        _appended_block,
        "count_mismatch",
        0,
        None,
        ("102 records in its raw record file",),
        frozenset({"count_mismatch", "range_mismatch", "merkle_mismatch", "timestamp_mismatch"}),
    ),
    Tamper(
        "rec header first_seq edited",
        lambda d, s: edit(seg(d, 1, "rec"), lambda b: b[:40] + struct.pack("<Q", 101) + b[48:]),
        "records_header_mismatch",
        1,
        None,
        ("first seq 101 (seal: 100)",),
        frozenset({"records_header_mismatch"}),
    ),
    Tamper(
        "rec header link edited",
        lambda d, s: edit(seg(d, 1, "rec"), lambda b: b[:64] + b"link9".ljust(32, b"\0") + b[96:]),
        "records_header_mismatch",
        1,
        None,
        ("link 'link9'",),
        frozenset({"records_header_mismatch"}),
    ),
    Tamper(
        "rec files swapped between segments",
        _swap,
        "records_header_mismatch",
        0,
        None,
        ("segment index 2 (seal: 0)",),
        frozenset(
            {
                "records_header_mismatch",
                "count_mismatch",
                "record_missing",
                "range_mismatch",
                "timestamp_mismatch",
                "merkle_mismatch",
            }
        ),
    ),
    Tamper(
        "rec missing",
        lambda d, s: seg(d, 2, "rec").unlink(),
        "records_missing",
        2,
        None,
        ("neither", "seg-00000002.rec", "seg-00000002.parquet"),
        frozenset({"records_missing"}),
    ),
    # sealed, not yet renamed: the open file is read as the records file (so checked like it)
    Tamper(
        "rec not renamed, open file changed",
        lambda d, s: (
            seg(d, 2, "rec").rename(seg(d, 2, "open")),
            edit(seg(d, 2, "open"), flip(256 + 4 + 40)),
        ),
        "merkle_mismatch",
        2,
        0,
        ("changed leaf blocks: records 0..15",),
        frozenset({"merkle_mismatch"}),
    ),
    Tamper(
        "parquet records differ",
        lambda d, s: to_parquet(d, 1, s, _digest_changed),
        "merkle_mismatch",
        1,
        16,
        ("records 16..31",),
        frozenset({"merkle_mismatch"}),
    ),
    Tamper(
        "parquet segment column edited",
        lambda d, s: (
            to_parquet(d, 1, s),
            seg(d, 1, "parquet").write_bytes(parquet_bytes(s[1], 16, 7)),
        ),
        "parquet_unreadable",
        1,
        None,
        ("column segment is not 1",),
        frozenset({"parquet_unreadable"}),
    ),
    Tamper(
        "parquet not Parquet",
        lambda d, s: (to_parquet(d, 0, s), seg(d, 0, "parquet").write_bytes(b"PAR1")),
        "parquet_unreadable",
        0,
        None,
        ("seg-00000000.parquet",),
        frozenset({"parquet_unreadable"}),
    ),
    Tamper(
        "both forms: the raw file is read",
        _both_parquet_differs,
        "compaction_leftover",
        1,
        None,
        ("beside", "seg-00000001.rec, which was read"),
        frozenset(),
        frozenset({"compaction_leftover"}),
    ),
    Tamper(
        "both forms, raw file tampered",
        _both_rec_bad,
        "merkle_mismatch",
        1,
        0,
        ("records 0..15",),
        frozenset({"merkle_mismatch"}),
        frozenset({"compaction_leftover"}),
    ),
    Tamper(
        "v2 seal with a v1 member",
        lambda d, s: resign(d, 1, s, parquet_sha256="00" * 32),
        "seal_malformed",
        1,
        None,
        ("ledgertool-seal-v2 seal has 'parquet_sha256', not v2 members",),
        frozenset({"seal_malformed", "chain_broken", "checkpoint_mismatch"}),
    ),
]


@pytest.mark.parametrize("t", MATRIX, ids=[t.name for t in MATRIX])
def test_v2_tamper_matrix(t: Tamper, pristine, tmp_path, keydir):
    KEY[:] = [load_keys(keydir)[1]]
    src, segs = pristine
    d = tmp_path / "L"
    shutil.copytree(src, d)
    t.apply(d, segs)
    res = verify_ledger(d, load_keys(keydir)[2])
    found = [p for p in res.problems + res.warnings if p.kind == t.kind]
    assert found, (t.kind, [(p.kind, p.detail) for p in res.problems + res.warnings])
    p = found[0]
    assert (p.segment, p.record) == (t.segment, t.record), p
    for w in t.words:
        assert w in p.detail, p.detail
    assert {p.kind for p in res.problems} == t.kinds, [(p.kind, p.detail) for p in res.problems]
    assert {w.kind for w in res.warnings} == t.warnings


def test_v2_pristine_and_parquet_form_verify(pristine, tmp_path, keydir):
    src, segs = pristine
    res = verify_ledger(src, load_keys(keydir)[2])
    assert (
        res.ok and (res.segments, res.records, res.frames) == (3, 294, 294) and res.warnings == []
    )
    d = tmp_path / "L"
    shutil.copytree(src, d)
    to_parquet(d, 0, segs)
    seen = []
    res = verify_ledger(
        d, load_keys(keydir)[2], on_segment=lambda s: seen.append((s.index, bytes(s.records)))
    )
    assert res.ok and res.records == 294
    assert seen == [
        (i, segs[i]) for i in range(3)
    ]  # the records handed on are exactly the checked ones
