"""verify: check a ledger against a verifier's trust bundle and name everything that broke.

Every file is read through ledgertool.ledger.reader (ASCII segment index, regular files only,
each file read once); the bytes that are hashed are the bytes that are decoded, and `on_segment`
hands those decoded bytes to `query`, `recompute` and the other readers, so they see exactly what
was checked. For each link, in segment order (docs/ledger-format.md, "Verification"):
  1. the seal parses and belongs to this ledger (ledger id, link, segment index);
  2. algorithm, strip mode and record layout equal the ledger header (no downgrade), a seal that
     signs ledger.json's SHA-256 (`ledger_header_sha256`) signs the bytes read, and the digest key
     id is the one the key schedule assigns to this link and segment; records are decoded with the
     seal's signed layout, never with the unsigned header's;
  3. both hybrid signatures verify with the trusted keys;
  4. prev_seal_hash equals the hash of the previous seal (genesis for the first): the chain;
  5. the Parquet file the seal names (its own segment's name, nothing else) is a regular file
     whose SHA-256 and size match the seal;
  6. its records: count, first/last sequence, first/last timestamp, declared drops match the seal,
     sequence numbers are contiguous within and across segments;
  7. the RFC 9162 Merkle root over the record blocks equals the seal's; when it does not, the
     segment's leaf-hash sidecar (authenticated by that root) names the changed leaf blocks;
then, per link:
  8. the ledger extends its stored checkpoint (a link with seals and no stored checkpoint is a
     problem) and the one given with --checkpoint (tlog-checkpoint over the seal hashes,
     docs/transparency.md). Without a given checkpoint, append-only is checked only against what
     the storage holds, and the result says so.
Signatures and digest key ids are checked against the key schedule: the trust bundle and
ledger.json's (genesis) digest key id, followed through the ledger's rotation statements
(ledgertool.seal.rotation). With no trust bundle (`trust=None`, the keyless checks `query` and
`recompute` run when no --trust is given) signatures, rotations and digest key ids are not
checked, and the result says so. Problems are collected, never stop the walk; open (unsealed)
segments, stray files and temporary files are reported as warnings, a file that imitates a sealed
segment's name or a non-regular file where a segment file belongs as a problem.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from ..algorithms import algorithm_caveat
from ..digest.engine import merkle_leaves, merkle_root, valid_leaf_records
from ..digest.record import FLAG_GAP, RECORD_FIXED, record_dtype
from ..errors import FileTypeError, LedgerFormatError, StorageError
from ..keyfiles import TrustBundle
from ..ledger import segment as segments
from ..ledger.header import LedgerHeader, load_ledger
from ..ledger.layout import LEAVES, OPEN, PARQUET, SEAL, segment_name
from ..ledger.reader import LedgerReader, Stray
from ..ledger.rotations import load_rotations
from ..ledger.segment import read_open_segment
from ..seal.checkpoint import LinkTree, check_extends, parse_note
from ..seal.document import (
    decode_parquet,
    genesis_hash,
    parse_seal,
    seal_hash,
    seal_signed_bytes,
    table_to_records,
)
from ..seal.rotation import Schedule, key_schedule

MAX_PER_KIND = 8  # per segment: record-level findings beyond this are summarised


@dataclass(frozen=True)
class Problem:
    kind: str
    segment: int | None
    detail: str
    link: str | None = None
    record: int | None = None  # index of the record within its segment, where one is named

    def to_json(self) -> dict:
        return {"kind": self.kind, "segment": self.segment, "record": self.record, "link": self.link,
                "detail": self.detail}


@dataclass
class VerifyResult:
    ledger: str
    segments: int = 0
    records: int = 0
    frames: int = 0
    drops_declared: int = 0
    links: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    checkpoint: dict | None = None
    signatures_checked: bool = True
    append_only: dict = field(default_factory=dict)  # see _append_only

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"ok": self.ok, "ledger": self.ledger, "segments": self.segments, "records": self.records,
                "frames": self.frames, "drops_declared": self.drops_declared, "links": self.links,
                "problems": [p.to_json() for p in self.problems],
                "warnings": [w.to_json() for w in self.warnings], "checkpoint": self.checkpoint,
                "signatures_checked": self.signatures_checked, "append_only": self.append_only}


@dataclass(frozen=True)
class VerifiedSegment:
    """One sealed segment that passed every per-segment check (steps 1-7), as it was checked:
    `table` is the decoded Parquet file whose bytes matched the seal, `records` the fixed-size
    records the Merkle root covers. Whether the whole ledger verified is the VerifyResult's."""

    link: str
    index: int
    seal: dict
    table: pa.Table
    records: bytes


def verify_ledger(directory: Path | LedgerReader, trust: TrustBundle | None, checkpoint: bytes | None = None,
                  checkpoint_name: str = "checkpoint", *, links: list[str] | None = None,
                  on_segment: Callable[[VerifiedSegment], None] | None = None) -> VerifyResult:
    """Verify every sealed segment of every link (or of `links`), and that the ledger extends
    `checkpoint` (a signed tlog-checkpoint note) when given. `on_segment` receives each segment
    that passed its own checks, in (link, segment) order, as it was checked. `trust` None runs
    the keyless checks only (see the module docstring).

    Raises LedgerFormatError only when DIR is not a ledger, a link in `links` is not in it, or
    the checkpoint cannot be parsed / names another ledger; every other finding is a Problem."""
    reader = directory if isinstance(directory, LedgerReader) else LedgerReader(Path(directory))
    directory = reader.directory
    ledger = load_ledger(directory)
    chosen = reader.links if links is None else list(links)
    unknown = sorted(set(chosen) - set(reader.links))
    if unknown:
        raise LedgerFormatError(f"{directory}: no link named {', '.join(unknown)} (links: "
                                f"{', '.join(reader.links) or 'none'})")
    res = VerifyResult(str(directory), links=chosen, signatures_checked=trust is not None)
    caveat = algorithm_caveat(ledger.algorithm)
    if caveat:  # the verdict below holds only under the caveat's condition
        res.warnings.append(Problem("algorithm_caveat", None, caveat))
    note = None
    if checkpoint is not None:
        note = parse_note(checkpoint, checkpoint_name)
        if note.checkpoint.ledger_id != ledger.ledger_id:
            raise LedgerFormatError(f"{checkpoint_name}: checkpoint of ledger {note.checkpoint.ledger_id}, "
                                    f"not of {directory} ({ledger.ledger_id})")
        res.checkpoint = note.checkpoint.to_json()
    for stray in reader.strays:
        _report_stray(stray, res)
    if trust is not None:
        sched = key_schedule(ledger.ledger_id, trust, load_rotations(directory),
                             digest_key_id=ledger.digest_key_id, algorithm=ledger.algorithm)
        for p in sched.problems:
            res.problems.append(Problem("rotation_invalid", None, p))
    else:
        sched = None
        res.warnings.append(Problem("signatures_unchecked", None, "no trust bundle given: seal and checkpoint "
                                    "signatures, key rotations and digest key ids were not checked; the "
                                    "records are the ledger's as found, consistent with their own seals"))
    top = reader.read_top_checkpoint()
    for link in chosen:
        stored = _stored_checkpoint(reader, link, res)  # before the listing: see read_checkpoint
        tree = _verify_link(reader, ledger, link, sched, res, on_segment)
        if stored is not None:
            _check_checkpoint(stored, tree, sched, res, f"{reader.checkpoint_path(link)}: ")
        elif tree.seal_hashes:
            res.problems.append(Problem(
                "checkpoint_missing", None,
                f"{reader.checkpoint_path(link)}: link {link} has {len(tree.seal_hashes)} sealed segments but no "
                "stored checkpoint (every capture writes one after each seal): it was deleted, or a capture was "
                "killed before its first checkpoint (`ledgertool recover` signs one); a cut tail cannot be "
                "detected without it", link))
        if top is not None:  # written by ledgertool before 0.2 for one-link ledgers
            try:
                top_note = parse_note(top, str(directory / "checkpoint"))
            except LedgerFormatError as e:
                res.problems.append(Problem("checkpoint_unreadable", None, str(e), link))
            else:
                if top_note.checkpoint.link == link:
                    _check_checkpoint(top_note, tree, sched, res, f"{directory / 'checkpoint'}: ")
        if note is not None and note.checkpoint.link == link:
            _check_checkpoint(note, tree, sched, res, f"{checkpoint_name}: ")
    res.append_only = _append_only(res, note, chosen)
    return res


def _report_stray(stray: Stray, res: VerifyResult) -> None:
    if stray.why == "temp":
        res.warnings.append(Problem("temp_file", None, f"{stray.path}: leftover of an interrupted atomic write; "
                                    "ignored (`ledgertool recover` removes it)", stray.link))
    elif stray.shadows is not None:
        res.problems.append(Problem("segment_name_shadow", stray.shadows, f"{stray.path}: {stray.why}; it is "
                                    "not part of the sealed ledger and was not read", stray.link))
    else:
        res.warnings.append(Problem("stray_file", None, f"{stray.path}: {stray.why}; not part of the sealed "
                                    "ledger, not read", stray.link))


def _stored_checkpoint(reader: LedgerReader, link: str, res: VerifyResult):
    try:
        data = reader.read_checkpoint(link)
        return None if data is None else parse_note(data, str(reader.checkpoint_path(link)))
    except LedgerFormatError as e:
        res.problems.append(Problem("checkpoint_unreadable", None, str(e), link))
        return None


def _append_only(res: VerifyResult, note, links: list[str]) -> dict:
    """What the append-only check rested on: a checkpoint the verifier holds, or only the ones the
    ledger's storage holds (which whoever holds the storage can roll back together with the tail)."""
    given = note.checkpoint.link if note is not None else None
    unchecked = [ln for ln in links if ln != given]
    text = None
    if unchecked:
        text = (f"append-only not checked against a checkpoint you hold for link{'s' if len(unchecked) > 1 else ''} "
                f"{', '.join(unchecked)}: only the ledger's own stored checkpoints were compared, and whoever "
                "holds the storage can roll those back together with a cut tail (pass --checkpoint)")
    return {"given_checkpoint_link": given, "unchecked_links": unchecked, "note": text}


def _check_checkpoint(note, tree: LinkTree, sched: Schedule | None, res: VerifyResult, prefix: str) -> None:
    link = note.checkpoint.link
    for f in check_extends(note, tree, sched.bundles if sched is not None else None):
        res.problems.append(Problem(f.kind, None, prefix + f.detail, link))


def _verify_link(reader: LedgerReader, ledger: LedgerHeader, link: str, sched: Schedule | None, res: VerifyResult,
                 on_segment) -> LinkTree:
    """Steps 1-7 for every sealed segment of `link`; returns the link tree (its seal hashes up to
    the first missing or unreadable seal) for the checkpoint checks."""
    def problem(kind: str, seg: int | None, detail: str, record: int | None = None) -> None:
        res.problems.append(Problem(kind, seg, detail, link, record))

    listing = reader.listing(link)
    for path in listing.temp_files:
        _report_stray(Stray(path, "temp", link), res)
    for stray in listing.strays:
        _report_stray(stray, res)
    expected_prev = genesis_hash(ledger.ledger_id, link)
    expected_seq = 0
    sealed = listing.sealed
    hashes: list[str] = []
    tree_records: list[int] = []
    tree_complete = True
    seen: dict[str, int] = {}  # seal hash -> segment, to name a duplicated segment
    header_mismatch: list[int] = []  # seals that sign another ledger.json than the one read
    open_files = []
    for i, kinds in sorted(listing.segments.items()):
        # a capture running now may have sealed segment i since the listing: not a finding
        if PARQUET in kinds and SEAL not in kinds and OPEN not in kinds \
                and not reader.segment_path(link, i, SEAL).exists():
            problem("unsealed_parquet", i, f"{reader.segment_path(link, i, PARQUET)} has no seal document")
        if OPEN in kinds and SEAL not in kinds:
            open_files.append((i, reader.segment_path(link, i, OPEN)))
    if sealed and sealed[-1] + 1 != len(sealed):
        missing = sorted(set(range(sealed[-1] + 1)) - set(sealed))
        problem("segment_missing", missing[0], f"segments {missing} of {sealed[-1] + 1} have no seal")
    for index in sealed:
        path = reader.segment_path(link, index, SEAL)
        before = len(res.problems)
        if index != len(hashes):
            tree_complete = False
        try:
            doc = parse_seal(reader.read_seal_bytes(link, index), path)
        except LedgerFormatError as e:
            problem("seal_unreadable", index, str(e))
            expected_prev = None
            tree_complete = False
            continue
        res.segments += 1
        # 1. identity
        if doc.get("ledger_id") != ledger.ledger_id:
            problem("foreign_seal", index, f"{path}: seal belongs to ledger {doc.get('ledger_id')}")
        if doc.get("link") != link or doc.get("segment") != index:
            problem("seal_misplaced", index,
                    f"{path}: seal is for link {doc.get('link')!r} segment {doc.get('segment')}")
        # 2. no downgrade: the signed hash of ledger.json (seals since it was added), and the
        # parameters each seal repeats (every seal)
        bound = doc.get("ledger_header_sha256")
        if bound is not None and bound != ledger.sha256:
            header_mismatch.append(index)
        for key in ("algorithm", "strip", "record_size", "leaf_records"):
            if doc.get(key) != getattr(ledger, key):
                problem("parameter_mismatch", index,
                        f"{path}: {key} {doc.get(key)!r} differs from the ledger's {getattr(ledger, key)!r}")
        if sched is not None:
            want_kid = sched.digest_key_id_for(link, index)
            if doc.get("digest_key_id") != want_kid:
                problem("digest_key_mismatch", index, f"{path}: digest_key_id {doc.get('digest_key_id')!r} is "
                        f"not {want_kid}, the digest key of link {link} segment {index}"
                        f"{_digest_key_note(sched, doc.get('digest_key_id'), want_kid)}")
            # 3. signatures, with the key set the rotation schedule assigns to this segment
            bundle = sched.bundle_for(link, index)
            try:
                sig_problems = bundle.verify_detailed(seal_signed_bytes(doc), doc.get("signatures") or {})
            except (TypeError, ValueError) as e:
                sig_problems = [("bad_signature", f"seal cannot be canonicalised ({e})")]
            for kind, p in sig_problems:
                problem(kind, index, f"{path}: {p}")
        # 4. chain
        if expected_prev is not None and doc.get("prev_seal_hash") != expected_prev:
            problem("chain_broken", index,
                    f"{path}: prev_seal_hash {str(doc.get('prev_seal_hash'))[:16]}… does not match the "
                    f"previous seal's hash {expected_prev[:16]}…")
        try:
            expected_prev = seal_hash(doc)
        except (TypeError, ValueError):
            expected_prev = None
        if expected_prev is not None:
            if expected_prev in seen:
                problem("segment_duplicated", index, f"{path}: same seal as segment {seen[expected_prev]}")
            seen.setdefault(expected_prev, index)
            if tree_complete:
                hashes.append(expected_prev)
                tree_records.append(doc.get("records") if isinstance(doc.get("records"), int) else 0)
        else:
            tree_complete = False
        # 5..7 records
        expected_seq, checked = _verify_records(reader, ledger, link, index, doc, expected_seq, res, problem)
        if checked is not None and len(res.problems) == before and on_segment is not None:
            on_segment(VerifiedSegment(link, index, doc, checked[0], checked[1]))
    if header_mismatch:
        n = len(header_mismatch)
        problem("ledger_header_mismatch", header_mismatch[0],
                f"{reader.directory / 'ledger.json'}: SHA-256 {ledger.sha256[:16]}… is not the header that "
                f"{n} seal(s) of link {link} sign (segments {header_mismatch[0]}..{header_mismatch[-1]}): "
                "ledger.json was edited after sealing; the seals' own parameters are the ones checked")
    # open segments in index order, as `recover` takes them: one that continues the chain is sealed,
    # and the next one must continue after it
    nxt = (sealed[-1] + 1 if sealed else 0, expected_seq)
    for i, path in open_files:
        key_id = sched.digest_key_id_for(link, nxt[0]) if sched is not None else None
        w, nxt = _open_segment_warning(path, i, ledger, link, nxt, key_id)
        if w is not None:
            res.warnings.append(w)
    return LinkTree(hashes, tree_records, tree_complete)


def _open_segment_warning(path: Path, index: int, ledger: LedgerHeader, link: str, nxt: tuple[int, int],
                          key_id: str | None) -> tuple[Problem | None, tuple[int, int]]:
    """The warning for an open segment, with the advice `recover` makes true: it seals a segment
    that continues the chain at `nxt` (segment index, seq; segments.header_mismatch) and discards,
    reporting its bytes, one that does not. Returns the warning (None when a running capture
    sealed and removed the file since the listing) and where the chain continues after it."""
    try:
        seg = read_open_segment(path)
    except StorageError as e:
        if e.errno == errno.ENOENT:
            return None, nxt
        raise
    except LedgerFormatError as e:
        return Problem("torn_segment", index, f"{e}; `ledgertool recover` discards it (reporting its bytes)",
                       link), nxt
    misfit = (f"the file is segment {index}" if index != nxt[0] else
              segments.header_mismatch(seg.header, ledger, link, nxt[0], nxt[1], key_id))
    if misfit:
        return Problem("torn_segment", index, f"{path}: open segment does not continue the chain at segment "
                       f"{nxt[0]}, seq {nxt[1]}: {misfit}; `ledgertool recover` discards it (reporting its "
                       "bytes)", link), nxt
    if not seg.count:
        return Problem("torn_segment", index, f"{path}: open segment without a whole record "
                       f"({seg.torn_bytes} bytes); `ledgertool recover` discards it", link), nxt
    return Problem("torn_segment" if seg.torn_bytes else "open_segment", index,
                   f"{path}: open segment with {seg.count} whole records and {seg.torn_bytes} torn bytes; "
                   "`ledgertool recover` (or the next capture) seals it", link), (index + 1, nxt[1] + seg.count)


def _digest_key_note(sched: Schedule, kid: object, want: str | None) -> str:
    """Why a seal's digest key id is wrong: an old key after its rotation, a key before it takes
    effect, or one no valid statement introduced."""
    numbers = {e.key_id: e.number for e in sched.digest_epochs if e.key_id is not None}
    if not isinstance(kid, str) or kid not in numbers:
        return " (that key was never introduced by a valid rotation)"
    if want in numbers and numbers[kid] < numbers[want]:
        return f" (that key was retired by rotation {sched.retired_by(kid)})"
    return f" (that key takes over at a later segment, by rotation {numbers[kid]})"


def _sequence_findings(seqs: np.ndarray, first_seq: int, last_seq: int, count: int, index: int, problem) -> None:
    """Name deleted, duplicated, reordered records and undeclared gaps by record index.

    The seal fixes the range [first_seq, last_seq] and the count. A seal whose own range is wider
    than its count was sealed over a sequence gap (`sequence_gap`); a value of the range missing
    from a consistent seal's records was deleted afterwards (`record_missing`)."""
    n = len(seqs)
    # The common case, an untouched segment: seqs are exactly first_seq, first_seq + 1, ..., last_seq.
    # One vectorised pass decides it; the sorting and set work below is only for naming what broke.
    if (n and n == count and int(seqs[0]) == first_seq and int(seqs[-1]) == last_seq
            and last_seq - first_seq + 1 == n and bool(np.all(np.diff(seqs) == 1))):
        return
    found: dict[str, int] = {}

    def add(kind: str, k: int | None, detail: str) -> None:
        found[kind] = found.get(kind, 0) + 1
        if found[kind] <= MAX_PER_KIND:
            problem(kind, index, detail, k)

    # duplicates: every occurrence after the first
    order = np.argsort(seqs, kind="stable")
    srt = seqs[order]
    dup_pos = np.sort(order[1:][srt[1:] == srt[:-1]]) if n > 1 else np.array([], dtype=np.int64)
    for k in dup_pos:
        add("record_duplicated", int(k), f"segment {index} record {int(k)}: seq {int(seqs[k])} appears again")
    uniq = np.unique(seqs)
    outside = uniq[(uniq < first_seq) | (uniq > last_seq)]
    for v in outside[:MAX_PER_KIND]:
        k = int(np.nonzero(seqs == v)[0][0])
        add("range_mismatch", k, f"segment {index} record {k}: seq {int(v)} outside the seal's "
                                 f"{first_seq}..{last_seq}")
    inside = uniq[(uniq >= first_seq) & (uniq <= last_seq)]
    span = last_seq - first_seq + 1
    if len(inside) < span:
        present = np.zeros(span, dtype=bool)
        present[(inside - first_seq).astype(np.int64)] = True
        missing = np.nonzero(~present)[0] + first_seq
        sealed_over_gap = count < span
        # runs of consecutive missing values
        breaks = np.nonzero(np.diff(missing) != 1)[0] + 1
        for run in np.split(missing, breaks):
            lo, hi = int(run[0]), int(run[-1])
            k = int(np.searchsorted(np.sort(seqs), lo))
            what = f"seq {lo}" if lo == hi else f"seq {lo}..{hi} ({hi - lo + 1} records)"
            if sealed_over_gap:
                add("sequence_gap", k, f"segment {index} record {k}: {what} skipped and not declared as drops")
            else:
                add("record_missing", k, f"segment {index} record {k}: {what} deleted (the seal covers it)")
    if not len(dup_pos) and np.any(np.diff(seqs) < 0):
        k = int(np.nonzero(seqs != np.sort(seqs))[0][0])
        add("record_reordered", k, f"segment {index} record {k}: seq {int(seqs[k])} out of order")
    for kind, c in found.items():
        if c > MAX_PER_KIND:
            problem(kind, index, f"segment {index}: {c - MAX_PER_KIND} more {kind} findings not listed")


def _changed_leaves(reader: LedgerReader, link: str, index: int, records: bytes, layout: tuple[int, int],
                    root: str) -> list[int] | None:
    """Indexes of leaves whose hash differs from the sealed tree, using the leaf-hash sidecar when
    its own root equals the seal's (so it is authentic); None when that is not possible."""
    try:
        raw = reader.read_segment_file(link, index, LEAVES, limit=32 << 26).to_pybytes()
    except (LedgerFormatError, FileTypeError, StorageError):  # the sidecar only names blocks: optional
        return None
    if len(raw) % 32:
        return None
    if merkle_root(raw).hex() != root:
        return None
    sealed = [raw[i:i + 32] for i in range(0, len(raw), 32)]
    fresh = merkle_leaves(records, *layout)
    now = [fresh[i:i + 32] for i in range(0, len(fresh), 32)]
    changed = [i for i in range(max(len(now), len(sealed)))
               if i >= len(now) or i >= len(sealed) or now[i] != sealed[i]]
    return changed


def _record_layout(ledger: LedgerHeader, doc: dict) -> tuple[int, int] | None:
    """(record_size, leaf_records) the segment's records are decoded and hashed with: the seal's
    (signed) values, not the unsigned header's; None when the seal's are out of bounds."""
    rsize, leaf = doc.get("record_size", ledger.record_size), doc.get("leaf_records", ledger.leaf_records)
    if type(rsize) is not int or rsize not in (RECORD_FIXED + 16, RECORD_FIXED + 32) or not valid_leaf_records(leaf):
        return None
    return rsize, leaf


def _verify_records(reader: LedgerReader, ledger: LedgerHeader, link: str, index: int, doc: dict, expected_seq: int,
                    res: VerifyResult, problem) -> tuple[int, tuple[pa.Table, bytes] | None]:
    """Steps 5-7 for one segment: (the sequence number the next segment must start at, and the
    decoded table and records when the Parquet file could be read and decoded). Records are decoded
    and hashed with the seal's signed layout (`_record_layout`)."""
    pq_path = reader.segment_path(link, index, PARQUET)
    layout = _record_layout(ledger, doc)
    if layout is None:
        problem("seal_malformed", index, f"segment {index}: record_size {_shown(doc.get('record_size'))} / "
                                         f"leaf_records {_shown(doc.get('leaf_records'))} out of bounds")
        return expected_seq, None
    record_size, leaf_records = layout
    digest_size = record_size - 32
    try:
        first_seq, last_seq = int(doc["first_seq"]), int(doc["last_seq"])
        count = int(doc["records"])
    except (KeyError, TypeError, ValueError, OverflowError):
        problem("seal_malformed", index, f"segment {index}: seal lacks sequence range or count")
        return expected_seq, None
    # u64 sequence numbers, and a range no wider than the records could cover (plus the gaps a
    # sealer may skip): a tampered seal must not make the verifier allocate its range.
    if not (0 <= first_seq < 2**64 and first_seq - 1 <= last_seq < 2**64 and 0 <= count <= 2**40) or \
            last_seq - first_seq + 1 > max(count, 1) * 1024:
        problem("seal_malformed", index, f"segment {index}: implausible sequence range {first_seq}..{last_seq} "
                                         f"for {count} records")
        return expected_seq, None
    if first_seq != expected_seq:
        kind = "sequence_gap" if first_seq > expected_seq else "sequence_overlap"
        problem(kind, index, f"segment {index} starts at seq {first_seq}, expected {expected_seq} "
                             f"({first_seq - expected_seq:+d} records undeclared)", 0)
    # the seal names its own segment's file, nothing else (never a path taken from the seal)
    if doc.get("parquet_file") != pq_path.name:
        claimed = doc.get("segment")
        own = (isinstance(claimed, int) and not isinstance(claimed, bool) and 0 <= claimed < 10**8
               and doc.get("parquet_file") == segment_name(claimed, PARQUET))
        if not own:  # a seal moved from another segment was named (seal_misplaced) already
            problem("seal_malformed", index, f"{reader.segment_path(link, index, SEAL)}: parquet_file "
                                             f"{_shown(doc.get('parquet_file'))} is not {pq_path.name}")
        return last_seq + 1, None
    listing = reader.listing(link)
    if not listing.has(index, PARQUET):
        if any(s.path == pq_path for s in listing.strays):  # not a regular file: named already, not read
            return last_seq + 1, None
        if not os.path.lexists(pq_path):  # (the listing may predate a capture's rename into place)
            problem("parquet_missing", index, f"{pq_path} is missing")
            return last_seq + 1, None
    try:
        data = reader.read_segment_file(link, index, PARQUET)
    except LedgerFormatError as e:
        problem("parquet_unreadable", index, str(e))
        return last_seq + 1, None
    sha = hashlib.sha256(data).hexdigest()
    if sha != doc.get("parquet_sha256"):
        problem("parquet_hash_mismatch", index, f"{pq_path}: SHA-256 differs from the seal's parquet_sha256")
    elif len(data) != doc.get("parquet_bytes"):  # the signed size must agree too
        problem("parquet_hash_mismatch", index, f"{pq_path}: {len(data)} bytes, seal's "
                                                f"parquet_bytes says {doc.get('parquet_bytes')}")
    try:
        table = decode_parquet(data)
        records = table_to_records(table, digest_size)
    except Exception as e:  # noqa: BLE001 - any unreadable Parquet is a finding, not a crash
        problem("parquet_unreadable", index, f"{pq_path}: {type(e).__name__}: {e}")
        return last_seq + 1, None
    arr = np.frombuffer(records, dtype=record_dtype(digest_size))
    n = len(arr)
    res.records += n
    gaps = (arr["flags"] & FLAG_GAP) != 0
    res.frames += int(n - gaps.sum())
    drops = int(arr["aux"][gaps].sum())
    res.drops_declared += drops
    if n != count:
        problem("count_mismatch", index, f"segment {index}: {n} records in Parquet, seal says {count}")
    elif n - int(gaps.sum()) != doc.get("frames"):
        problem("count_mismatch", index, f"segment {index}: {n - int(gaps.sum())} frame records, seal's "
                                         f"frames says {doc.get('frames')}")
    if n:
        _sequence_findings(arr["seq"].astype(np.int64), first_seq, last_seq, count, index, problem)
        if str(int(arr["ts_ns"][0])) != doc.get("first_ts_ns") or str(int(arr["ts_ns"][-1])) != doc.get("last_ts_ns"):
            problem("timestamp_mismatch", index, f"segment {index}: first/last timestamps differ from the seal")
    if drops != doc.get("drops_declared"):
        problem("drops_mismatch", index, f"segment {index}: GAP records declare {drops} drops, seal says "
                                         f"{doc.get('drops_declared')}")
    # in C (SHA-NI leaves and tree); ledgertool.seal.merkle is the pure-Python reference the tests compare with
    root = merkle_root(merkle_leaves(records, record_size, leaf_records)).hex()
    if root != doc.get("merkle_root"):
        leaf = leaf_records
        changed = _changed_leaves(reader, link, index, records, layout, str(doc.get("merkle_root")))
        if changed:
            first = changed[0] * leaf
            blocks = ", ".join(f"{c * leaf}..{min((c + 1) * leaf, max(n, count)) - 1}" for c in changed[:4])
            more = f" and {len(changed) - 4} more blocks" if len(changed) > 4 else ""
            problem("merkle_mismatch", index,
                    f"segment {index}: Merkle root differs from the seal; changed leaf blocks: records "
                    f"{blocks}{more} (leaf {changed[0]}, {leaf} records per leaf)", first)
        else:
            problem("merkle_mismatch", index, f"segment {index}: Merkle root over its {n} records differs "
                                              "from the seal (a record was changed)")
    return last_seq + 1, (table, records)


def _shown(value: object) -> str:
    """An untrusted seal value for a message: repr, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
