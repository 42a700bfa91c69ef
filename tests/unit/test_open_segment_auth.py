"""The security slice of format v2: the sealer signs the records the capture holds in memory, open
segments are authenticated blocks (ledger format v2), and recovery seals only the authenticated
prefix. The custodian of the storage (write access, no keys) is the adversary
(docs/threat-model.md, "What recovery trusts"); docs/adr/0009-authenticated-open-segments.md."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, CliResult, cli, load_keys

from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.capture.run import capture_file
from ledgertool.digest.record import RECORD_FIXED, record_dtype
from ledgertool.errors import OpenSegmentRefusedError
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.openmac import MAC_SIZE, OpenSegmentKey
from ledgertool.ledger.reader import LedgerReader
from ledgertool.ledger.recover import recover_ledger
from ledgertool.ledger.sealer import load_seal
from ledgertool.ledger.writer import LinkWriter
from ledgertool.reconcile.recompute import reconcile
from ledgertool.verify.ledger import verified_segment, verify_ledger

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
ALG = "siphash-1-3-128"


@pytest.fixture()
def sealed(tmp_path, keydir) -> Path:
    """sample.pcap captured in 3 sealed segments (100, 100, 94 records), checkpoint kept aside; 64
    records per leaf (v2's default is 256) so that the blocks of `left_open` complete a leaf."""
    dk, sk, _ = load_keys(keydir)
    ledger = tmp_path / "L"
    capture_file(
        SAMPLE,
        ledger,
        digest_key=dk,
        signing_key=sk,
        algorithm=ALG,
        segment_records=100,
        leaf_records=64,
    )
    (tmp_path / "before.note").write_bytes(layout.checkpoint_path(ledger, "link0").read_bytes())
    return ledger


def _records_of(ledger: Path) -> bytes:
    """The 294 sealed records, as a replay attacker takes them from the sealed files (either
    form)."""
    lg, reader = load_ledger(ledger), LedgerReader(ledger)
    return b"".join(bytes(verified_segment(reader, lg, "link0", i).records) for i in range(3))


def _renumbered(records: bytes, digest_size: int, first_seq: int) -> bytes:
    arr = np.frombuffer(records, dtype=record_dtype(digest_size)).copy()
    arr["seq"] = np.arange(first_seq, first_seq + len(arr), dtype=np.uint64)
    return arr.tobytes()


def _header(
    ledger: Path, index: int, first_seq: int, mac_key_id: str | None
) -> segments.SegmentHeader:
    lg = load_ledger(ledger)
    return segments.SegmentHeader(
        lg.ledger_id,
        "link0",
        index,
        lg.algorithm,
        lg.strip,
        lg.digest_key_id,
        lg.record_size,
        lg.digest_size,
        lg.leaf_records,
        first_seq,
        time.time_ns(),
        mac_key_id,
    )


def _verify_before(ledger: Path, keydir: Path) -> CliResult:
    return cli(
        "verify",
        ledger,
        "--trust",
        keydir / "verifier.pub",
        "--checkpoint",
        ledger.parent / "before.note",
        "--json",
    )


def _recover(ledger: Path, keydir: Path, *extra: str) -> CliResult:
    return cli("recover", ledger, "--signing-key", keydir / "signing.key", *extra)


# ---- attack 1: a planted seg-N.open that continues the chain ----------------------------------


def test_planted_open_segment_is_refused(sealed, keydir):
    """The attack: the custodian plants seg-00000003.open continuing the chain
    (index, first seq, ledger id and key id are public) with the 294 digests replayed. On main
    `recover` sealed it and `verify --checkpoint <before>` exited 0 with 588 records."""
    lg = load_ledger(sealed)
    planted = layout.open_segment_path(sealed, "link0", 3)
    planted.write_bytes(
        _header(sealed, 3, 294, None).encode()
        + _renumbered(_records_of(sealed), lg.digest_size, 294)
    )
    r = _recover(sealed, keydir)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip() == (
        f"ledgertool: error: {planted}: a v1 open segment (294 records) carries no authentication "
        "by the device; nothing was sealed: if the storage is trusted, `ledgertool recover` with "
        "--trust-unauthenticated-open-segments seals it"
    )
    # kept, for inspection
    assert planted.exists() and not layout.seal_path(sealed, "link0", 3).exists()
    v = _verify_before(sealed, keydir)
    assert json.loads(v.stdout)["records"] == 294 and v.returncode == 0, v.stdout


def test_planted_v2_open_segment_is_refused(sealed, keydir, other_keydir):
    """The same plant in the v2 layout: with the MAC key id seen in an earlier open segment but
    MACs the custodian had to make up, and with blocks MAC'd by another signing key."""
    lg = load_ledger(sealed)
    _, sk, _ = load_keys(keydir)
    _, other, _ = load_keys(other_keydir)
    mine, theirs = (
        OpenSegmentKey.derive(sk, lg.ledger_id),
        OpenSegmentKey.derive(other, lg.ledger_id),
    )
    records = _renumbered(_records_of(sealed), lg.digest_size, 294)
    planted = layout.open_segment_path(sealed, "link0", 3)
    # made-up MACs under the real key id: nothing authenticates, the file is set aside whole
    raw = (
        _header(sealed, 3, 294, mine.key_id).encode()
        + (294).to_bytes(4, "little")
        + records
        + bytes(MAC_SIZE)
    )
    planted.write_bytes(raw)
    aside = layout.set_aside_dir(sealed, "link0") / planted.name
    r = _recover(sealed, keydir)
    assert (
        r.returncode == 1
        and (
            f"set aside {planted} as {aside}: {len(raw)} bytes not sealed ({planted}: block 0 "
            "(byte 256) fails authentication by the device's key (MAC does not verify): planted, "
            "rewritten or reordered, a damaged header or block, or written by an older version)"
        )
        in r.stdout
    ), r.stdout + r.stderr
    assert aside.read_bytes() == raw and not planted.exists()
    # correct MACs under another device's key
    w = segments.SegmentWriter(planted, _header(sealed, 3, 294, theirs.key_id), theirs, sealed)
    w.append(records, 294)
    w.close()
    r = _recover(sealed, keydir)
    assert (
        r.returncode == 1
        and f"{planted}: the header (byte 152) names MAC key {theirs.key_id}" in r.stdout
    )
    assert aside.with_name(planted.name + ".1").is_file() and not planted.exists()
    assert _verify_before(sealed, keydir).returncode == 0
    assert verify_ledger(sealed, load_keys(keydir)[2]).records == 294


# ---- attack 2: rewriting open segments while capture runs -------------------------------------


def _digest_offset(path: Path) -> int:
    """Byte offset of record 0's digest in an open segment of either layout."""
    v2 = path.read_bytes()[:8] == segments.SEGMENT_MAGIC_V2
    return segments.HEADER_SIZE + (segments.BLOCK_PREFIX if v2 else 0) + RECORD_FIXED


@pytest.mark.parametrize("ledger_format", [1, 2], ids=["v1", "v2"])
def test_rewriting_open_segments_during_capture_changes_nothing_signed(
    ledger_format, tmp_path, keydir
):
    """The attack: zero record 0's digest of every open segment while `capture`
    runs. On main the sealer read the rewritten bytes back and signed them (verify 0, recompute
    ledger-only 1 per segment). Now the seal covers the records in memory. v1: the open file is
    removed once its Parquet file is written from memory, so recompute of the input matches the
    ledger exactly. v2: the closed open file is the sealed raw record file (renamed, not pinned by
    the seal), so the rewrite stays in storage, where verify finds it against the signed root
    (merkle_mismatch at record 0 of exactly the rewritten segments); the signed roots are those of
    the same input captured untouched."""
    dk, sk, trust = load_keys(keydir)
    src = tmp_path / "in.pcap"
    write_synthetic_pcap(src, 60_000, 64, seed=14)
    ledger = tmp_path / "L"
    rewritten: set[Path] = set()
    stop = threading.Event()

    def rewrite() -> None:
        while not stop.is_set():
            for p in ledger.glob("link=*/seg-*.open"):
                try:
                    at = _digest_offset(p)
                    with open(p, "r+b") as f:
                        if f.seek(0, 2) >= at + 16:  # record 0 is written
                            f.seek(at)
                            f.write(bytes(16))
                            rewritten.add(p)
                except FileNotFoundError:
                    pass  # sealed and removed meanwhile
            time.sleep(0)

    t = threading.Thread(target=rewrite, daemon=True)
    t.start()
    try:
        res = capture_file(
            src,
            ledger,
            digest_key=dk,
            signing_key=sk,
            algorithm=ALG,
            segment_records=2_000,
            ledger_format=ledger_format,
        )
    finally:
        stop.set()
        t.join()
    assert len(res.segments) == 30 and len(rewritten) >= 10, len(rewritten)
    v = verify_ledger(ledger, trust, layout.checkpoint_path(ledger, "link0").read_bytes())
    if ledger_format == 2:
        hit = {layout.parse_segment_name(p.name)[0] for p in rewritten}
        assert v.records == 60_000 and {(p.kind, p.segment, p.record) for p in v.problems} == {
            ("merkle_mismatch", i, 0) for i in hit
        }, v.problems
        clean = tmp_path / "clean"
        capture_file(
            src,
            clean,
            digest_key=dk,
            signing_key=sk,
            algorithm=ALG,
            segment_records=2_000,
            ledger_format=2,
        )
        assert [load_seal(layout.seal_path(ledger, "link0", i)).merkle_root for i in range(30)] == [
            load_seal(layout.seal_path(clean, "link0", i)).merkle_root for i in range(30)
        ]
        return
    assert v.ok and v.records == 60_000, v.problems
    r = reconcile(src, ledger, dk, trust=trust)
    assert (r.frames, r.matched, r.ledger_only, r.capture_only) == (60_000, 60_000, 0, 0)


# ---- authenticated recovery: the block cases ---------------------------------------------------

BLOCKS = (
    64,
    32,
    32,
)  # records per append into segment 3 (leaf 64): three blocks, the last two completing a leaf


@pytest.fixture()
def left_open(sealed, keydir) -> Path:
    """`sealed` plus an open segment 3 of three authenticated blocks, as a crash leaves it."""
    _, sk, _ = load_keys(keydir)
    lg = load_ledger(sealed)
    records = _renumbered(_records_of(sealed)[: sum(BLOCKS) * lg.record_size], lg.digest_size, 294)
    w = LinkWriter.open(sealed, lg, "link0", sk, source="test", segment_records=1000)
    try:
        at = 0
        for n in BLOCKS:
            w.append(records[at : at + n * lg.record_size], n)
            at += n * lg.record_size
        w._segment.close()  # the crash: the file stays as written
    finally:
        w.close()
    return layout.open_segment_path(sealed, "link0", 3)


def _block_offsets(path: Path) -> list[int]:
    return [b.offset for b in segments.read_open_segment(path).blocks]


def test_recover_seals_whole_authenticated_blocks(left_open, keydir):
    ledger = left_open.parent.parent
    r = _recover(ledger, keydir, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["sealed"] == [
        {
            "link": "link0",
            "segment": 3,
            "records": 128,
            "torn_bytes_discarded": 0,
            "blocks_sealed": 3,
            "blocks_past_prefix": 0,
        }
    ]
    v = verify_ledger(
        ledger, load_keys(keydir)[2], layout.checkpoint_path(ledger, "link0").read_bytes()
    )
    assert v.ok and v.records == 422


def test_rewritten_block_is_set_aside_and_the_prefix_sealed(left_open, keydir):
    ledger = left_open.parent.parent
    raw = bytearray(left_open.read_bytes())
    at = _block_offsets(left_open)[1]
    raw[at + segments.BLOCK_PREFIX + RECORD_FIXED] ^= 1  # one digest bit of block 1's first record
    left_open.write_bytes(bytes(raw))
    r = _recover(ledger, keydir, "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert not doc["ok"] and [
        (s["segment"], s["records"], s["blocks_sealed"]) for s in doc["sealed"]
    ] == [(3, 64, 1)]
    (a,) = doc["set_aside"]
    assert (a["path"], a["bytes"], a["failed_authentication"]) == (
        str(left_open),
        len(raw) - at,
        True,
    )
    assert a["why"].startswith(
        f"{left_open}: block 1 (byte {at}) fails authentication by the device's key"
    )
    assert Path(a["moved_to"]).read_bytes() == raw  # the file as found, kept
    assert _verify_before(ledger, keydir).returncode == 0
    v = verify_ledger(
        ledger, load_keys(keydir)[2], layout.checkpoint_path(ledger, "link0").read_bytes()
    )
    assert v.records == 294 + 64


def test_reordered_blocks_are_set_aside(left_open, keydir):
    ledger = left_open.parent.parent
    raw = left_open.read_bytes()
    o = _block_offsets(left_open)
    sk = load_keys(keydir)[1]
    # the header is bound into block 0's MAC: blocks under another header (here: its creation
    # time, which nothing else checks) fail from block 0; without the device's protected state
    # nothing says no sealed segment lies there, so the file is refused and left in place
    hdr = bytearray(raw[: segments.HEADER_SIZE])
    hdr[144] ^= 1
    left_open.write_bytes(bytes(hdr) + raw[segments.HEADER_SIZE :])
    with pytest.raises(OpenSegmentRefusedError, match=r"block 0 \(byte 256\) fails authentication"):
        recover_ledger(ledger, sk)
    assert not layout.seal_path(ledger, "link0", 3).exists() and left_open.exists()
    # blocks 1 and 2 (same size) swapped
    left_open.write_bytes(raw[: o[1]] + raw[o[2] :] + raw[o[1] : o[2]])
    res = recover_ledger(ledger, sk)
    assert [(link, r.index, r.records) for link, r in res.sealed] == [
        ("link0", 3, 64)
    ] and not res.ok
    assert re.match(
        rf"{left_open}: block 1 \(byte {o[1]}\) fails authentication", res.set_aside[0].why
    )


@pytest.mark.parametrize("cut", ["mid_block", "mid_count", "at_boundary"])
def test_truncated_open_segment_seals_only_the_prefix(left_open, keydir, cut):
    """Truncation cannot be told from a crash: the whole authenticated blocks are sealed, what lay
    past them is reported (bytes, the incomplete block) and not signed."""
    ledger = left_open.parent.parent
    raw = left_open.read_bytes()
    o = _block_offsets(left_open)
    end = {"mid_block": o[2] + 100, "mid_count": o[2] + 2, "at_boundary": o[2]}[cut]
    left_open.write_bytes(raw[:end])
    r = _recover(ledger, keydir, "--json")
    assert r.returncode == 0, r.stderr
    (s,) = json.loads(r.stdout)["sealed"]
    assert (
        s["records"],
        s["blocks_sealed"],
        s["torn_bytes_discarded"],
        s["blocks_past_prefix"],
    ) == (96, 2, end - o[2], int(end > o[2]))
    seal = load_seal(layout.seal_path(ledger, "link0", 3))
    assert (seal.records, seal.torn_bytes_discarded) == (96, end - o[2])
    v = verify_ledger(
        ledger, load_keys(keydir)[2], layout.checkpoint_path(ledger, "link0").read_bytes()
    )
    assert v.ok and v.records == 390


def test_v1_open_segment_only_with_trusted_storage(sealed, keydir):
    """A v1 open segment (no MACs, as main wrote them) is sealed only with the explicit flag."""
    lg = load_ledger(sealed)
    path = layout.open_segment_path(sealed, "link0", 3)
    path.write_bytes(
        _header(sealed, 3, 294, None).encode()
        + _renumbered(_records_of(sealed)[: 5 * lg.record_size], lg.digest_size, 294)
        + b"\x01\x02"
    )
    assert _recover(sealed, keydir).returncode == 1
    dk, sk, _ = load_keys(keydir)
    # a capture refuses too
    with pytest.raises(OpenSegmentRefusedError, match="carries no authentication"):
        capture_file(SAMPLE, sealed, digest_key=dk, signing_key=sk, algorithm=ALG)
    r = _recover(sealed, keydir, "--trust-unauthenticated-open-segments", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sealed"] == [
        {
            "link": "link0",
            "segment": 3,
            "records": 5,
            "torn_bytes_discarded": 2,
            "blocks_sealed": 0,
            "blocks_past_prefix": 0,
        }
    ]


# ---- a torn last block after kill -9 -----------------------------------------------------------
