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
from pathlib import Path

from ..canonical import canonical_json, loads_strict
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
    return hashlib.sha256(b"ledgertool genesis v1\0" + uuid.UUID(hex=ledger_id).bytes + b"\0"
                          + link.encode()).hexdigest()


def seal_body(doc: dict) -> dict:
    """The signed part of a seal document: everything but "signatures"."""
    return {k: v for k, v in doc.items() if k != "signatures"}


def seal_signed_bytes(doc: dict) -> bytes:
    return seal_message(canonical_json(seal_body(doc)))


def seal_hash(doc: dict) -> str:
    """SHA-256 (hex) of the canonical signed body; the next seal's prev_seal_hash."""
    return hashlib.sha256(canonical_json(seal_body(doc))).hexdigest()


def parse_seal(data: bytes, where: Path | str) -> dict:
    """Parse the bytes of a seal document (v1 or v2) (strict JSON: `canonical.loads_strict`); LedgerFormatError
    naming `where` when it is not one."""
    doc = loads_strict(data, str(where))
    if not isinstance(doc, dict) or doc.get("format") not in SEAL_FORMATS:
        raise LedgerFormatError(f"{where}: not a {SEAL_FORMAT} or {SEAL_FORMAT_V2} document")
    return doc
