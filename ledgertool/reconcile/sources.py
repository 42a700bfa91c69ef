"""The captures of a reconciliation: one path or workload spec, or several taken as one capture in
the order given; how a report names them and how large their files are."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..source.file import STDIN

__all__ = ["Sources", "capture_hint", "file_bytes", "source_list", "source_name"]

Sources = str | Path | Sequence[str | Path]


def source_list(source: Sources) -> list[str | Path]:
    """The captures of a run, in order: one path or workload spec, or several."""
    return [source] if isinstance(source, (str, Path)) else list(source)


def source_name(source: Sources) -> str:
    """How a run's captures are named in its report: the one source, or all of them,
    comma-separated."""
    return ", ".join(str(s) for s in source_list(source))


def file_bytes(source: str | Path) -> int:
    """The size of a capture file, 0 for anything else (a workload, standard input, a URL)."""
    try:
        return Path(source).stat().st_size if str(source) != STDIN and Path(source).is_file() else 0
    except (OSError, ValueError):
        return 0


def capture_hint(source: Sources) -> int:
    """The records to reserve for a side: a pcap has at least 16 + 60 bytes a whole Ethernet frame
    (RecordSink caps the reservation; untouched pages cost no memory)."""
    return sum(file_bytes(one) for one in source_list(source)) // 64
