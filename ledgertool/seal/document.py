"""The seal document (docs/ledger-format.md, "Seal"), pure: its formats, its signed bytes, its hash
and its parse. Writing seals (ledger/sealer.py) and reading them from a ledger directory are the
ledger package's.

The seal is JSON; its signed bytes are the RFC 8785 canonical encoding of the document without its
"signatures" member, prefixed with the domain separator of keys.seal_message. u64 values (sequence
numbers, timestamps) are decimal strings because RFC 8785 numbers are IEEE doubles. Seals are
hash-chained per link: each names the SHA-256 of the previous seal's signed body; the first names
a genesis hash derived from the ledger id and link.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..canonical import SignedDocument, canonical_json, loads_strict
from ..errors import LedgerFormatError
from ..keyfiles import seal_message

SEAL_FORMAT = "ledgertool-seal-v1"
#: ledger format v2: the records are a raw record file or Parquet, authenticated by the root alone
SEAL_FORMAT_V2 = "ledgertool-seal-v2"
SEAL_FORMATS = (SEAL_FORMAT, SEAL_FORMAT_V2)
MAX_SEAL_BYTES = 1 << 20  # a hybrid-signed seal is about 6 KB


def genesis_hash(ledger_id: str, link: str) -> str:
    """The 'previous seal hash' of a link's first seal: SHA-256 over a fixed label, the ledger id
    (16 bytes) and the link name."""
    return hashlib.sha256(
        b"ledgertool genesis v1\0" + uuid.UUID(hex=ledger_id).bytes + b"\0" + link.encode()
    ).hexdigest()


#: A member's value as a seal document states it: any JSON value, None when the member is absent.
#: Unchecked until verify has checked it (a tampered seal may hold anything in any member).
Claim = object


@dataclass(frozen=True)
class Seal(SignedDocument):
    """A seal document as parse_seal read it: its members by name (docs/ledger-format.md, "Seal
    document"), the names it has (`members`, unknown ones included) and its canonical signed bytes.
    Only `format` is checked by the parse; verify checks the rest. The document as parsed is kept
    privately, so the signed bytes are those of every member it had, unknown ones included."""

    format: str
    ledger_id: Claim = None
    link: Claim = None
    segment: Claim = None
    algorithm: Claim = None
    strip: Claim = None
    digest_key_id: Claim = None
    record_size: Claim = None
    leaf_records: Claim = None
    ledger_header_sha256: Claim = None
    records: Claim = None
    frames: Claim = None
    drops_declared: Claim = None
    first_seq: Claim = None
    last_seq: Claim = None
    first_ts_ns: Claim = None
    last_ts_ns: Claim = None
    merkle_root: Claim = None
    parquet_file: Claim = None  # v1 only
    parquet_sha256: Claim = None  # v1 only
    parquet_bytes: Claim = None  # v1 only
    prev_seal_hash: Claim = None
    torn_bytes_discarded: Claim = None
    source: Claim = None
    sealed_at: Claim = None
    signer: Claim = None
    signatures: Claim = None

    @property
    def v2(self) -> bool:
        """A ledgertool-seal-v2 seal: the records are authenticated by the signed root alone."""
        return self.format == SEAL_FORMAT_V2

    def signed_bytes(self) -> bytes:
        """What the signatures sign: keys.seal_message over signed_body()."""
        return seal_message(self.signed_body())

    def hash(self) -> str:
        """SHA-256 (hex) of signed_body(): the next seal's prev_seal_hash."""
        return hashlib.sha256(self.signed_body()).hexdigest()


def seal_body(doc: Mapping) -> dict:
    """The signed part of a seal document being built: everything but "signatures"."""
    return {k: v for k, v in doc.items() if k != "signatures"}


def seal_signed_bytes(doc: Seal | Mapping) -> bytes:
    """The signed bytes of a seal, or of a document being built (ledger.sealer)."""
    if isinstance(doc, Seal):
        return doc.signed_bytes()
    return seal_message(canonical_json(seal_body(doc)))


def seal_hash(doc: Seal | Mapping) -> str:
    """SHA-256 (hex) of the canonical signed body; the next seal's prev_seal_hash."""
    if isinstance(doc, Seal):
        return doc.hash()
    return hashlib.sha256(canonical_json(seal_body(doc))).hexdigest()


def parse_seal(data: bytes, where: Path | str) -> Seal:
    """Parse the bytes of a seal document (v1 or v2) (strict JSON: `canonical.loads_strict`);
    LedgerFormatError naming `where` when it is not one. Members other than the format's are
    kept (verify names them in a v2 seal) and signed over like the others."""
    doc = loads_strict(data, str(where))
    if not isinstance(doc, dict) or doc.get("format") not in SEAL_FORMATS:
        raise LedgerFormatError(f"{where}: not a {SEAL_FORMAT} or {SEAL_FORMAT_V2} document")
    return Seal.of(doc)
