"""The tamper matrix: every case of LEDGER-FORMAT.md "What verify must detect", applied to a fresh
copy of a ledger made from a corpus capture. The matrix is data (`MATRIX`, one `Tamper` row per
case, driven by one parametrized test): each row pins the problem it must raise (kind, segment,
the record index where one applies, and words of its detail) and the exact set of problem kinds
verify reports.

Ledger: gopacketfork__linux_sll_oversized_addr.pcapng (209 frames), 50 records per segment
(segments 0..4), 4 records per Merkle leaf, so a changed record is named by its leaf block.

Every test runs on a ledger of each format (ids v1, v2): a record is changed in the segment's own
records file (v1: the Parquet; v2: the raw record file seg-N.rec, rewritten with valid device MACs),
and the rows that are about v1's Parquet bytes pinned by the seal's parquet_sha256 run on v1 only
(v2 pins no file bytes; its raw-file and compaction cases are tests/unit/test_tamper_v2.py's).
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import CORPUS, cli, load_keys, needs_corpus
from ledger_files import (
    FORMATS,
    records_kind,
    reseal_segment,
    rewrite_sealed_records,
    sealed_records,
)

from ledgertool.capture.run import capture_file
from ledgertool.digest.record import record_dtype
from ledgertool.keyfiles import SigningKey
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.checkpoints import write_checkpoint
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.layout import checkpoint_path
from ledgertool.ledger.openmac import OpenSegmentKey
from ledgertool.ledger.recover import recover_ledger
from ledgertool.ledger.sealer import load_seal
from ledgertool.seal.document import seal_hash, seal_signed_bytes
from ledgertool.verify.ledger import verify_ledger

pytestmark = needs_corpus

SOURCE = CORPUS / "files" / "gopacketfork__linux_sll_oversized_addr.pcapng"
SEG, LEAF, LAST = 50, 4, 4  # records per segment, per leaf; index of the last segment
K = 13  # the record of segment 1 that record-level cases touch; its leaf block starts at 12


@pytest.fixture(scope="module", params=list(FORMATS))
def fmt(request) -> str:
    """The ledger format of the module's ledgers: "v1" or "v2"."""
    return request.param


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, keydir, fmt) -> Path:
    dk, sk, _ = load_keys(keydir)
    out = tmp_path_factory.mktemp("tamper") / "pristine"
    res = capture_file(
        SOURCE,
        out,
        digest_key=dk,
        signing_key=sk,
        segment_records=SEG,
        leaf_records=LEAF,
        ledger_format=FORMATS[fmt],
    )
    assert res.frames == 209 and [s.index for s in res.segments] == list(range(LAST + 1))
    assert records_kind(out) == ("rec" if fmt == "v2" else "parquet")
    return out


@pytest.fixture(scope="module")
def foreign(tmp_path_factory, keydir, fmt) -> Path:
    """Another valid ledger of the same capture, keys, parameters and format (different ledger
    id)."""
    dk, sk, _ = load_keys(keydir)
    out = tmp_path_factory.mktemp("tamper") / "foreign"
    capture_file(
        SOURCE,
        out,
        digest_key=dk,
        signing_key=sk,
        segment_records=SEG,
        leaf_records=LEAF,
        ledger_format=FORMATS[fmt],
    )
    return out


@pytest.fixture()
def ledger(pristine, tmp_path) -> Path:
    out = tmp_path / "ledger"
    shutil.copytree(pristine, out)
    return out


# ---- tampering helpers ----------------------------------------------------------------------


def _f(ledger: Path, index: int, suffix: str) -> Path:
    return ledger / "link=link0" / f"seg-{index:08d}.{suffix}"


def _kinds(ledger: Path) -> tuple[str, ...]:
    """The files of a sealed segment: its records file (.parquet / .rec), the leaves, the seal."""
    return (records_kind(ledger), "leaves", "seal.json")


def _records(ledger: Path, index: int) -> np.ndarray:
    return np.frombuffer(sealed_records(ledger, index), dtype=record_dtype(16)).copy()


def _mutate_records(ledger: Path, index: int, fn, c: dict) -> None:
    rewrite_sealed_records(ledger, index, fn(_records(ledger, index)).tobytes(), c["key"])


def _seal(ledger: Path, index: int) -> dict:
    return load_seal(_f(ledger, index, "seal.json")).to_json()


def _write_seal(ledger: Path, index: int, doc: dict) -> None:
    _f(ledger, index, "seal.json").write_text(json.dumps(doc, indent=1))


def _resign(ledger: Path, index: int, key: SigningKey, mutate=lambda d: None) -> None:
    doc = _seal(ledger, index)
    mutate(doc)
    doc["signatures"] = key.sign(seal_signed_bytes(doc))
    _write_seal(ledger, index, doc)


def _rechain(ledger: Path, start: int, key: SigningKey) -> None:
    """What a key holder would do to hide a rewrite: re-link and re-sign every later seal and
    re-sign the checkpoint (only an external checkpoint can catch this)."""
    for i in range(start, LAST + 1):
        prev = seal_hash(_seal(ledger, i - 1))
        _resign(ledger, i, key, lambda d, prev=prev: d.__setitem__("prev_seal_hash", prev))
    write_checkpoint(ledger, load_ledger(ledger), "link0", key)


def _swap_segments(ledger: Path, a: int, b: int) -> None:
    for suffix in _kinds(ledger):
        tmp = _f(ledger, a, suffix).with_suffix(".swap")
        _f(ledger, a, suffix).rename(tmp)
        _f(ledger, b, suffix).rename(_f(ledger, a, suffix))
        tmp.rename(_f(ledger, b, suffix))


def _flip_sig(doc: dict, alg: str) -> None:
    raw = bytearray(base64.b64decode(doc["signatures"][alg]))
    raw[5] ^= 1
    doc["signatures"][alg] = base64.b64encode(bytes(raw)).decode()


# ---- the mutations (ledger, ctx); the matrix below says what each must raise ---------------


def t_digest(lg, c):
    def f(a):
        a["digest"][K] = b"\x00" * 16
        return a

    _mutate_records(lg, 1, f, c)


def t_timestamp(lg, c):
    def f(a):
        a["ts_ns"][K] += 1
        return a

    _mutate_records(lg, 1, f, c)


def t_length(lg, c):
    def f(a):
        a["wire_len"][K] += 1
        return a

    _mutate_records(lg, 1, f, c)


def t_record_deleted(lg, c):
    _mutate_records(lg, 1, lambda a: np.delete(a, K), c)


def t_record_duplicated(lg, c):
    _mutate_records(lg, 1, lambda a: np.insert(a, K + 1, a[K]), c)


def t_record_reordered(lg, c):
    def f(a):
        a[[K, K + 1]] = a[[K + 1, K]]
        return a

    _mutate_records(lg, 1, f, c)


def t_segment_deleted(lg, c):
    for suffix in _kinds(lg):
        _f(lg, 1, suffix).unlink()


def t_segment_duplicated(lg, c):
    for suffix in _kinds(lg):
        shutil.copy(_f(lg, LAST, suffix), _f(lg, LAST + 1, suffix))


def t_segments_reordered(lg, c):
    _swap_segments(lg, 1, 2)


def t_segment_replaced_foreign(lg, c):
    for suffix in _kinds(lg):
        shutil.copy(_f(c["foreign"], 1, suffix), _f(lg, 1, suffix))


def _reseal_1(lg: Path, records: np.ndarray, key) -> None:
    """A key holder seals segment 1 again over `records`, chained to segment 0 as before."""
    reseal_segment(lg, 1, records.tobytes(), key, _seal(lg, 1)["prev_seal_hash"])


def t_segment_replaced_resigned(lg, c):
    """A key holder rewrites segment 1 and seals it properly; the chain to segment 2 breaks."""
    a = _records(lg, 1)
    a["digest"][K] = b"\x11" * 16
    _reseal_1(lg, a, c["key"])


def t_parquet_swapped(lg, c):
    shutil.copy(_f(lg, 2, "parquet"), _f(lg, 1, "parquet"))


def t_parquet_reencoded(lg, c):
    pq.write_table(pq.read_table(_f(lg, 1, "parquet")), _f(lg, 1, "parquet"), compression="snappy")


def t_other_key(lg, c):
    _resign(lg, 1, c["other_key"])


def t_mldsa_missing(lg, c):
    doc = _seal(lg, 1)
    del doc["signatures"]["ml-dsa-65"]
    _write_seal(lg, 1, doc)


def t_ed25519_missing(lg, c):
    doc = _seal(lg, 1)
    del doc["signatures"]["ed25519"]
    _write_seal(lg, 1, doc)


def t_ed25519_wrong(lg, c):
    doc = _seal(lg, 1)
    _flip_sig(doc, "ed25519")
    _write_seal(lg, 1, doc)


def t_mldsa_wrong(lg, c):
    doc = _seal(lg, 1)
    _flip_sig(doc, "ml-dsa-65")
    _write_seal(lg, 1, doc)


def t_downgrade_algorithm(lg, c):
    _resign(lg, 2, c["key"], lambda d: d.__setitem__("algorithm", "siphash-1-3-64"))
    _rechain(lg, 3, c["key"])


def t_downgrade_strip(lg, c):
    _resign(lg, 2, c["key"], lambda d: d.__setitem__("strip", "payload"))
    _rechain(lg, 3, c["key"])


def t_digest_key_switched(lg, c):
    """A key holder re-signs segment 2 naming a digest key no rotation introduced."""
    _resign(lg, 2, c["key"], lambda d: d.__setitem__("digest_key_id", "5a" * 16))
    _rechain(lg, 3, c["key"])


def t_undeclared_gap(lg, c):
    """The sealer itself skipped seq numbers 63..65 (records 13..15) without a GAP record."""
    a = np.delete(_records(lg, 1), [K, K + 1, K + 2])
    _reseal_1(lg, a, c["key"])
    _rechain(lg, 2, c["key"])


def t_truncated_tail(lg, c):
    """Cut the last segment and the ledger's own checkpoints; the verifier kept one."""
    c["checkpoint"] = checkpoint_path(lg, "link0").read_bytes()
    for suffix in _kinds(lg):
        _f(lg, LAST, suffix).unlink()
    checkpoint_path(lg, "link0").unlink()
    (lg / "checkpoint").unlink()


def t_history_rewritten(lg, c):
    """A key holder rewrites segment 2 and everything after it; only the old checkpoint knows."""
    c["checkpoint"] = checkpoint_path(lg, "link0").read_bytes()
    _resign(lg, 2, c["key"], lambda d: d.__setitem__("source", "rewritten"))
    _rechain(lg, 3, c["key"])


MERKLE = frozenset({"merkle_mismatch", "parquet_hash_mismatch"})
HEADER = frozenset({"records_header_mismatch"})
LEAF_3 = (
    "Merkle root differs from the seal; changed leaf blocks: records 12..15 (leaf 3, 4 "
    "records per leaf)"
)


@dataclass(frozen=True)
class Tamper:
    """One row of the matrix: what is done to a copy of the pristine ledger, the problem verify
    must name for it (kind, segment, record, and words of its detail) and the exact set of kinds."""

    name: str
    mutate: Callable[[Path, dict], None]
    kind: str
    segment: int | None
    record: int | None
    fragment: str
    kinds: frozenset[str]  # on a v1 ledger
    # on a v2 ledger, also: the raw record file's header names the ledger, link, segment, algorithm,
    # strip and digest key it was written for, so a moved file or a re-signed seal is named twice
    v2_also: frozenset[str] = frozenset()

    def kinds_in(self, fmt: str) -> frozenset[str]:
        """The kinds on a ledger of `fmt`: a v2 seal pins no file bytes (no
        parquet_hash_mismatch)."""
        return self.kinds if fmt == "v1" else self.kinds - {"parquet_hash_mismatch"} | self.v2_also


def _k(*kinds: str) -> frozenset[str]:
    return frozenset(kinds)


MATRIX = (
    Tamper("record_digest_changed", t_digest, "merkle_mismatch", 1, 12, LEAF_3, MERKLE),
    Tamper("record_timestamp_changed", t_timestamp, "merkle_mismatch", 1, 12, LEAF_3, MERKLE),
    Tamper("record_length_changed", t_length, "merkle_mismatch", 1, 12, LEAF_3, MERKLE),
    Tamper(
        "record_deleted",
        t_record_deleted,
        "record_missing",
        1,
        K,
        "segment 1 record 13: seq 63 deleted (the seal covers it)",
        MERKLE | _k("record_missing", "count_mismatch"),
    ),
    Tamper(
        "record_duplicated",
        t_record_duplicated,
        "record_duplicated",
        1,
        K + 1,
        "segment 1 record 14: seq 63 appears again",
        MERKLE | _k("record_duplicated", "count_mismatch"),
    ),
    Tamper(
        "records_reordered",
        t_record_reordered,
        "record_reordered",
        1,
        K,
        "segment 1 record 13: seq 64 out of order",
        MERKLE | _k("record_reordered"),
    ),
    Tamper(
        "segment_deleted",
        t_segment_deleted,
        "segment_missing",
        1,
        None,
        "segment [1] of 5 has no seal",
        _k("segment_missing", "chain_broken", "sequence_gap", "checkpoint_not_extended"),
    ),
    Tamper(
        "segment_duplicated",
        t_segment_duplicated,
        "segment_duplicated",
        LAST + 1,
        None,
        "seg-00000005.seal.json: same seal as segment 4",
        _k("segment_duplicated", "seal_misplaced", "chain_broken", "sequence_overlap"),
        v2_also=HEADER,
    ),
    # a moved v1 seal names its own segment's Parquet file, which is not read at another index
    Tamper(
        "segments_reordered",
        t_segments_reordered,
        "seal_misplaced",
        1,
        None,
        "seg-00000001.seal.json: seal is for link 'link0' segment 2",
        _k(
            "seal_misplaced",
            "chain_broken",
            "sequence_gap",
            "sequence_overlap",
            "checkpoint_mismatch",
        ),
        v2_also=HEADER,
    ),
    # the foreign seal also signs its own ledger's ledger.json
    Tamper(
        "segment_replaced_foreign",
        t_segment_replaced_foreign,
        "foreign_seal",
        1,
        None,
        "seg-00000001.seal.json: seal belongs to ledger ",
        _k("foreign_seal", "chain_broken", "checkpoint_mismatch", "ledger_header_mismatch"),
        v2_also=HEADER,
    ),
    Tamper(
        "segment_replaced_resigned",
        t_segment_replaced_resigned,
        "chain_broken",
        2,
        None,
        "seg-00000002.seal.json: prev_seal_hash ",
        _k("chain_broken", "checkpoint_mismatch"),
    ),
    Tamper(
        "seal_signed_by_other_key",
        t_other_key,
        "bad_signature",
        1,
        None,
        "seg-00000001.seal.json: ml-dsa-65 signature does not verify with key ",
        _k("bad_signature"),
    ),
    Tamper(
        "hybrid_mldsa_missing",
        t_mldsa_missing,
        "signature_missing",
        1,
        None,
        "seg-00000001.seal.json: ml-dsa-65 signature missing",
        _k("signature_missing"),
    ),
    Tamper(
        "hybrid_ed25519_missing",
        t_ed25519_missing,
        "signature_missing",
        1,
        None,
        "seg-00000001.seal.json: ed25519 signature missing",
        _k("signature_missing"),
    ),
    Tamper(
        "hybrid_ed25519_wrong",
        t_ed25519_wrong,
        "bad_signature",
        1,
        None,
        "seg-00000001.seal.json: ed25519 signature does not verify with key ",
        _k("bad_signature"),
    ),
    Tamper(
        "hybrid_mldsa_wrong",
        t_mldsa_wrong,
        "bad_signature",
        1,
        None,
        "seg-00000001.seal.json: ml-dsa-65 signature does not verify with key ",
        _k("bad_signature"),
    ),
    Tamper(
        "downgrade_algorithm",
        t_downgrade_algorithm,
        "parameter_mismatch",
        2,
        None,
        "seg-00000002.seal.json: algorithm 'siphash-1-3-64' differs from the ledger's "
        "'siphash-1-3-128'",
        _k("parameter_mismatch"),
        v2_also=HEADER,
    ),
    Tamper(
        "downgrade_strip",
        t_downgrade_strip,
        "parameter_mismatch",
        2,
        None,
        "seg-00000002.seal.json: strip 'payload' differs from the ledger's 'frame'",
        _k("parameter_mismatch"),
        v2_also=HEADER,
    ),
    Tamper(
        "digest_key_not_introduced",
        t_digest_key_switched,
        "digest_key_mismatch",
        2,
        None,
        f"digest_key_id {'5a' * 16!r} is not ",
        _k("digest_key_mismatch"),
        v2_also=HEADER,
    ),
    Tamper(
        "undeclared_sequence_gap",
        t_undeclared_gap,
        "sequence_gap",
        1,
        K,
        "segment 1 record 13: seq 63..65 (3 records) skipped and not declared as drops",
        _k("sequence_gap"),
    ),
    Tamper(
        "truncated_tail_vs_checkpoint",
        t_truncated_tail,
        "checkpoint_not_extended",
        None,
        None,
        "checkpoint covers 5 segments of link link0, the ledger holds 4 in an unbroken chain (its "
        "tail was cut)",
        _k("checkpoint_not_extended", "checkpoint_missing"),
    ),
    Tamper(
        "history_rewritten_vs_checkpoint",
        t_history_rewritten,
        "checkpoint_mismatch",
        None,
        None,
        "(history rewritten or a fork)",
        _k("checkpoint_mismatch"),
    ),
)
#: the Parquet file's own bytes, pinned by a v1 seal's parquet_sha256 (v2 seals pin no file bytes)
V1_PARQUET = (
    Tamper(
        "parquet_swapped_other_segment",
        t_parquet_swapped,
        "parquet_hash_mismatch",
        1,
        None,
        "seg-00000001.parquet: SHA-256 differs from the seal's parquet_sha256",
        MERKLE | _k("record_missing", "range_mismatch", "timestamp_mismatch"),
    ),
    Tamper(
        "parquet_reencoded_same_records",
        t_parquet_reencoded,
        "parquet_hash_mismatch",
        1,
        None,
        "seg-00000001.parquet: SHA-256 differs from the seal's parquet_sha256",
        _k("parquet_hash_mismatch"),
    ),
)
assert len({t.name for t in MATRIX + V1_PARQUET}) == len(MATRIX) + len(V1_PARQUET), (
    "case names are unique"
)


@pytest.fixture()
def ctx(keydir, other_keydir, foreign) -> dict:
    return {
        "key": load_keys(keydir)[1],
        "other_key": load_keys(other_keydir)[1],
        "foreign": foreign,
    }


def test_untouched_ledger_verifies(pristine, keydir):
    cp = checkpoint_path(pristine, "link0").read_bytes()
    v = verify_ledger(pristine, load_keys(keydir)[2], cp)
    assert v.ok, v.problems
    assert (v.segments, v.records, v.warnings) == (LAST + 1, 209, [])


def _detected_and_named(case: Tamper, fmt: str, ledger: Path, keydir: Path, ctx: dict) -> None:
    case.mutate(ledger, ctx)
    v = verify_ledger(ledger, load_keys(keydir)[2], ctx.get("checkpoint"))
    assert not v.ok
    found = {(p.kind, p.segment, p.record) for p in v.problems}
    assert (case.kind, case.segment, case.record) in found, sorted(found, key=str)
    assert {p.kind for p in v.problems} == case.kinds_in(fmt), sorted(found, key=str)
    named = [
        p.detail
        for p in v.problems
        if (p.kind, p.segment, p.record) == (case.kind, case.segment, case.record)
    ]
    assert any(case.fragment in d for d in named), named


@pytest.mark.parametrize("case", MATRIX, ids=lambda t: t.name)
def test_tamper_is_detected_and_named(case: Tamper, fmt, ledger, keydir, ctx):
    _detected_and_named(case, fmt, ledger, keydir, ctx)


@pytest.mark.parametrize("fmt", ["v1"], indirect=True)
@pytest.mark.parametrize("case", V1_PARQUET, ids=lambda t: t.name)
def test_v1_parquet_tamper_is_detected_and_named(case: Tamper, fmt, ledger, keydir, ctx):
    _detected_and_named(case, fmt, ledger, keydir, ctx)


def test_all_problems_are_reported_not_only_the_first(ledger, keydir, ctx):
    t_digest(ledger, ctx)
    _resign(ledger, 3, ctx["other_key"])
    doc = _seal(ledger, 4)
    del doc["signatures"]["ml-dsa-65"]
    _write_seal(ledger, 4, doc)
    v = verify_ledger(ledger, load_keys(keydir)[2])
    found = {(p.kind, p.segment, p.record) for p in v.problems}
    assert {
        ("merkle_mismatch", 1, 12),
        ("bad_signature", 3, None),
        ("signature_missing", 4, None),
    } <= found


def test_cli_names_kind_segment_and_record_and_exits_1(ledger, keydir, ctx):
    t_digest(ledger, ctx)
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert {"kind": "merkle_mismatch", "segment": 1, "record": 12} in [
        {k: p[k] for k in ("kind", "segment", "record")} for p in doc["problems"]
    ]


def test_torn_open_segment_is_reported_recoverable_not_fatal(ledger, keydir):
    _, sk, trust = load_keys(keydir)
    lg = load_ledger(ledger)
    nxt = _records(ledger, LAST)
    hdr = segments.SegmentHeader(
        lg.ledger_id,
        "link0",
        LAST + 1,
        lg.algorithm,
        lg.strip,
        lg.digest_key_id,
        lg.record_size,
        lg.digest_size,
        LEAF,
        int(nxt["seq"][-1]) + 1,
        0,
        OpenSegmentKey.derive(sk, lg.ledger_id).key_id,
    )
    extra = nxt[:3].copy()
    extra["seq"] = np.arange(3) + int(nxt["seq"][-1]) + 1
    open_path = layout.open_segment_path(ledger, "link0", LAST + 1)
    w = segments.SegmentWriter(open_path, hdr, OpenSegmentKey.derive(sk, lg.ledger_id), ledger)
    w.append(extra.tobytes(), 3)
    w.close()
    with open(open_path, "ab") as f:
        f.write(b"\x01" * 7)  # a torn next block
    v = verify_ledger(ledger, trust)
    assert v.ok and [(w.kind, w.segment) for w in v.warnings] == [("torn_segment", LAST + 1)]
    assert "3 whole records in 1 block and 7 bytes past them" in v.warnings[0].detail
    rec = recover_ledger(ledger, sk)
    assert [(link, r.index, r.records, r.torn_bytes) for link, r in rec.sealed] == [
        ("link0", LAST + 1, 3, 7)
    ]
    v = verify_ledger(ledger, trust, checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and v.records == 212 and not v.warnings
