"""Inclusion proofs: one record, or one window record, under its signed seal, checkable offline
(schemas/proof.schema.json, schemas/window-proof.schema.json; the typed documents are
verify/proofdoc.py's).

A record proof (docs/transparency.md, "Inclusion proofs") carries the record, its leaf block (the
raw fixed-size records of its Merkle leaf, hex), the RFC 9162 s2.1.3 audit path from that leaf to
the seal's merkle_root, the whole signed seal, and the ledger's rotation statements (so a verifier
holding only the original trust bundle can follow a key rotation). A window proof carries one
window record of a link's window log in place of the record and its block (one window is one
leaf). Both carry, where the link (or log) has a checkpoint covering the segment, the signed
checkpoint note and the RFC 9162 audit path of the seal hash in the link's ledger-level tree: the
proof then reaches a checkpoint root a verifier or a witness holds, not only the seal.
`check_proof` is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import blake3
import numpy as np

from ..algorithms import algorithm_caveat
from ..digest.engine import merkle_leaves, merkle_root
from ..digest.record import RECORD_FIXED, record_dtype
from ..digest.window import WindowRecord
from ..errors import DataError, DiscrepancyError, LedgerFormatError, Setting, UsageError
from ..keyfiles import TrustBundle
from ..ledger.checkpoints import tree_of_seals
from ..ledger.header import LedgerHeader, load_ledger
from ..ledger.index import choose_link
from ..ledger.layout import SEAL, window_log, window_log_link
from ..ledger.reader import LedgerReader
from ..ledger.remote import ledger_reader
from ..ledger.rotations import load_rotations
from ..seal import merkle
from ..seal.checkpoint import Checkpoint, SignedNote, origin_for, parse_note, verify_note
from ..seal.document import Seal, parse_seal
from ..seal.rotation import Schedule, key_schedule
from ..urls import location
from .ledger import verified_segment
from .proofdoc import (
    PROOF_FORMAT,
    PROOF_FORMAT_V1,
    WINDOW_PROOF_FORMAT,
    CheckpointPart,
    InclusionProof,
    LeafBlock,
    Proof,
    ProofRecord,
    ProvenWindow,
    ShapeError,
    WindowProof,
    parse_proof,
    proof_from_json,
    proof_shape_problem,
)
from .windows import verify_window_log

__all__ = [
    "PROOF_FORMAT",
    "PROOF_FORMAT_V1",
    "WINDOW_PROOF_FORMAT",
    "InclusionProof",
    "ProofCheck",
    "WindowProof",
    "build_proof",
    "build_window_proof",
    "check_proof",
    "load_proof",
    "parse_proof",
    "proof_shape_problem",
    "record_to_json",
]


def record_to_json(rec) -> dict:
    """One record (a numpy record of `record_dtype`) as the proof's `record` object: u64/i64 as
    decimal strings, the digest as lowercase hex of all its bytes (sliced from the raw record, so a
    digest ending in zero bytes keeps them)."""
    return ProofRecord.of_array(rec).to_json()


def build_proof(
    directory: Path,
    *,
    seq: int | None = None,
    digest: str | None = None,
    link: str | None = None,
    checkpoint: bytes | None = None,
    checkpoint_where: str = "checkpoint",
) -> InclusionProof:
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
    want = None if digest is None else _digest_bytes(digest, ledger.digest_size)
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
        part = _checkpoint_part(reader, link, index, note, checkpoint is not None)
        return _proof_for(directory, ledger, link, seal, records, int(hits[0]), part)
    what = f"seq {seq}" if seq is not None else f"digest {digest}"
    raise LedgerFormatError(f"{directory}: link {link} has no sealed record with {what}")


def _digest_bytes(digest: str, size: int) -> bytes:
    try:
        want = bytes.fromhex(digest)
    except ValueError:
        raise UsageError(Setting("digest"), f" {digest!r} is not hex") from None
    if len(want) != size:
        raise UsageError(
            Setting("digest"), f" is {len(want)} bytes; this ledger's digests are {size}"
        )
    return want


#: the leaf entry of a proof's block per ledger.json `leaf_hash` (leaf = SHA-256(0x00 || entry))
_LEAF_ENTRY = {"sha256": bytes, "blake3": lambda block: blake3.blake3(block).digest()}


def _proof_for(
    directory: Path,
    ledger: LedgerHeader,
    link: str,
    seal: Seal,
    records: bytes,
    k: int,
    checkpoint: CheckpointPart | None,
) -> InclusionProof:
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
    return InclusionProof(
        format=PROOF_FORMAT,
        ledger_id=ledger.ledger_id,
        link=link,
        segment=seal.segment,
        record_index=k,
        record=ProofRecord.of_array(rec),
        leaf_index=li,
        tree_size=len(leaves),
        leaf_block=LeafBlock(li * leaf, len(block) // rsize, block),
        leaf_hash=ledger.leaf_hash if ledger.leaf_hash != "sha256" else None,
        audit_path=tuple(merkle.inclusion_proof(li, leaves)),
        seal=seal,
        rotations=tuple(r.to_json() for r in load_rotations(directory)),
        checkpoint=checkpoint,
    )


def build_window_proof(
    directory: Path,
    *,
    at_ns: int,
    link: str | None = None,
    checkpoint: bytes | None = None,
    checkpoint_where: str = "checkpoint",
) -> WindowProof:
    """The proof of the window record of `link`'s window log (default: the ledger's only one)
    whose window holds the instant `at_ns` (ns since the epoch; a window's start names it), under
    its seal and the log's checkpoint (or `checkpoint`, as for build_proof).

    UsageError for a ledger without a window tier or an unknown link; LedgerFormatError when no
    sealed window holds `at_ns`; DiscrepancyError when the window log does not verify (its
    segments against their seals, the chain) where the window would be: no proof is made from a
    tampered log."""
    directory = location(directory)
    ledger = load_ledger(directory)
    if ledger.window is None:
        raise UsageError(
            f"{directory}: the ledger has no window tier (ledger.json `tiers` has no windows); "
            "prove a record with ",
            Setting("seq"),
        )
    reader = ledger_reader(directory)
    log = _window_log(reader, directory, link)
    note = _checkpoint_note(reader, ledger, log, checkpoint, checkpoint_where)
    want = at_ns // ledger.window.window_ns
    findings: list = []
    summary, _ = verify_window_log(reader, ledger, log, None, findings.append)
    for v in summary.verified:
        hit = next((k for k, w in enumerate(v.windows) if w.index == want), None)
        if hit is None:
            continue
        records = [w.serialize() for w in v.windows]
        leaves = [merkle.leaf_hash(r) for r in records]
        return WindowProof(
            format=WINDOW_PROOF_FORMAT,
            ledger_id=ledger.ledger_id,
            link=log,
            segment=v.index,
            window=ProvenWindow.of(v.windows[hit]),
            leaf_index=hit,
            tree_size=len(leaves),
            audit_path=tuple(merkle.inclusion_proof(hit, leaves)),
            seal=v.seal,
            rotations=tuple(r.to_json() for r in load_rotations(directory)),
            checkpoint=_checkpoint_part(reader, log, v.index, note, checkpoint is not None),
        )
    bad = [f for f in findings if not f.kind.is_warning]
    if bad:
        raise DiscrepancyError(
            f"{log}: no verified window {want} (window start {want * ledger.window.window_ns}); "
            f"the log does not verify: {bad[0].kind.value}: {bad[0].detail}; "
            "run `ledgertool verify`"
        )
    raise LedgerFormatError(
        f"{directory}: window log {log} has no sealed window holding {at_ns} "
        f"(window {want}, starting at {want * ledger.window.window_ns} ns)"
    )


def _window_log(reader: LedgerReader, directory: Path, link: str | None) -> str:
    """'windows=NAME' of `link`, or of the ledger's only window log."""
    logs = sorted(reader.window_logs)
    if link is None:
        if len(logs) != 1:
            names = ", ".join(window_log_link(g) or g for g in logs) or "none"
            raise UsageError(
                f"{directory}: ledger has window logs of links {names}; choose one with ",
                Setting("link"),
            )
        return logs[0]
    log = window_log(link)
    if log not in logs:
        raise UsageError(f"{directory}: link {link!r} has no window log")
    return log


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
) -> CheckpointPart | None:
    """The note and the audit path of the segment's seal hash up to the note's root (RFC 9162
    s2.1.3 over the link tree), or None when there is no checkpoint covering the segment."""
    if found is None:
        return None
    note, text, where = found
    cp = note.checkpoint
    if segment >= cp.size:
        if given:
            raise UsageError(
                f"{where}: checkpoint covers segments 0..{cp.size - 1} of link {link}; the record "
                f"is in segment {segment}: use a newer checkpoint"
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
    return CheckpointPart(text, segment, cp.size, tuple(merkle.inclusion_proof(segment, leaves)))


@dataclass
class ProofCheck:
    """check_proof's verdict on `proof` (None when what was given was not shaped like a proof)."""

    ok: bool
    reason: str | None
    proof: Proof | None

    checkpoint: Checkpoint | None = None  # the checkpoint the proof reached

    @property
    def warnings(self) -> list[str]:
        """Caveats on the verdict: the seal's algorithm's (aes-128-gmac: forgeable by whoever saw
        two tags)."""
        caveat = algorithm_caveat(self.proof.seal.algorithm) if self.proof else None
        return [caveat] if caveat else []

    def to_json(self) -> dict:
        p = self.proof
        record = p if isinstance(p, InclusionProof) else None
        out = {
            "ok": self.ok,
            "reason": self.reason,
            "ledger_id": p and p.ledger_id,
            "link": p and p.link,
            "segment": p and p.segment,
            "record_index": record and record.record_index,
            "record": record and record.record.to_json(),
            "checkpoint": _reached_json(self.checkpoint),
            "warnings": self.warnings,
        }
        if isinstance(p, WindowProof):  # its clear fields; the record's bytes are in the proof
            out["window"] = {k: v for k, v in p.window.to_json().items() if k != "record"}
        return out


def _reached_json(cp: Checkpoint | None) -> dict | None:
    """The checkpoint a proof reached, as the report says it: its tree size and root hash."""
    return None if cp is None else {"tree_size": cp.size, "root_hash": cp.root.hex()}


def load_proof(path: Path) -> InclusionProof | WindowProof:
    """Read a proof file; LedgerFormatError (exit 2) when it is not one."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise LedgerFormatError(f"{path}: cannot read proof ({e.strerror or e})") from None
    return parse_proof(data, str(path))


class _Invalid(Exception):
    """A step of check_proof failed; the message is the reason."""


def check_proof(
    proof: Proof | Mapping, trust: TrustBundle, checkpoint: SignedNote | None = None
) -> ProofCheck:
    """Verify a proof offline (a parsed one, or a JSON mapping, which goes through the strict
    parser first). Each failed step gives ok False and the reason.

    When the proof carries a checkpoint, it must be signed by a key of the rotation schedule and
    the seal hash must lead to its root. `checkpoint` (the verifier's own, parsed) additionally
    requires the proof to reach exactly that checkpoint (same tree size and root)."""
    if not isinstance(proof, Proof):
        try:
            proof = proof_from_json(proof)
        except ShapeError as e:
            return ProofCheck(False, str(e), None)
    try:
        sched = _check_seal(proof, trust)
        if isinstance(proof, WindowProof):
            leaf = _window_leaf(proof)
        else:
            leaf = _record_leaf(proof)
        # the audit path reaches the signed root
        try:
            root = bytes.fromhex(proof.seal.merkle_root)
        except (TypeError, ValueError) as e:
            raise _Invalid(f"malformed field in the proof or its seal: {e}") from None
        if not merkle.verify_inclusion(
            leaf, proof.leaf_index, proof.tree_size, list(proof.audit_path), root
        ):
            raise _Invalid("audit path does not lead to the seal's Merkle root")
        reached = _check_checkpoint(proof, sched, checkpoint)
    except _Invalid as e:
        return ProofCheck(False, str(e), proof)
    if reached is None and checkpoint is not None:
        why = "the proof carries no checkpoint; ask for one made with `prove --checkpoint`"
        return ProofCheck(False, why, proof)
    return ProofCheck(True, None, proof, reached)


def _check_seal(proof: Proof, trust: TrustBundle) -> Schedule:
    """Step 1: the seal is this ledger's, this link's, this segment's, and signed by the key the
    rotation schedule assigns to it; the key schedule the proof's rotations give."""
    seal = proof.seal
    if (seal.ledger_id, seal.link, seal.segment) != (proof.ledger_id, proof.link, proof.segment):
        raise _Invalid("the embedded seal is for another ledger, link or segment")
    sched = key_schedule(proof.ledger_id, trust, list(proof.rotations))
    if sched.problems:
        raise _Invalid(sched.problems[0])
    try:
        problems = sched.bundle_for(proof.link, proof.segment).verify(
            seal.signed_bytes(), seal.signatures or {}
        )
    except (TypeError, ValueError) as e:
        problems = [f"seal cannot be canonicalised ({e})"]
    if problems:
        raise _Invalid(f"seal signature: {problems[0]}")
    # the digest key the seal names must be the one the rotation chain assigns to its segment
    # (known only when the chain has a digest-key statement: a proof carries no ledger header)
    want_dk = sched.digest_key_id_for(proof.link, proof.segment)
    if want_dk is not None and seal.digest_key_id != want_dk:
        raise _Invalid(
            f"seal names digest key {seal.digest_key_id}; the rotation chain assigns {want_dk} "
            f"to segment {proof.segment}"
        )
    return sched


def _seal_layout(seal: Seal) -> tuple[int, int, int, int]:
    """(record_size, leaf_records, records, first_seq) as the signed seal states them."""
    try:
        return (
            int(seal.record_size),
            int(seal.leaf_records),
            int(seal.records),
            int(seal.first_seq),
        )
    except (TypeError, ValueError) as e:
        raise _Invalid(f"malformed field in the proof or its seal: {e}") from None


def _record_leaf(proof: InclusionProof) -> bytes:
    """Step 2 of a record proof: the record is its entry in the leaf block, which follows from the
    seal; the block's Merkle leaf hash."""
    rsize, leaf, count, first_seq = _seal_layout(proof.seal)
    if rsize - RECORD_FIXED not in (16, 32) or leaf < 1:
        raise _Invalid("seal has an unsupported record or leaf size")
    k, li, block = proof.record_index, proof.leaf_index, proof.leaf_block
    if not 0 <= k < count:
        raise _Invalid(f"record index {k} outside the seal's {count} records")
    if li != k // leaf or proof.tree_size != -(-count // leaf):
        raise _Invalid("leaf index or tree size does not follow from the seal")
    want_len = rsize * min(leaf, count - li * leaf)
    if len(block.data) != want_len:
        raise _Invalid(f"leaf block is {len(block.data)} bytes, expected {want_len}")
    if block.first_record_index != li * leaf or block.records != want_len // rsize:
        raise _Invalid(
            "leaf_block first_record_index or records does not follow from the leaf index"
        )
    rec = np.frombuffer(block.data, dtype=record_dtype(rsize - RECORD_FIXED))[k - li * leaf]
    if ProofRecord.of_array(rec) != proof.record:
        raise _Invalid("the record differs from its entry in the leaf block")
    if int(rec["seq"]) != first_seq + k:
        raise _Invalid(
            f"record seq {int(rec['seq'])} is not at index {k} of a segment starting at {first_seq}"
        )
    # a "blake3" proof's leaf is over the block's 32-byte BLAKE3 entry; a block is never 32 bytes
    # (48 at least), so naming the other construction cannot make another block's leaf
    entry_of = _LEAF_ENTRY.get(proof.leaf_hash or "sha256")
    if entry_of is None:
        raise _Invalid(f"leaf_hash {proof.leaf_hash!r} is not sha256 or blake3")
    return merkle.leaf_hash(entry_of(block.data))


def _window_leaf(proof: WindowProof) -> bytes:
    """Step 2 of a window proof: the proof is of a window log; the window record is one of the
    seal's records (one a leaf) and parses; its stated fields are the record's; its Merkle leaf."""
    if window_log_link(proof.link) is None:
        raise _Invalid(f"{proof.link!r} is not a window log (windows=NAME)")
    rsize, leaf, count, _ = _seal_layout(proof.seal)
    win = proof.window
    if leaf != 1 or rsize != len(win.record):
        raise _Invalid(
            f"the window record is {len(win.record)} bytes; the seal's records are {rsize} bytes, "
            f"{leaf} a leaf"
        )
    if not 0 <= proof.leaf_index < count or proof.tree_size != count:
        raise _Invalid("leaf index or tree size does not follow from the seal")
    try:
        w = WindowRecord.parse(win.record, "the proof's window record")
    except DataError as e:
        raise _Invalid(str(e)) from None
    if ProvenWindow.of(w) != win:
        raise _Invalid("the window's fields differ from its window record")
    try:
        first_ts, last_ts = int(proof.seal.first_ts_ns), int(proof.seal.last_ts_ns)
    except (TypeError, ValueError) as e:
        raise _Invalid(f"malformed field in the proof or its seal: {e}") from None
    if not first_ts <= w.start_ns <= last_ts:
        raise _Invalid(
            f"window start {w.start_ns} is outside the seal's windows {first_ts}..{last_ts}"
        )
    return merkle.leaf_hash(win.record)


def _check_checkpoint(proof: Proof, sched: Schedule, held: SignedNote | None) -> Checkpoint | None:
    """Step 4: the seal hash is in the link tree under a signed checkpoint (and, with `held`, that
    very checkpoint). The checkpoint reached, None when none is carried."""
    part = proof.checkpoint
    if part is None:
        return None
    try:
        note = parse_note(part.note.encode(), "the proof's checkpoint")
    except LedgerFormatError as e:
        raise _Invalid(str(e)) from None
    except (TypeError, ValueError, UnicodeError) as e:
        raise _Invalid(f"malformed checkpoint field in the proof: {e}") from None
    cp = note.checkpoint
    if cp.origin != origin_for(proof.ledger_id, proof.link):
        raise _Invalid(f"the proof's checkpoint is for {cp.origin}")
    bad = verify_note(note, *sched.checkpoint_signers(cp.link, cp.size))
    if bad is not None:
        raise _Invalid(f"the proof's checkpoint: {bad}")
    if part.leaf_index != proof.segment or part.tree_size != cp.size:
        raise _Invalid(
            "checkpoint leaf index or tree size does not match the segment and the checkpoint"
        )
    try:
        leaf = merkle.leaf_hash(bytes.fromhex(proof.seal.hash()))
    except (TypeError, ValueError) as e:
        raise _Invalid(f"seal cannot be canonicalised ({e})") from None
    if not merkle.verify_inclusion(leaf, part.leaf_index, cp.size, list(part.audit_path), cp.root):
        raise _Invalid(
            "checkpoint audit path does not lead from the seal hash to the checkpoint's root"
        )
    if held is not None:
        differs = _same_checkpoint(proof.segment, cp, held.checkpoint)
        if differs is not None:
            raise _Invalid(differs)
    return cp


def _same_checkpoint(segment: int, cp, mine) -> str | None:
    """The checkpoint the proof reached is exactly the verifier's own; else why not."""
    if mine.origin != cp.origin:
        return f"the given checkpoint is for {mine.origin}, the proof for {cp.origin}"
    if segment >= mine.size:
        return (
            f"the record's segment {segment} was sealed after the given checkpoint (tree size "
            f"{mine.size}): it cannot be proved against it; use a newer checkpoint"
        )
    if mine.size != cp.size:
        return (
            f"the proof reaches the checkpoint of tree size {cp.size}, not the given one of tree "
            f"size {mine.size}; ask for a proof made with `prove --checkpoint` and that checkpoint"
        )
    if mine.root != cp.root:
        return (
            f"the proof's checkpoint and the given one have the same tree size {cp.size} but "
            "different roots: two histories of this link exist (a fork)"
        )
    return None
