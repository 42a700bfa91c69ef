"""verify: check a ledger against a verifier's trust bundle and name everything that broke.

Every file is read through ledgertool.ledger.reader (ASCII segment index, regular files only,
each file read once); the bytes that are hashed are the bytes that are decoded, and `on_segment`
hands those decoded bytes to `query`, `recompute` and the other readers, so they see exactly what
was checked. For each link, in segment order (docs/ledger-format.md, "Verification"):
  1. the seal parses and belongs to this ledger (ledger id, link, segment index);
  2. algorithm, strip mode and record layout equal the ledger header (no downgrade), a seal that
     signs ledger.json's SHA-256 (`ledger_header_sha256`) signs the bytes read, and the digest key
     id is the one the key schedule assigns to this link and segment; records are decoded with the
     seal's signed layout, never with the unsigned header's;
  3. both hybrid signatures verify with the trusted keys;
  4. prev_seal_hash equals the hash of the previous seal (genesis for the first): the chain;
  5. v1 seals: the Parquet file the seal names (its own segment's name, nothing else) is a regular
     file whose SHA-256 and size match the seal; v2 seals (no file pin): the raw record file
     `seg-N.rec` when present (its header fields equal the seal's, its blocks frame it exactly; a
     Parquet file beside it is a compaction leftover, not read), else `seg-N.parquet` (exactly the
     sealed-records columns), else records_missing;
  6. its records: count, first/last sequence, first/last timestamp, declared drops match the seal,
     sequence numbers are contiguous within and across segments;
  7. the RFC 9162 Merkle root over the record blocks equals the seal's; when it does not, the
     segment's leaf-hash sidecar (authenticated by that root) names the changed leaf blocks;
then, per link:
  8. the ledger extends its stored checkpoint (a link with seals and no stored checkpoint is a
     problem) and the one given with --checkpoint (tlog-checkpoint over the seal hashes,
     docs/transparency.md). Without a given checkpoint, append-only is checked only against what
     the storage holds, and the result says so.
Signatures and digest key ids are checked against the key schedule: the trust bundle and
ledger.json's (genesis) digest key id, followed through the ledger's rotation statements
(ledgertool.seal.rotation). With no trust bundle (`trust=None`, the keyless checks `query` and
`recompute` run when no --trust is given) signatures, rotations and digest key ids are not
checked, and the result says so. Problems are collected, never stop the walk; open (unsealed)
segments, stray files and temporary files are reported as warnings, a file that imitates a sealed
segment's name or a non-regular file where a segment file belongs as a problem.

This module is the I/O side: it reads through LedgerReader and calls the pure checks between the
reads — steps 1-3 and 5-7 per segment in ledgertool.verify.checks, step 4, sequence continuity
and the link tree as the per-link reduction in ledgertool.verify.chain; findings are typed
(ledgertool.verify.problems).

The per-segment reads and checks of a link go through a `SegmentChecker`: by default
`check_here` runs them in this process, one segment at a time; ledgertool.verify.cluster runs
them as tasks on a Dask cluster. The reduction runs here on the results in index order either
way, so the report is the same.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..algorithms import algorithm_caveat
from ..digest.record import RECORD_FIXED, RecordSink
from ..errors import (
    DiscrepancyError,
    FileTypeError,
    LedgerFormatError,
    RecordsPrunedError,
    StorageError,
)
from ..keyfiles import TrustBundle
from ..ledger.header import LedgerHeader, parse_ledger_header
from ..ledger.layout import (
    LEAVES,
    LEDGER_FILE,
    OPEN,
    PARQUET,
    RECORDS,
    SEAL,
    window_log,
    window_log_link,
)
from ..ledger.opened import OpenLedger
from ..ledger.parquet import records_to_table
from ..ledger.reader import LedgerReader, LinkListing
from ..ledger.remote import ledger_reader
from ..ledger.segment import survey_open_segment
from ..progress import Progress, ProgressFn
from ..seal.checkpoint import LinkTree, check_extends, parse_note
from ..seal.document import Seal
from ..seal.prune import PruneSchedule, check_prunes, parse_prune
from ..seal.rotation import Schedule, key_schedule, parse_rotation
from .chain import (
    LinkChain,
    OpenRead,
    SegmentCheck,
    listing_findings,
    open_segment_finding,
    open_segments,
    stray_finding,
    unsealed_candidates,
)
from .checks import (
    MAX_LEAVES_BYTES,
    RecordsRead,
    SealCheck,
    SegmentPlace,
    check_records,
    check_seal,
    merkle_finding,
    most_records_file_bytes,
    segment_format,
    unreadable_seal,
)
from .problems import Kind, Problem
from .pruned import PrunedSummary, PrunedTally
from .windows import VerifiedWindows, WindowLogSummary, verify_window_log

if TYPE_CHECKING:  # a reader that asks for a segment's table imports it (records_to_table)
    import pyarrow as pa

__all__ = [
    "Kind",
    "Problem",
    "SegmentChecker",
    "VerifiedSegment",
    "VerifyResult",
    "check_here",
    "check_segment",
    "verified_segment",
    "verify_ledger",
]

#: Checks one link's sealed segments: (reader, the link's listing, each segment's place in index
#: order) -> one SegmentCheck per place, in the same order.
SegmentChecker = Callable[[LedgerReader, LinkListing, list[SegmentPlace]], Iterable[SegmentCheck]]


@dataclass
class VerifyResult:
    ledger: str
    segments: int = 0
    records: int = 0
    frames: int = 0
    drops_declared: int = 0
    links: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    checkpoint: dict | None = None
    signatures_checked: bool = True
    append_only: dict = field(default_factory=dict)  # see _append_only
    windows: list[WindowLogSummary] = field(default_factory=list)  # the window logs checked
    pruned: list[PrunedSummary] = field(default_factory=list)  # records removed by `prune`

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, finding: Problem) -> None:
        """Record a finding: among the warnings when its kind is one, else among the problems."""
        (self.warnings if finding.kind.is_warning else self.problems).append(finding)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "ledger": self.ledger,
            "segments": self.segments,
            "records": self.records,
            "frames": self.frames,
            "drops_declared": self.drops_declared,
            "links": self.links,
            "problems": [p.to_json() for p in self.problems],
            "warnings": [w.to_json() for w in self.warnings],
            "checkpoint": self.checkpoint,
            "signatures_checked": self.signatures_checked,
            "append_only": self.append_only,
            "windows": [w.to_json() for w in self.windows],
            "pruned": [p.to_json() for p in self.pruned],
        }


@dataclass(frozen=True)
class VerifiedSegment:
    """One sealed segment that passed every per-segment check (steps 1-7), as it was checked:
    `records` the fixed-size records the Merkle root covers (a bytes-like object: bytes, or the
    pyarrow Buffer a raw record file was decoded into), `table` the same segment as an Arrow table:
    the decoded Parquet file whose bytes matched the seal (v1) or whose records rebuild the signed
    root (compacted v2), or, for a raw record file, a table built on first use from exactly
    `records` (readers that take the records, like recompute, never pay for it). `frames`: how
    many of the records are frames, not GAP records (None when not counted). With verify_ledger's
    `records_into`, a raw record file's `records` are a view of that sink's free tail (the copy
    that was hashed), valid until the sink is next asked for room. Whether the whole ledger
    verified is the VerifyResult's."""

    link: str
    index: int
    seal: Seal
    decoded: pa.Table | None  # the decoded Parquet table; None for a raw record file
    records: bytes
    digest_size: int = 16  # of `records` (bytes), for the table built from them
    frames: int | None = None
    count: int | None = None  # records (also when `records` is None: verify_ledger's keep_records)

    @cached_property
    def table(self) -> pa.Table:
        if self.decoded is not None:
            return self.decoded
        return records_to_table(self.records, self.digest_size, self.index)


def verify_ledger(
    directory: Path | LedgerReader | OpenLedger,
    trust: TrustBundle | None,
    checkpoint: bytes | None = None,
    checkpoint_name: str = "checkpoint",
    *,
    links: list[str] | None = None,
    on_segment: Callable[[VerifiedSegment], None] | None = None,
    checker: SegmentChecker | None = None,
    progress: ProgressFn | None = None,
    records_into: RecordSink | None = None,
    on_windows: Callable[[VerifiedWindows], None] | None = None,
    on_pruned: Callable[[str, int, Seal], None] | None = None,
    keep_records: bool = True,
) -> VerifyResult:
    """Verify every sealed segment of every link (or of `links`), and that the ledger extends
    `checkpoint` (a signed tlog-checkpoint note) when given. `on_segment` receives each segment
    that passed its own checks, in (link, segment) order, as it was checked, when the checker
    returns the decoded records (`check_here`, the default, does; a cluster's checker returns the
    verdict only). `trust` None runs the keyless checks only (see the module docstring).
    `progress` receives segments checked of each link's sealed segments (records so far as items).
    `records_into` (with `on_segment` and the default checker): every raw record file's records are
    copied into that RecordSink's free tail, its leaves hashed from that copy, and the segment
    handed to `on_segment` holds that very copy (`VerifiedSegment.records`), which `on_segment`
    keeps with `records_into.take(seg.records)` before the next segment is read (else the next
    one overwrites it): one array of exactly the checked bytes, no buffer per segment. ValueError
    when `records_into` comes with another checker or without `on_segment`.

    Window logs (DIR/windows=NAME) of the links chosen are checked first (verify.windows);
    `on_windows` receives each window segment that passed its checks, in (link, segment) order.
    `on_pruned` receives (link, index, seal) of each segment whose seal passed its checks and whose
    records a valid prune statement removed (`on_segment` never sees those). With `keep_records`
    False a raw record file that passes is checked where it was read, nothing copied out: its
    VerifiedSegment has `records` None and its record count in `count`.

    Raises LedgerFormatError only when DIR is not a ledger, a link in `links` is not in it, or
    the checkpoint cannot be parsed / names another ledger; every other finding is a Problem."""
    if records_into is not None and (checker is not None or on_segment is None):
        raise ValueError(
            "records_into needs on_segment and the default checker (its records are this process's)"
        )
    if isinstance(directory, OpenLedger):  # opened by the caller: listed and parsed once
        reader, ledger = directory.reader, directory.header
    else:
        reader = directory if isinstance(directory, LedgerReader) else ledger_reader(directory)
        ledger = parse_ledger_header(reader.read_header_bytes(), reader.directory / LEDGER_FILE)
    directory = reader.directory
    window_links = [window_log_link(log) for log in reader.window_logs]
    every = sorted(set(reader.links) | set(window_links))
    chosen = every if links is None else list(dict.fromkeys(links))  # a link named twice: once
    unknown = sorted(set(chosen) - set(every))
    if unknown:
        raise LedgerFormatError(
            f"{directory}: no link named {', '.join(unknown)} (links: {', '.join(every) or 'none'})"
        )
    res = VerifyResult(str(directory), links=chosen, signatures_checked=trust is not None)
    caveat = algorithm_caveat(ledger.algorithm)
    if caveat:  # the verdict below holds only under the caveat's condition
        res.add(Problem(Kind.ALGORITHM_CAVEAT, None, caveat))
    note = None
    if checkpoint is not None:
        note = parse_note(checkpoint, checkpoint_name)
        if note.checkpoint.ledger_id != ledger.ledger_id:
            raise LedgerFormatError(
                f"{checkpoint_name}: checkpoint of ledger {note.checkpoint.ledger_id}, "
                f"not of {directory} ({ledger.ledger_id})"
            )
        res.checkpoint = note.checkpoint.to_json()
    for stray in reader.strays:
        res.add(stray_finding(stray))
    if trust is not None:
        rotations = [parse_rotation(raw, path) for path, raw in reader.read_rotation_files()]
        sched = key_schedule(
            ledger.ledger_id,
            trust,
            rotations,
            digest_key_id=ledger.digest_key_id,
            algorithm=ledger.algorithm,
        )
        for p in sched.problems:
            res.add(Problem(Kind.ROTATION_INVALID, None, p))
    else:
        sched = None
        res.add(
            Problem(
                Kind.SIGNATURES_UNCHECKED,
                None,
                "no trust bundle given: seal and checkpoint "
                "signatures, key rotations and digest key ids were not checked; the "
                "records are the ledger's as found, consistent with their own seals",
            )
        )
    prunes = _prune_schedule(reader, ledger, sched, res)
    top = reader.read_top_checkpoint()
    _verify_windows(
        reader,
        ledger,
        [c for c in chosen if c in window_links],
        sched,
        res,
        on_windows,
        note,
        f"{checkpoint_name}: ",
    )
    for link in (c for c in chosen if c in reader.links):
        stored = _stored_checkpoint(reader, link, res)  # before the listing: see read_checkpoint
        phase = "verify" if len(chosen) == 1 else f"verify link {link}"
        tree = _verify_link(
            reader,
            ledger,
            link,
            sched,
            res,
            on_segment,
            checker or (check_here if records_into is None else _check_into(records_into)),
            _link_progress(progress, phase, res),
            prunes.of(link),
            on_pruned,
            keep_records,
        )
        if stored is not None:
            _check_checkpoint(stored, tree, sched, res, f"{reader.checkpoint_path(link)}: ")
        elif tree.seal_hashes:
            res.add(
                Problem(
                    Kind.CHECKPOINT_MISSING,
                    None,
                    f"{reader.checkpoint_path(link)}: link {link} has {len(tree.seal_hashes)} "
                    "sealed segments but no stored checkpoint (every capture writes one after each "
                    "seal): it was deleted, or a capture was killed before its first checkpoint "
                    "(`ledgertool recover` signs one); a cut tail cannot be detected without it",
                    link,
                )
            )
        if top is not None:  # written by ledgertool before 0.2 for one-link ledgers
            try:
                top_note = parse_note(top, str(directory / "checkpoint"))
            except LedgerFormatError as e:
                res.add(Problem(Kind.CHECKPOINT_UNREADABLE, None, str(e), link))
            else:
                if top_note.checkpoint.link == link:
                    _check_checkpoint(top_note, tree, sched, res, f"{directory / 'checkpoint'}: ")
        if note is not None and note.checkpoint.link == link:
            _check_checkpoint(note, tree, sched, res, f"{checkpoint_name}: ")
    if note is not None and note.checkpoint.link not in {*reader.links, *reader.window_logs}:
        # the checkpoint the verifier holds names a link (or window log) whose directory is gone
        # (or is not a directory: a symlink is never read): that link holds no segment now, so it
        # is held to an empty tree; else nothing compared it and a ledger cut by a whole link
        # verified, and `query` counted 0 records
        empty = LinkTree([], [], True)
        _check_checkpoint(note, empty, sched, res, f"{checkpoint_name}: ")
    res.append_only = _append_only(res, note, chosen, reader.links)
    return res


def _verify_windows(
    reader: LedgerReader,
    ledger: LedgerHeader,
    links: list[str],
    sched: Schedule | None,
    res: VerifyResult,
    on_windows: Callable[[VerifiedWindows], None] | None,
    note=None,
    prefix: str = "checkpoint: ",
) -> None:
    """The window logs of `links`, each with its stored checkpoint and `note` (the checkpoint
    given) where it is the log's; with a window tier in ledger.json, a link that has per-frame
    segments and no window log is `windows_missing`."""
    if ledger.window is None:
        for link in links:
            res.add(
                Problem(
                    Kind.PARAMETER_MISMATCH,
                    None,
                    f"{reader.link_dir(window_log(link))}: a window log in "
                    "a ledger whose ledger.json has no window tier; not read",
                    window_log(link),
                )
            )
        return
    for link in links:
        log = window_log(link)
        stored = _stored_checkpoint(reader, log, res)
        summary, tree = verify_window_log(reader, ledger, log, sched, res.add)
        if stored is not None:
            _check_checkpoint(stored, tree, sched, res, f"{reader.checkpoint_path(log)}: ")
        elif tree.seal_hashes:
            res.add(
                Problem(
                    Kind.CHECKPOINT_MISSING,
                    None,
                    f"{reader.checkpoint_path(log)}: window log {log} has "
                    f"{len(tree.seal_hashes)} sealed segments but no stored checkpoint",
                    log,
                )
            )
        if note is not None and note.checkpoint.link == log:
            _check_checkpoint(note, tree, sched, res, prefix)
        res.windows.append(summary)
        if on_windows is not None:
            for v in summary.verified:
                on_windows(v)
    if "windows" in ledger.tiers:
        for link in sorted(set(reader.links) - set(links)):
            if reader.listing(link).sealed:
                res.add(
                    Problem(
                        Kind.WINDOWS_MISSING,
                        None,
                        f"{reader.link_dir(window_log(link))}: link {link} has "
                        "sealed segments but no window log, and ledger.json has the window tier",
                        link,
                    )
                )


def _prune_schedule(
    reader: LedgerReader, ledger: LedgerHeader, sched: Schedule | None, res: VerifyResult
) -> PruneSchedule:
    """The ledger's prune statements followed in order (seal.prune.check_prunes; signatures with
    the key schedule when there is one); the first that does not parse or verify is
    `prune_invalid`, and it and the ones after it remove nothing."""
    statements = []
    for path, raw in reader.read_prune_files():
        try:
            statements.append(parse_prune(raw, str(path)))
        except LedgerFormatError as e:
            res.add(Problem(Kind.PRUNE_INVALID, None, str(e)))
            break
    prunes = check_prunes(ledger.ledger_id, statements, sched)
    for p in prunes.problems:
        res.add(Problem(Kind.PRUNE_INVALID, None, p))
    for link in sorted(set(prunes.segments) - set(reader.links)):
        where = next(iter(prunes.of(link).values()))[1].path
        res.add(
            Problem(
                Kind.PRUNE_INVALID,
                None,
                f"{where}: names link {link}, which the ledger does not have",
                link,
            )
        )
    return prunes


def _link_progress(progress: ProgressFn | None, phase: str, res: VerifyResult):
    """(segments done, segments of the link, records of the link so far) -> a Progress update whose
    records count those of the links verified before too."""
    if progress is None:
        return None
    before = res.records
    return lambda done, total, records: progress(
        Progress(phase, done, total, "segments", before + records, "records")
    )


def _stored_checkpoint(reader: LedgerReader, link: str, res: VerifyResult):
    try:
        data = reader.read_checkpoint(link)
        return None if data is None else parse_note(data, str(reader.checkpoint_path(link)))
    except LedgerFormatError as e:
        res.add(Problem(Kind.CHECKPOINT_UNREADABLE, None, str(e), link))
        return None


def _append_only(res: VerifyResult, note, links: list[str], frame_links=None) -> dict:
    """What the append-only check rested on: a checkpoint the verifier holds, or only the ones
    the ledger's storage holds (which whoever holds the storage can roll back together with the
    tail)."""
    given = note.checkpoint.link if note is not None else None
    # a window log's checkpoint covers a link that keeps no per-frame log (`frame_links`)
    unchecked = [
        ln
        for ln in links
        if ln != given and not (given == window_log(ln) and ln not in (frame_links or ()))
    ]
    text = None
    if unchecked:
        text = (
            "append-only not checked against a checkpoint you hold for "
            f"link{'s' if len(unchecked) > 1 else ''} {', '.join(unchecked)}: only the ledger's "
            "own stored checkpoints were compared, and whoever holds the storage can roll those "
            "back together with a cut tail (pass --checkpoint)"
        )
    return {"given_checkpoint_link": given, "unchecked_links": unchecked, "note": text}


def _check_checkpoint(
    note, tree: LinkTree, sched: Schedule | None, res: VerifyResult, prefix: str
) -> None:
    link = note.checkpoint.link
    cp = note.checkpoint
    signers = sched.checkpoint_signers(link, cp.size) if sched is not None else (None, ())
    for f in check_extends(note, tree, *signers):
        res.add(Problem(Kind(f.kind), None, prefix + f.detail, link))


def _verify_link(
    reader: LedgerReader,
    ledger: LedgerHeader,
    link: str,
    sched: Schedule | None,
    res: VerifyResult,
    on_segment: Callable[[VerifiedSegment], None] | None,
    checker: SegmentChecker,
    progress: Callable[[int, int, int], None] | None = None,
    pruned: dict | None = None,
    on_pruned: Callable[[str, int, Seal], None] | None = None,
    keep_records: bool = True,
) -> LinkTree:
    """Steps 1-7 for every sealed segment of `link`, reading each segment's files just before the
    pure checks that need them; returns the link tree (its seal hashes up to the first missing or
    unreadable seal) for the checkpoint checks."""
    listing = reader.listing(link)
    link_dir = reader.link_dir(link)
    # a capture running now may have sealed a segment since the listing: not a finding
    unsealed = [
        i
        for i in unsealed_candidates(listing)
        if not reader.exists(link, i, SEAL, follow_symlinks=True)
    ]
    for finding in listing_findings(listing, link_dir, unsealed):
        res.add(finding)
    chain = LinkChain(ledger, link, link_dir, reader.directory / LEDGER_FILE)
    places = [
        SegmentPlace(
            ledger,
            link,
            index,
            link_dir,
            sched,
            records_wanted=on_segment is not None and keep_records,
        )
        for index in listing.sealed
    ]
    if progress:
        progress(0, len(places), 0)
    tally = PrunedTally(link, pruned or {})
    for done, check in enumerate(checker(reader, listing, places), 1):
        found = tally.check(check, chain.add(check))
        if progress:
            progress(done, len(places), chain.records)
        for finding in found:
            res.add(finding)
        if (
            on_segment is not None
            and not any(not f.kind.is_warning for f in found)
            and check.records is not None
            # records read and checked: copied out, or (keep_records False) checked in place; not
            # a pruned segment's missing file, nor a file that was not read
            and (check.records.records is not None or check.records.in_place)
        ):
            on_segment(_verified(link, check))
        elif (
            on_pruned is not None
            and check.seal.index in tally.pruned
            and check.seal.doc is not None
            and not any(not f.kind.is_warning for f in found)
        ):  # its records are gone by a statement that binds to this very seal
            on_pruned(link, check.seal.index, check.seal.doc)
    res.problems += chain.finish()
    for finding in tally.finish():
        res.add(finding)
    if tally.summary.segments:
        res.pruned.append(tally.summary)
    res.segments += chain.segments
    res.records += chain.records
    res.frames += chain.frames
    res.drops_declared += chain.drops
    # open segments in index order, as `recover` takes them: one that continues the chain is sealed,
    # and the next one must continue after it
    nxt = chain.next_open
    for i in open_segments(listing):
        key_id = sched.digest_key_id_for(link, nxt[0]) if sched is not None else None
        w, nxt = open_segment_finding(
            _read_open(reader, link, i),
            reader.segment_path(link, i, OPEN),
            i,
            ledger,
            link,
            nxt,
            key_id,
        )
        if w is not None:
            res.add(w)
    return chain.tree


def verified_segment(
    reader: LedgerReader, ledger: LedgerHeader, link: str, index: int, sched: Schedule | None = None
) -> VerifiedSegment:
    """One sealed segment's records exactly as verify checks them (`check_segment`: the seal, then
    the raw record file or Parquet file it authenticates, v1 or v2), for readers of one segment
    (`prove`). With `sched` None the seal's signatures and digest key id are not checked here.
    DiscrepancyError naming the first problem (and asking for `ledgertool verify`) when any check of
    the segment fails; warnings (a compaction leftover) do not stop it."""
    check = check_segment(
        reader,
        reader.listing(link),
        SegmentPlace(ledger, link, index, reader.link_dir(link), sched),
    )
    found = list(check.seal.problems) + list(check.seal.range_problems)
    if check.seal.name_problem is not None:
        found.append(check.seal.name_problem)
    if check.records is not None:
        found += check.records.problems
    problems = [p for p in found if not p.kind.is_warning]
    if problems or check.records is None or check.records.records is None:
        _raise_if_pruned(reader, ledger, link, index, check, sched, problems)
        raise DiscrepancyError(
            f"link {link} segment {index}: {_unread_why(reader, link, index, problems)}; "
            "run `ledgertool verify`"
        )
    return replace(_verified(link, check), records=bytes(check.records.records))


def _raise_if_pruned(
    reader: LedgerReader,
    ledger: LedgerHeader,
    link: str,
    index: int,
    check: SegmentCheck,
    sched: Schedule | None,
    problems: list[Problem],
) -> None:
    """RecordsPrunedError when a valid prune statement names this segment's seal and its record
    file is gone: the records are no longer held (said so, not reported as a discrepancy)."""
    res = VerifyResult(str(reader.directory))
    entry = _prune_schedule(reader, ledger, sched, res).of(link).get(index)
    if entry is None or res.problems:
        return
    tally = PrunedTally(link, {index: entry})
    if tally.check(check, problems) or not tally.summary.segments:
        return  # another problem, or the seal is not the one the statement names
    s = tally.summary
    raise RecordsPrunedError(
        f"link {link} segment {index}: its per-frame records were pruned ({entry[1].path}: "
        f"{s.records:,} records, ts {s.first_ts_ns}..{s.last_ts_ns}); they are no longer held, "
        "so no record of them can be read or proven; the seal is still checked by `verify`, and "
        f"the link's window log ({window_log(link)}) still commits to their frames"
    )


def _unread_why(reader: LedgerReader, link: str, index: int, problems: list[Problem]) -> str:
    """Why a segment's records are not there to hand out, naming the file: its first problem, else
    what is at its record file's name (a FIFO, a link, a directory, a device: listed, never opened),
    else that neither form is there."""
    if problems:
        return f"{problems[0].kind}: {problems[0].detail}"
    shadow = next((s for s in reader.listing(link).strays if s.shadows == index), None)
    if shadow is not None:
        return f"{Kind.SEGMENT_NAME_SHADOW}: {shadow.path}: {shadow.why}; it was not read"
    return (
        f"{Kind.RECORDS_MISSING}: neither {reader.segment_path(link, index, RECORDS)} nor "
        f"{reader.segment_path(link, index, PARQUET).name} is there"
    )


def _verified(link: str, check: SegmentCheck) -> VerifiedSegment:
    """The VerifiedSegment of a segment whose checks passed; a raw record file's table is built
    here, from the checked records, only for the readers that want one (verify alone does not)."""
    recs, seal = check.records, check.seal
    # (a table is given where there is no layout)
    digest_size = seal.layout[0] - RECORD_FIXED if seal.layout else 16
    return VerifiedSegment(
        link, seal.index, seal.doc, recs.table, recs.records, digest_size, recs.frames, recs.n
    )


def check_here(
    reader: LedgerReader, listing: LinkListing, places: list[SegmentPlace]
) -> Iterator[SegmentCheck]:
    """The default SegmentChecker: each segment read and checked in this process, when the
    reduction asks for it (one segment's bytes in memory at a time). The link's directory is held
    open meanwhile (LedgerReader.holding_link): each file is one openat(2) relative to it."""
    with reader.holding_link(listing.link):
        for place in places:
            yield check_segment(reader, listing, place)


def _check_into(sink: RecordSink) -> SegmentChecker:
    """check_here with every raw record file's records copied into `sink` (verify_ledger's
    `records_into`); each segment asks for room for itself and, ahead, for the link's segments
    after it at its seal's record count (so the sink grows about once per link, not by doubling)."""

    def checker(
        reader: LedgerReader, listing: LinkListing, places: list[SegmentPlace]
    ) -> Iterator[SegmentCheck]:
        return (
            check_segment(reader, listing, place, sink, len(places) - k - 1)
            for k, place in enumerate(places)
        )

    return checker


def check_segment(
    reader: LedgerReader,
    listing: LinkListing,
    place: SegmentPlace,
    into: RecordSink | None = None,
    segments_after: int = 0,
) -> SegmentCheck:
    """The reads of one sealed segment, each followed by the pure checks of its bytes: the seal,
    then (when its checks ran) the Parquet file, then (when the Merkle root differs) the leaf
    sidecar. `into`: a raw record file's records are copied into that sink's free tail
    (check_records), with room asked ahead for `segments_after` more of this seal's size."""
    link, index = place.link, place.index
    try:
        raw = reader.read_seal_bytes(link, index)
    except LedgerFormatError as e:
        return SegmentCheck(unreadable_seal(place, str(e)))
    except StorageError as e:
        if e.errno != errno.ENOENT:
            raise
        # listed, then gone (an object store's listing, or a file removed since): the segment
        # has no seal, as when its seal was never listed
        gone = reader.segment_path(link, index, SEAL)
        why = f"segment {index} has no seal: {gone} was listed but is not there"
        return SegmentCheck(SealCheck(index, None, (place.problem(Kind.SEGMENT_MISSING, why),)))
    seal = check_seal(raw, place)
    if not seal.reads_records:
        return SegmentCheck(seal)
    read = _read_records(
        reader, listing, link, index, segment_format(seal.doc).raw_files, records_file_limit(seal)
    )
    try:
        recs = check_records(
            seal, read, place, into, seal.seq.count * segments_after if into is not None else 0
        )
    finally:
        reader.close_record_file(read.data)
    if not recs.merkle_ok:
        try:  # the sidecar only names blocks: optional
            leaves = reader.read_segment_file(
                link, index, LEAVES, limit=MAX_LEAVES_BYTES
            ).to_pybytes()
        except (LedgerFormatError, FileTypeError, StorageError):
            leaves = None
        recs = merkle_finding(seal, recs, leaves, place, read.kind)
    return SegmentCheck(seal, recs)


def records_file_limit(seal: SealCheck) -> int | None:
    """The most bytes a sealed segment's records file can hold, from what its seal signs (its
    format says: `SegmentFormat.file_limit`), and never more than a segment of the format's most
    records can make (`most_records_file_bytes`). The read stops there (a larger file is a
    finding, never read whole into memory)."""
    limit = segment_format(seal.doc).file_limit(seal)
    if seal.layout is None:
        return limit
    # a seal's numbers are the storage holder's until its signatures verify (and without --trust,
    # always): a forged count or size must not size the read, so the format's bound caps it
    cap = most_records_file_bytes(seal.layout[0])
    return cap if limit is None else min(limit, cap)


def _read_records(
    reader: LedgerReader,
    listing: LinkListing,
    link: str,
    index: int,
    raw_files: bool,
    limit: int | None = None,
) -> RecordsRead:
    """The records file a seal's checks read: the raw record file when the format has them and
    there is one (a Parquet file beside it is a compaction leftover, not read), else the Parquet
    file (docs/ledger-format.md, "Verification"); none read past `limit` bytes."""
    if not raw_files:  # a v1 seal pins its Parquet file: nothing else is read
        return _read_file(reader, listing, link, index, PARQUET, limit)
    rec = _read_file(reader, listing, link, index, RECORDS, limit)
    if not rec.missing:
        return replace(rec, leftover=listing.has(index, PARQUET))
    # compacted (perhaps since the listing)
    got = _read_file(reader, listing, link, index, PARQUET, limit)
    if not got.missing:
        return got
    if reader.exists(link, index, OPEN, follow_symlinks=False):
        # sealed but not yet renamed (a capture between its seal and the rename, or a crash there):
        # the open file is the records file's bytes, checked against the signed root like it
        opened = _read_file(reader, listing, link, index, OPEN, limit)
        if not opened.missing:
            return replace(opened, kind=RECORDS)
    # the capture may have renamed seg-N.open to seg-N.rec since the first look; the rename is
    # atomic, so with the open file gone the raw record file is there now
    rec = _read_file(reader, listing, link, index, RECORDS, limit)
    if not rec.missing:
        return rec
    return replace(
        got, kind=RECORDS, open_file=reader.exists(link, index, OPEN, follow_symlinks=False)
    )


def _read_file(
    reader: LedgerReader,
    listing: LinkListing,
    link: str,
    index: int,
    kind: str,
    limit: int | None = None,
) -> RecordsRead:
    if not listing.has(index, kind):
        path = reader.segment_path(link, index, kind)
        # not a regular file: named already, not read
        if any(s.path == path for s in listing.strays):
            return RecordsRead(not_regular=True, kind=kind)
        # (the listing may predate a rename)
        if not reader.exists(link, index, kind, follow_symlinks=False):
            return RecordsRead(missing=True, kind=kind)
    try:
        if kind == RECORDS:  # walked in a map on local storage, not read into a buffer
            return RecordsRead(reader.open_record_file(link, index, limit), kind=kind)
        return RecordsRead(reader.read_segment_file(link, index, kind, limit), kind=kind)
    except StorageError as e:
        if e.errno == errno.ENOENT:  # compacted (a .rec) since the listing
            return RecordsRead(missing=True, kind=kind)
        raise
    except LedgerFormatError as e:
        return RecordsRead(error=str(e), kind=kind)


def _read_open(reader: LedgerReader, link: str, index: int) -> OpenRead:
    """An open segment's framing (survey_open_segment: never read whole); OpenRead() when a
    running capture sealed and removed it since the listing."""
    try:
        with reader.open_growing(link, index) as (f, size):
            path = reader.segment_path(link, index, OPEN)
            return OpenRead(survey_open_segment(f, size, path))
    except StorageError as e:
        if e.errno == errno.ENOENT:
            return OpenRead()
        raise
    except LedgerFormatError as e:
        return OpenRead(error=e)
