"""Key rotation: statements that move a ledger to a new signing key or a new digest key at a
segment boundary.

A rotation statement (docs/transparency.md, "Key rotation") lives at
``DIR/rotations/rotation-NNNN.json`` (NNNN = 1, 2, ...); signing-key and digest-key statements
share one numbered, hash-chained sequence, so a ledger has one ordered key history. Every body
names the ledger, its number, its ``kind``, the hash of the previous statement (or the genesis
label for the first) and, per link, the first segment index the new key applies to
(``effective_from``). Its signed bytes are ``b"ledgertool rotation v1\\n"`` followed by its
RFC 8785 encoding.

``kind: "signing-key"`` (the default: statements written before digest-key rotation existed
have no ``kind``) names the old and the new signing key set (``ledgertool-verifier-v1``
documents) and carries two signature sets: ``old`` (the key being retired, which authorises the
move) and ``new`` (proof that the new key's holder agrees).

``kind: "digest-key"`` names the ledger's digest algorithm, the old and the new digest key id
(docs/ledger-format.md, "Digest key id": a one-way commitment to the secret, which is never
written) and the current signing key set, which authorises the move with one signature set,
``signing``.

`key_schedule` is pure: it starts from the verifier's trust bundle (and the ledger's genesis
digest key id) and follows the statements in order, stopping at the first one that does not
verify. `Schedule.bundle_for(link, segment)` says which key set must have signed a seal and
`Schedule.digest_key_id_for(link, segment)` which digest key its records were computed with, and
`Schedule.checkpoint_signers(link, size)` which key sets may sign a checkpoint of that size (a
retired key only over the segments before its retirement).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..canonical import SignedDocument, canonical_json, loads_strict
from ..errors import KeyFileError, LedgerFormatError
from ..keyfiles import TrustBundle
from .checkpoint import RetiredKey

ROTATION_FORMAT = "ledgertool-rotation-v1"
SIGNING_KEY = "signing-key"
DIGEST_KEY = "digest-key"
KINDS = (SIGNING_KEY, DIGEST_KEY)
_PREFIX = b"ledgertool rotation v1\n"
_KEY_ID = re.compile(r"[0-9a-f]{32}")
MAX_ROTATION_BYTES = 1 << 20  # a statement with two hybrid key sets and signatures is about 20 KB


#: A member's value as a statement states it: any JSON value, None when absent; key_schedule
#: checks it.
Claim = object


@dataclass(frozen=True)
class RotationStatement(SignedDocument):
    """A rotation statement as parse_rotation read it: its members by name
    (schemas/rotation.schema.json), `kind` with its default applied (absent: signing-key), the
    member names it has, and the document as parsed kept privately, so message() and hash() are
    RFC 8785 over exactly the members that were signed. Only `format` is checked by the parse;
    key_schedule checks the rest."""

    format: str
    kind: Claim = SIGNING_KEY
    ledger_id: Claim = None
    number: Claim = None
    prev_rotation_hash: Claim = None
    effective_from: Claim = None
    created_at: Claim = None
    old_keys: Claim = None  # signing-key
    new_keys: Claim = None  # signing-key
    algorithm: Claim = None  # digest-key
    old_digest_key_id: Claim = None  # digest-key
    new_digest_key_id: Claim = None  # digest-key
    signing_keys: Claim = None  # digest-key
    signatures: Claim = None

    @property
    def authoriser(self) -> Claim:
        """The signing key set the statement says was current when it was written."""
        return self.old_keys if self.kind == SIGNING_KEY else self.signing_keys

    @property
    def new_signer(self) -> Claim:
        """The signing key set current after the statement."""
        return self.new_keys if self.kind == SIGNING_KEY else self.signing_keys

    def signatures_of(self, signer: str) -> Claim:
        """The signatures the statement carries from `signer` ("old" and "new" of a signing-key
        rotation, "signing" of a digest-key one): {} when it carries none; ValueError when its
        signatures are not an object."""
        sigs = self.signatures if self.signatures is not None else {}
        if not isinstance(sigs, dict):
            raise ValueError("signatures must be an object")
        return sigs.get(signer) or {}

    def message(self) -> bytes:
        """The signed bytes: the prefix, then RFC 8785 of every member but "signatures"."""
        return _PREFIX + self.signed_body()

    def hash(self) -> str:
        """SHA-256 (hex) of the signed body: the next statement's prev_rotation_hash."""
        return hashlib.sha256(self.signed_body()).hexdigest()


def rotation_body(doc: Mapping) -> dict:
    return {k: v for k, v in doc.items() if k != "signatures"}


def rotation_message(doc: RotationStatement | Mapping) -> bytes:
    """The signed bytes of a statement, or of a document being built (ledger.rotations)."""
    if isinstance(doc, RotationStatement):
        return doc.message()
    return _PREFIX + canonical_json(rotation_body(doc))


def rotation_hash(doc: RotationStatement | Mapping) -> str:
    if isinstance(doc, RotationStatement):
        return doc.hash()
    return hashlib.sha256(canonical_json(rotation_body(doc))).hexdigest()


def rotation_genesis(ledger_id: str) -> str:
    return hashlib.sha256(
        b"ledgertool rotation genesis v1\0" + bytes.fromhex(ledger_id)
    ).hexdigest()


def parse_rotation(raw: bytes, where: Path | str) -> RotationStatement:
    """Parse the bytes of a rotation statement (strict JSON: `canonical.loads_strict`; pure);
    LedgerFormatError naming `where` when it is not one. `key_schedule` checks its contents.
    Members the format does not name are kept and signed over like the others."""
    doc = loads_strict(raw, str(where))
    if not isinstance(doc, dict) or doc.get("format") != ROTATION_FORMAT:
        raise LedgerFormatError(f"{where}: not a {ROTATION_FORMAT} document")
    return RotationStatement.of(doc)


@dataclass(frozen=True)
class Epoch:
    """One key set and, per link, the first segment it signs (links not named: from segment 0)."""

    number: int
    bundle: TrustBundle
    effective_from: dict[str, int]


@dataclass(frozen=True)
class DigestEpoch:
    """One digest key (by id) and, per link, the first segment it digests (links not named: from 0).
    `key_id` is None for the genesis epoch of a schedule built without the ledger's header."""

    number: int
    key_id: str | None
    effective_from: dict[str, int]


def _pick(epochs: list, link: str, segment: int):
    chosen = epochs[0]
    for e in epochs[1:]:
        if segment >= e.effective_from.get(link, 0):
            chosen = e
    return chosen


@dataclass
class Schedule:
    epochs: list[Epoch]
    problems: list[str] = field(default_factory=list)  # rotations that did not verify
    digest_epochs: list[DigestEpoch] = field(default_factory=lambda: [DigestEpoch(0, None, {})])

    def bundle_for(self, link: str, segment: int) -> TrustBundle:
        """The key set that must have signed seal `segment` of `link`."""
        return _pick(self.epochs, link, segment).bundle

    def digest_key_id_for(self, link: str, segment: int) -> str | None:
        """The digest key id (32 hex) that seal `segment` of `link` must name; None only when the
        schedule was built without the genesis id and no digest-key rotation applies."""
        return _pick(self.digest_epochs, link, segment).key_id

    def retired_by(self, key_id: str) -> int | None:
        """Number of the digest-key rotation that retired `key_id`, None if it never did."""
        for prev, e in zip(self.digest_epochs, self.digest_epochs[1:]):
            if prev.key_id == key_id:
                return e.number
        return None

    @property
    def digest_key_ids(self) -> list[str]:
        """Every digest key id validly introduced, genesis first (unknown genesis left out)."""
        return [e.key_id for e in self.digest_epochs if e.key_id is not None]

    @property
    def bundles(self) -> list[TrustBundle]:
        return [e.bundle for e in self.epochs]

    def checkpoint_signers(
        self, link: str, size: int
    ) -> tuple[list[TrustBundle], tuple[RetiredKey, ...]]:
        """(the key sets that may sign a checkpoint of the first `size` segments of `link`, the
        retired ones that may not). A rotated key may have been compromised: from its rotation's
        `effective_from` on it vouches for nothing, so it may sign only a checkpoint that ends
        before that segment; the current key set may sign any."""
        ok, retired = [], []
        for e, succ in zip(self.epochs, self.epochs[1:]):
            start = succ.effective_from.get(link, 0)
            if size <= start:
                ok.append(e.bundle)
            else:
                retired.append(RetiredKey(e.bundle, succ.number, start))
        return ok + [self.current], tuple(retired)

    @property
    def current(self) -> TrustBundle:
        return self.epochs[-1].bundle

    @property
    def current_digest_key_id(self) -> str | None:
        return self.digest_epochs[-1].key_id


def key_schedule(
    ledger_id: str,
    trust: TrustBundle,
    rotations: list[RotationStatement | dict],
    *,
    digest_key_id: str | None = None,
    algorithm: str | None = None,
) -> Schedule:
    """Follow rotation statements from the trusted root key set; stop at the first bad one.

    `digest_key_id` is the ledger's genesis digest key id (ledger.json) and `algorithm` its digest
    algorithm; without them (a proof, which carries no ledger header) the first digest-key
    statement's old id and the algorithm are taken as stated, and everything else is checked.
    A statement given as a mapping (a proof's, as it parsed) is read as parse_rotation reads one.
    """
    sched = Schedule([Epoch(0, trust, {})], digest_epochs=[DigestEpoch(0, digest_key_id, {})])
    prev = rotation_genesis(ledger_id)
    last_eff: dict[str, int] = {}  # the previous statement's effective_from, whatever its kind
    for i, doc in enumerate(rotations, start=1):
        where = f"rotation {i}"
        try:
            if isinstance(doc, Mapping):
                doc = RotationStatement.of(doc)
            elif not isinstance(doc, RotationStatement):
                raise ValueError("is not a JSON object")
            if doc.ledger_id != ledger_id:
                raise ValueError(f"belongs to ledger {doc.ledger_id}")
            if doc.number != i:
                raise ValueError(f"is numbered {doc.number!r}, expected {i}")
            kind = doc.kind
            if kind not in KINDS:
                raise ValueError(f"has unknown kind {kind!r} (expected one of: {', '.join(KINDS)})")
            if doc.prev_rotation_hash != prev:
                raise ValueError("prev_rotation_hash does not match the previous statement")
            eff = doc.effective_from
            if not isinstance(eff, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in eff.values()
            ):
                raise ValueError("effective_from must map link names to segment indexes")
            if any(eff.get(link, 0) < start for link, start in last_eff.items()):
                raise ValueError("effective_from goes back before the previous rotation")
            msg = doc.message()
            if kind == SIGNING_KEY:
                old = TrustBundle.from_dict(doc.old_keys, f"{where} old_keys")
                new = TrustBundle.from_dict(doc.new_keys, f"{where} new_keys")
                if old != sched.current:
                    raise ValueError("old_keys are not the ledger's current signing keys")
                bad = [f"old key: {p}" for p in old.verify(msg, doc.signatures_of("old"))]
                bad += [f"new key: {p}" for p in new.verify(msg, doc.signatures_of("new"))]
            else:
                signer = TrustBundle.from_dict(doc.signing_keys, f"{where} signing_keys")
                if signer != sched.current:
                    raise ValueError("signing_keys are not the ledger's current signing keys")
                if algorithm is not None and doc.algorithm != algorithm:
                    raise ValueError(
                        f"is for algorithm {doc.algorithm!r}, the ledger uses {algorithm!r}"
                    )
                old_id, new_id = doc.old_digest_key_id, doc.new_digest_key_id
                for name, v in (("old_digest_key_id", old_id), ("new_digest_key_id", new_id)):
                    if not isinstance(v, str) or not _KEY_ID.fullmatch(v):
                        raise ValueError(f"{name} is not a digest key id (32 lowercase hex)")
                current = sched.current_digest_key_id
                if current is not None and old_id != current:
                    raise ValueError(
                        f"old_digest_key_id {old_id} is not the ledger's current digest key "
                        f"{current}"
                    )
                if new_id == old_id or new_id in sched.digest_key_ids:
                    raise ValueError(f"new_digest_key_id {new_id} was already used by this ledger")
                bad = [
                    f"signing key: {p}" for p in signer.verify(msg, doc.signatures_of("signing"))
                ]
            if bad:
                raise ValueError("; ".join(bad))
        except (KeyFileError, ValueError, TypeError, AttributeError) as e:
            sched.problems.append(f"{where}: {e}")
            break
        if kind == SIGNING_KEY:
            sched.epochs.append(Epoch(i, new, dict(eff)))
        else:
            if sched.digest_epochs[0].key_id is None and len(sched.digest_epochs) == 1:
                sched.digest_epochs[0] = DigestEpoch(0, old_id, {})
            sched.digest_epochs.append(DigestEpoch(i, new_id, dict(eff)))
        last_eff = dict(eff)
        prev = doc.hash()
    return sched
