"""The fast part of a multiset comparison: digests that occur exactly once on each side.

In a capture that agrees with its ledger almost every digest occurs once in the ledger and once in
the capture; such a pair is matched whatever the order or the pairing rule, so it need not go
through DuckDB's group-by and join (pairing.pair_tables), which cost ~85 % of a single-core
reconciliation of 64-byte frames when they were measured. They are found in
C (lt_once_each: a hash table over the ledger side's digests, no Python per record), and before
that, for a capture in its ledger's order, by walking both sides in step (in_order,
lt_pair_in_order: only pairs of the k-th occurrence of a digest on both sides, kept where both
have the same time, which the exact pairing pairs first). The rows of
every other digest ("contested": counts that differ, repeats, one-sided digests) go to the exact
pairing (with the walk, a digest's k-th/k-th pairs taken out and its other rows left there); the
counts of the parts add up (merge_tallies), because each row is in exactly one part.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._binding import check, ffi, lib
from ..digest.record import record_dtype

__all__ = [
    "LedgerPart",
    "Tally",
    "byte_rows",
    "concat_records",
    "in_order",
    "ledger_rows",
    "matched_tally",
    "merge_tallies",
    "once_each",
    "paired_masks",
    "second_counts",
    "window_mask",
]


@dataclass(frozen=True)
class LedgerPart:
    """One verified segment's frame records (gap records left out), or those of one partition."""

    link: str
    kid: object  # the segment's digest key id, as its (verified) seal states it
    records: np.ndarray  # record_dtype


@dataclass(frozen=True)
class Tally:
    """The counts and examples of a pairing, as ReconcileResult takes them."""

    frames_in_window: int
    matched: int
    ledger_only: int
    capture_only: int
    per_link: list[dict]
    per_second: list[dict]
    examples_ledger_only: list[tuple]
    examples_capture_only: list[tuple]


def _mask_buffer(n: int) -> tuple[np.ndarray, object]:
    mask = np.empty(n, np.uint8)
    return mask, ffi.from_buffer(mask) if n else ffi.NULL


def once_each(ledger: np.ndarray, capture: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over `ledger` and `capture` (record_dtype arrays of one digest size) of the
    rows whose digest's first 8 bytes occur exactly once in each, with equal whole digests: those
    rows pair one to one (matched). A row outside both masks may still be matched; the exact
    pairing decides it (so two digests that share their first 8 bytes only cost speed). The hash
    is seeded at random per call. MemoryError when the call's tables (16 bytes per row of both
    sides, 8 more per row of the larger) cannot be allocated."""
    ledger, capture = np.ascontiguousarray(ledger), np.ascontiguousarray(capture)
    fmt, off = ledger.dtype.fields["digest"][:2]
    lmask, lbuf = _mask_buffer(len(ledger))
    cmask, cbuf = _mask_buffer(len(capture))
    lrec = ffi.from_buffer(ledger) if len(ledger) else ffi.NULL
    crec = ffi.from_buffer(capture) if len(capture) else ffi.NULL
    rc = lib.lt_once_each(
        lrec,
        len(ledger),
        ledger.dtype.itemsize,
        crec,
        len(capture),
        capture.dtype.itemsize,
        off,
        fmt.itemsize,
        secrets.randbits(64),
        lbuf,
        cbuf,
    )
    check(rc, "lt_once_each")  # MemoryError on LT_ERR_NOMEM
    return lmask.view(bool), cmask.view(bool)


def in_order(
    ledger: np.ndarray, codes: np.ndarray | None, capture: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over `ledger` and `capture` (record_dtype arrays of one digest size) of the
    rows the ordered walk pairs (native lt_pair_in_order): each such pair is the k-th occurrence
    of its digest on both sides in recompute's exact pairing (ledger rows in (ts_ns, link, seq)
    order, `codes` each row's link as an index into the sorted link names, None: one link;
    capture rows in (ts_ns, seq) order), so it is matched and taking it out leaves the others'
    pairing as it was. Nothing is paired when an array is not in that order. Not for a capture
    whose pairing order puts some frames first (recompute's uncovered segments). MemoryError
    when the set of the rest's digest prefixes (8 bytes per rest row) cannot be allocated."""
    return _in_order(ledger, codes, capture)[:2]


def _in_order(
    ledger: np.ndarray, codes: np.ndarray | None, capture: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """in_order's masks and the number of pairs: when it is not 0, the walk found both whole
    arrays in their pairing order (so each side's ts_ns never decreases)."""
    ledger, capture = np.ascontiguousarray(ledger), np.ascontiguousarray(capture)
    fmt, off = ledger.dtype.fields["digest"][:2]
    lmask, lbuf = _mask_buffer(len(ledger))
    cmask, cbuf = _mask_buffer(len(capture))
    links = ffi.NULL
    if codes is not None and len(codes) and codes.max() > 0:
        codes = np.ascontiguousarray(codes, np.uint32)
        links = ffi.from_buffer("uint32_t[]", codes)
    paired = ffi.new("size_t *")
    rc = lib.lt_pair_in_order(
        ffi.from_buffer(ledger) if len(ledger) else ffi.NULL,
        len(ledger),
        ledger.dtype.itemsize,
        links,
        ffi.from_buffer(capture) if len(capture) else ffi.NULL,
        len(capture),
        capture.dtype.itemsize,
        off,
        fmt.itemsize,
        lbuf,
        cbuf,
        paired,
    )
    check(rc, "lt_pair_in_order")
    return lmask.view(bool), cmask.view(bool), int(paired[0])


def paired_masks(
    ledger: np.ndarray,
    codes: np.ndarray | None,
    capture: np.ndarray,
    ordered: bool,
    *,
    with_order: bool = False,
) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, bool]:
    """The rows matched outside the exact pairing: the ordered walk's pairs (`ordered`: the
    capture's pairing order is (ts_ns, seq), see in_order) of the digests whose walked pairs each
    join two equal times (_keep_same_time), then once_each over the rest. The
    exact pairing of the unmarked rows classifies them as that of all rows would. `with_order`:
    a third value says whether the walk found `ledger` in its pairing order, i.e. its ts_ns
    non-decreasing (False when it was not run or paired nothing: unknown), for matched_tally."""
    if not ordered:
        lm, cm = once_each(ledger, capture)
        return (lm, cm, False) if with_order else (lm, cm)
    lm, cm, walked = _in_order(ledger, codes, capture)
    if walked:
        _keep_same_time(ledger, capture, lm, cm)
    if lm.all() and cm.all():
        return (lm, cm, walked > 0) if with_order else (lm, cm)
    lrest, crest = np.flatnonzero(~lm), np.flatnonzero(~cm)
    lo, co = once_each(ledger[lrest], capture[crest])
    lm[lrest[lo]] = True
    cm[crest[co]] = True
    return (lm, cm, walked > 0) if with_order else (lm, cm)


def _keep_same_time(
    ledger: np.ndarray, capture: np.ndarray, lm: np.ndarray, cm: np.ndarray
) -> None:
    """Unmark the walk's pairs (in_order's masks `lm`, `cm`, changed in place) that the exact
    pairing may pair otherwise: it pairs a digest's occurrences of the same time on both sides
    first, then the rest in time order (pairing.pair_tables). The walk's pairs of a digest are its
    first occurrences on both sides, taken in step (the k-th marked ledger row with the k-th
    marked capture row). They stay when each joins two equal times (each time's first occurrences
    in the exact pairing's order too, so paired there as here), or when no occurrence of the
    digest shares its time with one on the other side (the exact pairing is then the time order
    alone, the walk's). The others' digests lose every walked pair. A digest is known here by its
    first 8 bytes and a (digest, time) by a hash of both: a collision only unmarks more, which
    sends rows to the exact pairing, never changes what it decides."""
    if len(lm) == len(cm) and lm.all() and cm.all():  # every row walked: no index arrays
        off = ledger["ts_ns"] != capture["ts_ns"]
        if not off.any():
            return
        li = ci = np.arange(len(lm))
    else:
        li, ci = np.flatnonzero(lm), np.flatnonzero(cm)
        off = ledger["ts_ns"][li] != capture["ts_ns"][ci]
        if not off.any():
            return
    lpre, cpre = _prefixes(ledger), _prefixes(capture)
    bad = np.unique(lpre[li[off]])
    lsel, csel = np.isin(lpre, bad), np.isin(cpre, bad)
    lkey = _time_keys(lpre[lsel], ledger["ts_ns"][lsel])
    shared = np.isin(lkey, _time_keys(cpre[csel], capture["ts_ns"][csel]))
    mixed = np.unique(lpre[lsel][shared])  # some of it pairs at equal times: the walk's may not
    if not len(mixed):
        return
    drop = np.isin(lpre[li], mixed)
    lm[li[drop]] = False
    cm[ci[drop]] = False


def _time_keys(prefixes: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each (digest prefix, time)."""
    with np.errstate(over="ignore"):
        return prefixes ^ (ts.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))


def _prefixes(rows: np.ndarray) -> np.ndarray:
    """The first 8 digest bytes of each row of `rows` (record_dtype) as uint64."""
    off = rows.dtype.fields["digest"][1]
    return np.ascontiguousarray(byte_rows(rows)[:, off : off + 8]).view("<u8").ravel()


def window_mask(ts: np.ndarray, lo: int | None, hi: int | None) -> np.ndarray:
    """Rows with `lo` <= ts < `hi` (either bound None: open), as recompute's window SQL."""
    mask = np.ones(len(ts), bool)
    if lo is not None:
        mask &= ts >= lo
    if hi is not None:
        mask &= ts < hi
    return mask


def ledger_rows(
    parts: Sequence[LedgerPart | None], kid: str, digest_size: int, whole: np.ndarray | None = None
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The ledger rows under digest key `kid` (recompute's view `l` takes no others): the links,
    each row's link (an index into them), and the records (one array). `whole`: an array the
    parts are, in order, consecutive views of, from its start to its end (recompute's ledger
    sink): when every part is under `kid` it is the records, and nothing is joined."""
    every = [lp for lp in parts if lp is not None]
    parts = [lp for lp in every if lp.kid == kid]
    names = sorted({lp.link for lp in parts})
    code = {name: i for i, name in enumerate(names)}
    if len(names) <= 1:  # one link: every code 0, in pages that are not written (calloc)
        codes = np.zeros(sum(len(lp.records) for lp in parts), np.int32)
    else:
        codes = np.repeat(
            np.array([code[lp.link] for lp in parts], np.int32), [len(lp.records) for lp in parts]
        )
    if len(parts) == 1:
        return names, codes, parts[0].records
    if whole is not None and len(parts) == len(every) and len(whole) == len(codes):
        return names, codes, whole
    return names, codes, concat_records([lp.records for lp in parts], record_dtype(digest_size))


def concat_records(arrays: Sequence[np.ndarray], dtype: np.dtype) -> np.ndarray:
    """`arrays` (record arrays of `dtype`) joined into one new contiguous array. Copied as rows of
    bytes: numpy copies a structured dtype field by field, ~4x slower than memcpy."""
    out = np.empty(sum(len(a) for a in arrays), dtype)
    rows, at = byte_rows(out), 0
    for a in arrays:
        rows[at : at + len(a)] = byte_rows(a)
        at += len(a)
    return out


def byte_rows(arr: np.ndarray) -> np.ndarray:
    """`arr` (a 1-D record array) as an (n, itemsize) uint8 array: a view when `arr` is
    contiguous, else a copy."""
    arr = np.ascontiguousarray(arr)
    return arr.view(np.uint8).reshape(len(arr), arr.dtype.itemsize)


def matched_tally(
    names: list[str],
    codes: np.ndarray,
    lts: np.ndarray,
    cts: np.ndarray,
    from_ns: int | None,
    to_ns: int | None,
    ts_sorted: bool = False,
) -> Tally:
    """The tally of the rows paired one to one (`codes`, `lts`: their ledger rows' links and
    times; `cts`: their capture rows' times): matched, counted by the ledger's time (the capture
    side counts only towards the frames in the window). `ts_sorted`: `lts` is known to be
    non-decreasing (the ordered walk checked it), so its seconds are counted by binary search at
    the second boundaries instead of a pass over every row."""
    if from_ns is None and to_ns is None:  # no window: every row counts, none copied
        n_in, frames = len(lts), len(cts)
    else:
        lin = window_mask(lts, from_ns, to_ns)
        codes, lts, n_in, frames = (
            codes[lin],
            lts[lin],
            int(lin.sum()),
            int(window_mask(cts, from_ns, to_ns).sum()),
        )
    per_link = [len(codes)] if len(names) == 1 else np.bincount(codes, minlength=len(names))
    secs, nsec = _sorted_per_second(lts) if ts_sorted else (None, None)
    if secs is None:
        secs, nsec = _per_second(lts // 1_000_000_000)
    return Tally(
        frames,
        n_in,
        0,
        0,
        [
            {"link": n, "matched": int(c), "ledger_only": 0, "capture_only": 0}
            for n, c in zip(names, per_link)
            if c
        ],
        [
            {"second": int(s), "matched": int(c), "ledger_only": 0, "capture_only": 0}
            for s, c in zip(secs, nsec)
        ],
        [],
        [],
    )


def second_counts(
    records: np.ndarray, skip_flags: int = 0, into: dict[int, int] | None = None
) -> dict[int, int]:
    """Rows of `records` (a record_dtype array) per second (ts_ns // 10^9), those whose flags
    share a bit with `skip_flags` left out, added into `into` (a new dict when None) and
    returned. Counted in C (lt_second_runs) in one pass over the records; numpy when their times
    jump between seconds more often than 64 + 1/16 of the rows."""
    into = {} if into is None else into
    if not len(records):
        return into
    records = np.ascontiguousarray(records)
    cap = 64 + len(records) // 16
    secs, counts = np.empty(cap, np.int64), np.empty(cap, np.uint64)
    nruns = ffi.new("size_t *")
    check(
        lib.lt_second_runs(
            ffi.from_buffer(records),
            len(records),
            records.dtype.itemsize,
            skip_flags,
            ffi.from_buffer("int64_t[]", secs),
            ffi.from_buffer("uint64_t[]", counts),
            cap,
            nruns,
        ),
        "lt_second_runs",
    )
    if nruns[0] <= cap:
        pairs = zip(secs[: nruns[0]].tolist(), counts[: nruns[0]].tolist())
    else:
        keep = records if not skip_flags else records[(records["flags"] & skip_flags) == 0]
        pairs = zip(*(a.tolist() for a in _per_second(keep["ts_ns"] // 1_000_000_000)))
    for sec, n in pairs:
        into[sec] = into.get(sec, 0) + n
    return into


def _sorted_per_second(ts: np.ndarray) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """_per_second(ts // 10**9) for a non-decreasing `ts` (ns): the row index where each second
    after the first begins, by binary search, when the seconds spanned are few next to the rows
    ((None, None) otherwise). The boundaries lie inside [ts[0], ts[-1]]: no int64 overflow."""
    if not len(ts):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first, last = int(ts[0]) // 10**9, int(ts[-1]) // 10**9
    if last - first > max(len(ts) // 16, 64):  # (64 + n / 16 binary searches at most)
        return None, None
    starts = np.searchsorted(
        ts, np.arange(first + 1, last + 1, dtype=np.int64) * 10**9, side="left"
    )
    counts = np.diff(np.concatenate(([0], starts, [len(ts)])))
    held = np.flatnonzero(counts)
    return held + first, counts[held]


def _per_second(secs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct seconds and their counts, ascending: a histogram when they span few seconds
    (the usual capture: no sort of every row), np.unique otherwise."""
    if len(secs) and int(secs.max()) - int(secs.min()) <= 4 * len(secs):
        first = int(secs.min())
        counts = np.bincount(secs - first)
        held = np.flatnonzero(counts)
        return held + first, counts[held]
    return np.unique(secs, return_counts=True)


def merge_tallies(tallies: Sequence[Tally], examples: int) -> Tally:
    """The tally of the whole comparison from its parts' (each digest is in one part)."""
    links: dict[str, list[int]] = {}
    seconds: dict[int, list[int]] = {}
    conly = 0
    for t in tallies:
        for row in t.per_link:
            if row["link"] is None:
                conly += row["capture_only"]
                continue
            acc = links.setdefault(row["link"], [0, 0])
            acc[0] += row["matched"]
            acc[1] += row["ledger_only"]
        for row in t.per_second:
            acc = seconds.setdefault(row["second"], [0, 0, 0])
            for k, name in enumerate(("matched", "ledger_only", "capture_only")):
                acc[k] += row[name]
    per_link = [
        {"link": ln, "matched": m, "ledger_only": lo, "capture_only": 0}
        for ln, (m, lo) in sorted(links.items())
    ]
    if conly:
        per_link.append({"link": None, "matched": 0, "ledger_only": 0, "capture_only": conly})
    per_second = [
        {"second": s, "matched": m, "ledger_only": lo, "capture_only": co}
        for s, (m, lo, co) in sorted(seconds.items())
    ]
    ex_l = sorted((e for t in tallies for e in t.examples_ledger_only), key=lambda e: (e[1], e[2]))[
        :examples
    ]
    ex_c = sorted((e for t in tallies for e in t.examples_capture_only), key=lambda e: e[1])[
        :examples
    ]
    return Tally(
        sum(t.frames_in_window for t in tallies),
        sum(t.matched for t in tallies),
        sum(t.ledger_only for t in tallies),
        conly,
        per_link,
        per_second,
        ex_l,
        ex_c,
    )
