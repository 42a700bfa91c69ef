"""Recovery is not all or nothing: one damaged byte in an open segment costs the blocks from the
damaged one on (set aside with the reason, the file as found kept in DIR/set-aside), never the
authenticated blocks before it; with nothing authenticated (a damaged header) the file is set aside
whole and the next capture goes on with a new segment, because the device's protected state says
no seal it signed lies there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES

from ledgertool.capture.run import capture_file
from ledgertool.digest.record import RECORD_FIXED, record_dtype
from ledgertool.keyfiles import DigestKey, SigningKey, TrustBundle, generate_keys
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.devstate import DeviceState
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.reader import LedgerReader
from ledgertool.ledger.recover import recover_ledger
from ledgertool.ledger.sealer import load_seal
from ledgertool.ledger.writer import LinkWriter
from ledgertool.verify.ledger import verified_segment, verify_ledger

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
BLOCKS = (64, 32, 32)  # records per block of the open segment 3


@pytest.fixture()
def left_open(tmp_path) -> tuple[Path, Path]:
    """(ledger, keys): 3 sealed segments and an open segment 3 of three authenticated blocks."""
    keys = tmp_path / "keys"
    keys.mkdir()
    generate_keys(keys)
    dk, sk = DigestKey.load(keys / "digest.key"), SigningKey.load(keys / "signing.key")
    ledger = tmp_path / "L"
    capture_file(
        SAMPLE,
        ledger,
        digest_key=dk,
        signing_key=sk,
        segment_records=100,
        leaf_records=64,
        device_state=DeviceState.beside(keys / "signing.key"),
    )
    lg = load_ledger(ledger)
    arr = np.frombuffer(
        b"".join(
            bytes(verified_segment(LedgerReader(ledger), lg, "link0", i).records) for i in range(3)
        ),
        dtype=record_dtype(lg.digest_size),
    ).copy()
    arr["seq"] += 294  # the records a capture would have written next
    records = arr.tobytes()
    w = LinkWriter.open(ledger, lg, "link0", sk, source="test", segment_records=1000)
    try:
        at = 0
        for n in BLOCKS:
            w.append(records[at : at + n * lg.record_size], n)
            at += n * lg.record_size
        w._segment.close()  # the crash: the file stays as written
    finally:
        w.close()
    return ledger, keys


def _offsets(path: Path) -> list[int]:
    return [b.offset for b in segments.read_open_segment(path).blocks]


# where the bit is flipped -> (records sealed from segment 3, first block set aside, why)
CASES = {
    "header_created_ns": (lambda o: 144, 0, 0, r"block 0 \(byte 256\) fails authentication"),
    "header_mac_key_id": (lambda o: 152, 0, 0, r"the header \(byte 152\) names MAC key"),
    "block0_digest": (lambda o: o[0] + 4 + RECORD_FIXED, 0, 0, r"block 0 \(byte 256\) fails"),
    "block1_digest": (lambda o: o[1] + 4 + RECORD_FIXED, 64, 1, r"block 1 \(byte \d+\) fails"),
    "block1_mac": (lambda o: o[2] - 1, 64, 1, r"block 1 \(byte \d+\) fails"),
    "block2_record_seq": (lambda o: o[2] + 4, 96, 2, r"block 2 \(byte \d+\) fails"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_flipped_bit_costs_only_the_blocks_from_it_on(left_open, case):
    ledger, keys = left_open
    where, sealed, first_bad, why = CASES[case]
    path = layout.open_segment_path(ledger, "link0", 3)
    raw = bytearray(path.read_bytes())
    o = _offsets(path)
    raw[where(o)] ^= 1
    path.write_bytes(bytes(raw))
    sk, trust = SigningKey.load(keys / "signing.key"), TrustBundle.load(keys / "verifier.pub")
    state = DeviceState.beside(keys / "signing.key")
    res = recover_ledger(ledger, sk, device_state=state)
    assert not res.ok and [(r.index, r.records) for _, r in res.sealed] == (
        [(3, sealed)] if sealed else []
    )
    (a,) = res.set_aside
    unsealed = len(raw) - (o[first_bad] if sealed else 0)
    assert (a.path, a.bytes, a.failed_authentication) == (str(path), unsealed, True)
    import re

    assert re.search(why, a.why), a.why
    assert Path(a.moved_to).read_bytes() == raw  # the file as found
    assert not path.exists()
    v = verify_ledger(ledger, trust, layout.checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and v.records == 294 + sealed, v.problems
    # the next capture continues after what was sealed
    capture_file(
        SAMPLE,
        ledger,
        digest_key=DigestKey.load(keys / "digest.key"),
        signing_key=sk,
        segment_records=1000,
        device_state=state,
    )
    v = verify_ledger(ledger, trust, layout.checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and v.records == 294 + sealed + 294, v.problems
    nxt = 4 if sealed else 3
    assert load_seal(layout.seal_path(ledger, "link0", nxt)).source == SAMPLE.name


def test_a_damaged_header_over_a_sealed_segment_is_a_rollback_not_a_set_aside(left_open):
    """The custodian renames a sealed seg-2.rec to seg-2.open (its seal deleted) and damages its
    header: setting it aside and going on would seal a new segment 2. Refused, nothing moved."""
    ledger, keys = left_open
    layout.open_segment_path(ledger, "link0", 3).unlink()
    for kind in (layout.SEAL, layout.LEAVES):
        layout.segment_path(ledger, "link0", 2, kind).unlink()
    rec = layout.records_path(ledger, "link0", 2)
    raw = bytearray(rec.read_bytes())
    raw[144] ^= 1
    rec.unlink()
    opened = layout.open_segment_path(ledger, "link0", 2)
    opened.write_bytes(bytes(raw))
    from ledgertool.errors import RollbackRefusedError

    with pytest.raises(RollbackRefusedError, match="this signing key signed seal 2"):
        recover_ledger(
            ledger,
            SigningKey.load(keys / "signing.key"),
            device_state=DeviceState.beside(keys / "signing.key"),
        )
    assert opened.read_bytes() == raw and not (ledger / layout.SET_ASIDE_DIR).exists()
