"""The verifier's side of window records (docs/adr/0012-window-commitments.md): compare a ledger's
window with the same window recomputed from a capture, and when they differ, subtract the two
invertible sketches and peel them into the digests only one side holds.

A decoded difference is reported only when it explains the frame counts and the keyed hashes
exactly (native lt_window_decode); otherwise the window is beyond the table's capacity and only
the count difference is known: never a guess. Without a shared clock the verdict is over a range
of windows: the sum of their unmasked hashes against the sum of F over the capture's frames.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._binding import check, ffi, lib
from ..digest.window import WindowKeys, WindowRecord

__all__ = ["RangeVerdict", "WindowDifference", "compare_windows", "range_verdict"]

_P = (1 << 127) - 1


@dataclass(frozen=True)
class WindowDifference:
    """One window, the ledger's record against the capture's. `equal`: same frames and the same
    keyed hash. Otherwise `decoded` says whether ledger_only / capture_only are the whole
    difference (exactly), or the window is beyond capacity (the lists are then empty)."""

    index: int
    ledger_frames: int
    capture_frames: int
    equal: bool
    decoded: bool
    ledger_only: tuple[bytes, ...] = ()
    capture_only: tuple[bytes, ...] = ()

    @property
    def frames_difference(self) -> int:
        return self.ledger_frames - self.capture_frames


def compare_windows(
    keys: WindowKeys, ledger: WindowRecord, capture: WindowRecord
) -> WindowDifference:
    """Compare two records of the same window, table shape and digest size (ValueError else)."""
    if (ledger.index, ledger.window_ns, ledger.cells, ledger.digest_size) != (
        capture.index,
        capture.window_ns,
        capture.cells,
        capture.digest_size,
    ):
        raise ValueError(
            f"window {ledger.index} ({ledger.cells} cells) is compared with window "
            f"{capture.index} ({capture.cells} cells)"
        )
    lo, co = ledger.unmask(keys), capture.unmask(keys)
    same = ledger.frames == capture.frames and lo[64:80] == co[64:80]
    if same:
        return WindowDifference(ledger.index, ledger.frames, capture.frames, True, True)
    room = ledger.cells  # a table of c cells never peels more than c elements
    dsize = ledger.digest_size
    lbuf, cbuf = ffi.new("uint8_t[]", room * dsize), ffi.new("uint8_t[]", room * dsize)
    nl, nc, complete = ffi.new("size_t *"), ffi.new("size_t *"), ffi.new("int *")
    check(
        lib.lt_window_decode(
            keys.element, lo, co, len(lo), lbuf, room, nl, cbuf, room, nc, complete
        ),
        "lt_window_decode",
    )
    if not complete[0]:
        return WindowDifference(ledger.index, ledger.frames, capture.frames, False, False)
    lb, cb = ffi.buffer(lbuf)[:], ffi.buffer(cbuf)[:]
    return WindowDifference(
        ledger.index,
        ledger.frames,
        capture.frames,
        False,
        True,
        tuple(lb[i * dsize : (i + 1) * dsize] for i in range(nl[0])),
        tuple(cb[i * dsize : (i + 1) * dsize] for i in range(nc[0])),
    )


@dataclass(frozen=True)
class RangeVerdict:
    """A range of windows against a capture without the device's clock: equal frames and equal
    sums of the keyed hash (the same F in every window, so frames need no window)."""

    windows: int
    ledger_frames: int
    capture_frames: int
    equal: bool


def range_verdict(
    keys: WindowKeys, ledger: list[WindowRecord], capture_value: int, capture_frames: int
) -> RangeVerdict:
    """`capture_value` is sum F(d) mod 2^127 - 1 over the capture's frames under keys.element
    (ledgertool.reconcile.msethash.MultisetHash(keys.element, ...).value)."""
    total = sum(r.hash_value(keys) for r in ledger) % _P
    frames = sum(r.frames for r in ledger)
    return RangeVerdict(
        len(ledger),
        frames,
        capture_frames,
        frames == capture_frames and total == capture_value % _P,
    )
