"""atheris harness over the Python parsers of untrusted documents (docs/fuzzing.md).

    pip install atheris
    scripts/fuzz.sh python 120   # or: python scripts/fuzz_parsers.py CORPUS_DIR [libFuzzer flags]

Input: byte 0 picks the parser, the rest is the document:

  0 ledger.json        ledger.parse_ledger_header
  1 segment header     segments.SegmentHeader.decode (+ the record split of read_open_segment)
  2 seal document      load_seal, then its canonical signed bytes and the signature check
  3 inclusion proof    proof.parse_proof + proof.check_proof
  4 checkpoint note    checkpoint.parse_note + verify_note
  5 rotation statement ledger.rotations.load_rotations + rotation.key_schedule

The property (as in tests/unit/test_fuzz_regressions.py): a parser returns, or raises a LedgerError
subclass; for the seal, TypeError/ValueError from canonicalisation are what verify catches. Any
other exception is a finding, and a returned header must hold its invariants. The seeds are
genuine documents of a small ledger built at start-up (written to the corpus directory when it
is empty), so the mutations start from the real formats.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from ledgertool.digest.engine import valid_leaf_records
    from ledgertool.errors import LedgerError
    from ledgertool.ledger import layout
    from ledgertool.ledger import segment as segments
    from ledgertool.ledger.header import parse_ledger_header
    from ledgertool.ledger.rotations import load_rotations, rotate_keys
    from ledgertool.ledger.sealer import load_seal
    from ledgertool.seal import checkpoint, rotation
    from ledgertool.verify import proof

KINDS = ("ledger", "segment", "seal", "proof", "note", "rotation")


def _world(tmp: Path) -> dict:
    """A 3-segment ledger of a synthetic capture, a proof, a checkpoint and a key rotation."""
    from ledgertool.capture.run import capture_file
    from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys

    generate_keys(tmp / "keys")
    dk, sk = (
        DigestKey.load(tmp / "keys" / "digest.key"),
        SigningKey.load(tmp / "keys" / "signing.key"),
    )
    trust = sk.trust_bundle()
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)]
    for i in range(24):
        frame = (
            bytes(6)
            + bytes([2, 0, 0, 0, 0, 1])
            + b"\x08\x00"
            + bytes((i * 7 + k) & 0xFF for k in range(40 + i))
        )
        out.append(struct.pack("<IIII", 1_700_000_000 + i, i, len(frame), len(frame)) + frame)
    (tmp / "cap.pcap").write_bytes(b"".join(out))
    ledger = tmp / "ledger"
    capture_file(
        tmp / "cap.pcap", ledger, digest_key=dk, signing_key=sk, segment_records=10, leaf_records=4
    )
    doc = proof.build_proof(ledger, seq=13, link="link0")
    rotated = tmp / "rotated"
    import shutil

    shutil.copytree(ledger, rotated)
    rotate_keys(rotated, sk, SigningKey.generate())
    return {
        "trust": trust,
        "ledger_id": json.loads((ledger / "ledger.json").read_bytes())["ledger_id"],
        "seeds": {
            "ledger": (ledger / "ledger.json").read_bytes(),
            "segment": segments.SegmentHeader(
                json.loads((ledger / "ledger.json").read_bytes())["ledger_id"],
                "link0",
                3,
                "siphash-1-3-128",
                "frame",
                "ab" * 16,
                48,
                16,
                4,
                24,
                1,
            ).encode()
            + bytes(100),
            "seal": (ledger / "link=link0" / "seg-00000001.seal.json").read_bytes(),
            "proof": json.dumps(doc).encode(),
            "note": layout.checkpoint_path(ledger, "link0").read_bytes(),
            "rotation": next((rotated / layout.ROTATIONS_DIR).glob("rotation-*.json")).read_bytes(),
        },
    }


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lt-fuzz-parsers-"))
    world = _world(tmp)
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    if args and os.path.isdir(args[0]) and not os.listdir(args[0]):
        for i, kind in enumerate(KINDS):
            Path(args[0], f"seed-{kind}").write_bytes(bytes([i]) + world["seeds"][kind])
    scratch = tmp / "scratch"
    (scratch / layout.ROTATIONS_DIR).mkdir(parents=True)
    doc_file = scratch / "doc.json"
    rot_file = scratch / layout.ROTATIONS_DIR / "rotation-00000001.json"

    def one(data: bytes) -> None:
        if not data:
            return
        kind, body = KINDS[data[0] % len(KINDS)], data[1:]
        try:
            if kind == "ledger":
                h = parse_ledger_header(body, "ledger.json")
                assert valid_leaf_records(h.leaf_records) and h.record_size == 32 + h.digest_size, h
            elif kind == "segment":
                hdr = segments.SegmentHeader.decode(body, "seg.open")
                assert hdr.record_size == 32 + hdr.digest_size and valid_leaf_records(
                    hdr.leaf_records
                ), hdr
            elif kind == "seal":
                doc_file.write_bytes(body)
                doc = load_seal(doc_file)
                try:
                    world["trust"].verify(doc.signed_bytes(), doc.signatures or {})
                except (TypeError, ValueError):
                    pass  # not canonicalisable: verify reports bad_signature for these
            elif kind == "proof":
                res = proof.check_proof(proof.parse_proof(body, "proof.json"), world["trust"])
                json.dumps(res.to_json(), allow_nan=True)
            elif kind == "note":
                note = checkpoint.parse_note(body, "checkpoint")
                reason = checkpoint.verify_note(note, [world["trust"]])
                assert reason is None or isinstance(reason, str)
            else:
                rot_file.write_bytes(body)
                sched = rotation.key_schedule(
                    world["ledger_id"], world["trust"], load_rotations(scratch)
                )
                assert isinstance(sched.problems, list)
        except LedgerError:
            pass

    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
