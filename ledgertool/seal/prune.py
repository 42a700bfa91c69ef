"""Prune statements: the device's signed word that it removed the per-frame records of some sealed
segments (`ledgertool prune`, docs/ledger-format.md "Prune statements", docs/adr/0015).

A statement lives at ``DIR/pruned/prune-NNNN.json`` (NNNN = 1, 2, ...). Statements are numbered
and hash-chained like rotation statements (the first to a genesis label bound to the ledger id),
and each names, per link, the segments whose records it removed: from `from_segment`, one seal
hash per segment, contiguous after what the statements before it removed for that link. The seals
stay in the ledger, so a statement binds to exactly the seals it names: `verify` accepts a missing
record file only for a segment whose seal hash a valid statement names. Its signed bytes are
``b"ledgertool prune v1\\n"`` followed by RFC 8785 of every member but ``signatures``, signed with
the ledger's hybrid signing key (Ed25519 + ML-DSA-65) like seals and checkpoints.

`check_prunes` is pure: it follows the statements in order and stops at the first that does not
verify, so a statement after a broken one removes nothing."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..canonical import canonical_json, loads_strict
from ..errors import LedgerFormatError
from ..keyfiles import TrustBundle
from .rotation import Schedule

PRUNE_FORMAT = "ledgertool-prune-v1"
_PREFIX = b"ledgertool prune v1\n"
_HASH = re.compile(r"[0-9a-f]{64}")
_LINK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")
MAX_PRUNE_BYTES = 16 << 20  # one seal hash a segment: ~70 bytes each


def prune_genesis(ledger_id: str) -> str:
    """prev_prune_hash of statement 1."""
    return hashlib.sha256(b"ledgertool prune genesis v1\0" + bytes.fromhex(ledger_id)).hexdigest()


def prune_body(doc: Mapping) -> dict:
    return {k: v for k, v in doc.items() if k != "signatures"}


def prune_message(doc: Mapping) -> bytes:
    """The signed bytes of a statement (or of one being built)."""
    return _PREFIX + canonical_json(prune_body(doc))


def prune_hash(doc: Mapping) -> str:
    """SHA-256 (hex) of the signed body: the next statement's prev_prune_hash."""
    return hashlib.sha256(canonical_json(prune_body(doc))).hexdigest()


@dataclass(frozen=True)
class PrunedLink:
    """What one statement says it removed of one link: the records of segments `from_segment` ..
    `from_segment + len(seal_hashes) - 1`, the seal of each being `seal_hashes[i]`, holding
    `records` records (`frames` frames) between `first_ts_ns` and `last_ts_ns`; `window_frames`:
    the frames the link's sealed window records held when it was written (the tier that still
    covers them; fewer than the link's frames through the last pruned segment only with --force)."""

    link: str
    from_segment: int
    seal_hashes: tuple[str, ...]
    records: int
    frames: int
    first_ts_ns: int
    last_ts_ns: int
    window_frames: int | None

    @property
    def to_segment(self) -> int:
        return self.from_segment + len(self.seal_hashes) - 1

    def to_json(self) -> dict:
        return {
            "from_segment": self.from_segment,
            "seal_hashes": list(self.seal_hashes),
            "records": self.records,
            "frames": self.frames,
            "first_ts_ns": str(self.first_ts_ns),
            "last_ts_ns": str(self.last_ts_ns),
            "window_frames": self.window_frames,
        }


@dataclass(frozen=True)
class PruneStatement:
    """A prune statement as parse_prune read it (every member checked for its type);
    `signatures` its signatures by algorithm; `doc` the document as parsed, whose members are what
    was signed (read only for the signed bytes and the hash)."""

    number: int
    ledger_id: str
    prev_prune_hash: str
    before_ns: int
    links: tuple[PrunedLink, ...]
    signatures: Mapping = field(repr=False)
    doc: Mapping = field(repr=False)
    path: str = ""

    def message(self) -> bytes:
        return prune_message(self.doc)

    def hash(self) -> str:
        return prune_hash(self.doc)


def _int(v, what: str, where: str) -> int:
    if type(v) is not int or v < 0:
        raise LedgerFormatError(f"{where}: {what} must be a non-negative integer")
    return v


def _u64(v, what: str, where: str) -> int:
    if not isinstance(v, str) or not v.isdigit() or len(v) > 20 or int(v) >= 2**64:
        raise LedgerFormatError(f"{where}: {what} must be a u64 as a decimal string")
    return int(v)


def _pruned_link(name: str, v, where: str) -> PrunedLink:
    here = f"{where} links.{name}"
    if not _LINK.fullmatch(name) or not isinstance(v, dict):
        raise LedgerFormatError(f"{here}: not a link name with an object")
    hashes = v.get("seal_hashes")
    if (
        not isinstance(hashes, list)
        or not hashes
        or not all(isinstance(h, str) and _HASH.fullmatch(h) for h in hashes)
    ):
        raise LedgerFormatError(f"{here}: seal_hashes must be a non-empty list of SHA-256 hex")
    wf = v.get("window_frames")
    return PrunedLink(
        name,
        _int(v.get("from_segment"), "from_segment", here),
        tuple(hashes),
        _int(v.get("records"), "records", here),
        _int(v.get("frames"), "frames", here),
        _u64(v.get("first_ts_ns"), "first_ts_ns", here),
        _u64(v.get("last_ts_ns"), "last_ts_ns", here),
        None if wf is None else _int(wf, "window_frames", here),
    )


def parse_prune(raw: bytes, where: str) -> PruneStatement:
    """Parse and type-check a prune statement (strict JSON; pure). LedgerFormatError naming
    `where` and the member when it is not one; `check_prunes` checks the chain and signatures."""
    doc = loads_strict(raw, where)
    if not isinstance(doc, dict) or doc.get("format") != PRUNE_FORMAT:
        raise LedgerFormatError(f"{where}: not a {PRUNE_FORMAT} document")
    lid, prev, links = doc.get("ledger_id"), doc.get("prev_prune_hash"), doc.get("links")
    if not isinstance(lid, str) or not re.fullmatch(r"[0-9a-f]{32}", lid):
        raise LedgerFormatError(f"{where}: ledger_id must be 32 hex digits")
    if not isinstance(prev, str) or not _HASH.fullmatch(prev):
        raise LedgerFormatError(f"{where}: prev_prune_hash must be SHA-256 hex")
    if not isinstance(links, dict) or not links:
        raise LedgerFormatError(f"{where}: links must name at least one link")
    sigs = doc.get("signatures")
    if not isinstance(sigs, dict):
        raise LedgerFormatError(f"{where}: signatures missing")
    return PruneStatement(
        _int(doc.get("number"), "number", where),
        lid,
        prev,
        _u64(doc.get("before_ns"), "before_ns", where),
        tuple(_pruned_link(n, v, where) for n, v in sorted(links.items())),
        sigs,
        doc,
        where,
    )


@dataclass
class PruneSchedule:
    """The statements that verified, in order, and what they removed per link: segment index ->
    (seal hash, statement). `problems` (text) for the first statement that did not verify (and
    every one after it is not applied); `signatures_checked` False when no key schedule was
    given."""

    statements: list[PruneStatement] = field(default_factory=list)
    segments: dict[str, dict[int, tuple[str, PruneStatement]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    signatures_checked: bool = True

    def of(self, link: str) -> dict[int, tuple[str, PruneStatement]]:
        return self.segments.get(link, {})

    def next_segment(self, link: str) -> int:
        """The first segment of `link` the statements have not removed (they remove a prefix)."""
        have = self.of(link)
        return max(have) + 1 if have else 0


def _signers(sched: Schedule, st: PruneStatement) -> list[TrustBundle]:
    """The key sets that may sign `st`: for every link it names, one that may sign a checkpoint
    of the segments through its last pruned one (a retired key only before its retirement)."""
    allowed: list[TrustBundle] | None = None
    for pl in st.links:
        ok, _ = sched.checkpoint_signers(pl.link, pl.to_segment + 1)
        allowed = ok if allowed is None else [b for b in allowed if b in ok]
    return allowed or []


def check_prunes(
    ledger_id: str, statements: list[PruneStatement], sched: Schedule | None
) -> PruneSchedule:
    """Follow the statements in order (pure): each must belong to the ledger, be numbered next,
    chain to the previous one (the genesis label for the first), continue every link it names
    where the statements before it stopped, and (with `sched`) carry hybrid signatures of a key
    set that may sign for those segments. Stops at the first that fails, naming it."""
    out = PruneSchedule(signatures_checked=sched is not None)
    prev = prune_genesis(ledger_id)
    for i, st in enumerate(statements, start=1):
        why = _statement_problem(st, i, ledger_id, prev, out, sched)
        if why is not None:
            out.problems.append(f"{st.path or f'prune statement {i}'}: {why}")
            break
        for pl in st.links:
            segs = out.segments.setdefault(pl.link, {})
            for k, h in enumerate(pl.seal_hashes):
                segs[pl.from_segment + k] = (h, st)
        out.statements.append(st)
        prev = st.hash()
    return out


def _statement_problem(
    st: PruneStatement,
    i: int,
    ledger_id: str,
    prev: str,
    done: PruneSchedule,
    sched: Schedule | None,
) -> str | None:
    if st.ledger_id != ledger_id:
        return f"belongs to ledger {st.ledger_id}"
    if st.number != i:
        return f"is numbered {st.number}, expected {i}"
    if st.prev_prune_hash != prev:
        return (
            "prev_prune_hash does not match the previous statement (a statement was removed, "
            "replaced or reordered)"
        )
    for pl in st.links:
        start = done.next_segment(pl.link)
        if pl.from_segment != start:
            return (
                f"link {pl.link}: starts at segment {pl.from_segment}, where the statements "
                f"before it end at {start}"
            )
    if sched is None:
        return None
    signers = _signers(sched, st)
    msg = st.message()
    if not any(not b.verify(msg, st.signatures) for b in signers):
        return "its signatures do not verify with a key set that may sign for those segments"
    return None
