"""The report of a reconciliation of frames: the capture side's run (where it stopped, its strip
fallbacks), the counts, examples and per-link and per-second lines of the pairing, and the
warnings every such report carries, on one machine and on a cluster alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..algorithms import Algorithm
from ..digest.strip import StripFallbacks
from ..keyfiles import DigestKey
from ..plural import plural
from ..source.file import STDIN
from .multiset import Tally
from .segments import Segment

__all__ = [
    "CaptureVerdict",
    "DigestRun",
    "ReadStop",
    "ReconcileResult",
    "add_warnings",
    "make_result",
    "matched_counts_tally",
]


@dataclass(frozen=True)
class ReadStop:
    """Where reading a capture ended before its end: a corrupt structure, compressed data corrupt
    or cut short, or a file that shrank. `offset`: the byte offset named (of the capture, or of the
    compressed file), None when unknown; `message` the reader's one line."""

    file: str
    offset: int | None
    message: str

    def to_json(self) -> dict:
        return {"file": self.file, "offset": self.offset, "message": self.message}


def _text(v: int | None) -> str | None:
    """A 64-bit quantity (seq, ns timestamp) as JSON carries it: its decimal string."""
    return None if v is None else str(int(v))


def _wide(example: dict) -> dict:
    """An example frame with its seq and ts_ns as decimal strings."""
    return {k: _text(v) if k in ("seq", "ts_ns") else v for k, v in example.items()}


@dataclass
class DigestRun:
    frames: int = 0
    bytes: int = 0
    elapsed_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    stopped: ReadStop | None = (
        None  # the capture could not be read to its end: frames are those before
    )
    strip: str = ""
    strip_fallbacks: StripFallbacks = StripFallbacks()

    def to_json(self) -> dict:
        """The fields `recompute` reports for the capture side
        (schemas/recompute-report.schema.json)."""
        return {
            "complete": self.stopped is None,
            "stopped": self.stopped.to_json() if self.stopped else None,
            "strip_fallbacks": self.strip_fallbacks.to_json(),
        }


class CaptureVerdict:
    """What a recompute report decides from `matches`, `verified` and its capture side."""

    matches: bool
    verified: bool
    capture: DigestRun

    @property
    def complete(self) -> bool:
        """The capture was read to its end (not stopped by a corrupt structure)."""
        return self.capture.stopped is None

    @property
    def ok(self) -> bool:
        """The frames match a ledger whose signatures were checked, over the whole capture."""
        return self.matches and self.verified and self.complete


@dataclass
class ReconcileResult(CaptureVerdict):
    """Outcome of reconciling a capture with a ledger (schemas/recompute-report.schema.json).

    Counts are frames. `per_link` and `per_second` split matched / ledger_only / capture_only
    (capture-only frames have no link: they are reported under link None).
    """

    source: str
    ledger: str
    frames: int
    ledger_records: int
    matched: int
    ledger_only: int
    capture_only: int
    elapsed_s: float
    window: dict = field(default_factory=dict)
    per_link: list[dict] = field(default_factory=list)
    per_second: list[dict] = field(default_factory=list)
    examples_ledger_only: list[dict] = field(default_factory=list)
    examples_capture_only: list[dict] = field(default_factory=list)
    details_file: str | None = None
    details_written: int = 0
    warnings: list[str] = field(default_factory=list)
    digest_keys: list[dict] = field(default_factory=list)
    uncovered: list[dict] = field(default_factory=list)
    verified: bool = True  # the ledger's signatures were checked (a trust bundle was given)
    # the capture side: where it stopped, fallbacks
    capture: DigestRun = field(default_factory=DigestRun)

    @property
    def matches(self) -> bool:
        """Every frame paired: no ledger-only and no capture-only frame."""
        return self.ledger_only == 0 and self.capture_only == 0

    @property
    def partial(self) -> bool:
        """Some sealed segments (in the links asked for) were left out: no key given for them."""
        return bool(self.uncovered)

    def to_json(self) -> dict:
        """The report; seq and ns timestamps as decimal strings (docs/cli.md#json-integers)."""
        window = {k: _text(v) if k in ("from_ns", "to_ns") else v for k, v in self.window.items()}
        return {
            "ok": self.ok,
            "source": self.source,
            "ledger": self.ledger,
            "frames": self.frames,
            "ledger_records": self.ledger_records,
            "matched": self.matched,
            "ledger_only": self.ledger_only,
            "capture_only": self.capture_only,
            "elapsed_s": round(self.elapsed_s, 6),
            "window": window,
            "per_link": self.per_link,
            "per_second": self.per_second,
            "examples_ledger_only": [_wide(e) for e in self.examples_ledger_only],
            "examples_capture_only": [_wide(e) for e in self.examples_capture_only],
            "details_file": self.details_file,
            "details_written": self.details_written,
            "digest_keys": self.digest_keys,
            "partial": self.partial,
            "uncovered": self.uncovered,
            "verified": self.verified,
            "matches": self.matches,
            **self.capture.to_json(),
            "warnings": self.warnings,
        }


def make_result(
    source: str,
    ledger_dir: Path,
    tally: Tally,
    window: tuple,
    details: Path | None,
    written: int,
    warnings: list[str],
    keys: list[tuple[str, DigestKey]],
    segs: list[Segment],
    uncovered: list[dict],
    verified: bool,
    elapsed_s: float,
    capture: DigestRun | None = None,
) -> ReconcileResult:
    """The report of a reconciliation from its tally (`window`: from_ns, to_ns, tolerance_ns, links;
    `capture`: the capture side's run, where it stopped and its strip fallbacks)."""
    from_ns, to_ns, tolerance_ns, links = window
    return ReconcileResult(
        source,
        str(ledger_dir),
        int(tally.frames_in_window),
        int(tally.matched + tally.ledger_only),
        int(tally.matched),
        int(tally.ledger_only),
        int(tally.capture_only),
        elapsed_s,
        window={
            "from_ns": from_ns,
            "to_ns": to_ns,
            "tolerance_ns": tolerance_ns,
            "links": links or None,
        },
        per_link=tally.per_link,
        per_second=tally.per_second,
        examples_ledger_only=[
            {"digest": d, "link": ln, "seq": int(s), "ts_ns": int(t), "wire_len": int(w)}
            for d, ln, s, t, w in tally.examples_ledger_only
        ],
        examples_capture_only=[
            {"digest": d, "index": int(i), "ts_ns": int(t), "wire_len": int(w)}
            for d, i, t, w in tally.examples_capture_only
        ],
        details_file=str(details) if details else None,
        details_written=written,
        warnings=list(warnings),
        digest_keys=[
            {"key_id": kid, "segments": sum(1 for g in segs if g.digest_key_id == kid)}
            for kid, _ in keys
        ],
        uncovered=uncovered,
        verified=verified,
        capture=capture if capture is not None else DigestRun(),
    )


def matched_counts_tally(
    frames: int, records: int, per_link: dict[str, int], seconds: dict[int, int]
) -> Tally:
    """The tally of a reconciliation in which every frame matched (the fast verdict, on one machine
    or a cluster): `frames` recomputed, `records` ledger frame records (gap records left out), all
    matched; `per_link` and `seconds` are the ledger side's frame counts per link and per second
    (ts_ns // 10^9), in the report's order (links without frames left out)."""
    return Tally(
        frames,
        records,
        0,
        0,
        [
            {"link": ln, "matched": n, "ledger_only": 0, "capture_only": 0}
            for ln, n in sorted(per_link.items())
            if n
        ],
        [
            {"second": sec, "matched": n, "ledger_only": 0, "capture_only": 0}
            for sec, n in sorted(seconds.items())
        ],
        [],
        [],
    )


def add_warnings(
    res: ReconcileResult,
    ledger_dir: Path,
    alg: Algorithm,
    uncovered: list[dict],
    details_limit: int,
) -> None:
    if not res.verified:
        res.warnings.append(
            f"{ledger_dir}: UNVERIFIED: no --trust given, so seal signatures were not checked and "
            "the result is not ok even where every frame matched (pass --trust verifier.pub)"
        )
    if alg.caveat:
        res.warnings.append(alg.caveat)
    if uncovered:
        runs_txt = "; ".join(
            f"link {u['link']} segments {u['first_segment']}..{u['last_segment']} "
            f"({u['frames']} frames, digest key id {u['digest_key_id']})"
            for u in uncovered[:4]
        )
        more = f" and {len(uncovered) - 4} more runs" if len(uncovered) > 4 else ""
        res.warnings.append(
            f"partial: no --digest-key given for {runs_txt}{more}; those segments were not "
            "reconciled and capture frames that belong to them count as capture-only "
            "(--digest-key is repeatable)"
        )
    if res.capture.stopped is not None:
        res.warnings.append(
            f"INCOMPLETE: {res.capture.stopped.message}; reconciled the "
            f"{plural(res.capture.frames, 'frame', fmt=',')} read before it"
        )
    if res.details_file and str(res.source) == STDIN and res.capture_only:
        res.warnings.append(
            "--details: standard input is read once, so capture-only lines have no summary"
        )
    ranged = res.window.get("from_ns") is not None or res.window.get("to_ns") is not None
    if ranged and res.matched == res.ledger_only == res.capture_only == 0:
        res.warnings.append(
            "--from/--to: no frame of the capture and no record of the ledger lies in that range, "
            "so nothing was compared"
        )
    differing = res.ledger_only + res.capture_only
    if res.details_written >= details_limit and differing > res.details_written:
        res.warnings.append(
            f"--details: wrote the first {res.details_written} of {differing} differing frames"
        )
