"""Frame sources by name: what `capture` and `recompute` accept as SOURCE.

    iface:NAME          a live interface (AF_PACKET TPACKET_V3 ring; ledgertool.live)
    workload:SPEC.toml  frames from the deterministic workload generator (ledgertool.workload)
    anything else       a pcap/pcapng file (ledgertool.engine.CaptureReader)

Every source is a native lt_reader underneath, so the engine treats them alike.
"""

from __future__ import annotations

import os

from .engine import CaptureReader

LIVE_PREFIX = "iface:"
WORKLOAD_PREFIX = "workload:"


def is_live(source) -> bool:
    return isinstance(source, str) and source.startswith(LIVE_PREFIX)


def is_workload(source) -> bool:
    return isinstance(source, str) and source.startswith(WORKLOAD_PREFIX)


def open_source(source: str | os.PathLike, live=None) -> CaptureReader:
    """Open SOURCE as a reader. `live` (ledgertool.live.LiveOptions) tunes an `iface:` source.

    Raises CaptureFormatError, WorkloadSpecError or InterfaceError (all exit 2) for bad sources."""
    if is_live(source):
        from .live import LiveReader

        return LiveReader(source, live)
    if is_workload(source):
        from .workload import open_workload

        return open_workload(source[len(WORKLOAD_PREFIX):])
    return CaptureReader(source)
