"""`ledgertool prune DIR --before TIME`: remove the per-frame record files of sealed segments whose
records all lie before a cut-off, and leave the device's signed statement of what was removed
(ledgertool.seal.prune; docs/ledger-format.md "Prune statements", docs/adr/0015).

Per link, prune takes the segments after those already pruned, in index order, for as long as a
segment is sealed, its seal's last timestamp is before the cut-off, and its records verify against
the seal (checked without keys, one segment at a time: the records file is the one the seal's
Merkle root covers). Each of them must be covered by the link's sealed window records (they hold
at least as many frames as the link's records through that segment: both tiers take the
capture's frames in one order), else nothing is pruned (UsageError) unless `force`. The statement
is written (durably) before any file is removed, so a crash leaves records that a statement names,
which verify checks as usual and the next prune removes. The seals and checkpoints stay: the
chain, its signatures and append-only checks are unchanged."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .. import fsio
from ..errors import DataError, DiscrepancyError, Setting, UsageError
from ..keyfiles import SigningKey
from ..seal.prune import (
    PRUNE_FORMAT,
    PrunedLink,
    PruneStatement,
    check_prunes,
    parse_prune,
    prune_genesis,
    prune_message,
)
from ..verify.ledger import verified_segment
from ..verify.windows import verify_window_log
from . import layout
from .header import load_ledger
from .index import links as ledger_links
from .index import segment_files
from .lock import writer_lock
from .remote import ledger_reader
from .rotations import current_signer_check
from .sealer import load_seal

__all__ = ["PruneResult", "prune_ledger"]

#: the record files of a sealed segment that prune removes (its seal stays)
REMOVED = (layout.RECORDS, layout.PARQUET, layout.LEAVES)


@dataclass(frozen=True)
class PrunedRange:
    """What one run removed of one link."""

    link: str
    from_segment: int
    to_segment: int
    records: int
    frames: int
    bytes_removed: int
    window_frames: int | None

    def to_json(self) -> dict:
        return {
            "link": self.link,
            "from_segment": self.from_segment,
            "to_segment": self.to_segment,
            "records": self.records,
            "frames": self.frames,
            "bytes_removed": self.bytes_removed,
            "window_frames": self.window_frames,
        }


@dataclass
class PruneResult:
    ledger: str
    before_ns: int
    statement: str | None = None  # the statement written (None: nothing to prune)
    pruned: list[PrunedRange] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # why the next segment of a link stays

    def to_json(self) -> dict:
        return {
            "ok": True,
            "ledger": self.ledger,
            "before_ns": str(self.before_ns),
            "statement": self.statement,
            "pruned": [p.to_json() for p in self.pruned],
            "kept": self.kept,
        }


def _statements(directory: Path) -> list[PruneStatement]:
    return [
        parse_prune(raw, str(path)) for path, raw in ledger_reader(directory).read_prune_files()
    ]


def prune_ledger(
    directory: Path,
    before_ns: int,
    signing_key: SigningKey,
    *,
    links: list[str] | None = None,
    force: bool = False,
) -> PruneResult:
    """Remove the record files of every link's (or `links`') sealed segments whose records all
    lie before `before_ns`, after writing a prune statement signed with `signing_key` (the
    ledger's current signing key, KeyFileError otherwise). UsageError when a segment to prune is
    not covered by the window tier (a ledger without one, or windows not sealed yet) and not
    `force`; DiscrepancyError when the ledger's existing statements do not follow one another.
    Holds the writer lock."""
    directory = Path(directory)
    if not 0 <= before_ns < 2**64:
        # the statement holds it as a u64: anything else signs a statement verify refuses
        raise UsageError(
            Setting("before_ns"),
            f" {before_ns}: the cut-off must be 0..2^64-1 ns since the epoch (a u64)",
        )
    ledger = load_ledger(directory)
    with writer_lock(directory, "prune"):
        current_signer_check(directory, ledger, signing_key)
        done = _statements(directory)
        have = check_prunes(ledger.ledger_id, done, None)
        if have.problems:
            raise DiscrepancyError(f"{have.problems[0]}; run `ledgertool verify`")
        held = ledger_links(directory)
        unknown = [link for link in links or () if link not in held]
        if unknown:  # a typo would otherwise read as "nothing to prune"
            raise UsageError(
                f"{directory}: no link {unknown[0]!r} with per-frame records "
                f"(links: {', '.join(held) or 'none'})"
            )
        chosen = links or held
        reader = ledger_reader(directory)
        res = PruneResult(str(directory), before_ns)
        ranges = {}
        for link in chosen:
            got = _link_range(reader, ledger, link, before_ns, have, force, res)
            if got is not None:
                ranges[link] = got
        if not ranges:
            _finish_removal(directory, have, res)
            return res
        number = len(done) + 1
        doc = {
            "format": PRUNE_FORMAT,
            "ledger_id": ledger.ledger_id,
            "number": number,
            "prev_prune_hash": done[-1].hash() if done else prune_genesis(ledger.ledger_id),
            "before_ns": str(before_ns),
            "links": {link: pl.to_json() for link, (pl, _) in ranges.items()},
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        doc["signatures"] = signing_key.sign(prune_message(doc))
        path = layout.prune_path(directory, number)
        fsio.make_dirs(path.parent, directory)
        fsio.write_atomic(
            path,
            (json.dumps(doc, indent=1) + "\n").encode(),
            root=directory,
            what="prune statement",
        )
        res.statement = str(path)
        for link, (pl, segs) in ranges.items():
            removed = sum(_remove(directory, link, i) for i in segs)
            res.pruned.append(
                PrunedRange(
                    link, segs[0], segs[-1], pl.records, pl.frames, removed, pl.window_frames
                )
            )
        _finish_removal(directory, have, res)
    return res


def _window_frames(reader, ledger, link: str) -> int | None:
    """The frames the link's window log's sealed, verified window records hold (keyless: the
    records against their seals); None without a window tier or log."""
    if ledger.window is None or layout.window_log(link) not in reader.window_logs:
        return None
    found: list = []
    summary, _ = verify_window_log(reader, ledger, layout.window_log(link), None, found.append)
    return summary.frames


def _verifies(reader, ledger, link: str, index: int) -> bool:
    """Whether the segment's records match its seal (keyless: signatures are verify's)."""
    try:
        verified_segment(reader, ledger, link, index)
    except DataError:
        return False
    return True


def _link_range(reader, ledger, link, before_ns, have, force, res):
    """(what the statement says it removes of `link`, the segments it removes), or None when none
    is due; the reason the next segment stays goes to `res.kept`."""
    directory = reader.directory
    files = segment_files(directory, link)
    window_frames = _window_frames(reader, ledger, link)
    start = have.next_segment(link)
    frames_before = 0
    hashes, segs, docs = [], [], []
    for i in sorted(i for i, f in files.items() if layout.SEAL in f):
        doc = load_seal(files[i][layout.SEAL], directory)
        if i < start:
            frames_before += int(doc.frames)
            continue
        if i != start + len(segs) or int(doc.last_ts_ns) >= before_ns:
            break
        if not _verifies(reader, ledger, link, i):
            res.kept.append(f"link {link} segment {i}: does not verify; not pruned")
            break
        through = frames_before + sum(int(d.frames) for d in docs) + int(doc.frames)
        if (window_frames is None or window_frames < through) and not force:
            held = "has no window tier" if window_frames is None else f"holds {window_frames}"
            raise UsageError(
                f"{directory}: link {link} segment {i}: its records are not covered by the window "
                f"tier (the link's frames through it: {through}; its sealed window records: "
                f"{held}); nothing was pruned (",
                Setting("force"),
                " prunes them anyway)",
            )
        hashes.append(doc.hash())
        segs.append(i)
        docs.append(doc)
    if not segs:
        return None
    pruned = PrunedLink(
        link,
        from_segment=segs[0],
        seal_hashes=tuple(hashes),
        records=sum(int(d.records) for d in docs),
        frames=sum(int(d.frames) for d in docs),
        first_ts_ns=min(int(d.first_ts_ns) for d in docs),
        last_ts_ns=max(int(d.last_ts_ns) for d in docs),
        window_frames=window_frames,
    )
    return pruned, segs


def _remove(directory: Path, link: str, index: int) -> int:
    """Remove a segment's record files (its seal stays); the bytes removed."""
    removed = 0
    for kind in REMOVED:
        path = layout.segment_path(directory, link, index, kind)
        try:
            removed += path.stat().st_size
        except FileNotFoundError:
            continue
        fsio.unlink(path, root=directory, missing_ok=True)
    return removed


def _finish_removal(directory: Path, have, res: PruneResult) -> None:
    """Record files a statement already names that are still there (a prune interrupted between
    its statement and the removal): removed now."""
    for link, segs in have.segments.items():
        for i in sorted(segs):
            n = _remove(directory, link, i)
            if n:
                res.kept.append(f"link {link} segment {i}: removed {n} bytes an earlier prune left")
