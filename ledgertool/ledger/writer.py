"""LinkWriter: where a capture's records go from the digest engine to storage and to the sealer.

It owns one link's open segment (the only place that builds a segment header), rotates it by
record count and by wall-clock age, seals each full segment on a background thread, extends the
link's seal chain (previous seal hash, next index and first seq) and signs a checkpoint over the
chain after every seal (docs/ledger-format.md; docs/transparency.md, "Checkpoints").

The sealer signs what was computed from the records this writer was handed, never bytes read
back: the native segment writer (ledger.segment) hashes the Merkle leaves and MACs each block from
the engine's buffer as it writes it. A v2 ledger's seal signs that commitment and the closed
`.open` file becomes the sealed `.rec` by rename (records are never copied in Python); a v1
ledger still keeps the open segment's records in memory to write its Parquet file. Rewriting the
file while a capture runs changes nothing that is signed; after a crash, recovery seals only the
blocks whose MAC verifies.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from .. import fsio
from .._binding import ffi
from ..digest.window import WindowRecord
from ..errors import LedgerFormatError
from ..keyfiles import SigningKey
from ..seal.checkpoint import LinkTree
from . import layout
from .checkpoints import link_tree, write_checkpoint
from .devstate import LedgerMarks
from .header import LedgerHeader
from .index import link_state
from .openmac import OpenSegmentKey
from .sealer import SealResult, SegmentTotals, seal_committed, seal_records
from .segment import SegmentCommitment, SegmentHeader, SegmentWriter, now_ns

#: batch buffers of a writer (`batch_buffer`): the engine fills one while the writer thread writes
#: the others; with them all in flight the next `batch_buffer` waits (backpressure, nothing dropped)
BATCH_BUFFERS = 3


class LinkWriter:
    """Appends records to one link's open segment and seals it when it is due.

    Batches filled into `batch_buffer`s are written (leaves, MACs, write(2)) by a writer thread
    while the caller digests the next batch: the native calls release the GIL, so on two cores a
    batch costs about max(digest, write), not their sum. Any other append is written before it
    returns. Sealing (Parquet, Merkle root, signatures) runs on one background thread (pyarrow,
    hashing and the native calls release the GIL), so segment k is sealed while k + 1 is filled. One
    thread keeps the chain in order; waiting for seal k - 1 before handing over seal k bounds memory
    and surfaces errors early. `sealed` lists the finished seals in chain order. Call `close` in
    every case (it finishes a seal in flight and stops the thread).
    """

    def __init__(
        self,
        ledger_dir: Path,
        ledger: LedgerHeader,
        link: str,
        signing_key: SigningKey,
        *,
        tree: LinkTree,
        next_index: int,
        next_seq: int,
        prev_hash: str,
        source: str,
        segment_records: int,
        segment_seconds: float | None = None,
        marks: LedgerMarks | None = None,
        last_ts_ns: int | None = None,
    ):
        # `link` is a log's name: a link's (per-frame records) or its window log's
        # (layout.window_log: window records, appended with `append_windows`)
        self.window_link = layout.window_log_link(link)
        if self.window_link is not None:
            ledger = ledger.window_view()
        self._window_totals: WindowTally | None = None
        self.ledger_dir = ledger_dir
        self.marks = marks  # the device's protected state: told of every seal and checkpoint
        self.ledger = ledger
        self.link = link
        self.signing_key = signing_key
        self.source = source  # the seals' `source` field
        self.segment_records = segment_records
        self.segment_seconds = segment_seconds
        self.next_index = next_index  # of the segment open now, or of the next one
        self.next_seq = next_seq
        # ts_ns of the last record the link had sealed before this writer (None: none stated)
        self.last_sealed_ts_ns = last_ts_ns
        self.sealed: list[SealResult] = []
        # the chain in memory: each seal extends it and a checkpoint over it is signed right away,
        # so a link never has seals without a checkpoint for longer than one signature
        self._tree = tree
        self._prev_hash = prev_hash  # of the last seal handed to the sealer (set on its thread)
        self._segment: SegmentWriter | None = None
        # v1 ledgers: the open segment's records as appended, for Parquet
        self._records = bytearray()
        self._mac_key = OpenSegmentKey.derive(signing_key, ledger.ledger_id)
        self._opened_at = 0.0  # perf_counter when the open segment was created
        self._created_ns: int | None = None
        self.sealed_records = 0  # records of the seals finished so far (set on the sealer thread)
        self._sealer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledgertool-seal")
        self._pending: list[Future] = []
        self._appender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledgertool-append")
        # batches handed to it, oldest first
        self._writing: deque[tuple[Future, ffi.CData]] = deque()
        # batch buffers not in flight, reused (fresh ones would fault every page)
        self._free: list[ffi.CData] = []
        self._buffers = 0  # batch buffers allocated
        self._handed: ffi.CData | None = None  # the batch buffer handed out and not yet appended
        self._open_records = 0  # records handed to the open segment (written or in flight)

    @classmethod
    def open(
        cls,
        ledger_dir: Path,
        ledger: LedgerHeader,
        link: str,
        signing_key: SigningKey,
        *,
        source: str,
        segment_records: int,
        segment_seconds: float | None = None,
        marks: LedgerMarks | None = None,
    ) -> LinkWriter:
        """A writer continuing the link's chain after its last seal (index.link_state's errors).
        LedgerFormatError when the seals on disk do not form a whole chain: a checkpoint over it
        would cover a gap, so nothing is captured. With the device's protected state `marks`,
        RollbackRefusedError when the storage is behind or beside what the device signed."""
        state = link_state(ledger_dir, ledger, link)
        tree = link_tree(ledger_dir, link)
        if marks is not None:
            marks.check_link(ledger_dir, link, tree)
        if not tree.complete:
            raise LedgerFormatError(
                f"{tree.stopped}: the seal chain of link {link} is broken; nothing was captured "
                "(`ledgertool verify` names what is wrong)"
            )
        return cls(
            ledger_dir,
            ledger,
            link,
            signing_key,
            tree=tree,
            next_index=state.next_index,
            next_seq=state.next_seq,
            prev_hash=state.prev_hash,
            source=source,
            segment_records=segment_records,
            segment_seconds=segment_seconds,
            marks=marks,
            last_ts_ns=state.last_ts_ns,
        )

    # ---- the open segment ----------------------------------------------------------------------

    @property
    def open_index(self) -> int | None:
        """Index of the segment being written, None between segments."""
        return self.next_index if self._segment is not None else None

    @property
    def open_records(self) -> int:
        return self._open_records if self._segment is not None else 0

    def room(self) -> int:
        """Records the open segment still takes. With none open, the next one's creation time is
        taken now: its header says when its filling began, not when its first batch arrived."""
        if self._segment is None:
            self._created_ns = now_ns()
            return self.segment_records
        return self.segment_records - self._open_records

    def batch_buffer(self, nbytes: int) -> ffi.CData:
        """A buffer (cffi uint8_t[]) of at least `nbytes` to fill with the next batch and hand to
        `append(..., batch=it)`; the one handed out last again until it is appended. Waits until the
        writer thread is done with it; raises the error of a write that failed (SegmentWriter's
        StorageError)."""
        if self._handed is not None and len(self._handed) >= nbytes:
            return self._handed
        self._reap(wait=len(self._free) == 0 and self._buffers >= BATCH_BUFFERS)
        while self._free:
            buf = self._free.pop()
            if len(buf) >= nbytes:
                self._handed = buf
                return buf
            self._buffers -= 1  # too small for this batch size: dropped, a larger one replaces it
        self._buffers += 1
        self._handed = ffi.new("uint8_t[]", nbytes)
        return self._handed

    def _reap(self, wait: bool = False) -> None:
        """Collect the writes that finished (with `wait`, at least the oldest), freeing their
        buffers; the first failed write's error is raised here."""
        while self._writing and (wait or self._writing[0][0].done()):
            fut, buf = self._writing.popleft()
            self._free.append(buf)
            wait = False
            fut.result()

    def _wait_writes(self) -> None:
        """Every batch handed over is written (or its error raised)."""
        while self._writing:
            self._reap(wait=True)

    def append(
        self, records: memoryview | bytes, count: int, batch: ffi.CData | None = None
    ) -> None:
        """Append `count` whole records (numbered from next_seq) to the open segment, creating it
        first when none is open (SegmentWriter's errors: StorageError keeps what was written).
        `batch`: the `batch_buffer` that `records` lie in; they are then written on the writer
        thread (its error is raised by a later call) and the buffer must not change until
        `batch_buffer` hands it out again. Otherwise they are written before this returns."""
        if self._segment is None:
            created = self._created_ns if self._created_ns is not None else now_ns()
            self._created_ns = None
            header = SegmentHeader(
                self.ledger.ledger_id,
                self.window_link or self.link,
                self.next_index,
                self.ledger.algorithm,
                self.ledger.strip,
                self.ledger.digest_key_id,
                self.ledger.record_size,
                self.ledger.digest_size,
                self.ledger.leaf_records,
                self.next_seq,
                created,
                self._mac_key.key_id,
                "frames" if self.window_link is None else "windows",
            )
            self._segment = SegmentWriter(
                layout.open_segment_path(self.ledger_dir, self.link, self.next_index),
                header,
                self._mac_key,
                self.ledger_dir,
                self.ledger.leaf_hash,
            )
            self._opened_at = time.perf_counter()
            self._open_records = 0
        if self.ledger.version == 1:
            self._records += memoryview(records)[: count * self.ledger.record_size]  # for Parquet
        if batch is None:
            self._wait_writes()  # in order after what is in flight
            self._segment.append(records, count)  # from the caller's buffer to the file, not copied
        else:
            if batch is self._handed:
                self._handed = None
            self._reap()
            self._writing.append(
                (self._appender.submit(self._segment.append, records, count), batch)
            )
        self._open_records += count
        self.next_seq += count

    def append_windows(self, windows: list[WindowRecord]) -> None:
        """A window log's writer: append window records (in index order) to the open segment, each
        one record of it; the seal states their count, frames, drops and first and last window
        starts (the native counters read per-frame fields, which a window record has not)."""
        if not windows:
            return
        if self._segment is None or self._window_totals is None:
            self._window_totals = WindowTally()
        raw = b"".join(w.serialize() for w in windows)
        self.append(raw, len(windows))
        self._window_totals.add(windows)

    def due(self, records: int, opened_at: float, now: float) -> bool:
        """Whether a segment of `records` records, open since `opened_at` (perf_counter), is to be
        sealed at `now`: it is full, or older than segment_seconds."""
        return records >= self.segment_records or (
            self.segment_seconds is not None and now - opened_at >= self.segment_seconds
        )

    def rotate_if_due(self) -> None:
        """Seal the open segment when it is full or old enough (see `due`)."""
        if self._segment is not None and self.due(
            self._open_records, self._opened_at, time.perf_counter()
        ):
            self.seal()

    def end_segment(self) -> None:
        """Seal the open segment if it holds records, else remove it: nothing stays open."""
        if self._segment is None:
            return
        if self._open_records:
            self.seal()
            return
        self._segment.close()
        fsio.unlink(self._segment.path, root=self.ledger_dir)
        self._segment = None
        self._records = bytearray()

    # ---- sealing and the chain -----------------------------------------------------------------

    def seal(self) -> None:
        """Finish the open segment and hand it to the sealer once the seal before it is done (that
        seal's error is raised here); the sealer closes it (fsync) before it signs."""
        assert self._segment is not None
        self._wait_writes()
        segment, commitment = self._segment, self._segment.finish()
        if self.window_link is not None:
            tally, self._window_totals = self._window_totals, None
            commitment = dataclasses.replace(
                commitment,
                totals=tally.totals(segment.header.first_seq, commitment.totals.merkle_root),
            )
        records, self._records = self._records, bytearray()  # handed over whole, not copied
        self._segment = None
        self.next_index += 1
        try:
            self.drain()
        except BaseException:
            segment.close()
            raise
        self._pending.append(
            self._sealer.submit(self._seal_job, segment, self.next_index - 1, records, commitment)
        )

    def drain(self) -> None:
        """Wait for the seal in flight; its result joins `sealed` (in chain order)."""
        while self._pending:
            self.sealed.append(self._pending.pop(0).result())

    def _seal_job(
        self, segment: SegmentWriter, index: int, records: bytearray, commitment: SegmentCommitment
    ) -> SealResult:
        """On the sealer thread: close the finished segment (its fsync, which would otherwise
        stall the capture thread for a whole segment's writeback) and seal it from memory, never
        read back from its file: a v2 ledger signs the writer's commitment and renames the file
        to seg-N.rec; a v1 ledger writes Parquet from `records` and removes the file. Then extend
        the chain, sign its checkpoint."""
        segment.close()  # durable before anything signs it
        path, first_seq = segment.path, segment.header.first_seq
        if not os.path.lexists(layout.checkpoint_path(self.ledger_dir, self.link)):
            # before a link's first seal (or in a ledger older than per-seal checkpoints): a
            # checkpoint of the chain as it stands, so a link never holds a seal without a
            # checkpoint
            write_checkpoint(
                self.ledger_dir,
                self.ledger,
                self.link,
                self.signing_key,
                self._tree,
                top=False,
                marks=self.marks,
            )
        seal_file = layout.seal_path(self.ledger_dir, self.link, index)
        if self.ledger.version == 2:
            _doc, res = seal_committed(
                ledger_dir=self.ledger_dir,
                ledger=self.ledger,
                link=self.link,
                index=index,
                first_seq=first_seq,
                totals=commitment.totals,
                leaves=commitment.leaves,
                prev_hash=self._prev_hash,
                signing_key=self.signing_key,
                seal_file=seal_file,
                source=self.source,
            )
            fsio.rename(path, layout.segment_name(index, layout.RECORDS), root=self.ledger_dir)
        else:
            _doc, res = seal_records(
                ledger_dir=self.ledger_dir,
                ledger=self.ledger,
                link=self.link,
                index=index,
                first_seq=first_seq,
                records=records,
                prev_hash=self._prev_hash,
                signing_key=self.signing_key,
                parquet=layout.parquet_path(self.ledger_dir, self.link, index),
                seal_file=seal_file,
                source=self.source,
            )
            fsio.unlink(path, root=self.ledger_dir)
        # the seal is durable: the device never signs another seal `index`
        if self.marks is not None:
            self.marks.sealed(self.link, index, res.seal_hash, res.last_seq)
        self._prev_hash = res.seal_hash
        self._tree.seal_hashes.append(res.seal_hash)
        self._tree.records.append(res.records)
        write_checkpoint(
            self.ledger_dir,
            self.ledger,
            self.link,
            self.signing_key,
            self._tree,
            top=False,
            marks=self.marks,
        )
        # only this thread writes it; readers see the old or new int
        self.sealed_records += res.records
        return res

    def checkpoint(self) -> Path:
        """Sign the checkpoint over the chain as sealed so far, also as DIR/checkpoint while the
        ledger has one link (checkpoints.write_checkpoint's errors). Call after `drain`."""
        # DIR/checkpoint speaks for a one-link ledger's per-frame log only
        return write_checkpoint(
            self.ledger_dir,
            self.ledger,
            self.link,
            self.signing_key,
            self._tree,
            top=self.window_link is None,
            marks=self.marks,
        )

    def sealed_range(self) -> str | None:
        """'segments 3..7' for the seals finished so far, None before the first."""
        return f"segments {self.sealed[0].index}..{self.sealed[-1].index}" if self.sealed else None

    def close(self) -> None:
        """Finish a seal still in flight (its error is dropped: this runs while another error is on
        its way out) and stop the writer and sealer threads. A segment left open stays for
        `ledgertool recover`."""
        try:
            try:
                self._wait_writes()
            except Exception:  # noqa: BLE001 - as below
                self._writing.clear()
            self._appender.shutdown(wait=True)
            if self._pending:
                try:
                    self.drain()
                except Exception:  # noqa: BLE001 - the first error is the one reported
                    pass
        finally:
            self._sealer.shutdown(wait=True)


class WindowTally:
    """What a window segment's seal states, tallied as its records are appended: `records` the
    windows, `frames` and `drops_declared` their sums, the sequence range the windows' ordinals in
    the log, `first_ts_ns` / `last_ts_ns` the first and last window's start."""

    def __init__(self) -> None:
        self.records = self.frames = self.drops = 0
        self.first_start: int | None = None
        self.last_start: int | None = None

    def add(self, windows: list[WindowRecord]) -> None:
        self.records += len(windows)
        self.frames += sum(w.frames for w in windows)
        self.drops += sum(w.drops for w in windows)
        if self.first_start is None:
            self.first_start = windows[0].start_ns
        self.last_start = windows[-1].start_ns

    @classmethod
    def of(cls, records: bytes, record_size: int) -> WindowTally:
        """The tally of window records as a segment holds them (`record_size` bytes each):
        recovery's, from the authenticated records of an open window segment."""
        tally = cls()
        windows = [
            WindowRecord.parse(records[at : at + record_size])
            for at in range(0, len(records), record_size)
        ]
        if windows:
            tally.add(windows)
        return tally

    def totals(self, first_seq: int, root: bytes) -> SegmentTotals:
        return SegmentTotals(
            self.records,
            self.frames,
            self.drops,
            first_seq + self.records - 1,
            self.first_start,
            self.last_start,
            root,
        )
