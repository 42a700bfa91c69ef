"""Recovery after a crash: seal the authenticated prefix of the open segments a capture left
(whole blocks whose device MAC verifies; the bytes past them reported, never signed), remove the
leftovers of interrupted atomic writes, re-sign the checkpoints (`ledgertool recover`,
docs/cli.md; a capture runs `recover_open_segments` on its link first). The storage is the
adversary's: an open segment that fails authentication is refused whole (docs/threat-model.md).
"""

from __future__ import annotations

import os
import stat
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import fsio
from ..errors import LedgerError, LedgerFormatError, OpenSegmentRefusedError
from ..keyfiles import SigningKey
from ..plural import plural
from . import layout
from . import segment as segments
from .checkpoints import write_checkpoint
from .devstate import DeviceState, LedgerMarks
from .header import LedgerHeader, load_ledger
from .index import link_state, links, segment_files
from .lock import writer_lock
from .openmac import OpenSegmentKey
from .remote import ledger_reader
from .rotations import current_signer_check, digest_key_ids
from .sealer import SealResult, load_seal, seal_committed, seal_records
from .writer import WindowTally


def _remove_tmp_files(ledger_dir: Path, directory: Path, discarded: list[dict] | None) -> None:
    """Remove the leftovers of interrupted atomic writes (``*.tmp``, fsio) in `directory`; a link
    or other non-regular file by that name is refused (FileTypeError), never followed."""
    if not directory.is_dir():
        return
    for tmp in sorted(directory.glob("*" + fsio.TMP_SUFFIX)):
        st = tmp.lstat()
        if not stat.S_ISREG(st.st_mode):
            raise fsio.wrong_kind(
                tmp, st.st_mode, "a regular file (leftover of an interrupted write)"
            )
        fsio.unlink(tmp, root=ledger_dir)
        if discarded is not None:
            discarded.append(
                {
                    "path": str(tmp),
                    "bytes": st.st_size,
                    "why": "temporary file of an interrupted write",
                }
            )


def _discard(
    ledger_dir: Path, discarded: list[dict] | None, path: Path, size: int, why: str, *also: Path
) -> None:
    """Remove `path` (and `also`), listing it in `discarded`: nothing goes without being
    reported."""
    for p in (path, *also):
        fsio.unlink(p, root=ledger_dir, missing_ok=True)
    if discarded is not None:
        discarded.append({"path": str(path), "bytes": size, "why": why})


def _remove_partial(ledger_dir: Path, partial: list[Path]) -> None:
    """Remove the Parquet file of a v1 seal that was never written (derived data, not records)."""
    for p in partial:
        fsio.unlink(p, root=ledger_dir, missing_ok=True)


@dataclass(frozen=True)
class RecoveredSegment:
    """One open segment sealed by recovery: its seal, and what was found past the authenticated
    prefix (an incomplete last block of a v2 segment, or a torn record of a v1 one), not signed."""

    seal: SealResult
    blocks: int  # authenticated blocks sealed (0 for a v1 segment)
    tail_blocks: int  # incomplete blocks past them: 0 or 1 (v2)

    @property
    def index(self) -> int:
        return self.seal.index

    @property
    def records(self) -> int:
        return self.seal.records

    @property
    def torn_bytes(self) -> int:
        return self.seal.torn_bytes


@dataclass(frozen=True)
class SetAside:
    """An open segment recovery moved out of the link instead of sealing or deleting it: whole
    (it does not fit where it stands, or nothing of it authenticates), or after sealing its
    authenticated prefix (a block failed authentication). `moved_to` holds the file as found."""

    path: str  # where it was
    moved_to: str  # DIR/set-aside/link=NAME/seg-NNNNNNNN.open[.N]
    bytes: int  # not sealed: the whole file, or from the first block that failed on
    why: str
    failed_authentication: bool  # a block or the header failed the device's MAC: a discrepancy

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "moved_to": self.moved_to,
            "bytes": self.bytes,
            "why": self.why,
            "failed_authentication": self.failed_authentication,
        }


def _set_aside(
    ledger_dir: Path,
    link: str,
    index: int,
    path: Path,
    raw: bytes | None,
    unsealed: int,
    why: str,
    failed: bool,
    out: list[SetAside],
) -> None:
    """Keep open segment `path` in DIR/set-aside/link=NAME under a name not taken yet: moved there
    when `raw` is None (nothing of it is sealed), else a durable copy of `raw` (the file as found)
    is written there before its prefix is sealed and the file cut. Device-authenticated records are
    never destroyed; nothing set aside is ever sealed."""
    directory = layout.set_aside_dir(ledger_dir, link)
    name = layout.segment_name(index, layout.OPEN)
    k = 0
    while os.path.lexists(directory / (name + (f".{k}" if k else ""))):
        k += 1
    dest = directory / (name + (f".{k}" if k else ""))
    if raw is None:
        fsio.move(path, dest, root=ledger_dir)
    else:
        fsio.make_dirs(directory, ledger_dir)
        fsio.write_atomic(dest, raw, root=ledger_dir, what="open segment set aside")
    out.append(SetAside(str(path), str(dest), unsealed, why, failed))


def recover_open_segments(
    ledger_dir: Path,
    ledger: LedgerHeader,
    link: str,
    signing_key: SigningKey,
    discarded: list[dict] | None = None,
    *,
    trust_unauthenticated: bool = False,
    marks: LedgerMarks | None = None,
    set_aside: list[SetAside] | None = None,
) -> list[RecoveredSegment]:
    """Seal the authenticated prefix of every open segment left by a crash: the whole blocks of a
    v2 segment up to the first that fails the device's MAC chain (segment.authenticate_prefix); a
    v1 segment (no MACs) only with `trust_unauthenticated` (else OpenSegmentRefusedError, exit 1,
    the file left in place). The bytes past the prefix are reported, never signed.

    What cannot be sealed where it stands is set aside in DIR/set-aside/link=NAME and listed in
    `set_aside`: a segment whose header does not decode or does not fit the ledger there (another
    ledger, link, index, first seq, parameters or a digest key that is not the current one), and a
    block that fails authentication with all after it (the file as found is kept there; its
    prefix is sealed). When not even the first block authenticates (a damaged header, another
    device's MAC key), the file is set aside whole and the chain goes on without it, only with the
    device's protected state `marks`, which has said that no seal the device signed lies there;
    without `marks` that is OpenSegmentRefusedError, the file left in place. `marks` also refuses
    (RollbackRefusedError) a link whose storage is behind or beside what the device signed, and an
    open segment at or before its last seal. Removes leftovers of interrupted atomic writes
    (``*.tmp``) and open segments without a whole record (a header cut, an incomplete first
    block), listing them in `discarded` (path, bytes, why). A link or FIFO in the ledger is
    FileTypeError.
    """
    out: list[RecoveredSegment] = []
    aside = set_aside if set_aside is not None else []
    # a window log (`windows=NAME`): window records, sealed against the window view of the header
    window = layout.window_log_link(link)
    view = ledger.window_view() if window is not None else ledger
    _remove_tmp_files(ledger_dir, layout.link_dir(ledger_dir, link), discarded)
    if marks is not None:
        marks.check_link(ledger_dir, link)
    key_id = digest_key_ids(ledger_dir, ledger)[-1]
    mac_key = OpenSegmentKey.derive(signing_key, ledger.ledger_id)
    for index, files in sorted(segment_files(ledger_dir, link).items()):
        if "open" not in files:
            continue
        if "seal.json" in files:
            # crashed between the seal and the rename
            if ledger.version == 2 and "rec" not in files:
                _finish_rename(ledger_dir, files)
            else:  # crashed between sealing and removing the open file
                fsio.unlink(files["open"], root=ledger_dir)
            continue
        path = files["open"]
        # of a seal that was not finished
        partial = [files["parquet"]] if "parquet" in files else []
        raw = bytes(fsio.read_regular(path, root=ledger_dir, what="open segment"))
        try:
            seg = segments.parse_open_segment(raw, path)
        except LedgerFormatError as e:
            if len(raw) < segments.HEADER_SIZE:
                _discard(ledger_dir, discarded, path, len(raw), "segment header cut", *partial)
            else:
                _remove_partial(ledger_dir, partial)
                _set_aside(
                    ledger_dir,
                    link,
                    index,
                    path,
                    None,
                    len(raw),
                    f"segment header does not decode ({str(e).removeprefix(str(path) + ': ')}): "
                    "its records cannot be attributed",
                    False,
                    aside,
                )
            continue
        if seg.count == 0:  # crashed before the first whole record: nothing to seal
            _discard(
                ledger_dir, discarded, path, seg.torn_bytes, "open segment without a whole record"
            )
            continue
        state = link_state(ledger_dir, ledger, link)
        misfit = _misfit(seg.header, index, state, view, window, link, key_id)
        if misfit:
            _remove_partial(ledger_dir, partial)
            _set_aside(
                ledger_dir,
                link,
                index,
                path,
                None,
                seg.size,
                f"open segment does not continue the chain at segment {state.next_index}, seq "
                f"{state.next_seq}: {misfit}; its {plural(seg.count, 'record')} cannot be sealed "
                "there",
                False,
                aside,
            )
            continue
        if marks is not None:
            marks.check_open(link, index, seg.header.first_seq, path)
        auth = segments.authenticate_prefix(
            seg,
            mac_key,
            path,
            leaf_hash=ledger.leaf_hash,
            trust_unauthenticated=trust_unauthenticated,
        )
        if auth.failure is not None:
            if not auth.blocks and marks is None:
                raise OpenSegmentRefusedError(f"{auth.failure}; nothing of this segment is sealed")
            if not auth.blocks:
                _remove_partial(ledger_dir, partial)
            _set_aside(
                ledger_dir,
                link,
                index,
                path,
                raw if auth.blocks else None,
                seg.size - auth.end if auth.blocks else seg.size,
                auth.failure,
                True,
                aside,
            )
            if not auth.blocks:
                continue
        # the rest is kept set aside, not discarded
        torn = seg.torn_bytes if auth.failure is None else 0
        # the records were digested with the key the segment header names: the seal says so
        res = _seal_recovered(
            ledger_dir,
            view.for_digest_key(seg.header.key_id),
            link,
            index,
            seg,
            auth,
            torn,
            path,
            state.prev_hash,
            signing_key,
        )
        if marks is not None:
            marks.sealed(link, index, res.seal_hash, res.last_seq)
        out.append(RecoveredSegment(res, auth.blocks, int(seg.header.version == 2 and torn > 0)))
    return out


def _misfit(
    header: segments.SegmentHeader, index: int, state, view: LedgerHeader, window, link, key_id
) -> str | None:
    """Why an open segment cannot be sealed as the next segment of `link` (a window log when
    `window` names its link: the window view of the header, record kind windows), or None."""
    if index != state.next_index:
        return f"the file is segment {index}"
    tier = "frames" if window is None else "windows"
    return segments.header_mismatch(
        header, view, window or link, state.next_index, state.next_seq, key_id
    ) or (
        None
        if header.tier == tier
        else f"its header says record kind {header.tier!r} where the log needs {tier!r}"
    )


def _seal_recovered(
    ledger_dir: Path,
    ledger: LedgerHeader,
    link: str,
    index: int,
    seg: segments.OpenSegment,
    auth: segments.AuthenticatedPrefix,
    torn: int,
    path: Path,
    prev_hash: str,
    signing_key: SigningKey,
) -> SealResult:
    """Seal the authenticated records of open segment `path` (`torn` bytes past them reported):
    a v1 ledger writes Parquet and removes the file; a v2 ledger truncates it to the authenticated
    prefix, signs the seal over those records and renames it to seg-N.rec (a v1 open segment, only
    trusted, is sealed as v1 always: its bytes are not a v2 record file)."""
    seal_file = layout.seal_path(ledger_dir, link, index)
    if ledger.version == 2 and seg.header.version == 2:
        c = segments.commit_records(
            auth.records, ledger.record_size, ledger.leaf_records, ledger.leaf_hash
        )
        if layout.window_log_link(link) is not None:  # the seal states the windows' sums
            tally = WindowTally.of(bytes(auth.records), ledger.record_size)
            c = replace(c, totals=tally.totals(seg.header.first_seq, c.totals.merkle_root))
        fsio.truncate(path, auth.end, root=ledger_dir)  # the rest is never sealed
        _, res = seal_committed(
            ledger_dir=ledger_dir,
            ledger=ledger,
            link=link,
            index=index,
            first_seq=seg.header.first_seq,
            totals=c.totals,
            leaves=c.leaves,
            prev_hash=prev_hash,
            signing_key=signing_key,
            seal_file=seal_file,
            torn_bytes=torn,
            source="recovered open segment",
        )
        fsio.rename(path, layout.segment_name(index, layout.RECORDS), root=ledger_dir)
        return res
    _, res = seal_records(
        ledger_dir=ledger_dir,
        ledger=ledger,
        link=link,
        index=index,
        first_seq=seg.header.first_seq,
        records=auth.records,
        prev_hash=prev_hash,
        signing_key=signing_key,
        parquet=layout.parquet_path(ledger_dir, link, index),
        seal_file=seal_file,
        torn_bytes=torn,
        source="recovered open segment",
    )
    fsio.unlink(path, root=ledger_dir)
    return res


def _finish_rename(ledger_dir: Path, files: dict[str, Path]) -> None:
    """A v2 seal was written but its open segment not yet renamed to seg-N.rec: rename it when the
    Merkle root over its records (framing stripped) is the seal's signed root. Otherwise the file
    is not what was sealed: OpenSegmentRefusedError, the file left in place (verify then reports the
    sealed records as missing)."""
    seal = load_seal(files["seal.json"], ledger_dir)
    seg = segments.read_open_segment(files["open"], ledger_dir)
    root = (
        segments.commit_records(
            seg.records, seg.header.record_size, seg.header.leaf_records
        ).totals.merkle_root
        if seg.count
        else b""
    )
    if seg.header.version != 2 or seg.torn_bytes or root.hex() != seal.merkle_root:
        raise OpenSegmentRefusedError(
            f"{files['open']}: its records are not the ones {files['seal.json'].name} signed "
            f"(Merkle root {root.hex() or 'of no records'}, {seg.torn_bytes} bytes past the last "
            "whole block); it is left in place, nothing was renamed"
        )
    fsio.rename(
        files["open"],
        files["seal.json"].name.removesuffix(".seal.json") + "." + layout.RECORDS,
        root=ledger_dir,
    )


@dataclass
class RecoverResult:
    """What `recover_ledger` did (JSON: `ledgertool recover --json`). `ok` is False when something
    failed the device's authentication (set aside, not sealed): a discrepancy, exit 1."""

    ledger: str
    sealed: list[tuple[str, RecoveredSegment]] = field(default_factory=list)
    discarded: list[dict] = field(default_factory=list)
    set_aside: list[SetAside] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    # the device's protected state started from storage
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(a.failed_authentication for a in self.set_aside)

    @property
    def torn_bytes(self) -> int:
        return sum(r.torn_bytes for _, r in self.sealed) + sum(d["bytes"] for d in self.discarded)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "ledger": self.ledger,
            "sealed": [
                {
                    "link": link,
                    "segment": r.index,
                    "records": r.records,
                    "torn_bytes_discarded": r.torn_bytes,
                    "blocks_sealed": r.blocks,
                    "blocks_past_prefix": r.tail_blocks,
                }
                for link, r in self.sealed
            ],
            "discarded": self.discarded,
            "bytes_discarded": self.torn_bytes,
            "set_aside": [a.to_json() for a in self.set_aside],
            "checkpoints": self.checkpoints,
            "notes": self.notes,
        }


def recover_ledger(
    ledger_dir: Path,
    signing_key: SigningKey,
    *,
    trust_unauthenticated: bool = False,
    device_state: DeviceState | None = None,
) -> RecoverResult:
    """Seal the authenticated prefix of every link's open segments after a crash, set aside what
    cannot be sealed, and re-sign the checkpoints (recover_open_segments: OpenSegmentRefusedError
    for a v1 segment without `trust_unauthenticated`). With the signing key's protected state
    `device_state` (ledger.devstate; the CLI keeps it beside the key's file, docs/api.md),
    RollbackRefusedError, before anything is signed, for a link
    whose storage is behind or beside what the key signed, including a link it signed that the
    storage lacks; the state is updated with every seal and checkpoint.

    Holds the ledger's writer lock (LedgerLockedError while a capture or another writer runs);
    StorageError naming the file when the file system fails (nothing is removed before what
    replaces it is durable, so rerunning after the fix is safe)."""
    ledger_dir = Path(ledger_dir)
    ledger = load_ledger(ledger_dir)
    with writer_lock(ledger_dir, "recover"):
        current_signer_check(ledger_dir, ledger, signing_key)
        res = RecoverResult(str(ledger_dir))
        with device_state.ledger(ledger.ledger_id) if device_state else nullcontext() as marks:
            names = [*links(ledger_dir), *ledger_reader(ledger_dir).window_logs]
            if marks is not None:
                marks.check_ledger(ledger_dir)  # a link gone whole is refused too
            _remove_tmp_files(ledger_dir, ledger_dir, res.discarded)
            for link in names:
                for r in recover_open_segments(
                    ledger_dir,
                    ledger,
                    link,
                    signing_key,
                    res.discarded,
                    trust_unauthenticated=trust_unauthenticated,
                    marks=marks,
                    set_aside=res.set_aside,
                ):
                    res.sealed.append((link, r))
                res.checkpoints.append(
                    str(write_checkpoint(ledger_dir, ledger, link, signing_key, marks=marks))
                )
            res.notes = marks.notes if marks is not None else []
    return res


def kept_for_recovery(ledger_dir: Path, link: str, signing_key: SigningKey) -> str:
    """What `recover` will seal of the link's open segments, said exactly after a write failed:
    the records of each segment's whole authenticated blocks (on disk, made durable by `recover`),
    and the bytes past them (the block the error cut, never written whole), which it discards."""
    parts = []
    try:
        ledger = load_ledger(ledger_dir)
        mac_key = OpenSegmentKey.derive(signing_key, ledger.ledger_id)
        for _, files in sorted(segment_files(ledger_dir, link).items()):
            if "open" not in files or "seal.json" in files:
                continue
            seg = segments.read_open_segment(files["open"], ledger_dir)
            auth = segments.authenticate_prefix(
                seg, mac_key, files["open"], leaf_hash=ledger.leaf_hash
            )
            part = (
                f"{plural(len(auth.records) // seg.header.record_size, 'record', fmt=',')} in the "
                f"{plural(auth.blocks, 'whole authenticated block')} of {files['open'].name}"
            )
            if seg.size > auth.end:
                part += (
                    f" (the {plural(seg.size - auth.end, 'byte', fmt=',')} past them, of a block "
                    "the error cut, are discarded)"
                )
            parts.append(part)
    except (LedgerError, OSError, ValueError):  # the storage is failing: say what is certain
        return (
            f"`ledgertool recover {ledger_dir}` seals the whole authenticated blocks written "
            "before the error once that is fixed; the part of a block the error cut is discarded"
        )
    if not parts:
        return (
            f"no open segment is left; once that is fixed, `ledgertool recover {ledger_dir}` "
            "re-signs the checkpoint"
        )
    return (
        f"kept for `ledgertool recover {ledger_dir}` to seal once that is fixed: {'; '.join(parts)}"
    )
