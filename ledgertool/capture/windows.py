"""The window tier of a capture: the engine's record batches also feed one window accumulator per
link, and the window records it closes go to the link's window log (layout.window_log), sealed
by a LinkWriter like the link's own segments (docs/ledger-format.md, "Window logs";
docs/adr/0012-window-commitments.md).

The window length and table are the ledger's (ledger.json `window`), so every capture into it
keys and shapes its windows alike; a window index is never emitted twice for a link, across
captures too: a capture whose first record falls in or before the link's last sealed window is
refused before anything of it is written (the pad of that index would be used twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._binding import ffi
from ..digest.window import WindowAccumulator, WindowKeys, WindowRecord
from ..errors import UsageError
from ..keyfiles import DigestKey, SigningKey
from ..ledger import layout
from ..ledger.devstate import LedgerMarks
from ..ledger.header import LedgerHeader
from ..ledger.index import segment_files
from ..ledger.sealer import SealResult, load_seal
from ..ledger.writer import LinkWriter

# numpy is imported where records are handled: a v2 capture of frames alone loads none
if TYPE_CHECKING:
    import numpy as np

#: cffi memory not cleared after allocation (a large one is fresh pages: writing it faults them in
#: once, where clearing first would fault them all in and then write them again)
_new_unzeroed = ffi.new_allocator(should_clear_after_alloc=False)

#: window records per window segment: an hour of 1 s windows (23 MB at capacity 64)
WINDOWS_PER_SEGMENT = 3600


@dataclass(frozen=True)
class WindowTierResult:
    """What the window tier of one capture wrote (capture --json `windows`)."""

    log: str
    windows: int
    frames: int
    first_index: int | None
    last_index: int | None
    segments: tuple[int, ...]

    def to_json(self) -> dict:
        return {
            "log": self.log,
            "windows": self.windows,
            "frames": self.frames,
            "first_index": None if self.first_index is None else str(self.first_index),
            "last_index": None if self.last_index is None else str(self.last_index),
            "segments": list(self.segments),
        }


def last_window_index(ledger_dir: Path, ledger: LedgerHeader, link: str) -> int | None:
    """The index of the last window sealed in the link's window log, None when it has none (the
    last seal's last_ts_ns is that window's start; seals are trusted here, `verify` checks them)."""
    log = layout.window_log(link)
    files = segment_files(ledger_dir, log)
    sealed = sorted(i for i, f in files.items() if layout.SEAL in f)
    if not sealed:
        return None
    doc = load_seal(files[sealed[-1]][layout.SEAL], ledger_dir)
    start = doc.last_ts_ns
    return None if start is None else int(start) // ledger.window.window_ns


class NoFrameLog:
    """A windows-only capture's stand-in for the link's per-frame LinkWriter: the records are
    numbered from next_seq and filled into one reused batch buffer, then only windowed. No
    segment, seal, checkpoint or thread (the window log's own LinkWriter seals the windows); the
    loop asks it what it asks a LinkWriter, and it answers as a writer that keeps nothing."""

    def __init__(self, segment_records: int, segment_seconds: float | None):
        self.segment_records = segment_records  # a pass of several live workers is cut at it
        self.segment_seconds = segment_seconds
        self.next_seq = 0  # a windows-only ledger keeps no per-frame seal to continue from
        self.next_index = 0
        self.source = ""
        self.sealed: list[SealResult] = []
        self.sealed_records = 0
        self.open_index: int | None = None
        self.open_records = 0
        self._buffer: ffi.CData | None = None

    def room(self) -> int:
        return self.segment_records

    def batch_buffer(self, nbytes: int) -> ffi.CData:
        """The one buffer each batch is filled into (nothing holds a batch after it is windowed).
        Not zeroed: the engine writes every record handed out before it is read."""
        if self._buffer is None or len(self._buffer) < nbytes:
            self._buffer = _new_unzeroed("uint8_t[]", nbytes)
        return self._buffer

    def due(self, records: int, opened_at: float, now: float) -> bool:
        return records >= self.segment_records or (
            self.segment_seconds is not None and now - opened_at >= self.segment_seconds
        )

    def rotate_if_due(self) -> None:
        pass

    def end_segment(self) -> None:
        pass

    def drain(self) -> None:
        pass

    def checkpoint(self) -> None:
        pass

    def sealed_range(self) -> str | None:
        return None

    def close(self) -> None:
        pass


class WindowTier:
    """One link's window accumulator and window-log writer for the length of a capture."""

    def __init__(
        self,
        ledger_dir: Path,
        ledger: LedgerHeader,
        link: str,
        signing_key: SigningKey,
        digest_key: DigestKey,
        *,
        source: str,
        segment_seconds: float | None,
        marks: LedgerMarks | None = None,
    ):
        params = ledger.window
        self.window_ns = params.window_ns
        self.keys = WindowKeys.derive(
            digest_key.master, ledger.algorithm, ledger.ledger_id, link, params.window_ns
        )
        self.last_sealed = last_window_index(ledger_dir, ledger, link)
        self.acc = WindowAccumulator(
            self.keys, ledger.digest_size, window_ns=params.window_ns, cells=params.cells
        )
        self.writer = LinkWriter.open(
            ledger_dir,
            ledger,
            layout.window_log(link),
            signing_key,
            source=source,
            segment_records=WINDOWS_PER_SEGMENT,
            segment_seconds=segment_seconds,
            marks=marks,
        )
        self._checked = False
        self.windows = self.frames = 0
        self.first_index: int | None = None
        self.last_index: int | None = None

    def check_start(self, first_ts_ns: int) -> None:
        """Before the first batch is written anywhere, with its first record's ts_ns: UsageError
        when that record's window is at or before the last window sealed for the link (that
        window's pad would be reused)."""
        if self._checked:
            return
        self._checked = True
        first = first_ts_ns // self.window_ns
        if self.last_sealed is not None and first <= self.last_sealed:
            raise UsageError(
                f"{self.writer.ledger_dir}: link {self.writer.window_link}: the first frame falls "
                f"in window {first}, at or before window {self.last_sealed}, the last the ledger "
                "sealed for this link; a window is committed once (its one-time pad would be "
                "reused), so nothing was captured: capture into another link or a new ledger"
            )

    def add(self, records: np.ndarray) -> None:
        """A batch of the engine's records (capture order): the windows it closed are appended."""
        self._append(self.acc.add(records))

    def add_filled(self) -> None:
        """The batch the engine just filled with `acc` (DigestEngine.fill's `window`) was added
        as it was digested: the windows it closed are appended."""
        self._append(self.acc.take_closed())

    def add_records(self, windows: list[WindowRecord]) -> None:
        """Window records a device computed (an authenticated stream verified them, and that
        their indices increase past the link's last sealed window): appended as they are."""
        self._append(windows)

    def _append(self, windows: list[WindowRecord]) -> None:
        if not windows:
            return
        self.writer.append_windows(windows)
        self.windows += len(windows)
        self.frames += sum(w.frames for w in windows)
        if self.first_index is None:
            self.first_index = windows[0].index
        self.last_index = windows[-1].index
        self.writer.rotate_if_due()

    def finish(self) -> None:
        """The open window's record, the last segment sealed, the window log's checkpoint."""
        self._append(self.acc.finish())
        self.writer.end_segment()
        self.writer.drain()
        # the seal of the last segment signed the checkpoint over the chain as it now stands
        # (LinkWriter._seal_job; a window log's is not DIR/checkpoint): no second signature

    @property
    def sealed(self) -> list[SealResult]:
        return self.writer.sealed

    def result(self) -> WindowTierResult:
        return WindowTierResult(
            self.writer.link,
            self.windows,
            self.frames,
            self.first_index,
            self.last_index,
            tuple(s.index for s in self.writer.sealed),
        )

    def close(self) -> None:
        self.writer.close()
