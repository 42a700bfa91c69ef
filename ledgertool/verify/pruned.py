"""verify of a pruned link: the segments whose per-frame records a valid prune statement removed
(ledgertool.seal.prune) are checked by their seals (signature, chain, digest key, sequence) and
have no record file to read; every other check is unchanged (docs/ledger-format.md, "Prune
statements").

A missing record file is accepted only for a segment whose seal hash, as verify computed it from
the seal in the ledger, is the one a valid statement names for that segment: a statement cannot
be moved to other seals, extended past what it was signed over, or stand for a segment without a
seal (`prune_invalid`). A segment a statement names whose records are still there (a prune
interrupted before it removed them) is checked as usual."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..plural import plural
from ..seal.prune import PruneStatement
from .chain import SegmentCheck
from .problems import Kind, Problem

_GONE = (Kind.RECORDS_MISSING, Kind.PARQUET_MISSING)


@dataclass
class PrunedSummary:
    """What the statements removed of one link that is no longer held (VerifyResult.pruned)."""

    link: str
    segments: int = 0
    first_segment: int | None = None
    last_segment: int | None = None
    records: int = 0
    frames: int = 0
    first_ts_ns: int | None = None
    last_ts_ns: int | None = None
    statements: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "link": self.link,
            "segments": self.segments,
            "first_segment": self.first_segment,
            "last_segment": self.last_segment,
            "records": self.records,
            "frames": self.frames,
            "first_ts_ns": None if self.first_ts_ns is None else str(self.first_ts_ns),
            "last_ts_ns": None if self.last_ts_ns is None else str(self.last_ts_ns),
            "statements": self.statements,
        }

    def text(self) -> str:
        return (
            f"link {self.link}: records of segments {self.first_segment}..{self.last_segment} "
            f"({self.records:,} records, {self.frames:,} frames, "
            f"ts {self.first_ts_ns}..{self.last_ts_ns}) pruned by "
            f"{', '.join(self.statements)}; their seals were checked, their records are no "
            "longer held"
        )


def _int(v) -> int:
    return v if type(v) is int else int(v) if isinstance(v, str) and v.isdigit() else 0


class PrunedTally:
    """One link's segments against the prune statements' claims, as verify walks them (`check`
    per segment in index order), then `finish` for what the statements claim beyond the seals."""

    def __init__(self, link: str, pruned: dict[int, tuple[str, PruneStatement]]):
        self.link, self.pruned = link, pruned
        self.summary = PrunedSummary(link)
        self.frames_through: dict[int, int] = {}  # segment -> the link's frames through it
        self._frames = 0
        self._seen: set[int] = set()
        self._sums: dict[tuple[int, str], list[int]] = {}  # (statement, link) -> records, frames

    def check(self, check: SegmentCheck, found: list[Problem]) -> list[Problem]:
        """The segment's findings, a pruned segment's missing record file taken out."""
        seal, idx = check.seal, check.seal.index
        doc = seal.doc
        frames = _int(doc.frames) if doc is not None else 0
        self._frames += frames
        self.frames_through[idx] = self._frames
        entry = self.pruned.get(idx)
        if entry is None:
            return found
        self._seen.add(idx)
        want, st = entry
        if seal.seal_hash != want:
            return found + [
                Problem(
                    Kind.PRUNE_INVALID,
                    idx,
                    f"{st.path}: names seal {want[:16]}… for segment {idx} of link {self.link}, "
                    f"whose seal hash is {str(seal.seal_hash)[:16]}…: the statement does not bind "
                    "to this seal, so the segment's records are missing",
                    self.link,
                )
            ]
        sums = self._sums.setdefault((st.number, self.link), [0, 0])
        sums[0] += _int(doc.records)
        sums[1] += frames
        if not any(f.kind in _GONE for f in found):
            return found  # still held: checked as usual
        s = self.summary
        s.segments += 1
        s.first_segment = idx if s.first_segment is None else s.first_segment
        s.last_segment = idx
        s.records += _int(doc.records)
        s.frames += frames
        first, last = _int(doc.first_ts_ns), _int(doc.last_ts_ns)
        s.first_ts_ns = first if s.first_ts_ns is None else min(s.first_ts_ns, first)
        s.last_ts_ns = last if s.last_ts_ns is None else max(s.last_ts_ns, last)
        if st.path not in s.statements:
            s.statements.append(st.path)
        return [f for f in found if f.kind not in _GONE]

    def finish(self) -> list[Problem]:
        """A statement naming a segment the link has no seal for, claiming other totals than its
        seals state, or (a warning) pruning frames the window tier did not hold when it ran."""
        out = []
        for idx in sorted(set(self.pruned) - self._seen):
            out.append(
                Problem(
                    Kind.PRUNE_INVALID,
                    idx,
                    f"{self.pruned[idx][1].path}: names segment {idx} of link {self.link}, which "
                    "has no seal in the ledger",
                    self.link,
                )
            )
        statements = {st.number: st for _, st in self.pruned.values()}
        for number, st in sorted(statements.items()):
            pl = next(p for p in st.links if p.link == self.link)
            got = self._sums.get((number, self.link), [0, 0])
            if pl.to_segment in self._seen and got != [pl.records, pl.frames]:
                out.append(
                    Problem(
                        Kind.PRUNE_INVALID,
                        pl.to_segment,
                        f"{st.path}: claims {pl.records} records and {pl.frames} frames of link "
                        f"{self.link}, its seals state {got[0]} and {got[1]}",
                        self.link,
                    )
                )
            through = self.frames_through.get(pl.to_segment)
            if through is not None and (pl.window_frames is None or pl.window_frames < through):
                held = 0 if pl.window_frames is None else pl.window_frames
                out.append(
                    Problem(
                        Kind.PRUNED_UNCOVERED,
                        pl.to_segment,
                        f"{st.path}: pruned link {self.link}'s records through segment "
                        f"{pl.to_segment} ({plural(through, 'frame')}) with --force while its "
                        f"window tier held {plural(held, 'frame')}: "
                        f"{plural(through - held, 'frame')} of them are held by neither tier",
                        self.link,
                    )
                )
        return out
