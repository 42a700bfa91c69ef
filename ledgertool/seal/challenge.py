"""Audit challenges: a reproducible random sample of a checkpointed log, drawn from randomness of
both sides after the log was committed (docs/transparency.md, "Audits"; docs/adr/0017).

Byte for byte (docs/transparency.md, "The challenge derivation"):

* prover commitment ``C = SHA-256("ledgertool challenge commitment v1" || 0x00 || SHA-256(T) ||
  prover_nonce)``, T the checkpoint's note text (the signed bytes);
* seed ``S = SHA-256("ledgertool challenge v1" || 0x00 || u32be(len T) || T || u8(len tier) ||
  tier || u64be(range_records) || u64be(k) || u8(len mode) || mode || u16be(len a) || a ||
  u16be(len b) || b)``, mode ``joint`` with
  a = verifier nonce, b = prover nonce, or ``beacon`` with a = the beacon value, b empty;
* a stream of blocks ``SHA-256("ledgertool challenge stream v1" || 0x00 || S || u64be(j))``,
  j = 0, 1, ..., read as consecutive big-endian u64 values ``x``;
* a draw from ``[0, n)``: discard ``x >= 2^64 - (2^64 mod n)``, else ``x mod n``;
* k positions without replacement: draw, skip a position already chosen, until k are chosen.

Pure: bytes in, values out.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..canonical import canonical_json, loads_format_object
from ..errors import LedgerFormatError, UsageError
from ..plural import plural

FORMAT = "ledgertool-challenge-v1"
TIERS = ("windows", "frames")
JOINT, BEACON = "joint", "beacon"
NONCE_BYTES = 32
MIN_RANDOM_BYTES = 16
MAX_RANDOM_BYTES = 1024
_COMMIT = b"ledgertool challenge commitment v1\x00"
_SEED = b"ledgertool challenge v1\x00"
_STREAM = b"ledgertool challenge stream v1\x00"
_HEX = re.compile(r"(?:[0-9a-f]{2})*")


def commitment(note_text: bytes, prover_nonce: bytes) -> bytes:
    """The prover's commitment to its nonce for the checkpoint whose note text is `note_text`,
    published with the checkpoint before the verifier's nonce is known."""
    return hashlib.sha256(_COMMIT + hashlib.sha256(note_text).digest() + prover_nonce).digest()


@dataclass(frozen=True)
class Randomness:
    """Joint (verifier nonce, prover nonce opening `prover_commitment`) or a public beacon."""

    mode: str
    verifier_nonce: bytes = b""
    prover_nonce: bytes = b""
    prover_commitment: bytes = b""
    beacon: bytes = b""

    def check(self, note_text: bytes) -> None:
        """UsageError when the values cannot be used (sizes, a commitment the prover nonce does
        not open for this checkpoint)."""
        if self.mode == JOINT:
            for name, v in (
                ("verifier_nonce", self.verifier_nonce),
                ("prover_nonce", self.prover_nonce),
            ):
                if not MIN_RANDOM_BYTES <= len(v) <= MAX_RANDOM_BYTES:
                    raise UsageError(
                        f"{name}: {len(v)} bytes; give {MIN_RANDOM_BYTES} to {MAX_RANDOM_BYTES}"
                    )
            if commitment(note_text, self.prover_nonce) != self.prover_commitment:
                raise UsageError(
                    "the prover nonce does not open the prover commitment "
                    f"({self.prover_commitment.hex()[:16]}…) for this checkpoint: not the nonce "
                    "(or not the checkpoint) committed to"
                )
        elif self.mode == BEACON:
            if not MIN_RANDOM_BYTES <= len(self.beacon) <= MAX_RANDOM_BYTES:
                raise UsageError(
                    f"beacon: {len(self.beacon)} bytes; give {MIN_RANDOM_BYTES} to "
                    f"{MAX_RANDOM_BYTES}"
                )
        else:
            raise UsageError(f"randomness mode {self.mode!r}: give joint or beacon")

    def parts(self) -> tuple[bytes, bytes]:
        return (
            (self.verifier_nonce, self.prover_nonce) if self.mode == JOINT else (self.beacon, b"")
        )

    def to_json(self) -> dict:
        if self.mode == JOINT:
            return {
                "mode": JOINT,
                "verifier_nonce": self.verifier_nonce.hex(),
                "prover_nonce": self.prover_nonce.hex(),
                "prover_commitment": self.prover_commitment.hex(),
            }
        return {"mode": BEACON, "beacon": self.beacon.hex()}


def seed(note_text: bytes, tier: str, range_records: int, k: int, rnd: Randomness) -> bytes:
    """The challenge seed (module docstring)."""
    a, b = rnd.parts()
    return hashlib.sha256(
        _SEED
        + len(note_text).to_bytes(4, "big")
        + note_text
        + bytes([len(tier)])
        + tier.encode()
        + range_records.to_bytes(8, "big")
        + k.to_bytes(8, "big")
        + bytes([len(rnd.mode)])
        + rnd.mode.encode()
        + len(a).to_bytes(2, "big")
        + a
        + len(b).to_bytes(2, "big")
        + b
    ).digest()


def _words(s: bytes) -> Iterator[int]:
    j = 0
    while True:
        block = hashlib.sha256(_STREAM + s + j.to_bytes(8, "big")).digest()
        for i in range(0, 32, 8):
            yield int.from_bytes(block[i : i + 8], "big")
        j += 1


def sample(s: bytes, n: int, k: int) -> list[int]:
    """k distinct positions of [0, n), in draw order (module docstring)."""
    if not 1 <= k <= n:
        raise UsageError(f"k = {k}: give 1 to the {plural(n, 'item')} of the population")
    limit = (1 << 64) - (1 << 64) % n
    chosen: list[int] = []
    seen: set[int] = set()
    for x in _words(s):
        if x >= limit:
            continue
        u = x % n
        if u not in seen:
            seen.add(u)
            chosen.append(u)
            if len(chosen) == k:
                return chosen
    raise AssertionError("unreachable")


def population(records: int, tier: str, range_records: int) -> int:
    """Windows (one per window record), or ranges of `range_records` records (the last shorter)."""
    return records if tier == "windows" else -(-records // range_records)


# ---- what a sample of k rules out ------------------------------------------------------------


def escape_probability(n: int, k: int, bad: int) -> float:
    """P(no altered item among k drawn without replacement from n of which `bad` are altered)."""
    if bad <= 0:
        return 1.0
    if k > n - bad:
        return 0.0
    return math.exp(
        math.lgamma(n - bad + 1)
        - math.lgamma(n - bad - k + 1)
        - math.lgamma(n + 1)
        + math.lgamma(n - k + 1)
    )


def smallest_detected(n: int, k: int, alpha: float) -> int:
    """The fewest altered items a sample of k (without replacement) misses with probability at
    most `alpha`."""
    lo, hi = 1, n - k + 1  # at hi the escape probability is 0
    while lo < hi:
        mid = (lo + hi) // 2
        if escape_probability(n, k, mid) <= alpha:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class DetectionBound:
    """For confidence 1 - alpha: the smallest fraction of altered items the sample catches with at
    least that probability, sampling without replacement (hypergeometric, what the challenge does)
    and the with-replacement figure 1 - alpha^(1/k) it is at most."""

    population: int
    k: int
    confidence: float
    fraction: float  # without replacement: smallest_detected / population
    items: int
    fraction_with_replacement: float

    def to_json(self) -> dict:
        return {
            "confidence": self.confidence,
            "fraction": self.fraction,
            "items": self.items,
            "fraction_with_replacement": self.fraction_with_replacement,
        }


def detection_bounds(n: int, k: int, confidences=(0.95, 0.99)) -> list[DetectionBound]:
    out = []
    for c in confidences:
        b = smallest_detected(n, k, 1 - c)
        out.append(DetectionBound(n, k, c, b / n, b, 1 - (1 - c) ** (1 / k)))
    return out


# ---- the document ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ChallengeItem:
    """One sampled item: `position` in the population; for a window its segment, record in the
    segment, window index and start; for a range its first record (across the log) and length."""

    position: int
    segment: int
    record: int
    index: int | None = None  # window index
    start_ns: int | None = None
    first_record: int | None = None
    records: int | None = None

    def to_json(self) -> dict:
        doc = {"position": self.position, "segment": self.segment, "record": self.record}
        if self.index is not None:
            doc["index"] = str(self.index)
            doc["start_ns"] = str(self.start_ns)
        else:
            doc["first_record"] = str(self.first_record)
            doc["records"] = self.records
        return doc


@dataclass(frozen=True)
class Challenge:
    """A drawn challenge (schemas: docs/transparency.md, "The challenge document")."""

    note: bytes  # the whole signed checkpoint note
    note_text: bytes  # its signed text
    origin: str
    tier: str
    population: int
    range_records: int  # 1 for windows
    k: int
    randomness: Randomness
    seed: bytes
    items: tuple[ChallengeItem, ...]

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "checkpoint": self.note.decode(),
            "origin": self.origin,
            "tier": self.tier,
            "population": self.population,
            "range_records": self.range_records,
            "k": self.k,
            "randomness": self.randomness.to_json(),
            "seed": self.seed.hex(),
            "items": [i.to_json() for i in self.items],
        }

    def canonical(self) -> bytes:
        return canonical_json(self.to_json())

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()


_MEMBERS = {
    "format",
    "checkpoint",
    "origin",
    "tier",
    "population",
    "range_records",
    "k",
    "randomness",
    "seed",
    "items",
}


def _hex(v, where: str, what: str) -> bytes:
    if not isinstance(v, str) or not _HEX.fullmatch(v):
        raise LedgerFormatError(f"{where}: {what} is not lowercase hex")
    return bytes.fromhex(v)


def _int(v, where: str, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise LedgerFormatError(f"{where}: {what} is not a non-negative integer")
    return v


def _dec(v, where: str, what: str) -> int:
    if not isinstance(v, str) or not re.fullmatch(r"-?(0|[1-9][0-9]{0,19})", v):
        raise LedgerFormatError(f"{where}: {what} is not a decimal string")
    return int(v)


def parse_randomness(doc, where: str) -> Randomness:
    if not isinstance(doc, dict):
        raise LedgerFormatError(f"{where}: randomness is not an object")
    mode = doc.get("mode")
    keys = {
        JOINT: {"mode", "verifier_nonce", "prover_nonce", "prover_commitment"},
        BEACON: {"mode", "beacon"},
    }.get(mode)
    if keys is None or set(doc) != keys:
        raise LedgerFormatError(f"{where}: randomness is neither joint nor beacon as specified")
    vals = {k: _hex(doc[k], where, k) for k in keys - {"mode"}}
    return Randomness(mode, **vals)


def parse_items(items, tier: str, where: str) -> tuple[ChallengeItem, ...]:
    if not isinstance(items, list):
        raise LedgerFormatError(f"{where}: items is not a list")
    out = []
    for n, it in enumerate(items):
        w = f"{where}: items[{n}]"
        want = (
            {"position", "segment", "record", "index", "start_ns"}
            if tier == "windows"
            else {"position", "segment", "record", "first_record", "records"}
        )
        if not isinstance(it, dict) or set(it) != want:
            raise LedgerFormatError(f"{w}: members are not {', '.join(sorted(want))}")
        base = [_int(it[m], w, m) for m in ("position", "segment", "record")]
        if tier == "windows":
            out.append(
                ChallengeItem(
                    *base, _dec(it["index"], w, "index"), _dec(it["start_ns"], w, "start")
                )
            )
        else:
            out.append(
                ChallengeItem(
                    *base,
                    first_record=_dec(it["first_record"], w, "first_record"),
                    records=_int(it["records"], w, "records"),
                )
            )
    return tuple(out)


def parse_challenge(data: bytes, where: str, parse_note) -> Challenge:
    """A challenge document, strictly: unknown or missing members, a seed or population that does
    not follow from the inputs, or items that are not the sample the seed draws are refused
    (LedgerFormatError). `parse_note` parses the embedded checkpoint (seal.checkpoint.parse_note).
    Whether the items name the right windows or ranges is the ledger's to say (the caller's)."""
    doc = loads_format_object(data, where, FORMAT, "a challenge document")
    if set(doc) != _MEMBERS:
        raise LedgerFormatError(
            f"{where}: members {', '.join(sorted(set(doc) ^ _MEMBERS))} differ from the format's"
        )
    if not isinstance(doc["checkpoint"], str):
        raise LedgerFormatError(f"{where}: checkpoint is not a string")
    note = parse_note(doc["checkpoint"].encode(), f"{where}: checkpoint")
    cp = note.checkpoint
    tier = doc["tier"]
    if tier not in TIERS:
        raise LedgerFormatError(f"{where}: tier {tier!r} is not windows or frames")
    rr = _int(doc["range_records"], where, "range_records")
    k = _int(doc["k"], where, "k")
    rnd = parse_randomness(doc["randomness"], where)
    try:
        rnd.check(note.text)
    except UsageError as e:
        raise LedgerFormatError(f"{where}: {e}") from None
    if doc["origin"] != cp.origin or cp.records is None:
        raise LedgerFormatError(f"{where}: origin is not the checkpoint's, or it has no records")
    if (
        (tier == "windows") != ("/windows=" in cp.origin)
        or rr < 1
        or (tier == "windows" and rr != 1)
    ):
        raise LedgerFormatError(f"{where}: tier, range_records and the checkpoint's log disagree")
    n = population(cp.records, tier, rr)
    s = seed(note.text, tier, rr, k, rnd)
    if doc["population"] != n or _hex(doc["seed"], where, "seed") != s:
        raise LedgerFormatError(f"{where}: population or seed does not follow from the inputs")
    items = parse_items(doc["items"], tier, where)
    try:
        positions = sorted(sample(s, n, k))
    except UsageError as e:
        raise LedgerFormatError(f"{where}: {e}") from None
    if [i.position for i in items] != positions:
        raise LedgerFormatError(f"{where}: items are not the sample the seed draws")
    return Challenge(
        doc["checkpoint"].encode(), note.text, cp.origin, tier, n, rr, k, rnd, s, items
    )
