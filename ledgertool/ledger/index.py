"""The ledger's links and segments as the directory holds them: link names, the segment index
writers and signers use, where a link's chain continues, and the storage footprint.

All of it comes from ledgertool.ledger.reader's listing (ASCII names, regular files only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .. import fsio
from ..errors import LedgerFormatError, Setting, UsageError
from ..seal.document import genesis_hash
from .header import LedgerHeader, load_ledger
from .layout import LEDGER_FILE
from .reader import LedgerReader
from .remote import ledger_reader
from .sealer import load_seal


def links(directory: Path) -> list[str]:
    """Link names of the ledger (valid ASCII names of link=NAME directories), sorted."""
    return ledger_reader(directory).links


def choose_link(directory: Path, link: str | None) -> str:
    """The link a per-link command works on: `link` when the ledger has it, else the ledger's only
    link. UsageError when `link` is absent or, with no `link`, when the ledger has several."""
    names = links(directory)
    if link is None:
        if not names and (logs := ledger_reader(directory).window_logs):
            # window records only: a command that takes a window log is told its name
            raise UsageError(
                f"{directory}: the ledger keeps no per-frame records, only window logs "
                f"({', '.join(sorted(logs))}); choose one with ",
                Setting("link"),
            )
        if not names:  # nothing to choose from: --link would not help
            raise UsageError(f"{directory}: the ledger has no link yet: no segment was sealed")
        if len(names) != 1:
            raise UsageError(
                f"{directory}: ledger has links {', '.join(names)}; choose one with ",
                Setting("link"),
            )
        return names[0]
    if link not in names:
        raise UsageError(f"{directory}: no link {link!r} (links: {', '.join(names) or 'none'})")
    return link


def segment_files(directory: Path, link: str) -> dict[int, dict[str, Path]]:
    """index -> {'open'|'parquet'|'leaves'|'seal.json': path} for one link: the regular files with
    ASCII segment names (ledgertool.ledger.reader), nothing else. FileTypeError when something that
    is not a regular file (a link, a FIFO) sits at a segment file's name: the writers and signers
    that use this listing must neither write over it nor skip it."""
    reader = LedgerReader(Path(directory))
    if not reader.link_dir(link).is_dir():
        return {}
    listing = reader.listing(link)
    # a link, FIFO ... at a segment file's name: never written over or read
    for stray in listing.strays:
        if stray.shadows is not None and stray.path.name.isascii():
            st = os.lstat(stray.path)
            raise fsio.wrong_kind(stray.path, st.st_mode, "a regular file (segment file)")
    return {
        i: {k: reader.segment_path(link, i, k) for k in sorted(kinds)}
        for i, kinds in sorted(listing.segments.items())
    }


@dataclass(frozen=True)
class LinkState:
    """Where the next segment of a link continues: index, sequence number, previous seal hash, and
    the ts_ns of the last record sealed (None: no seal, or the last seal states none)."""

    next_index: int
    next_seq: int
    prev_hash: str
    last_ts_ns: int | None = None


def link_state(directory: Path, ledger: LedgerHeader, link: str) -> LinkState:
    """Continue after the link's last seal (seals are trusted here; `verify` checks them)."""
    files = segment_files(directory, link)
    sealed = sorted(i for i, f in files.items() if "seal.json" in f)
    if not sealed:
        return LinkState(0, 0, genesis_hash(ledger.ledger_id, link))
    last_path = files[sealed[-1]]["seal.json"]
    last = load_seal(last_path, directory)
    bound = last.ledger_header_sha256
    if bound is not None and bound != ledger.sha256:
        # never seal more segments over a header other than the one the chain signed
        raise LedgerFormatError(
            f"{directory / LEDGER_FILE}: changed since {last_path} was sealed (its SHA-256 is "
            f"not the seal's ledger_header_sha256); restore it, then run verify"
        )
    ts = last.last_ts_ns  # a decimal string, null for an empty segment
    last_ts = int(ts) if isinstance(ts, str) and ts.lstrip("-").isdigit() else None
    return LinkState(sealed[-1] + 1, int(last.last_seq) + 1, last.hash(), last_ts)


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
    raw_bytes: int = 0  # v2 segments not yet compacted: their raw record files

    @property
    def bytes_per_record(self) -> float:
        return (self.parquet_bytes + self.raw_bytes + self.seal_bytes) / self.records

    def to_dict(self) -> dict:
        return {
            "directory": self.directory,
            "links": self.links,
            "segments": self.segments,
            "records": self.records,
            "parquet_bytes": self.parquet_bytes,
            "raw_bytes": self.raw_bytes,
            "seal_bytes": self.seal_bytes,
            "bytes_per_record": self.bytes_per_record,
        }


def storage_footprint(directory: Path) -> LedgerFootprint:
    """Measure the sealed segments of DIR: records (from the seals), Parquet, raw record file (v2,
    before compaction; it is the one read when both are there, as verify does) and seal file sizes.

    LedgerFormatError when DIR is not a ledger or holds no sealed record."""
    load_ledger(directory)
    names = links(directory)
    segs = records = pq_bytes = raw_bytes = seal_bytes = 0
    for link in names:
        for _, files in sorted(segment_files(directory, link).items()):
            if "seal.json" not in files or not ({"parquet", "rec"} & set(files)):
                continue
            n = load_seal(files["seal.json"]).records
            if not isinstance(n, int) or n < 0:
                raise LedgerFormatError(f"{files['seal.json']}: seal has no valid record count")
            segs += 1
            records += n
            if "rec" in files:
                raw_bytes += files["rec"].stat().st_size
            else:
                pq_bytes += files["parquet"].stat().st_size
            seal_bytes += files["seal.json"].stat().st_size
    if records == 0:
        raise LedgerFormatError(f"{directory}: no sealed records to measure")
    return LedgerFootprint(
        str(directory), len(names), segs, records, pq_bytes, seal_bytes, raw_bytes
    )
