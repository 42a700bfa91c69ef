"""The frame rows of one recompute pass kept for pairing, within a memory budget (docs/adr/0011).

Both sides' rows go into growable record arrays that the producers write into in place (verify
copies each segment's checked records there, the engine its batches), so keeping them costs no
copy. Past `budget` bytes a store that may spill appends what it holds, and from then on every
row, to files in the verifier's temporary directory, one a side and bucket, the bucket being the
top BUCKET_BITS bits of the row's part (msethash.part_ids): every occurrence of a digest is in
one bucket on both sides, so the buckets pair one at a time as a pairing of all rows would pair
them. A store that may not spill lets go of what it holds instead (`dropped`). The files are
the verifier's own, written and read back by this run, never the prover's storage.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..digest.record import RecordSink
from .msethash import part_ids

__all__ = ["BUCKET_BITS", "Group", "PartStore"]

BUCKET_BITS = 8  # 256 buckets a side: ~1/256 of a run's rows paired at a time
_CHUNK = 1 << 20  # rows whose parts are computed at once (temporaries of 8 MB)
_MASK_CHUNK = 1 << 16  # the same to select the rows of some parts (temporaries of 512 KiB)


@dataclass(frozen=True)
class Group:
    """Rows of both sides that pair among themselves: the link names (sorted), each ledger row's
    link as an index into them, the ledger rows and the capture rows (record arrays)."""

    names: list[str]
    codes: np.ndarray
    ledger: np.ndarray
    capture: np.ndarray


class PartStore:
    """Ledger rows (with their link) and capture rows of one pass (see the module doc).

    `ledger` and `capture` are the sinks the producers fill (`ledger_sink`: one given, e.g. a
    HashingSink); after each segment or batch the caller hands the rows over with `took_ledger`
    / `took_capture`. `part_key`/`part_bits` are the run's parts (msethash); `tmp` a directory
    of the verifier's for the bucket files, None: the store may not spill and drops its rows
    when they pass `budget`."""

    def __init__(
        self,
        dtype: np.dtype,
        budget: int,
        part_key: tuple[int, int],
        part_bits: int,
        tmp: Path | None,
        hint: int = 0,
        ledger_sink: RecordSink | None = None,
    ):
        self.ledger = ledger_sink if ledger_sink is not None else RecordSink(dtype, hint)
        self.capture = RecordSink(dtype, hint)
        self.budget, self.part_key, self.part_bits, self.tmp = budget, part_key, part_bits, tmp
        self.bucket_bits = min(BUCKET_BITS, part_bits)
        self.links: dict[str, int] = {}  # link -> its code, in the order first seen
        # (link code, rows) of the ledger rows held, in order
        self.spans: list[tuple[int, int]] = []
        self.dropped = False
        self.spilled = False
        self._fds: dict[tuple[int, int], int] = {}  # (side, bucket) -> an open bucket file
        self._ldt = np.dtype([("rec", dtype), ("link", "<u4")])  # a ledger row on disk
        self.empty = np.zeros(0, dtype)  # no rows, of the sides' dtype

    # -- filling -------------------------------------------------------------------------------

    def took_ledger(self, link: str, records, keep: np.ndarray | None = None) -> None:
        """Keep a segment's records (bytes of whole records: at the ledger sink's free tail,
        where verify wrote them, or anywhere, then copied), only the rows `keep` marks (None:
        all)."""
        if self.dropped:
            return
        rows = self.ledger.take(records)
        kept = _compact(self.ledger, rows, keep)
        if kept:
            code = self.links.setdefault(link, len(self.links))
            self.spans.append((code, kept))
        self._check()

    def took_capture(self, count: int, keep: np.ndarray | None = None) -> None:
        """Keep the `count` rows the engine last added to the capture sink, only those `keep`
        marks (None: all)."""
        if self.dropped:
            self.capture.n = 0
            return
        _compact(self.capture, self.capture.records()[self.capture.n - count :], keep)
        self._check()

    def held_bytes(self) -> int:
        return (self.ledger.n + self.capture.n) * self.ledger.dtype.itemsize

    def _check(self) -> None:
        if self.spilled:
            self._spill()
        elif self.held_bytes() > self.budget:
            if self.tmp is None:
                self.dropped = True
                self.ledger.clear()
                self.capture.clear()
                self.spans = []
            else:
                self.spilled = True
                self._spill()
                self.ledger.clear()
                self.capture.clear()

    def _spill(self) -> None:
        """Append the rows held to their bucket files and hold none."""
        ledger = self.ledger.records()
        if len(ledger):
            codes = np.repeat(
                np.array([c for c, _ in self.spans], np.uint32), [n for _, n in self.spans]
            )
            self._append(0, ledger, codes)
        if self.capture.n:
            self._append(1, self.capture.records(), None)
        self.ledger.n = self.capture.n = 0
        self.spans = []

    def _append(self, side: int, rows: np.ndarray, codes: np.ndarray | None) -> None:
        buckets = self._buckets(rows)
        order = np.argsort(buckets, kind="stable")  # rows keep their order within a bucket
        counts = np.bincount(buckets, minlength=1 << self.bucket_bits)
        if codes is None:
            out = rows[order]
        else:
            out = np.empty(len(rows), self._ldt)
            out["rec"] = rows[order]
            out["link"] = codes[order]
        at = 0
        for b in np.flatnonzero(counts).tolist():
            n = int(counts[b])
            fd = self._fds.get((side, b))
            if fd is None:
                fd = self._fds[(side, b)] = os.open(
                    self._path(side, b), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
                )
            os.write(fd, memoryview(out[at : at + n]).cast("B"))
            at += n

    def _path(self, side: int, bucket: int) -> Path:
        return Path(self.tmp) / f"{'ledger' if side == 0 else 'capture'}-{bucket}.rows"

    def _buckets(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty(len(rows), np.intp)
        for at in range(0, len(rows), _CHUNK):
            out[at : at + _CHUNK] = part_ids(
                rows[at : at + _CHUNK], self.part_key, self.part_bits
            ) >> np.uint64(self.part_bits - self.bucket_bits)
        return out

    def close(self) -> None:
        """Close the bucket files (they stay until the temporary directory goes)."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    # -- reading -------------------------------------------------------------------------------

    def _wanted_rows(self, rows: np.ndarray, wanted: np.ndarray | None) -> np.ndarray | None:
        """A mask of the rows whose part `wanted` marks (None: every row)."""
        if wanted is None:
            return None
        mask = np.empty(len(rows), bool)
        # chunks whose temporaries stay in cache; the parts (< 2^part_bits) index as int64 bits,
        # which numpy takes without converting them
        for at in range(0, len(rows), _MASK_CHUNK):
            ids = part_ids(rows[at : at + _MASK_CHUNK], self.part_key, self.part_bits)
            mask[at : at + _MASK_CHUNK] = wanted[ids.view(np.int64)]
        return mask

    def _group(
        self, ledger: np.ndarray, codes: np.ndarray, capture: np.ndarray, wanted: np.ndarray | None
    ) -> Group:
        names = sorted(self.links)
        remap = np.zeros(max(len(self.links), 1), np.int32)
        for name, code in self.links.items():
            remap[code] = names.index(name)
        lsel, csel = self._wanted_rows(ledger, wanted), self._wanted_rows(capture, wanted)
        if lsel is not None:
            ledger, codes, capture = ledger[lsel], codes[lsel], capture[csel]
        return Group(names, remap[codes], ledger, capture)

    def groups(self, wanted: np.ndarray | None = None) -> Iterator[Group]:
        """The rows held, in groups that pair on their own: all of them at once when nothing was
        spilled, else one bucket at a time; only the rows of the parts `wanted` marks (a bool
        array over the parts; None: all). A bucket whose rows pass the budget is not read here
        but listed by `oversized` (read it with `chunks`)."""
        if self.dropped:
            raise ValueError("the store dropped its rows")
        if not self.spilled:
            codes = np.repeat(
                np.array([c for c, _ in self.spans], np.int32), [n for _, n in self.spans]
            )
            yield self._group(self.ledger.records(), codes, self.capture.records(), wanted)
            return
        self.close()
        shift, oversized = self.part_bits - self.bucket_bits, set(self.oversized(wanted))
        for b in range(1 << self.bucket_bits):
            if (
                b in oversized
                or wanted is not None
                and not wanted[b << shift : (b + 1) << shift].any()
            ):
                continue
            lrows = self._read(0, b)
            crows = self._read(1, b)
            if len(lrows) or len(crows):
                yield self._group(
                    np.ascontiguousarray(lrows["rec"]),
                    lrows["link"].astype(np.int32),
                    crows,
                    wanted,
                )

    def oversized(self, wanted: np.ndarray | None = None) -> list[int]:
        """The spilled buckets (with a part `wanted` marks) whose rows pass the budget."""
        if not self.spilled:
            return []
        shift, out = self.part_bits - self.bucket_bits, []
        for b in range(1 << self.bucket_bits):
            if wanted is not None and not wanted[b << shift : (b + 1) << shift].any():
                continue
            size = sum(self._path(s, b).stat().st_size for s in (0, 1) if self._path(s, b).exists())
            if size > self.budget:
                out.append(b)
        return out

    def chunks(
        self, bucket: int, wanted: np.ndarray | None = None, rows: int = _CHUNK
    ) -> Iterator[Group]:
        """An oversized bucket's rows, `rows` of a side at a time (they pair only all together:
        for a pairing that spills, such as DuckDB's)."""
        for side in (0, 1):
            path = self._path(side, bucket)
            dtype = self._ldt if side == 0 else self._ldt["rec"]
            total = path.stat().st_size // dtype.itemsize if path.exists() else 0
            for at in range(0, total, rows):
                part = np.fromfile(
                    path, dtype, count=min(rows, total - at), offset=at * dtype.itemsize
                )
                empty = np.zeros(0, self._ldt["rec"])
                if side == 0:
                    yield self._group(
                        np.ascontiguousarray(part["rec"]),
                        part["link"].astype(np.int32),
                        empty,
                        wanted,
                    )
                else:
                    yield self._group(empty, np.zeros(0, np.int32), part, wanted)

    def _read(self, side: int, bucket: int) -> np.ndarray:
        path = self._path(side, bucket)
        dtype = self._ldt if side == 0 else self._ldt["rec"]
        return np.fromfile(path, dtype) if path.exists() else np.zeros(0, dtype)


def _compact(sink: RecordSink, rows: np.ndarray, keep: np.ndarray | None) -> int:
    """Keep only the rows `keep` marks of `rows`, the last ones `sink` filled, moved down over the
    others; returns how many stay."""
    if keep is None or keep.all():
        return len(rows)
    stay = rows[keep]
    sink.n -= len(rows) - len(stay)
    sink.records()[sink.n - len(stay) :] = stay
    return len(stay)
