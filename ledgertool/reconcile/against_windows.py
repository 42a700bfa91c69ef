"""recompute against the window tier: a capture's frames accumulated into window records with the
ledger's keys and table, compared with the link's verified window log (docs/adr/0012; docs/cli.md,
"recompute against windows").

With a shared clock (a capture taken at the device's TAP) the comparison is per window: frames,
wire bytes and the unmasked keyed hash. A differing window's two sketches are subtracted and
decoded (reconcile.windows.compare_windows, accepted only when the decoded lists explain the counts
and hashes exactly); the capture-only digests are then found in the capture again and named (seq,
file offset, timestamp), the ledger-only ones reported as digests (no per-frame record is held).
A window beyond the table's capacity is reported with its count difference, never a guess.

Without a shared clock (a replayed workload, another vantage point) windows cannot be matched up:
one verdict over a range of the ledger's windows against every frame of the capture
(reconcile.windows.range_verdict), which says whether they agree, not which frames differ.

The ledger side is what `verify` checked: a ledger that does not verify is not compared (exit 1),
and one compared without a trust bundle is `verified: false` (never ok).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..algorithms import get_algorithm
from ..digest.window import WindowAccumulator, WindowKeys, WindowRecord
from ..errors import KeyFileError, Setting, UsageError
from ..keyfiles import DigestKey, TrustBundle
from ..ledger.layout import window_log_link
from ..ledger.opened import OpenLedger, open_ledger
from ..ledger.reader import LedgerReader
from ..progress import ProgressFn
from ..source.file import STDIN
from ..urls import location
from ..verify.ledger import verify_ledger
from ..verify.windows import VerifiedWindows
from .details import frames_by_index
from .dissect import dissect_line
from .query import not_verified_error
from .recompute import digest_records
from .result import CaptureVerdict, DigestRun
from .sources import Sources, source_list, source_name
from .windows import compare_windows, range_verdict

__all__ = [
    "NamedFrame",
    "WindowOutcome",
    "WindowsResult",
    "parse_windows_range",
    "reconcile_windows",
]

MATCH, DIFFER, BEYOND = "match", "differ", "beyond_capacity"


def _text(v: int | None) -> str | None:
    return None if v is None else str(int(v))


def parse_windows_range(text: str) -> tuple[int | None, int | None]:
    """'all' -> (None, None); 'FROM..TO' (window indexes, inclusive; either side may be empty)."""
    if text.strip().lower() == "all":
        return None, None
    lo, sep, hi = text.partition("..")
    try:
        if not sep:
            raise ValueError
        out = (int(lo) if lo.strip() else None, int(hi) if hi.strip() else None)
    except ValueError:
        raise UsageError(
            Setting("windows_range"),
            f" {text!r}: give all, or FROM..TO (window indexes, inclusive)",
        ) from None
    if None not in out and out[0] > out[1]:
        raise UsageError(Setting("windows_range"), f" {text!r}: FROM is after TO")
    return out


@dataclass(frozen=True)
class NamedFrame:
    """A capture-only frame found again in the capture: its index across the captures (seq), the
    byte offset of its record in its file, timestamp, lengths, digest and a one-line dissection."""

    seq: int
    offset: int | None
    ts_ns: int
    wire_len: int
    digest: bytes
    summary: str | None = None

    def to_json(self) -> dict:
        return {
            "seq": _text(self.seq),
            "offset": self.offset,
            "ts_ns": _text(self.ts_ns),
            "wire_len": self.wire_len,
            "digest": self.digest.hex(),
            "summary": self.summary,
        }


@dataclass(frozen=True)
class WindowOutcome:
    """One window: the ledger's record against the capture's (either may have no record, as 0s).
    `status` match / differ (decoded exactly: ledger_only digests, capture_only frames) /
    beyond_capacity (only the counts are known)."""

    index: int
    start_ns: int
    status: str
    ledger_frames: int
    capture_frames: int
    ledger_wire_bytes: int
    capture_wire_bytes: int
    drops: int
    ledger_only: tuple[bytes, ...] = ()
    capture_only: tuple[NamedFrame, ...] = ()

    @property
    def frames_difference(self) -> int:
        """Ledger frames minus capture frames."""
        return self.ledger_frames - self.capture_frames

    def to_json(self) -> dict:
        return {
            "index": _text(self.index),
            "start_ns": _text(self.start_ns),
            "status": self.status,
            "ledger_frames": self.ledger_frames,
            "capture_frames": self.capture_frames,
            "frames_difference": self.frames_difference,
            "ledger_wire_bytes": self.ledger_wire_bytes,
            "capture_wire_bytes": self.capture_wire_bytes,
            "drops_declared": self.drops,
            "ledger_only": [d.hex() for d in self.ledger_only],
            "capture_only": [f.to_json() for f in self.capture_only],
        }


@dataclass
class WindowsResult(CaptureVerdict):
    """recompute against a link's window log (schemas/recompute-report.schema.json, `windows`).
    `mode` "per_window" (a shared clock) or "range" (one verdict over `range`)."""

    source: str
    ledger: str
    link: str
    mode: str
    window_ns: int
    capacity: int
    frames: int
    ledger_frames: int
    elapsed_s: float = 0.0
    windows: list[WindowOutcome] = field(default_factory=list)  # per_window: every window
    range: tuple[int | None, int | None] = (None, None)
    range_windows: int = 0
    range_equal: bool | None = None
    verified: bool = True
    capture: DigestRun = field(default_factory=DigestRun)
    warnings: list[str] = field(default_factory=list)

    @property
    def differing(self) -> list[WindowOutcome]:
        return [w for w in self.windows if w.status != MATCH]

    @property
    def matches(self) -> bool:
        if self.mode == "range":
            return bool(self.range_equal)
        return not self.differing

    def count(self, status: str) -> int:
        return sum(w.status == status for w in self.windows)

    def to_json(self) -> dict:
        lo, hi = self.range
        doc = {
            "ok": self.ok,
            "against": "windows",
            "mode": self.mode,
            "source": self.source,
            "ledger": self.ledger,
            "link": self.link,
            "window_ns": self.window_ns,
            "capacity": self.capacity,
            "frames": self.frames,
            "ledger_frames": self.ledger_frames,
            "matches": self.matches,
            "verified": self.verified,
            "elapsed_s": round(self.elapsed_s, 6),
        }
        if self.mode == "range":
            doc["range"] = {
                "from_index": _text(lo),
                "to_index": _text(hi),
                "windows": self.range_windows,
                "equal": bool(self.range_equal),
            }
            doc["per_window"] = []
        else:
            doc["windows_compared"] = len(self.windows)
            doc["windows_matched"] = self.count(MATCH)
            doc["windows_differing"] = self.count(DIFFER)
            doc["windows_beyond_capacity"] = self.count(BEYOND)
            doc["per_window"] = [w.to_json() for w in self.windows]
        return {**doc, **self.capture.to_json(), "warnings": self.warnings}


def _empty(like: WindowRecord, keys: WindowKeys, index: int) -> WindowRecord:
    """The record of a window with no frame (a zero table, masked with that index's pad)."""
    zero = WindowRecord(
        like.digest_size, like.cells, like.window_ns, index, 0, 0, 0, 0, bytes(len(like.masked))
    )
    return WindowRecord.parse(zero.unmask(keys))  # the pad is an XOR: unmasking zeros masks them


def _choose_link(reader: LedgerReader, links: list[str] | None) -> str:
    ledger_dir = reader.directory
    logs = sorted(window_log_link(log) for log in reader.window_logs)
    if links:
        if len(links) != 1:
            raise UsageError(
                "recompute against windows compares one link: give one ", Setting("links")
            )
        if links[0] not in logs:
            raise UsageError(
                f"{ledger_dir}: link {links[0]} has no window log (window logs: "
                f"{', '.join(logs) or 'none'})"
            )
        return links[0]
    if not logs:  # nothing was captured into the window tier yet: no link to name
        raise UsageError(
            f"{ledger_dir}: the ledger has no window records yet (no window log): capture into "
            "it first"
        )
    if len(logs) != 1:
        raise UsageError(
            f"{ledger_dir}: {len(logs)} window logs ({', '.join(logs)}); name the link with ",
            Setting("links"),
        )
    return logs[0]


def reconcile_windows(
    source: Sources,
    ledger_dir: Path | OpenLedger,
    digest_key: DigestKey | Sequence[DigestKey],
    *,
    trust: TrustBundle | None = None,
    checkpoint: bytes | None = None,
    checkpoint_name: str = "checkpoint",
    links: list[str] | None = None,
    windows_range: tuple[int | None, int | None] | None = None,
    progress: ProgressFn | None = None,
    workers: int = 0,
) -> WindowsResult:
    """Verify the ledger (its window log of the link), accumulate `source` into windows with the
    same keys and table, and compare: per window, or with `windows_range` ((None, None): every
    window; else the ledger's windows FROM..TO inclusive) one verdict over the range against every
    frame of the capture.

    Raises DiscrepancyError when the ledger does not verify, UsageError for a ledger without
    a window log for the link, several keys or links, KeyFileError for a key the window log's seals
    do not name, CaptureFormatError for a capture that cannot be opened."""
    t0 = time.perf_counter()
    given = ledger_dir
    ledger_dir = given.location if isinstance(given, OpenLedger) else location(given)
    keys_given = [digest_key] if isinstance(digest_key, DigestKey) else list(digest_key)
    opened = open_ledger(given if isinstance(given, OpenLedger) else ledger_dir)
    ledger = opened.header
    if ledger.window is None:
        raise UsageError(
            f"{ledger_dir}: the ledger has no window tier (ledger.json); recompute "
            "it against its per-frame records"
        )
    link = _choose_link(opened.reader, links)
    alg = get_algorithm(ledger.algorithm)
    verified: list[VerifiedWindows] = []
    ver = verify_ledger(
        opened,
        trust,
        checkpoint,
        checkpoint_name,
        links=[link],
        on_windows=verified.append,
        progress=progress,
    )
    if not ver.ok:
        raise not_verified_error(ver, "it is not compared")
    params = ledger.window
    periods = _key_periods(verified, keys_given, ledger, link, alg)
    ledger_windows = {w.index: w for v in verified for w in v.windows}
    per_window = windows_range is None
    chosen: list[WindowRecord] = []
    if not per_window:
        lo, hi = windows_range
        chosen = [
            w
            for i, w in sorted(ledger_windows.items())
            if (lo is None or i >= lo) and (hi is None or i <= hi)
        ]
        if not chosen and ledger_windows and windows_range != (None, None):
            # nothing to compare with: not a discrepancy but a range that misses the ledger
            raise UsageError(
                Setting("windows_range"),
                f" {_range_text(windows_range)}: no window of {ledger_dir} link {link} lies in it "
                f"(its windows are {min(ledger_windows)}..{max(ledger_windows)})",
            )
        periods = _range_period(periods, chosen)
    outcomes: dict[int, WindowOutcome] = {}
    value = 0

    def closed(windows: list[WindowRecord], keys: WindowKeys) -> None:
        nonlocal value
        for cw in windows:  # each capture window compared (or summed) as it closes: none kept
            if per_window:
                outcomes[cw.index] = window_outcome(keys, ledger_windows.get(cw.index), cw)
            else:
                value += cw.hash_value(keys)

    run = _accumulate(source, periods, ledger, alg, closed, progress, workers)
    res = WindowsResult(
        source_name(source),
        str(ledger_dir),
        link,
        "per_window" if per_window else "range",
        params.window_ns,
        params.capacity,
        run.frames,
        sum(w.frames for w in ledger_windows.values()),
        verified=ver.signatures_checked,
        capture=run,
        warnings=list(run.warnings),
    )
    if run.stopped is not None:  # where the capture stopped, as the per-frame report says it
        res.warnings.append(
            f"INCOMPLETE: {run.stopped.message}; compared the {run.frames} frames read before it"
        )
    if not per_window:
        verdict = range_verdict(periods[0].keys, chosen, value, run.frames)
        res.range, res.range_windows = windows_range, verdict.windows
        res.range_equal = verdict.equal
        res.ledger_frames = verdict.ledger_frames
        res.warnings.append(
            "a range verdict says whether the range agrees with the capture, not "
            "which frames differ (no shared clock: windows are not matched up)"
        )
    else:
        for index, lw in ledger_windows.items():  # windows the capture has no frame in
            if index not in outcomes:
                outcomes[index] = window_outcome(_period_of(periods, index).keys, lw, None)
        res.windows = [outcomes[i] for i in sorted(outcomes)]
        _name_capture_only(res, source, periods, alg, ledger.strip, workers)
    res.elapsed_s = time.perf_counter() - t0
    return res


@dataclass(frozen=True)
class KeyPeriod:
    """The windows of a link digested with one digest key: from window `start` (None: from the
    first) up to the next period's start. A digest-key rotation starts a new period at the first
    window of the window log's first segment sealed under the new key."""

    start: int | None
    digest_key: DigestKey
    keys: WindowKeys


def _key_periods(
    verified: list[VerifiedWindows], given: list[DigestKey], ledger, link: str, alg
) -> list[KeyPeriod]:
    """The key periods of the link's window log, in window order, from the digest key ids its
    verified seals name (the key schedule checked them) and the keys given. KeyFileError for a
    key id no key given has, or a key given that no window was digested with."""
    if not given:
        raise UsageError("recompute against windows needs a ", Setting("digest_key"))
    by_id = {dk.key_id(alg.name, alg.key_size): dk for dk in given}
    ids: list[tuple[int | None, str]] = []
    for v in verified:
        kid = str(v.seal.digest_key_id)
        if v.windows and (not ids or ids[-1][1] != kid):
            ids.append((v.windows[0].index if ids else None, kid))
    if not ids and len(by_id) == 1:  # an empty window log: the one key given
        ids = [(None, next(iter(by_id)))]
    missing = sorted({kid for _, kid in ids} - set(by_id))
    unused = sorted(set(by_id) - {kid for _, kid in ids})
    if missing or unused:
        paths = ", ".join(str(by_id[k].path) for k in unused)
        raise KeyFileError(
            f"link {link}: its window log was digested with key ids "
            f"{', '.join(dict.fromkeys(k for _, k in ids)) or 'none'}"
            + (f"; no digest key given has id {', '.join(missing)}" if missing else "")
            + (f"; {paths}: digests no window of it (wrong key)" if unused else ""),
            *(
                (" (give every key of the log: one ", Setting("digest_key"), " per key)")
                if missing
                else ()
            ),
        )
    window_ns = ledger.window.window_ns
    return [
        KeyPeriod(
            start,
            by_id[kid],
            WindowKeys.derive(
                by_id[kid].master, ledger.algorithm, ledger.ledger_id, link, window_ns
            ),
        )
        for start, kid in ids
    ]


def _period_of(periods: list[KeyPeriod], index: int) -> KeyPeriod:
    """The period window `index` lies in (the first one for a window before every start)."""
    return next((p for p in reversed(periods) if p.start is None or index >= p.start), periods[0])


def _range_text(windows_range: tuple[int | None, int | None]) -> str:
    lo, hi = windows_range
    return f"{'' if lo is None else lo}..{'' if hi is None else hi}"


def _range_period(periods: list[KeyPeriod], chosen: list[WindowRecord]) -> list[KeyPeriod]:
    """A range verdict sums one key's element map over the range, and a capture without a shared
    clock cannot be split at a rotation: the range's windows must share one digest key
    (UsageError naming where the rotation falls)."""
    if len(periods) == 1:
        return periods
    if chosen:
        first, last = (_period_of(periods, w.index) for w in (chosen[0], chosen[-1]))
        if first is last:
            return [replace(first, start=None)]
    starts = ", ".join(str(p.start) for p in periods[1:])
    raise UsageError(
        Setting("windows_range"),
        f": the windows chosen span a digest-key rotation (new key from window {starts}); a "
        "range verdict compares one key's windows: choose a range on one side",
    )


def _accumulate(source: Sources, periods, ledger, alg, closed, progress, workers) -> DigestRun:
    """The capture's frames digested and accumulated into windows, each window with its period's
    digest key and window keys (`closed(windows, keys)` as they close); the first pass's DigestRun.
    With one period one pass; with several, one pass per key, each keeping the frames whose window
    (as the device assigns it: never before the open one) lies in its period; a frame whose
    timestamp lies before its period's start (late across the rotation) is counted in the
    period's first window."""
    params = ledger.window
    first: DigestRun | None = None
    for k, per in enumerate(periods):
        hi = periods[k + 1].start if k + 1 < len(periods) else None
        acc = WindowAccumulator(
            per.keys, ledger.digest_size, window_ns=params.window_ns, cells=params.cells
        )
        run, open_index = DigestRun(), None
        for one in source_list(source):
            if run.stopped is not None:
                break
            batches = digest_records(
                one, per.digest_key, alg, ledger.strip, run, progress if k == 0 else None, workers
            )
            for batch in batches:
                if len(periods) == 1:
                    closed(acc.add(batch), per.keys)
                    continue
                win, open_index = _device_windows(batch, params.window_ns, open_index)
                keep = np.ones(len(batch), bool)
                if per.start is not None:
                    keep &= win >= per.start
                if hi is not None:
                    keep &= win < hi
                part = batch[keep]
                if per.start is not None and len(part):
                    part["ts_ns"] = np.maximum(part["ts_ns"], per.start * params.window_ns)
                closed(acc.add(part), per.keys)
        closed(acc.finish(), per.keys)
        first = first or run
    return first


def _device_windows(batch: np.ndarray, window_ns: int, open_index: int | None):
    """(the window index the accumulator gives each record of `batch`, the open window after it):
    floor(ts / window_ns), never below the open window's."""
    win = np.floor_divide(batch["ts_ns"], window_ns)
    if open_index is not None:  # a frame behind the open window is counted in it (late)
        win = np.maximum(win, open_index)
    win = np.maximum.accumulate(win)
    return win, (int(win[-1]) if len(win) else open_index)


def window_outcome(
    keys: WindowKeys, lw: WindowRecord | None, cw: WindowRecord | None
) -> WindowOutcome:
    """One window compared; a side without a record is an empty window of the same index."""
    lw = lw if lw is not None else _empty(cw, keys, cw.index)
    cw = cw if cw is not None else _empty(lw, keys, lw.index)
    diff = compare_windows(keys, lw, cw)
    status = (
        MATCH
        if diff.equal and lw.wire_bytes == cw.wire_bytes
        else (DIFFER if diff.decoded else BEYOND)
    )
    only = tuple(NamedFrame(-1, None, 0, 0, d) for d in diff.capture_only)
    return WindowOutcome(
        lw.index,
        lw.start_ns,
        status,
        lw.frames,
        cw.frames,
        lw.wire_bytes,
        cw.wire_bytes,
        lw.drops,
        tuple(sorted(diff.ledger_only)),
        only,
    )


def _name_capture_only(
    res: WindowsResult, source: Sources, periods: list[KeyPeriod], alg, strip: str, workers: int
) -> None:
    """Find each decoded capture-only digest in the capture again (a second pass per digest key
    that has such windows, only when some window has one): a digest the capture holds m times more
    than the ledger in a window names its last m occurrences there (the ledger's pair with the
    first ones, as the per-frame pairing does). Then their file offsets and dissections (a third
    pass over those frames only)."""
    wanted = {
        w.index: Counter(f.digest for f in w.capture_only) for w in res.windows if w.capture_only
    }
    if not wanted:
        return
    if any(str(one) == STDIN for one in source_list(source)):  # read once: digests stay unnamed
        res.warnings.append("standard input was read once: capture-only frames are named by digest")
        return
    picks: dict[int, list[tuple[int, int, int, bytes]]] = {}
    for per in periods:
        mine = {i: c for i, c in wanted.items() if _period_of(periods, i) is per}
        if mine:
            picks.update(_find_digests(mine, source, per.digest_key, alg, strip, workers, res))
    where = _frames_at(source, {seq for hits in picks.values() for seq, *_ in hits})
    named = {
        w: tuple(
            NamedFrame(
                seq, *where.get(seq, (None, None))[:1], ts, wire, d, where.get(seq, (None, None))[1]
            )
            for seq, ts, wire, d in sorted(hits)
        )
        for w, hits in picks.items()
    }
    res.windows = [
        replace(w, capture_only=named[w.index]) if w.index in named else w for w in res.windows
    ]


def _find_digests(
    wanted: dict[int, Counter], source: Sources, dk: DigestKey, alg, strip, workers, res
) -> dict[int, list[tuple[int, int, int, bytes]]]:
    """Per window of `wanted`, (seq, ts_ns, wire_len, digest) of the last m occurrences of each
    digest the window wants m of, digesting the capture with `dk`."""
    prefixes = np.array(
        sorted({int.from_bytes(d[:8], "little") for c in wanted.values() for d in c}),
        dtype=np.uint64,
    )
    found: dict[int, dict[bytes, list[tuple[int, int, int, bytes]]]] = {i: {} for i in wanted}
    run, open_index = DigestRun(), None
    for one in source_list(source):
        if run.stopped is not None:
            break
        for batch in digest_records(one, dk, alg, strip, run, None, workers):
            win, open_index = _device_windows(batch, res.window_ns, open_index)
            raw = np.ascontiguousarray(batch["digest"]).view(np.uint8).reshape(len(batch), -1)
            pre = np.ascontiguousarray(raw[:, :8]).view("<u8").ravel()
            hit = np.isin(pre, prefixes) & np.isin(win, list(wanted))
            for k in np.flatnonzero(hit):
                d, w = bytes(batch["digest"][k]), int(win[k])
                if d in wanted[w]:
                    found[w].setdefault(d, []).append(
                        (int(batch["seq"][k]), int(batch["ts_ns"][k]), int(batch["wire_len"][k]), d)
                    )
    return {
        w: [hit for d, m in counts.items() for hit in found[w].get(d, [])[-m:]]
        for w, counts in wanted.items()
    }


def _frames_at(source: Sources, seqs: set[int]) -> dict[int, tuple[int, str]]:
    """(file offset, dissection) of the frames with these indexes across the captures."""
    return {
        i: (f.offset, dissect_line(f.data, f.linktype))
        for i, f in frames_by_index(source, seqs).items()
    }
