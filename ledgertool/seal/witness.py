"""Witness cosignatures (c2sp.org/tlog-cosignature, Ed25519 cosignature/v1) and the
c2sp.org/tlog-witness add-checkpoint exchange, pure (docs/transparency.md, "Witnesses";
docs/adr/0017).

* A witness key is an Ed25519 key with a name. Its key id is
  ``SHA-256(name || 0x0A || 0x04 || 32-byte public key)[:4]``; its vkey is
  ``<name>+<key id, 8 hex>+base64(0x04 || public key)`` and its private key file
  ``PRIVATE+KEY+<name>+<key id>+base64(0x04 || 32-byte seed)`` (the signed-note key encodings).
* A cosignature is the note signature line ``— <name> base64(key id || u64be(timestamp) ||
  Ed25519 signature)`` over ``"cosignature/v1\\ntime <timestamp>\\n" || note text``.
* The add-checkpoint request body is ``old <size>\\n``, up to 63 base64 proof hashes one a line,
  an empty line, then the signed checkpoint note.
* `decide` is the witness's whole decision for one request, given what it holds for the origin.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..canonical import b64decode_canonical
from ..errors import KeyFileError, LedgerFormatError
from . import merkle
from .checkpoint import SignedNote, parse_note

COSIGNATURE_V1 = 0x04
ED25519_NOTE = 0x01
MAX_PROOF_LINES = 63
_EM_DASH = "\u2014"
_NAME_RE = re.compile(r"[^\s+\u2014]+")
_SIZE_RE = re.compile(r"0|[1-9][0-9]{0,19}")


def is_witness_name(name: str) -> bool:
    """A name a witness key may carry (C2SP signed-note: no spaces, '+' or em dashes)."""
    return _NAME_RE.fullmatch(name) is not None


def key_id(name: str, sig_type: int, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([sig_type]) + public_key).digest()[:4]


@dataclass(frozen=True)
class NoteKey:
    """A signed-note verifier key of one signature type: 0x01 (a log's Ed25519 key) or 0x04 (a
    witness's cosignature/v1 key)."""

    name: str
    sig_type: int
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.sig_type, self.public_key)

    def __str__(self) -> str:
        raw = bytes([self.sig_type]) + self.public_key
        return f"{self.name}+{self.key_id.hex()}+{base64.b64encode(raw).decode()}"


def parse_vkey(text: str, where: str, sig_type: int) -> NoteKey:
    """A vkey of the given signature type; KeyFileError naming `where` otherwise."""
    name, _, rest = text.strip().partition("+")
    parts = [name, *rest.split("+", 1)]  # base64 may hold '+'
    if (
        len(parts) != 3
        or not _NAME_RE.fullmatch(parts[0])
        or not re.fullmatch(r"[0-9a-f]{8}", parts[1])
    ):
        raise KeyFileError(f"{where}: not a vkey (NAME+KEYID+BASE64)")
    try:
        raw = b64decode_canonical(parts[2])
    except (binascii.Error, ValueError):
        raise KeyFileError(f"{where}: vkey key material is not base64") from None
    if len(raw) != 33 or raw[0] != sig_type:
        raise KeyFileError(
            f"{where}: vkey is not a type 0x{sig_type:02x} Ed25519 key "
            f"({'a cosignature/v1 witness key' if sig_type == COSIGNATURE_V1 else 'a log key'} "
            "was expected)"
        )
    key = NoteKey(parts[0], sig_type, raw[1:])
    if key.key_id.hex() != parts[1]:
        raise KeyFileError(f"{where}: vkey key id {parts[1]} does not match its name and key")
    return key


@dataclass(frozen=True)
class WitnessSigner:
    """A witness's private key (cosignature/v1)."""

    name: str
    seed: bytes  # 32-byte Ed25519 private key

    @property
    def public(self) -> NoteKey:
        priv = Ed25519PrivateKey.from_private_bytes(self.seed)
        return NoteKey(self.name, COSIGNATURE_V1, priv.public_key().public_bytes_raw())

    def encode(self) -> str:
        raw = bytes([COSIGNATURE_V1]) + self.seed
        kid = self.public.key_id.hex()
        return f"PRIVATE+KEY+{self.name}+{kid}+{base64.b64encode(raw).decode()}\n"

    def cosign(self, note_text: bytes, timestamp: int) -> str:
        """One cosignature line (with its newline) over the note text at `timestamp`."""
        if not 0 <= timestamp < 1 << 63:
            raise ValueError("timestamp out of range")
        sig = Ed25519PrivateKey.from_private_bytes(self.seed).sign(
            cosigned_message(note_text, timestamp)
        )
        raw = self.public.key_id + timestamp.to_bytes(8, "big") + sig
        return f"{_EM_DASH} {self.name} {base64.b64encode(raw).decode()}\n"


def parse_signer(text: str, where: str) -> WitnessSigner:
    parts = text.strip().split("+", 4)  # base64 may hold '+'
    if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"] or not _NAME_RE.fullmatch(parts[2]):
        raise KeyFileError(f"{where}: not a witness key (PRIVATE+KEY+NAME+KEYID+BASE64)")
    try:
        raw = b64decode_canonical(parts[4])
    except (binascii.Error, ValueError):
        raise KeyFileError(f"{where}: witness key material is not base64") from None
    if len(raw) != 33 or raw[0] != COSIGNATURE_V1:
        raise KeyFileError(f"{where}: not a cosignature/v1 (type 0x04) Ed25519 key")
    signer = WitnessSigner(parts[2], raw[1:])
    if signer.public.key_id.hex() != parts[3]:
        raise KeyFileError(f"{where}: key id {parts[3]} does not match the key")
    return signer


def cosigned_message(note_text: bytes, timestamp: int) -> bytes:
    return b"cosignature/v1\ntime " + str(timestamp).encode() + b"\n" + note_text


@dataclass(frozen=True)
class Cosignature:
    key: NoteKey
    timestamp: int
    valid: bool


def cosignatures(note: SignedNote, keys: list[NoteKey]) -> list[Cosignature]:
    """The note's signature lines from `keys` (by name and key id; others are ignored, as
    signed-note says), each checked: a line that is not 72 bytes or whose signature fails is
    `valid` False."""
    out = []
    for k in keys:
        for name, kid, sig in note.signatures:
            if name != k.name or kid != k.key_id:
                continue
            ok, ts = False, -1
            if len(sig) == 72:
                ts = int.from_bytes(sig[:8], "big")
                try:
                    Ed25519PublicKey.from_public_bytes(k.public_key).verify(
                        sig[8:], cosigned_message(note.text, ts)
                    )
                    ok = ts < 1 << 63
                except InvalidSignature:
                    ok = False
            out.append(Cosignature(k, ts, ok))
    return out


def log_signed(note: SignedNote, keys: list[NoteKey]) -> bool:
    """Whether one of the log's Ed25519 keys (type 0x01) signed the note."""
    for k in keys:
        for name, kid, sig in note.signatures:
            if name == k.name and kid == k.key_id:
                try:
                    Ed25519PublicKey.from_public_bytes(k.public_key).verify(sig, note.text)
                    return True
                except InvalidSignature:
                    continue
    return False


def with_signatures(note: bytes, lines: list[str]) -> bytes:
    """The note with signature lines added (those it already carries are not repeated)."""
    have = set(note.decode().split("\n"))
    return note + "".join(x for x in lines if x.rstrip("\n") not in have).encode()


# ---- add-checkpoint --------------------------------------------------------------------------


@dataclass(frozen=True)
class AddCheckpoint:
    old_size: int
    proof: tuple[bytes, ...]
    note: bytes


def request_body(old_size: int, proof: list[bytes], note: bytes) -> bytes:
    lines = [f"old {old_size}\n"] + [base64.b64encode(h).decode() + "\n" for h in proof]
    return "".join(lines).encode() + b"\n" + note


def parse_request(body: bytes) -> AddCheckpoint:
    """LedgerFormatError (a 400) for a body that is not an add-checkpoint request."""
    head, sep, note = body.partition(b"\n\n")
    if not sep:
        raise LedgerFormatError("request: no empty line before the checkpoint")
    try:
        lines = head.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise LedgerFormatError("request: old size and proof lines are not ASCII") from None
    first = lines[0].split(" ")
    if len(first) != 2 or first[0] != "old" or not _SIZE_RE.fullmatch(first[1]):
        raise LedgerFormatError("request: the first line is not `old <size>`")
    if len(lines) - 1 > MAX_PROOF_LINES:
        raise LedgerFormatError(f"request: more than {MAX_PROOF_LINES} proof lines")
    proof = []
    for line in lines[1:]:
        try:
            h = b64decode_canonical(line)
        except (binascii.Error, ValueError):
            h = b""
        if len(h) != 32:
            raise LedgerFormatError("request: a proof line is not a base64 32-byte hash")
        proof.append(h)
    return AddCheckpoint(int(first[1]), tuple(proof), note)


@dataclass(frozen=True)
class Held:
    """What a witness holds for one log: the latest checkpoint it cosigned."""

    size: int
    root: bytes
    note: bytes


@dataclass(frozen=True)
class Decision:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    new: Held | None = None  # to persist before answering (200 only)


def decide(
    body: bytes,
    logs: dict[str, list[NoteKey]],
    held: dict[str, Held],
    signer: WitnessSigner,
    now: int,
) -> Decision:
    """The tlog-witness answer to one add-checkpoint body: 400 malformed or old > size, 404
    unknown origin, 403 no trusted log signature, 409 (old size is not the held size: body the
    held size, text/x.tlog.size; or same size, other root), 422 the consistency proof fails, 200
    the cosignature line (and the checkpoint to hold)."""
    try:
        req = parse_request(body)
        note = parse_note(req.note, "request checkpoint")
    except LedgerFormatError as e:
        return Decision(400, f"{e}\n".encode())
    cp = note.checkpoint
    keys = logs.get(cp.origin)
    if keys is None:
        return Decision(404, f"unknown log {cp.origin}\n".encode())
    if not log_signed(note, keys):
        return Decision(403, b"no signature by a key this witness trusts for the log\n")
    if req.old_size > cp.size:
        return Decision(400, b"old size is larger than the checkpoint's\n")
    cur = held.get(cp.origin)
    cur_size = cur.size if cur is not None else 0
    if req.old_size != cur_size:
        return Decision(409, f"{cur_size}\n".encode(), "text/x.tlog.size")
    if cur is not None and cur.size == cp.size:
        if cur.root != cp.root:
            return Decision(409, b"same size, another root: a fork; not cosigned\n")
        if req.proof:
            return Decision(422, b"a proof between equal sizes must be empty\n")
    elif cur is not None:
        if not merkle.verify_consistency(cur.size, cp.size, cur.root, cp.root, list(req.proof)):
            return Decision(422, b"the consistency proof does not verify\n")
    elif req.proof:
        return Decision(422, b"the proof from size 0 must be empty\n")
    line = signer.cosign(note.text, now)
    return Decision(200, line.encode(), new=Held(cp.size, cp.root, req.note))
