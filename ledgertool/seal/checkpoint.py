"""Checkpoints: C2SP tlog-checkpoint statements over each link's chain of seals, as signed notes.

Implements (docs/transparency.md, "Checkpoints"; docs/adr/0004-checkpoints-as-c2sp-signed-notes.md):

* the ledger-level tree: per link, an RFC 9162 Merkle tree whose leaf ``i`` is the 32-byte
  SHA-256 seal hash of segment ``i`` (leaf hash ``SHA-256(0x00 || seal hash)``). Links are
  independent append-only logs (they are captured independently), so each has its own tree;
* c2sp.org/tlog-checkpoint note text: origin line ``ledgertool/<ledger id>/<link>``, tree size
  (segments, decimal), base64 root hash, then extension lines ``records N``, ``last-seal HEX``,
  ``time RFC3339``;
* c2sp.org/signed-note signatures: ``— <name> base64(key id (4 bytes, big-endian) || signature)``
  over the note text. Ed25519: type byte 0x01, key id ``SHA-256(name || 0x0A || 0x01 ||
  pubkey)[:4]``. ML-DSA-65 (no byte assigned by the spec): type byte 0xff followed by the
  identifier ``ledgertool/ml-dsa-65``, key id ``SHA-256(name || 0x0A || 0xff ||
  "ledgertool/ml-dsa-65" || pubkey)[:4]``, FIPS 204 signature with an empty context. The key name
  is the origin's ledger part, ``ledgertool/<ledger id>``.

Encoding, parsing, signing and verification are pure (bytes in, values out).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from ..canonical import b64decode_canonical
from ..errors import KeyFileError, LedgerFormatError, UsageError
from ..keyfiles import ED25519, MLDSA65, SigningKey, TrustBundle
from ..plural import plural
from . import merkle

MAX_NOTE_BYTES = 1 << 16
# a control character other than newline: never in a signed note
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")
_EM_DASH = "\u2014"
_MLDSA_TYPE = b"\xff" + b"ledgertool/ml-dsa-65"
_TYPE = {ED25519: b"\x01", MLDSA65: _MLDSA_TYPE}
_SIZE_RE = re.compile(r"0|[1-9][0-9]{0,19}")
_LEDGER_ID_RE = re.compile(r"[0-9a-f]{32}")


def origin_for(ledger_id: str, link: str) -> str:
    return f"ledgertool/{ledger_id}/{link}"


def key_name_for(ledger_id: str) -> str:
    return f"ledgertool/{ledger_id}"


def note_key_id(name: str, algorithm: str, public_key: bytes) -> bytes:
    """4-byte signed-note key id of (name, signature type, public key)."""
    return hashlib.sha256(name.encode() + b"\n" + _TYPE[algorithm] + public_key).digest()[:4]


@dataclass(frozen=True)
class VerifierKey:
    """A c2sp.org/signed-note verifier key ("vkey") for the Ed25519 key of a trust bundle, as Go's
    golang.org/x/mod/sumdb/note.NewVerifier reads it: ``<name>+<key id, 8 lowercase hex>+
    base64(0x01 || 32-byte Ed25519 public key)``, the key id being `note_key_id` (signed-note's
    recommended SHA-256(name || 0x0A || 0x01 || key)[:4], which NewVerifier checks)."""

    name: str
    key_id: bytes  # 4 bytes, big-endian
    public_key: bytes  # 32 bytes

    def __str__(self) -> str:
        key = base64.b64encode(_TYPE[ED25519] + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{key}"


def verifier_key(ledger_id: str, bundle: TrustBundle) -> VerifierKey:
    """The vkey with which a standard signed-note verifier checks this ledger's checkpoints.

    The key name is per ledger (`key_name_for`), so the vkey is too. Only the Ed25519 key has one:
    signed-note assigns no signature type to ML-DSA-65, and a hybrid note's ML-DSA line is ignored
    there as an unknown key. UsageError for a malformed ledger id; KeyFileError naming the bundle
    when it has no Ed25519 key (an ML-DSA-only ledger's checkpoints verify only with ledgertool)."""
    if not isinstance(ledger_id, str) or not _LEDGER_ID_RE.fullmatch(ledger_id):
        raise UsageError(f"ledger id {ledger_id!r} is not 32 lowercase hex digits")
    pub = bundle.public_keys.get(ED25519)
    if pub is None:
        raise KeyFileError(
            f"{bundle.path or 'trust bundle'}: scheme {bundle.scheme} has no Ed25519 key, and "
            "signed-note verifiers know no ML-DSA type: this ledger's checkpoints verify only "
            "with ledgertool (its verify and check-consistency commands)"
        )
    name = key_name_for(ledger_id)
    return VerifierKey(name, note_key_id(name, ED25519, pub), pub)


# ---- the ledger-level tree --------------------------------------------------------------------


def seal_leaf_hashes(seal_hashes: list[str]) -> list[bytes]:
    return [merkle.leaf_hash(bytes.fromhex(h)) for h in seal_hashes]


def tree_root(seal_hashes: list[str]) -> bytes:
    return merkle.root_from_leaf_hashes(seal_leaf_hashes(seal_hashes))


# ---- the note ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int  # sealed segments of the link
    root: bytes  # 32 bytes
    records: int | None = None
    last_seal: str | None = None
    time: str | None = None
    extensions: tuple[str, ...] = ()  # extension lines we do not interpret

    @property
    def ledger_id(self) -> str:
        return self.origin.split("/")[1]

    @property
    def link(self) -> str:
        return self.origin.split("/")[2]

    def text(self) -> bytes:
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode()]
        if self.records is not None:
            lines.append(f"records {self.records}")
        if self.last_seal is not None:
            lines.append(f"last-seal {self.last_seal}")
        if self.time is not None:
            lines.append(f"time {self.time}")
        lines.extend(self.extensions)
        return ("\n".join(lines) + "\n").encode()

    def to_json(self) -> dict:
        return {
            "origin": self.origin,
            "tree_size": self.size,
            "root_hash": self.root.hex(),
            "records": self.records,
            "last_seal": self.last_seal,
            "time": self.time,
        }


def sign_checkpoint(cp: Checkpoint, key: SigningKey) -> bytes:
    """The signed note: text, blank line, one signature line per algorithm of the key's scheme."""
    text = cp.text()
    name = key_name_for(cp.ledger_id)
    pubs = key.trust_bundle().public_keys
    sigs = key.sign(text)
    lines = []
    for alg in key.algorithms:
        raw = note_key_id(name, alg, pubs[alg]) + base64.b64decode(sigs[alg])
        lines.append(f"{_EM_DASH} {name} {base64.b64encode(raw).decode()}\n")
    return text + b"\n" + "".join(lines).encode()


@dataclass(frozen=True)
class SignedNote:
    checkpoint: Checkpoint
    text: bytes
    signatures: tuple[tuple[str, bytes, bytes], ...]  # (name, key id, signature)


def parse_note(data: bytes, where: str = "checkpoint") -> SignedNote:
    """Parse a signed tlog-checkpoint note; LedgerFormatError naming `where` and the line."""
    if len(data) > MAX_NOTE_BYTES:
        raise LedgerFormatError(f"{where}: larger than {MAX_NOTE_BYTES} bytes; not a checkpoint")
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LedgerFormatError(f"{where}: not UTF-8 at byte {e.start}") from None
    if _CONTROL.search(s):
        raise LedgerFormatError(f"{where}: control character in a signed note")
    cut = s.rfind("\n\n")
    if cut < 0 or not s.endswith("\n"):
        raise LedgerFormatError(f"{where}: no blank line before signatures; not a signed note")
    text, sig_block = s[: cut + 1], s[cut + 2 :]
    sigs = []
    for n, line in enumerate(sig_block[:-1].split("\n"), start=text.count("\n") + 2):
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != _EM_DASH or not parts[1]:
            raise LedgerFormatError(f"{where}: line {n} is not a signature line")
        try:
            raw = b64decode_canonical(parts[2])
        except (binascii.Error, ValueError):
            raise LedgerFormatError(f"{where}: line {n}: signature is not base64") from None
        if len(raw) < 5:
            raise LedgerFormatError(f"{where}: line {n}: signature too short")
        sigs.append((parts[1], raw[:4], raw[4:]))
    if not sigs:
        raise LedgerFormatError(f"{where}: no signature lines")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise LedgerFormatError(f"{where}: checkpoint needs origin, tree size and root hash lines")
    origin, size_s, root_s, *ext = lines
    # a link, or a link's window log (windows=NAME, docs/ledger-format.md "Window logs")
    if not re.fullmatch(
        r"ledgertool/[0-9a-f]{32}/(windows=)?[A-Za-z0-9][A-Za-z0-9._-]{0,31}", origin
    ):
        raise LedgerFormatError(
            f"{where}: line 1: origin {origin!r} is not a ledgertool ledger link"
        )
    if not _SIZE_RE.fullmatch(size_s):
        raise LedgerFormatError(f"{where}: line 2: tree size {size_s!r} is not a decimal number")
    try:
        root = b64decode_canonical(root_s)
    except (binascii.Error, ValueError):
        root = b""
    if len(root) != 32:
        raise LedgerFormatError(f"{where}: line 3: root hash is not 32 bytes of base64")
    fields: dict[str, str] = {}
    other = []
    for n, line in enumerate(ext, start=4):
        if not line:
            raise LedgerFormatError(f"{where}: line {n}: empty extension line")
        key, _, val = line.partition(" ")
        if key in ("records", "last-seal", "time") and key not in fields:
            fields[key] = val
        else:
            other.append(line)
    records = fields.get("records")
    if records is not None and not _SIZE_RE.fullmatch(records):
        raise LedgerFormatError(f"{where}: records extension {records!r} is not a decimal number")
    cp = Checkpoint(
        origin,
        int(size_s),
        root,
        int(records) if records is not None else None,
        fields.get("last-seal"),
        fields.get("time"),
        tuple(other),
    )
    return SignedNote(cp, text.encode(), tuple(sigs))


@dataclass(frozen=True)
class RetiredKey:
    """A signing key set that a rotation retired on a link: it may vouch for the link's history
    before `effective_from` (the first segment its successor signs), never for what came after."""

    bundle: TrustBundle
    rotation: int
    effective_from: int


def verify_note(
    note: SignedNote, bundles: list[TrustBundle], retired: tuple[RetiredKey, ...] = ()
) -> str | None:
    """None when some trusted key set signed the note with every algorithm of its scheme;
    otherwise the reason. Signatures from unknown keys are ignored (signed-note rule); a known
    key whose signature fails rejects the note. `retired`: key sets left out of `bundles` because
    the checkpoint covers segments sealed after their retirement; a note only they signed is
    refused with that reason."""
    reason = _verify_note(note, bundles)
    if reason is None:
        return None
    cp = note.checkpoint
    for r in retired:
        if _verify_note(note, [r.bundle]) is None:
            return (
                f"signed by a retired signing key (rotation {r.rotation} replaced it from "
                f"segment {r.effective_from} of link {cp.link}), which cannot vouch for the "
                f"checkpoint's {plural(cp.size, 'segment')}"
            )
    return reason


def _verify_note(note: SignedNote, bundles: list[TrustBundle]) -> str | None:
    name = key_name_for(note.checkpoint.ledger_id)
    reasons = []
    for bundle in bundles:
        pubs = bundle.public_keys
        ok = True
        for alg in bundle.algorithms:
            kid = note_key_id(name, alg, pubs[alg])
            found = [sig for n, k, sig in note.signatures if n == name and k == kid]
            if not found:
                ok = False
                reasons.append(f"no {alg} signature by key {bundle.key_ids[alg][:16]}")
                continue
            # only this algorithm's signature is given: the scheme's others are "missing", not at
            # issue
            findings = bundle.verify_detailed(note.text, {alg: base64.b64encode(found[0]).decode()})
            if any(f.algorithm == alg for f in findings):
                return f"{alg} signature of key {bundle.key_ids[alg][:16]} does not verify"
        if ok:
            return None
    return "; ".join(reasons) or "no trusted key"


# ---- from a ledger ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkTree:
    """The seal hashes of a link's segments 0..n-1 (stops at the first missing or unparsable seal)
    and the records they hold."""

    seal_hashes: list[str]
    records: list[int]
    complete: bool  # False when a seal was missing/unreadable before the last one
    stopped: str | None = None  # why the chain stops early (None when complete)

    def root(self, size: int | None = None) -> bytes:
        return tree_root(self.seal_hashes[: len(self.seal_hashes) if size is None else size])


@dataclass(frozen=True)
class CheckpointFinding:
    kind: str  # checkpoint_bad_signature | checkpoint_not_extended | checkpoint_mismatch
    detail: str


def check_extends(
    note: SignedNote,
    tree: LinkTree,
    bundles: list[TrustBundle] | None,
    retired: tuple[RetiredKey, ...] = (),
) -> list[CheckpointFinding]:
    """Does the ledger (its link tree) extend the checkpoint? Pure given the tree. `bundles` None:
    the note's signatures are not checked (keyless checks); `retired` as for verify_note."""
    out = []
    cp = note.checkpoint
    reason = verify_note(note, bundles, retired) if bundles is not None else None
    if reason:
        # nothing the note says is the signer's: its size and root blame nothing in the ledger
        return [CheckpointFinding("checkpoint_bad_signature", f"checkpoint signature: {reason}")]
    n = len(tree.seal_hashes)
    if n < cp.size:
        why = "a segment is missing or unreadable" if not tree.complete else "its tail was cut"
        out.append(
            CheckpointFinding(
                "checkpoint_not_extended",
                f"checkpoint covers {plural(cp.size, 'segment')} of link {cp.link}, the ledger "
                f"holds {n} in an unbroken chain ({why})",
            )
        )
        return out
    if tree.root(cp.size) != cp.root:
        out.append(
            CheckpointFinding(
                "checkpoint_mismatch",
                f"the ledger's first {plural(cp.size, 'segment')} of link {cp.link} "
                f"{'has' if cp.size == 1 else 'have'} root {tree.root(cp.size).hex()[:16]}…, the "
                f"checkpoint says {cp.root.hex()[:16]}… (history rewritten "
                "or a fork)",
            )
        )
    elif cp.records is not None and sum(tree.records[: cp.size]) != cp.records:
        out.append(
            CheckpointFinding(
                "checkpoint_mismatch",
                f"checkpoint says {plural(cp.records, 'record')}, the seals hold "
                f"{sum(tree.records[: cp.size])}",
            )
        )
    return out


@dataclass
class ConsistencyResult:
    ok: bool
    old: Checkpoint
    new: Checkpoint
    proof: list[bytes]
    reason: str | None

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "origin": self.new.origin,
            "old_size": self.old.size,
            "new_size": self.new.size,
            "old_root": self.old.root.hex(),
            "new_root": self.new.root.hex(),
            "proof": [p.hex() for p in self.proof],
            "reason": self.reason,
        }
