"""Proof documents, typed: an inclusion proof of one record (schemas/proof.schema.json) or of one
window record (schemas/window-proof.schema.json), each a frozen value built once by the strict
parser `proof_from_json` (or by `prove`), written back by its `to_json` in the one spelling a
proof has (docs/transparency.md, "Inclusion proofs").

Both kinds share what leads from a Merkle leaf to a signed root: the seal, the audit path from the
leaf to the seal's merkle_root, the ledger's rotation statements and, where a checkpoint covers
the segment, the signed checkpoint note and the audit path of the seal hash to its root. They
differ in the leaf: a record proof carries the record and its whole leaf block; a window proof
carries the window record (one window is one leaf) and its clear fields. Pure: nothing is read
here and nothing is checked but the shape; verify/proof.py checks what a proof claims.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..canonical import loads_strict
from ..digest.record import RECORD_FIXED
from ..digest.window import CLEAR, WindowRecord
from ..errors import LedgerFormatError
from ..seal.document import SEAL_FORMAT, SEAL_FORMAT_V2, SEAL_FORMATS, Seal

PROOF_FORMAT = "ledgertool-inclusion-proof-v2"  # v2 adds the checkpoint part (null when none)
PROOF_FORMAT_V1 = "ledgertool-inclusion-proof-v1"  # still checked: record, block, path, seal
WINDOW_PROOF_FORMAT = "ledgertool-window-proof-v1"

RECORD_FIELDS = ("seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux")
_RECORD_INTS = ("wire_len", "cap_len", "flags", "linktype", "aux")
WINDOW_FIELDS = ("index", "start_ns", "window_ns", "frames", "wire_bytes", "drops", "late")

# the ranges of the fields as stored (record_dtype, the window record's clear header): a value
# outside one is no record's, so the proof is refused as not a proof, not checked as a claim
_U64, _I64 = (0, 2**64 - 1), (-(2**63), 2**63 - 1)
_U32, _U16 = (0, 2**32 - 1), (0, 2**16 - 1)
_RECORD_RANGES = {
    "seq": _U64,
    "ts_ns": _I64,
    "wire_len": _U32,
    "cap_len": _U32,
    "flags": _U16,
    "linktype": _U16,
    "aux": _U32,
}
_WINDOW_RANGES = {
    "index": _I64,
    "start_ns": None,  # index * window_ns: checked against them, not a stored field
    "window_ns": (1, 2**63 - 1),
    "frames": _U64,
    "wire_bytes": _U64,
    "drops": _U64,
    "late": _U64,
}

#: how a proof's fields are named in errors: JSON's words, not Python's type names
_JSON_KIND = {int: "an integer", dict: "an object", list: "an array", str: "a string"}
_LOWER_HEX = re.compile(r"(?:[0-9a-f]{2})*")
_DECIMAL = re.compile(r"-?[0-9]+")
_CANONICAL_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")  # one spelling of each number
# integer members of a seal (schemas/seal.schema.json); the u64 ones are decimal strings
_SEAL_INTS = (
    "segment",
    "record_size",
    "leaf_records",
    "records",
    "frames",
    "drops_declared",
    "parquet_bytes",
    "torn_bytes_discarded",
)
_SEAL_INTS_V2 = tuple(k for k in _SEAL_INTS if k != "parquet_bytes")  # a v2 seal pins no file

_COMMON = {
    "format": str,
    "ledger_id": str,
    "link": str,
    "segment": int,
    "leaf_index": int,
    "tree_size": int,
    "audit_path": list,
    "seal": dict,
    "rotations": list,
}
_RECORD_TOP = {**_COMMON, "record_index": int, "record": dict, "leaf_block": dict}
_WINDOW_TOP = {**_COMMON, "window": dict}


class ShapeError(ValueError):
    """A proof document that is not shaped like one; the message names the field."""


@dataclass(frozen=True)
class ProofRecord:
    """One per-frame record as a proof states it (u64 / i64 as decimal strings in JSON)."""

    seq: int
    ts_ns: int
    wire_len: int
    cap_len: int
    flags: int
    linktype: int
    aux: int
    digest: bytes

    @classmethod
    def of_array(cls, rec) -> ProofRecord:
        """From a numpy record of `record_dtype`; the digest sliced from the raw record, so a
        digest ending in zero bytes keeps them."""
        return cls(*(int(rec[k]) for k in RECORD_FIELDS), digest=rec.tobytes()[RECORD_FIXED:])

    def to_json(self) -> dict:
        out: dict = {k: getattr(self, k) for k in RECORD_FIELDS}
        out["seq"], out["ts_ns"] = str(self.seq), str(self.ts_ns)
        out["digest"] = self.digest.hex()
        return out


@dataclass(frozen=True)
class LeafBlock:
    """The raw fixed-size records of the proved record's Merkle leaf."""

    first_record_index: int
    records: int
    data: bytes

    def to_json(self) -> dict:
        return {
            "first_record_index": self.first_record_index,
            "records": self.records,
            "hex": self.data.hex(),
        }


@dataclass(frozen=True)
class CheckpointPart:
    """The signed checkpoint note (its text, parsed when checked) and the audit path of the seal
    hash in the link's tree of seals up to the note's root."""

    note: str
    leaf_index: int
    tree_size: int
    audit_path: tuple[bytes, ...]

    def to_json(self) -> dict:
        return {
            "note": self.note,
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "audit_path": [h.hex() for h in self.audit_path],
        }


@dataclass(frozen=True, kw_only=True)
class Proof:
    """What every proof holds: the leaf's place in the seal's tree, the path to the seal's root,
    the seal, the rotation statements (mappings, read by seal.rotation.key_schedule) and the
    checkpoint part (None where none covers the segment, or in a -v1 record proof)."""

    format: str
    ledger_id: str
    link: str
    segment: int
    leaf_index: int
    tree_size: int
    audit_path: tuple[bytes, ...]
    seal: Seal
    rotations: tuple[Mapping, ...]
    checkpoint: CheckpointPart | None = None

    def _head(self) -> dict:
        return {"format": self.format, "ledger_id": self.ledger_id, "link": self.link}

    def _tail(self) -> dict:
        out = {
            "audit_path": [h.hex() for h in self.audit_path],
            "seal": self.seal.to_json(),
            "rotations": [dict(r) for r in self.rotations],
        }
        if self.format != PROOF_FORMAT_V1:
            out["checkpoint"] = None if self.checkpoint is None else self.checkpoint.to_json()
        return out

    def to_bytes(self) -> bytes:
        """The proof file's bytes (`prove --out`)."""
        return (json.dumps(self.to_json(), indent=1) + "\n").encode()


@dataclass(frozen=True, kw_only=True)
class InclusionProof(Proof):
    """A proof of one per-frame record: the record, its leaf block and the block's leaf hash
    construction (None: ledger.json's default, sha256, which the document leaves out)."""

    record_index: int
    record: ProofRecord
    leaf_block: LeafBlock
    leaf_hash: str | None = None

    def to_json(self) -> dict:
        return {
            **self._head(),
            "segment": self.segment,
            "record_index": self.record_index,
            "record": self.record.to_json(),
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "leaf_block": self.leaf_block.to_json(),
            **({"leaf_hash": self.leaf_hash} if self.leaf_hash is not None else {}),
            **self._tail(),
        }


@dataclass(frozen=True, kw_only=True)
class ProvenWindow:
    """The window record a window proof proves (`record`, its bytes as stored: the Merkle leaf)
    and its clear fields as the proof states them (u64 as decimal strings in JSON)."""

    index: int
    start_ns: int
    window_ns: int
    frames: int
    wire_bytes: int
    drops: int
    late: int
    record: bytes

    @classmethod
    def of(cls, w: WindowRecord) -> ProvenWindow:
        return cls(
            index=w.index,
            start_ns=w.start_ns,
            window_ns=w.window_ns,
            frames=w.frames,
            wire_bytes=w.wire_bytes,
            drops=w.drops,
            late=w.late,
            record=w.serialize(),
        )

    def to_json(self) -> dict:
        return {
            **{k: str(getattr(self, k)) for k in WINDOW_FIELDS},
            "record": self.record.hex(),
        }


@dataclass(frozen=True, kw_only=True)
class WindowProof(Proof):
    """A proof of one window record of a link's window log (`link` is the log, 'windows=NAME')."""

    window: ProvenWindow

    def to_json(self) -> dict:
        return {
            **self._head(),
            "segment": self.segment,
            "window": self.window.to_json(),
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            **self._tail(),
        }


def parse_proof(data: bytes, where: str = "proof") -> InclusionProof | WindowProof:
    """Parse a proof document; LedgerFormatError naming `where` and the field when it is not strict
    JSON (`canonical.loads_strict`: no duplicate members, integers only), not a proof of a kind and
    version ledgertool knows, misses a field, has one its version does not know (an unknown field
    is refused, not ignored: a proof means exactly what it says) or has a field of the wrong JSON
    type (true / false are not integers) or spelling (hex is lowercase)."""
    try:
        return proof_from_json(loads_strict(data, where))
    except ShapeError as e:
        raise LedgerFormatError(f"{where}: {e}") from None


def proof_shape_problem(doc: object) -> str | None:
    """The first way `doc` is not shaped like a proof, or None."""
    try:
        proof_from_json(doc)
    except ShapeError as e:
        return str(e)
    return None


def proof_from_json(doc: object) -> InclusionProof | WindowProof:
    """The typed proof of a parsed JSON value; ShapeError naming the first field that is not a
    proof's. Every integer must be a JSON integer (not true/false, not 1.0), at any depth."""
    kinds = (PROOF_FORMAT, PROOF_FORMAT_V1, WINDOW_PROOF_FORMAT)
    if not isinstance(doc, dict) or doc.get("format") not in kinds:
        raise ShapeError(f"not a {PROOF_FORMAT} (or -v1) or {WINDOW_PROOF_FORMAT} document")
    fmt = doc["format"]
    need = _WINDOW_TOP if fmt == WINDOW_PROOF_FORMAT else _RECORD_TOP
    known = set(need) | {"checkpoint"} if fmt != PROOF_FORMAT_V1 else set(need)
    known |= {"leaf_hash"} if need is _RECORD_TOP else set()
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ShapeError(f"unknown field {unknown[0]!r}")
    for key, typ in need.items():
        if not (_is_int(doc.get(key)) if typ is int else isinstance(doc.get(key), typ)):
            raise ShapeError(f"field {key!r} missing or not {_JSON_KIND.get(typ, typ.__name__)}")
    if fmt != PROOF_FORMAT_V1 and "checkpoint" not in doc:
        raise ShapeError("field 'checkpoint' missing (null when no checkpoint covers the segment)")
    common = dict(
        format=fmt,
        ledger_id=doc["ledger_id"],
        link=doc["link"],
        segment=doc["segment"],
        leaf_index=doc["leaf_index"],
        tree_size=doc["tree_size"],
        audit_path=_hashes(doc["audit_path"], "audit_path"),
        seal=_seal(doc["seal"]),
        rotations=tuple(doc["rotations"]),
        checkpoint=_checkpoint(doc.get("checkpoint")),
    )
    if fmt == WINDOW_PROOF_FORMAT:
        return WindowProof(**common, window=_window(doc["window"]))
    leaf_hash = doc.get("leaf_hash")
    if "leaf_hash" in doc and not isinstance(leaf_hash, str):
        raise ShapeError("leaf_hash is not a string")
    return InclusionProof(
        **common,
        record_index=doc["record_index"],
        record=_record(doc["record"]),
        leaf_block=_leaf_block(doc["leaf_block"]),
        leaf_hash=leaf_hash,
    )


def _is_int(v: object) -> bool:
    """A JSON integer: Python's bool is an int subclass, and a float (1.0) compares equal to one."""
    return type(v) is int


def _hex(value: object, name: str) -> bytes:
    """Lowercase hex only: bytes.fromhex would also take upper case, and a proof has one
    spelling."""
    if not isinstance(value, str) or not _LOWER_HEX.fullmatch(value):
        raise ShapeError(f"{name} is not lowercase hex")
    return bytes.fromhex(value)


def _hashes(values: list, name: str) -> tuple[bytes, ...]:
    return tuple(_hex(h, f"{name}[{i}]") for i, h in enumerate(values))


def _decimal(value: object, name: str, bounds: tuple[int, int] | None = None) -> int:
    if not isinstance(value, str) or not _CANONICAL_DECIMAL.fullmatch(value):
        raise ShapeError(f"{name} is not a decimal string")
    return _in_range(int(value), name, bounds)


def _in_range(value: int, name: str, bounds: tuple[int, int] | None) -> int:
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        raise ShapeError(f"{name} {value} is outside {bounds[0]}..{bounds[1]}")
    return value


def _record(rec: dict) -> ProofRecord:
    if set(rec) != {*RECORD_FIELDS, "digest"}:
        raise ShapeError(f"record must have exactly {', '.join(RECORD_FIELDS)} and digest")
    for key in _RECORD_INTS:
        if not _is_int(rec[key]):
            raise ShapeError(f"record.{key} is not an integer")
    return ProofRecord(
        _decimal(rec["seq"], "record.seq", _RECORD_RANGES["seq"]),
        _decimal(rec["ts_ns"], "record.ts_ns", _RECORD_RANGES["ts_ns"]),
        *(_in_range(rec[k], f"record.{k}", _RECORD_RANGES[k]) for k in _RECORD_INTS),
        digest=_hex(rec["digest"], "record.digest"),
    )


def _leaf_block(block: dict) -> LeafBlock:
    if set(block) != {"first_record_index", "records", "hex"}:
        raise ShapeError("leaf_block must have exactly first_record_index, records and hex")
    for key in ("first_record_index", "records"):
        if not _is_int(block[key]):
            raise ShapeError(f"leaf_block.{key} is not an integer")
    return LeafBlock(
        block["first_record_index"], block["records"], _hex(block["hex"], "leaf_block.hex")
    )


def _window(win: dict) -> ProvenWindow:
    if set(win) != {*WINDOW_FIELDS, "record"}:
        raise ShapeError(f"window must have exactly {', '.join(WINDOW_FIELDS)} and record")
    values = {k: _decimal(win[k], f"window.{k}", _WINDOW_RANGES[k]) for k in WINDOW_FIELDS}
    record = _hex(win["record"], "window.record")
    if len(record) < CLEAR:
        raise ShapeError("window.record is shorter than a window record")
    return ProvenWindow(**values, record=record)


def _checkpoint(cp: object) -> CheckpointPart | None:
    if cp is None:
        return None
    if not isinstance(cp, dict) or set(cp) != {"note", "leaf_index", "tree_size", "audit_path"}:
        raise ShapeError(
            "checkpoint must be null or have exactly note, leaf_index, tree_size and audit_path"
        )
    for key in ("leaf_index", "tree_size"):
        if not _is_int(cp[key]):
            raise ShapeError(f"checkpoint.{key} is not an integer")
    if not isinstance(cp["note"], str) or not isinstance(cp["audit_path"], list):
        raise ShapeError("checkpoint.note must be a string and checkpoint.audit_path a list")
    return CheckpointPart(
        cp["note"],
        cp["leaf_index"],
        cp["tree_size"],
        _hashes(cp["audit_path"], "checkpoint.audit_path"),
    )


def _seal(seal: dict) -> Seal:
    if seal.get("format") not in SEAL_FORMATS:
        raise ShapeError(f"embedded seal is not a {SEAL_FORMAT} or {SEAL_FORMAT_V2} document")
    for key in _SEAL_INTS_V2 if seal["format"] == SEAL_FORMAT_V2 else _SEAL_INTS:
        if not _is_int(seal.get(key)):
            raise ShapeError(f"seal.{key} missing or not an integer")
    for key in ("first_seq", "last_seq"):
        if not isinstance(seal.get(key), str) or not _DECIMAL.fullmatch(seal[key]):
            raise ShapeError(f"seal.{key} missing or not a decimal string")
    return Seal.of(seal)


def window_of(proof: WindowProof) -> WindowRecord:
    """The window record the proof carries, parsed (DataError when its bytes are not one)."""
    return WindowRecord.parse(proof.window.record, "the proof's window record")


__all__ = [
    "PROOF_FORMAT",
    "PROOF_FORMAT_V1",
    "WINDOW_PROOF_FORMAT",
    "CheckpointPart",
    "InclusionProof",
    "LeafBlock",
    "Proof",
    "ProofRecord",
    "ProvenWindow",
    "ShapeError",
    "WindowProof",
    "parse_proof",
    "proof_from_json",
    "proof_shape_problem",
]
