"""recompute: digests of a capture recomputed with the ledger's engine, reconciled with DuckDB.

Reconciliation compares multisets of digests (a frame sent twice must appear twice): for each
digest d with count l(d) in the ledger (GAP records excluded) and c(d) in the capture,
matched += min(l, c), ledger_only += max(l - c, 0), capture_only += max(c - l, 0).

Across a digest-key rotation (docs/transparency.md, "Digest-key rotation") each sealed segment
was digested with the key its seal names. The capture is digested once per key given; a frame's
identity is its digest under the first of them, and a ledger record of another key's segments
takes the identity of the capture frame with the same digest under that key. The multiset
comparison above then runs on identities, so every frame is still classified exactly once.
Segments whose key was not given are left out and reported (`uncovered`, `partial`).

The ledger side is what `verify` checked (ledgertool.verify.ledger with the trust bundle, or only
the keyless checks without one): a ledger that does not verify is not reconciled (exit 1), and one
reconciled without a trust bundle is reported `verified: false` (exit 1 even when every frame
matched). DuckDB opens no file by a path: both sides are inserted into its tables from memory
(docs/threat-model.md, "What query and recompute read").
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import fsio
from ..algorithms import Algorithm, get_algorithm, get_strip_mode
from ..digest.engine import DigestEngine, usable_cores
from ..digest.record import FLAG_GAP, RecordSink, record_dtype
from ..errors import CaptureFormatError, LedgerFormatError, Setting, UsageError
from ..keyfiles import DigestKey, TrustBundle
from ..ledger.header import LedgerHeader
from ..ledger.opened import OpenLedger, open_ledger
from ..ledger.reader import LedgerReader
from ..progress import Progress, ProgressFn
from ..seal.document import Seal
from ..source import open_source
from ..source.file import STDIN
from ..urls import location
from ..verify.ledger import VerifiedSegment, VerifyResult, verify_ledger
from .details import write_details
from .limits import (
    DEFAULT_MEMORY_LIMIT,
    check_memory_limit,
    keep_budget,
    lazy_pairing,
    open_pairing,
)
from .marks import Marks, SegmentMarks, ledger_rows
from .msethash import HashingSink, MultisetHash, new_key, new_part_key, part_ids, parts_where
from .msethash import accelerated as mset_accelerated
from .multiset import (
    Tally,
    merge_tallies,
    second_counts,
    window_mask,
)
from .pairing import (
    pair_store,
    pair_tables,
    tally_tables,
)
from .partstore import PartStore
from .query import not_verified_error
from .result import (
    DigestRun,
    ReadStop,
    ReconcileResult,
    add_warnings,
    make_result,
    matched_counts_tally,
)
from .segments import Segment, match_keys
from .sources import Sources, capture_hint, file_bytes, source_list, source_name

#: bytes of file format around each frame: the record header (pcap 16, modified pcap 24) or the
#: enhanced packet block (pcapng 32 and the padding, left out): how far into the file the frames
#: read so far reach, for the progress bar
_RECORD_OVERHEAD = {"pcap (µs)": 16, "pcap (ns)": 16, "pcap (modified)": 24, "pcapng": 32}


def _file_progress(
    progress: ProgressFn | None, phase: str, info
) -> Callable[[int, int], None] | None:
    """(frames, captured bytes so far) -> a Progress update of bytes read of the file's size
    (estimated from the frame count and the format), frames as items; no total for a workload."""
    if progress is None:
        return None
    overhead = _RECORD_OVERHEAD.get(info.format)
    total = info.file_size if overhead is not None and info.file_size > 0 else None

    def update(frames: int, nbytes: int) -> None:
        done = nbytes if total is None else min(total, nbytes + frames * overhead)
        progress(Progress(phase, done, total, "bytes", frames, "frames"))

    return update


def digests_schema(digest_size: int) -> pa.Schema:
    """Per-frame recompute output (schemas/recompute-digests.arrow.json)."""
    return pa.schema(
        [
            ("index", pa.uint64()),
            ("ts_ns", pa.int64()),
            ("wire_len", pa.uint32()),
            ("cap_len", pa.uint32()),
            ("flags", pa.uint16()),
            ("linktype", pa.uint16()),
            ("digest", pa.binary(digest_size)),
        ]
    )


def digest_records(
    source: str | Path,
    digest_key: DigestKey,
    alg: Algorithm,
    strip: str,
    run: DigestRun,
    progress: ProgressFn | None,
    workers: int,
    phase: str = "recompute",
    sink: RecordSink | None = None,
) -> Iterator[np.ndarray]:
    """Digest every frame of `source` with the native engine: one record_dtype array per engine
    batch (a view of the engine's buffer, valid until the next one, or of `sink`'s array, which
    gets every batch in turn; `seq` is the frame's index in the captures so far); `run` counts
    frames and bytes, the capture's warnings and strip fallbacks. A capture that cannot be read
    to its end (corrupt after it was opened) ends the batches with the frames before that point,
    and `run.stopped` says where. `progress` gets bytes read of the capture's size (`phase`),
    the last update at its end."""
    t0 = time.perf_counter()
    with open_source(source) as reader:
        report = _file_progress(progress, phase, reader.info())
        engine = DigestEngine(
            reader,
            alg,
            get_strip_mode(strip),
            digest_key.subkey(alg.name, alg.key_size),
            workers=workers or usable_cores(),
        )
        dtype = record_dtype(alg.digest_size)
        while True:
            try:
                records, n, nbytes = engine.fill(run.frames, out=sink.room() if sink else None)
            except CaptureFormatError as e:
                run.stopped = ReadStop(e.path or str(source), e.offset, str(e))
                break
            if n == 0:
                break
            if sink:
                sink.n += n
            yield np.frombuffer(records, dtype=dtype, count=n)
            run.frames += n
            run.bytes += nbytes
            if report:
                report(run.frames, run.bytes)
        info = reader.info()
        note = info.truncation_note()
        run.strip, run.strip_fallbacks = strip, engine.strip_fallbacks()
    if progress and run.stopped is None and info.file_size > 0 and info.format in _RECORD_OVERHEAD:
        progress(Progress(phase, info.file_size, info.file_size, "bytes", run.frames, "frames"))
    if note:
        run.warnings.append(note)
    run.elapsed_s += time.perf_counter() - t0


def _digest_batches(
    source: str | Path,
    digest_key: DigestKey,
    alg: Algorithm,
    strip: str,
    run: DigestRun,
    progress: ProgressFn | None,
    workers: int,
    phase: str = "recompute",
) -> Iterator[pa.Table]:
    """digest_records' batches as Arrow tables (schema `digests_schema`)."""
    schema = digests_schema(alg.digest_size)
    for arr in digest_records(source, digest_key, alg, strip, run, progress, workers, phase):
        dig = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(alg.digest_size), len(arr), [None, pa.py_buffer(arr["digest"].tobytes())]
        )
        yield pa.Table.from_arrays(
            [
                pa.array(arr["seq"]),
                pa.array(arr["ts_ns"]),
                pa.array(arr["wire_len"]),
                pa.array(arr["cap_len"]),
                pa.array(arr["flags"]),
                pa.array(arr["linktype"]),
                dig,
            ],
            schema=schema,
        )


def digests_to_parquet(
    source: str | Path,
    out: Path,
    digest_key: DigestKey,
    alg: Algorithm,
    strip: str,
    progress: ProgressFn | None = None,
    workers: int = 0,
) -> DigestRun:
    """Digest every frame of `source` and write one row per frame to `out` (Parquet).

    `workers` threads digest each batch (0: every usable core); the digests do not depend on it.
    `progress` gets bytes read of the capture's size (phase "recompute"), frames as items.

    Raises CaptureFormatError for a capture that cannot be opened (nothing is left at `out` then);
    one corrupt further on gets the rows of the frames before that point, and `run.stopped`.
    """
    run = DigestRun()
    # written under a fresh temporary name and renamed (fsio): a failed run never destroys `out`,
    # and a link planted at a predictable name is never written through
    with fsio.atomic_file(out, what="digest Parquet file") as f:
        with pq.ParquetWriter(f, digests_schema(alg.digest_size), compression="zstd") as w:
            for batch in _digest_batches(source, digest_key, alg, strip, run, progress, workers):
                w.write_table(batch)
    return run


def reconcile(
    source: Sources,
    ledger_dir: Path | OpenLedger,
    digest_key: DigestKey | Sequence[DigestKey],
    *,
    trust: TrustBundle | None = None,
    checkpoint: bytes | None = None,
    checkpoint_name: str = "checkpoint",
    examples: int = 10,
    progress: ProgressFn | None = None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    from_ns: int | None = None,
    to_ns: int | None = None,
    tolerance_ns: int = 0,
    links: list[str] | None = None,
    details: Path | None = None,
    details_limit: int = 100_000,
    workers: int = 0,
    exact: bool = False,
) -> ReconcileResult:
    """Verify the ledger, recompute `source` with its algorithm and strip mode, and reconcile
    the two as multisets. `source` is one capture or several, taken as one capture in the order
    given (frame indexes continue from one file to the next).

    The ledger is verified first with `trust` (and `checkpoint`, a signed note it must extend), or
    with the keyless checks only when `trust` is None (the result is then `verified` False and not
    `ok`); its records reach DuckDB from the bytes that were checked. Each digest's occurrences pair
    one to one, those of the same timestamp on both sides first, the rest in time order
    (pair_tables), so every frame is classified exactly once: matched, ledger-only or capture-only,
    and a changed frame whose bytes repeat elsewhere is named itself. `from_ns`/`to_ns` restrict
    both sides to [from, to) (ns since the epoch); capture frames within `tolerance_ns` outside the
    window may still pair with ledger records inside it (two capture points see a frame at slightly
    different times) and are otherwise ignored. `links` restricts the ledger side (and what is
    verified). `details` gets one JSON line per differing frame (capture-only frames with a one-line
    dissection). DuckDB runs with `memory_limit` and spills to a temporary directory. `progress`
    gets the ledger's verify phase ("verify": segments, records), then the capture's ("recompute":
    bytes read of its size, frames; once per digest key given).

    `digest_key` is one key or several (a ledger whose digest key was rotated: one per epoch, in
    any order). Only the sealed segments whose seal names one of the given keys take part; the
    others are listed in `uncovered` (runs of segments per link and key id, with their frame
    counts) and a warning, and capture frames that belong to them count as capture-only.
    Capture-only examples and details show a frame's digest under the first (oldest) key given.

    One digest key, no window, no standard input and a CPU with AES instructions: the fast
    verdict comes first (_hash_sides: a multiset hash of each side in parts, docs/adr/0011); only
    when some parts differ are both sides read again, and only those parts' rows are kept and
    paired. Every single-key pairing keeps its rows in memory up to a quarter of `memory_limit`
    and then in bucket files by their part, paired a bucket at a time (PartStore, pair_store), so
    it holds the limit whatever the ledger's size. `exact` pairs everything without the fast
    verdict (the report is the same; for tests and benchmarks).

    Raises DiscrepancyError when the ledger does not verify, KeyFileError when a key is not one
    of the ledger's digest keys (wrong key) or covers none of its sealed segments in `links`,
    UsageError for the same key given twice or several keys with standard input (`-`, read once),
    StorageError when `details` cannot be written (checked first: an existing file is replaced only
    at the end), and CaptureFormatError / LedgerFormatError for bad inputs. A capture corrupt after
    it was opened is reconciled up to that point: `complete` is False (so not `ok`) and
    `capture.stopped` says where it stopped.
    """
    given = ledger_dir
    ledger_dir = given.location if isinstance(given, OpenLedger) else location(given)
    several = not isinstance(digest_key, DigestKey) and len(digest_key) > 1
    if several and any(str(one) == STDIN for one in source_list(source)):
        raise UsageError(
            "standard input is read once: give one ",
            Setting("digest_key"),
            " per run, or the capture as a file, to reconcile several digest keys",
        )
    opened = open_ledger(given if isinstance(given, OpenLedger) else ledger_dir)
    ledger = opened.header
    alg = get_algorithm(ledger.algorithm)
    keys = check_request(digest_key, from_ns, to_ns, details)
    t0 = time.perf_counter()
    ledger_side = LedgerSide(opened, trust, checkpoint, checkpoint_name, links, progress)
    if memory_limit != DEFAULT_MEMORY_LIMIT:  # checked before the long part, as DuckDB takes it
        check_memory_limit(memory_limit)
    if (
        not exact
        and len(keys) == 1
        and from_ns is None
        and to_ns is None
        and STDIN not in map(str, source_list(source))
        and mset_accelerated()
    ):
        # the usual run, a capture that agrees with its ledger, needs no pairing (_hash_sides);
        # one that does not is read again and only its differing parts are paired (standard input
        # cannot be read again, nor is it needed with a window or several keys, which the pairing
        # below handles)
        hashed = _hash_sides(source, ledger_side, ledger, alg, keys[0], progress, workers)
        if hashed is not None and not hashed.capture_gaps:
            res = _decide(
                hashed,
                source,
                ledger_side,
                ledger,
                alg,
                keys[0],
                (progress, workers, examples),
                memory_limit,
                details,
                details_limit,
            )
            if res is not None:
                res.elapsed_s = time.perf_counter() - t0
                add_warnings(res, ledger_dir, alg, [], details_limit)
                return res
    with tempfile.TemporaryDirectory(prefix="ledgertool-recompute-") as tmp:
        con = open_pairing(memory_limit, tmp)
        try:
            # the common case: the pairs found once on each side never reach DuckDB
            if len(keys) == 1:
                window = (from_ns, to_ns, tolerance_ns)
                store = PartStore(
                    record_dtype(alg.digest_size),
                    keep_budget(memory_limit),
                    new_part_key(),
                    PART_BITS,
                    Path(tmp),
                    capture_hint(source),
                )
                segs, ver = _keep_ledger(store, ledger_side, alg, keys[0], window)
                keys, uncovered = match_keys(ledger_dir, ledger, alg, keys, segs)
                run = _keep_capture(
                    store, source, keys[0][1], alg, ledger.strip, (progress, workers), window
                )
                tally = pair_store(
                    con, keys[0][0], (segs, uncovered), store, None, window, examples
                )
            # several digest keys: every record goes through DuckDB's identity mapping
            # (pairing_views)
            else:
                segs, ver = _load_ledger_side(con, ledger_side)
                keys, uncovered = match_keys(ledger_dir, ledger, alg, keys, segs)
                run = _load_capture_side(con, source, keys, alg, ledger.strip, progress, workers)
                pair_tables(con, keys, segs, uncovered, from_ns, to_ns, tolerance_ns)
                tally = tally_tables(con, from_ns, to_ns, examples)
            written = write_details(con, details, source, details_limit) if details else 0
        except duckdb.Error as e:
            raise LedgerFormatError(
                f"{ledger_dir}: reconciliation failed reading the ledger: {str(e).splitlines()[0]}"
            ) from None
        finally:
            con.close()
    res = make_result(
        source_name(source),
        ledger_dir,
        tally,
        (from_ns, to_ns, tolerance_ns, links),
        details,
        written,
        run.warnings,
        keys,
        segs,
        uncovered,
        ver.signatures_checked,
        time.perf_counter() - t0,
        capture=run,
    )
    add_warnings(res, ledger_dir, alg, uncovered, details_limit)
    return res


#: the parts the fast verdict hashes each side into (msethash.part_ids): 4,096 sums of 24 bytes
#: stay in L2; with a few frames differing in 10^9, the differing parts hold ~2.5 M rows a side
PART_BITS = 12
#: the parts of the marks the first reading keeps of each record (2 bytes: reconcile.marks), a
#: refinement of PART_BITS: a second reading pairs only the rows of the differing ones (~150 rows
#: a side each at 10^7 records), and authenticates only the ~4 % of 256-record leaves they are in
MARK_BITS = 16


@dataclass(frozen=True)
class LedgerSide:
    """The ledger side of a reconciliation: the ledger (opened once) and how it is verified
    (trust bundle, checkpoint, links, progress), for each pass that reads it."""

    ledger: OpenLedger
    trust: TrustBundle | None
    checkpoint: bytes | None
    checkpoint_name: str
    links: list[str] | None
    progress: ProgressFn | None

    def verify(self, on_segment, records_into: RecordSink | None = None) -> VerifyResult:
        """verify_ledger with these arguments; DiscrepancyError when the ledger does not verify
        (it is not reconciled then)."""
        ver = verify_ledger(
            self.ledger,
            self.trust,
            self.checkpoint,
            self.checkpoint_name,
            links=self.links,
            on_segment=on_segment,
            progress=self.progress,
            records_into=records_into,
        )
        if not ver.ok:
            raise not_verified_error(ver, "it is not reconciled")
        return ver


@dataclass
class _Hashed:
    """Both sides hashed in parts under one key (_hash_sides): the ledger's segments, their seals
    (to check that a second reading met the same ledger), verify's result, the ledger side's frame
    counts per link and per second, the capture's run."""

    segs: list[Segment]
    seals: list[dict]
    ver: VerifyResult
    keys: list[tuple[str, DigestKey]]
    lhash: MultisetHash
    chash: MultisetHash
    per_link: dict[str, int]
    seconds: dict[int, int]
    run: DigestRun
    capture_gaps: int = 0  # capture records with a skipped flag: not in chash
    marks: Marks | None = None  # what finds the differing parts' rows again (reconcile.marks)

    def tally(self) -> Tally:
        """The tally when every part agrees: every frame matched (the ledger side's counts)."""
        return matched_counts_tally(self.run.frames, self.lhash.count, self.per_link, self.seconds)

    def agreeing_tally(self, paired: Tally) -> Tally:
        """The tally of every row outside the parts `paired` counts (the differing parts' pairing):
        all matched, as their parts agree, counted as the ledger side's counts less the ledger rows
        of `paired` (matched or ledger-only, by link and by their second)."""
        per_link = dict(self.per_link)
        for row in paired.per_link:
            if row["link"] is not None:
                per_link[row["link"]] -= row["matched"] + row["ledger_only"]
        seconds = dict(self.seconds)
        for row in paired.per_second:
            sec = row["second"]
            seconds[sec] = seconds.get(sec, 0) - row["matched"] - row["ledger_only"]
        return matched_counts_tally(
            self.run.frames - paired.frames_in_window,
            self.lhash.count - paired.matched - paired.ledger_only,
            per_link,
            {s: n for s, n in seconds.items() if n},
        )


def _decide(
    hashed: _Hashed,
    source: Sources,
    ledger_side: LedgerSide,
    ledger: LedgerHeader,
    alg: Algorithm,
    key: DigestKey,
    how: tuple,
    memory_limit: str,
    details: Path | None,
    details_limit: int,
) -> ReconcileResult | None:
    """The report from both sides hashed in parts: every part agrees, so every frame matched; or
    the differing parts' rows found again (_gather_marked; failing that, both sides read again in
    full, _gather_parts), kept (a PartStore: past the budget in bucket files) and paired, the rest
    counted as matched (a difference costs what it touches).
    DuckDB is opened only for --details or many differing rows (pairing.pair_records). None when
    the second reading did not meet what the first did (the caller pairs everything)."""
    progress, workers, examples = how
    written = 0
    differing = hashed.lhash.differing_parts(hashed.chash)
    if not len(differing):
        tally = hashed.tally()
        if details:  # no frame differs: the details file is empty, as the pairing writes it
            with fsio.atomic_file(details, what="details file"):
                pass
    else:
        wanted = np.zeros(1 << PART_BITS, bool)
        wanted[differing] = True
        with tempfile.TemporaryDirectory(prefix="ledgertool-recompute-") as tmp:
            # DuckDB is opened only when the differing rows need it (--details, or many of them)
            opener = lazy_pairing(memory_limit, tmp)
            con = opener() if details else opener
            try:
                got = _gather_marked(
                    wanted,
                    hashed,
                    source,
                    ledger_side,
                    (ledger, alg, key),
                    progress,
                    (memory_limit, tmp),
                )
                if got is not None:
                    store, pairs_of = got
                else:  # the marks did not find the rows again: both sides read in full
                    store, pairs_of = _part_store(hashed, alg, memory_limit, tmp), wanted
                    if not _gather_parts(
                        store,
                        wanted,
                        hashed,
                        source,
                        ledger_side,
                        ledger,
                        alg,
                        key,
                        (progress, workers),
                    ):
                        return None
                part = pair_store(
                    con,
                    hashed.keys[0][0],
                    (hashed.segs, []),
                    store,
                    pairs_of,
                    (None, None, 0),
                    examples,
                )
                tally = merge_tallies([hashed.agreeing_tally(part), part], examples)
                written = write_details(con, details, source, details_limit) if details else 0
            except duckdb.Error as e:
                raise LedgerFormatError(
                    f"{ledger_side.ledger.location}: reconciliation failed reading the ledger: "
                    f"{str(e).splitlines()[0]}"
                ) from None
            finally:
                opener.close()
    return make_result(
        source_name(source),
        ledger_side.ledger.location,
        tally,
        (None, None, 0, ledger_side.links),
        details,
        written,
        hashed.run.warnings,
        hashed.keys,
        hashed.segs,
        [],
        hashed.ver.signatures_checked,
        0.0,
        capture=hashed.run,
    )


def _hash_sides(
    source: Sources,
    ledger_side: LedgerSide,
    ledger: LedgerHeader,
    alg: Algorithm,
    key: DigestKey,
    progress: ProgressFn | None,
    workers: int,
) -> _Hashed | None:
    """Verify the ledger (DiscrepancyError when it does not verify), adding each verified
    segment's frame records to a multiset hash in parts as they are checked (msethash: the very
    bytes hashed into its Merkle leaves, in one buffer the segments share, so nothing is kept) and
    counting them per link and per second, then recompute the captures under `key` into another,
    batch by batch. Equal parts mean equal multisets of digests (docs/adr/0011). None when some
    segments are under another key or the capture could not be read to its end (the caller
    pairs everything then). KeyFileError as match_keys."""
    ledger_dir = ledger_side.ledger.location
    dtype = record_dtype(alg.digest_size)
    lhash = MultisetHash(new_key(), alg.digest_size, part_bits=PART_BITS, part_key=new_part_key())
    segs: list[Segment] = []
    seals: list[dict] = []
    per_link: dict[str, int] = {}

    # a sink nothing is taken from (every segment's records are copied to the same place) whose raw
    # record files the native walk also hashes and counts per second as it copies them
    sink = HashingSink(dtype, lhash)
    # each record's part at MARK_BITS is kept as 2 bytes: it refines parts of at most 16 bits
    marking = 0 < PART_BITS <= MARK_BITS
    sink.keep_marks = marking
    seconds = sink.seconds
    marks = Marks(segments=[] if marking else None)

    def add_segment(seg: VerifiedSegment) -> None:
        segs.append(Segment.of(seg))
        seals.append(seg.seal)
        held = sink.holds(seg.records)
        if held and sink.marks is not None and marks.segments is not None:
            ids, leaves, spec = sink.marks
            marks.segments.append(
                SegmentMarks(
                    seg.link, seg.index, dtype.itemsize, spec, seg.seal.leaf_records, ids, leaves
                )
            )
        elif len(seg.records):  # read another way: found again by reading everything
            marks.segments = None
        sink.marks = None
        if held:  # hashed and counted by the walk that copied it
            n = (
                seg.frames
                if seg.frames is not None
                else int(((np.frombuffer(seg.records, dtype)["flags"] & FLAG_GAP) == 0).sum())
            )
        else:  # a v1 or compacted segment, or bytes read from a URL
            arr = np.frombuffer(seg.records, dtype)
            n = lhash.add(arr)
            second_counts(arr, FLAG_GAP, into=seconds)
        per_link[seg.link] = per_link.get(seg.link, 0) + n

    ver = ledger_side.verify(add_segment, records_into=sink)
    keys, uncovered = match_keys(ledger_dir, ledger, alg, [key], segs)
    if uncovered:
        return None
    chash = MultisetHash(lhash.key, alg.digest_size, part_bits=PART_BITS, part_key=lhash.part_key)
    run = DigestRun()
    gaps = 0
    for one in source_list(source):
        if run.stopped is not None:
            break
        for batch in digest_records(one, key, alg, ledger.strip, run, progress, workers):
            ids = np.empty(len(batch), np.uint16) if marking else None
            gaps += len(batch) - chash.add(batch, ids)
            marks.capture.append(ids)
    if run.stopped is not None:
        return None
    return _Hashed(segs, seals, ver, keys, lhash, chash, per_link, seconds, run, gaps, marks)


def _part_store(
    hashed: _Hashed, alg: Algorithm, memory_limit: str, tmp: str, bits: int | None = None
) -> PartStore:
    """An empty PartStore for differing rows under `hashed`'s part key, in parts of `bits` (None:
    those of `hashed`)."""
    return PartStore(
        record_dtype(alg.digest_size),
        keep_budget(memory_limit),
        hashed.lhash.part_key,
        hashed.lhash.part_bits if bits is None else bits,
        Path(tmp),
    )


def _gather_marked(
    wanted: np.ndarray,
    hashed: _Hashed,
    source: Sources,
    ledger_side: LedgerSide,
    what: tuple[LedgerHeader, Algorithm, DigestKey],
    progress: ProgressFn | None,
    where: tuple[str, str],
) -> tuple[PartStore, np.ndarray] | None:
    """The rows of the parts `wanted` marks, found by the first reading's marks
    (reconcile.marks), as a PartStore in parts of MARK_BITS and the sub-parts it holds; None when
    anything does not meet the first reading (the caller reads both sides in full).

    Both sides' rows of those parts are read as they are now (the ledger's records one by one,
    the captures' frames of those parts alone digested, every frame counted) and must hash to the
    first reading's sums in those parts: their digests are then the first reading's, and so are
    the sums of their sub-parts (the part of a digest at MARK_BITS refines its part), whose
    differences name the rows to pair. Only those are kept: the ledger's read again through the
    leaves that hold them, each equal to the leaf the first reading verified."""
    ledger, alg, key = what
    marks = hashed.marks
    if marks is None or marks.segments is None:
        return None
    lh, ch, bits = hashed.lhash, hashed.chash, hashed.lhash.part_bits
    dtype = record_dtype(alg.digest_size)
    reader = ledger_side.ledger.reader

    def fresh(b: int) -> MultisetHash:
        return MultisetHash(lh.key, alg.digest_size, part_bits=b, part_key=lh.part_key)

    lpart, lsub, cpart, csub = fresh(bits), fresh(MARK_BITS), fresh(bits), fresh(MARK_BITS)
    found = []
    for seg in _holding_links(reader, marks.segments):
        rows = parts_where(seg.ids, wanted, bits).astype(np.int64)
        raw = ledger_rows(reader, seg, rows, check=False)
        if raw is None:
            return None
        lpart.add(np.frombuffer(raw, dtype))
        lsub.add(np.frombuffer(raw, dtype))
        found.append(rows)
    if marks.capture_frames() != hashed.run.frames:
        return None
    sink = RecordSink(dtype)
    run = _select_records(
        source, key, alg, ledger.strip, marks.capture_where(wanted, bits), sink, progress
    )
    caught = sink.records()
    cpart.add(caught)
    csub.add(caught)
    differing = np.flatnonzero(wanted)
    if not (
        run.stopped is None
        and run.frames == hashed.run.frames
        and _same_parts(lpart, lh, differing)
        and _same_parts(cpart, ch, differing)
    ):
        return None
    sub = np.zeros(1 << MARK_BITS, bool)
    sub[lsub.differing_parts(csub)] = True
    store = _part_store(hashed, alg, *where, bits=MARK_BITS)
    for seg, rows in zip(_holding_links(reader, marks.segments), found):
        raw = ledger_rows(reader, seg, rows[sub[seg.ids[rows]]], check=True)
        if raw is None:
            return None
        store.took_ledger(seg.link, raw, (np.frombuffer(raw, dtype)["flags"] & FLAG_GAP) == 0)
    kept = caught[sub[part_ids(caught, lh.part_key, MARK_BITS).view(np.int64)]]
    store.capture.room(len(kept))[: len(kept)] = kept
    store.capture.n += len(kept)
    store.took_capture(len(kept))
    return store, sub


def _holding_links(reader: LedgerReader, segments: list[SegmentMarks]) -> Iterator[SegmentMarks]:
    """`segments` in order, each link's directory held while its segments are handed out (each
    record file then one openat(2) relative to it: LedgerReader.holding_link)."""
    i = 0
    while i < len(segments):
        link = segments[i].link
        with reader.holding_link(link):
            while i < len(segments) and segments[i].link == link:
                yield segments[i]
                i += 1


def _same_parts(a: MultisetHash, b: MultisetHash, parts: np.ndarray) -> bool:
    """Whether `a` and `b` have equal sums and counts in `parts`."""
    return bool(
        (a.sums[parts] == b.sums[parts]).all() and (a.counts[parts] == b.counts[parts]).all()
    )


_SELECT_FRAMES = 1 << 16  # frames read a call by the second reading of a differing capture


def _select_records(
    source: Sources,
    key: DigestKey,
    alg: Algorithm,
    strip: str,
    picks: np.ndarray,
    sink: RecordSink,
    progress: ProgressFn | None,
) -> DigestRun:
    """Read the captures again, digesting only the frames whose index `picks` holds (ascending)
    into `sink`; every frame is read and counted."""
    run = DigestRun()
    at = 0  # the first of `picks` not yet read
    for one in source_list(source):
        if run.stopped is not None:
            break
        with open_source(one) as reader:
            report = _file_progress(progress, "recompute", reader.info())
            engine = DigestEngine(
                reader,
                alg,
                get_strip_mode(strip),
                key.subkey(alg.name, alg.key_size),
                workers=1,
            )
            while True:
                end = int(np.searchsorted(picks, run.frames + _SELECT_FRAMES))
                ahead = np.zeros(_SELECT_FRAMES, np.uint8)
                ahead[(picks[at:end] - np.uint64(run.frames)).astype(np.intp)] = 1
                room = sink.room(max(end - at, 1))
                try:
                    n, frames, nbytes = engine.fill_select(run.frames, ahead, room)
                except CaptureFormatError as e:
                    run.stopped = ReadStop(e.path or str(one), e.offset, str(e))
                    break
                if frames == 0:
                    break
                sink.n += n
                at += n
                run.frames += frames
                run.bytes += nbytes
                if report:
                    report(run.frames, run.bytes)
    return run


def _gather_parts(
    store: PartStore,
    wanted: np.ndarray,
    hashed: _Hashed,
    source: Sources,
    ledger_side: LedgerSide,
    ledger: LedgerHeader,
    alg: Algorithm,
    key: DigestKey,
    how: tuple,
) -> bool:
    """Read both sides again and keep in `store` only the frame rows of the parts `wanted` marks.
    False when this reading did not meet what the first did (the ledger's seals, or the capture's
    frames and their hash): the caller pairs everything then. DiscrepancyError when the ledger no
    longer verifies."""
    progress, workers = how
    dtype = store.ledger.dtype
    lh, ch = hashed.lhash, hashed.chash
    seals: list[Seal] = []

    def add_segment(seg: VerifiedSegment) -> None:
        seals.append(seg.seal)
        arr = np.frombuffer(seg.records, dtype)
        store.took_ledger(
            seg.link,
            seg.records,
            _in_parts(wanted, arr, lh) & ((arr["flags"] & FLAG_GAP) == 0),
        )

    _verify_into(store, ledger_side, add_segment)
    if seals != hashed.seals:
        return False
    again = MultisetHash(lh.key, alg.digest_size, part_bits=lh.part_bits, part_key=lh.part_key)
    run = DigestRun()
    for one in source_list(source):
        if run.stopped is not None:
            break
        for batch in digest_records(
            one, key, alg, ledger.strip, run, progress, workers, sink=store.capture
        ):
            again.add(batch)
            store.took_capture(len(batch), _in_parts(wanted, batch, lh))
    return (
        run.stopped is None
        and run.frames == hashed.run.frames
        and not len(again.differing_parts(ch))
    )


def _in_parts(wanted: np.ndarray, records: np.ndarray, mset: MultisetHash) -> np.ndarray:
    """A mask of `records` whose part under `mset`'s parts `wanted` marks (the parts, below
    2^part_bits, index as int64 bits, which numpy takes without converting them)."""
    return wanted[part_ids(records, mset.part_key, mset.part_bits).view(np.int64)]


def _keep_ledger(
    store: PartStore,
    ledger_side: LedgerSide,
    alg: Algorithm,
    key: DigestKey,
    window: tuple[int | None, int | None, int],
) -> tuple[list[Segment], VerifyResult]:
    """Verify the ledger and keep in `store` the frame records of its verified segments under
    `key` (gap records left out) within the window widened by its tolerance (from_ns, to_ns,
    tolerance_ns): verify copies each raw record file's records straight into the store's sink,
    so the rows kept are the very bytes that were checked. DiscrepancyError when it does not
    verify."""
    kid = key.key_id(alg.name, alg.key_size)
    lo, hi = _widened(window)
    segs: list[Segment] = []

    def add_segment(seg: VerifiedSegment) -> None:
        segs.append(Segment.of(seg))
        if seg.seal.digest_key_id != kid:  # uncovered, or a wrong key (match_keys says)
            return
        arr = np.frombuffer(seg.records, store.ledger.dtype)
        keep = (
            None
            if seg.frames is not None and seg.frames == len(arr)
            else (arr["flags"] & FLAG_GAP) == 0
        )
        if lo is not None or hi is not None:
            inside = window_mask(arr["ts_ns"], lo, hi)
            keep = inside if keep is None else keep & inside
        store.took_ledger(seg.link, seg.records, keep)

    ver = _verify_into(store, ledger_side, add_segment)
    return segs, ver


def _verify_into(store: PartStore, ledger_side: LedgerSide, on_segment) -> VerifyResult:
    """The ledger verified as the first pass verified it, each verified segment's records copied
    into `store.ledger` (and handed to `on_segment`); DiscrepancyError when the ledger does not
    verify (nothing is reconciled then)."""
    return ledger_side.verify(on_segment, records_into=store.ledger)


def _keep_capture(
    store: PartStore,
    source: Sources,
    key: DigestKey,
    alg: Algorithm,
    strip: str,
    how: tuple,
    window: tuple[int | None, int | None, int],
) -> DigestRun:
    """Recompute the captures under `key` into `store`'s capture sink (the engine writes there),
    keeping the frames within the widened window; returns the run's statistics."""
    progress, workers = how
    lo, hi = _widened(window)
    run = DigestRun()
    for one in source_list(source):
        if run.stopped is not None:  # a capture before this one could not be read to its end
            break
        for batch in digest_records(
            one, key, alg, strip, run, progress, workers, sink=store.capture
        ):
            store.took_capture(
                len(batch),
                None if lo is None and hi is None else window_mask(batch["ts_ns"], lo, hi),
            )
    return run


def _widened(window: tuple[int | None, int | None, int]) -> tuple[int | None, int | None]:
    """The window (from_ns, to_ns, tolerance_ns) widened by its tolerance: what both sides read."""
    from_ns, to_ns, tolerance_ns = window
    return (
        None if from_ns is None else from_ns - tolerance_ns,
        None if to_ns is None else to_ns + tolerance_ns,
    )


def check_request(
    digest_key: DigestKey | Sequence[DigestKey],
    from_ns: int | None,
    to_ns: int | None,
    details: Path | None,
) -> list[DigestKey]:
    """The digest keys of a reconciliation, once its window and details file are known to be
    usable (UsageError otherwise): checked before the long part, not after it."""
    keys = [digest_key] if isinstance(digest_key, DigestKey) else list(digest_key)
    if not keys:
        raise UsageError("recompute needs at least one ", Setting("digest_key"))
    if from_ns is not None and to_ns is not None and from_ns >= to_ns:
        raise UsageError(
            "empty time window: ",
            Setting("from_ns"),
            f" {from_ns} is not before ",
            Setting("to_ns"),
            f" {to_ns} (ns since the epoch)",
        )
    if details is not None:  # an existing file stays until it is replaced at the end
        fsio.check_writable(details, what="details file")
    return keys


def _load_ledger_side(con, side: LedgerSide) -> tuple[list[Segment], VerifyResult]:
    """Verify the ledger and load the records of its verified segments (gap records left out) into
    table `lrec`, from the bytes that were checked. DiscrepancyError when it does not verify."""
    segs: list[Segment] = []
    con.execute(
        "CREATE TEMP TABLE lrec (link VARCHAR, kid VARCHAR, digest BLOB, seq UBIGINT, ts_ns "
        "BIGINT, wire_len UINTEGER)"
    )

    def add_segment(seg: VerifiedSegment) -> None:
        segs.append(Segment.of(seg))
        con.register("_segment", seg.table)
        try:
            con.execute(
                f"INSERT INTO lrec SELECT ?, ?, digest, seq, ts_ns, wire_len FROM _segment "
                f"WHERE (flags & {FLAG_GAP}) = 0",
                [seg.link, seg.seal.digest_key_id],
            )
        finally:
            con.unregister("_segment")

    return segs, side.verify(add_segment)


def _capture_records(
    source: Sources,
    key: DigestKey,
    alg: Algorithm,
    strip: str,
    progress: ProgressFn | None,
    workers: int,
) -> tuple[np.ndarray, DigestRun]:
    """Every frame of the captures recomputed under `key` as one record_dtype array (`seq`: the
    frame's index), and the run's statistics."""
    run = DigestRun()
    sources = source_list(source)
    # a pcap has at least 16 + 60 bytes a whole Ethernet frame: room for them all from the start
    # (up to RecordSink.MAX_HINT; beyond it the array grows)
    sink = RecordSink(record_dtype(alg.digest_size), sum(file_bytes(one) for one in sources) // 64)
    for one in sources:
        if run.stopped is not None:  # a capture before this one could not be read to its end
            break
        for _ in digest_records(one, key, alg, strip, run, progress, workers, sink=sink):
            pass
    return sink.records(), run


def _load_capture_side(
    con,
    source: Sources,
    keys: list[tuple[str, DigestKey]],
    alg: Algorithm,
    strip: str,
    progress: ProgressFn | None,
    workers: int,
) -> DigestRun:
    """Recompute the captures once per digest key into tables cap0, cap1, ...; returns the first
    run's statistics (the frame counts are the same under every key)."""
    runs = []
    for i, (_, key) in enumerate(keys):
        phase = "recompute" if len(keys) == 1 else f"recompute (digest key {i + 1} of {len(keys)})"
        run = DigestRun()
        con.execute(
            f"CREATE TEMP TABLE cap{i} (index UBIGINT, ts_ns BIGINT, wire_len UINTEGER, "
            "cap_len UINTEGER, flags USMALLINT, linktype USMALLINT, digest BLOB)"
        )
        for one in source_list(source):
            if run.stopped is not None:  # a capture before this one could not be read to its end
                break
            for batch in _digest_batches(one, key, alg, strip, run, progress, workers, phase):
                con.register("_batch", batch)
                con.execute(f"INSERT INTO cap{i} SELECT * FROM _batch")
                con.unregister("_batch")
        runs.append(run)
    return runs[0]
