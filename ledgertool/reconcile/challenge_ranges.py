"""Challenged recomputation of record ranges (a link's per-frame log): each challenged range of
records, taken from the verified segments, against the revealed frames of its time span
(docs/transparency.md, "Audits").

A range is compared as a multiset of digests: the range's frames (its GAP records aside) against
the revealed frames whose timestamps lie within the range's first and last frame's. A ledger
digest the reveal lacks there is `ledger_only`; a revealed frame strictly inside the span that the
range lacks is `capture_only` (one at the span's very first or last timestamp may belong to the
neighbouring range, and is not counted against this one). Revealed frames in no challenged span
are counted and ignored; a range with frames and no revealed frame in its span is `missing`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..algorithms import get_algorithm
from ..digest.record import FLAG_GAP, record_dtype
from ..errors import KeyFileError, LedgerFormatError
from ..keyfiles import DigestKey, TrustBundle
from ..ledger.checkpoints import link_tree
from ..ledger.header import load_ledger
from ..plural import plural
from ..progress import ProgressFn
from ..seal.challenge import Challenge, ChallengeItem
from ..seal.checkpoint import parse_note
from ..verify.ledger import VerifiedSegment, verify_ledger
from .query import not_verified_error
from .recompute import digest_records
from .result import DigestRun
from .sources import Sources, source_list

MATCH, DIFFER, MISSING = "match", "differ", "missing"


@dataclass(frozen=True)
class RangeOutcome:
    """One challenged range: its records' frames against the revealed frames of its span."""

    first_record: int
    records: int
    status: str
    ledger_frames: int
    capture_frames: int
    first_ns: int | None
    last_ns: int | None
    ledger_only: tuple[bytes, ...] = ()
    capture_only: tuple[bytes, ...] = ()

    index = None  # not a window

    def to_json(self) -> dict:
        return {
            "first_record": str(self.first_record),
            "records": self.records,
            "first_ns": None if self.first_ns is None else str(self.first_ns),
            "last_ns": None if self.last_ns is None else str(self.last_ns),
            "status": self.status,
            "ledger_frames": self.ledger_frames,
            "capture_frames": self.capture_frames,
            "ledger_only": [d.hex() for d in self.ledger_only],
            "capture_only": [d.hex() for d in self.capture_only],
        }


@dataclass
class _Range:
    item: ChallengeItem
    ledger: list = field(default_factory=list)  # record arrays, in order
    digests: list = field(default_factory=list)  # revealed (ts, digest) in its span

    def frames(self) -> np.ndarray:
        recs = np.concatenate(self.ledger) if self.ledger else np.zeros(0)
        return recs[(recs["flags"] & FLAG_GAP) == 0] if len(recs) else recs


def range_items(
    records: list[int], size: int, total: int, rr: int, positions: list[int]
) -> tuple[ChallengeItem, ...]:
    out = []
    for p in positions:
        first, seg, before = p * rr, 0, 0
        while before + records[seg] <= first:
            before += records[seg]
            seg += 1
        out.append(
            ChallengeItem(
                p, seg, first - before, first_record=first, records=min(rr, total - first)
            )
        )
    return tuple(out)


def _slices(records: list[int], items) -> dict[int, list[tuple[int, int, int]]]:
    """segment -> [(item position, start, end)] record slices of the challenged ranges."""
    starts = np.cumsum([0, *records])
    out: dict[int, list] = {}
    for it in items:
        lo, hi = it.first_record, it.first_record + it.records
        for seg in range(len(records)):
            a, b = max(lo, starts[seg]), min(hi, starts[seg + 1])
            if a < b:
                out.setdefault(seg, []).append((it.position, a - starts[seg], b - starts[seg]))
    return out


def ranges_outcomes(
    source: Sources,
    ledger_dir,
    dk: DigestKey,
    challenge: Challenge,
    trust: TrustBundle,
    run: DigestRun,
    progress: ProgressFn | None = None,
    workers: int = 0,
) -> tuple[list[tuple[ChallengeItem, RangeOutcome]], int, bool]:
    """(item, outcome) per challenged range, revealed frames ignored, whether signatures were
    checked. DiscrepancyError when the ledger does not verify against the checkpoint."""
    note = parse_note(challenge.note, "challenge checkpoint")
    cp = note.checkpoint
    ledger = load_ledger(ledger_dir)
    tree = link_tree(ledger_dir, cp.link)
    if (
        range_items(
            tree.records[: cp.size],
            cp.size,
            cp.records,
            challenge.range_records,
            [i.position for i in challenge.items],
        )
        != challenge.items
    ):
        raise LedgerFormatError("challenge: its items are not the ledger's record ranges")
    ranges = {it.position: _Range(it) for it in challenge.items}
    slices = _slices(tree.records[: cp.size], challenge.items)
    dtype = record_dtype(ledger.digest_size)
    alg = get_algorithm(ledger.algorithm)
    kid = dk.key_id(alg.name, alg.key_size)

    def take(seg: VerifiedSegment) -> None:
        if seg.link != cp.link or seg.index not in slices:
            return
        if seg.seal.digest_key_id != kid:
            raise KeyFileError(f"{dk.path}: digest key id {kid} is not segment {seg.index}'s")
        recs = np.frombuffer(seg.records, dtype)
        if len(recs) != tree.records[seg.index]:
            raise LedgerFormatError(f"segment {seg.index}: changed while it was read")
        for pos, a, b in slices[seg.index]:
            ranges[pos].ledger.append(recs[a:b].copy())

    ver = verify_ledger(
        ledger_dir,
        trust,
        challenge.note,
        "challenge checkpoint",
        links=[cp.link],
        on_segment=take,
        progress=progress,
    )
    if not ver.ok:
        raise not_verified_error(ver, "the challenge is not checked against it")
    frames = {p: r.frames() for p, r in ranges.items()}
    spans = {p: (int(f["ts_ns"].min()), int(f["ts_ns"].max())) for p, f in frames.items() if len(f)}
    ignored = 0
    for one in source_list(source):
        if run.stopped is not None:
            break
        for batch in digest_records(one, dk, alg, ledger.strip, run, progress, workers):
            ts = batch["ts_ns"]
            hit = np.zeros(len(batch), bool)
            for p, (lo, hi) in spans.items():
                m = (ts >= lo) & (ts <= hi)
                hit |= m
                for k in np.flatnonzero(m):
                    ranges[p].digests.append((int(ts[k]), bytes(batch["digest"][k])))
            ignored += int((~hit).sum())
    out = [(r.item, _compare(r, frames[p], spans.get(p))) for p, r in sorted(ranges.items())]
    return out, ignored, ver.signatures_checked


def _compare(r: _Range, frames: np.ndarray, span) -> RangeOutcome:
    led = Counter(bytes(d) for d in frames["digest"]) if len(frames) else Counter()
    rev = Counter(d for _, d in r.digests)
    inner = Counter(d for t, d in r.digests if span and span[0] < t < span[1])
    ledger_only = tuple(sorted((led - rev).elements()))
    capture_only = tuple(sorted((inner - led).elements()))
    if not r.digests and led:
        status = MISSING
    else:
        status = MATCH if not ledger_only and not capture_only else DIFFER
    return RangeOutcome(
        r.item.first_record,
        r.item.records,
        status,
        sum(led.values()),
        len(r.digests),
        span[0] if span else None,
        span[1] if span else None,
        ledger_only,
        capture_only,
    )


def describe(it: ChallengeItem, o) -> str:
    """How the text report names a challenged item."""
    if o.index is not None:
        return f"window {o.index} (position {it.position})"
    last = it.first_record + it.records - 1
    return (
        f"records {it.first_record}..{last} (position {it.position}, "
        f"{plural(it.records, 'record')})"
    )
