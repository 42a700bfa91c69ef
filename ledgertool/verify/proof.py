"""Inclusion proofs: one record under its signed seal, checkable offline (schemas/proof.schema.json).

A proof (docs/transparency.md, "Inclusion proofs") carries the record, its leaf block (the raw
fixed-size records of its Merkle leaf, hex), the RFC 9162 s2.1.3 audit path from that leaf to the
seal's merkle_root, the whole signed seal, and the ledger's rotation statements (so a verifier
holding only the original trust bundle can follow a key rotation). It also carries, where the link
has a checkpoint covering the segment, the signed checkpoint note and the RFC 9162 audit path of
the seal hash in the link's ledger-level tree: the proof then reaches a checkpoint root a verifier
or a witness holds, not only the seal. `check_proof` is pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import blake3
import numpy as np

from ..algorithms import algorithm_caveat
from ..canonical import loads_strict
from ..digest.engine import merkle_leaves, merkle_root
from ..digest.record import RECORD_FIXED, record_dtype
from ..errors import DiscrepancyError, LedgerFormatError, Setting, UsageError
from ..keyfiles import TrustBundle
from ..ledger.checkpoints import tree_of_seals
from ..ledger.header import LedgerHeader, load_ledger
from ..ledger.index import choose_link
from ..ledger.layout import SEAL
from ..ledger.reader import LedgerReader
from ..ledger.remote import ledger_reader
from ..ledger.rotations import load_rotations
from ..seal import merkle
from ..seal.checkpoint import SignedNote, origin_for, parse_note, verify_note
from ..seal.document import (
    SEAL_FORMAT,
    SEAL_FORMAT_V2,
    SEAL_FORMATS,
    Seal,
    parse_seal,
)
from ..seal.rotation import key_schedule
from ..urls import location
from .ledger import verified_segment

PROOF_FORMAT = (
    "ledgertool-inclusion-proof-v2"  # v2 adds the checkpoint part (null when none covers)
)
PROOF_FORMAT_V1 = (
    "ledgertool-inclusion-proof-v1"  # still checked: record, block, path, seal, rotations
)
_FIELDS = ("seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux")


def record_to_json(rec) -> dict:
    """One record (a numpy record of `record_dtype`) as the proof's `record` object: u64/i64 as
    decimal strings, the digest as lowercase hex of all its bytes (sliced from the raw record, so a
    digest ending in zero bytes keeps them)."""
    out = {k: int(rec[k]) for k in _FIELDS}
    out["seq"] = str(out["seq"])
    out["ts_ns"] = str(out["ts_ns"])
    out["digest"] = rec.tobytes()[RECORD_FIXED:].hex()
    return out


def build_proof(
    directory: Path,
    *,
    seq: int | None = None,
    digest: str | None = None,
    link: str | None = None,
    checkpoint: bytes | None = None,
    checkpoint_where: str = "checkpoint",
) -> dict:
    """The inclusion proof of the record with sequence number `seq` (or the first record whose
    digest is `digest`, hex) of `link` (default: the ledger's only link).

    `checkpoint` (a signed note's bytes, e.g. one the verifier holds) makes the proof chain to
    that checkpoint; without it the link's stored checkpoint is used when it covers the segment.
    UsageError for bad options or a given checkpoint that does not cover the record's segment,
    LedgerFormatError when no such record exists or a checkpoint does not parse or names another
    ledger or link, DiscrepancyError when the segment does not match its seal or the ledger does
    not extend the checkpoint (no proof is made from a tampered ledger)."""
    directory = location(directory)
    ledger = load_ledger(directory)
    if (seq is None) == (digest is None):
        raise UsageError(
            "prove needs exactly one of ", Setting("seq"), " N or ", Setting("digest"), " HEX"
        )
    link = choose_link(directory, link)
    reader = ledger_reader(directory)
    note = _checkpoint_note(reader, ledger, link, checkpoint, checkpoint_where)
    want = None
    if digest is not None:
        try:
            want = bytes.fromhex(digest)
        except ValueError:
            raise UsageError(Setting("digest"), f" {digest!r} is not hex") from None
        if len(want) != ledger.digest_size:
            raise UsageError(
                Setting("digest"),
                f" is {len(want)} bytes; this ledger's digests are {ledger.digest_size}",
            )
    dtype = record_dtype(ledger.digest_size)
    for index in reader.listing(link).sealed:
        seal = parse_seal(
            reader.read_seal_bytes(link, index), reader.segment_path(link, index, "seal.json")
        )
        try:
            first, last = int(seal.first_seq), int(seal.last_seq)
        except (TypeError, ValueError):
            raise DiscrepancyError(
                f"segment {index}: seal lacks its sequence range; run `ledgertool verify`"
            ) from None
        if seq is not None and not first <= seq <= last:
            continue
        records = verified_segment(reader, ledger, link, index).records
        arr = np.frombuffer(records, dtype=dtype)
        hits = (
            np.nonzero(arr["seq"] == seq)[0]
            if seq is not None
            else np.nonzero(arr["digest"] == np.void(want))[0]
        )
        if not len(hits):
            if seq is not None:
                raise DiscrepancyError(
                    f"segment {index}: seq {seq} is in the seal's range but not in its records"
                )
            continue
        proof = _proof_for(directory, ledger, link, seal, records, int(hits[0]))
        proof["checkpoint"] = _checkpoint_part(reader, link, index, note, checkpoint is not None)
        return proof
    what = f"seq {seq}" if seq is not None else f"digest {digest}"
    raise LedgerFormatError(f"{directory}: link {link} has no sealed record with {what}")


#: the leaf entry of a proof's block per ledger.json `leaf_hash` (leaf = SHA-256(0x00 || entry))
_LEAF_ENTRY = {"sha256": bytes, "blake3": lambda block: blake3.blake3(block).digest()}


def _proof_for(
    directory: Path, ledger: LedgerHeader, link: str, seal: Seal, records: bytes, k: int
) -> dict:
    rsize, leaf = ledger.record_size, ledger.leaf_records
    raw = merkle_leaves(records, rsize, leaf, ledger.leaf_hash)  # C, as sealing and verify do
    if merkle_root(raw).hex() != seal.merkle_root:
        raise DiscrepancyError(
            f"segment {seal.segment}: records do not match the seal's Merkle root"
        )
    leaves = [raw[i : i + 32] for i in range(0, len(raw), 32)]
    li = k // leaf
    block = records[li * leaf * rsize : (li + 1) * leaf * rsize]
    rec = np.frombuffer(records, dtype=record_dtype(ledger.digest_size))[k]
    return {
        "format": PROOF_FORMAT,
        "ledger_id": ledger.ledger_id,
        "link": link,
        "segment": seal.segment,
        "record_index": k,
        "record": record_to_json(rec),
        "leaf_index": li,
        "tree_size": len(leaves),
        "leaf_block": {
            "first_record_index": li * leaf,
            "records": len(block) // rsize,
            "hex": block.hex(),
        },
        **({"leaf_hash": ledger.leaf_hash} if ledger.leaf_hash != "sha256" else {}),
        "audit_path": [h.hex() for h in merkle.inclusion_proof(li, leaves)],
        "seal": seal.to_json(),
        "rotations": [r.to_json() for r in load_rotations(directory)],
    }


def _checkpoint_note(
    reader: LedgerReader, ledger: LedgerHeader, link: str, data: bytes | None, where: str
) -> tuple[SignedNote, str, str] | None:
    """The given checkpoint, else the link's stored one (None when it has none; read through the
    ledger reader: a link there is refused), with its text and the name to give it in messages."""
    if data is None:
        data = reader.read_checkpoint(link)
        if data is None:
            return None
        where = str(reader.checkpoint_path(link))
    note = parse_note(data, where)
    if note.checkpoint.origin != origin_for(ledger.ledger_id, link):
        raise LedgerFormatError(
            f"{where}: checkpoint is for {note.checkpoint.origin}, "
            f"not {origin_for(ledger.ledger_id, link)}"
        )
    return note, data.decode(), where


def _checkpoint_part(
    reader: LedgerReader,
    link: str,
    segment: int,
    found: tuple[SignedNote, str, str] | None,
    given: bool,
) -> dict | None:
    """The note and the audit path of the segment's seal hash up to the note's root (RFC 9162
    s2.1.3 over the link tree), or None when there is no checkpoint covering the segment."""
    if found is None:
        return None
    note, text, where = found
    cp = note.checkpoint
    if segment >= cp.size:
        if given:
            raise UsageError(
                f"{where}: checkpoint covers segments 0..{cp.size - 1} of link {link}; the record is "
                f"in segment {segment}: use a newer checkpoint"
            )
        return None
    seals = {i: reader.segment_path(link, i, SEAL) for i in reader.listing(link).sealed}
    tree = tree_of_seals(
        link, seals, lambda i: parse_seal(reader.read_seal_bytes(link, i), seals[i])
    )
    if len(tree.seal_hashes) < cp.size or tree.root(cp.size) != cp.root:
        raise DiscrepancyError(
            f"{where}: link {link} does not extend this checkpoint (size {cp.size}); "
            "verifying the ledger against this checkpoint names what differs"
        )
    leaves = [merkle.leaf_hash(bytes.fromhex(h)) for h in tree.seal_hashes[: cp.size]]
    return {
        "note": text,
        "leaf_index": segment,
        "tree_size": cp.size,
        "audit_path": [h.hex() for h in merkle.inclusion_proof(segment, leaves)],
    }


@dataclass
class ProofCheck:
    ok: bool
    reason: str | None
    proof: dict

    checkpoint: dict | None = None  # {"tree_size", "root_hash"} of the checkpoint the proof reached

    @property
    def warnings(self) -> list[str]:
        """Caveats on the verdict: the seal's algorithm's (aes-128-gmac: forgeable by whoever saw
        two tags)."""
        seal = self.proof.get("seal")
        caveat = algorithm_caveat(Seal.of(seal).algorithm) if isinstance(seal, dict) else None
        return [caveat] if caveat else []

    def to_json(self) -> dict:
        p = self.proof
        return {
            "ok": self.ok,
            "reason": self.reason,
            "ledger_id": p.get("ledger_id"),
            "link": p.get("link"),
            "segment": p.get("segment"),
            "record_index": p.get("record_index"),
            "record": p.get("record"),
            "checkpoint": self.checkpoint,
            "warnings": self.warnings,
        }


_LOWER_HEX = re.compile(r"(?:[0-9a-f]{2})*")
_TOP_KEYS = {
    "format",
    "ledger_id",
    "link",
    "segment",
    "record_index",
    "record",
    "leaf_index",
    "tree_size",
    "leaf_block",
    "audit_path",
    "seal",
    "rotations",
    "checkpoint",
    "leaf_hash",
}


def load_proof(path: Path) -> dict:
    """Read a proof file; LedgerFormatError (exit 2) when it is not one."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise LedgerFormatError(f"{path}: cannot read proof ({e.strerror or e})") from None
    return parse_proof(data, str(path))


def parse_proof(data: bytes, where: str = "proof") -> dict:
    """Parse a proof document; LedgerFormatError naming `where` when it is not strict JSON
    (`canonical.loads_strict`: no duplicate members, integers only), not a
    ledgertool-inclusion-proof-v2 (or -v1, which has no checkpoint part) document, misses a field,
    has one its version does not know (an unknown field is refused, not ignored: a proof means
    exactly what it says) or has a field of the wrong JSON type (true / false are not integers)."""
    doc = loads_strict(data, where)
    bad = proof_shape_problem(doc)
    if bad is not None:
        raise LedgerFormatError(f"{where}: {bad}")
    return doc


def _is_int(v: object) -> bool:
    """A JSON integer: Python's bool is an int subclass, and a float (1.0) compares equal to one."""
    return type(v) is int


_DECIMAL = re.compile(r"-?[0-9]+")
_RECORD_INTS = ("wire_len", "cap_len", "flags", "linktype", "aux")
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


def _seal_shape_problem(seal: dict) -> str | None:
    if seal.get("format") not in SEAL_FORMATS:
        return f"embedded seal is not a {SEAL_FORMAT} or {SEAL_FORMAT_V2} document"
    for key in _SEAL_INTS_V2 if seal["format"] == SEAL_FORMAT_V2 else _SEAL_INTS:
        if not _is_int(seal.get(key)):
            return f"seal.{key} missing or not an integer"
    for key in ("first_seq", "last_seq"):
        if not isinstance(seal.get(key), str) or not _DECIMAL.fullmatch(seal[key]):
            return f"seal.{key} missing or not a decimal string"
    return None


def proof_shape_problem(doc: object) -> str | None:
    """The first way `doc` is not shaped like a proof (schemas/proof.schema.json), or None. Every
    integer must be a JSON integer (not true/false, not 1.0), at any depth."""
    if not isinstance(doc, dict) or doc.get("format") not in (PROOF_FORMAT, PROOF_FORMAT_V1):
        return f"not a {PROOF_FORMAT} (or -v1) document"
    v1 = doc["format"] == PROOF_FORMAT_V1
    unknown = sorted(set(doc) - (_TOP_KEYS - {"checkpoint"} if v1 else _TOP_KEYS))
    if unknown:
        return f"unknown field {unknown[0]!r}"
    need = {
        "ledger_id": str,
        "link": str,
        "segment": int,
        "record_index": int,
        "record": dict,
        "leaf_index": int,
        "tree_size": int,
        "leaf_block": dict,
        "audit_path": list,
        "seal": dict,
        "rotations": list,
    }
    for key, typ in need.items():
        if not (_is_int(doc.get(key)) if typ is int else isinstance(doc.get(key), typ)):
            return f"field {key!r} missing or not {'an integer' if typ is int else typ.__name__}"
    block = doc["leaf_block"]
    if set(block) != {"first_record_index", "records", "hex"}:
        return "leaf_block must have exactly first_record_index, records and hex"
    for key in ("first_record_index", "records"):
        if not _is_int(block[key]):
            return f"leaf_block.{key} is not an integer"
    rec = doc["record"]
    if set(rec) != {*_FIELDS, "digest"}:
        return f"record must have exactly {', '.join(_FIELDS)} and digest"
    for key in _RECORD_INTS:
        if not _is_int(rec[key]):
            return f"record.{key} is not an integer"
    for key in ("seq", "ts_ns"):
        if not isinstance(rec[key], str) or not _DECIMAL.fullmatch(rec[key]):
            return f"record.{key} is not a decimal string"
    if "checkpoint" not in doc and not v1:
        return "field 'checkpoint' missing (null when no checkpoint covers the segment)"
    cp = doc.get("checkpoint")
    if cp is not None:
        if not isinstance(cp, dict) or set(cp) != {"note", "leaf_index", "tree_size", "audit_path"}:
            return (
                "checkpoint must be null or have exactly note, leaf_index, tree_size and audit_path"
            )
        for key in ("leaf_index", "tree_size"):
            if not _is_int(cp[key]):
                return f"checkpoint.{key} is not an integer"
        if not isinstance(cp["note"], str) or not isinstance(cp["audit_path"], list):
            return "checkpoint.note must be a string and checkpoint.audit_path a list"
    # hex is lowercase everywhere (as the schema says): bytes.fromhex would also take upper case, and a
    # proof has one spelling
    hexes = [("leaf_block.hex", block["hex"]), ("record.digest", rec["digest"])]
    hexes += [(f"audit_path[{i}]", h) for i, h in enumerate(doc["audit_path"])]
    if cp is not None:
        hexes += [(f"checkpoint.audit_path[{i}]", h) for i, h in enumerate(cp["audit_path"])]
    for name, h in hexes:
        if not isinstance(h, str) or not _LOWER_HEX.fullmatch(h):
            return f"{name} is not lowercase hex"
    return _seal_shape_problem(doc["seal"])


def check_proof(doc: dict, trust: TrustBundle, checkpoint: SignedNote | None = None) -> ProofCheck:
    """Verify a parsed proof offline. Each failed step gives ok False and the reason.

    When the proof carries a checkpoint, it must be signed by a key of the rotation schedule and
    the seal hash must lead to its root. `checkpoint` (the verifier's own, parsed) additionally
    requires the proof to reach exactly that checkpoint (same tree size and root)."""

    def fail(reason: str) -> ProofCheck:
        return ProofCheck(False, reason, doc)

    bad = proof_shape_problem(doc)  # parse_proof refuses these; a dict from elsewhere may have them
    if bad is not None:
        return fail(bad)
    seal = Seal.of(doc["seal"])
    # 1. the seal is this ledger's, this link's, this segment's, and signed by the key the
    #    rotation schedule assigns to it
    if (seal.ledger_id, seal.link, seal.segment) != (doc["ledger_id"], doc["link"], doc["segment"]):
        return fail("the embedded seal is for another ledger, link or segment")
    rotations = doc.get("rotations") or []
    if not isinstance(rotations, list):
        return fail("rotations is not a list")
    sched = key_schedule(doc["ledger_id"], trust, rotations)
    if sched.problems:
        return fail(sched.problems[0])
    try:
        problems = sched.bundle_for(doc["link"], doc["segment"]).verify(
            seal.signed_bytes(), seal.signatures or {}
        )
    except (TypeError, ValueError) as e:
        problems = [f"seal cannot be canonicalised ({e})"]
    if problems:
        return fail(f"seal signature: {problems[0]}")
    # the digest key the seal names must be the one the rotation chain assigns to its segment
    # (known only when the chain has a digest-key statement: a proof carries no ledger header)
    want_dk = sched.digest_key_id_for(doc["link"], doc["segment"])
    if want_dk is not None and seal.digest_key_id != want_dk:
        return fail(
            f"seal names digest key {seal.digest_key_id}; the rotation chain assigns {want_dk} "
            f"to segment {doc['segment']}"
        )
    # 2. the leaf block and the record
    try:
        rsize, leaf, count = int(seal.record_size), int(seal.leaf_records), int(seal.records)
        first_seq = int(seal.first_seq)
        root = bytes.fromhex(seal.merkle_root)
        block = bytes.fromhex(doc["leaf_block"]["hex"])
        path = [bytes.fromhex(h) for h in doc["audit_path"]]
    except (KeyError, TypeError, ValueError) as e:
        return fail(f"malformed field in the proof or its seal: {e}")
    if rsize - RECORD_FIXED not in (16, 32) or leaf < 1:
        return fail("seal has an unsupported record or leaf size")
    k, li = doc["record_index"], doc["leaf_index"]
    if not 0 <= k < count:
        return fail(f"record index {k} outside the seal's {count} records")
    if li != k // leaf or doc["tree_size"] != -(-count // leaf):
        return fail("leaf index or tree size does not follow from the seal")
    want_len = rsize * min(leaf, count - li * leaf)
    if len(block) != want_len:
        return fail(f"leaf block is {len(block)} bytes, expected {want_len}")
    if (
        doc["leaf_block"]["first_record_index"] != li * leaf
        or doc["leaf_block"]["records"] != want_len // rsize
    ):
        return fail("leaf_block first_record_index or records does not follow from the leaf index")
    rec = np.frombuffer(block, dtype=record_dtype(rsize - RECORD_FIXED))[k - li * leaf]
    if record_to_json(rec) != doc["record"]:
        return fail("the record differs from its entry in the leaf block")
    if int(rec["seq"]) != first_seq + k:
        return fail(
            f"record seq {int(rec['seq'])} is not at index {k} of a segment starting at {first_seq}"
        )
    # 3. the audit path reaches the signed root
    # a "blake3" proof's leaf is over the block's 32-byte BLAKE3 entry; a block is never 32 bytes
    # (48 at least), so naming the other construction cannot make another block's leaf
    entry_of = _LEAF_ENTRY.get(doc.get("leaf_hash", "sha256"))
    if entry_of is None:
        return fail(f"leaf_hash {doc.get('leaf_hash')!r} is not sha256 or blake3")
    leaf = merkle.leaf_hash(entry_of(block))
    if not merkle.verify_inclusion(leaf, li, doc["tree_size"], path, root):
        return fail("audit path does not lead to the seal's Merkle root")
    # 4. the seal hash is in the link tree under a signed checkpoint
    part = doc.get("checkpoint")
    if part is None:
        if checkpoint is not None:
            return fail(
                "the proof carries no checkpoint; ask for one made with `prove --checkpoint`"
            )
        return ProofCheck(True, None, doc)
    try:
        note = parse_note(part["note"].encode(), "the proof's checkpoint")
        cpath = [bytes.fromhex(h) for h in part["audit_path"]]
        cindex, csize = part["leaf_index"], part["tree_size"]
    except LedgerFormatError as e:
        return fail(str(e))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return fail(f"malformed checkpoint field in the proof: {e}")
    cp = note.checkpoint
    if cp.origin != origin_for(doc["ledger_id"], doc["link"]):
        return fail(f"the proof's checkpoint is for {cp.origin}")
    bad = verify_note(note, *sched.checkpoint_signers(cp.link, cp.size))
    if bad is not None:
        return fail(f"the proof's checkpoint: {bad}")
    if cindex != doc["segment"] or csize != cp.size:
        return fail(
            "checkpoint leaf index or tree size does not match the segment and the checkpoint"
        )
    try:
        leaf = merkle.leaf_hash(bytes.fromhex(seal.hash()))
    except (TypeError, ValueError) as e:
        return fail(f"seal cannot be canonicalised ({e})")
    if not merkle.verify_inclusion(leaf, cindex, csize, cpath, cp.root):
        return fail(
            "checkpoint audit path does not lead from the seal hash to the checkpoint's root"
        )
    if checkpoint is not None:
        mine = checkpoint.checkpoint
        if mine.origin != cp.origin:
            return fail(f"the given checkpoint is for {mine.origin}, the proof for {cp.origin}")
        if doc["segment"] >= mine.size:
            return fail(
                f"the record's segment {doc['segment']} was sealed after the given checkpoint (tree size "
                f"{mine.size}): it cannot be proved against it; use a newer checkpoint"
            )
        if mine.size != cp.size:
            return fail(
                f"the proof reaches the checkpoint of tree size {cp.size}, not the given one of tree size "
                f"{mine.size}; ask for a proof made with `prove --checkpoint` and that checkpoint"
            )
        if mine.root != cp.root:
            return fail(
                f"the proof's checkpoint and the given one have the same tree size {cp.size} but different "
                "roots: two histories of this link exist (a fork)"
            )
    return ProofCheck(True, None, doc, {"tree_size": cp.size, "root_hash": cp.root.hex()})
