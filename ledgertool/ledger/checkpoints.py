"""A link's checkpoints as the ledger directory holds them: the link tree read from the seals, and
signing, storing, exporting and checking checkpoints (the formats are ledgertool.seal.checkpoint's,
pure; docs/transparency.md, "Checkpoints").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from .. import fsio
from ..errors import LedgerFormatError, Setting, UsageError
from ..keyfiles import SigningKey, TrustBundle
from ..plural import plural
from ..seal import merkle
from ..seal.checkpoint import (
    MAX_NOTE_BYTES,
    Checkpoint,
    ConsistencyResult,
    LinkTree,
    origin_for,
    parse_note,
    seal_leaf_hashes,
    sign_checkpoint,
    verify_note,
)
from ..seal.document import Seal
from ..seal.rotation import key_schedule
from . import layout
from .header import LedgerHeader, load_ledger
from .index import choose_link, links, segment_files
from .layout import window_log_link
from .lock import writer_lock
from .reader import LedgerReader
from .rotations import KeyState, current_signer_check, load_rotations
from .sealer import load_seal


class CheckpointMarks(Protocol):
    """Told of every checkpoint signed (ledger.devstate.LedgerMarks: the device's protected
    state)."""

    def checkpointed(self, directory: Path, cp: Checkpoint) -> None: ...


def link_tree(directory: Path, link: str) -> LinkTree:
    """The link's tree as its seal files hold it. StorageError / FileTypeError (fsio) when a seal
    cannot be read at all: a tree is never silently cut at a read error."""

    directory = Path(directory)
    seals = {
        i: f["seal.json"] for i, f in segment_files(directory, link).items() if "seal.json" in f
    }
    return tree_of_seals(link, seals, lambda i: load_seal(seals[i], directory))


def tree_of_seals(link: str, seals: dict, read: Callable[[int], Seal]) -> LinkTree:
    """The link tree of the seal documents at `seals` (index -> where, for messages), each parsed
    by `read(index)`, up to the first missing or unparsable one (the tree says where it stopped)."""
    hashes, records = [], []
    for i in range(max(seals) + 1 if seals else 0):
        if i not in seals:
            return LinkTree(hashes, records, False, f"link {link} has no seal for segment {i}")
        try:
            seal = read(i)
            hashes.append(seal.hash())
            records.append(int(seal.records if seal.has("records") else 0))
        except LedgerFormatError as e:
            return LinkTree(hashes, records, False, str(e))
        except (TypeError, ValueError) as e:
            return LinkTree(hashes, records, False, f"{seals[i]}: seal cannot be hashed ({e})")
    return LinkTree(hashes, records, True)


def make_checkpoint(
    directory: Path, ledger: LedgerHeader, link: str, tree: LinkTree | None = None
) -> Checkpoint:
    """The link's checkpoint over `tree`, or by default over all of its seals: LedgerFormatError
    when one is missing or does not parse (StorageError / FileTypeError when it cannot be read), so
    a checkpoint is never signed over fewer segments than the link holds."""
    if tree is None:
        tree = link_tree(directory, link)
        if not tree.complete:
            raise LedgerFormatError(
                f"{tree.stopped}: refusing to sign a checkpoint of link {link} that would "
                f"cover only the {plural(len(tree.seal_hashes), 'segment')} before it (`ledgertool "
                "verify` names what is wrong)"
            )
    return Checkpoint(
        origin_for(ledger.ledger_id, link),
        len(tree.seal_hashes),
        tree.root(),
        sum(tree.records),
        tree.seal_hashes[-1] if tree.seal_hashes else None,
        datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    )


def write_checkpoint(
    directory: Path,
    ledger: LedgerHeader,
    link: str,
    key: SigningKey,
    tree: LinkTree | None = None,
    *,
    top: bool = True,
    marks: CheckpointMarks | None = None,
) -> Path:
    """Sign the link's checkpoint over `tree` (default: read from the ledger's seals; a writer
    that holds the chain in memory passes its own) into DIR/link=NAME/checkpoint; with `top`, also
    DIR/checkpoint while the ledger has one link (removed once it has several: one file cannot
    speak for two logs). `verify` checks both. make_checkpoint's errors (nothing is signed over a
    partial chain); fsio.write_atomic's. `marks`: the device state remembers the checkpoint once
    it is durable (ledger.devstate)."""

    directory = Path(directory)
    cp = make_checkpoint(directory, ledger, link, tree)
    note = sign_checkpoint(cp, key)
    path = layout.checkpoint_path(directory, link)
    fsio.write_atomic(path, note, root=directory, what="checkpoint")
    if marks is not None:
        marks.checkpointed(directory, cp)
    if top:
        top_path = layout.top_checkpoint_path(directory)
        if links(directory) == [link]:
            fsio.write_atomic(top_path, note, root=directory, what="checkpoint")
        else:
            fsio.unlink(top_path, root=directory, missing_ok=True)
    return path


def check_consistency(
    old_data: bytes,
    new_data: bytes,
    directory: Path,
    trust: TrustBundle,
    old_name: str = "OLD",
    new_name: str = "NEW",
) -> ConsistencyResult:
    """Verify both checkpoints' signatures and an RFC 9162 consistency proof (built from the
    ledger's seal hashes) from OLD to NEW. ok exactly when NEW extends OLD."""

    old, new = parse_note(old_data, old_name), parse_note(new_data, new_name)
    ledger = load_ledger(Path(directory))
    if new.checkpoint.ledger_id != ledger.ledger_id:
        raise LedgerFormatError(
            f"{new_name}: checkpoint of ledger {new.checkpoint.ledger_id}, not of {directory}"
        )
    sched = key_schedule(ledger.ledger_id, trust, load_rotations(Path(directory)))

    def result(ok: bool, proof: list[bytes], reason: str | None) -> ConsistencyResult:
        return ConsistencyResult(ok, old.checkpoint, new.checkpoint, proof, reason)

    for name, note in ((old_name, old), (new_name, new)):
        cp = note.checkpoint
        reason = verify_note(note, *sched.checkpoint_signers(cp.link, cp.size))
        if reason:
            return result(False, [], f"{name}: {reason}")
    if old.checkpoint.origin != new.checkpoint.origin:
        return result(
            False, [], f"different logs: {old.checkpoint.origin} vs {new.checkpoint.origin}"
        )
    if old.checkpoint.size > new.checkpoint.size:
        if _extends(new.checkpoint, old.checkpoint, directory)[0]:
            # a mistake in the order, not a fork or a cut: say so (bad usage, exit 2)
            raise UsageError(
                f"{old_name} ({plural(old.checkpoint.size, 'segment')}) extends {new_name} "
                f"({new.checkpoint.size}): the checkpoints look swapped; give the older one first "
                f"(check-consistency {new_name} {old_name}); if {new_name} really is the later "
                "one, the log went back to an earlier state"
            )
        return result(
            False,
            [],
            f"{old_name} ({plural(old.checkpoint.size, 'segment')}) is larger than {new_name} "
            f"({new.checkpoint.size}), and the ledger does not extend {new_name} to it",
        )
    ok, proof, reason = _extends(old.checkpoint, new.checkpoint, directory, old_name, new_name)
    return result(ok, proof, reason)


def _extends(
    old: Checkpoint, new: Checkpoint, directory: Path, old_name: str = "OLD", new_name: str = "NEW"
) -> tuple[bool, list[bytes], str | None]:
    """(ok, RFC 9162 consistency proof built from the ledger's seal hashes, reason when not ok)
    for "checkpoint `new` extends `old`"; both are already authenticated and of one origin."""
    tree = link_tree(Path(directory), new.link)
    if len(tree.seal_hashes) < new.size:
        return (
            False,
            [],
            (
                f"the ledger holds {plural(len(tree.seal_hashes), 'segment')} of link {new.link}, "
                f"fewer than {new_name}'s {new.size}"
            ),
        )
    leaves = seal_leaf_hashes(tree.seal_hashes[: new.size])
    proof = merkle.consistency_proof(old.size, leaves)
    if merkle.verify_consistency(old.size, new.size, old.root, new.root, proof):
        return True, proof, None
    if merkle.root_from_leaf_hashes(leaves) != new.root:
        return (
            False,
            proof,
            f"the ledger's tree of {plural(new.size, 'segment')} is not {new_name}'s",
        )
    return False, proof, f"{new_name} does not extend {old_name}: the consistency proof fails"


def export_checkpoint(
    directory: Path,
    out: Path,
    *,
    signing_key: SigningKey | None = None,
    link: str | None = None,
    device_state: KeyState | None = None,
    notes: list[str] | None = None,
) -> Checkpoint:
    """Write the link's checkpoint to `out`: freshly signed with `signing_key` (holding the ledger's
    writer lock, so no capture changes the chain while it is read), else the one the last
    capture/recover stored (DIR/link=NAME/checkpoint). UsageError/LedgerFormatError otherwise,
    LedgerLockedError while another writer holds the ledger, fsio's errors for the files.

    A fresh checkpoint is signed only over a storage at or ahead of what the key signed: with the
    key's protected state (`device_state`, ledger.devstate; the CLI keeps it beside the key's
    file) RollbackRefusedError before signing when the link's storage is behind or
    beside it; the checkpoint is remembered once written, and a note that the state of the link
    started from the storage is appended to `notes`."""
    directory = Path(directory)
    ledger = load_ledger(directory)
    if (
        link is None
        or window_log_link(link) is None
        or link not in LedgerReader(directory).window_logs
    ):
        link = choose_link(directory, link)  # else a link's window log (windows=NAME)
    if signing_key is not None:
        with writer_lock(directory, "checkpoint --signing-key"):
            current_signer_check(directory, ledger, signing_key)
            with device_state.ledger(ledger.ledger_id) if device_state else nullcontext() as marks:
                if marks is not None:
                    marks.check_link(directory, link)
                cp = make_checkpoint(directory, ledger, link)
                note = sign_checkpoint(cp, signing_key)
                fsio.write_atomic(Path(out).absolute(), note, what="checkpoint")
                if marks is not None:
                    marks.checkpointed(directory, cp)
                    if notes is not None:
                        notes += marks.notes
        return parse_note(note, str(out)).checkpoint
    path = layout.checkpoint_path(directory, link)
    if not os.path.lexists(path):
        raise UsageError(f"{path}: no stored checkpoint; sign one with ", Setting("signing_key"))
    note = fsio.read_regular(path, MAX_NOTE_BYTES, root=directory, what="checkpoint")
    cp = parse_note(note, str(out)).checkpoint
    fsio.write_atomic(Path(out).absolute(), note, what="checkpoint")
    return cp
