"""The ledger directory: its header (ledger.json) and the state of each link's seal chain.

    DIR/ledger.json                      format, ledger id, algorithm, strip mode, digest key id,
                                         record size, Merkle leaf size
    DIR/link=NAME/seg-NNNNNNNN.open      open segment (append-only; gone once sealed)
    DIR/link=NAME/seg-NNNNNNNN.parquet   sealed records
    DIR/link=NAME/seg-NNNNNNNN.seal.json signed seal document
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import fsio, segments
from .canonical import loads_strict
from .errors import LedgerFormatError, UsageError
from .ledger_reader import LEDGER_FILE, LedgerReader
from .seal import genesis_hash, load_seal, seal_hash, write_atomic

LEDGER_FORMAT = "ledgertool-ledger-v1"
DEFAULT_LEAF_RECORDS = 64  # records per Merkle leaf (docs/ledger-format.md: why 64)
DEFAULT_LINK = "link0"
MAX_LEDGER_FILE_BYTES = 1 << 16  # ledger.json is a few hundred bytes


def create_ledger(directory: Path, *, algorithm: str, strip: str, digest_key_id: str,
                  digest_size: int, leaf_records: int = DEFAULT_LEAF_RECORDS) -> dict:
    """Create DIR/ledger.json (DIR may exist but must not hold a ledger). StorageError /
    FileTypeError as fsio.write_atomic."""
    fsio.make_dirs(directory)
    if os.path.lexists(directory / LEDGER_FILE):
        raise LedgerFormatError(f"{directory}: already holds a ledger")
    if leaf_records < 1 or leaf_records & (leaf_records - 1):
        raise LedgerFormatError(f"leaf size {leaf_records} is not a power of two")
    doc = {
        "format": LEDGER_FORMAT,
        "ledger_id": uuid.uuid4().hex,
        "algorithm": algorithm,
        "strip": strip,
        "digest_key_id": digest_key_id,
        "digest_size": digest_size,
        "record_size": 32 + digest_size,
        "leaf_records": leaf_records,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    write_atomic(directory / LEDGER_FILE, (json.dumps(doc, indent=1) + "\n").encode(), root=directory,
                 what="ledger header")
    return doc


def load_ledger(directory: Path) -> dict:
    """Read DIR/ledger.json (strict JSON: `canonical.loads_strict`); LedgerFormatError when DIR is
    not a ledger."""
    directory = Path(directory)
    LedgerReader(directory)  # a directory (LedgerFormatError naming what it is otherwise)
    path = directory / LEDGER_FILE
    if not os.path.lexists(path):
        raise LedgerFormatError(f"{directory}: not a ledger (no {LEDGER_FILE})")
    raw = fsio.read_regular(path, MAX_LEDGER_FILE_BYTES, root=directory, what="ledger header")
    return parse_ledger_header(raw, path)


def parse_ledger_header(data: bytes, path: Path | str) -> dict:
    """The ledger header from the bytes of ledger.json; LedgerFormatError naming `path`."""
    doc = loads_strict(data, str(path))
    required = ("ledger_id", "algorithm", "strip", "digest_key_id", "digest_size", "record_size",
                "leaf_records")
    if not isinstance(doc, dict) or doc.get("format") != LEDGER_FORMAT or any(k not in doc for k in required):
        raise LedgerFormatError(f"{path}: not a {LEDGER_FORMAT} header")
    return doc


def links(directory: Path) -> list[str]:
    """Link names of the ledger (valid ASCII names of link=NAME directories), sorted."""
    return LedgerReader(Path(directory)).links


def choose_link(directory: Path, link: str | None) -> str:
    """The link a per-link command works on: `link` when the ledger has it, else the ledger's only
    link. UsageError when `link` is absent or, with no `link`, when the ledger has several."""
    names = links(directory)
    if link is None:
        if len(names) != 1:
            raise UsageError(f"{directory}: ledger has links {', '.join(names) or 'none'}; choose one with --link")
        return names[0]
    if link not in names:
        raise UsageError(f"{directory}: no link {link!r} (links: {', '.join(names) or 'none'})")
    return link


def segment_files(directory: Path, link: str) -> dict[int, dict[str, Path]]:
    """index -> {'open'|'parquet'|'leaves'|'seal.json': path} for one link: the regular files with
    ASCII segment names (ledgertool.ledger_reader), nothing else. FileTypeError when something that
    is not a regular file (a link, a FIFO) sits at a segment file's name: the writers and signers
    that use this listing must neither write over it nor skip it."""
    reader = LedgerReader(Path(directory))
    if not reader.link_dir(link).is_dir():
        return {}
    listing = reader.listing(link)
    for stray in listing.strays:  # a link, FIFO ... at a segment file's name: never written over or read
        if stray.shadows is not None and stray.path.name.isascii():
            st = os.lstat(stray.path)
            raise fsio.wrong_kind(stray.path, st.st_mode, "a regular file (segment file)")
    return {i: {k: reader.segment_path(link, i, k) for k in sorted(kinds)}
            for i, kinds in sorted(listing.segments.items())}


@dataclass(frozen=True)
class LinkState:
    """Where the next segment of a link continues: index, sequence number, previous seal hash."""

    next_index: int
    next_seq: int
    prev_hash: str


def link_state(directory: Path, ledger: dict, link: str) -> LinkState:
    """Continue after the link's last seal (seals are trusted here; `verify` checks them)."""
    files = segment_files(directory, link)
    sealed = sorted(i for i, f in files.items() if "seal.json" in f)
    if not sealed:
        return LinkState(0, 0, genesis_hash(ledger["ledger_id"], link))
    last = load_seal(files[sealed[-1]]["seal.json"], directory)
    return LinkState(sealed[-1] + 1, int(last["last_seq"]) + 1, seal_hash(last))


@dataclass(frozen=True)
class LedgerFootprint:
    """Bytes on disk of a ledger's sealed segments (Parquet + seal documents), all links.

    `bytes_per_record` includes Parquet compression and encoding, and the seal overhead; it is
    what `plan storage --from-ledger` multiplies by frames/s. Open segments and ledger.json are
    not counted (the former are transient, the latter is one small file per ledger).
    """

    directory: str
    links: int
    segments: int
    records: int
    parquet_bytes: int
    seal_bytes: int

    @property
    def bytes_per_record(self) -> float:
        return (self.parquet_bytes + self.seal_bytes) / self.records

    def to_dict(self) -> dict:
        return {"directory": self.directory, "links": self.links, "segments": self.segments,
                "records": self.records, "parquet_bytes": self.parquet_bytes, "seal_bytes": self.seal_bytes,
                "bytes_per_record": self.bytes_per_record}


def storage_footprint(directory: Path) -> LedgerFootprint:
    """Measure the sealed segments of DIR: records (from the seals), Parquet and seal file sizes.

    LedgerFormatError when DIR is not a ledger or holds no sealed record."""
    load_ledger(directory)
    names = links(directory)
    segs = records = pq_bytes = seal_bytes = 0
    for link in names:
        for _, files in sorted(segment_files(directory, link).items()):
            if "parquet" not in files or "seal.json" not in files:
                continue
            doc = load_seal(files["seal.json"])
            n = doc.get("records")
            if not isinstance(n, int) or n < 0:
                raise LedgerFormatError(f"{files['seal.json']}: seal has no valid record count")
            segs += 1
            records += n
            pq_bytes += files["parquet"].stat().st_size
            seal_bytes += files["seal.json"].stat().st_size
    if records == 0:
        raise LedgerFormatError(f"{directory}: no sealed records to measure")
    return LedgerFootprint(str(directory), len(names), segs, records, pq_bytes, seal_bytes)
