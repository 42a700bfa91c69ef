"""Capacity planning: digest collision odds and ledger storage, as pure math.

Implements the `ledgertool plan` formulas of docs/plan.md (the commands: docs/cli.md,
"plan collision, plan storage"):

* frames per second on a saturated Ethernet link, with 20 bytes of per-frame wire
  overhead (7 preamble + 1 SFD + 12 inter-frame gap) on top of the frame size
  (the frame size counts destination MAC through FCS, so the minimum frame is 64);
* the birthday bound for a B-bit digest: expected frames to the first collision
  E = sqrt(pi * 2^B / 2), and P(at least one collision among n frames)
  = 1 - exp(-n(n-1) / 2^(B+1)), evaluated as -expm1(...) so that probabilities
  far below machine epsilon (1e-30 and smaller) are kept instead of rounding to 0;
* storage for ledger records: frames/s x record bytes, per link and for all links;
* the window tier: one record per link and window (docs/adr/0012), its bytes and the union bound
  of its false matches over every window compared.

Nothing here prints or reads files. Bad values raise `ledgertool.errors.UsageError`
with a one-line message, because every value reaching this module comes from a
command-line option.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from .errors import Setting, UsageError

# --------------------------------------------------------------------------- constants

#: Per-frame bytes on the wire besides the frame: 7 preamble + 1 SFD + 12 inter-frame gap.
WIRE_OVERHEAD_BYTES = 20
#: Smallest Ethernet frame (destination MAC through FCS).
MIN_FRAME_BYTES = 64

SECONDS_PER_MINUTE = 60.0
SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
SECONDS_PER_WEEK = 7 * SECONDS_PER_DAY
#: A Julian year, 365.25 days.
SECONDS_PER_YEAR = 365.25 * SECONDS_PER_DAY

#: Bytes of a ledger record besides the digest (seq, ts, lengths, flags; docs/ledger-format.md).
RECORD_FIXED_BYTES = 32
#: Digest size of the default (128-bit) ledger algorithms.
DEFAULT_DIGEST_BYTES = 16

#: Simple IMIX, 7:4:1 by frame count of 40-, 576- and 1500-byte IP packets, i.e. Ethernet
#: frames (14-byte header + 4-byte FCS, padded to 64) of 64, 594 and 1518 bytes.
#: Source: "Internet Mix", https://en.wikipedia.org/wiki/Internet_Mix (Simple IMIX row);
#: the same 40/576/1500 @ 7/4/1 mix is used by iperf's IMIX mode (esnet/iperf PR #1576).
SIMPLE_IMIX: tuple[tuple[int, int], ...] = ((64, 7), (594, 4), (1518, 1))
#: Mean frame size of SIMPLE_IMIX: 4342 / 12 = 361.8333... bytes.
IMIX_MEAN_FRAME_BYTES = sum(size * weight for size, weight in SIMPLE_IMIX) / sum(
    weight for _, weight in SIMPLE_IMIX
)

# Digest widths are whole bytes (ledger digests are 16 or 32 bytes; header.digest_size counts
# bytes). 8..1024 keeps every figure finite: sqrt(pi/2) * 2^(B/2) is computed so 1024 bits fit.
MIN_BITS = 8
MAX_BITS = 1024
# Upper bounds keep every derived figure finite (so --json never meets inf or nan), and so do
# the floors of a frame rate: E / frames_per_second overflows a double for a 1024-bit digest
# below ~1e-154 frames/s (a rate of 1e-200 bit/s, or a frame of 1e300 bytes).
MAX_RATE_BPS = 1e18
MIN_RATE_BPS = 1.0
MAX_PPS = 1e18
MIN_PPS = 1e-6
MAX_FRAME_BYTES = 1e6
_PPS = ("frames per second (", Setting("pps"), ")")  # how the frame rate is named in errors
MAX_DURATION_SECONDS = 1e9 * SECONDS_PER_YEAR
MAX_LINKS = 1_000_000
MAX_RECORD_BYTES = 1_000_000

_NUMBER = r"(?P<num>[0-9]+(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?|\.[0-9]+(?:e[+-]?[0-9]+)?)"

_RATE_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
_RATE_RE = re.compile(
    rf"^{_NUMBER}\s*(?P<prefix>[kmgtp]?)\s*(?P<suffix>bps|bit/s|bits/s|bits|bit|b)?$"
)

_DURATION_UNIT = {
    "": 1.0,
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "m": SECONDS_PER_MINUTE,
    "min": SECONDS_PER_MINUTE,
    "h": SECONDS_PER_HOUR,
    "d": SECONDS_PER_DAY,
    "w": SECONDS_PER_WEEK,
    "y": SECONDS_PER_YEAR,
}
_DURATION_RE = re.compile(rf"^{_NUMBER}\s*(?P<unit>[a-zµ]*)$")


# --------------------------------------------------------------------------- parsing


def _finite_positive(
    value: float,
    what: str | tuple[str, ...],
    text: str,
    limit: float = math.inf,
    floor: float = 0.0,
) -> float:
    what = (what,) if isinstance(what, str) else what
    if not math.isfinite(value) or value <= 0:
        raise UsageError(*what, f" must be a positive finite number, got {text!r}")
    if value > limit:
        raise UsageError(*what, f" {text!r} is beyond the planner's limit of {limit:g}")
    if value < floor:
        raise UsageError(*what, f" {text!r} is below the planner's floor of {floor:g}")
    return value


def parse_rate(text: str) -> float:
    """Line rate in bits per second from "400G", "1.6T", "10M", "25gbps", "100e9", ...

    Prefixes are decimal (k, M, G, T, P; case-insensitive); an optional "b", "bit",
    "bps" or "bit/s" suffix means bits (never bytes).
    """
    match = _RATE_RE.match(text.strip().lower())
    if match is None:
        raise UsageError(
            f"bad rate {text!r}: expected a number with an optional k/M/G/T/P prefix "
            "and optional 'bps', e.g. 400G, 1.6T, 25Gbps, 1e9"
        )
    value = float(match["num"]) * _RATE_PREFIX[match["prefix"]]
    return _finite_positive(value, "rate", text, MAX_RATE_BPS, MIN_RATE_BPS)


def parse_duration(
    text: str,
    setting: str = "duration",
    limit: tuple[float, str] = (MAX_DURATION_SECONDS, "1e9 years"),
) -> float:
    """Duration in seconds from "1y", "30d", "12h", "1.5h", "90s", "15min", "2w", "500ms", "3600".

    A bare number is seconds; "m" and "min" are minutes; "y" is a Julian year (365.25 days).
    Errors name `setting`, the parameter (so the CLI names its option); `limit` is the longest
    duration taken, in seconds and as the error says it (the setting's own, not the planner's).
    """
    match = _DURATION_RE.match(text.strip().lower())
    if match is None or match["unit"] not in _DURATION_UNIT:
        raise UsageError(
            Setting(setting),
            f": bad duration {text!r}: expected a number with an optional unit "
            "ns/us/ms/s/min/h/d/w/y, e.g. 1y, 30d, 1.5h, 90",
        )
    value = float(match["num"]) * _DURATION_UNIT[match["unit"]]
    seconds, said = limit
    if math.isfinite(value) and value > seconds:
        raise UsageError(Setting(setting), f" {text!r} is longer than {said}, the longest taken")
    return _finite_positive(value, Setting(setting), text)


_PPS_RE = re.compile(rf"^{_NUMBER}\s*(?P<prefix>[kmgtp]?)\s*(?P<suffix>pps|fps|/s)?$")


def parse_pps(text: str) -> float:
    """Frames per second from "595238095", "600M", "1.2e9", "25kpps" (decimal prefixes)."""
    match = _PPS_RE.match(text.strip().lower())
    if match is None:
        raise UsageError(
            f"bad frame rate {text!r}: expected frames per second, e.g. 595238095, 600M, 1.2e9"
        )
    value = float(match["num"]) * _RATE_PREFIX[match["prefix"]]
    return _finite_positive(value, _PPS, text, MAX_PPS, MIN_PPS)


@dataclass(frozen=True)
class FrameSize:
    """A frame size (`label` as given, e.g. "64" or "imix") and its mean size in bytes."""

    label: str
    mean_bytes: float


def parse_frame(text: str) -> FrameSize:
    """Frame size: a byte count (64 .. any jumbo size, FCS included) or "imix" (simple IMIX)."""
    label = text.strip().lower()
    if label == "imix":
        return FrameSize("imix", IMIX_MEAN_FRAME_BYTES)
    try:
        value = float(label)
    except ValueError:
        raise UsageError(
            f"bad frame size {text!r}: expected bytes (e.g. 64, 1518) or 'imix'"
        ) from None
    return FrameSize(label, _frame_bytes(value, repr(text)))


def _frame_bytes(value: float, text: str) -> float:
    if not math.isfinite(value) or value < MIN_FRAME_BYTES:
        raise UsageError(
            f"bad frame size {text}: must be at least {MIN_FRAME_BYTES} bytes "
            "(the Ethernet minimum, FCS included)"
        )
    if value > MAX_FRAME_BYTES:
        raise UsageError(
            f"bad frame size {text}: beyond the planner's limit of {MAX_FRAME_BYTES:g} bytes"
        )
    return value


def parse_bits(bits: int) -> int:
    """`bits` when it is a digest width in bits: whole bytes, MIN_BITS..MAX_BITS (8, 16, ... 1024).
    Raises UsageError naming the setting `bits` (the CLI's ``--bits``) otherwise."""
    if not (MIN_BITS <= bits <= MAX_BITS and bits % 8 == 0):
        raise UsageError(
            "bad digest width ",
            Setting("bits"),
            f" {bits}: must be a multiple of 8 in "
            f"{MIN_BITS}..{MAX_BITS} (digests are whole bytes; ledgertool's are 64, 128 or 256 "
            "bits)",
        )
    return bits


def _check_links(links: int) -> int:
    if not 1 <= links <= MAX_LINKS:
        raise UsageError(f"bad link count {links}: must be 1..{MAX_LINKS}")
    return links


# --------------------------------------------------------------------------- traffic


def frames_per_second(rate_bps: float, frame_bytes: float) -> float:
    """Frames/s of a saturated link: rate / ((frame_bytes + 20) * 8)."""
    return rate_bps / ((frame_bytes + WIRE_OVERHEAD_BYTES) * 8)


@dataclass(frozen=True)
class Traffic:
    """The per-link frame rate of one plan row and where it came from.

    `rate_bps` and `frame` are None when the frame rate was given directly (--pps).
    """

    frames_per_second: float
    rate_bps: float | None = None
    frame: str | None = None
    frame_bytes: float | None = None


def traffic_from_rate(rate_bps: float, frame: FrameSize) -> Traffic:
    """Saturated link of `rate_bps` carrying frames of `frame` (mean) size."""
    _finite_positive(rate_bps, "rate", repr(rate_bps), MAX_RATE_BPS, MIN_RATE_BPS)
    _frame_bytes(frame.mean_bytes, repr(frame.label))
    return Traffic(
        frames_per_second=frames_per_second(rate_bps, frame.mean_bytes),
        rate_bps=rate_bps,
        frame=frame.label,
        frame_bytes=frame.mean_bytes,
    )


def traffic_from_pps(pps: float) -> Traffic:
    """A link carrying `pps` frames per second."""
    _finite_positive(pps, _PPS, repr(pps), MAX_PPS, MIN_PPS)
    return Traffic(frames_per_second=pps)


# --------------------------------------------------------------------------- collisions


def expected_frames_to_collision(bits: int) -> float:
    """E = sqrt(pi * N / 2) with N = 2**bits: expected digests until two are equal.

    Leading term of the exact expectation (which is larger by about 2/3 frame); computed
    as sqrt(pi/2) * 2**(bits/2) so it does not overflow for wide digests.
    """
    parse_bits(bits)
    return math.sqrt(math.pi / 2) * 2.0 ** (bits / 2)


def collision_probability(n: float, bits: int) -> float:
    """P(at least one collision among n uniformly random `bits`-bit digests).

    p = 1 - exp(-n(n-1) / (2N)), N = 2**bits, evaluated as -expm1(-x) so that a
    probability of 1e-30 comes back as 1e-30, not 0. Fewer than 2 frames give 0.
    """
    parse_bits(bits)
    if n <= 1:
        return 0.0
    # x = n(n-1) / 2^(bits+1); each factor is scaled by an exact power of two first so
    # that n(n-1) cannot overflow (n ~ 1e154) while x itself is still moderate.
    half = (bits + 1) // 2
    x = math.ldexp(n, -half) * math.ldexp(n - 1, -(bits + 1 - half))
    return -math.expm1(-x)


@dataclass(frozen=True)
class CollisionRow:
    """Birthday-bound figures for one (bits, rate, frame) combination.

    `frames_per_second` is per link; all `links` links feed one digest key space, so the
    combined rate is links * frames_per_second and both `expected_seconds` and
    `probability` use it.
    """

    bits: int
    rate_bps: float | None
    frame: str | None
    frame_bytes: float | None
    frames_per_second: float
    links: int
    combined_frames_per_second: float
    expected_frames: float
    expected_seconds: float
    duration_seconds: float
    frames_in_duration: float
    probability: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; numbers in base units (bits/s, bytes, seconds, frames)."""
        return asdict(self)


def collision_row(bits: int, traffic: Traffic, links: int, duration_seconds: float) -> CollisionRow:
    """Expected time to the first collision and P(collision within `duration_seconds`)."""
    parse_bits(bits)
    _check_links(links)
    _finite_positive(duration_seconds, "duration", repr(duration_seconds), MAX_DURATION_SECONDS)
    combined = traffic.frames_per_second * links
    expected = expected_frames_to_collision(bits)
    n = combined * duration_seconds
    return CollisionRow(
        bits=bits,
        rate_bps=traffic.rate_bps,
        frame=traffic.frame,
        frame_bytes=traffic.frame_bytes,
        frames_per_second=traffic.frames_per_second,
        links=links,
        combined_frames_per_second=combined,
        expected_frames=expected,
        expected_seconds=expected / combined,
        duration_seconds=duration_seconds,
        frames_in_duration=n,
        probability=collision_probability(n, bits),
    )


def collision_table(
    bits: list[int], traffics: list[Traffic], links: int, duration_seconds: float
) -> list[CollisionRow]:
    """One row per (bits, traffic) combination, bits outermost, in the given order."""
    return [collision_row(b, t, links, duration_seconds) for b in bits for t in traffics]


# --------------------------------------------------------------------------- storage


def default_record_bytes(digest_bytes: int = DEFAULT_DIGEST_BYTES) -> int:
    """Ledger record size: 32 fixed bytes + the digest (48 for 16-byte, 64 for 32-byte digests:
    the only digest sizes a ledger holds; --record-bytes plans any other record)."""
    if digest_bytes not in (16, 32):
        raise UsageError(
            Setting("digest_bytes"),
            f" {digest_bytes}: a ledger's digests are 16 or 32 bytes (",
            Setting("record_bytes"),
            " plans records of another size)",
        )
    return RECORD_FIXED_BYTES + digest_bytes


@dataclass(frozen=True)
class StoragePlan:
    """Uncompressed ledger-record volume, per link and for all `links` links."""

    frames_per_second: float
    record_bytes: float
    links: int
    duration_seconds: float
    bytes_per_second_per_link: float
    bytes_per_day_per_link: float
    bytes_per_year_per_link: float
    bytes_for_duration_per_link: float
    bytes_per_second: float
    bytes_per_day: float
    bytes_per_year: float
    bytes_for_duration: float


def storage_plan(pps: float, record_bytes: float, links: int, duration: float) -> StoragePlan:
    """Bytes/s, per day, per (Julian) year and for `duration` seconds of records at `pps` per link.

    `record_bytes` is the format's record size (an integer) or a measured mean of bytes on disk
    per record (a fraction; see `ledgertool.ledger.index.storage_footprint`)."""
    _finite_positive(pps, "frames per second", repr(pps), MAX_PPS)
    if not (math.isfinite(record_bytes) and 1 <= record_bytes <= MAX_RECORD_BYTES):
        raise UsageError(f"bad record size {record_bytes}: must be 1..{MAX_RECORD_BYTES} bytes")
    _check_links(links)
    _finite_positive(duration, "duration", repr(duration), MAX_DURATION_SECONDS)
    per_link = pps * record_bytes
    return StoragePlan(
        frames_per_second=pps,
        record_bytes=record_bytes,
        links=links,
        duration_seconds=duration,
        bytes_per_second_per_link=per_link,
        bytes_per_day_per_link=per_link * SECONDS_PER_DAY,
        bytes_per_year_per_link=per_link * SECONDS_PER_YEAR,
        bytes_for_duration_per_link=per_link * duration,
        bytes_per_second=per_link * links,
        bytes_per_day=per_link * links * SECONDS_PER_DAY,
        bytes_per_year=per_link * links * SECONDS_PER_YEAR,
        bytes_for_duration=per_link * links * duration,
    )


@dataclass(frozen=True)
class StorageRow:
    """A storage plan together with the traffic it was computed for."""

    traffic: Traffic
    plan: StoragePlan

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-ready dict: rate_bps, frame, frame_bytes, then the StoragePlan fields."""
        return {
            "rate_bps": self.traffic.rate_bps,
            "frame": self.traffic.frame,
            "frame_bytes": self.traffic.frame_bytes,
            **asdict(self.plan),
        }


def storage_table(
    traffics: list[Traffic], record_bytes: float, links: int, duration_seconds: float
) -> list[StorageRow]:
    """One storage row per traffic, in the given order."""
    return [
        StorageRow(t, storage_plan(t.frames_per_second, record_bytes, links, duration_seconds))
        for t in traffics
    ]


# --------------------------------------------------------------------------- window tier

#: Window records (docs/ledger-format.md "Window records"): an 80-byte header, then cells of
#: 12 bytes (count, check) + the digest; a capacity of m differences takes 3 * (ceil(2m/3) + 32)
#: cells.
WINDOW_HEADER_BYTES = 80
WINDOW_CELL_FIXED_BYTES = 12
WINDOW_MAX_CELLS = 3 * 2**20
DEFAULT_WINDOW_SECONDS = 1.0
DEFAULT_WINDOW_CAPACITY = 64
#: A false match of one window comparison (ADR 0012): at most 3 / (2^128 - q); q (distinct digests
#: compared) is far below 2^100 in any deployment, so 3 / 2^128 rounded up by (1 + 2^-20).
WINDOW_FALSE_MATCH = 3 / 2**128 * (1 + 2**-20)


def window_cells(capacity: int) -> int:
    """Cells of a window table that decodes `capacity` differences (< 1 % failure at capacity)."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise UsageError(
            f"bad window capacity {capacity!r}: must be a positive number of differences"
        )
    cells = 3 * (math.ceil(2 * capacity / 3) + 32)
    if cells > WINDOW_MAX_CELLS:
        raise UsageError(
            f"bad window capacity {capacity}: needs {cells} cells, more than {WINDOW_MAX_CELLS}"
        )
    return cells


def window_record_bytes(capacity: int, digest_bytes: int = DEFAULT_DIGEST_BYTES) -> int:
    """Bytes of one window record of a table for `capacity` differences."""
    if digest_bytes not in (16, 32):
        raise UsageError(
            f"bad digest size {digest_bytes}: window records hold 16- or 32-byte digests"
        )
    return WINDOW_HEADER_BYTES + window_cells(capacity) * (WINDOW_CELL_FIXED_BYTES + digest_bytes)


@dataclass(frozen=True)
class WindowPlan:
    """The window tier's volume (one record per link and window, whatever the traffic) and the
    false-match bound of its comparisons over `duration_seconds` on every link."""

    window_seconds: float
    capacity: int
    cells: int
    record_bytes: int
    links: int
    duration_seconds: float
    windows_per_day_per_link: float
    bytes_per_day_per_link: float
    bytes_for_duration_per_link: float
    bytes_per_day: float
    bytes_for_duration: float
    windows_in_duration: float
    false_match_per_window: float
    false_match_bound: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def window_plan(
    window_seconds: float, capacity: int, digest_bytes: int, links: int, duration: float
) -> WindowPlan:
    """Window records of `window_seconds`, a table for `capacity` differences, `links` links."""
    _finite_positive(window_seconds, "window length", repr(window_seconds), MAX_DURATION_SECONDS)
    if window_seconds < 1e-9:
        raise UsageError(f"bad window length {window_seconds!r} s: at least 1 ns")
    _check_links(links)
    _finite_positive(duration, "duration", repr(duration), MAX_DURATION_SECONDS)
    size = window_record_bytes(capacity, digest_bytes)
    per_day = SECONDS_PER_DAY / window_seconds
    windows = max(1.0, duration / window_seconds) * links
    per_duration = duration / window_seconds * size
    return WindowPlan(
        window_seconds=window_seconds,
        capacity=capacity,
        cells=window_cells(capacity),
        record_bytes=size,
        links=links,
        duration_seconds=duration,
        windows_per_day_per_link=per_day,
        bytes_per_day_per_link=per_day * size,
        bytes_for_duration_per_link=per_duration,
        bytes_per_day=per_day * size * links,
        bytes_for_duration=per_duration * links,
        windows_in_duration=windows,
        false_match_per_window=WINDOW_FALSE_MATCH,
        false_match_bound=min(1.0, windows * WINDOW_FALSE_MATCH),
    )


# --------------------------------------------------------------------------- humane numbers

_DURATION_STEPS: tuple[tuple[float, float, str], ...] = (
    # (upper bound in seconds, divisor, unit)
    (1e-6, 1e-9, "ns"),
    (1e-3, 1e-6, "µs"),
    (1.0, 1e-3, "ms"),
    (SECONDS_PER_MINUTE, 1.0, "s"),
    (SECONDS_PER_HOUR, SECONDS_PER_MINUTE, "min"),
    (SECONDS_PER_DAY, SECONDS_PER_HOUR, "h"),
    (SECONDS_PER_YEAR, SECONDS_PER_DAY, "days"),
    (1e3 * SECONDS_PER_YEAR, SECONDS_PER_YEAR, "years"),
    (1e6 * SECONDS_PER_YEAR, 1e3 * SECONDS_PER_YEAR, "thousand years"),
    (1e9 * SECONDS_PER_YEAR, 1e6 * SECONDS_PER_YEAR, "million years"),
    (1e12 * SECONDS_PER_YEAR, 1e9 * SECONDS_PER_YEAR, "billion years"),
)


def human_duration(seconds: float) -> str:
    """ "9.0 s", "3.2 h", "1.2 thousand years", ...; beyond a trillion years "4.5e+15 years"."""
    if seconds == 0:
        return "0 s"
    if not math.isfinite(seconds):
        return "forever" if seconds > 0 else str(seconds)
    for bound, divisor, unit in _DURATION_STEPS:
        if abs(seconds) < bound:
            return f"{seconds / divisor:.1f} {unit}"
    return f"{seconds / SECONDS_PER_YEAR:.1e} years"


_BYTE_UNITS = ("B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB")


def human_bytes(n: float) -> str:
    """Decimal (SI) units as storage is sold: "48 B", "28.6 GB", "2.5 PB"."""
    if abs(n) < 1000:
        return f"{n:.0f} B"
    value = float(n)
    for unit in _BYTE_UNITS[1:]:
        value /= 1000.0
        if abs(value) < 1000 or unit == _BYTE_UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def human_prob(p: float) -> str:
    """ "1.2e-15", "0.393", "> 0.999", "1": never "0" for a positive p nor "1" for p < 1."""
    if p <= 0:
        return "0"
    if p >= 1:
        return "1"
    if p < 1e-3:
        return f"{p:.1e}"
    text = f"{p:.3f}"
    return "> 0.999" if text == "1.000" else text
