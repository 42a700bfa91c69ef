"""export: a verified ledger as a Parquet dataset that DuckDB, pyarrow, polars and Spark all read
correctly with one line (docs/interop.md).

The ledger's own files are laid out for the ledger, not for engines: `DIR/link=NAME/` looks like a
hive partition, so pyarrow, polars and Spark infer `link` from the path (as an integer when it
looks like one: link `0042` becomes 42); the directory also holds seals, leaf sidecars and
checkpoints, which make those readers fail; `ts_ns` has no timestamp type; and Spark reads the
uint64 `seq` as decimal(20,0). And those files are the storage's, which is the adversary's: only
what `verify` checked may be read (docs/threat-model.md).

So `export_dataset` verifies the ledger first, exactly as `query` does (the same `verify_ledger`
walk, `on_segment` handing over the checked bytes, decoded once), and writes each verified segment
as one file `OUT/part-NNNNNNNN.parquet` (numbered in (link, segment) order; no name comes from the
ledger) with the columns

    link string, segment uint32, seq int64, ts timestamp[us, UTC], ts_ns int64, wire_len uint32,
    cap_len uint32, flags uint16, linktype uint16, aux uint32, digest fixed_size_binary

`link` is a real column (from the verified seal), so nothing is inferred from a path. `ts` is
`ts_ns` floored to microseconds, null for GAP and NO_TIMESTAMP records; microseconds because Spark
(3.3 to 4.0) refuses a Parquet TIMESTAMP(NANOS) column outright, while `ts_ns` keeps the exact
value. `seq` is int64, which every engine reads as a plain integer; a ledger whose sequence numbers
pass 2^63 - 1 is refused. Nothing is left under OUT unless the whole ledger verified: the files go
into a private sibling directory that is renamed to OUT at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import fsio
from ..digest.record import FLAG_GAP, FLAG_NO_TIMESTAMP
from ..errors import DataError, UsageError
from ..keyfiles import TrustBundle
from ..urls import location
from ..verify.ledger import VerifiedSegment, VerifyResult, verify_ledger
from .query import not_verified_error

INT64_MAX = 2**63 - 1
TS_TYPE = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class ExportResult:
    """What `export_dataset` wrote: `files` Parquet files holding `rows` records of `links`."""

    out: str
    files: int
    rows: int
    links: tuple[str, ...]
    verification: VerifyResult


def export_table(seg: VerifiedSegment) -> pa.Table:
    """The verified segment in the export's columns (module docstring). DataError naming the
    segment when a sequence number does not fit int64."""
    t = seg.table
    seq = t.column("seq")
    top = pc.max(seq).as_py() if len(seq) else None
    if top is not None and top > INT64_MAX:
        raise DataError(
            f"link {seg.link} segment {seg.index}: seq {top} does not fit a signed 64-bit integer "
            f"(largest {INT64_MAX}); the export's seq column is int64, which every engine reads "
            "(a query's Parquet output keeps seq as uint64)"
        )
    ts_ns = t.column("ts_ns").to_numpy()
    no_time = (t.column("flags").to_numpy() & np.uint16(FLAG_GAP | FLAG_NO_TIMESTAMP)) != 0
    ts = pa.array(np.floor_divide(ts_ns, 1000), type=TS_TYPE, mask=no_time)
    return pa.table(
        {
            "link": pa.array([seg.link] * t.num_rows, type=pa.string()),
            "segment": t.column("segment"),
            "seq": seq.cast(pa.int64()),
            "ts": ts,
            "ts_ns": t.column("ts_ns"),
            **{
                name: t.column(name)
                for name in ("wire_len", "cap_len", "flags", "linktype", "aux", "digest")
            },
        }
    )


def _write(table: pa.Table, path: Path, shown: Path) -> None:
    """Write one file of the export; StorageError naming `shown` (its final path, not the
    stage's)."""
    try:
        with open(path, "xb") as f:
            pq.write_table(table, f)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise fsio.storage_error(e, shown, "write export file") from None


def export_dataset(
    ledger_dir: Path,
    out_dir: Path,
    trust: TrustBundle | None = None,
    checkpoint: bytes | None = None,
    checkpoint_name: str = "checkpoint",
    links: list[str] | None = None,
) -> ExportResult:
    """Verify the ledger (with `trust`, else the keyless checks, as `query`), then write its
    verified records to `out_dir` (which must not exist, or be an empty directory).

    UsageError when `out_dir` holds anything; DiscrepancyError (nothing written) when the ledger
    does not verify; LedgerFormatError when DIR is not a ledger or a link is not in it; DataError
    for a seq past int64; StorageError when the parent of `out_dir` cannot be used."""
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise UsageError(
            f"{out_dir}: exists and is not an empty directory; the export goes into a new one"
        )
    parent = out_dir.absolute().parent
    fsio.check_dir(parent)
    try:  # an error names the export's directory, never the stage's hidden temporary name
        stage = Path(
            tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=fsio.TMP_SUFFIX, dir=parent)
        )
    except OSError as e:
        raise fsio.storage_error(e, out_dir, "create the export directory") from None
    written: list[int] = []
    seen: list[str] = []

    def on_segment(seg: VerifiedSegment) -> None:
        table = export_table(seg)
        name = f"part-{len(written):08d}.parquet"
        _write(table, stage / name, out_dir / name)
        written.append(table.num_rows)
        if seg.link not in seen:
            seen.append(seg.link)

    try:
        res = verify_ledger(
            location(ledger_dir),
            trust,
            checkpoint,
            checkpoint_name,
            links=links,
            on_segment=on_segment,
        )
        if not res.ok:
            raise not_verified_error(res, "it is not exported")
        os.chmod(stage, 0o755)  # mkdtemp's 0700 kept others out while it was filled
        fsio.fsync_dir(stage)
        try:  # rename(2) replaces an empty directory and refuses one that was filled meanwhile
            os.rename(stage, out_dir)
        except OSError as e:
            raise fsio.storage_error(e, out_dir, "move the export into place") from None
        fsio.fsync_dir(parent)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return ExportResult(str(out_dir), len(written), sum(written), tuple(seen), res)
