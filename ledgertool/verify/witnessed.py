"""Does a checkpoint carry enough witness cosignatures? `verify --checkpoint CP --witness-key
VKEY ... --witness-threshold k`: k of the n witness keys given must have cosigned the note
(c2sp.org/tlog-cosignature, cosignature/v1), each line checked; lines of other keys are ignored
(docs/transparency.md, "Witnesses")."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from ..plural import plural
from ..seal.checkpoint import SignedNote
from ..seal.witness import NoteKey, cosignatures
from .problems import Kind, Problem

#: cosignatures dated this far (seconds) past the verifier's clock are not counted
MAX_FUTURE_S = 300


@dataclass(frozen=True)
class WitnessCheck:
    threshold: int
    keys: tuple[NoteKey, ...]
    cosigned_by: tuple[str, ...]  # names of the keys with a valid cosignature
    failed: tuple[str, ...]  # names of keys whose line is there and does not verify
    problems: tuple[Problem, ...]

    def to_json(self) -> dict:
        return {
            "threshold": self.threshold,
            "keys": [str(k) for k in self.keys],
            "cosigned_by": list(self.cosigned_by),
            "failed": list(self.failed),
        }


def check_witnesses(
    note: SignedNote, keys: list[NoteKey], threshold: int, now: int, where: str = "checkpoint"
) -> WitnessCheck:
    """k-of-n cosignatures on the note (read from `where`, which the finding names); a shortfall
    is one `checkpoint_unwitnessed` problem."""
    if not 1 <= threshold <= len(keys):
        raise UsageError(
            f"witness threshold {threshold}: give 1 to {len(keys)}, the number of witness keys "
            "given"
        )
    if len({(k.name, k.key_id) for k in keys}) != len(keys):
        raise UsageError("a witness key is given twice: each counts once")
    got = cosignatures(note, keys)
    ok = [c for c in got if c.valid and c.timestamp <= now + MAX_FUTURE_S]
    names = tuple(dict.fromkeys(c.key.name for c in ok))
    failed = tuple(
        dict.fromkeys(c.key.name for c in got if c not in ok and c.key.name not in names)
    )
    link = note.checkpoint.link
    problems = []
    if len(names) < threshold:
        bad = f"; {', '.join(failed)} did not verify (or are dated in the future)" if failed else ""
        given = plural(len(keys), "witness", "witnesses")
        problems.append(
            Problem(
                Kind.CHECKPOINT_UNWITNESSED,
                None,
                f"{where}: cosigned by {len(names)} of the {given} given "
                f"({', '.join(names) or 'none'}), {threshold} required{bad}",
                link,
            )
        )
    return WitnessCheck(threshold, tuple(keys), names, failed, tuple(problems))
