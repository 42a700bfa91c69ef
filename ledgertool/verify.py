"""verify: check a ledger against a verifier's trust bundle and name everything that broke.

For each link, in segment order (docs/ledger-format.md, "Verification"):
  1. the seal parses and belongs to this ledger (ledger id, link, segment index);
  2. algorithm, strip mode, digest key id and record layout equal the ledger header (no downgrade);
  3. both hybrid signatures verify with the trusted keys;
  4. prev_seal_hash equals the hash of the previous seal (genesis for the first): the chain;
  5. the Parquet file exists and its SHA-256 and size match the seal;
  6. its records: count, first/last sequence, first/last timestamp, declared drops match the seal,
     sequence numbers are contiguous within and across segments;
  7. the RFC 9162 Merkle root over the record blocks equals the seal's.
Problems are collected, never stop the walk; open (unsealed) segments are reported as warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from . import merkle
from .engine import FLAG_GAP, record_dtype
from .errors import LedgerFormatError
from .keys import TrustBundle
from .ledger import links, load_ledger, segment_files
from .seal import file_sha256, genesis_hash, load_seal, seal_hash, seal_signed_bytes, table_to_records
from .segments import read_open_segment


@dataclass(frozen=True)
class Problem:
    kind: str
    segment: int | None
    detail: str
    link: str | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "segment": self.segment, "link": self.link, "detail": self.detail}


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

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"ok": self.ok, "ledger": self.ledger, "segments": self.segments, "records": self.records,
                "frames": self.frames, "drops_declared": self.drops_declared, "links": self.links,
                "problems": [p.to_json() for p in self.problems],
                "warnings": [w.to_json() for w in self.warnings]}


def verify_ledger(directory: Path, trust: TrustBundle) -> VerifyResult:
    """Verify every sealed segment of every link. Raises LedgerFormatError only when DIR is not a
    ledger at all; every other finding is a Problem in the result."""
    directory = Path(directory)
    ledger = load_ledger(directory)
    res = VerifyResult(str(directory), links=links(directory))
    for link in res.links:
        _verify_link(directory, ledger, link, trust, res)
    return res


def _verify_link(directory: Path, ledger: dict, link: str, trust: TrustBundle, res: VerifyResult) -> None:
    def problem(kind: str, seg: int | None, detail: str) -> None:
        res.problems.append(Problem(kind, seg, detail, link))

    files = segment_files(directory, link)
    expected_prev = genesis_hash(ledger["ledger_id"], link)
    expected_seq = 0
    sealed = sorted(i for i, f in files.items() if "seal.json" in f)
    for i, f in sorted(files.items()):
        if "parquet" in f and "seal.json" not in f:
            problem("unsealed_parquet", i, f"{f['parquet']} has no seal document")
        if "open" in f and "seal.json" not in f:
            try:
                seg = read_open_segment(f["open"])
                detail = (f"{f['open']}: open segment with {seg.count} whole records and {seg.torn_bytes} "
                          "torn bytes; `ledgertool capture` into this ledger seals it")
            except LedgerFormatError as e:
                detail = str(e)
            res.warnings.append(Problem("open_segment", i, detail, link))
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
        # 2. no downgrade
        for key in ("algorithm", "strip", "digest_key_id", "record_size", "leaf_records"):
            if doc.get(key) != ledger[key]:
                problem("parameter_mismatch", index,
                        f"{path}: {key} {doc.get(key)!r} differs from the ledger's {ledger[key]!r}")
        # 3. signatures
        try:
            sig_problems = trust.verify(seal_signed_bytes(doc), doc.get("signatures") or {})
        except (TypeError, ValueError) as e:
            sig_problems = [f"seal cannot be canonicalised ({e})"]
        for p in sig_problems:
            problem("bad_signature", index, f"{path}: {p}")
        # 4. chain
        if expected_prev is not None and doc.get("prev_seal_hash") != expected_prev:
            problem("chain_broken", index,
                    f"{path}: prev_seal_hash {str(doc.get('prev_seal_hash'))[:16]}… does not match the "
                    f"previous seal's hash {expected_prev[:16]}…")
        try:
            expected_prev = seal_hash(doc)
        except (TypeError, ValueError):
            expected_prev = None
        # 5..7 records
        expected_seq = _verify_records(directory, ledger, link, index, doc, expected_seq, res, problem)


def _verify_records(directory, ledger, link, index, doc, expected_seq, res, problem) -> int:
    pq_path = directory / f"link={link}" / str(doc.get("parquet_file", ""))
    try:
        first_seq, last_seq = int(doc["first_seq"]), int(doc["last_seq"])
        count = int(doc["records"])
    except (KeyError, TypeError, ValueError):
        problem("seal_malformed", index, f"segment {index}: seal lacks sequence range or count")
        return expected_seq
    if first_seq != expected_seq:
        kind = "sequence_gap" if first_seq > expected_seq else "sequence_overlap"
        problem(kind, index, f"segment {index} starts at seq {first_seq}, expected {expected_seq} "
                             f"({first_seq - expected_seq:+d} records undeclared)")
    if not pq_path.is_file():
        problem("parquet_missing", index, f"{pq_path} is missing")
        return last_seq + 1
    if file_sha256(pq_path) != doc.get("parquet_sha256"):
        problem("parquet_hash_mismatch", index, f"{pq_path}: SHA-256 differs from the seal's parquet_sha256")
    try:
        table = pq.read_table(pq_path)
        records = table_to_records(table, ledger["digest_size"])
    except Exception as e:  # noqa: BLE001 - any unreadable Parquet is a finding, not a crash
        problem("parquet_unreadable", index, f"{pq_path}: {type(e).__name__}: {e}")
        return last_seq + 1
    arr = np.frombuffer(records, dtype=record_dtype(ledger["digest_size"]))
    n = len(arr)
    res.records += n
    gaps = (arr["flags"] & FLAG_GAP) != 0
    res.frames += int(n - gaps.sum())
    drops = int(arr["aux"][gaps].sum())
    res.drops_declared += drops
    if n != count:
        problem("count_mismatch", index, f"segment {index}: {n} records in Parquet, seal says {count}")
    if n:
        seqs = arr["seq"].astype(np.int64)
        want = np.arange(first_seq, first_seq + n, dtype=np.int64)
        bad = np.nonzero(seqs != want)[0]
        if len(bad):
            k = int(bad[0])
            problem("sequence_break", index,
                    f"segment {index} record {k}: seq {int(seqs[k])}, expected {int(want[k])} "
                    "(deleted, duplicated or reordered record)")
        if int(arr["seq"][-1]) != last_seq:
            problem("range_mismatch", index, f"segment {index}: last seq {int(arr['seq'][-1])}, seal says {last_seq}")
        if str(int(arr["ts_ns"][0])) != doc.get("first_ts_ns") or str(int(arr["ts_ns"][-1])) != doc.get("last_ts_ns"):
            problem("timestamp_mismatch", index, f"segment {index}: first/last timestamps differ from the seal")
    if drops != doc.get("drops_declared"):
        problem("drops_mismatch", index, f"segment {index}: GAP records declare {drops} drops, seal says "
                                         f"{doc.get('drops_declared')}")
    root = merkle.records_root(records, ledger["record_size"], ledger["leaf_records"]).hex()
    if root != doc.get("merkle_root"):
        problem("merkle_mismatch", index, f"segment {index}: Merkle root over its {n} records differs "
                                          "from the seal (a record was changed)")
    return last_seq + 1
