"""Challenged recomputation: draw a challenge over a verified, checkpointed log, and recompute
only the challenged windows from what the prover reveals (docs/transparency.md, "Audits";
docs/adr/0017). The derivation and the document are ledgertool.seal.challenge's (pure).

Drawing reads the ledger only after it verified against the checkpoint (so every window index
and record count in the document is authenticated). Recomputing verifies the ledger against the
document's checkpoint again, re-derives the sample, accumulates the revealed capture into windows
with the ledger's keys and compares the challenged ones: a revealed window outside the sample is
ignored (counted), a challenged window the reveal holds no frame of is `missing`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..algorithms import get_algorithm
from ..canonical import MAX_SAFE_INTEGER
from ..digest.window import WindowAccumulator, WindowKeys, WindowRecord
from ..errors import KeyFileError, LedgerFormatError, Setting, UsageError
from ..keyfiles import DigestKey, TrustBundle
from ..ledger.checkpoints import link_tree
from ..ledger.header import load_ledger
from ..ledger.layout import window_log_link
from ..progress import ProgressFn
from ..seal.challenge import (
    Challenge,
    ChallengeItem,
    DetectionBound,
    Randomness,
    detection_bounds,
    population,
    sample,
    seed,
)
from ..seal.checkpoint import SignedNote, parse_note
from ..urls import location
from ..verify.ledger import verify_ledger
from ..verify.windows import VerifiedWindows
from .against_windows import BEYOND, DIFFER, MATCH, WindowOutcome, window_outcome
from .challenge_ranges import range_items, ranges_outcomes
from .query import not_verified_error
from .recompute import digest_records
from .result import CaptureVerdict, DigestRun
from .sources import Sources, source_list, source_name

MISSING = "missing"


def _verified(directory, data: bytes, note: SignedNote, name: str, trust: TrustBundle, progress):
    """verify_ledger against `note` (`data` parsed) for its link; (result, window segments in
    index order)."""
    cp = note.checkpoint
    link = window_log_link(cp.link) or cp.link
    got: list[VerifiedWindows] = []
    ver = verify_ledger(
        directory,
        trust,
        data,
        name,
        links=[link],
        on_windows=got.append,
        progress=progress,
    )
    if not ver.ok:
        raise not_verified_error(ver, "no challenge is drawn from it or checked against it")
    return ver, sorted(got, key=lambda v: v.index)


def _window_items(
    segs: list[VerifiedWindows], size: int, positions: list[int]
) -> tuple[ChallengeItem, ...]:
    flat = [(v.index, r, w) for v in segs if v.index < size for r, w in enumerate(v.windows)]
    return tuple(
        ChallengeItem(p, flat[p][0], flat[p][1], flat[p][2].index, flat[p][2].start_ns)
        for p in positions
    )


def draw_challenge(
    directory,
    note_data: bytes,
    trust: TrustBundle,
    k: int,
    randomness: Randomness,
    *,
    range_records: int = 64,
    note_name: str = "checkpoint",
    progress: ProgressFn | None = None,
) -> Challenge:
    """The challenge of k items of the checkpoint's log: its window log's windows (a
    `windows=NAME` checkpoint) or ranges of `range_records` records of a link. The ledger must
    verify against the checkpoint (DiscrepancyError, exit 1); UsageError for bad randomness or k."""
    note = parse_note(note_data, note_name)
    randomness.check(note.text)
    cp = note.checkpoint
    if cp.records is None:
        raise LedgerFormatError(f"{note_name}: the checkpoint has no records extension")
    windows = window_log_link(cp.link) is not None
    tier, rr = ("windows", 1) if windows else ("frames", range_records)
    if not 1 <= rr <= MAX_SAFE_INTEGER:  # the challenge document holds it as a JSON number
        raise UsageError(Setting("range_records"), f" {rr}: give 1 to 2^53 - 1 records")
    n = population(cp.records, tier, rr)
    if not 1 <= k <= n:
        raise UsageError(f"k = {k}: the checkpoint's log has {n} {tier if windows else 'ranges'}")
    directory = location(directory)
    _, segs = _verified(directory, note_data, note, note_name, trust, progress)
    s = seed(note.text, tier, rr, k, randomness)
    positions = sorted(sample(s, n, k))
    if windows:
        items = _window_items(segs, cp.size, positions)
    else:
        tree = link_tree(Path(directory), cp.link)
        items = range_items(tree.records[: cp.size], cp.size, cp.records, rr, positions)
    return Challenge(note_data, note.text, cp.origin, tier, n, rr, k, randomness, s, items)


# ---- recompute against a challenge -----------------------------------------------------------


@dataclass
class ChallengeResult(CaptureVerdict):
    """recompute --challenge: each challenged window, and what the sample size rules out."""

    source: str
    ledger: str
    link: str
    challenge_sha256: str
    population: int
    k: int
    matches: bool = False
    verified: bool = False
    capture: DigestRun = field(default_factory=DigestRun)
    items: list[tuple[ChallengeItem, WindowOutcome]] = field(default_factory=list)
    bounds: list[DetectionBound] = field(default_factory=list)
    ignored_windows: int = 0
    ignored_frames: int = 0
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(o.status == status for _, o in self.items)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "against": "challenge",
            "source": self.source,
            "ledger": self.ledger,
            "link": self.link,
            "challenge_sha256": self.challenge_sha256,
            "population": self.population,
            "k": self.k,
            "matches": self.matches,
            "verified": self.verified,
            "challenged": len(self.items),
            "matched": self.count(MATCH),
            "differing": self.count(DIFFER),
            "beyond_capacity": self.count(BEYOND),
            "missing": self.count(MISSING),
            "ignored_windows": self.ignored_windows,
            "ignored_frames": self.ignored_frames,
            "detection": [b.to_json() for b in self.bounds],
            "per_item": [{"position": it.position, **o.to_json()} for it, o in self.items],
            "elapsed_s": round(self.elapsed_s, 6),
            **self.capture.to_json(),
            "warnings": self.warnings,
        }


def recompute_challenge(
    source: Sources,
    ledger_dir,
    digest_key: DigestKey | Sequence[DigestKey],
    challenge: Challenge,
    challenge_sha256: str,
    *,
    trust: TrustBundle,
    progress: ProgressFn | None = None,
    workers: int = 0,
) -> ChallengeResult:
    """Recompute the challenged windows from `source` (the prover's reveal). DiscrepancyError when
    the ledger does not verify against the challenge's checkpoint; LedgerFormatError when the
    document's items are not the ledger's windows or ranges at the sampled positions; UsageError
    for several keys. A per-frame challenge's ranges: reconcile.challenge_ranges."""
    t0 = time.perf_counter()
    keys_given = [digest_key] if isinstance(digest_key, DigestKey) else list(digest_key)
    if len(keys_given) != 1:
        raise UsageError("recompute against a challenge takes one ", Setting("digest_key"))
    dk = keys_given[0]
    ledger_dir = location(ledger_dir)
    note = parse_note(challenge.note, "challenge checkpoint")
    if challenge.tier == "frames":
        res = ChallengeResult(
            source_name(source),
            str(ledger_dir),
            note.checkpoint.link,
            challenge_sha256,
            challenge.population,
            challenge.k,
        )
        res.items, res.ignored_frames, res.verified = ranges_outcomes(
            source, ledger_dir, dk, challenge, trust, res.capture, progress, workers
        )
        return _finish(res, challenge, t0)
    ledger = load_ledger(ledger_dir)
    ver, segs = _verified(ledger_dir, challenge.note, note, "challenge checkpoint", trust, progress)
    cp = note.checkpoint
    got = _window_items(segs, cp.size, [i.position for i in challenge.items])
    if got != challenge.items:
        raise LedgerFormatError(
            "challenge: its items are not the ledger's windows at the sampled positions"
        )
    link = window_log_link(cp.link)
    alg = get_algorithm(ledger.algorithm)
    kid = dk.key_id(alg.name, alg.key_size)
    if {v.seal.digest_key_id for v in segs} - {kid}:
        raise KeyFileError(f"{dk.path}: digest key id {kid} is not the window log's: wrong key")
    params = ledger.window
    keys = WindowKeys.derive(dk.master, ledger.algorithm, ledger.ledger_id, link, params.window_ns)
    chosen = {i.index: i for i in challenge.items}
    ledger_windows = {
        segs_w.index: segs_w for v in segs for segs_w in v.windows if segs_w.index in chosen
    }
    revealed: dict[int, WindowRecord] = {}
    res = ChallengeResult(
        source_name(source),
        str(ledger_dir),
        link,
        challenge_sha256,
        challenge.population,
        challenge.k,
        verified=ver.signatures_checked,
    )

    def closed(windows: list[WindowRecord]) -> None:
        for cw in windows:
            if cw.index in chosen:
                revealed[cw.index] = cw
            else:
                res.ignored_windows += 1
                res.ignored_frames += cw.frames

    acc = WindowAccumulator(
        keys, ledger.digest_size, window_ns=params.window_ns, cells=params.cells
    )
    run = res.capture
    for one in source_list(source):
        if run.stopped is not None:
            break
        for batch in digest_records(one, dk, alg, ledger.strip, run, progress, workers):
            closed(acc.add(batch))
    closed(acc.finish())
    for it in challenge.items:
        lw, cw = ledger_windows[it.index], revealed.get(it.index)
        o = window_outcome(keys, lw, cw)
        if cw is None and o.status != MATCH:
            o = replace(o, status=MISSING)
        res.items.append((it, o))
    return _finish(res, challenge, t0)


def _finish(res: ChallengeResult, challenge: Challenge, t0: float) -> ChallengeResult:
    res.matches = all(o.status == MATCH for _, o in res.items)
    res.bounds = detection_bounds(challenge.population, challenge.k)
    res.warnings = list(res.capture.warnings)
    res.elapsed_s = time.perf_counter() - t0
    return res
