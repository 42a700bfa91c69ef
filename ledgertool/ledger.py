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
from .errors import LedgerFormatError
from .seal import genesis_hash, load_seal, seal_hash, write_atomic

LEDGER_FILE = "ledger.json"
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
    """Read DIR/ledger.json; LedgerFormatError when DIR is not a ledger."""
    path = directory / LEDGER_FILE
    if not directory.is_dir():
        raise LedgerFormatError(f"{directory}: " + ("not a directory; a ledger is a directory" if directory.exists()
                                                    else "no such ledger directory"))
    if not os.path.lexists(path):
        raise LedgerFormatError(f"{directory}: not a ledger (no {LEDGER_FILE})")
    raw = fsio.read_regular(path, MAX_LEDGER_FILE_BYTES, root=directory, what="ledger header")
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise LedgerFormatError(f"{path}: not valid JSON ({e})") from None
    required = ("ledger_id", "algorithm", "strip", "digest_key_id", "digest_size", "record_size",
                "leaf_records")
    if not isinstance(doc, dict) or doc.get("format") != LEDGER_FORMAT or any(k not in doc for k in required):
        raise LedgerFormatError(f"{path}: not a {LEDGER_FORMAT} header")
    return doc


def links(directory: Path) -> list[str]:
    """Link names present in the ledger, sorted."""
    return sorted(p.name[5:] for p in directory.glob("link=*") if p.is_dir())


def choose_link(directory: Path, link: str | None) -> str:
    """The link a per-link command works on: `link` when the ledger has it, else the ledger's only
    link. UsageError when `link` is absent or, with no `link`, when the ledger has several."""
    from .errors import UsageError

    names = links(directory)
    if link is None:
        if len(names) != 1:
            raise UsageError(f"{directory}: ledger has links {', '.join(names) or 'none'}; choose one with --link")
        return names[0]
    if link not in names:
        raise UsageError(f"{directory}: no link {link!r} (links: {', '.join(names) or 'none'})")
    return link


def segment_files(directory: Path, link: str) -> dict[int, dict[str, Path]]:
    """index -> {'open'|'parquet'|'seal.json': path} for one link."""
    out: dict[int, dict[str, Path]] = {}
    ldir = segments.link_dir(directory, link)
    if ldir.is_dir():
        for p in ldir.iterdir():
            parsed = segments.parse_segment_name(p.name)
            if parsed:
                out.setdefault(parsed[0], {})[parsed[1]] = p
    return out


def sealed_parquet_files(directory: Path) -> list[Path]:
    """Parquet files of every sealed segment, all links, in (link, segment) order."""
    return [files["parquet"] for link in links(directory)
            for _, files in sorted(segment_files(directory, link).items())
            if "parquet" in files and "seal.json" in files]


def sql_parquet_source(paths: list[Path]) -> str:
    """A DuckDB read_parquet(...) expression over explicit files (hive partition `link` kept)."""
    quoted = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    return f"read_parquet([{quoted}], hive_partitioning=true)"


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
