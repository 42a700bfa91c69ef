"""bench rows: one measured figure (`BenchRow`), the bench CSV (schemas/bench.csv.schema.json)
and the rendered table cells, shared by the measuring code (bench.measure), the dashboard
(bench.dashboard) and the `bench` command (cli.bench)."""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import fsio
from ..errors import FileTypeError, StorageError, UsageError

CSV_FIELDS = [
    "time",
    "host",
    "cpu_model",
    "cpu_path",
    "cores",
    "benchmark",
    "algorithm",
    "size",
    "threads",
    "frames",
    "repeats",
    "seconds",
    "frames_per_s",
    "gbit_per_s",
    "ns_per_frame",
    "cv",
    "noisy",
    "tsc_ghz",
    "cycles_per_frame",
    "cycles_per_byte",
    "best_seconds",
    "cpu_seconds",
    "best_cpu_seconds",
    "best_ns_per_frame",
    "cpu_ns_per_frame",
    "best_cpu_ns_per_frame",
]
#: The best-of and CPU columns: empty in rows of CSVs written before them (None here).
OPTIONAL_TIMES = ("best_seconds", "cpu_seconds", "best_cpu_seconds")
#: Columns a CSV must have to be read back (the first published schema had exactly these).
CSV_REQUIRED = [
    "time",
    "host",
    "cpu_model",
    "cpu_path",
    "benchmark",
    "algorithm",
    "size",
    "threads",
    "frames",
    "seconds",
    "frames_per_s",
    "gbit_per_s",
    "ns_per_frame",
]
BENCHMARKS = (
    "digest",
    "capture:engine",
    "capture:sealed",
    "capture:sealed-blake3",
    "capture:windows",
    "capture:python-reference",
    "capture:tcpdump",
)
#: the sealed-capture benchmark of each leaf construction (`bench --leaf-hash`; ledger.json
#: `leaf_hash`): sha256 leaves keep the name the rows had before there was a choice
SEALED_BENCHMARKS = {"sha256": "capture:sealed", "blake3": "capture:sealed-blake3"}
#: Line rates for the "cores needed" figures: bits/s on the wire, each frame costing 20 more bytes
#: (preamble, start delimiter, inter-frame gap); 64-byte frames at 400G are 595.2 Mframes/s.
LINE_RATES = (("400G", 400e9), ("800G", 800e9), ("1.6T", 1.6e12))
WIRE_OVERHEAD = 20


@dataclass
class BenchRow:
    """One measured figure. `frames` counts messages of all threads in one timed run; `seconds` is
    the median wall time of such a run, `best_seconds` the shortest; `cpu_seconds` the median CPU
    time (user + system, every thread, and children such as tcpdump) of a run, `best_cpu_seconds`
    the least. On a shared machine other work only ever adds time: the best-of figures are the
    closest to the code's own cost, and CPU time leaves out the wait for a core. None: not measured
    (a CSV written before these columns)."""

    benchmark: str
    algorithm: str
    size: int  # message (frame) bytes
    threads: int
    frames: int
    seconds: float
    repeats: int = 1
    cv: float = 0.0
    noisy: bool = False
    time: str = ""
    host: str = ""
    cpu_model: str = ""
    cpu_path: str = "portable"  # native CPU path (engine.cpu_path), "python" for the reference rows
    cores: int = 0  # logical CPUs this process may run on; 0 = unknown (older CSV)
    tsc_ghz: float = 0.0  # measured TSC rate the cycle figures use; 0 = unknown
    best_seconds: float | None = None
    cpu_seconds: float | None = None
    best_cpu_seconds: float | None = None

    @property
    def cycles_per_frame(self) -> float:
        """Core cycles per frame (all threads' time), counted at the TSC rate: an invariant TSC
        ticks at the nominal clock, so under turbo the real core cycles are somewhat higher."""
        return self.ns_per_frame * self.threads * self.tsc_ghz

    @property
    def cycles_per_byte(self) -> float:
        return self.cycles_per_frame / self.size if self.size else 0.0

    def cores_needed(self, bits_per_s: float) -> float:
        """Cores at this row's per-thread rate to keep up with a link of `bits_per_s` of
        `size`-byte frames."""
        per_thread = self.frames_per_s / self.threads if self.threads else 0.0
        line_fps = bits_per_s / ((self.size + WIRE_OVERHEAD) * 8)
        return line_fps / per_thread if per_thread > 0 else math.inf

    @property
    def frames_per_s(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    @property
    def gbit_per_s(self) -> float:
        return self.frames_per_s * self.size * 8 / 1e9

    @property
    def ns_per_frame(self) -> float:
        return 1e9 / self.frames_per_s if self.frames_per_s > 0 else 0.0

    def _per_frame(self, seconds: float | None) -> float | None:
        return None if seconds is None or not self.frames else seconds * 1e9 / self.frames

    @property
    def best_ns_per_frame(self) -> float | None:
        """Wall ns per frame (aggregate, like ns_per_frame) of the fastest run."""
        return self._per_frame(self.best_seconds)

    @property
    def cpu_ns_per_frame(self) -> float | None:
        """CPU ns a frame costs (all threads' CPU time ÷ frames), median run."""
        return self._per_frame(self.cpu_seconds)

    @property
    def best_cpu_ns_per_frame(self) -> float | None:
        return self._per_frame(self.best_cpu_seconds)

    def to_csv(self) -> dict:
        d = asdict(self)
        d.update(
            frames_per_s=round(self.frames_per_s, 1),
            gbit_per_s=round(self.gbit_per_s, 4),
            ns_per_frame=round(self.ns_per_frame, 3),
            seconds=float(f"{self.seconds:.9g}"),
            cv=round(self.cv, 5),
            noisy="true" if self.noisy else "false",
            tsc_ghz=round(self.tsc_ghz, 4),
            cycles_per_frame=round(self.cycles_per_frame, 2),
            cycles_per_byte=round(self.cycles_per_byte, 4),
        )
        for name in OPTIONAL_TIMES:
            d[name] = "" if d[name] is None else float(f"{d[name]:.9g}")
        for name in ("best_ns_per_frame", "cpu_ns_per_frame", "best_cpu_ns_per_frame"):
            v = getattr(self, name)
            d[name] = "" if v is None else round(v, 3)
        return {k: d[k] for k in CSV_FIELDS}

    def to_json(self) -> dict:
        d = self.to_csv()
        d["noisy"] = self.noisy
        return {k: None if v == "" and k in JSON_NULLABLE else v for k, v in d.items()}


JSON_NULLABLE = frozenset(CSV_FIELDS[CSV_FIELDS.index("best_seconds") :])


@dataclass(frozen=True)
class CaptureRatio:
    """capture:sealed ÷ capture:engine of one algorithm, frame size and worker count, from rows of
    one host: what sealing costs on top of digesting, per frame. `cpu` compares the least CPU
    time per frame, `wall` the best wall time (None where a row lacks it, or without a
    capture:sealed row). `windows_cpu`: capture:windows ÷ capture:engine, CPU (None without a
    capture:windows row); `sealed_blake3_cpu`: capture:sealed-blake3 ÷ capture:engine, CPU (None
    without a capture:sealed-blake3 row)."""

    algorithm: str
    size: int
    workers: int
    engine_cpu_ns: float | None
    sealed_cpu_ns: float | None
    cpu: float | None
    wall: float | None
    windows_cpu_ns: float | None = None
    windows_cpu: float | None = None
    sealed_blake3_cpu_ns: float | None = None
    sealed_blake3_cpu: float | None = None

    def to_json(self) -> dict:
        return asdict(self)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def _ns(v: float | None) -> float | None:
    return None if v is None else round(v, 3)  # as the CSV writes it


def capture_ratios(rows: list[BenchRow]) -> list[CaptureRatio]:
    """capture:sealed and capture:sealed-blake3 ÷ capture:engine for every (host, algorithm, size,
    workers) measured with the engine and at least one of the two (the last row of each when a CSV
    holds several runs), in the order the sealed rows first appear."""
    wanted = ("capture:engine", *SEALED_BENCHMARKS.values(), "capture:windows")
    latest: dict[tuple, BenchRow] = {}
    keys: dict[tuple, None] = {}  # (host, algorithm, size, workers) with a sealed row, in order
    for r in rows:
        if r.benchmark not in wanted:
            continue
        key = (r.host, r.algorithm, r.size, r.threads)
        latest[(r.benchmark, *key)] = r
        if r.benchmark in SEALED_BENCHMARKS.values():
            keys.setdefault(key)
    out = []
    for key in keys:
        e = latest.get(("capture:engine", *key))
        if e is None:
            continue
        s, b, w = (
            latest.get((name, *key)) for name in (*SEALED_BENCHMARKS.values(), "capture:windows")
        )
        e_cpu = e.best_cpu_ns_per_frame
        s_cpu, b_cpu, w_cpu = (None if x is None else x.best_cpu_ns_per_frame for x in (s, b, w))
        out.append(
            CaptureRatio(
                e.algorithm,
                e.size,
                e.threads,
                _ns(e_cpu),
                _ns(s_cpu),
                _ratio(s_cpu, e_cpu),
                None if s is None else _ratio(s.best_ns_per_frame, e.best_ns_per_frame),
                _ns(w_cpu),
                _ratio(w_cpu, e_cpu),
                _ns(b_cpu),
                _ratio(b_cpu, e_cpu),
            )
        )
    return out


def human_size(n: int) -> str:
    """64 -> "64 B", 65536 -> "64 KiB", 33554432 -> "32 MiB"; sizes not a whole KiB stay in
    bytes."""
    for div, unit in ((1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def append_csv(path: Path, rows: list[BenchRow]) -> None:
    """Append rows; the header is written to a new or empty file only. A file whose header is not
    this schema's is refused (appending would misalign its columns). The file is rewritten whole
    (fsio.write_atomic: old rows, then the new ones), so an interrupted run leaves the old file."""
    old = fsio.read_regular(path, follow=True, what="bench CSV") if os.path.lexists(path) else b""
    if old:
        header = next(csv.reader(io.StringIO(old.decode("utf-8", errors="replace"))), [])
        if header != CSV_FIELDS:
            raise UsageError(
                f"{path}: its header is not the current bench CSV schema "
                f"(schemas/bench.csv.schema.json); write to a new file"
            )
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    if not old:
        w.writeheader()
    for r in rows:
        w.writerow(r.to_csv())
    fsio.write_atomic(path, old + buf.getvalue().encode(), what="bench CSV")


def from_record(rec: dict) -> BenchRow:
    """A row from one CSV record (strings); columns added after the first schema are optional."""
    return BenchRow(
        benchmark=rec["benchmark"],
        algorithm=rec["algorithm"],
        size=int(rec["size"]),
        threads=int(rec["threads"]),
        frames=int(rec["frames"]),
        seconds=float(rec["seconds"]),
        repeats=int(rec.get("repeats") or 1),
        cv=float(rec.get("cv") or 0.0),
        noisy=str(rec.get("noisy") or "false").strip().lower() == "true",
        time=rec["time"],
        host=rec["host"],
        cpu_model=rec["cpu_model"],
        cpu_path=rec["cpu_path"],
        cores=int(rec.get("cores") or 0),
        tsc_ghz=float(rec.get("tsc_ghz") or 0.0),
        **{name: _optional_float(rec.get(name)) for name in OPTIONAL_TIMES},
    )


def _optional_float(text: str | None) -> float | None:
    """A column added later: empty or absent is None (not measured)."""
    return float(text) if text not in (None, "") else None


def read_csv(path: Path) -> list[BenchRow]:
    """Rows of a bench CSV (this schema, or an earlier one without cores/repeats/cv/noisy, the
    cycle columns or the best-of and CPU columns: those read as unknown).

    `seconds` and `frames` are taken as written; UsageError naming the file and line otherwise."""
    try:
        raw = fsio.read_regular(path, follow=True, what="bench CSV")
    except (StorageError, FileTypeError) as e:
        raise UsageError(str(e)) from None
    rows = []
    with io.StringIO(raw.decode("utf-8", errors="replace"), newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in CSV_REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise UsageError(f"{path}: not a bench CSV (missing columns: {', '.join(missing)})")
        width = len(reader.fieldnames or [])
        for rec in reader:
            line = reader.line_num
            # DictReader fills a short line with None and keeps a long one's extras under None
            fields = sum(v is not None for k, v in rec.items() if k is not None)
            fields += len(rec.get(None) or [])
            if fields != width:
                raise UsageError(f"{path}: line {line}: {fields} fields, the header has {width}")
            try:
                row = from_record(rec)
            except (TypeError, ValueError) as e:
                raise UsageError(f"{path}: line {line}: bad value ({e})") from None
            if (
                row.benchmark not in BENCHMARKS
                or row.size < 0
                or row.threads < 1
                or row.frames < 1
                or not (math.isfinite(row.seconds) and row.seconds > 0)
                or any(
                    v is not None and not (math.isfinite(v) and v >= 0)
                    for v in (row.best_seconds, row.cpu_seconds, row.best_cpu_seconds)
                )
            ):
                raise UsageError(f"{path}: line {line}: not a valid bench row")
            rows.append(row)
    if not rows:
        raise UsageError(f"{path}: no bench rows")
    return rows


# --------------------------------------------------------------------------- table


def table_cells(r: BenchRow, rows: list[BenchRow]) -> list[str]:
    """One rendered row: rates, cycles (at the TSC rate), cores needed per line rate, noise, and
    the speed-up over the pure-Python reference of the same frame size."""
    ref = next(
        (
            x
            for x in rows
            if x.benchmark == "capture:python-reference" and x.size == r.size and x.host == r.host
        ),
        None,
    )
    ratio = (
        f"{r.frames_per_s / ref.frames_per_s:,.0f}"
        if ref and r.benchmark.startswith("capture")
        else ""
    )
    cv = f"{r.cv * 100:.1f}%" + (" noisy" if r.noisy else "")
    cyc = r.tsc_ghz > 0
    return [
        r.benchmark,
        r.algorithm,
        r.cpu_path,
        human_size(r.size),
        str(r.threads),
        f"{r.frames_per_s / 1e6:.2f}",
        f"{r.gbit_per_s:.2f}",
        f"{r.ns_per_frame:.1f}",
        ns_text(r.best_ns_per_frame),
        ns_text(r.cpu_ns_per_frame),
        ns_text(r.best_cpu_ns_per_frame),
        f"{r.cycles_per_frame:,.0f}" if cyc else "?",
        f"{r.cycles_per_byte:.2f}" if cyc else "?",
        *(f"{r.cores_needed(bps):,.1f}" for _, bps in LINE_RATES),
        cv,
        ratio,
    ]


def ns_text(v: float | None) -> str:
    """A per-frame figure of the table; empty where the row has none (an older CSV)."""
    return "" if v is None else f"{v:,.1f}"


def ratio_text(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}×"


#: the table's columns (table_cells): wall ns/frame median and best, CPU ns/frame median and best
TABLE_HEAD = (
    "benchmark",
    "algorithm",
    "path",
    "size",
    "threads",
    "Mframes/s",
    "Gbit/s",
    "ns/frame",
    "best ns/frame",
    "CPU ns/frame",
    "best CPU ns/frame",
    "cycles/frame",
    "cycles/B",
    *(f"cores {n}" for n, _ in LINE_RATES),
    "cv",
    "x Python",
)


#: the columns of the sealed (sha256 and blake3 leaves) and windows ÷ engine table
#: (capture_ratios, ratio_cells), in the CLI and the dashboard alike
RATIO_HEAD = (
    "algorithm",
    "size",
    "workers",
    "engine CPU ns/frame",
    "sealed CPU ns/frame",
    "sealed ÷ engine, CPU",
    "sealed ÷ engine, wall",
    "sealed-blake3 CPU ns/frame",
    "sealed-blake3 ÷ engine, CPU",
    "windows CPU ns/frame",
    "windows ÷ engine, CPU",
)


def ratio_cells(c: CaptureRatio) -> list[str]:
    """One rendered row of the ratio table (RATIO_HEAD); empty cells for what was not measured."""
    return [
        c.algorithm,
        human_size(c.size),
        str(c.workers),
        ns_text(c.engine_cpu_ns),
        ns_text(c.sealed_cpu_ns),
        ratio_text(c.cpu),
        ratio_text(c.wall),
        ns_text(c.sealed_blake3_cpu_ns),
        ratio_text(c.sealed_blake3_cpu),
        ns_text(c.windows_cpu_ns),
        ratio_text(c.windows_cpu),
    ]


def markdown_table(rows: list[BenchRow]) -> str:
    """The bench table as GitHub Markdown (docs/benchmarks.md), cells as text (markdown_text)."""
    head = list(TABLE_HEAD)
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(map(markdown_text, table_cells(r, rows))) + " |" for r in rows]
    return "\n".join(out) + "\n"


_MD_ESCAPES = {c: "\\" + c for c in "\\`*_[]|!#~"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def markdown_text(text: str) -> str:
    """`text` (a CSV field: untrusted) as literal Markdown table-cell text: HTML's `<`, `>`, `&` as
    entities, Markdown's punctuation escaped, line breaks and other controls as spaces, so a cell
    can neither end the row nor carry a tag, link or image into the rendered page."""
    return "".join(
        " "
        if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029"
        else _MD_ESCAPES.get(c, c)
        for c in text
    )
