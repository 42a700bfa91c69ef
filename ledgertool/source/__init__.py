"""Frame sources by name: what `capture` and `recompute` accept as SOURCE.

    iface:NAME          a live interface (AF_PACKET TPACKET_V3 ring; ledgertool.source.live)
    xdp:NAME[:QUEUE]    a live interface through AF_XDP sockets (ledgertool.source.bypass)
    dpdk:PORT           a DPDK port, set up with --eal (ledgertool.source.bypass)
    workload:SPEC.toml  frames from the workload generator (ledgertool.source.workload)
    records:FILE, records:-  not frames but records computed elsewhere: `capture` only
                        (ledgertool.source.records.RecordsReader, which it opens itself)
    -                   a pcap/pcapng capture on standard input (gzip/xz/zstd-compressed too)
    SCHEME://...        a capture at an fsspec URL, streamed (ledgertool.source.remote)
    anything else       a pcap/pcapng/ERF file, gzip/xz/zstd-compressed too
                        (ledgertool.source.file.open_capture)

Every source is a native lt_reader underneath, so the engine treats them alike.
"""

from __future__ import annotations

import os

from ..errors import UsageError
from ..urls import UrlPath, is_url, location
from .bypass import open_bypass
from .file import CaptureReader, open_capture
from .live import IFACE_PREFIX as LIVE_PREFIX
from .live import LiveReader
from .records import is_records
from .remote import open_remote_capture
from .workload import WORKLOAD_PREFIX, open_workload

BYPASS_PREFIXES = ("xdp:", "dpdk:")


def is_live(source) -> bool:
    """A source that runs until stopped (AF_PACKET, AF_XDP, DPDK), not one that ends."""
    return isinstance(source, str) and source.startswith((LIVE_PREFIX, *BYPASS_PREFIXES))


def is_bypass(source) -> bool:
    return isinstance(source, str) and source.startswith(BYPASS_PREFIXES)


def is_workload(source) -> bool:
    return isinstance(source, str) and source.startswith(WORKLOAD_PREFIX)


def open_source(source: str | os.PathLike, live=None) -> CaptureReader:
    """Open SOURCE as a reader. `live` (ledgertool.source.live.LiveOptions) tunes an `iface:`
    source.

    Raises CaptureFormatError, WorkloadSpecError or InterfaceError (all exit 2) for bad sources,
    UsageError for a records: source (records, not frames: nothing here digests them)."""
    if is_records(source):
        raise UsageError(
            f"{source}: holds records computed elsewhere, not frames; only `capture` takes it"
        )
    if is_bypass(source):
        return open_sources(source, live, 1)[0]
    if is_live(source):
        return LiveReader(source, live)
    if is_workload(source):
        return open_workload(source[len(WORKLOAD_PREFIX) :])
    if is_url(source):  # file://PATH is the local PATH
        where = location(source)
        return open_remote_capture(where) if isinstance(where, UrlPath) else open_capture(where)
    return open_capture(source)


def open_sources(source: str, live, n: int) -> list:
    """`n` readers of one live SOURCE for `n` capture workers: AF_PACKET rings in one fanout group,
    AF_XDP sockets on n consecutive queues, or n RX queues of a DPDK port."""
    if is_bypass(source):
        return open_bypass(source, live, n)
    readers = []
    try:
        for _ in range(n):
            readers.append(open_source(source, live))
    except BaseException:
        for r in readers:
            r.close()
        raise
    return readers
