"""A ledger's key rotation statements as its directory holds them: reading them, writing new ones
(`keys rotate`, `keys rotate-digest`), and the checks writers make against the rotation chain (the
statement format and the key schedule are ledgertool.seal.rotation's, pure; docs/transparency.md,
"Key rotation").
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager, ExitStack, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from .. import fsio
from ..algorithms import get_algorithm
from ..errors import KeyFileError, LedgerError, LedgerFormatError, StorageError, UsageError
from ..keyfiles import DigestKey, SigningKey, TrustBundle
from ..seal.checkpoint import Checkpoint
from ..seal.rotation import (
    DIGEST_KEY,
    ROTATION_FORMAT,
    SIGNING_KEY,
    Epoch,
    RotationStatement,
    Schedule,
    key_schedule,
    parse_rotation,
    rotation_genesis,
    rotation_message,
)
from . import layout
from .header import LedgerHeader, load_ledger
from .index import link_state, links, segment_files
from .lock import writer_lock
from .remote import ledger_reader
from .sealer import load_seal


class KeyMarks(Protocol):
    """One ledger's entry of a signing key's protected state, its lock held
    (ledger.devstate.LedgerMarks, which imports this module)."""

    notes: list[str]

    def check_ledger(self, directory: Path, *, start: bool = True) -> None: ...

    def check_link(self, directory: Path, link: str) -> None: ...

    def checkpointed(self, directory: Path, cp: Checkpoint) -> None: ...

    def rotated(self, number: int, statement_hash: str) -> None: ...

    def carry(self, old: KeyMarks) -> None: ...


class KeyState(Protocol):
    """A signing key's protected state (ledger.devstate.DeviceState)."""

    def ledger(self, ledger_id: str) -> AbstractContextManager[KeyMarks]: ...


def load_rotations(directory: Path) -> list[RotationStatement]:
    """Rotation statements of a ledger in file order (parse only, strict JSON:
    `canonical.loads_strict`; `key_schedule` checks them)."""
    return [parse_rotation(raw, p) for p, raw in ledger_reader(directory).read_rotation_files()]


def _checked_schedule(
    directory: Path, ledger: LedgerHeader, rotations: list[RotationStatement]
) -> Schedule | None:
    """The ledger's own schedule, rooted at the key set its first statement names (a writer has no
    trust bundle; verify roots it at the verifier's). LedgerFormatError when the chain is broken:
    nothing is appended to a history that does not verify. None when there is no statement."""
    if not rotations:
        return None
    try:
        root = TrustBundle.from_dict(rotations[0].authoriser, "rotation 1")
    except KeyFileError as e:
        raise LedgerFormatError(f"{directory}: {e}") from None
    sched = key_schedule(
        ledger.ledger_id,
        root,
        rotations,
        digest_key_id=ledger.digest_key_id,
        algorithm=ledger.algorithm,
    )
    if sched.problems:
        raise LedgerFormatError(f"{directory}: {sched.problems[0]}")
    return sched


def _boundary(directory: Path, ledger: LedgerHeader) -> dict[str, int]:
    """Per link, and per window log (`windows=NAME`: its seals are signed and name the digest key
    like a link's), the next segment index: where a rotation written now takes effect. UsageError
    while a link or window log has an open segment (rotation happens at a segment boundary)."""

    effective = {}
    for link in [*links(directory), *ledger_reader(directory).window_logs]:
        files = segment_files(directory, link)
        if any("open" in f and "seal.json" not in f for f in files.values()):
            raise UsageError(
                f"{directory}: link {link} has an open segment; run `ledgertool recover` first"
            )
        effective[link] = link_state(directory, ledger, link).next_index
    return effective


def _write_statement(
    directory: Path, rotations: list[RotationStatement], doc: dict
) -> tuple[Path, str | None]:
    """Write the statement; (its path, None), or (its path, a warning) when it is in place, and so
    in force, but the write failed after it (flushing the directory): writers and verify follow
    the statement from then on, so the command must say so, never that it failed. StorageError
    when it is not in place: the rotation did not happen."""
    number = len(rotations) + 1
    path = layout.rotation_path(directory, number)
    data = (json.dumps(doc, indent=1) + "\n").encode()
    fsio.make_dirs(path.parent, directory)
    try:
        fsio.write_atomic(path, data, root=directory, what="rotation statement")
    except StorageError as e:
        if not _in_place(directory, path, data):
            raise
        why = os.strerror(e.errno) if e.errno else str(e)
        return path, (
            f"{path}: rotation {number} is in force (the statement is in place), but "
            f"its directory could not be flushed ({why}), so it may not survive a crash "
            "of this machine: keep both the old and the new signing key until the file "
            "system is healthy again"
        )
    return path, None


def _in_place(directory: Path, path: Path, data: bytes) -> bool:
    """Whether `path` holds exactly `data` (what this writer just wrote, compared, not trusted)."""
    try:
        got = fsio.read_regular(path, len(data) + 1, root=directory, what="rotation statement")
        return got == data
    except LedgerError:
        return False


def rotate_keys(
    directory: Path,
    old: SigningKey,
    new: SigningKey,
    *,
    old_state: KeyState | None = None,
    new_state: KeyState | None = None,
) -> dict:
    """Write the next rotation statement: `new` signs every segment sealed from now on.

    The keys' protected states (ledger.devstate; the CLI keeps each beside its key's file):
    RollbackRefusedError, before anything is signed, when the storage is behind or beside
    what either key signed; once the statement is in place both remember it, and the new key's
    state takes over the old one's, so the new key is protected from its first use. "notes" in
    the result say where a state started from the storage.

    Refuses (UsageError) while a link has an open segment (rotation happens at a segment
    boundary: run `ledgertool recover` first), (LedgerFormatError) when the ledger's rotation
    history does not verify, (KeyFileError) when `old` is not the ledger's current key or
    `new` equals it, (LedgerLockedError) while another writer holds the ledger, and
    (StorageError) when the statement could not be put in place. Returns {"path", "number",
    "kind", "effective_from", "new_key_ids"}, and "warning" when the statement is in place (the
    rotation in force) but could not be flushed (_write_statement).
    """

    directory = Path(directory)
    ledger = load_ledger(directory)
    with writer_lock(directory, "keys rotate"):
        return _rotate_keys_locked(directory, ledger, old, new, old_state, new_state)


def _rotate_keys_locked(
    directory: Path,
    ledger: LedgerHeader,
    old: SigningKey,
    new: SigningKey,
    old_state: KeyState | None,
    new_state: KeyState | None,
) -> dict:

    rotations = load_rotations(directory)
    old_bundle, new_bundle = old.trust_bundle(), new.trust_bundle()
    sched = _checked_schedule(directory, ledger, rotations)
    current = sched.current if sched is not None else None
    effective = _boundary(directory, ledger)
    if current is None:
        for link in links(directory):
            files = segment_files(directory, link)
            sealed = sorted(i for i, f in files.items() if "seal.json" in f)
            if sealed:
                signer = load_seal(files[sealed[-1]]["seal.json"]).signer
                if signer != old_bundle.key_ids:
                    raise KeyFileError(
                        f"{old.path or 'old key'}: is not the key that signed the last seal of "
                        f"link {link}"
                    )
    if current is not None and current != old_bundle:
        raise KeyFileError(f"{old.path or 'old key'}: is not the ledger's current signing key")
    if new_bundle == old_bundle:
        raise KeyFileError(f"{new.path or 'new key'}: is the same key as the old one")
    with ExitStack() as held:
        om = held.enter_context(old_state.ledger(ledger.ledger_id)) if old_state else None
        nm = held.enter_context(new_state.ledger(ledger.ledger_id)) if new_state else None
        if om is not None:
            om.check_ledger(directory)
        if nm is not None:
            nm.check_ledger(directory, start=False)  # what it signed before, if anything; no start
        doc = _statement(
            SIGNING_KEY,
            ledger,
            rotations,
            effective,
            old_keys=old_bundle.to_dict(),
            new_keys=new_bundle.to_dict(),
        )
        msg = rotation_message(doc)
        doc["signatures"] = {"old": old.sign(msg), "new": new.sign(msg)}
        path, warning = _write_statement(directory, rotations, doc)
        st = RotationStatement.of(doc)
        extra = _remember_rotation(path, st, om, nm)
    return {
        "path": str(path),
        "number": st.number,
        "kind": SIGNING_KEY,
        "effective_from": effective,
        "new_key_ids": new_bundle.key_ids,
        **_said(warning, *extra),
    }


def _remember_rotation(
    path: Path, st: RotationStatement, signer: KeyMarks | None, new: KeyMarks | None = None
) -> tuple[str | None, list[str]]:
    """The statement `st` is in place at `path`: the states of the keys that signed it remember
    it (the new key's, of a signing-key rotation, after taking over the old key's marks).
    (a warning when a state could not be written, their notes): the rotation is in force whatever
    happens here, so a failure is said as such, never as the rotation's."""
    h = st.hash()
    try:
        if new is not None:
            if signer is not None:
                new.carry(signer)
            new.rotated(st.number, h)
        if signer is not None:
            signer.rotated(st.number, h)
        problem = None
    except LedgerError as e:
        problem = (
            f"rotation {st.number} is in force ({path}), but a signing key's protected "
            f"state could not be updated ({e}): it starts again from the storage at the "
            "key's next use"
        )
    return problem, (signer.notes if signer else []) + (new.notes if new else [])


def _said(warning: str | None, problem: str | None, notes: list[str]) -> dict:
    """The report's "warning" (one line, the statement's and the states' joined) and "notes"."""
    warning = "; ".join(w for w in (warning, problem) if w) or None
    return {**({"warning": warning} if warning else {}), **({"notes": notes} if notes else {})}


def rotate_digest_key(
    directory: Path,
    signing_key: SigningKey,
    old: DigestKey,
    new: DigestKey,
    *,
    device_state: KeyState | None = None,
) -> dict:
    """Write the next rotation statement: digest key `new` computes every segment captured from now
    on.

    The statement names the old and the new key id for the ledger's algorithm (the keys stay
    secret) and is signed by `signing_key`, which must be the ledger's current signing key;
    `old` must be its current digest key (so only an operator holding it can move the ledger on).
    Refuses (UsageError) while a link has an open segment, (LedgerFormatError) when the rotation
    history does not verify, (KeyFileError) for a signing or old digest key that is not the
    current one, or a new key this ledger has already used, and (LedgerLockedError) while another
    writer holds the ledger. Returns {"path", "number", "kind", "effective_from", "algorithm",
    "old_digest_key_id", "new_digest_key_id"}, and "warning" and "notes" as rotate_keys. The
    signing key's protected state (`device_state`) refuses a storage behind or beside what the key
    signed, and remembers the statement, as rotate_keys.
    """

    directory = Path(directory)
    ledger = load_ledger(directory)
    with writer_lock(directory, "keys rotate-digest"):
        return _rotate_digest_key_locked(directory, ledger, signing_key, old, new, device_state)


def _rotate_digest_key_locked(
    directory: Path,
    ledger: LedgerHeader,
    signing_key: SigningKey,
    old: DigestKey,
    new: DigestKey,
    state: KeyState | None,
) -> dict:

    rotations = load_rotations(directory)
    sched = _checked_schedule(directory, ledger, rotations)
    current_signer_check(directory, ledger, signing_key)
    alg = get_algorithm(ledger.algorithm)
    old_id, new_id = old.key_id(alg.name, alg.key_size), new.key_id(alg.name, alg.key_size)
    used = sched.digest_key_ids if sched is not None else [ledger.digest_key_id]
    current = used[-1]
    if old_id != current:
        raise KeyFileError(
            f"{old.path or 'old digest key'}: digest key id {old_id} is not the ledger's current "
            f"digest key {current}" + _retired_note(sched, old_id)
        )
    if new_id in used:
        raise KeyFileError(
            f"{new.path or 'new digest key'}: digest key id {new_id} was already used by ledger "
            f"{directory}; generate a new key (`ledgertool keys generate`)"
        )
    effective = _boundary(directory, ledger)
    with state.ledger(ledger.ledger_id) if state else nullcontext() as marks:
        if marks is not None:
            marks.check_ledger(directory)
        doc = _statement(
            DIGEST_KEY,
            ledger,
            rotations,
            effective,
            algorithm=alg.name,
            old_digest_key_id=old_id,
            new_digest_key_id=new_id,
            signing_keys=signing_key.trust_bundle().to_dict(),
        )
        doc["signatures"] = {"signing": signing_key.sign(rotation_message(doc))}
        path, warning = _write_statement(directory, rotations, doc)
        st = RotationStatement.of(doc)
        extra = _remember_rotation(path, st, marks)
    return {
        "path": str(path),
        "number": st.number,
        "kind": DIGEST_KEY,
        "effective_from": effective,
        "algorithm": alg.name,
        "old_digest_key_id": old_id,
        "new_digest_key_id": new_id,
        **_said(warning, *extra),
    }


def _statement(
    kind: str,
    ledger: LedgerHeader,
    rotations: list[RotationStatement],
    effective: dict[str, int],
    **fields,
) -> dict:
    """The unsigned body of the next rotation statement of `kind`: numbered after `rotations`,
    chained to the last of them (or the ledger's genesis label), `fields` between the common head
    and `created_at` (key order is irrelevant to the RFC 8785 signed bytes, kept for readers)."""
    return {
        "format": ROTATION_FORMAT,
        "kind": kind,
        "ledger_id": ledger.ledger_id,
        "number": len(rotations) + 1,
        "prev_rotation_hash": (
            rotations[-1].hash() if rotations else rotation_genesis(ledger.ledger_id)
        ),
        "effective_from": effective,
        **fields,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _retired_note(sched: Schedule | None, key_id: str) -> str:
    n = sched.retired_by(key_id) if sched is not None else None
    return f": wrong key: retired by rotation {n}" if n is not None else ": wrong key"


def current_digest_key_id(directory: Path, ledger: LedgerHeader, digest_key: DigestKey) -> str:
    """The digest key id new segments are written with, after checking that `digest_key` is it.

    That is the newest digest-key rotation's new id, or ledger.json's (genesis) id when there is
    none. KeyFileError (exit 2) naming the key file otherwise: "retired by rotation N" for a key a
    rotation replaced, "wrong key" for one the ledger never used. The statements are trusted as
    written here (a writer has no trust bundle); `verify` checks them.
    """

    alg = get_algorithm(ledger.algorithm)
    kid = digest_key.key_id(alg.name, alg.key_size)
    ids, retired = _digest_key_history(directory, ledger)
    if kid == ids[-1]:
        return kid
    why = f"wrong key: retired by rotation {retired[kid]}" if kid in retired else "wrong key"
    raise KeyFileError(
        f"{digest_key.path or 'digest key'}: digest key id {kid} is not the current digest key of "
        f"ledger {directory} (key id {ids[-1]}): {why}"
    )


def _digest_key_history(
    directory: Path, ledger: LedgerHeader
) -> tuple[list[str], dict[str, object]]:
    """Digest key ids in the order the statements introduce them (ledger.json's first) and, per
    retired id, the number of the rotation that retired it; statements trusted as written."""
    ids = [ledger.digest_key_id]
    retired: dict[str, object] = {}
    for doc in load_rotations(directory):
        if doc.kind == DIGEST_KEY and isinstance(doc.new_digest_key_id, str):
            retired.setdefault(ids[-1], doc.number)
            ids.append(doc.new_digest_key_id)
    return ids, retired


def signing_key_epochs(directory: Path, ledger: LedgerHeader) -> list[Epoch]:
    """The ledger's signing key sets in the order its statements introduce them, each with the
    rotation that did and where it took over (epoch 0: the key set before the first signing-key
    rotation, as the first statement names it); [] when no signing-key rotation was made.
    LedgerFormatError when the statements do not verify from that key set."""
    sched = _checked_schedule(directory, ledger, load_rotations(directory))
    return sched.epochs if sched is not None and len(sched.epochs) > 1 else []


def digest_key_ids(directory: Path, ledger: LedgerHeader) -> list[str]:
    """The ledger's digest key ids, oldest first; the last is the one new segments are written with
    (what `current_digest_key_id` checks a key against). Statements are trusted as written here."""
    return _digest_key_history(directory, ledger)[0]


def _key_ids(keys: object) -> dict[str, str]:
    """Algorithm -> key id of a key set a rotation statement names; {} when it names none that
    parses (statements are trusted as written here; `verify` checks them)."""
    try:
        return TrustBundle.from_dict(keys, "rotation statement").key_ids
    except KeyFileError:
        return {}


def current_signer_check(directory: Path, ledger: LedgerHeader, signing_key: SigningKey) -> None:
    """KeyFileError when `signing_key` is not the key the ledger's next seal must carry: the
    newest rotation's new key, or (no rotation) the signer of the ledger's last seal."""
    rotations = load_rotations(directory)
    ids = signing_key.trust_bundle().key_ids
    if rotations:
        last = rotations[-1]
        want_ids = _key_ids(last.new_signer)
        if want_ids != ids:
            raise KeyFileError(
                f"{signing_key.path or 'signing key'}: is not the ledger's current signing key "
                f"(after rotation {len(rotations)}, {directory} is signed by "
                f"{', '.join(f'{a} {k}' for a, k in sorted(want_ids.items())) or 'no key'})"
            )
        return
    last = _last_signer(directory)
    if last is not None and last != ids:
        raise KeyFileError(
            f"{signing_key.path or 'signing key'}: is not the key that signs ledger {directory} "
            f"(its seals are signed by {', '.join(f'{a} {k}' for a, k in sorted(last.items()))}); "
            "use that key, or move the ledger to a new key with `ledgertool keys rotate`"
        )


def _last_signer(directory: Path) -> dict | None:
    """Key ids named by the newest seal of any link's per-frame or window log (None for a ledger
    without seals: a ledger of window records alone has seals in its window logs only)."""

    newest = None
    reader = ledger_reader(directory)
    for link in reader.links + reader.window_logs:
        sealed = [i for i, f in segment_files(directory, link).items() if "seal.json" in f]
        if sealed:
            try:
                seal = load_seal(segment_files(directory, link)[max(sealed)]["seal.json"])
            except LedgerError:
                continue  # verify reports an unreadable seal; it cannot vouch for a key either way
            if newest is None or (seal.sealed_at or "") > (newest.sealed_at or ""):
                newest = seal
    return dict(newest.signer or {}) if newest else None
