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
    help="Conformance kit for hardware pipelines: vectors, golden ledger, and a byte-exact check of device records.",
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
    """Write the versioned conformance kit: crafted captures, strip ranges, digests, records, Merkle leaves, a golden ledger."""
    from ..device.kit import export_kit

    res = export_kit(directory)
    if as_json:
        sys.stdout.write(json.dumps(res.to_json(), indent=2) + "\n")
    else:
        out.print(
            f"kit {res.to_json()['kit_format']} -> {res.directory}: {plural(res.frames, 'frame')} in "
            f"{plural(res.captures, 'capture')}, {plural(res.record_files, 'record file')}, golden ledger of "
            f"{plural(res.golden_segments, 'segment')}, {plural(res.files, 'file')} (see {Path(res.directory) / 'README.md'})"
        )


@conformance_app.command("check")
def check(
    capture: Annotated[
        Path, typer.Argument(help="The capture the device processed (pcap/pcapng).")
    ],
    records: Annotated[
        Path,
        typer.Option("--records", help="The device's records for it: whole records, seq from 0."),
    ],
    digest_key: Annotated[Path, typer.Option("--digest-key", help="digest.key the device used.")],
    algorithm: Annotated[str, typer.Option(help="Digest algorithm.")] = "siphash-1-3-128",
    strip: Annotated[str, typer.Option(help="Strip mode: frame, l3, payload or rdma.")] = "frame",
    max_report: Annotated[
        int, typer.Option("--max-report", help="Differing frames to explain.", min=0)
    ] = 10,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document on stdout.")
    ] = False,
) -> None:
    """Compare a device's records for a capture with ledgertool's, frame by frame (exit 0 byte-exact, 1 differ)."""
    from ..device.conformance import check_records
    from ..keyfiles import DigestKey

    res = check_records(capture, records, DigestKey.load(digest_key), algorithm, strip, max_report)
    for w in res.warnings:
        err.print(styled(("warning:", "yellow"), f" {w}"))
    if as_json:
        sys.stdout.write(json.dumps(res.to_json(), indent=2) + "\n")
        raise typer.Exit(0 if res.ok else 1)
    what = (
        f"{plural(res.frames, 'frame', fmt=',')} in {capture}, "
        f"{plural(res.device_records, 'device record', fmt=',')} in {records} "
        f"({res.algorithm}, strip {res.strip}, digest key id {res.digest_key_id})"
    )
    if res.ok:
        out.print(styled(("BYTE-EXACT", "green"), f": {what}"))
        raise typer.Exit(0)
    out.print(
        styled(("DIFFER", "red"), f": {what}: {res.matched:,} byte-exact, {res.differing:,} differ")
    )
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
            f"... {plural(res.differing - shown, 'more differing frame', fmt=',')} not shown (--max-report)"
        )
    raise typer.Exit(1)
