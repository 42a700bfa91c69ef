"""Signing-key rotation: statements that move a ledger to a new signing key at a segment boundary.

A rotation statement (docs/transparency.md, "Key rotation") lives at
``DIR/rotations/rotation-NNNN.json`` (NNNN = 1, 2, ...). Its body names the ledger, its number,
the hash of the previous statement (or the genesis label for the first), the old and the new key
set (``ledgertool-verifier-v1`` documents) and, per link, the first segment index the new key
signs (``effective_from``). The body's signed bytes are ``b"ledgertool rotation v1\\n"`` followed
by its RFC 8785 encoding; it carries two signature sets: ``old`` (the key being retired, which
authorises the move) and ``new`` (proof that the new key's holder agrees).

`key_schedule` is pure: it starts from the verifier's trust bundle and follows the statements in
order, stopping at the first one that does not verify. `Schedule.bundle_for(link, segment)` then
says which key set must have signed a given seal.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .canonical import canonical_json
from .errors import LedgerError, KeyFileError, LedgerFormatError, UsageError
from .keys import SigningKey, TrustBundle

ROTATION_FORMAT = "ledgertool-rotation-v1"
ROTATIONS_DIR = "rotations"
_PREFIX = b"ledgertool rotation v1\n"


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
    """Rotation statements of a ledger in file order (parse only; `key_schedule` checks them)."""
    rdir = Path(directory) / ROTATIONS_DIR
    out = []
    if rdir.is_dir():
        for p in sorted(rdir.glob("rotation-*.json")):
            try:
                doc = json.loads(p.read_bytes())
            except (OSError, ValueError) as e:
                raise LedgerFormatError(f"{p}: not a readable rotation statement ({e})") from None
            if not isinstance(doc, dict) or doc.get("format") != ROTATION_FORMAT:
                raise LedgerFormatError(f"{p}: not a {ROTATION_FORMAT} document")
            out.append(doc)
    return out


@dataclass(frozen=True)
class Epoch:
    """One key set and, per link, the first segment it signs (links not named: from segment 0)."""

    number: int
    bundle: TrustBundle
    effective_from: dict[str, int]


@dataclass
class Schedule:
    epochs: list[Epoch]
    problems: list[str] = field(default_factory=list)  # rotations that did not verify

    def bundle_for(self, link: str, segment: int) -> TrustBundle:
        """The key set that must have signed seal `segment` of `link`."""
        chosen = self.epochs[0].bundle
        for e in self.epochs[1:]:
            if segment >= e.effective_from.get(link, 0):
                chosen = e.bundle
        return chosen

    @property
    def bundles(self) -> list[TrustBundle]:
        return [e.bundle for e in self.epochs]

    @property
    def current(self) -> TrustBundle:
        return self.epochs[-1].bundle


def key_schedule(ledger_id: str, trust: TrustBundle, rotations: list[dict]) -> Schedule:
    """Follow rotation statements from the trusted root key set; stop at the first bad one."""
    sched = Schedule([Epoch(0, trust, {})])
    prev = rotation_genesis(ledger_id)
    for i, doc in enumerate(rotations, start=1):
        where = f"rotation {i}"
        try:
            if doc.get("ledger_id") != ledger_id:
                raise ValueError(f"belongs to ledger {doc.get('ledger_id')}")
            if doc.get("number") != i:
                raise ValueError(f"is numbered {doc.get('number')!r}, expected {i}")
            if doc.get("prev_rotation_hash") != prev:
                raise ValueError("prev_rotation_hash does not match the previous statement")
            old = TrustBundle.from_dict(doc.get("old_keys"), f"{where} old_keys")
            new = TrustBundle.from_dict(doc.get("new_keys"), f"{where} new_keys")
            if old != sched.current:
                raise ValueError("old_keys are not the ledger's current signing keys")
            eff = doc.get("effective_from")
            if not isinstance(eff, dict) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                    for v in eff.values()):
                raise ValueError("effective_from must map link names to segment indexes")
            last = sched.epochs[-1].effective_from
            if any(eff.get(link, 0) < start for link, start in last.items()):
                raise ValueError("effective_from goes back before the previous rotation")
            sigs = doc.get("signatures") or {}
            msg = rotation_message(doc)
            bad = [f"old key: {p}" for p in old.verify(msg, sigs.get("old") or {})]
            bad += [f"new key: {p}" for p in new.verify(msg, sigs.get("new") or {})]
            if bad:
                raise ValueError("; ".join(bad))
        except (KeyFileError, ValueError, TypeError, AttributeError) as e:
            sched.problems.append(f"{where}: {e}")
            break
        sched.epochs.append(Epoch(i, new, dict(eff)))
        prev = rotation_hash(doc)
    return sched


def rotate_keys(directory: Path, old: SigningKey, new: SigningKey) -> dict:
    """Write the next rotation statement: `new` signs every segment sealed from now on.

    Refuses (UsageError) while a link has an open segment (rotation happens at a segment
    boundary: run `ledgertool recover` first) and (KeyFileError) when `old` is not the ledger's
    current key or `new` equals it. Returns {"path", "number", "effective_from", "new_key_ids"}.
    """
    from .ledger import link_state, links, load_ledger, segment_files
    from .seal import load_seal, write_atomic

    directory = Path(directory)
    ledger = load_ledger(directory)
    rotations = load_rotations(directory)
    old_bundle, new_bundle = old.trust_bundle(), new.trust_bundle()
    current = None
    if rotations:
        sched = key_schedule(ledger["ledger_id"], TrustBundle.from_dict(rotations[0].get("old_keys")), rotations)
        if sched.problems:
            raise LedgerFormatError(f"{directory}: {sched.problems[0]}")
        current = sched.current
    effective = {}
    for link in links(directory):
        files = segment_files(directory, link)
        if any("open" in f and "seal.json" not in f for f in files.values()):
            raise UsageError(f"{directory}: link {link} has an open segment; run `ledgertool recover` first")
        effective[link] = link_state(directory, ledger, link).next_index
        if current is None:
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
    number = len(rotations) + 1
    doc = {
        "format": ROTATION_FORMAT,
        "ledger_id": ledger["ledger_id"],
        "number": number,
        "prev_rotation_hash": rotation_hash(rotations[-1]) if rotations else rotation_genesis(ledger["ledger_id"]),
        "effective_from": effective,
        "old_keys": old_bundle.to_dict(),
        "new_keys": new_bundle.to_dict(),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    msg = rotation_message(doc)
    doc["signatures"] = {"old": old.sign(msg), "new": new.sign(msg)}
    path = rotation_path(directory, number)
    path.parent.mkdir(exist_ok=True)
    write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())
    return {"path": str(path), "number": number, "effective_from": effective,
            "new_key_ids": new_bundle.key_ids}


def current_signer_check(directory: Path, ledger: dict, signing_key: SigningKey) -> None:
    """KeyFileError when `signing_key` is not the key the ledger's next seal must carry: the
    newest rotation's new key, or (no rotation) the signer of the ledger's last seal."""
    rotations = load_rotations(directory)
    ids = signing_key.trust_bundle().key_ids
    if rotations:
        want = rotations[-1].get("new_keys", {})
        want_ids = {k.get("algorithm"): k.get("key_id") for k in want.get("keys", []) if isinstance(k, dict)}
        if want_ids != ids:
            raise KeyFileError(f"{signing_key.path or 'signing key'}: is not the ledger's current signing key "
                               f"(rotation {len(rotations)} moved {directory} to {want_ids})")
        return
    last = _last_signer(directory)
    if last is not None and last != ids:
        raise KeyFileError(f"{signing_key.path or 'signing key'}: is not the key that signs ledger {directory} "
                           f"(its seals are signed by {', '.join(f'{a} {k}' for a, k in sorted(last.items()))}); "
                           "use that key, or move the ledger to a new key with `ledgertool keys rotate`")


def _last_signer(directory: Path) -> dict | None:
    """Key ids named by the newest seal of any link (None for a ledger without seals)."""
    from .ledger import links, segment_files
    from .seal import load_seal

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
