"""The per-link reduction of verify, pure: what one link's per-segment results
(ledgertool.verify.checks) say together — step 4 (the seal chain), sequence continuity across
segments, duplicated and missing segments, the link tree the checkpoints are checked against —
plus the findings of the link's listing and its open segments.

`LinkChain.add` takes the segments in index order; the same results in the same order give the
same findings in the same order, however they were computed (one process, or per-segment tasks
reduced per link)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import LedgerFormatError
from ..ledger import segment as segments
from ..ledger.header import LedgerHeader
from ..ledger.layout import OPEN, PARQUET, RECORDS, SEAL, segment_name
from ..ledger.reader import LinkListing, Stray
from ..plural import plural
from ..seal.checkpoint import LinkTree
from ..seal.document import genesis_hash
from .checks import RecordsCheck, SealCheck
from .problems import Kind, Problem


@dataclass(frozen=True)
class SegmentCheck:
    """Everything the per-segment checks found for one sealed segment (picklable): the seal's
    result and, when the record checks ran, the records' (with the decoded table and records)."""

    seal: SealCheck
    records: RecordsCheck | None = None


def stray_finding(stray: Stray) -> Problem:
    """A file that is not part of the ledger: a warning, or a problem when its name imitates a
    sealed segment's (`segment_name_shadow`)."""
    if stray.why == "temp":
        return Problem(
            Kind.TEMP_FILE,
            None,
            f"{stray.path}: leftover of an interrupted atomic write; "
            "ignored (`ledgertool recover` removes it)",
            stray.link,
        )
    if stray.shadows is not None:
        return Problem(
            Kind.SEGMENT_NAME_SHADOW,
            stray.shadows,
            f"{stray.path}: {stray.why}; it is not part of the sealed ledger and was not read",
            stray.link,
        )
    return Problem(
        Kind.STRAY_FILE,
        None,
        f"{stray.path}: {stray.why}; not part of the sealed ledger, not read",
        stray.link,
    )


def unsealed_candidates(listing: LinkListing) -> list[int]:
    """Segments with a Parquet or raw record file and neither a seal nor an open file in the
    listing (the caller looks each up again: a running capture may have sealed it since)."""
    return [
        i
        for i, kinds in sorted(listing.segments.items())
        if (PARQUET in kinds or RECORDS in kinds) and SEAL not in kinds and OPEN not in kinds
    ]


def listing_findings(listing: LinkListing, link_dir: Path, unsealed: list[int]) -> list[Problem]:
    """The link listing's findings: its stray and temporary files, record files (.parquet or
    .rec) without a seal (`unsealed`: the candidates still without one), and holes among the
    sealed indexes."""
    link = listing.link
    out = [stray_finding(Stray(path, "temp", link)) for path in listing.temp_files]
    out += [stray_finding(s) for s in listing.strays]
    out += [
        Problem(
            Kind.UNSEALED_PARQUET,
            i,
            f"{link_dir / segment_name(i, _records_kind(listing, i))} has no seal document",
            link,
        )
        for i in unsealed
    ]
    sealed = listing.sealed
    if sealed and sealed[-1] + 1 != len(sealed):
        missing = sorted(set(range(sealed[-1] + 1)) - set(sealed))
        out.append(
            Problem(
                Kind.SEGMENT_MISSING,
                missing[0],
                f"{'segment' if len(missing) == 1 else 'segments'} {missing} of {sealed[-1] + 1} "
                f"{'has' if len(missing) == 1 else 'have'} no seal",
                link,
            )
        )
    return out


def _records_kind(listing: LinkListing, index: int) -> str:
    return PARQUET if listing.has(index, PARQUET) else RECORDS


def open_segments(listing: LinkListing) -> list[int]:
    """Indexes of open (unsealed) segment files, ascending, as `recover` takes them."""
    return [
        i for i, kinds in sorted(listing.segments.items()) if OPEN in kinds and SEAL not in kinds
    ]


class LinkChain:
    """The reduction over one link's SegmentChecks, in index order (`add`), then `finish`."""

    def __init__(self, ledger: LedgerHeader, link: str, link_dir: Path, header_path: Path):
        self.ledger, self.link, self.link_dir, self.header_path = (
            ledger,
            link,
            link_dir,
            header_path,
        )
        self.expected_prev: str | None = genesis_hash(ledger.ledger_id, link)
        self.expected_seq = 0
        self.hashes: list[str] = []
        self.tree_records: list[int] = []
        self.tree_complete = True
        self.seen: dict[str, int] = {}  # seal hash -> segment, to name a duplicated segment
        # seals that sign another ledger.json than the one read
        self.header_mismatch: list[int] = []
        self.last_sealed = -1
        self.segments = self.records = self.frames = self.drops = 0

    def add(self, check: SegmentCheck) -> list[Problem]:
        """The findings of one segment, in report order: its seal's, the chain's, then its
        records'."""
        seal = check.seal
        index = seal.index
        self.last_sealed = index
        if index != len(self.hashes):
            self.tree_complete = False
        if not seal.readable:
            self.expected_prev, self.tree_complete = None, False
            return list(seal.problems)
        self.segments += 1
        if seal.signs_other_header:
            self.header_mismatch.append(index)
        out = list(seal.problems) + self._chain(seal)
        if seal.seq is None:  # the layout or range is malformed: no record checks, no continuity
            return out + list(seal.range_problems)
        if seal.seq.first != self.expected_seq:
            first = seal.seq.first
            kind = Kind.SEQUENCE_GAP if first > self.expected_seq else Kind.SEQUENCE_OVERLAP
            out.append(
                Problem(
                    kind,
                    index,
                    f"segment {index} starts at seq {first}, expected {self.expected_seq} "
                    f"({plural(first - self.expected_seq, 'record', fmt='+d')} undeclared)",
                    self.link,
                    0,
                )
            )
        if seal.name_problem is not None:
            out.append(seal.name_problem)
        self.expected_seq = seal.seq.last + 1
        if check.records is not None:
            out += check.records.problems
            self.records += check.records.n
            self.frames += check.records.frames
            self.drops += check.records.drops
        return out

    def _chain(self, seal: SealCheck) -> list[Problem]:
        """Step 4: prev_seal_hash against the previous seal's hash, duplicates, the link tree."""
        out = []
        index, path = seal.index, self.link_dir / segment_name(seal.index, SEAL)
        if self.expected_prev is not None and seal.prev_seal_hash != self.expected_prev:
            out.append(
                Problem(
                    Kind.CHAIN_BROKEN,
                    index,
                    f"{path}: prev_seal_hash {str(seal.prev_seal_hash)[:16]}… "
                    f"does not match the previous seal's hash {self.expected_prev[:16]}…",
                    self.link,
                )
            )
        self.expected_prev = seal.seal_hash
        if seal.seal_hash is None:
            self.tree_complete = False
            return out
        if seal.seal_hash in self.seen:
            out.append(
                Problem(
                    Kind.SEGMENT_DUPLICATED,
                    index,
                    f"{path}: same seal as segment {self.seen[seal.seal_hash]}",
                    self.link,
                )
            )
        self.seen.setdefault(seal.seal_hash, index)
        if self.tree_complete:
            self.hashes.append(seal.seal_hash)
            self.tree_records.append(seal.tree_records)
        return out

    def finish(self) -> list[Problem]:
        """The link-wide findings once every segment was added (ledger.json edited after
        sealing)."""
        if not self.header_mismatch:
            return []
        first, last, n = (
            self.header_mismatch[0],
            self.header_mismatch[-1],
            len(self.header_mismatch),
        )
        # every seal naming another header points at ledger.json; some of them, at those seals
        why = (
            "ledger.json was edited after sealing"
            if n == self.segments
            else f"those seals were changed (the link's other {self.segments - n} name this one)"
        )
        return [
            Problem(
                Kind.LEDGER_HEADER_MISMATCH,
                first,
                f"{self.header_path}: SHA-256 {self.ledger.sha256[:16]}… is not the header that "
                f"{n} seal(s) of link {self.link} sign (segments {first}..{last}): {why}; the "
                "seals' own parameters are the ones checked",
                self.link,
            )
        ]

    @property
    def tree(self) -> LinkTree:
        """The link tree: seal hashes up to the first missing or unreadable seal."""
        return LinkTree(self.hashes, self.tree_records, self.tree_complete)

    @property
    def next_open(self) -> tuple[int, int]:
        """(segment index, seq) an open segment must continue the chain at."""
        return self.last_sealed + 1, self.expected_seq


@dataclass(frozen=True)
class OpenRead:
    """What reading an open segment gave: the segment, or the reason it does not decode
    (`error`), or neither when a running capture sealed and removed it since the listing."""

    segment: segments.OpenSegmentSurvey | None = None
    error: LedgerFormatError | None = None


_ASIDE = "sets it aside in the ledger's set-aside directory (reporting why), never sealed"


def open_segment_finding(
    read: OpenRead,
    path: Path,
    index: int,
    ledger: LedgerHeader,
    link: str,
    nxt: tuple[int, int],
    key_id: str | None,
) -> tuple[Problem | None, tuple[int, int]]:
    """The warning for an open segment, with the advice `recover` makes true: it seals a segment
    that continues the chain at `nxt` (segment index, seq; segments.header_mismatch) and sets
    aside one that does not (discards one with a cut header, reporting its bytes). Returns the
    warning (None when a running capture sealed and removed the file since the listing) and where
    the chain continues after it."""
    if read.error is not None:
        return Problem(
            Kind.TORN_SEGMENT,
            index,
            f"{read.error}; `ledgertool recover` "
            f"{'discards it (reporting its bytes)' if 'header cut' in str(read.error) else _ASIDE}",
            link,
        ), nxt
    seg = read.segment
    if seg is None:
        return None, nxt
    misfit = (
        f"the file is segment {index}"
        if index != nxt[0]
        else segments.header_mismatch(seg.header, ledger, link, nxt[0], nxt[1], key_id)
    )
    if misfit:
        return Problem(
            Kind.TORN_SEGMENT,
            index,
            f"{path}: open segment does not continue the chain at segment "
            f"{nxt[0]}, seq {nxt[1]}: {misfit}; `ledgertool recover` {_ASIDE}",
            link,
        ), nxt
    if not seg.count:
        return Problem(
            Kind.TORN_SEGMENT,
            index,
            f"{path}: open segment without a whole record "
            f"({seg.torn_bytes} bytes); `ledgertool recover` discards it",
            link,
        ), nxt
    # verify holds no device key: whether the blocks authenticate is for `recover` to find
    what = (
        f"{plural(seg.count, 'whole record')} in {plural(seg.blocks, 'block')} and "
        f"{plural(seg.torn_bytes, 'byte')} past them; "
        "`ledgertool recover` (or the next capture) seals it if the device's MACs verify"
        if seg.header.version == 2
        else f"{plural(seg.count, 'whole record')} and {plural(seg.torn_bytes, 'torn byte')}, "
        "without authentication (v1); `ledgertool recover` seals it only when the storage is "
        "trusted"
    )
    return Problem(
        Kind.TORN_SEGMENT if seg.torn_bytes else Kind.OPEN_SEGMENT,
        index,
        f"{path}: open segment with {what}",
        link,
    ), (index + 1, nxt[1] + seg.count)
