"""Recovery after a crash: seal the authenticated prefix of the open segments a capture left
(whole blocks whose device MAC verifies; the bytes past them reported, never signed), remove the
leftovers of interrupted atomic writes, re-sign the checkpoints (`ledgertool recover`,
docs/cli.md; a capture runs `recover_open_segments` on its link first). The storage is the
adversary's: an open segment that fails authentication is refused whole (docs/threat-model.md).
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import fsio
from ..errors import LedgerFormatError
from ..keyfiles import SigningKey
from ..errors import OpenSegmentRefusedError
from ..plural import plural
from . import layout
from . import segment as segments
from .checkpoints import write_checkpoint
from .header import LedgerHeader, load_ledger
from .index import link_state, links, segment_files
from .lock import writer_lock
from .openmac import OpenSegmentKey
from .rotations import current_signer_check, digest_key_ids
from .sealer import SealResult, load_seal, seal_committed, seal_records


def _remove_tmp_files(ledger_dir: Path, directory: Path, discarded: list[dict] | None) -> None:
    """Remove the leftovers of interrupted atomic writes (``*.tmp``, fsio) in `directory`; a link
    or other non-regular file by that name is refused (FileTypeError), never followed."""
    if not directory.is_dir():
        return
    for tmp in sorted(directory.glob("*" + fsio.TMP_SUFFIX)):
        st = tmp.lstat()
        if not stat.S_ISREG(st.st_mode):
            raise fsio.wrong_kind(tmp, st.st_mode, "a regular file (leftover of an interrupted write)")
        fsio.unlink(tmp, root=ledger_dir)
        if discarded is not None:
            discarded.append({"path": str(tmp), "bytes": st.st_size, "why": "temporary file of an interrupted write"})


def _discard(ledger_dir: Path, discarded: list[dict] | None, path: Path, size: int, why: str, *also: Path) -> None:
    """Remove `path` (and `also`), listing it in `discarded`: nothing goes without being reported."""
    for p in (path, *also):
        fsio.unlink(p, root=ledger_dir, missing_ok=True)
    if discarded is not None:
        discarded.append({"path": str(path), "bytes": size, "why": why})


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


def recover_open_segments(ledger_dir: Path, ledger: LedgerHeader, link: str, signing_key: SigningKey,
                          discarded: list[dict] | None = None, *,
                          trust_unauthenticated: bool = False) -> list[RecoveredSegment]:
    """Seal the authenticated prefix of every open segment left by a crash: the whole blocks of a
    v2 segment, each authenticated by the device's MAC chain (segment.authenticated_records); a
    v1 segment (no MACs) only with `trust_unauthenticated`. The bytes past the prefix are reported
    in the seal (torn bytes) and the result, never signed.

    OpenSegmentRefusedError (exit 1), with nothing of that segment sealed and the file left in
    place, for a block that fails authentication (planted, rewritten, reordered), a header naming
    another MAC key, or a v1 segment without `trust_unauthenticated`. Also removes leftovers of
    interrupted atomic writes (``*.tmp``) and every open segment that cannot be sealed where it
    stands: its header was cut (no whole record), does not decode, or does not fit the ledger
    there (another ledger, link, index, first seq, parameters or a digest key that is not the
    current one). Each is listed in `discarded` when given (path, bytes, why): nothing is removed
    without being reported. A link or FIFO in the ledger is FileTypeError.
    """
    out = []
    _remove_tmp_files(ledger_dir, layout.link_dir(ledger_dir, link), discarded)
    key_id = digest_key_ids(ledger_dir, ledger)[-1]
    mac_key = OpenSegmentKey.derive(signing_key, ledger.ledger_id)
    for index, files in sorted(segment_files(ledger_dir, link).items()):
        if "open" not in files:
            continue
        if "seal.json" in files:
            if ledger.version == 2 and "rec" not in files:  # crashed between the seal and the rename
                _finish_rename(ledger_dir, files)
            else:  # crashed between sealing and removing the open file
                fsio.unlink(files["open"], root=ledger_dir)
            continue
        partial = [files["parquet"]] if "parquet" in files else []  # of a seal that was not finished
        try:
            seg = segments.read_open_segment(files["open"], ledger_dir)
        except LedgerFormatError as e:
            size = files["open"].lstat().st_size
            why = ("segment header cut" if size < segments.HEADER_SIZE else
                   f"segment header does not decode ({str(e).removeprefix(str(files['open']) + ': ')}): "
                   "its records cannot be attributed")
            _discard(ledger_dir, discarded, files["open"], size, why, *partial)
            continue
        if seg.count == 0:  # crashed before the first whole record: nothing to seal
            _discard(ledger_dir, discarded, files["open"], seg.torn_bytes, "open segment without a whole record",
                     *partial)
            continue
        state = link_state(ledger_dir, ledger, link)
        misfit = (f"the file is segment {index}" if index != state.next_index else
                  segments.header_mismatch(seg.header, ledger, link, state.next_index, state.next_seq, key_id))
        if misfit:
            _discard(ledger_dir, discarded, files["open"], seg.size,
                     f"open segment does not continue the chain at segment {state.next_index}, seq "
                     f"{state.next_seq}: {misfit}; its {plural(seg.count, 'record')} cannot be sealed there", *partial)
            continue
        records = segments.authenticated_records(seg, mac_key, files["open"],
                                                 trust_unauthenticated=trust_unauthenticated)
        # the records were digested with the key the segment header names: the seal says so
        res = _seal_recovered(ledger_dir, ledger.for_digest_key(seg.header.key_id), link, index, seg, records,
                              files["open"], state.prev_hash, signing_key)
        out.append(RecoveredSegment(res, len(seg.blocks), int(seg.header.version == 2 and seg.torn_bytes > 0)))
    return out


def _seal_recovered(ledger_dir: Path, ledger: LedgerHeader, link: str, index: int, seg: segments.OpenSegment,
                    records: bytes, path: Path, prev_hash: str, signing_key: SigningKey) -> SealResult:
    """Seal the authenticated `records` of open segment `path`: a v1 ledger writes Parquet and removes
    the file; a v2 ledger truncates it to the authenticated prefix, signs the seal over those
    records and renames it to seg-N.rec (a v1 open segment, only trusted, is sealed as v1 always:
    its bytes are not a v2 record file)."""
    seal_file = layout.seal_path(ledger_dir, link, index)
    if ledger.version == 2 and seg.header.version == 2:
        c = segments.commit_records(records, ledger.record_size, ledger.leaf_records)
        fsio.truncate(path, seg.size - seg.torn_bytes, root=ledger_dir)  # the torn rest is never sealed
        _, res = seal_committed(ledger_dir=ledger_dir, ledger=ledger, link=link, index=index,
                                first_seq=seg.header.first_seq, totals=c.totals, leaves=c.leaves, prev_hash=prev_hash,
                                signing_key=signing_key, seal_file=seal_file, torn_bytes=seg.torn_bytes,
                                source="recovered open segment")
        fsio.rename(path, layout.segment_name(index, layout.RECORDS), root=ledger_dir)
        return res
    _, res = seal_records(
        ledger_dir=ledger_dir, ledger=ledger, link=link, index=index, first_seq=seg.header.first_seq,
        records=records, prev_hash=prev_hash, signing_key=signing_key,
        parquet=layout.parquet_path(ledger_dir, link, index), seal_file=seal_file, torn_bytes=seg.torn_bytes,
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
    root = (segments.commit_records(seg.records, seg.header.record_size, seg.header.leaf_records).totals.merkle_root
            if seg.count else b"")
    if seg.header.version != 2 or seg.torn_bytes or root.hex() != seal.merkle_root:
        raise OpenSegmentRefusedError(
            f"{files['open']}: its records are not the ones {files['seal.json'].name} signed (Merkle root "
            f"{root.hex() or 'of no records'}, {seg.torn_bytes} bytes past the last whole block); it is left in place, "
            "nothing was renamed")
    fsio.rename(files["open"], files["seal.json"].name.removesuffix(".seal.json") + "." + layout.RECORDS,
                root=ledger_dir)


@dataclass
class RecoverResult:
    """What `recover_ledger` did (JSON: `ledgertool recover --json`)."""

    ledger: str
    sealed: list[tuple[str, RecoveredSegment]] = field(default_factory=list)
    discarded: list[dict] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)

    @property
    def torn_bytes(self) -> int:
        return sum(r.torn_bytes for _, r in self.sealed) + sum(d["bytes"] for d in self.discarded)

    def to_json(self) -> dict:
        return {"ok": True, "ledger": self.ledger,
                "sealed": [{"link": link, "segment": r.index, "records": r.records,
                            "torn_bytes_discarded": r.torn_bytes, "blocks_sealed": r.blocks,
                            "blocks_past_prefix": r.tail_blocks} for link, r in self.sealed],
                "discarded": self.discarded, "bytes_discarded": self.torn_bytes,
                "checkpoints": self.checkpoints}


def recover_ledger(ledger_dir: Path, signing_key: SigningKey, *, trust_unauthenticated: bool = False
                   ) -> RecoverResult:
    """Seal the authenticated prefix of every link's open segments after a crash and re-sign the
    checkpoints (recover_open_segments: OpenSegmentRefusedError for a segment that fails
    authentication, or a v1 one without `trust_unauthenticated`).

    Holds the ledger's writer lock (LedgerLockedError while a capture or another writer runs);
    StorageError naming the file when the file system fails (nothing is removed before what
    replaces it is durable, so rerunning after the fix is safe)."""
    ledger_dir = Path(ledger_dir)
    ledger = load_ledger(ledger_dir)
    with writer_lock(ledger_dir, "recover"):
        current_signer_check(ledger_dir, ledger, signing_key)
        res = RecoverResult(str(ledger_dir))
        _remove_tmp_files(ledger_dir, ledger_dir, res.discarded)
        for link in links(ledger_dir):
            for r in recover_open_segments(ledger_dir, ledger, link, signing_key, res.discarded,
                                           trust_unauthenticated=trust_unauthenticated):
                res.sealed.append((link, r))
            res.checkpoints.append(str(write_checkpoint(ledger_dir, ledger, link, signing_key)))
    return res
