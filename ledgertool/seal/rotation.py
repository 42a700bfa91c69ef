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
`Schedule.digest_key_id_for(link, segment)` which digest key its records were computed with.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .. import fsio
from .canonical import canonical_json, loads_strict
from ..errors import LedgerError, KeyFileError, LedgerFormatError, UsageError
from ..keyfiles import DigestKey, SigningKey, TrustBundle
from ..ledger.lock import writer_lock

ROTATION_FORMAT = "ledgertool-rotation-v1"
ROTATIONS_DIR = "rotations"
SIGNING_KEY = "signing-key"
DIGEST_KEY = "digest-key"
KINDS = (SIGNING_KEY, DIGEST_KEY)
_PREFIX = b"ledgertool rotation v1\n"
_KEY_ID = re.compile(r"[0-9a-f]{32}")
MAX_ROTATION_BYTES = 1 << 20  # a statement with two hybrid key sets and signatures is about 20 KB


def rotation_path(directory: Path, number: int) -> Path:
    return Path(directory) / ROTATIONS_DIR / f"rotation-{number:04d}.json"


def rotation_body(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "signatures"}


def rotation_message(doc: dict) -> bytes:
    return _PREFIX + canonical_json(rotation_body(doc))


def rotation_hash(doc: dict) -> str:
    return hashlib.sha256(canonical_json(rotation_body(doc))).hexdigest()


def rotation_genesis(ledger_id: str) -> str:
    return hashlib.sha256(b"ledgertool rotation genesis v1\0" + bytes.fromhex(ledger_id)).hexdigest()


def load_rotations(directory: Path) -> list[dict]:
    """Rotation statements of a ledger in file order (parse only, strict JSON:
    `canonical.loads_strict`; `key_schedule` checks them)."""
    rdir = Path(directory) / ROTATIONS_DIR
    out = []
    if os.path.lexists(rdir):
        fsio.check_dir(rdir, directory)  # a link or file there is refused, not followed
        for p in sorted(rdir.glob("rotation-*.json")):
            raw = fsio.read_regular(p, MAX_ROTATION_BYTES, root=directory, what="rotation statement")
            doc = loads_strict(raw, str(p))
            if not isinstance(doc, dict) or doc.get("format") != ROTATION_FORMAT:
                raise LedgerFormatError(f"{p}: not a {ROTATION_FORMAT} document")
            out.append(doc)
    return out


def rotation_kind(doc: dict) -> str:
    """The statement's kind; absent means signing-key (statements older than digest-key rotation)."""
    return doc.get("kind", SIGNING_KEY)


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

    @property
    def current(self) -> TrustBundle:
        return self.epochs[-1].bundle

    @property
    def current_digest_key_id(self) -> str | None:
        return self.digest_epochs[-1].key_id


def key_schedule(ledger_id: str, trust: TrustBundle, rotations: list[dict], *,
                 digest_key_id: str | None = None, algorithm: str | None = None) -> Schedule:
    """Follow rotation statements from the trusted root key set; stop at the first bad one.

    `digest_key_id` is the ledger's genesis digest key id (ledger.json) and `algorithm` its digest
    algorithm; without them (a proof, which carries no ledger header) the first digest-key
    statement's old id and the algorithm are taken as stated, and everything else is checked.
    """
    sched = Schedule([Epoch(0, trust, {})], digest_epochs=[DigestEpoch(0, digest_key_id, {})])
    prev = rotation_genesis(ledger_id)
    last_eff: dict[str, int] = {}  # the previous statement's effective_from, whatever its kind
    for i, doc in enumerate(rotations, start=1):
        where = f"rotation {i}"
        try:
            if not isinstance(doc, dict):
                raise ValueError("is not a JSON object")
            if doc.get("ledger_id") != ledger_id:
                raise ValueError(f"belongs to ledger {doc.get('ledger_id')}")
            if doc.get("number") != i:
                raise ValueError(f"is numbered {doc.get('number')!r}, expected {i}")
            kind = rotation_kind(doc)
            if kind not in KINDS:
                raise ValueError(f"has unknown kind {kind!r} (expected one of: {', '.join(KINDS)})")
            if doc.get("prev_rotation_hash") != prev:
                raise ValueError("prev_rotation_hash does not match the previous statement")
            eff = doc.get("effective_from")
            if not isinstance(eff, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                    for v in eff.values()):
                raise ValueError("effective_from must map link names to segment indexes")
            if any(eff.get(link, 0) < start for link, start in last_eff.items()):
                raise ValueError("effective_from goes back before the previous rotation")
            sigs = doc.get("signatures") or {}
            msg = rotation_message(doc)
            if kind == SIGNING_KEY:
                old = TrustBundle.from_dict(doc.get("old_keys"), f"{where} old_keys")
                new = TrustBundle.from_dict(doc.get("new_keys"), f"{where} new_keys")
                if old != sched.current:
                    raise ValueError("old_keys are not the ledger's current signing keys")
                bad = [f"old key: {p}" for p in old.verify(msg, sigs.get("old") or {})]
                bad += [f"new key: {p}" for p in new.verify(msg, sigs.get("new") or {})]
            else:
                signer = TrustBundle.from_dict(doc.get("signing_keys"), f"{where} signing_keys")
                if signer != sched.current:
                    raise ValueError("signing_keys are not the ledger's current signing keys")
                if algorithm is not None and doc.get("algorithm") != algorithm:
                    raise ValueError(f"is for algorithm {doc.get('algorithm')!r}, the ledger uses {algorithm!r}")
                old_id, new_id = doc.get("old_digest_key_id"), doc.get("new_digest_key_id")
                for name, v in (("old_digest_key_id", old_id), ("new_digest_key_id", new_id)):
                    if not isinstance(v, str) or not _KEY_ID.fullmatch(v):
                        raise ValueError(f"{name} is not a digest key id (32 lowercase hex)")
                current = sched.current_digest_key_id
                if current is not None and old_id != current:
                    raise ValueError(f"old_digest_key_id {old_id} is not the ledger's current digest key "
                                     f"{current}")
                if new_id == old_id or new_id in sched.digest_key_ids:
                    raise ValueError(f"new_digest_key_id {new_id} was already used by this ledger")
                bad = [f"signing key: {p}" for p in signer.verify(msg, sigs.get("signing") or {})]
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
        prev = rotation_hash(doc)
    return sched


def _authoriser(doc: dict) -> object:
    """The signing key set a statement says was current when it was written (parse only)."""
    return doc.get("old_keys") if rotation_kind(doc) == SIGNING_KEY else doc.get("signing_keys")


def _checked_schedule(directory: Path, ledger: dict, rotations: list[dict]) -> Schedule | None:
    """The ledger's own schedule, rooted at the key set its first statement names (a writer has no
    trust bundle; verify roots it at the verifier's). LedgerFormatError when the chain is broken:
    nothing is appended to a history that does not verify. None when there is no statement."""
    if not rotations:
        return None
    try:
        root = TrustBundle.from_dict(_authoriser(rotations[0]), "rotation 1")
    except KeyFileError as e:
        raise LedgerFormatError(f"{directory}: {e}") from None
    sched = key_schedule(ledger["ledger_id"], root, rotations, digest_key_id=ledger["digest_key_id"],
                         algorithm=ledger["algorithm"])
    if sched.problems:
        raise LedgerFormatError(f"{directory}: {sched.problems[0]}")
    return sched


def _boundary(directory: Path, ledger: dict) -> dict[str, int]:
    """Per link, the next segment index: where a rotation written now takes effect. UsageError
    while a link has an open segment (rotation happens at a segment boundary)."""
    from ..ledger.header import link_state, links, segment_files

    effective = {}
    for link in links(directory):
        files = segment_files(directory, link)
        if any("open" in f and "seal.json" not in f for f in files.values()):
            raise UsageError(f"{directory}: link {link} has an open segment; run `ledgertool recover` first")
        effective[link] = link_state(directory, ledger, link).next_index
    return effective


def _write_statement(directory: Path, rotations: list[dict], doc: dict) -> Path:
    number = len(rotations) + 1
    path = rotation_path(directory, number)
    fsio.make_dirs(path.parent, directory)
    fsio.write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode(), root=directory,
                      what="rotation statement")
    return path


def rotate_keys(directory: Path, old: SigningKey, new: SigningKey) -> dict:
    """Write the next rotation statement: `new` signs every segment sealed from now on.

    Refuses (UsageError) while a link has an open segment (rotation happens at a segment
    boundary: run `ledgertool recover` first), (LedgerFormatError) when the ledger's rotation
    history does not verify, (KeyFileError) when `old` is not the ledger's current key or
    `new` equals it, and (LedgerLockedError) while another writer holds the ledger. Returns
    {"path", "number", "kind", "effective_from", "new_key_ids"}.
    """
    from ..ledger.header import load_ledger

    directory = Path(directory)
    ledger = load_ledger(directory)
    with writer_lock(directory, "keys rotate"):
        return _rotate_keys_locked(directory, ledger, old, new)


def _rotate_keys_locked(directory: Path, ledger: dict, old: SigningKey, new: SigningKey) -> dict:
    from ..ledger.header import links, segment_files
    from .document import load_seal

    rotations = load_rotations(directory)
    old_bundle, new_bundle = old.trust_bundle(), new.trust_bundle()
    sched = _checked_schedule(directory, ledger, rotations)
    current = sched.current if sched is not None else None
    effective = _boundary(directory, ledger)
    if current is None:
        for link in links(directory):
            files = segment_files(directory, link)
            sealed = sorted(i for i, f in files.items() if "seal.json" in f)
            if sealed:
                signer = load_seal(files[sealed[-1]]["seal.json"]).get("signer")
                if signer != old_bundle.key_ids:
                    raise KeyFileError(f"{old.path or 'old key'}: is not the key that signed the last seal of "
                                       f"link {link}")
    if current is not None and current != old_bundle:
        raise KeyFileError(f"{old.path or 'old key'}: is not the ledger's current signing key")
    if new_bundle == old_bundle:
        raise KeyFileError(f"{new.path or 'new key'}: is the same key as the old one")
    doc = _statement(SIGNING_KEY, ledger, rotations, effective,
                     old_keys=old_bundle.to_dict(), new_keys=new_bundle.to_dict())
    number = doc["number"]
    msg = rotation_message(doc)
    doc["signatures"] = {"old": old.sign(msg), "new": new.sign(msg)}
    path = _write_statement(directory, rotations, doc)
    return {"path": str(path), "number": number, "kind": SIGNING_KEY, "effective_from": effective,
            "new_key_ids": new_bundle.key_ids}


def rotate_digest_key(directory: Path, signing_key: SigningKey, old: DigestKey, new: DigestKey) -> dict:
    """Write the next rotation statement: digest key `new` computes every segment captured from now on.

    The statement names the old and the new key id for the ledger's algorithm (the keys stay
    secret) and is signed by `signing_key`, which must be the ledger's current signing key;
    `old` must be its current digest key (so only an operator holding it can move the ledger on).
    Refuses (UsageError) while a link has an open segment, (LedgerFormatError) when the rotation
    history does not verify, (KeyFileError) for a signing or old digest key that is not the
    current one, or a new key this ledger has already used, and (LedgerLockedError) while another
    writer holds the ledger. Returns {"path", "number", "kind", "effective_from", "algorithm",
    "old_digest_key_id", "new_digest_key_id"}.
    """
    from ..ledger.header import load_ledger

    directory = Path(directory)
    ledger = load_ledger(directory)
    with writer_lock(directory, "keys rotate-digest"):
        return _rotate_digest_key_locked(directory, ledger, signing_key, old, new)


def _rotate_digest_key_locked(directory: Path, ledger: dict, signing_key: SigningKey, old: DigestKey,
                              new: DigestKey) -> dict:
    from ..algorithms import get_algorithm

    rotations = load_rotations(directory)
    sched = _checked_schedule(directory, ledger, rotations)
    current_signer_check(directory, ledger, signing_key)
    alg = get_algorithm(ledger["algorithm"])
    old_id, new_id = old.key_id(alg.name, alg.key_size), new.key_id(alg.name, alg.key_size)
    used = sched.digest_key_ids if sched is not None else [ledger["digest_key_id"]]
    current = used[-1]
    if old_id != current:
        raise KeyFileError(f"{old.path or 'old digest key'}: digest key id {old_id} is not the ledger's current "
                           f"digest key {current}" + _retired_note(sched, old_id))
    if new_id in used:
        raise KeyFileError(f"{new.path or 'new digest key'}: digest key id {new_id} was already used by ledger "
                           f"{directory}; generate a new key (`ledgertool keys generate`)")
    effective = _boundary(directory, ledger)
    doc = _statement(DIGEST_KEY, ledger, rotations, effective, algorithm=alg.name, old_digest_key_id=old_id,
                     new_digest_key_id=new_id, signing_keys=signing_key.trust_bundle().to_dict())
    number = doc["number"]
    doc["signatures"] = {"signing": signing_key.sign(rotation_message(doc))}
    path = _write_statement(directory, rotations, doc)
    return {"path": str(path), "number": number, "kind": DIGEST_KEY, "effective_from": effective,
            "algorithm": alg.name, "old_digest_key_id": old_id, "new_digest_key_id": new_id}


def _statement(kind: str, ledger: dict, rotations: list[dict], effective: dict[str, int], **fields) -> dict:
    """The unsigned body of the next rotation statement of `kind`: numbered after `rotations`,
    chained to the last of them (or the ledger's genesis label), `fields` between the common head
    and `created_at` (key order is irrelevant to the RFC 8785 signed bytes, kept for readers)."""
    return {
        "format": ROTATION_FORMAT,
        "kind": kind,
        "ledger_id": ledger["ledger_id"],
        "number": len(rotations) + 1,
        "prev_rotation_hash": rotation_hash(rotations[-1]) if rotations else rotation_genesis(ledger["ledger_id"]),
        "effective_from": effective,
        **fields,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _retired_note(sched: Schedule | None, key_id: str) -> str:
    n = sched.retired_by(key_id) if sched is not None else None
    return f": wrong key: retired by rotation {n}" if n is not None else ": wrong key"


def current_digest_key_id(directory: Path, ledger: dict, digest_key: DigestKey) -> str:
    """The digest key id new segments are written with, after checking that `digest_key` is it.

    That is the newest digest-key rotation's new id, or ledger.json's (genesis) id when there is
    none. KeyFileError (exit 2) naming the key file otherwise: "retired by rotation N" for a key a
    rotation replaced, "wrong key" for one the ledger never used. The statements are trusted as
    written here (a writer has no trust bundle); `verify` checks them.
    """
    from ..algorithms import get_algorithm

    alg = get_algorithm(ledger["algorithm"])
    kid = digest_key.key_id(alg.name, alg.key_size)
    ids, retired = _digest_key_history(directory, ledger)
    if kid == ids[-1]:
        return kid
    why = f"wrong key: retired by rotation {retired[kid]}" if kid in retired else "wrong key"
    raise KeyFileError(f"{digest_key.path or 'digest key'}: digest key id {kid} is not the current digest key of "
                       f"ledger {directory} (key id {ids[-1]}): {why}")


def _digest_key_history(directory: Path, ledger: dict) -> tuple[list[str], dict[str, object]]:
    """Digest key ids in the order the statements introduce them (ledger.json's first) and, per
    retired id, the number of the rotation that retired it; statements trusted as written."""
    ids = [ledger["digest_key_id"]]
    retired: dict[str, object] = {}
    for doc in load_rotations(directory):
        if rotation_kind(doc) == DIGEST_KEY and isinstance(doc.get("new_digest_key_id"), str):
            retired.setdefault(ids[-1], doc.get("number"))
            ids.append(doc["new_digest_key_id"])
    return ids, retired


def digest_key_ids(directory: Path, ledger: dict) -> list[str]:
    """The ledger's digest key ids, oldest first; the last is the one new segments are written with
    (what `current_digest_key_id` checks a key against). Statements are trusted as written here."""
    return _digest_key_history(directory, ledger)[0]


def with_digest_key_id(ledger: dict, key_id: str) -> dict:
    """ledger.json's parameters with the digest key id of the epoch being written: what segment
    headers and seals carry (ledger.json itself keeps the genesis id)."""
    return {**ledger, "digest_key_id": key_id}


def current_signer_check(directory: Path, ledger: dict, signing_key: SigningKey) -> None:
    """KeyFileError when `signing_key` is not the key the ledger's next seal must carry: the
    newest rotation's new key, or (no rotation) the signer of the ledger's last seal."""
    rotations = load_rotations(directory)
    ids = signing_key.trust_bundle().key_ids
    if rotations:
        last = rotations[-1]
        want = (last.get("new_keys") if rotation_kind(last) == SIGNING_KEY else last.get("signing_keys")) or {}
        want_ids = {k.get("algorithm"): k.get("key_id") for k in want.get("keys", []) if isinstance(k, dict)}
        if want_ids != ids:
            raise KeyFileError(f"{signing_key.path or 'signing key'}: is not the ledger's current signing key "
                               f"(after rotation {len(rotations)}, {directory} is signed by {want_ids})")
        return
    last = _last_signer(directory)
    if last is not None and last != ids:
        raise KeyFileError(f"{signing_key.path or 'signing key'}: is not the key that signs ledger {directory} "
                           f"(its seals are signed by {', '.join(f'{a} {k}' for a, k in sorted(last.items()))}); "
                           "use that key, or move the ledger to a new key with `ledgertool keys rotate`")


def _last_signer(directory: Path) -> dict | None:
    """Key ids named by the newest seal of any link (None for a ledger without seals)."""
    from ..ledger.header import links, segment_files
    from .document import load_seal

    newest = None
    for link in links(directory):
        sealed = [i for i, f in segment_files(directory, link).items() if "seal.json" in f]
        if sealed:
            try:
                doc = load_seal(segment_files(directory, link)[max(sealed)]["seal.json"])
            except LedgerError:
                continue  # verify reports an unreadable seal; it cannot vouch for a key either way
            if newest is None or doc.get("sealed_at", "") > newest.get("sealed_at", ""):
                newest = doc
    return dict(newest.get("signer") or {}) if newest else None
