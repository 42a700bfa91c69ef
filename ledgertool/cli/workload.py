"""`ledgertool workload generate|bench`: thin typer commands over ledgertool.source.workload.

Spec format: docs/workloads.md (schema: schemas/workload.schema.json). Errors are LedgerErrors
(WorkloadSpecError for a bad spec), mapped to exit 2 by the main CLI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..plural import plural
from .render import SafeConsole

#: the largest frame size a flow may give (bytes, FCS included): the generator's largest frame
#: (LT_WL_MAX_FRAME) + 4, written out so that --help loads no native code (a unit test checks it)
SIZE_MAX = 16_388

workload_app = typer.Typer(
    name="workload",
    help="Deterministic generated traffic from a TOML workload spec.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

out = SafeConsole(soft_wrap=True)  # result lines never wrap mid-line; file names are never markup


@workload_app.command("generate")
def generate(
    spec: Annotated[Path, typer.Argument(help="Workload spec (TOML, docs/workloads.md).")],
    out_file: Annotated[
        Path, typer.Option("--out", help="pcap file to write (nanosecond timestamps).")
    ],
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
) -> None:
    """Write every frame a workload spec describes to a pcap file (same spec, same bytes)."""
    from ..source.workload import generate_pcap

    res = generate_pcap(spec, out_file, force=force)
    if as_json:
        sys.stdout.write(json.dumps(res.to_json(), indent=2) + "\n")
    else:
        out.print(
            f"wrote {plural(res.frames, 'frame', fmt=',')} ({plural(res.bytes, 'byte', fmt=',')}) "
            f"of {plural(len(res.flows), 'flow')} from {spec} "
            f"to {out_file} in {res.elapsed_s:.3f} s"
        )


@workload_app.command("bench")
def bench(
    spec: Annotated[Path, typer.Argument(help="Workload spec (TOML).")],
    frames: Annotated[
        int | None,
        # a flow holds at most 10^12 frames (docs/workloads.md): no scaled flow passes that
        typer.Option(help="Scale the flows to about this many frames.", min=1, max=10**12),
    ] = None,
    size: Annotated[
        int | None,
        # the spec's own bounds on a flow's size (docs/workloads.md): 64 .. the largest frame + FCS
        typer.Option(
            help="Give every flow this one frame size (bytes, FCS included).",
            min=64,
            max=SIZE_MAX,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
) -> None:
    """Frames/s of the generator alone, and of the generator feeding the digest engine."""
    from ..source.workload import bench_generator

    doc = bench_generator(spec, frames, size).to_json()
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    out.print(
        f"generator alone: {doc['frames']:,} frames in {doc['generate_s']:.3f} s = "
        f"{doc['generate_frames_per_s'] / 1e6:.2f} Mframes/s ({doc['generate_gbit_per_s']:.2f} "
        "Gbit/s)"
    )
    out.print(
        f"generator + siphash-1-3-128 digest: {doc['generate_and_digest_frames_per_s'] / 1e6:.2f} "
        "Mframes/s"
    )
