"""The device's MAC over open-segment blocks (open-segment format v2;
docs/adr/0009-authenticated-open-segments.md).

A capture writes its records to `seg-N.open` before they are sealed; storage is the adversary's,
so recovery seals only blocks whose HMAC-SHA-256 (RFC 2104, FIPS 198-1) verifies under a key only
the device holds: derived by HKDF-SHA256 (RFC 5869) from the signing key's private material,
salted with the ledger id. The chain starts from a MAC over the segment's 256-byte header (ledger
id, link, segment index, first seq, digest key id, MAC key id) and each block's MAC covers the
previous one and the block index, so a block cannot be planted, rewritten, moved or reordered
without the key. A block's MAC covers its records through their leaf-chunk hashes (SHA-256(0x00 ||
chunk), chunks of leaf_records records from the block's start): the writer computes them once, in
C, for the MAC and the Merkle root (ledger.segment). docs/ledger-format.md, "v2 body: authenticated
blocks", gives the bytes.
"""

from __future__ import annotations

import hmac
import struct
import uuid
from dataclasses import dataclass, field

from ..digest.engine import merkle_leaves
from ..keyfiles import SigningKey

KEY_INFO = b"ledgertool open-segment mac key v2"
KEY_ID_LABEL = b"ledgertool open-segment key id v2"
HEADER_LABEL = b"ledgertool open-segment header v2\0"
# the records enter a block's MAC through their leaf-chunk hashes; the label differs from the
# earlier MAC over the record bytes ("... block v2"), so such a file fails as "does not verify"
BLOCK_LABEL = b"ledgertool open-segment leaves v2\0"
MAC_SIZE = 32
KEY_ID_BYTES = 16
_BLOCK_FIELDS = struct.Struct("<QI")  # block index, record count


@dataclass(frozen=True)
class OpenSegmentKey:
    """One ledger's open-segment MAC key and its one-way id (32 hex characters)."""

    secret: bytes = field(repr=False)
    key_id: str

    @classmethod
    def derive(cls, signing_key: SigningKey, ledger_id: str) -> OpenSegmentKey:
        """The key of ledger `ledger_id` (uuid hex): HKDF-SHA256(ikm = the signing key's private
        material, salt = the 16 ledger id bytes, info = KEY_INFO, 32 bytes); its id is the first
        16 bytes of HMAC-SHA-256(key, KEY_ID_LABEL)."""
        secret = signing_key.derive_secret(KEY_INFO, uuid.UUID(hex=ledger_id).bytes)
        return cls(secret, hmac.digest(secret, KEY_ID_LABEL, "sha256")[:KEY_ID_BYTES].hex())

    def chain_start(self, header: bytes) -> bytes:
        """The chain value before block 0: HMAC(key, HEADER_LABEL || the 256 header bytes)."""
        return hmac.digest(self.secret, HEADER_LABEL + header, "sha256")

    def block_mac(
        self, prev: bytes, index: int, count: int, chunk_hashes: bytes | memoryview
    ) -> bytes:
        """MAC of block `index` (from 0) holding `count` records: HMAC(key, BLOCK_LABEL || prev ||
        u64 index || u32 count || chunk_hashes), `prev` being the previous block's MAC (chain_start
        for block 0), `chunk_hashes` the block's leaf-chunk hashes (`chunk_hashes`). Integers
        little-endian."""
        h = hmac.new(self.secret, BLOCK_LABEL + prev + _BLOCK_FIELDS.pack(index, count), "sha256")
        h.update(chunk_hashes)
        return h.digest()


def chunk_hashes(
    records: bytes | memoryview, record_size: int, leaf_records: int, leaf_hash: str = "sha256"
) -> bytes:
    """L(i, 0) || L(i, 1) || ...: SHA-256(0x00 || chunk) of each run of `leaf_records` records of
    one block, from the block's first record (the last run may be shorter). Equal to the Merkle
    leaves of the block's records, which is how the C writer and recovery compute them."""
    return merkle_leaves(records, record_size, leaf_records, leaf_hash)
