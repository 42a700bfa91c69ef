"""`ledgertool conformance export|check`: thin typer commands over ledgertool.device.conformance.

Reference: docs/cli.md ("conformance export", "conformance check"); for hardware teams:
docs/devices.md. check exits 0 when the device's records are byte-exact, 1 when they differ (the
first differing frames explained), 2 for bad input (mapped by the main CLI).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..plural import plural
from .render import SafeConsole, styled

conformance_app = typer.Typer(
    name="conformance",
    help="Conformance kit for hardware pipelines: vectors, golden ledger, and a byte-exact check "
    "of device records.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

out = SafeConsole(soft_wrap=True)
err = SafeConsole(stderr=True, soft_wrap=True)


@conformance_app.command("export")
def export(
    directory: Annotated[Path, typer.Argument(help="New (or empty) directory for the kit.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
) -> None:
    """Write the versioned conformance kit: crafted captures, strip ranges, digests, records,
    Merkle leaves, a golden ledger."""
    from ..device.kit import export_kit

    res = export_kit(directory)
    if as_json:
        sys.stdout.write(json.dumps(res.to_json(), indent=2) + "\n")
    else:
        out.print(
            f"kit {res.to_json()['kit_format']} -> {res.directory}: {plural(res.frames, 'frame')} "
            f"in {plural(res.captures, 'capture')}, {plural(res.record_files, 'record file')}, "
            f"golden ledger of {plural(res.golden_segments, 'segment')}, "
            f"{plural(res.files, 'file')} (see {Path(res.directory) / 'README.md'})"
        )


@conformance_app.command("check")
def check(
    capture: Annotated[
        Path, typer.Argument(help="The capture the device processed (pcap/pcapng).")
    ],
    records: Annotated[
        list[Path],
        typer.Option(
            "--records",
            help="The device's records for it: whole records, seq from 0. Give it once per lane "
            "for a device of several lanes (each lane's records, its seq from 0).",
        ),
    ],
    digest_key: Annotated[Path, typer.Option("--digest-key", help="digest.key the device used.")],
    algorithm: Annotated[str, typer.Option(help="Digest algorithm.")] = "siphash-1-3-128",
    strip: Annotated[
        str, typer.Option(metavar="MODE", help="Strip mode: frame, l3, payload or rdma.")
    ] = "frame",
    max_report: Annotated[
        int, typer.Option("--max-report", help="Differing frames to explain.", min=0)
    ] = 10,
    clock: Annotated[
        str,
        typer.Option(
            "--clock",
            metavar="kit|device",
            help="kit: ts_ns byte-exact too (the device replays the kit's timestamps); device: "
            "ts_ns from the device's own clock, checked monotone (and paced, with "
            "--clock-tolerance) instead.",
        ),
    ] = "kit",
    clock_tolerance: Annotated[
        str | None,
        typer.Option(
            "--clock-tolerance",
            metavar="5us|1ms",
            help="With --clock device: how far (e.g. 1ms) each device timestamp may stray from the "
            "capture's pace since the first record. Default: monotone only.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
) -> None:
    """Compare a device's records for a capture with ledgertool's, frame by frame (exit 0
    byte-exact, 1 differ)."""
    from ..device.conformance import check_lanes, check_records
    from ..keyfiles import DigestKey
    from ..plan import parse_duration

    tol = None
    if clock_tolerance is not None and clock_tolerance.strip() in ("0", "0s", "0ns"):
        tol = 0  # exactly the capture's pace (parse_duration takes positive durations only)
    elif clock_tolerance is not None:
        tol = round(parse_duration(clock_tolerance, "clock_tolerance") * 1e9)
    check = check_records if len(records) == 1 else check_lanes
    res = check(
        capture,
        records[0] if len(records) == 1 else records,
        DigestKey.load(digest_key),
        algorithm,
        strip,
        max_report,
        clock=clock,
        clock_tolerance_ns=tol,
    )
    for w in res.warnings:
        err.print(styled(("warning:", "yellow"), f" {w}"))
    if as_json:
        sys.stdout.write(json.dumps(res.to_json(), indent=2) + "\n")
        raise typer.Exit(0 if res.ok else 1)
    what = (
        f"{plural(res.frames, 'frame', fmt=',')} in {capture}, "
        f"{plural(res.device_records, 'device record', fmt=',')} in {res.records_file} "
        f"({res.algorithm}, strip {res.strip}, digest key id {res.digest_key_id})"
    )
    if len(records) > 1:
        what += f" from {len(records)} lanes"
    if res.clock == "device":
        paced = "" if tol is None else f", within {tol:,} ns of the capture's pace"
        what += f"; device clock: ts_ns monotone{paced}"
    if res.ok:
        out.print(styled(("BYTE-EXACT", "green"), f": {what}"))
        raise typer.Exit(0)
    out.print(
        styled(("DIFFER", "red"), f": {what}: {res.matched:,} byte-exact, {res.differing:,} differ")
    )
    _print_clock(res)
    for d in res.first_differences:
        if d.expected and d.device:
            out.print(
                f"frame {d.index}: {', '.join(d.fields)} differ{'s' if len(d.fields) == 1 else ''}"
            )
        else:
            out.print(f"frame {d.index}: {d.fields[0]}")
        if d.summary:
            out.print(f"  frame       {d.summary}")
        if d.explanation:
            out.print(f"  ledgertool  {d.explanation}")
        if d.device_range_note:
            out.print(f"  device      {d.device_range_note}")
        for name, rec in (("expected", d.expected), ("device", d.device)):
            if rec is not None:
                fields = ", ".join(
                    f"{f} {getattr(rec, f)}"
                    for f in ("seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux")
                )
                out.print(f"  {name:<10}  {fields}, digest {rec.digest.hex()}")
    shown = len(res.first_differences)
    if res.differing > shown:
        out.print(
            f"... {plural(res.differing - shown, 'more differing frame', fmt=',')} not shown "
            "(--max-report)"
        )
    raise typer.Exit(1)


def _print_clock(res) -> None:
    """The device-clock violations (clock mode device), if any."""
    if not res.clock_violations:
        return
    out.print(f"device clock: {plural(res.clock_violations, 'timestamp', fmt=',')} wrong")
    for v in res.first_clock_violations:
        out.print(f"frame {v.index}: ts_ns {v.ts_ns} (kit {v.kit_ts_ns}): {v.why}")
