"""Inclusion proofs: one record under its signed seal, checkable offline (schemas/proof.schema.json).

A proof (docs/transparency.md, "Inclusion proofs") carries the record, its leaf block (the raw
fixed-size records of its Merkle leaf, hex), the RFC 9162 s2.1.3 audit path from that leaf to the
seal's merkle_root, the whole signed seal, and the ledger's rotation statements (so a verifier
holding only the original trust bundle can follow a key rotation). `check_proof` is pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from . import merkle
from .engine import record_dtype
from .errors import DiscrepancyError, LedgerFormatError, UsageError
from .keys import TrustBundle
from .ledger import choose_link, load_ledger, segment_files
from .rotation import key_schedule, load_rotations
from .seal import SEAL_FORMAT, file_sha256, load_seal, seal_signed_bytes, table_to_records

PROOF_FORMAT = "ledgertool-inclusion-proof-v1"
_FIELDS = ("seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux")


def record_to_json(rec) -> dict:
    out = {k: int(rec[k]) for k in _FIELDS}
    out["seq"] = str(out["seq"])
    out["ts_ns"] = str(out["ts_ns"])
    out["digest"] = bytes(rec["digest"]).hex()
    return out


def _segment_records(directory: Path, ledger: dict, link: str, doc: dict) -> bytes:
    path = directory / f"link={link}" / str(doc.get("parquet_file", ""))
    if not path.is_file():
        raise DiscrepancyError(f"{path}: Parquet file of segment {doc.get('segment')} is missing")
    if file_sha256(path) != doc.get("parquet_sha256"):
        raise DiscrepancyError(f"{path}: SHA-256 differs from its seal; run `ledgertool verify`")
    return table_to_records(pq.read_table(path), ledger["digest_size"])


def build_proof(directory: Path, *, seq: int | None = None, digest: str | None = None,
                link: str | None = None) -> dict:
    """The inclusion proof of the record with sequence number `seq` (or the first record whose
    digest is `digest`, hex) of `link` (default: the ledger's only link). UsageError for bad
    options, LedgerFormatError when no such record exists, DiscrepancyError when the segment does
    not match its seal (no proof is made for a tampered segment)."""
    directory = Path(directory)
    ledger = load_ledger(directory)
    if (seq is None) == (digest is None):
        raise UsageError("prove needs exactly one of --seq N or --digest HEX")
    link = choose_link(directory, link)
    want = None
    if digest is not None:
        try:
            want = bytes.fromhex(digest)
        except ValueError:
            raise UsageError(f"--digest {digest!r} is not hex") from None
        if len(want) != ledger["digest_size"]:
            raise UsageError(f"--digest is {len(want)} bytes; this ledger's digests are {ledger['digest_size']}")
    dtype = record_dtype(ledger["digest_size"])
    files = segment_files(directory, link)
    for index in sorted(i for i, f in files.items() if "seal.json" in f):
        doc = load_seal(files[index]["seal.json"])
        first, last = int(doc["first_seq"]), int(doc["last_seq"])
        if seq is not None and not first <= seq <= last:
            continue
        records = _segment_records(directory, ledger, link, doc)
        arr = np.frombuffer(records, dtype=dtype)
        hits = np.nonzero(arr["seq"] == seq)[0] if seq is not None else np.nonzero(arr["digest"] == want)[0]
        if not len(hits):
            if seq is not None:
                raise DiscrepancyError(f"segment {index}: seq {seq} is in the seal's range but not in its records")
            continue
        return _proof_for(directory, ledger, link, doc, records, int(hits[0]))
    what = f"seq {seq}" if seq is not None else f"digest {digest}"
    raise LedgerFormatError(f"{directory}: link {link} has no sealed record with {what}")


def _proof_for(directory: Path, ledger: dict, link: str, doc: dict, records: bytes, k: int) -> dict:
    rsize, leaf = ledger["record_size"], ledger["leaf_records"]
    leaves = merkle.records_leaf_hashes(records, rsize, leaf)
    if merkle.root_from_leaf_hashes(leaves).hex() != doc.get("merkle_root"):
        raise DiscrepancyError(f"segment {doc.get('segment')}: records do not match the seal's Merkle root")
    li = k // leaf
    block = records[li * leaf * rsize:(li + 1) * leaf * rsize]
    rec = np.frombuffer(records, dtype=record_dtype(ledger["digest_size"]))[k]
    return {
        "format": PROOF_FORMAT,
        "ledger_id": ledger["ledger_id"],
        "link": link,
        "segment": doc["segment"],
        "record_index": k,
        "record": record_to_json(rec),
        "leaf_index": li,
        "tree_size": len(leaves),
        "leaf_block": {"first_record_index": li * leaf, "records": len(block) // rsize, "hex": block.hex()},
        "audit_path": [h.hex() for h in merkle.inclusion_proof(li, leaves)],
        "seal": doc,
        "rotations": load_rotations(directory),
    }


@dataclass
class ProofCheck:
    ok: bool
    reason: str | None
    proof: dict

    def to_json(self) -> dict:
        p = self.proof
        return {"ok": self.ok, "reason": self.reason, "ledger_id": p.get("ledger_id"), "link": p.get("link"),
                "segment": p.get("segment"), "record_index": p.get("record_index"), "record": p.get("record")}


def load_proof(path: Path) -> dict:
    """Read a proof file; LedgerFormatError (exit 2) when it is not one."""
    try:
        doc = json.loads(Path(path).read_bytes())
    except OSError as e:
        raise LedgerFormatError(f"{path}: cannot read proof ({e.strerror or e})") from None
    except ValueError as e:
        raise LedgerFormatError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != PROOF_FORMAT:
        raise LedgerFormatError(f"{path}: not a {PROOF_FORMAT} document")
    need = {"ledger_id": str, "link": str, "segment": int, "record_index": int, "record": dict,
            "leaf_index": int, "tree_size": int, "leaf_block": dict, "audit_path": list, "seal": dict}
    for key, typ in need.items():
        if not isinstance(doc.get(key), typ) or isinstance(doc.get(key), bool):
            raise LedgerFormatError(f"{path}: field {key!r} missing or not {typ.__name__}")
    if doc["seal"].get("format") != SEAL_FORMAT:
        raise LedgerFormatError(f"{path}: embedded seal is not a {SEAL_FORMAT} document")
    return doc


def check_proof(doc: dict, trust: TrustBundle) -> ProofCheck:
    """Verify a parsed proof offline. Each failed step gives ok False and the reason."""
    def fail(reason: str) -> ProofCheck:
        return ProofCheck(False, reason, doc)

    seal = doc["seal"]
    # 1. the seal is this ledger's, this link's, this segment's, and signed by the key the
    #    rotation schedule assigns to it
    if (seal.get("ledger_id"), seal.get("link"), seal.get("segment")) != (doc["ledger_id"], doc["link"], doc["segment"]):
        return fail("the embedded seal is for another ledger, link or segment")
    rotations = doc.get("rotations") or []
    if not isinstance(rotations, list):
        return fail("rotations is not a list")
    sched = key_schedule(doc["ledger_id"], trust, rotations)
    if sched.problems:
        return fail(sched.problems[0])
    try:
        problems = sched.bundle_for(doc["link"], doc["segment"]).verify(seal_signed_bytes(seal),
                                                                        seal.get("signatures") or {})
    except (TypeError, ValueError) as e:
        problems = [f"seal cannot be canonicalised ({e})"]
    if problems:
        return fail(f"seal signature: {problems[0]}")
    # 2. the leaf block and the record
    try:
        rsize, leaf, count = int(seal["record_size"]), int(seal["leaf_records"]), int(seal["records"])
        first_seq = int(seal["first_seq"])
        root = bytes.fromhex(seal["merkle_root"])
        block = bytes.fromhex(doc["leaf_block"]["hex"])
        path = [bytes.fromhex(h) for h in doc["audit_path"]]
    except (KeyError, TypeError, ValueError) as e:
        return fail(f"malformed field in the proof or its seal: {e}")
    if rsize - 32 not in (16, 32) or leaf < 1:
        return fail("seal has an unsupported record or leaf size")
    k, li = doc["record_index"], doc["leaf_index"]
    if not 0 <= k < count:
        return fail(f"record index {k} outside the seal's {count} records")
    if li != k // leaf or doc["tree_size"] != -(-count // leaf):
        return fail("leaf index or tree size does not follow from the seal")
    want_len = rsize * min(leaf, count - li * leaf)
    if len(block) != want_len:
        return fail(f"leaf block is {len(block)} bytes, expected {want_len}")
    rec = np.frombuffer(block, dtype=record_dtype(rsize - 32))[k - li * leaf]
    if record_to_json(rec) != doc["record"]:
        return fail("the record differs from its entry in the leaf block")
    if int(rec["seq"]) != first_seq + k:
        return fail(f"record seq {int(rec['seq'])} is not at index {k} of a segment starting at {first_seq}")
    # 3. the audit path reaches the signed root
    if not merkle.verify_inclusion(merkle.leaf_hash(block), li, doc["tree_size"], path, root):
        return fail("audit path does not lead to the seal's Merkle root")
    return ProofCheck(True, None, doc)
