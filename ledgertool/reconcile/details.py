"""recompute's --details file: one JSON line per differing frame, in one order on one machine and
on a cluster; capture-only frames get a one-line dissection of their bytes."""

from __future__ import annotations

import json
from pathlib import Path

from .. import fsio
from ..errors import CaptureFormatError
from ..source import open_source
from ..source.file import STDIN
from .dissect import dissect_line
from .sources import Sources, source_list

__all__ = ["DETAILS_ORDER", "frames_by_index", "write_details"]

# the order of --details lines; `link` last makes it total (two links' records may share a time
# and a sequence number), so a cluster's merged partitions give the same file
# the order of --details lines; `link` last makes it total (two links' records may share a time
# and a sequence number), so a cluster's merged partitions give the same file
DETAILS_ORDER = "status, coalesce(l_ts, c_ts), index, seq, link"


def write_details(con, details: Path, source: Sources, limit: int) -> int:
    """One JSON line per differing frame; capture-only frames get a dissection of their bytes."""
    rows = con.execute(
        f"""SELECT status, lower(hex(digest)), link, seq, l_ts, l_wire, index, c_ts, c_wire, cap_len
        FROM j WHERE status <> 'matched' ORDER BY {DETAILS_ORDER} LIMIT ?""",
        [limit],
    ).fetchall()
    frames = frames_by_index(source, {int(r[6]) for r in rows if r[0] == "capture_only"})
    with fsio.atomic_file(details, what="details file") as out:
        for status, digest, link, seq, l_ts, l_wire, index, c_ts, c_wire, cap_len in rows:
            if status == "ledger_only":
                doc = {
                    "status": status,
                    "digest": digest,
                    "link": link,
                    "seq": str(seq),
                    "ts_ns": str(l_ts),
                    "wire_len": int(l_wire),
                }
            else:
                f = frames.get(int(index))
                doc = {
                    "status": status,
                    "digest": digest,
                    "index": int(index),
                    "ts_ns": str(c_ts),
                    "wire_len": int(c_wire),
                    "cap_len": int(cap_len),
                    "summary": dissect_line(f.data, f.linktype) if f else None,
                }
            out.write((json.dumps(doc) + "\n").encode())
    return len(rows)


def frames_by_index(source: Sources, wanted: set[int]) -> dict:
    """The frames (source.file.Frame, `index` within its file) with these indexes across the
    captures, by index: a file copies only the batches that hold one (frames_at), a workload is
    generated again; standard input, read once by the digests, gives none."""
    frames: dict = {}
    base = 0  # the first frame index of each capture: indexes continue across the captures
    for one in source_list(source) if wanted else ():
        if str(one) == STDIN:
            break
        with open_source(one) as reader:
            mine = {i - base for i in wanted if i >= base}
            try:
                if hasattr(reader, "frames_at"):
                    found = reader.frames_at(mine).values()
                else:
                    found = (f for f in reader.frames() if f.index in mine)
                for f in found:
                    frames[base + f.index] = f
                    if len(frames) == len(wanted):
                        break
            except CaptureFormatError:
                pass  # frames after a corrupt structure were never digested either
            base += reader.info().frames
        if len(frames) == len(wanted):
            break
    return frames
