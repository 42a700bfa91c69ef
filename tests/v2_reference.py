"""A pure-Python writer of ledger format v2, for tests only, written from
docs/ledger-format.md (not from ledgertool's writer): ledger.json, sealed segments as raw record
files (`seg-N.rec`: the v2 open-segment bytes, header + blocks) or as Parquet, `.leaves` sidecars,
`ledgertool-seal-v2` documents and the link checkpoint. Hashing, canonical JSON and Parquet are
hashlib / rfc8785 / pyarrow; only the signatures (SigningKey), the checkpoint note and the records
of a real capture (the digest engine) come from ledgertool. Tests use it to check the reader side
independently of the writer side, and later to cross-check the two.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import rfc8785

LEDGER_V2 = "ledgertool-ledger-v2"
SEAL_V2 = "ledgertool-seal-v2"
SEAL_PREFIX = b"ledgertool seal v1\n"  # the signed-bytes rule is unchanged in v2
HEADER = struct.Struct("<8sHHHH16sIIQ16s32s32s16sq16s")  # v2 open-segment header, padded to 256
MAC_KEY_INFO = b"ledgertool open-segment mac key v2"
MAC_KEY_ID_LABEL = b"ledgertool open-segment key id v2"
MAC_HEADER_LABEL = b"ledgertool open-segment header v2\0"
MAC_LEAVES_LABEL = b"ledgertool open-segment leaves v2\0"
RECORD = struct.Struct("<QqIIHHI")
FLAG_GAP = 0x8000


def sha256(b: bytes) -> bytes:
    return hashlib.sha256(b).digest()


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 s2.1.1 tree hash over leaf hashes."""
    if not leaves:
        return sha256(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def leaf_entry(block: bytes, leaf_hash: str = "sha256") -> bytes:
    """What a leaf hashes after 0x00: the block (sha256 leaves) or its BLAKE3-256 (the blake3
    package)."""
    if leaf_hash == "blake3":
        import blake3

        return blake3.blake3(block).digest()
    assert leaf_hash == "sha256"
    return block


def leaf_hashes(
    records: bytes, record_size: int, leaf_records: int, leaf_hash: str = "sha256"
) -> list[bytes]:
    step = record_size * leaf_records
    return [
        sha256(b"\x00" + leaf_entry(records[i : i + step], leaf_hash))
        for i in range(0, len(records), step)
    ]


def synthetic_records(
    n: int,
    first_seq: int = 0,
    digest_size: int = 16,
    seed: int = 0,
    *,
    gaps: dict[int, int] | None = None,
    ts0: int = 1_700_000_000_000_000_000,
) -> bytes:
    """n records numbered from first_seq, ts 1 µs apart; `gaps` {record index: drops} makes GAP
    records."""
    # built as one array (the same bytes as packing each record; ~50x faster for many records)
    rnd = np.random.default_rng(seed)
    k = np.arange(n, dtype=np.int64)
    arr = np.zeros(n, np.dtype([("fixed", "V32"), ("digest", f"V{digest_size}")]))
    fixed = np.zeros(
        n, np.dtype([("seq", "<u8"), ("ts", "<i8"), ("wire", "<u4"), ("cap", "<u4"),
                     ("flags", "<u2"), ("linktype", "<u2"), ("aux", "<u4")])
    )  # fmt: skip
    fixed["seq"] = first_seq + k
    fixed["ts"] = ts0 + 1000 * (first_seq + k)
    fixed["wire"] = fixed["cap"] = 60 + k % 1400
    fixed["linktype"] = 1
    gap = np.zeros(n, bool)
    for i, drops in (gaps or {}).items():
        if 0 <= i < n:
            gap[i] = True
            fixed[i] = (first_seq + i, ts0 + 1000 * (first_seq + i), 0, 0, FLAG_GAP, 0, drops)
    arr["fixed"] = fixed.view("V32")
    # the generator's bytes are one stream: one draw for every digest equals a draw per record
    drawn = np.frombuffer(rnd.bytes(digest_size * int((~gap).sum())), f"V{digest_size}")
    arr["digest"][~gap] = drawn
    return arr.tobytes()


def capture_records(
    pcap: Path, digest_key, algorithm: str = "siphash-1-3-128", strip: str = "frame"
) -> bytes:
    """The records of a real capture, from the project's digest engine (seq from 0)."""
    from ledgertool.algorithms import get_algorithm, get_strip_mode
    from ledgertool.digest.engine import DigestEngine
    from ledgertool.source import open_source

    alg = get_algorithm(algorithm)
    reader = open_source(pcap)
    try:
        engine = DigestEngine(
            reader, alg, get_strip_mode(strip), digest_key.subkey(alg.name, alg.key_size), workers=1
        )
        out, seq = bytearray(), 0
        while True:
            records, n, _ = engine.fill(seq, 1 << 16)
            if n == 0:
                return bytes(out)
            out += bytes(records[: n * (32 + alg.digest_size)])
            seq += n
    finally:
        reader.close()


@dataclass(frozen=True)
class Ledger:
    directory: Path
    ledger_id: str
    algorithm: str
    strip: str
    digest_key_id: str
    digest_size: int
    leaf_records: int
    header_bytes: bytes
    leaf_hash: str = "sha256"  # ledger.json's leaf_hash (absent: sha256)

    @property
    def record_size(self) -> int:
        return 32 + self.digest_size


def write_ledger_json(
    directory: Path,
    *,
    algorithm: str,
    strip: str,
    digest_key_id: str,
    digest_size: int,
    leaf_records: int = 256,
    ledger_id: str | None = None,
    leaf_hash: str = "sha256",
) -> Ledger:
    directory.mkdir(parents=True, exist_ok=True)
    ledger_id = ledger_id or uuid.uuid4().hex
    doc = {
        "format": LEDGER_V2,
        "ledger_id": ledger_id,
        "algorithm": algorithm,
        "strip": strip,
        "digest_key_id": digest_key_id,
        "digest_size": digest_size,
        "record_size": 32 + digest_size,
        "leaf_records": leaf_records,
        "created_at": "2026-12-01T00:00:00+00:00",
    }
    if leaf_hash != "sha256":
        doc["leaf_hash"] = leaf_hash
    raw = (json.dumps(doc, indent=1) + "\n").encode()
    (directory / "ledger.json").write_bytes(raw)
    return Ledger(
        directory,
        ledger_id,
        algorithm,
        strip,
        digest_key_id,
        digest_size,
        leaf_records,
        raw,
        leaf_hash,
    )


def segment_header(
    ledger: Ledger,
    link: str,
    index: int,
    first_seq: int,
    mac_key_id: bytes,
    digest_key_id: str | None = None,
) -> bytes:
    raw = HEADER.pack(
        b"LTSEGv2\n",
        2,
        256,
        ledger.record_size,
        ledger.digest_size,
        uuid.UUID(hex=ledger.ledger_id).bytes,
        index,
        ledger.leaf_records,
        first_seq,
        bytes.fromhex(digest_key_id or ledger.digest_key_id),
        link.encode(),
        ledger.algorithm.encode(),
        ledger.strip.encode(),
        1_700_000_000_000_000_000,
        mac_key_id,
    )
    return raw.ljust(256, b"\0")


def mac_key(signing_key, ledger_id: str) -> tuple[bytes, bytes]:
    """(K, mac_key_id): HKDF from the signing key's private material, salted with the ledger id."""
    k = signing_key.derive_secret(MAC_KEY_INFO, uuid.UUID(hex=ledger_id).bytes)
    return k, hmac.digest(k, MAC_KEY_ID_LABEL, "sha256")[:16]


def rec_bytes(
    ledger: Ledger,
    link: str,
    index: int,
    first_seq: int,
    records: bytes,
    signing_key,
    block_records: list[int] | None = None,
) -> bytes:
    """A v2 raw record file: header, then blocks of `block_records` (default: leaf_records each, the
    last shorter) with the v2 MAC over each block's leaf-chunk hashes, chained."""
    k, kid = mac_key(signing_key, ledger.ledger_id)
    header = segment_header(ledger, link, index, first_seq, kid)
    rs, n = ledger.record_size, len(records) // ledger.record_size
    if block_records is None:
        block_records = [min(ledger.leaf_records, n - i) for i in range(0, n, ledger.leaf_records)]
    assert sum(block_records) == n and all(1 <= c <= 65536 for c in block_records)
    out, chain, pos = bytearray(header), hmac.digest(k, MAC_HEADER_LABEL + header, "sha256"), 0
    for i, count in enumerate(block_records):
        body = records[pos * rs : (pos + count) * rs]
        leaves = b"".join(leaf_hashes(body, rs, ledger.leaf_records, ledger.leaf_hash))
        chain = hmac.digest(
            k, MAC_LEAVES_LABEL + chain + struct.pack("<QI", i, count) + leaves, "sha256"
        )
        out += struct.pack("<I", count) + body + chain
        pos += count
    return bytes(out)


def parquet_bytes(records: bytes, digest_size: int, index: int) -> bytes:
    """The records as the v1/v2 Parquet columns (docs/ledger-format.md, "Sealed segment:
    Parquet")."""
    rs = 32 + digest_size
    rows = [RECORD.unpack_from(records, i) for i in range(0, len(records), rs)]
    cols = list(zip(*rows)) if rows else [()] * 7
    schema = pa.schema(
        [
            ("segment", pa.uint32()),
            ("seq", pa.uint64()),
            ("ts_ns", pa.int64()),
            ("wire_len", pa.uint32()),
            ("cap_len", pa.uint32()),
            ("flags", pa.uint16()),
            ("linktype", pa.uint16()),
            ("aux", pa.uint32()),
            ("digest", pa.binary(digest_size)),
        ]
    )
    digests = [records[i + 32 : i + rs] for i in range(0, len(records), rs)]
    table = pa.Table.from_arrays(
        [pa.array([index] * len(rows), pa.uint32())]
        + [pa.array(list(c), t.type) for c, t in zip(cols, list(schema)[1:8])]
        + [pa.array(digests, pa.binary(digest_size))],
        schema=schema,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def seal_body(doc: dict) -> bytes:
    return rfc8785.dumps({k: v for k, v in doc.items() if k != "signatures"})


def seal_hash(doc: dict) -> str:
    return sha256(seal_body(doc)).hex()


def genesis_hash(ledger_id: str, link: str) -> str:
    return sha256(
        b"ledgertool genesis v1\0" + bytes.fromhex(ledger_id) + b"\0" + link.encode()
    ).hex()


def seal_v2(
    ledger: Ledger,
    link: str,
    index: int,
    first_seq: int,
    records: bytes,
    prev: str,
    signing_key,
    **override,
) -> dict:
    rs = ledger.record_size
    recs = [records[i : i + rs] for i in range(0, len(records), rs)]
    fields = [RECORD.unpack_from(r) for r in recs]
    gaps = [f for f in fields if f[4] & FLAG_GAP]
    doc = {
        "format": SEAL_V2,
        "ledger_id": ledger.ledger_id,
        "link": link,
        "segment": index,
        "algorithm": ledger.algorithm,
        "strip": ledger.strip,
        "digest_key_id": ledger.digest_key_id,
        "record_size": rs,
        "leaf_records": ledger.leaf_records,
        "ledger_header_sha256": sha256(ledger.header_bytes).hex(),
        "records": len(recs),
        "frames": len(recs) - len(gaps),
        "drops_declared": sum(f[6] for f in gaps),
        "first_seq": str(first_seq),
        "last_seq": str(fields[-1][0] if recs else first_seq - 1),
        "first_ts_ns": str(fields[0][1]) if recs else None,
        "last_ts_ns": str(fields[-1][1]) if recs else None,
        "merkle_root": mth(leaf_hashes(records, rs, ledger.leaf_records, ledger.leaf_hash)).hex(),
        "prev_seal_hash": prev,
        "torn_bytes_discarded": 0,
        "source": "v2_reference",
        "sealed_at": "2026-12-01T00:00:00+00:00",
        "signer": signing_key.trust_bundle().key_ids,
    }
    doc.update(override)
    doc["signatures"] = signing_key.sign(SEAL_PREFIX + seal_body(doc))
    return doc


@dataclass
class Written:
    ledger: Ledger
    link: str
    seals: list[dict] = field(default_factory=list)
    records: list[bytes] = field(default_factory=list)

    def path(self, index: int, kind: str) -> Path:
        return self.ledger.directory / f"link={self.link}" / f"seg-{index:08d}.{kind}"


def write_v2_ledger(
    directory: Path,
    signing_key,
    segments: list[bytes],
    *,
    algorithm: str = "siphash-1-3-128",
    strip: str = "frame",
    digest_key_id: str = "00" * 16,
    leaf_records: int = 256,
    link: str = "link0",
    form: str = "rec",
    checkpoint: bool = True,
    block_records: list[list[int] | None] | None = None,
    leaf_hash: str = "sha256",
) -> Written:
    """A v2 ledger of one link with `segments` (each the record bytes of one segment, seq
    contiguous) sealed in `form` ("rec" or "parquet"), with .leaves sidecars and a checkpoint."""
    from ledgertool.algorithms import get_algorithm
    from ledgertool.ledger.checkpoints import write_checkpoint
    from ledgertool.ledger.header import parse_ledger_header
    from ledgertool.seal.checkpoint import LinkTree

    ds = get_algorithm(algorithm).digest_size
    led = write_ledger_json(
        directory,
        algorithm=algorithm,
        strip=strip,
        digest_key_id=digest_key_id,
        digest_size=ds,
        leaf_records=leaf_records,
        leaf_hash=leaf_hash,
    )
    (directory / f"link={link}").mkdir(exist_ok=True)
    out = Written(led, link)
    prev, seq = genesis_hash(led.ledger_id, link), 0
    for i, records in enumerate(segments):
        doc = seal_v2(led, link, i, seq, records, prev, signing_key)
        out.path(i, "seal.json").write_text(json.dumps(doc, indent=1) + "\n")
        out.path(i, "leaves").write_bytes(
            b"".join(leaf_hashes(records, led.record_size, leaf_records, leaf_hash))
        )
        if form == "rec":
            blocks = block_records[i] if block_records else None
            out.path(i, "rec").write_bytes(
                rec_bytes(led, link, i, seq, records, signing_key, blocks)
            )
        else:
            out.path(i, "parquet").write_bytes(parquet_bytes(records, ds, i))
        out.seals.append(doc)
        out.records.append(records)
        prev, seq = seal_hash(doc), seq + len(records) // led.record_size
    if checkpoint:
        header = parse_ledger_header(led.header_bytes, directory / "ledger.json")
        tree = LinkTree([seal_hash(d) for d in out.seals], [d["records"] for d in out.seals], True)
        write_checkpoint(directory, header, link, signing_key, tree)
    return out
