"""`ledgertool plan collision|storage`: thin typer commands over ledgertool.plan.

Reference: docs/cli.md ("plan collision, plan storage"); formulas and assumptions:
docs/plan.md. Each command parses its options, calls ledgertool.plan, and
renders a rich table or, with --json, one JSON document {"rows": [...]} on stdout.
Bad option values raise ledgertool.errors.UsageError; the main CLI maps it to exit 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ledgertool import plan
from ledgertool.cli.flags import cli_message
from ledgertool.cli.render import table_console
from ledgertool.errors import LedgerError, UsageError
from ledgertool.plural import plural

plan_app = typer.Typer(
    name="plan",
    help="Capacity planning: digest collision odds and ledger storage (pure math).",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

RateOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--rate",
        help="Line rate in bits/s: 100G, 400G, 800G, 1.6T, 25Gbps, 1e9. Repeatable or "
        "comma-separated.",
    ),
]
FrameOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--frame",
        help="Frame size in bytes incl. FCS (>= 64) or 'imix' (simple IMIX 7:4:1). "
        "Repeatable or comma-separated (64,512,1500,4096,9000,imix); default 64 with --rate.",
    ),
]
PpsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--pps",
        help="Frames per second per link instead of --rate/--frame (600M, 1.2e9). Repeatable.",
    ),
]
LinksOpt = Annotated[
    int,
    typer.Option(
        "--links", help="Links whose frames share one digest key space (all at the same rate)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
WindowOpt = Annotated[
    str,
    typer.Option("--window", help="Window length of the window tier: 100ms, 1s, 10s (ADR 0012)."),
]
CapacityOpt = Annotated[
    int,
    typer.Option("--window-capacity", help="Differences a window record decodes (table capacity)."),
]


def _window_line(w: plan.WindowPlan) -> str:
    return (
        f"Window hash false match (ADR 0012): <= {plan.human_prob(w.false_match_per_window)} "
        f"per window comparison; <= {plan.human_prob(w.false_match_bound)} over "
        f"{w.windows_in_duration:.3g} windows "
        f"({plural(w.links, 'link')}, {plan.human_duration(w.duration_seconds)} of "
        f"{plan.human_duration(w.window_seconds)} windows)"
    )


def _traffics(
    rates: list[str] | None, frames: list[str] | None, pps: list[str] | None
) -> list[plan.Traffic]:
    """Rows of traffic from (--rate x --frame) or --pps, refusing mixtures.

    Each option may be repeated and each value may be a comma-separated list ("100G,400G")."""
    rates, frames, pps = _split(rates), _split(frames), _split(pps)
    if rates and pps:
        raise UsageError("give either --rate (with --frame) or --pps, not both")
    if pps:
        if frames:
            raise UsageError("--frame applies only with --rate; --pps already counts frames")
        return [plan.traffic_from_pps(plan.parse_pps(p)) for p in pps]
    if not rates:
        raise UsageError("missing traffic: give --rate (e.g. --rate 400G --frame 64) or --pps")
    sizes = [plan.parse_frame(f) for f in frames] or [plan.parse_frame("64")]
    return [plan.traffic_from_rate(plan.parse_rate(r), f) for r in rates for f in sizes]


def _split(values: list[str] | None) -> list[str]:
    """["100G,400G", "1.6T"] -> ["100G", "400G", "1.6T"]; an empty item is an error."""
    out = []
    for value in values or []:
        parts = [p.strip() for p in value.split(",")]
        if any(not p for p in parts):
            raise UsageError(f"bad list {value!r}: empty item")
        out += parts
    return out


def _emit_json(rows: list[dict], **extra: object) -> None:
    sys.stdout.write(json.dumps({"rows": rows, **extra}, indent=2, allow_nan=False) + "\n")


def _rate_label(t: plan.Traffic | plan.CollisionRow) -> str:
    if t.rate_bps is None:
        return "-"
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if t.rate_bps >= div:
            return f"{t.rate_bps / div:g}{unit}"
    return f"{t.rate_bps:g}"


def _count(x: float) -> str:
    """Compact frame rate: "595.2M", "1.2k", "2.4G"."""
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.1f}{unit}"
    return f"{x:.1f}"


@plan_app.command("collision")
def collision(
    bits: Annotated[
        list[int],
        typer.Option(
            "--bits",
            help="Digest width in bits, whole bytes: 8..1024, a multiple of 8 (ledgertool's: 64, "
            "128, 256). Repeatable.",
        ),
    ],
    rate: RateOpt = None,
    frame: FrameOpt = None,
    pps: PpsOpt = None,
    links: LinksOpt = 1,
    duration: Annotated[
        str,
        typer.Option("--duration", help="Window for the collision probability: 1y, 30d, 12h, 90s."),
    ] = "1y",
    window: WindowOpt = "1s",
    as_json: JsonOpt = False,
) -> None:
    """Expected time to the first digest collision, and P(collision) within --duration; the window
    tier's false-match bound over every window of --duration."""
    from rich import box
    from rich.table import Table

    traffics = _traffics(rate, frame, pps)
    seconds = plan.parse_duration(duration)
    rows = plan.collision_table([plan.parse_bits(b) for b in bits], traffics, links, seconds)
    win = plan.window_plan(
        plan.parse_duration(window, "window"),
        plan.DEFAULT_WINDOW_CAPACITY,
        plan.DEFAULT_DIGEST_BYTES,
        links,
        seconds,
    )
    if as_json:
        _emit_json(
            [r.to_dict() for r in rows],
            window_false_match={
                k: v
                for k, v in win.to_dict().items()
                if k
                in (
                    "window_seconds",
                    "links",
                    "duration_seconds",
                    "windows_in_duration",
                    "false_match_per_window",
                    "false_match_bound",
                )
            },
        )
        return
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1),
        collapse_padding=True,
        title=f"Digest collisions (birthday bound), {plural(links, 'link')} into one key space",
        caption="exp. frames = sqrt(pi*2^B/2); time = E / (links x frames/s); docs/plan.md",
    )
    for name in ("bits", "rate", "frame", "frames/s", "exp. frames", "expected time"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column(f"P in {plan.human_duration(seconds)}", justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            str(r.bits),
            _rate_label(r),
            r.frame or "-",
            _count(r.frames_per_second),
            f"{r.expected_frames:.2e}",
            plan.human_duration(r.expected_seconds),
            plan.human_prob(r.probability),
        )
    table_console(160).print(table)
    table_console(160).print(_window_line(win))


@plan_app.command("storage")
def storage(
    rate: RateOpt = None,
    frame: FrameOpt = None,
    pps: PpsOpt = None,
    record_bytes: Annotated[
        int | None,
        typer.Option(
            "--record-bytes", help="Bytes per ledger record (default 32 + --digest-bytes)."
        ),
    ] = None,
    digest_bytes: Annotated[
        int,
        typer.Option(
            "--digest-bytes", help="Digest size used for the default record size (16 or 32)."
        ),
    ] = plan.DEFAULT_DIGEST_BYTES,
    from_ledger: Annotated[
        Path | None,
        typer.Option(
            "--from-ledger",
            metavar="DIR",
            help="Measure bytes on disk per record in this sealed ledger: (record file + seal file "
            "sizes) / records (the raw record file of a v2 segment, else its Parquet file).",
        ),
    ] = None,
    links: LinksOpt = 1,
    duration: Annotated[
        str, typer.Option("--duration", help="Retention window: 1d, 30d, 1y.")
    ] = "1d",
    window: WindowOpt = "1s",
    window_capacity: CapacityOpt = plan.DEFAULT_WINDOW_CAPACITY,
    as_json: JsonOpt = False,
) -> None:
    """Ledger volume per link and for all links: the per-frame tier (format record size, or
    measured from a ledger) and the window tier (one record per link and window)."""
    from rich import box
    from rich.table import Table

    traffics = _traffics(rate, frame, pps)
    if from_ledger is not None and record_bytes is not None:
        raise UsageError("give either --record-bytes or --from-ledger, not both")
    source: dict[str, object]
    if from_ledger is not None:
        from ledgertool.ledger.index import storage_footprint

        foot = storage_footprint(from_ledger)
        size: float = foot.bytes_per_record
        source = {"kind": "ledger", **foot.to_dict()}
        what = (
            f"{size:.2f} bytes/record on disk (measured: {foot.records:,} records in {from_ledger})"
        )
    elif record_bytes is not None:
        size = record_bytes
        source = {"kind": "option"}
        what = f"{size}-byte records"
    else:
        size = plan.default_record_bytes(digest_bytes)
        source = {"kind": "format", "digest_bytes": digest_bytes}
        what = f"{size}-byte records (format, uncompressed)"
    seconds = plan.parse_duration(duration)
    rows = plan.storage_table(traffics, size, links, seconds)
    window_s = plan.parse_duration(window, "window")
    win = plan.window_plan(window_s, window_capacity, digest_bytes, links, seconds)
    if as_json:
        _emit_json([r.to_dict() for r in rows], record_bytes_source=source, windows=win.to_dict())
        return
    table = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1),
        collapse_padding=True,
        title=f"Ledger storage: {what}, {plural(links, 'link')}, window "
        f"{plan.human_duration(seconds)}",
        caption="bytes = frames/s x record bytes; 1 GB = 1e9 B; docs/plan.md",
    )
    for name in (
        "rate",
        "frame",
        "frames/s",
        "link /s",
        "link /day",
        "link /year",
        "all /s",
        "all /day",
        "all /year",
    ):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("all /window", justify="right", no_wrap=True)
    table.add_column("x window tier", justify="right", no_wrap=True)
    for row in rows:
        t, p = row.traffic, row.plan
        table.add_row(
            _rate_label(t),
            t.frame or "-",
            _count(t.frames_per_second),
            plan.human_bytes(p.bytes_per_second_per_link),
            plan.human_bytes(p.bytes_per_day_per_link),
            plan.human_bytes(p.bytes_per_year_per_link),
            plan.human_bytes(p.bytes_per_second),
            plan.human_bytes(p.bytes_per_day),
            plan.human_bytes(p.bytes_per_year),
            plan.human_bytes(p.bytes_for_duration),
            f"{p.bytes_per_day_per_link / win.bytes_per_day_per_link:.3g}",
        )
    table_console(160).print(table)
    table_console(160).print(
        f"Window tier: {win.record_bytes:,}-byte records ({win.cells} cells, capacity "
        f"{win.capacity}), one per link per {plan.human_duration(win.window_seconds)} window: "
        f"{plan.human_bytes(win.bytes_per_day_per_link)} per link-day, "
        f"{plan.human_bytes(win.bytes_per_day)} a day for {plural(links, 'link')}, "
        f"{plan.human_bytes(win.bytes_for_duration)} in {plan.human_duration(seconds)}"
    )


def main() -> None:  # pragma: no cover - a stand-alone runner for trying the commands
    """Run `plan_app` alone, mapping LedgerError to its exit code like the main CLI."""
    try:
        plan_app()
    except LedgerError as exc:
        print(f"ledgertool plan: {cli_message(exc)}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None


if __name__ == "__main__":  # pragma: no cover
    main()
