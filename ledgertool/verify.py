"""verify: check a ledger against a verifier's trust bundle and name everything that broke.

For each link, in segment order (docs/ledger-format.md, "Verification"):
  1. the seal parses and belongs to this ledger (ledger id, link, segment index);
  2. algorithm, strip mode and record layout equal the ledger header (no downgrade), a seal that
     signs ledger.json's SHA-256 (`ledger_header_sha256`) signs the bytes read, and the digest key
     id is the one the key schedule assigns to this link and segment; records are decoded with the
     seal's signed layout, never with the unsigned header's;
  3. both hybrid signatures verify with the trusted keys;
  4. prev_seal_hash equals the hash of the previous seal (genesis for the first): the chain;
  5. the Parquet file exists and its SHA-256 and size match the seal;
  6. its records: count, first/last sequence, first/last timestamp, declared drops match the seal,
     sequence numbers are contiguous within and across segments;
  7. the RFC 9162 Merkle root over the record blocks equals the seal's; when it does not, the
     segment's leaf-hash sidecar (authenticated by that root) names the changed leaf blocks;
then, per link:
  8. the ledger extends its own checkpoint file and the one given with --checkpoint
     (tlog-checkpoint over the seal hashes, docs/transparency.md).
Signatures and digest key ids are checked against the key schedule: the trust bundle and
ledger.json's (genesis) digest key id, followed through the ledger's rotation statements
(ledgertool.rotation). Problems are collected, never stop the walk; open
(unsealed) segments and stray temporary files are reported as warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import segments
from .checkpoint import check_extends, checkpoint_path, link_tree, parse_note
from .engine import FLAG_GAP, merkle_leaves, merkle_root, record_dtype, valid_leaf_records
from .errors import LedgerFormatError
from .keys import TrustBundle
from .ledger import links, load_ledger, segment_files
from .seal import HEADER_SHA256, genesis_hash, load_seal, parquet_records, read_sealed_parquet, seal_hash, seal_signed_bytes
from .rotation import Schedule, key_schedule, load_rotations
from .segments import read_open_segment

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

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"ok": self.ok, "ledger": self.ledger, "segments": self.segments, "records": self.records,
                "frames": self.frames, "drops_declared": self.drops_declared, "links": self.links,
                "problems": [p.to_json() for p in self.problems],
                "warnings": [w.to_json() for w in self.warnings], "checkpoint": self.checkpoint}


def verify_ledger(directory: Path, trust: TrustBundle, checkpoint: bytes | None = None,
                  checkpoint_name: str = "checkpoint") -> VerifyResult:
    """Verify every sealed segment of every link, and that the ledger extends `checkpoint` (a signed
    tlog-checkpoint note) when given. Raises LedgerFormatError only when DIR is not a ledger or the
    checkpoint cannot be parsed / names another ledger; every other finding is a Problem."""
    directory = Path(directory)
    ledger = load_ledger(directory)
    res = VerifyResult(str(directory), links=links(directory))
    note = None
    if checkpoint is not None:
        note = parse_note(checkpoint, checkpoint_name)
        if note.checkpoint.ledger_id != ledger["ledger_id"]:
            raise LedgerFormatError(f"{checkpoint_name}: checkpoint of ledger {note.checkpoint.ledger_id}, "
                                    f"not of {directory} ({ledger['ledger_id']})")
        res.checkpoint = note.checkpoint.to_json()
    sched = key_schedule(ledger["ledger_id"], trust, load_rotations(directory),
                         digest_key_id=ledger["digest_key_id"], algorithm=ledger["algorithm"])
    for p in sched.problems:
        res.problems.append(Problem("rotation_invalid", None, p))
    for link in res.links:
        _verify_link(directory, ledger, link, sched, res)
        own = checkpoint_path(directory, link)
        if own.is_file():
            try:
                own_note = parse_note(own.read_bytes(), str(own))
            except LedgerFormatError as e:
                res.problems.append(Problem("checkpoint_unreadable", None, str(e), link))
            else:
                _check_checkpoint(directory, own_note, sched, res, f"{own}: ")
    if note is not None:
        _check_checkpoint(directory, note, sched, res, f"{checkpoint_name}: ")
    return res


def _check_checkpoint(directory, note, sched: Schedule, res: VerifyResult, prefix: str) -> None:
    link = note.checkpoint.link
    for f in check_extends(note, link_tree(directory, link), sched.bundles):
        res.problems.append(Problem(f.kind, None, prefix + f.detail, link))


def _verify_link(directory: Path, ledger: dict, link: str, sched: Schedule, res: VerifyResult) -> None:
    def problem(kind: str, seg: int | None, detail: str, record: int | None = None) -> None:
        res.problems.append(Problem(kind, seg, detail, link, record))

    files = segment_files(directory, link)
    ldir = segments.link_dir(directory, link)
    for tmp in sorted(ldir.glob("*.tmp")):
        res.warnings.append(Problem("temp_file", None, f"{tmp}: leftover of an interrupted atomic write; "
                                    "ignored (`ledgertool recover` removes it)", link))
    expected_prev = genesis_hash(ledger["ledger_id"], link)
    expected_seq = 0
    sealed = sorted(i for i, f in files.items() if "seal.json" in f)
    seen: dict[str, int] = {}  # seal hash -> segment, to name a duplicated segment
    header_mismatch: list[int] = []  # seals that sign another ledger.json than the one read
    for i, f in sorted(files.items()):
        if "parquet" in f and "seal.json" not in f and "open" not in f:
            problem("unsealed_parquet", i, f"{f['parquet']} has no seal document")
        if "open" in f and "seal.json" not in f:
            kind = "open_segment"
            try:
                seg = read_open_segment(f["open"])
                if seg.torn_bytes:
                    kind = "torn_segment"
                detail = (f"{f['open']}: open segment with {seg.count} whole records and {seg.torn_bytes} "
                          "torn bytes; `ledgertool recover` (or the next capture) seals it")
            except LedgerFormatError as e:
                kind = "torn_segment"
                detail = f"{e}; `ledgertool recover` discards it"
            res.warnings.append(Problem(kind, i, detail, link))
    if sealed and sealed[-1] + 1 != len(sealed):
        missing = sorted(set(range(sealed[-1] + 1)) - set(sealed))
        problem("segment_missing", missing[0], f"segments {missing} of {sealed[-1] + 1} have no seal")
    for index in sealed:
        path = files[index]["seal.json"]
        try:
            doc = load_seal(path)
        except LedgerFormatError as e:
            problem("seal_unreadable", index, str(e))
            expected_prev = None
            continue
        res.segments += 1
        # 1. identity
        if doc.get("ledger_id") != ledger["ledger_id"]:
            problem("foreign_seal", index, f"{path}: seal belongs to ledger {doc.get('ledger_id')}")
        if doc.get("link") != link or doc.get("segment") != index:
            problem("seal_misplaced", index,
                    f"{path}: seal is for link {doc.get('link')!r} segment {doc.get('segment')}")
        # 2. no downgrade: the signed hash of ledger.json (seals since it was added), and the
        # parameters each seal repeats (every seal)
        bound = doc.get("ledger_header_sha256")
        if bound is not None and bound != ledger[HEADER_SHA256]:
            header_mismatch.append(index)
        for key in ("algorithm", "strip", "record_size", "leaf_records"):
            if doc.get(key) != ledger[key]:
                problem("parameter_mismatch", index,
                        f"{path}: {key} {doc.get(key)!r} differs from the ledger's {ledger[key]!r}")
        want_kid = sched.digest_key_id_for(link, index)
        if doc.get("digest_key_id") != want_kid:
            problem("digest_key_mismatch", index, f"{path}: digest_key_id {doc.get('digest_key_id')!r} is not "
                    f"{want_kid}, the digest key of link {link} segment {index}{_digest_key_note(sched, doc.get('digest_key_id'), want_kid)}")
        # 3. signatures, with the key set the rotation schedule assigns to this segment
        bundle = sched.bundle_for(link, index)
        try:
            sig_problems = bundle.verify(seal_signed_bytes(doc), doc.get("signatures") or {})
        except (TypeError, ValueError) as e:
            sig_problems = [f"seal cannot be canonicalised ({e})"]
        for p in sig_problems:
            problem("signature_missing" if p.endswith("signature missing") else "bad_signature", index,
                    f"{path}: {p}")
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
        # 5..7 records
        expected_seq = _verify_records(directory, ledger, link, index, doc, expected_seq, res, problem)
    if header_mismatch:
        n = len(header_mismatch)
        problem("ledger_header_mismatch", header_mismatch[0],
                f"{directory / 'ledger.json'}: SHA-256 {ledger[HEADER_SHA256][:16]}… is not the header that {n} "
                f"seal(s) of link {link} sign (segments {header_mismatch[0]}..{header_mismatch[-1]}): ledger.json "
                "was edited after sealing; the seals' own parameters are the ones checked")


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


def _changed_leaves(directory: Path, link: str, index: int, records: bytes, layout: tuple[int, int],
                    root: str) -> list[int] | None:
    """Indexes of leaves whose hash differs from the sealed tree, using the leaf-hash sidecar when
    its own root equals the seal's (so it is authentic); None when that is not possible."""
    path = segments.leaves_path(directory, link, index)
    try:
        raw = path.read_bytes()
    except OSError:
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


def _record_layout(ledger: dict, doc: dict) -> tuple[int, int] | None:
    """(record_size, leaf_records) the segment's records are decoded and hashed with: the seal's
    (signed) values, not the unsigned header's; None when the seal's are out of bounds."""
    rsize, leaf = doc.get("record_size", ledger["record_size"]), doc.get("leaf_records", ledger["leaf_records"])
    if type(rsize) is not int or rsize not in (48, 64) or not valid_leaf_records(leaf):
        return None
    return rsize, leaf


def _verify_records(directory, ledger, link, index, doc, expected_seq, res, problem) -> int:
    pq_path = directory / f"link={link}" / str(doc.get("parquet_file", ""))
    layout = _record_layout(ledger, doc)
    if layout is None:
        problem("seal_malformed", index, f"segment {index}: record_size {doc.get('record_size')!r} / leaf_records "
                                         f"{doc.get('leaf_records')!r} out of bounds")
        return expected_seq
    record_size, leaf_records = layout
    digest_size = record_size - 32
    try:
        first_seq, last_seq = int(doc["first_seq"]), int(doc["last_seq"])
        count = int(doc["records"])
    except (KeyError, TypeError, ValueError, OverflowError):
        problem("seal_malformed", index, f"segment {index}: seal lacks sequence range or count")
        return expected_seq
    # u64 sequence numbers, and a range no wider than the records could cover (plus the gaps a
    # sealer may skip): a tampered seal must not make the verifier allocate its range.
    if not (0 <= first_seq < 2**64 and first_seq - 1 <= last_seq < 2**64 and 0 <= count <= 2**40) or \
            last_seq - first_seq + 1 > max(count, 1) * 1024:
        problem("seal_malformed", index, f"segment {index}: implausible sequence range {first_seq}..{last_seq} "
                                         f"for {count} records")
        return expected_seq
    if first_seq != expected_seq:
        kind = "sequence_gap" if first_seq > expected_seq else "sequence_overlap"
        problem(kind, index, f"segment {index} starts at seq {first_seq}, expected {expected_seq} "
                             f"({first_seq - expected_seq:+d} records undeclared)", 0)
    if not pq_path.is_file():
        problem("parquet_missing", index, f"{pq_path} is missing")
        return last_seq + 1
    try:
        data, sha = read_sealed_parquet(pq_path)
    except OSError as e:
        problem("parquet_unreadable", index, f"{pq_path}: {e.strerror or e}")
        return last_seq + 1
    if sha != doc.get("parquet_sha256"):
        problem("parquet_hash_mismatch", index, f"{pq_path}: SHA-256 differs from the seal's parquet_sha256")
    elif len(data) != doc.get("parquet_bytes"):  # the signed size must agree too
        problem("parquet_hash_mismatch", index, f"{pq_path}: {len(data)} bytes, seal's "
                                                f"parquet_bytes says {doc.get('parquet_bytes')}")
    try:
        records = parquet_records(data, digest_size)
    except Exception as e:  # noqa: BLE001 - any unreadable Parquet is a finding, not a crash
        problem("parquet_unreadable", index, f"{pq_path}: {type(e).__name__}: {e}")
        return last_seq + 1
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
    # in C (SHA-NI leaves and tree); ledgertool.merkle is the pure-Python reference the tests compare with
    root = merkle_root(merkle_leaves(records, record_size, leaf_records)).hex()
    if root != doc.get("merkle_root"):
        leaf = leaf_records
        changed = _changed_leaves(directory, link, index, records, layout, str(doc.get("merkle_root")))
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
    return last_seq + 1
