"""recompute on a Dask cluster (docs/cluster.md, "recompute on a cluster"): the report of
ledgertool.reconcile.recompute.reconcile, computed as a partitioned multiset comparison.

Every frame pairs only with frames of the same digest, so the digests are split into `parts`
partitions by their first two bytes (keyed MACs: uniform), and each partition is paired and
tallied on its own, by the same engine as on one machine (pairing.pair_records).
 - ledger side: one task per sealed segment runs verify's per-segment checks
   (ledgertool.verify.cluster) and splits the records it checked, gap records left out, by
   partition; the client reduces the verdicts (verify_ledger) and reconciles only a ledger that
   verified, so every record paired is one whose bytes were checked;
 - capture side: one task per capture file, or per chunk of a large classic pcap or pcapng file
   cut at record boundaries (pcapng: before a packet block; the client finds them with the
   native reader, which also names the section header and interface descriptions a pcapng chunk
   is read behind), digests with the native engine and splits the digests by partition; frame
   indexes are the chunk's own, shifted on the partition's worker by the frames of the chunks
   before it;
 - one task per partition pairs and tallies; the client adds the counts up and takes the first
   examples and --details rows in the single-machine order (each partition returns its own
   first ones in that order, so the first overall are among them).

Before any of this, as on one machine, the fast verdict (docs/adr/0011): the client draws a
multiset hash key (msethash.new_key) and sends it with the tasks as an argument; the ledger tasks
check their segments and hash the frame records they read (check_and_hash), the capture tasks
digest their chunk without keeping a record and hash it (hash_chunk), and each returns a few
hundred bytes. Equal merged hashes and counts (every segment under the key given, no chunk
stopped early, no window) mean every frame matched: the report comes from the ledger side's
counts and nothing is partitioned. Otherwise the partitioned pairing above runs from the start,
reading both sides again, and reports what differs.

Needs the `cluster` extra (dask, distributed). One digest key per run (a ledger whose digest key
was rotated is reconciled with all its keys on one machine); `workload:` specs and URLs are not
split (one task each).
"""

from __future__ import annotations

import errno
import operator
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from distributed import CancelledError, Client, Future, KilledWorker
from distributed import TimeoutError as DaskTimeoutError

from .. import fsio
from .._binding import ffi, lib
from ..algorithms import get_algorithm, get_strip_mode
from ..digest.engine import DigestEngine
from ..digest.record import FLAG_GAP, RECORD_FIXED, RecordSink, record_dtype
from ..digest.strip import StripFallbacks
from ..errors import CaptureFormatError, ClusterError, LedgerFormatError, UsageError
from ..keyfiles import DigestKey, TrustBundle
from ..ledger.opened import OpenLedger, open_ledger
from ..ledger.reader import LedgerReader, LinkListing
from ..source import is_workload, open_source
from ..source.compressed import PIPE_BYTES, capture_pipe, read_head
from ..source.file import FORMAT_NAMES, STDIN, CaptureReader, stream_reader
from ..urls import is_url
from ..verify.chain import SegmentCheck
from ..verify.checks import SegmentPlace
from ..verify.cluster import (
    LedgerContext,
    SegmentBatch,
    checked_segments,
    cluster_threads,
    ordered_results,
    segment_part,
    task_batches,
    verdict_only,
)
from ..verify.ledger import verify_ledger
from .details import DETAILS_ORDER, write_details
from .limits import DEFAULT_MEMORY_LIMIT, check_memory_limit
from .msethash import MultisetHash, new_key
from .msethash import accelerated as mset_accelerated
from .multiset import (
    LedgerPart,
    Tally,
    byte_rows,
    concat_records,
    ledger_rows,
    merge_tallies,
    second_counts,
)
from .pairing import pair_records
from .query import not_verified_error, open_duckdb
from .recompute import check_request
from .result import (
    DigestRun,
    ReadStop,
    ReconcileResult,
    add_warnings,
    make_result,
    matched_counts_tally,
)
from .segments import Segment, match_keys
from .sources import Sources, file_bytes, source_list, source_name

__all__ = ["CaptureChunk", "plan_chunks", "reconcile_on_cluster"]

PARTS_PER_WORKER = 2
# about 1 GiB per partition task: 48-64 bytes a record on each side, its sort and the masks
PART_RECORDS = 8_000_000
MIN_RECORD_BYTES = 16 + 60  # a pcap record header and the smallest Ethernet frame without FCS
MAX_PARTS = 65536  # partition = first two digest bytes * parts >> 16
# a pcap or pcapng file larger than this is cut into chunks of about this size
SPLIT_BYTES = 256 << 20
SCAN_BATCH = 65536  # frames per native reader call while the client finds the cut points
PCAP_FORMATS = {
    FORMAT_NAMES[f] for f in (lib.LT_FMT_PCAP_US, lib.LT_FMT_PCAP_NS, lib.LT_FMT_PCAP_MODIFIED)
}
PCAPNG = FORMAT_NAMES[lib.LT_FMT_PCAPNG]
SPLIT_FORMATS = PCAP_FORMATS | {PCAPNG}  # the capture files cut into chunks
PCAP_HEADER = 24  # classic pcap global header: copied in front of every chunk
MODIFIED_PCAP = FORMAT_NAMES[
    lib.LT_FMT_PCAP_MODIFIED
]  # (Kuznetzov's: 24-byte record headers, not 16)


# ---- partitions ----


def partition_of(arr: np.ndarray, parts: int) -> np.ndarray:
    """The partition (0..parts-1) of each record of `arr` (record_dtype): its digest's first two
    bytes, big-endian, scaled to `parts`."""
    if not len(arr):
        return np.zeros(0, np.uint32)
    arr = np.ascontiguousarray(arr)
    off = arr.dtype.fields["digest"][1]
    head = np.ndarray(
        (len(arr), 2), np.uint8, buffer=arr, offset=off, strides=(arr.dtype.itemsize, 1)
    )
    return ((head[:, 0].astype(np.uint32) << 8 | head[:, 1]) * parts) >> 16


def split_by_partition(arr: np.ndarray, parts: int) -> tuple[np.ndarray, ...]:
    """`arr`'s records in `parts` arrays by partition, each in its original order: views of one
    new array in partition order (one gather of byte rows; a structured gather is ~4x slower)."""
    if parts == 1:
        return (arr,)
    # 16-bit keys: numpy's stable sort is a radix sort
    pid = partition_of(arr, parts).astype(np.uint16)
    order = np.argsort(pid, kind="stable")
    bounds = np.cumsum(np.bincount(pid, minlength=parts))[:-1]
    rows = np.take(byte_rows(arr), order, axis=0)
    return tuple(np.split(rows.view(arr.dtype).reshape(len(arr)), bounds))


# ---- ledger side ----


def check_and_split(
    ctx: LedgerContext, part: LinkListing, indexes: Sequence[int], parts: int
) -> tuple[SegmentBatch, tuple[tuple[LedgerPart, ...], ...]]:
    """On a worker: consecutive segments' checks (a SegmentBatch of verdicts, without records)
    and, for each partition, the records whose bytes those checks read (gap records left out):
    one LedgerPart per run of segments under one digest key id, in segment order, views of one
    array per run in partition order."""
    checks, runs = [], []  # runs: [digest key id, [record arrays]]
    try:
        for check in checked_segments(ctx, part, indexes):
            checks.append(verdict_only(check))
            recs = check.records
            # (a v2 raw record file has no table)
            if recs is None or recs.records is None or check.seal.layout is None:
                continue
            arr = np.frombuffer(
                recs.records, dtype=record_dtype(check.seal.layout[0] - RECORD_FIXED)
            )
            gaps = (arr["flags"] & FLAG_GAP) != 0
            if gaps.any():  # (a copy only then, as on one machine)
                arr = arr[~gaps]
            kid = check.seal.doc.digest_key_id
            if runs and runs[-1][0] == kid and runs[-1][1][0].dtype == arr.dtype:
                runs[-1][1].append(arr)
            else:
                runs.append([kid, [arr]])
    except Exception as e:  # noqa: BLE001 -- raised on the client after the checks before it (ordered_results)
        return SegmentBatch(checks, e), tuple(() for _ in range(parts))
    split = [
        (
            kid,
            split_by_partition(
                arrs[0] if len(arrs) == 1 else concat_records(arrs, arrs[0].dtype), parts
            ),
        )
        for kid, arrs in runs
    ]
    return SegmentBatch(checks), tuple(
        tuple(LedgerPart(part.link, kid, by[p]) for kid, by in split) for p in range(parts)
    )


def _partition_item(result: tuple, p: int):
    """Partition `p` of a task's (head, partitions) result."""
    return result[1][p]


class _SegmentTasks:
    """A SegmentChecker (ledgertool.verify.ledger) whose tasks (one per run of consecutive
    segments, verify.cluster.task_batches) return (SegmentBatch, something more): the verdicts go
    to verify's reduction on the client, the rest stays in `both`'s futures for `_more` to take;
    `segments` are the segments whose records were read, in (link, segment) order (after a verify
    without problems: every sealed segment)."""

    prefix = "ledgertool-recompute"

    def __init__(self, client: Client):
        self.client = client
        self.segments: list[Segment] = []
        self.futures: list[Future] = []

    def _task(self, ctx: LedgerContext, part: LinkListing, indexes: list[int], key: str) -> Future:
        raise NotImplementedError

    def _more(self, both: Future) -> None:
        raise NotImplementedError

    def __call__(
        self, reader: LedgerReader, listing: LinkListing, places: list[SegmentPlace]
    ) -> Iterator[SegmentCheck]:
        if not places:
            return iter(())
        first = places[0]
        ctx = LedgerContext(str(reader.directory), first.ledger, first.sched)
        run = uuid.uuid4().hex
        verdicts = []
        for batch in task_batches(places, cluster_threads(self.client)):
            indexes = [p.index for p in batch]
            both = self._task(
                ctx,
                segment_part(listing, indexes),
                indexes,
                f"{self.prefix}-{run}-{first.link}-{indexes[0]}",
            )
            verdicts.append((indexes, self.client.submit(operator.getitem, both, 0, pure=False)))
            self._more(both)
            self.futures.append(both)
        self.futures += [f for _, f in verdicts]
        return self._taken(ordered_results(verdicts, reader.directory, listing.link), listing.link)

    def _taken(self, checks: Iterator[SegmentCheck], link: str) -> Iterator[SegmentCheck]:
        for check in checks:
            if check.records is not None and check.seal.doc is not None:
                self.segments.append(Segment.of_seal(link, check.seal.index, check.seal.doc))
            yield check


class SplittingChecker(_SegmentTasks):
    """_SegmentTasks whose tasks (check_and_split) also split the checked records by partition:
    the partitions stay on the workers (`ledger_parts[p]`, one future per task, each a tuple of
    LedgerParts)."""

    def __init__(self, client: Client, parts: int):
        super().__init__(client)
        self.parts = parts
        self.ledger_parts: list[list[Future]] = [[] for _ in range(parts)]

    def _task(self, ctx: LedgerContext, part: LinkListing, indexes: list[int], key: str) -> Future:
        return self.client.submit(
            check_and_split, ctx, part, indexes, self.parts, pure=False, key=key
        )

    def _more(self, both: Future) -> None:
        for k in range(self.parts):
            self.ledger_parts[k].append(self.client.submit(_partition_item, both, k, pure=False))

    def all_futures(self) -> list[Future]:
        return self.futures + sum(self.ledger_parts, [])


@dataclass(frozen=True)
class LedgerSums:
    """What a ledger task of the fast verdict returns besides its verdicts (a few hundred bytes,
    whatever the records): for the segments it checked, their frame records' multiset hash under
    the run's key, per digest key id as the seals state it (`hashes`: (key id, value, count), in
    segment order of first appearance), and their frames per second (ts_ns // 10^9). Gap records
    are left out of both. `odd`: some segment's records are not of the algorithm's digest size
    (they are not hashed: the fast verdict then decides nothing)."""

    link: str
    hashes: tuple[tuple[object, int, int], ...] = ()
    seconds: dict[int, int] = field(default_factory=dict)
    odd: bool = False


def check_and_hash(
    ctx: LedgerContext, part: LinkListing, indexes: Sequence[int], mkey: bytes, digest_size: int
) -> tuple[SegmentBatch, LedgerSums]:
    """On a worker: consecutive segments' checks (a SegmentBatch of verdicts, without records)
    and the LedgerSums of the records whose bytes those checks read, hashed under `mkey` (the
    run's multiset hash key) as each segment is checked: no segment's records outlive its check."""
    checks, hashes, seconds, odd = [], [], {}, False  # hashes: [digest key id, MultisetHash]
    try:
        for check in checked_segments(ctx, part, indexes):
            checks.append(verdict_only(check))
            recs = check.records
            # (as check_and_split)
            if recs is None or recs.records is None or check.seal.layout is None:
                continue
            if check.seal.layout[0] - RECORD_FIXED != digest_size:
                odd = True
                continue
            arr = np.frombuffer(recs.records, dtype=record_dtype(digest_size))
            kid = check.seal.doc.digest_key_id
            for k, h in hashes:  # noqa: B007 (h: the hash found, used after the loop) (a key id is any JSON value a seal states: compared, not hashed)
                if k == kid and type(k) is type(kid):
                    break
            else:
                h = MultisetHash(mkey, digest_size)
                hashes.append((kid, h))
            h.add(arr)  # (gap records are skipped there and below: no copy without them)
            second_counts(arr, FLAG_GAP, into=seconds)
    except Exception as e:  # noqa: BLE001 -- raised on the client after the checks before it (ordered_results)
        return SegmentBatch(checks, e), LedgerSums(part.link)
    return SegmentBatch(checks), LedgerSums(
        part.link, tuple((k, *h.state()) for k, h in hashes), seconds, odd
    )


class HashingChecker(_SegmentTasks):
    """_SegmentTasks whose tasks (check_and_hash) also hash the checked records under `mkey`:
    `sums` holds one future of a LedgerSums per task (small: taken by the client)."""

    prefix = "ledgertool-recompute-fast"

    def __init__(self, client: Client, mkey: bytes, digest_size: int):
        super().__init__(client)
        self._mkey = (
            mkey  # (an argument of the tasks, never part of their keys: those are on the dashboard)
        )
        self.digest_size = digest_size
        self.sums: list[Future] = []

    def _task(self, ctx: LedgerContext, part: LinkListing, indexes: list[int], key: str) -> Future:
        return self.client.submit(
            check_and_hash, ctx, part, indexes, self._mkey, self.digest_size, pure=False, key=key
        )

    def _more(self, both: Future) -> None:
        self.sums.append(self.client.submit(operator.getitem, both, 1, pure=False))

    def all_futures(self) -> list[Future]:
        return self.futures + self.sums

    def __repr__(self) -> str:  # the key stays out of logs and tracebacks
        return f"HashingChecker({len(self.sums)} tasks)"


# ---- capture side ----


@dataclass(frozen=True)
class CaptureChunk:
    """What one capture task digests: a whole source, or the blocks in bytes [start, end) of a
    file cut by plan_chunks (`end` 0: the whole source), read behind `head`, the (offset,
    length) byte ranges of the source that a reader needs in front of them (a classic pcap: its
    global header; pcapng: the section header and the interface descriptions in force at
    `start`; none for a first pcapng chunk, which starts at 0). `note`: the source's truncation
    warning, carried by its last chunk (a cut source's tail is found by the client)."""

    source: str
    start: int = 0
    end: int = 0
    note: str | None = None
    head: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class ChunkRun:
    frames: int
    bytes: int
    warnings: tuple[str, ...] = ()
    stopped: ReadStop | None = None  # the chunk's source could not be read past this point
    fallbacks: StripFallbacks = StripFallbacks()


def plan_chunks(
    sources: Sources, split_bytes: int = SPLIT_BYTES
) -> tuple[list[CaptureChunk], ReadStop | None]:
    """The capture tasks of a run, in frame order, and where reading stopped early. A classic
    pcap or a pcapng file over `split_bytes` bytes is cut before the record (pcap) or packet
    block (pcapng: EPB, SPB, obsolete PB) nearest at or above every multiple of `split_bytes`
    (the native reader gives the offsets, and for pcapng the section header and interface
    descriptions each chunk needs in front); it is read here to find them, so a corrupt record or
    block ends its last chunk and the run there, as on one machine (the captures after it are not
    read). Other sources are one task each (a corrupt structure found by its task ends the run at
    that chunk). CaptureFormatError for a capture that cannot be opened."""
    chunks: list[CaptureChunk] = []
    for source in map(str, source_list(sources)):
        if is_workload(source) or is_url(source):  # a URL is streamed whole by its task
            chunks.append(CaptureChunk(source))
            continue
        with CaptureReader(source) as reader:
            info = reader.info()
            if info.format not in SPLIT_FORMATS or info.file_size <= split_bytes:
                chunks.append(CaptureChunk(source))
                continue
            cut, stop = (_cut_pcapng if info.format == PCAPNG else _cut)(
                reader, source, split_bytes
            )
            chunks += cut
            if stop is not None:
                return chunks, stop
    return chunks, None


def _read_stop(reader: CaptureReader, source: str, st: int) -> ReadStop:
    """Where and why reading `source` failed with status `st`."""
    try:
        reader.raise_error(st)
    except CaptureFormatError as e:
        return ReadStop(e.path or source, e.offset, str(e))
    # (raise_error raises for every error status)
    raise AssertionError(f"status {st} raised nothing")


def _chunks_to(
    source: str,
    reader: CaptureReader,
    cuts: list[tuple[int, tuple[tuple[int, int], ...]]],
    end: int,
    stop: ReadStop | None,
) -> tuple[list[CaptureChunk], ReadStop | None]:
    """`source`'s chunks from (start, head) cut points in file order up to byte `end`, the last
    carrying the truncation note (none when reading stopped at a corrupt structure)."""
    cuts = [c for c in cuts if c[0] < end]
    chunks = [
        CaptureChunk(source, a, b, None, head)
        for (a, head), (b, _) in zip(cuts, cuts[1:] + [(end, ())])
    ]
    if not chunks:
        return ([CaptureChunk(source)] if stop is None else []), stop
    last = chunks[-1]
    chunks[-1] = CaptureChunk(
        last.source,
        last.start,
        last.end,
        None if stop else reader.info().truncation_note(),
        last.head,
    )
    return chunks, stop


def _cut(
    reader: CaptureReader, source: str, split_bytes: int
) -> tuple[list[CaptureChunk], ReadStop | None]:
    """`source`'s chunks, and where a corrupt record stopped reading (its chunks end at the last
    whole record before it): every record's header offset is read, none of its bytes copied."""
    buf = ffi.new("lt_frame[]", SCAN_BATCH)
    n = ffi.new("size_t *")
    starts = []
    stop, good_end = None, PCAP_HEADER
    record_header = 24 if reader.info().format == MODIFIED_PCAP else 16
    while True:
        st = lib.lt_reader_next(reader.handle, buf, SCAN_BATCH, n)
        got = n[0]
        if got:  # the end of the last record read: where the chunks end if a corrupt one follows
            good_end = int(buf[got - 1].offset) + record_header + int(buf[got - 1].caplen)
        while got and buf[got - 1].offset >= len(starts) * split_bytes:
            lo, hi, want = 0, got - 1, max(len(starts) * split_bytes, PCAP_HEADER)
            while lo < hi:  # the first record of this batch at or after `want`
                mid = (lo + hi) // 2
                lo, hi = (mid + 1, hi) if buf[mid].offset < want else (lo, mid)
            starts.append(int(buf[lo].offset))
        if st == lib.LT_EOF:
            break
        if st != lib.LT_OK:
            stop = _read_stop(reader, source, st)
            break
    info = reader.info()
    end = (
        good_end
        if stop is not None
        else info.truncated_offset
        if info.truncated
        else info.file_size
    )
    head = ((0, PCAP_HEADER),)
    return _chunks_to(source, reader, [(b, head) for b in sorted(set(starts))], end, stop)


def _cut_pcapng(
    reader: CaptureReader, source: str, split_bytes: int
) -> tuple[list[CaptureChunk], ReadStop | None]:
    """A pcapng `source`'s chunks, and where a corrupt block stopped reading: the native reader
    pauses before the first packet block at or past each multiple of `split_bytes`
    (lt_reader_next_before) and names the section header and interface descriptions in force
    there (lt_reader_pcapng_context); the chunks end where reading ended (the corrupt or cut-short
    block, whose blocks before it all read well). No block's bytes are copied here."""
    h = reader.handle
    buf = ffi.new("lt_frame[]", SCAN_BATCH)
    n, paused, nxt = ffi.new("size_t *"), ffi.new("int *"), ffi.new("uint64_t *")
    ranges = ffi.new("uint64_t[]", 2 * 64)
    cuts: list[tuple[int, tuple[tuple[int, int], ...]]] = [(0, ())]
    frames, stop, before = 0, None, split_bytes
    while True:
        st = lib.lt_reader_next_before(h, buf, SCAN_BATCH, before, n, paused)
        frames += n[0]
        if st == lib.LT_OK and paused[0]:
            while lib.lt_reader_pcapng_context(h, ranges, len(ranges) // 2, n, nxt) != lib.LT_OK:
                ranges = ffi.new("uint64_t[]", 2 * n[0])  # (a section with many interfaces)
            at = int(nxt[0])
            if frames:  # (a first chunk without frames is no chunk: the first one starts at 0)
                cuts.append((at, _merged(ranges, n[0])))
            before = (at // split_bytes + 1) * split_bytes
            continue
        if st == lib.LT_EOF:
            break
        if st != lib.LT_OK:
            stop = _read_stop(reader, source, st)
            break
    lib.lt_reader_pcapng_context(h, ffi.NULL, 0, n, nxt)  # (LT_ERR_ARG: only *next is wanted)
    return _chunks_to(source, reader, cuts, int(nxt[0]), stop)


def _merged(ranges, count: int) -> tuple[tuple[int, int], ...]:
    """`count` (offset, length) pairs with adjacent ones joined (an SHB and the IDBs after it are
    one range)."""
    out: list[list[int]] = []
    for i in range(count):
        off, length = int(ranges[2 * i]), int(ranges[2 * i + 1])
        if out and out[-1][0] + out[-1][1] == off:
            out[-1][1] += length
        else:
            out.append([off, length])
    return tuple((a, b) for a, b in out)


@contextmanager
def _chunk_reader(chunk: CaptureChunk) -> Iterator:
    """A reader of `chunk`: the source itself, or a stream reader (native lt_reader_open_fd) of a
    pipe that a thread fills with the chunk's `head` ranges and then its bytes (_RangePump: the
    native file reader maps whole files; a temporary copy cost ~60 ns a 64-byte frame in fresh
    page-cache pages). LedgerFormatError when the source is shorter than when it was cut."""
    if not chunk.end:
        with open_source(chunk.source) as reader:
            yield reader
        return
    pump = _RangePump(chunk.source, chunk.head + ((chunk.start, chunk.end - chunk.start),))
    pump.start()
    try:
        try:
            reader = stream_reader(
                pump.read_fd, read_head(pump.read_fd), chunk.source, chunk.source
            )
        except CaptureFormatError:
            pump.join(5.0)  # (the native open closed the read end: the pump ends at its next write)
            if pump.error is not None:  # (its bytes ended early: the source is not what was cut)
                raise pump.error from None
            raise
        with reader:
            yield reader
    finally:
        pump.join()
    if pump.error is not None:
        raise pump.error


class _RangePump(threading.Thread):
    """Byte ranges [(offset, length), ...] of file `source` spliced, in order, into the write
    end of a new pipe (`read_fd` is its read end, for a stream reader, which owns it): the kernel
    moves page-cache pages into the pipe, nothing is copied here. `error`: a LedgerFormatError
    once the file ended early or could not be read, set before the write end is closed. A reader
    that closes the read end early simply ends the thread."""

    def __init__(self, source: str, ranges: tuple[tuple[int, int], ...]):
        super().__init__(name="chunk pump", daemon=True)
        self.source = source
        self.ranges = ranges
        self.error: LedgerFormatError | None = None
        self._src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
        self.read_fd, self._write_fd = capture_pipe()

    def run(self) -> None:
        at = 0
        try:
            for start, length in self.ranges:
                at, left = start, length
                while left:
                    got = _splice(self._src, self._write_fd, min(left, PIPE_BYTES), at)
                    if not got:
                        self.error = LedgerFormatError(
                            f"{self.source}: shorter than when it was cut (at byte {at})"
                        )
                        return
                    at, left = at + got, left - got
        except BrokenPipeError:
            pass  # the reader stopped reading
        except OSError as e:
            self.error = LedgerFormatError(
                f"{self.source}: read error at byte {at}: {e.strerror or e}"
            )
        finally:
            os.close(self._write_fd)
            os.close(self._src)


def _splice(src: int, dst: int, count: int, offset: int) -> int:
    """Up to `count` bytes of file `src` from `offset` written to pipe `dst`: spliced where the
    kernel can, else read and written (then all of them, unless the file ends first)."""
    if hasattr(os, "splice"):
        try:
            return os.splice(src, dst, count, offset_src=offset)
        except OSError as e:
            if e.errno not in (
                errno.EINVAL,
                errno.ENOSYS,
            ):  # (a file system splice does not read from)
                raise
    data = os.pread(src, count, offset)
    view = memoryview(data)
    while view:
        view = view[os.write(dst, view) :]
    return len(data)


def _digest_chunk(
    chunk: CaptureChunk,
    subkey: bytes,
    alg,
    strip: str,
    sink: RecordSink | None,
    each: Callable[[np.ndarray], object] | None = None,
) -> ChunkRun:
    """Every frame of `chunk` digested with the native engine (one thread): into `sink`'s array
    (`seq` the frame's index within the chunk), or, `sink` None, into the engine's own reused
    buffer; `each` gets every batch's records (a view valid until the next batch)."""
    dtype = record_dtype(alg.digest_size)
    frames, nbytes, stopped = 0, 0, None
    with _chunk_reader(chunk) as reader:
        engine = DigestEngine(reader, alg, get_strip_mode(strip), subkey, workers=1)
        while True:
            try:
                records, n, got = engine.fill(frames, out=sink.room() if sink else None)
            # (a whole source: a cut chunk's records were all read by the client)
            except CaptureFormatError as e:
                stopped = ReadStop(e.path or chunk.source, e.offset, str(e))
                break
            if n == 0:
                break
            if sink:
                sink.n += n
            if each is not None:
                each(np.frombuffer(records, dtype=dtype, count=n))
            frames += n
            nbytes += got
        note = reader.info().truncation_note() if not chunk.end else chunk.note
        fallbacks = engine.strip_fallbacks()
    return ChunkRun(frames, nbytes, (note,) if note else (), stopped, fallbacks)


def digest_chunk(
    chunk: CaptureChunk, subkey: bytes, algorithm: str, strip: str, parts: int
) -> tuple[ChunkRun, tuple[np.ndarray, ...]]:
    """On a worker: every frame of `chunk` digested with the native engine (one thread), the
    records split by partition (`seq` is the frame's index within the chunk)."""
    alg = get_algorithm(algorithm)
    # the engine fills one array in place (room for 64 bytes a frame: a pcap has at least 76)
    sink = RecordSink(
        record_dtype(alg.digest_size),
        (chunk.end - chunk.start if chunk.end else file_bytes(chunk.source)) // 64,
    )
    run = _digest_chunk(chunk, subkey, alg, strip, sink)
    return run, split_by_partition(sink.records(), parts)


def hash_chunk(
    chunk: CaptureChunk, subkey: bytes, algorithm: str, strip: str, mkey: bytes
) -> tuple[ChunkRun, int, int]:
    """On a worker, for the fast verdict: every frame of `chunk` digested with the native engine
    (one thread, its own buffer: no record is kept) and added to a multiset hash under `mkey`;
    returns (the chunk's run, the hash's value, its count)."""
    alg = get_algorithm(algorithm)
    h = MultisetHash(mkey, alg.digest_size)
    run = _digest_chunk(chunk, subkey, alg, strip, None, h.add)
    return run, h.value, h.count


# ---- partitions: pair and tally ----


@dataclass(frozen=True)
class PartitionJob:
    """What every partition task needs besides its records."""

    ledger: str
    kids: tuple[str, ...]
    segments: tuple[Segment, ...]
    uncovered: tuple[dict, ...]
    from_ns: int | None
    to_ns: int | None
    tolerance_ns: int
    examples: int
    details_limit: int  # 0: no details
    memory_limit: str
    digest_size: int


@dataclass(frozen=True)
class PartitionTally:
    tally: Tally
    details: pa.Table | None = None  # its first differing rows in DETAILS_ORDER


def tally_partition(
    job: PartitionJob, offsets: list[int], ledger_parts: list, capture_parts: list
) -> PartitionTally:
    """On a worker: pair and tally one partition as recompute does on one machine
    (pairing.pair_records: the digests found once on each side are matched in C, only the
    others go through DuckDB's exact pairing), and its first --details rows. `ledger_parts`: one
    tuple of LedgerParts per ledger task; `capture_parts`: one record array per capture chunk."""
    ledger_side = ledger_rows(
        [lp for batch in ledger_parts for lp in batch], job.kids[0], job.digest_size
    )
    capture = _capture_rows(job, offsets, capture_parts)
    tmp = tempfile.mkdtemp(prefix="ledgertool-partition-")
    con = _partition_connection(job.memory_limit, tmp)
    try:
        t = pair_records(
            con,
            job.kids[0],
            list(job.segments),
            list(job.uncovered),
            ledger_side,
            capture,
            (job.from_ns, job.to_ns, job.tolerance_ns),
            job.examples,
        )
        rows = None
        if job.details_limit:
            rows = con.sql(f"""
                SELECT status, digest, link, seq, l_ts, l_wire, index, c_ts, c_wire, cap_len
                FROM j WHERE status <> 'matched' ORDER BY {DETAILS_ORDER}
                LIMIT {int(job.details_limit)}""").to_arrow_table()
        return PartitionTally(t, rows)
    except duckdb.Error as e:
        raise LedgerFormatError(
            f"{job.ledger}: reconciliation failed reading the ledger: {str(e).splitlines()[0]}"
        ) from None
    finally:
        con.close()
        shutil.rmtree(tmp, ignore_errors=True)


_worker_duckdb = threading.local()


def _partition_connection(memory_limit: str, temp_directory: str):
    """A new DuckDB connection for one partition task, with its own temporary tables, to a
    database kept per worker thread: opening a database costs ~40 ms of CPU, a connection to an
    open one ~0.5 ms. The limits are the database's, set for each task (a thread runs one task at
    a time). UsageError for a bad `memory_limit`."""
    db = getattr(_worker_duckdb, "db", None)
    if db is None:
        db = _worker_duckdb.db = open_duckdb()
    con = db.cursor()
    try:
        # the pairing's views (recompute: CREATE VIEW c, l) are the database's, not the
        # connection's: those an earlier task left are dropped (its temporary tables went with it)
        left = con.execute("""
            SELECT 'VIEW', view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary
            UNION ALL SELECT 'TABLE', table_name FROM duckdb_tables() WHERE NOT temporary""")
        for kind, name in left.fetchall():
            con.execute(f'DROP {kind} IF EXISTS "{name.replace(chr(34), chr(34) * 2)}"')
        con.execute("SET enable_progress_bar = false")
        con.execute("SET memory_limit = ?", [memory_limit])
        con.execute("SET temp_directory = ?", [temp_directory])
    except duckdb.Error as e:
        con.close()
        raise UsageError(str(e).splitlines()[0]) from None
    return con


def _capture_rows(job: PartitionJob, offsets: list[int], capture_parts: list) -> np.ndarray:
    """The partition's capture rows, `seq` the frame's index in the whole capture."""
    if not capture_parts:
        return np.zeros(0, record_dtype(job.digest_size))
    if len(capture_parts) == 1 and offsets[0] == 0:  # one chunk: its rows as they are
        return capture_parts[0]
    rows = concat_records(capture_parts, capture_parts[0].dtype)
    at = 0
    for base, a in zip(offsets, capture_parts):
        if base:
            rows["seq"][at : at + len(a)] += np.uint64(base)
        at += len(a)
    return rows


# ---- the run ----


@dataclass
class _Run:
    """The futures of one run (all released when it ends)."""

    client: Client
    futures: list[Future] = field(default_factory=list)
    checkers: list[_SegmentTasks] = field(default_factory=list)

    def submit(self, fn, *args) -> Future:
        f = self.client.submit(fn, *args, pure=False)
        self.futures.append(f)
        return f

    def release(self) -> None:
        """Cancel every future of the run (tasks still running, results still held)."""
        self.client.cancel(self.futures + [f for c in self.checkers for f in c.all_futures()])

    def take(self, futures: list[Future], what: str) -> list:
        """Every result, in order; a lost task is the run's ClusterError (never a partial
        report)."""
        out = []
        for i, f in enumerate(futures):
            try:
                out.append(f.result())
            except KilledWorker as e:
                raise ClusterError(
                    f"{what} {i}: the cluster lost it (workers died running it: {e}); no report"
                ) from None
            except (CancelledError, OSError, DaskTimeoutError) as e:
                raise ClusterError(
                    f"{what} {i}: the cluster did not return it ({type(e).__name__}: {e}); "
                    "no report"
                ) from None
        return out


def reconcile_on_cluster(
    client: Client,
    source: Sources,
    ledger_dir: Path | OpenLedger,
    digest_key: DigestKey | Sequence[DigestKey],
    *,
    trust: TrustBundle | None = None,
    checkpoint: bytes | None = None,
    checkpoint_name: str = "checkpoint",
    examples: int = 10,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    from_ns: int | None = None,
    to_ns: int | None = None,
    tolerance_ns: int = 0,
    links: list[str] | None = None,
    details: Path | None = None,
    details_limit: int = 100_000,
    parts: int = 0,
    split_bytes: int = SPLIT_BYTES,
    exact: bool = False,
) -> ReconcileResult:
    """`recompute.reconcile` with the work on `client`'s cluster (module doc): the same report,
    the same errors, and ClusterError when the cluster loses a task. `parts`: partitions of the
    comparison (0: default_parts); `memory_limit` is each partition's DuckDB limit. Every worker
    must see the ledger and the captures at the paths given; `digest_key`'s subkey for the ledger's
    algorithm is sent to the workers. UsageError for more than one digest key.

    No window, no standard input and workers with AES instructions: the fast verdict comes first,
    as on one machine (_fast_on_cluster: a multiset hash of each side, docs/adr/0011); only when
    it finds the sides unequal (or cannot decide) are both read again, partitioned and paired.
    `exact`: the partitioned pairing only (the report is the same; for tests and benchmarks)."""
    t0 = time.perf_counter()
    opened = open_ledger(ledger_dir)
    alg = get_algorithm(opened.header.algorithm)
    keys = check_request(digest_key, from_ns, to_ns, details)
    _check_cluster_request(keys, parts, memory_limit)
    bad_capture = None
    try:  # the captures digest while the ledger verifies; their errors come after the ledger's,
        # as on one machine
        chunks, stop = plan_chunks(source, split_bytes)
    except CaptureFormatError as e:
        chunks, stop, bad_capture = [], None, e
    verify_kw = dict(
        trust=trust, checkpoint=checkpoint, checkpoint_name=checkpoint_name, links=links
    )
    window = (from_ns, to_ns, tolerance_ns, links)
    if (
        not exact
        and from_ns is None
        and to_ns is None
        and stop is None
        and bad_capture is None
        and STDIN not in map(str, source_list(source))
        and _workers_accelerated(client)
    ):
        # the usual run, a capture that agrees with its ledger, needs no partitions (a capture
        # the client found corrupt, or a window, goes to the pairing, which reports them)
        fast = _fast_on_cluster(client, chunks, opened, alg, keys[0], verify_kw)
        if fast is not None:
            segs, ver, matched_keys, tally, capture = fast
            if details:  # no frame differs: the details file is empty, as the pairing writes it
                with fsio.atomic_file(details, what="details file"):
                    pass
            paired = _Paired(tally, 0, capture, segs, [], matched_keys, ver)
            return _result(paired, source, opened, alg, window, details, details_limit, t0)
    job = _Job(chunks, stop, bad_capture, keys[0], verify_kw, window, parts)
    paired = _pair_on_cluster(
        client, opened, alg, job, (examples, memory_limit, details, details_limit), source
    )
    return _result(paired, source, opened, alg, window, details, details_limit, t0)


def _check_cluster_request(keys: list, parts: int, memory_limit: str) -> None:
    """UsageError for what a cluster run does not take: several digest keys, partitions out of
    range, a memory limit DuckDB refuses (checked before the long part, as on one machine)."""
    if len(keys) != 1:
        raise UsageError(
            "on a cluster, recompute takes one digest key (reconcile a ledger whose digest key was "
            "rotated with all its keys on one machine)"
        )
    if not 0 <= parts <= MAX_PARTS:
        raise UsageError(f"partitions must be 1..{MAX_PARTS}, got {parts}")
    if memory_limit != DEFAULT_MEMORY_LIMIT:
        check_memory_limit(memory_limit)


@dataclass(frozen=True)
class _Job:
    """What the partitioned pairing of a cluster run starts from: the capture's chunks (and where
    the client found it stops, or the error it found), the digest key, verify's arguments, the
    window (from_ns, to_ns, tolerance_ns, links) and the partitions asked for (0: default)."""

    chunks: list[CaptureChunk]
    stop: ReadStop | None
    bad_capture: CaptureFormatError | None
    key: DigestKey
    verify_kw: dict
    window: tuple
    parts: int


@dataclass(frozen=True)
class _Paired:
    """A cluster run's outcome before its report: the tally, the --details lines written, the
    capture's run, the ledger's segments and uncovered runs, the keys matched, verify's result."""

    tally: Tally
    written: int
    capture: DigestRun
    segs: list[Segment]
    uncovered: list[dict]
    matched_keys: list
    ver: object


def _result(
    paired: _Paired,
    source: Sources,
    opened: OpenLedger,
    alg,
    window: tuple,
    details: Path | None,
    details_limit: int,
    t0: float,
) -> ReconcileResult:
    """The report of a cluster run, as one machine makes it."""
    res = make_result(
        source_name(source),
        opened.location,
        paired.tally,
        window,
        details,
        paired.written,
        paired.capture.warnings,
        paired.matched_keys,
        paired.segs,
        paired.uncovered,
        paired.ver.signatures_checked,
        time.perf_counter() - t0,
        capture=paired.capture,
    )
    add_warnings(res, opened.location, alg, paired.uncovered, details_limit)
    return res


def _pair_on_cluster(
    client: Client, opened: OpenLedger, alg, job: _Job, how: tuple, source: Sources
) -> _Paired:
    """The partitioned pairing (module doc): the ledger's segments checked and split by partition,
    the captures' chunks digested and split, one task per partition pairing and tallying it.
    `how`: examples, memory limit, details file and its limit."""
    examples, memory_limit, details, details_limit = how
    ledger = opened.header
    run = _Run(client)
    stop = job.stop
    try:
        parts = job.parts or default_parts(job.chunks, len(client.scheduler_info()["workers"]))
        checker = SplittingChecker(client, parts)
        run.checkers.append(checker)
        subkey = job.key.subkey(alg.name, alg.key_size)
        digested = [
            run.submit(digest_chunk, c, subkey, alg.name, ledger.strip, parts) for c in job.chunks
        ]
        ver = verify_ledger(opened, checker=checker, **job.verify_kw)
        if not ver.ok:
            raise not_verified_error(ver, "it is not reconciled")
        segs = checker.segments
        matched_keys, uncovered = match_keys(opened.location, ledger, alg, [job.key], segs)
        if job.bad_capture is not None:
            raise job.bad_capture
        runs = run.take([run.submit(operator.getitem, f, 0) for f in digested], "capture chunk")
        # a source its task could not read to the end ends the run there
        for i, r in enumerate(runs):
            if r.stopped is not None:
                runs, digested, stop = runs[: i + 1], digested[: i + 1], r.stopped
                break
        capture = _capture_run(runs, stop, ledger.strip)
        offsets = list(np.cumsum([0] + [r.frames for r in runs[:-1]], dtype=np.int64).tolist())
        from_ns, to_ns, tolerance_ns, _ = job.window
        pjob = PartitionJob(
            str(opened.location),
            tuple(k for k, _ in matched_keys),
            tuple(segs),
            tuple(uncovered),
            from_ns,
            to_ns,
            tolerance_ns,
            examples,
            details_limit if details else 0,
            memory_limit,
            alg.digest_size,
        )
        tallies = run.take(
            [
                run.submit(
                    tally_partition,
                    pjob,
                    offsets,
                    checker.ledger_parts[p],
                    [run.submit(_partition_item, f, p) for f in digested],
                )
                for p in range(parts)
            ],
            "partition",
        )
        written = _merged_details(tallies, details, source, details_limit) if details else 0
    finally:
        run.release()
    tally = merge_tallies([t.tally for t in tallies], examples)
    return _Paired(tally, written, capture, segs, uncovered, matched_keys, ver)


def _workers_accelerated(client: Client) -> bool:
    """Whether every worker of `client`'s cluster now hashes on AES instructions
    (msethash.accelerated): without them the fast verdict costs more than the pairing, which then
    runs alone, as on one machine. False when a worker does not answer (the pairing then meets
    the same cluster)."""
    try:
        return all(client.run(mset_accelerated).values())
    except Exception:  # noqa: BLE001 -- (a worker lost while asked: no fast verdict, nothing decided by it)
        return False


def _capture_run(runs: list[ChunkRun], stop: ReadStop | None, strip: str) -> DigestRun:
    """The capture side of a run from its chunks' runs, in frame order."""
    return DigestRun(
        frames=sum(r.frames for r in runs),
        bytes=sum(r.bytes for r in runs),
        warnings=[w for r in runs for w in r.warnings],
        stopped=stop,
        strip=strip,
        strip_fallbacks=sum((r.fallbacks for r in runs), StripFallbacks()),
    )


def _fast_on_cluster(
    client: Client,
    chunks: list[CaptureChunk],
    opened: OpenLedger,
    alg,
    key: DigestKey,
    verify_kw: dict,
) -> tuple[list[Segment], object, list, Tally, DigestRun] | None:
    """recompute's fast verdict (recompute._hash_sides) on the cluster: the client draws a
    multiset hash key (new_key) and sends it with the tasks, as an argument (never in a task key
    or name: those are on the dashboard); one task per run of segments checks them and hashes
    the frame records of those it read (check_and_hash: verify's reduction takes the verdicts),
    one task per capture chunk digests without keeping a record and hashes (hash_chunk); the
    client merges the small results. Every frame matched when every segment is under `key`'s id,
    no chunk stopped early, and the counts and values are equal: returns (segments, verify
    result, [(key id, key)], the tally from the ledger side's counts, the capture's run).
    Otherwise None: the caller pairs exactly, from the start. DiscrepancyError for a ledger that
    does not verify, KeyFileError as match_keys, ClusterError for a lost task (never a partial
    verdict)."""
    mkey = new_key()
    run = _Run(client)
    try:
        subkey = key.subkey(alg.name, alg.key_size)
        hashed = [
            run.submit(hash_chunk, c, subkey, alg.name, opened.header.strip, mkey) for c in chunks
        ]
        checker = HashingChecker(client, mkey, alg.digest_size)
        run.checkers.append(checker)
        ver = verify_ledger(opened, checker=checker, **verify_kw)
        if not ver.ok:
            raise not_verified_error(ver, "it is not reconciled")
        segs = checker.segments
        matched_keys, uncovered = match_keys(opened.location, opened.header, alg, [key], segs)
        if uncovered:
            return None
        kid = matched_keys[0][0]
        sums = run.take(checker.sums, "ledger task")
        lhash = MultisetHash(mkey, alg.digest_size)
        per_link: dict[str, int] = {}
        seconds: dict[int, int] = {}
        for s in sums:
            # (uncovered says so too: not decided here)
            if s.odd or any(k != kid for k, _, _ in s.hashes):
                return None
            for _, value, count in s.hashes:
                lhash.merge(value, count)
                per_link[s.link] = per_link.get(s.link, 0) + count
            for sec, n in s.seconds.items():
                seconds[sec] = seconds.get(sec, 0) + n
        results = run.take(hashed, "capture chunk")
        chash = MultisetHash(mkey, alg.digest_size)
        for r, value, count in results:
            # a source its task could not read to the end: paired, as on one machine
            if r.stopped is not None:
                return None
            chash.merge(value, count)
        if chash.state() != lhash.state():
            return None
        capture = _capture_run([r for r, _, _ in results], None, opened.header.strip)
        return (
            segs,
            ver,
            matched_keys,
            matched_counts_tally(capture.frames, lhash.count, per_link, seconds),
            capture,
        )
    finally:
        run.release()


def default_parts(chunks: list[CaptureChunk], workers: int) -> int:
    """Partitions for a run: two per worker, and more when the captures are large, so that one
    partition's records (both sides, held in memory by its task) stay near PART_RECORDS frames;
    a capture file's frames are bounded by its size over MIN_RECORD_BYTES."""
    frames = 0
    for c in chunks:
        if c.end:
            frames += (c.end - c.start) // MIN_RECORD_BYTES
        elif not is_workload(c.source):
            frames += os.stat(c.source).st_size // MIN_RECORD_BYTES
    return max(
        1, min(MAX_PARTS, max(PARTS_PER_WORKER * max(1, workers), -(-frames // PART_RECORDS)))
    )


def _merged_details(
    tallies: list[PartitionTally], details: Path, source: Sources, limit: int
) -> int:
    """--details from the partitions' first rows, written as one machine writes them."""
    con = open_duckdb()
    try:
        con.register("_rows", pa.concat_tables([t.details for t in tallies]))
        con.execute("CREATE TEMP TABLE j AS SELECT * FROM _rows")
        con.unregister("_rows")
        return write_details(con, details, source, limit)
    finally:
        con.close()
