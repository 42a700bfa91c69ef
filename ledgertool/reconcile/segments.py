"""A ledger's sealed segments as reconcile sees them, and which digest keys given cover them.

A `Segment` is what a reconciliation keeps of a verified segment (its link, index, the digest key
id its seal names, its frames and time range); `match_keys` pairs the digest keys given with the
ledger's key ids and lists the runs of segments no given key covers (`uncovered`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..algorithms import Algorithm
from ..errors import KeyFileError, UsageError
from ..keyfiles import DigestKey
from ..ledger.header import LedgerHeader
from ..ledger.rotations import load_rotations
from ..seal.document import Seal
from ..seal.rotation import DIGEST_KEY
from ..verify.ledger import VerifiedSegment

__all__ = ["Segment", "digest_key_order", "match_keys"]


@dataclass(frozen=True)
class Segment:
    link: str
    index: int
    digest_key_id: object  # as the (verified) seal states it
    frames: int
    ts_range: tuple[int, int] | None = None  # the seal's first and last record time, ns

    @classmethod
    def of(cls, seg: VerifiedSegment) -> Segment:
        return cls.of_seal(seg.link, seg.index, seg.seal)

    @classmethod
    def of_seal(cls, link: str, index: int, seal: Seal) -> Segment:
        try:
            ts = (int(seal.first_ts_ns), int(seal.last_ts_ns))
        except (TypeError, ValueError):
            ts = None  # an empty segment
        frames = seal.frames
        return cls(link, index, seal.digest_key_id, frames if isinstance(frames, int) else 0, ts)


def digest_key_order(ledger_dir: Path, ledger: LedgerHeader) -> list[str]:
    """The ledger's digest key ids in order: ledger.json's (genesis) id, then each one a
    digest-key rotation statement introduced (parsed, not yet verified: verify checks them).
    LedgerFormatError for a rotation statement that does not parse."""
    order = [ledger.digest_key_id]
    for doc in load_rotations(ledger_dir):
        kid = doc.new_digest_key_id
        if doc.kind == DIGEST_KEY and isinstance(kid, str) and kid not in order:
            order.append(kid)
    return order


def match_keys(
    ledger_dir: Path,
    ledger: LedgerHeader,
    alg: Algorithm,
    keys: list[DigestKey],
    segs: list[Segment],
) -> tuple[list[tuple[str, DigestKey]], list[dict]]:
    """(key id, key) of each given key in the ledger's key order, and the uncovered segment runs.

    The ledger's digest keys are ledger.json's (genesis) id and those digest-key rotations
    introduced, in order; a key that is none of them is the wrong key, and one that covers no
    sealed segment in scope has nothing to reconcile (both KeyFileError, exit 2)."""
    order = digest_key_order(ledger_dir, ledger)
    named = {g.digest_key_id for g in segs if isinstance(g.digest_key_id, str)}
    known = order + sorted(named - set(order))
    given: dict[str, DigestKey] = {}
    for key in keys:
        kid = key.key_id(alg.name, alg.key_size)
        if kid in given:
            raise UsageError(
                f"{key.path}: the same digest key as {given[kid].path} (give each key once)"
            )
        if kid not in known:
            raise KeyFileError(
                f"{key.path}: digest key id {kid} is not a digest key of ledger {ledger_dir} "
                f"(key ids {', '.join(order)}): wrong key"
            )
        if segs and kid not in named:
            raise KeyFileError(
                f"{key.path}: digest key id {kid} covers no sealed segment of ledger {ledger_dir} "
                f"(its segments use key ids {', '.join(sorted(map(str, named)))})"
            )
        given[kid] = key
    uncovered: list[dict] = []
    for g in segs:
        if g.digest_key_id in given:
            continue
        last = uncovered[-1] if uncovered else None
        if (
            last
            and last["link"] == g.link
            and last["digest_key_id"] == g.digest_key_id
            and last["last_segment"] + 1 == g.index
        ):
            last["last_segment"] = g.index
            last["segments"] += 1
            last["frames"] += g.frames
        else:
            uncovered.append(
                {
                    "link": g.link,
                    "first_segment": g.index,
                    "last_segment": g.index,
                    "segments": 1,
                    "digest_key_id": g.digest_key_id,
                    "frames": g.frames,
                }
            )
    ordered = [(kid, given[kid]) for kid in known if kid in given]
    return ordered, uncovered
