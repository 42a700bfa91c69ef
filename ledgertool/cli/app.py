"""The `ledgertool` command line (contract: docs/cli.md).

Each command parses options, calls one library function and renders its result as a rich
table (stderr for progress, stdout for results) or, with --json, one JSON document on stdout.
Every LedgerError is caught once in `main` and becomes a one-line message and an exit code.
"""

from __future__ import annotations

import copy
import errno
import functools
import json
import os
import re
import sys
import traceback
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import Annotated

import typer

from .. import __version__
from ..errors import LedgerError, UsageError, exit_code_for
from ..plural import plural
from ..urls import location
from .coercion import LazyCoercion
from .flags import cli_message
from .progress import rate as _rate
from .render import SafeConsole, styled, table_console
from .streams import OutputError, guard_streams, reserve_closed_descriptors, restore_streams

app = typer.Typer(
    name="ledgertool",
    help="Verifier-side tooling for network-traffic digest ledgers.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # never print key material in a traceback
    add_completion=True,  # --install-completion and --show-completion (bash, zsh, fish)
    context_settings={"help_option_names": ["--help", "-h"]},
    rich_markup_mode=None,
)
keys_app = typer.Typer(help="Digest and signing keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

# Plain result lines are never wrapped mid-line (soft_wrap) so scripts can grep them. Nothing
# printed is read as markup, and control characters in it are made visible (report.SafeConsole):
# file names, seal fields, proof fields and error messages are untrusted text.
out = SafeConsole(soft_wrap=True)
err = SafeConsole(stderr=True, soft_wrap=True)
STATE = {"debug": False}


class Interrupted(Exception):
    """Ctrl-C ended a command that has more to say than "interrupted" (exit 130)."""


def _raised_unwinding_ctrl_c(e: BaseException) -> bool:
    """Whether `e` was raised while a Ctrl-C (KeyboardInterrupt) unwound: Python raises it from a
    signal handler between any two bytecodes, and inside threading.Condition.wait that can leave
    the condition's lock released, so the `with` that leaves it raises "cannot release un-acquired
    lock" in the KeyboardInterrupt's place. Such an error is the interruption, not a fault."""
    seen = 0
    while e is not None and seen < 16:
        if isinstance(e, KeyboardInterrupt):
            return True
        e, seen = e.__context__, seen + 1
    return False


def _abandoned(ledger: Path, signing_key) -> str:
    """What a capture abandoned by a second Ctrl-C left, as found on disk: a second Ctrl-C can come
    after the sealing it cut short had finished, or before anything was opened."""
    from ..ledger.layout import OPEN

    if not ledger.is_dir():
        return f"nothing was written ({ledger} was not created)"
    left = sorted(ledger.glob(f"*/seg-*.{OPEN}"))
    if not left:
        return (
            f"no segment was left open in {ledger}; `ledgertool verify {ledger} --trust "
            "verifier.pub` checks what was sealed"
        )
    return (
        f"{plural(len(left), 'open segment')} not sealed; `ledgertool recover {ledger} "
        f"--signing-key {signing_key}` seals {'it' if len(left) == 1 else 'them'}"
    )


def _emit_json(doc: dict | list) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")


def _progress(label: str, enabled: bool, source: str | None = None):
    """`capture`'s progress line on stderr (cli/progress.py): frames and Gbit/s, and with sealed
    records (capture) their count and rate, what the whole path, sealing included, keeps up with;
    for a capture file, bytes read of its size with a bar and an ETA; None when quiet (--json,
    --quiet) or stderr is not a terminal."""
    from ..source.file import file_total
    from .progress import frames_display

    size = file_total(source) if enabled and source is not None else None
    return frames_display(err, label, not enabled, size)


def _shown(quiet: bool, as_json: bool):
    """The progress display (cli/progress.py) for a command's library call: None when quiet."""
    from .progress import progress_display

    return progress_display(err, quiet or as_json)


QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="No progress on stderr (shown only on a terminal).")
]
InsecureClusterOpt = Annotated[
    bool,
    typer.Option(
        "--insecure-cluster",
        help="Accept a tcp:// scheduler: Dask's plain protocol, which anyone who reaches it can "
        "use to run code in its workers and read the tasks (docs/cluster.md).",
    ),
]


def _print_version(value: bool) -> None:
    if value:
        out.print(f"ledgertool {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
        ),
    ] = False,
) -> None:
    STATE["debug"] = debug


# ---- keys -----------------------------------------------------------------------------------


@keys_app.command("generate")
def keys_generate(
    outdir: Annotated[
        Path, typer.Argument(help="Directory for digest.key, signing.key, verifier.pub.")
    ],
    scheme: Annotated[
        str,
        typer.Option(
            metavar="hybrid|ed25519|mldsa65",
            help="Signature scheme: hybrid (Ed25519 + ML-DSA-65), ed25519, mldsa65.",
        ),
    ] = "hybrid",
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
) -> None:
    """Generate a digest master key and a signing key pair (secret files mode 0600)."""
    from ..keyfiles import generate_keys

    res = generate_keys(outdir, scheme=scheme)
    if as_json:
        _emit_json({"ok": True, **json.loads(json.dumps(res, default=str))})
    else:
        for k, v in res.items():
            if isinstance(v, dict):
                for alg, kid in v.items():
                    out.print(f"{k} {alg}: {kid}")
            else:
                out.print(f"{k}: {v}")


@keys_app.command("rotate")
def keys_rotate(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    old: Annotated[Path, typer.Option("--old", help="The ledger's current signing.key.")],
    new: Annotated[
        Path, typer.Option("--new", help="The signing key that signs from the next segment on.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
) -> None:
    """Move the ledger to a new signing key at the next segment boundary (statement signed by
    both)."""
    from ..keyfiles import SigningKey
    from ..ledger.devstate import DeviceState
    from ..ledger.rotations import rotate_keys

    # both keys' protected states: the old one's is checked, and carried into the new one's
    res = rotate_keys(
        ledger,
        SigningKey.load(old),
        SigningKey.load(new),
        old_state=DeviceState.beside(old),
        new_state=DeviceState.beside(new),
    )
    _rotation_in_force(res)
    if as_json:
        _emit_json({"ok": True, **res})
    else:
        starts = (
            ", ".join(f"link {k} segment {v}" for k, v in sorted(res["effective_from"].items()))
            or "the next segment"
        )
        out.print(f"rotation {res['number']} -> {res['path']}: the new key signs from {starts}")


def _rotation_in_force(res: dict) -> None:
    """Say that a written rotation is in force, whatever happens to its report: a warning when its
    directory could not be flushed, notes on the keys' protected states, and the state if stdout
    then fails (`_done`)."""
    starts = ", ".join(f"link {k} segment {v}" for k, v in sorted(res["effective_from"].items()))
    _done(
        f"rotation {res['number']} is in force ({res['path']}: the new key applies from "
        f"{starts or 'the next segment'})"
    )
    if res.get("warning"):
        err.print(styled(("warning:", "yellow"), f" {res['warning']}"))
    for note in res.get("notes", []):
        err.print(f"note: {note}")


@keys_app.command("rotate-digest")
def keys_rotate_digest(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    signing_key: Annotated[
        Path,
        typer.Option(
            "--signing-key", help="The ledger's current signing.key (signs the statement)."
        ),
    ],
    old_digest_key: Annotated[
        Path, typer.Option("--old-digest-key", help="The ledger's current digest.key.")
    ],
    new_digest_key: Annotated[
        Path,
        typer.Option(
            "--new-digest-key", help="The digest.key that digests from the next segment on."
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
) -> None:
    """Move the ledger to a new digest key at the next segment boundary (statement signed by the
    current signing key)."""
    from ..keyfiles import DigestKey, SigningKey
    from ..ledger.devstate import DeviceState
    from ..ledger.rotations import rotate_digest_key

    res = rotate_digest_key(
        ledger,
        SigningKey.load(signing_key),
        DigestKey.load(old_digest_key),
        DigestKey.load(new_digest_key),
        device_state=DeviceState.beside(signing_key),
    )
    _rotation_in_force(res)
    if as_json:
        _emit_json({"ok": True, **res})
    else:
        starts = (
            ", ".join(f"link {k} segment {v}" for k, v in sorted(res["effective_from"].items()))
            or "the next segment"
        )
        out.print(
            f"rotation {res['number']} -> {res['path']}: digest key {res['new_digest_key_id']} "
            f"replaces {res['old_digest_key_id']} from {starts}"
        )


@keys_app.command("vkey")
def keys_vkey(
    verifier: Annotated[
        Path | None,
        typer.Argument(
            help="The trust bundle whose Ed25519 key signs the checkpoints (default: verifier.pub)."
        ),
    ] = None,
    trust: Annotated[
        Path | None,
        typer.Option("--trust", help="The trust bundle, as an option (same as VERIFIER)."),
    ] = None,
    ledger: Annotated[
        Path | None,
        typer.Option(
            "--ledger", help="Ledger whose checkpoints the vkey checks (its id names the key)."
        ),
    ] = None,
    ledger_id: Annotated[
        str | None,
        typer.Option(
            "--ledger-id", metavar="HEX", help="The ledger id (32 hex digits), instead of --ledger."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
) -> None:
    """Print the C2SP signed-note verifier key (vkey) that checks the ledger's checkpoints in a
    standard verifier."""
    from ..keyfiles import TrustBundle
    from ..seal.checkpoint import verifier_key

    if verifier is not None and trust is not None and verifier != trust:
        raise UsageError("keys vkey takes one trust bundle: give VERIFIER or --trust, not both")
    if ledger is not None and ledger_id is not None:
        raise UsageError(
            "keys vkey takes one ledger: give --ledger DIR or --ledger-id ID, not both"
        )
    if ledger is None and ledger_id is None:
        raise UsageError(
            "keys vkey needs the ledger: give --ledger DIR or --ledger-id ID (the key name is per "
            "ledger)"
        )
    bundle = TrustBundle.load(verifier or trust or Path("verifier.pub"))
    rotated = None
    if ledger is not None:
        from ..ledger.header import load_ledger

        header = load_ledger(ledger)
        ledger_id = header.ledger_id
        rotated = _vkey_rotation_note(ledger, header, bundle)
    vk = verifier_key(ledger_id, bundle)
    if as_json:
        _emit_json(
            {
                "ok": True,
                "vkey": str(vk),
                "name": vk.name,
                "key_id": vk.key_id.hex(),
                "algorithm": "ed25519",
                "ledger_id": ledger_id,
            }
        )
    else:
        out.print(str(vk))
    if rotated:
        err.print(styled(("warning:", "yellow"), f" {rotated}"))


def _vkey_rotation_note(ledger: Path, header, bundle) -> str | None:
    """`keys vkey --ledger`: which of the ledger's signing keys `bundle` is, once a signing-key
    rotation was made (a checkpoint is signed by the key current when it was written; a standard
    verifier knows nothing of rotations). None for a ledger never rotated."""
    from ..ledger.rotations import signing_key_epochs

    try:
        epochs = signing_key_epochs(ledger, header)
    except LedgerError as e:
        return (
            f"{e}: the ledger's key rotation statements do not verify, so which key signs its "
            "checkpoints is not known (`verify` says more)"
        )
    if not epochs:
        return None
    rotated = f"{ledger}: the ledger's signing key was rotated ({plural(len(epochs) - 1, 'time')})"
    at = [i for i, e in enumerate(epochs) if e.bundle == bundle]
    if not at:
        return f"{rotated}, and this key is none of its signing keys: it verifies no checkpoint"
    this, last = epochs[at[-1]], epochs[-1]
    if this is last:
        return (
            f"{rotated}: this vkey is the current key's (rotation {last.number}'s new key, signing "
            f"from {_starts(last)}); checkpoints written before that were signed by an earlier key "
            "and do not verify with it"
        )
    succ = epochs[at[-1] + 1]
    return (
        f"{rotated}: this vkey is a retired key's (rotation {succ.number} replaced it from "
        f"{_starts(succ)}): ledgertool accepts its checkpoints only up to there, a standard "
        f"verifier does not know that; the current key is rotation {last.number}'s new key"
    )


def _starts(epoch) -> str:
    """Where a rotation's key took over: 'link0 segment 3, link1 segment 0'."""
    return ", ".join(f"{k} segment {v}" for k, v in sorted(epoch.effective_from.items())) or (
        "segment 0"
    )


# ---- capture --------------------------------------------------------------------------------


@contextmanager
def _live_panel(source: str, enabled: bool):
    """Yield a monitor callback drawing a rich panel (frames/s, Gbit/s, drops, open segment) on
    stderr while a live capture runs, or None when quiet (--json) or stderr is not a terminal."""
    if not enabled or not err.is_terminal:
        yield None
        return
    from rich.live import Live
    from rich.panel import Panel
    from rich.table import Table

    state = {"t": 0.0, "frames": 0, "bytes": 0, "fps": 0.0, "gbps": 0.0}

    def render(st) -> Panel:
        t = Table.grid(padding=(0, 2))
        t.add_column(justify="right", style="bold")
        t.add_column()
        t.add_row("frames", f"{st.frames:,}" if st else "0")
        t.add_row("rate", f"{state['fps']:,.0f} frames/s   {state['gbps']:.3f} Gbit/s")
        drops = st.drops if st else 0
        t.add_row(
            "drops",
            styled((f"{drops:,} DROPPED (declared as GAP records)", "bold red"))
            if drops
            else styled(("0", "green")),
        )
        if st:
            seg = (
                f"segment {st.open_segment}: {st.open_records:,} records"
                if st.open_segment is not None
                else "none open"
            )
            t.add_row("segments", f"{st.segments_sealed} sealed, {seg}")
            t.add_row(
                "elapsed",
                styled(
                    f"{st.elapsed_s:.1f} s",
                    ("   stopping: draining the ring", "yellow") if st.stopping else "",
                ),
            )
        return Panel(
            t,
            title=styled(f"capture {source}").text(),
            subtitle="Ctrl-C: seal and stop",
            expand=False,
        )

    with Live(render(None), console=err.rich, refresh_per_second=4, transient=False) as live:

        def cb(st) -> None:
            now = st.elapsed_s
            dt = now - state["t"]
            if dt < 0.25:
                return
            state["fps"] = (st.frames - state["frames"]) / dt
            state["gbps"] = (st.bytes - state["bytes"]) * 8 / dt / 1e9
            state.update(t=now, frames=st.frames, bytes=st.bytes)
            live.update(render(st))

        yield cb


@app.command()
def capture(
    source: Annotated[
        str,
        typer.Argument(
            help="pcap/pcapng file (gzip/xz/zstd-compressed too), - for standard input, "
            "workload:SPEC.toml (generated frames), iface:NAME (live AF_PACKET), xdp:NAME[:QUEUE] "
            "(live AF_XDP), dpdk:PORT (DPDK, with --eal), or records:FILE / records:- (records "
            "computed elsewhere, docs/devices.md)."
        ),
    ],
    ledger: Annotated[Path, typer.Option("--ledger", help="Ledger directory (created if absent).")],
    signing_key: Annotated[
        Path, typer.Option("--signing-key", help="signing.key from `keys generate`.")
    ],
    digest_key: Annotated[
        Path | None,
        typer.Option(
            "--digest-key",
            help="digest.key (32-byte master secret, hex). Required, except for records: sources.",
        ),
    ] = None,
    algorithm: Annotated[
        str | None,
        typer.Option(help="Digest algorithm for a new ledger (default: siphash-1-3-128)."),
    ] = None,
    strip: Annotated[
        str | None,
        typer.Option(
            metavar="MODE",
            help="Strip mode for a new ledger: frame, l3, payload or rdma (docs/strip-modes.md; "
            "default: frame).",
        ),
    ] = None,
    link: Annotated[
        str, typer.Option(metavar="NAME", help="Link name (hive partition link=NAME).")
    ] = "link0",
    workers: Annotated[
        int,
        typer.Option(
            help="Threads that digest each batch (0: every usable core); records do not depend on "
            "it. iface: receive rings in one fanout group, xdp: sockets on queues QUEUE.., dpdk: "
            "RX queues with RSS; one thread each (0: one); records merged by (ts_ns, worker, "
            "order). records: none (a warning says so).",
            min=0,
        ),
    ] = 0,
    segment_records: Annotated[
        int, typer.Option(help="Records per segment before it is sealed.", min=1)
    ] = 1_000_000,
    segment_seconds: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="Also seal a segment once it has been open this many seconds (wall clock).",
        ),
    ] = None,
    leaf_records: Annotated[
        int | None,
        typer.Option(
            help="Records per Merkle leaf for a new ledger, a power of two (default: 64 for ledger "
            "format v1, 256 for v2)."
        ),
    ] = None,
    leaf_hash: Annotated[
        str | None,
        typer.Option(
            metavar="sha256|blake3",
            help=(
                "Merkle leaf construction of a new v2 ledger: sha256 (leaf = SHA-256(0x00 || "
                "block)) or blake3 (leaf = SHA-256(0x00 || BLAKE3(block)), faster on AVX-512 "
                "CPUs). Default sha256."
            ),
        ),
    ] = None,
    ledger_format: Annotated[
        str | None,
        typer.Option(
            "--ledger-format",
            metavar="v1|v2",
            help="Ledger format of a new ledger: v1 (sealed segments are Parquet) or v2 (sealed "
            "segments are the raw record files; `ledgertool compact` makes them Parquet) (default: "
            "v2).",
        ),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(
            metavar="SECONDS|5m",
            help="Stop after this long: seconds, or a number with a unit (500ms, 90s, 5m, 2h).",
        ),
    ] = None,
    frames: Annotated[
        int | None, typer.Option("--frames", help="Stop after this many frames.")
    ] = None,
    ring_mb: Annotated[
        float,
        typer.Option(
            metavar="MIB",
            help="iface: receive ring size in MiB; xdp: UMEM per socket in MiB (4096-byte frames).",
        ),
    ] = 64.0,
    block_kb: Annotated[
        int, typer.Option(help="iface: ring block size in KiB, power of two (0: automatic).")
    ] = 0,
    block_ms: Annotated[int, typer.Option(help="iface: block retire timeout in ms.")] = 10,
    pin: Annotated[
        int | None,
        typer.Option(
            help="iface, xdp, dpdk: pin the capture thread to this CPU (with --workers N: worker i "
            "to CPU PIN+i)."
        ),
    ] = None,
    fanout_group: Annotated[
        int,
        typer.Option(
            help="iface with --workers N: PACKET_FANOUT group id to join (0: a new group with a "
            "random id)."
        ),
    ] = 0,
    promisc: Annotated[bool, typer.Option(help="iface, dpdk: promiscuous mode.")] = True,
    xdp_mode: Annotated[
        str,
        typer.Option(
            metavar="auto|zero-copy|copy",
            help="xdp: zero-copy, copy, or auto (zero-copy where the driver supports it).",
        ),
    ] = "auto",
    xdp_attach: Annotated[
        str,
        typer.Option(
            metavar="auto|native|skb",
            help="xdp: attach the XDP program in native (driver) or skb (generic) mode, or auto "
            "(native, else skb).",
        ),
    ] = "auto",
    eal: Annotated[
        str,
        typer.Option(
            metavar="ARGS",
            help='dpdk: EAL arguments, e.g. "-a 0000:3b:00.0" or "--no-huge --no-pci '
            '--vdev=net_pcap0,rx_pcap=FILE".',
        ),
    ] = "",
    rx_desc: Annotated[
        int, typer.Option(help="dpdk: RX descriptors per queue (0: 1024).", min=0)
    ] = 0,
    accept_gmac_forgery_risk: Annotated[
        bool,
        typer.Option(
            "--accept-gmac-forgery-risk",
            help="Create an aes-128-gmac ledger although whoever holds two of its tags "
            "can forge every tag (fixed IV; docs/algorithms.md).",
        ),
    ] = False,
    tiers: Annotated[
        str | None,
        typer.Option(
            "--tiers",
            metavar="TIER[,TIER]",
            help="Tiers of a new ledger: windows (one signed window record per link and window, no "
            "per-frame records), frames, or windows,frames (default: frames; windows needs "
            "--ledger-format v2 and frames digested here). Fixed per ledger.",
        ),
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(
            "--window",
            help="Window length of a new ledger's window tier: 100ms, 1s, 10s (default: 1s). Fixed "
            "per ledger.",
        ),
    ] = None,
    window_capacity: Annotated[
        int | None,
        typer.Option(
            "--window-capacity",
            help="Differences a window record decodes, for a new ledger's window tier (default: "
            "64). Fixed per ledger.",
        ),
    ] = None,
    digest_key_id: Annotated[
        str | None,
        typer.Option(
            "--digest-key-id",
            metavar="HEX",
            help="records: only: the digest key id of the key the device digested with (32 hex), "
            "for a new ledger without --digest-key; checked against an existing ledger's.",
        ),
    ] = None,
    device_id: Annotated[
        str | None,
        typer.Option(
            "--device-id",
            metavar="HEX",
            help="records: only: take an authenticated record stream from this device only (32 "
            "hex, as `keys device-init` printed); plain records are refused.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Digest every frame of a capture or a live interface (or seal records computed elsewhere)
    into a sealed, signed, hash-chained ledger."""
    from ..capture.run import capture_file
    from ..keyfiles import DigestKey, SigningKey
    from ..ledger.devstate import DeviceState
    from ..plan import parse_duration
    from ..source import is_live

    _check_capture_options(source, digest_key, ledger_format, leaf_hash, digest_key_id, device_id)
    live_source = is_live(source)
    seconds = None if duration is None else parse_duration(duration)
    opts = _receive_options(
        source,
        ring_mb=ring_mb,
        rx_desc=rx_desc,
        block_kb=block_kb,
        block_ms=block_ms,
        fanout_group=fanout_group,
        pin=pin,
        promisc=promisc,
        eal=eal,
        xdp_mode=xdp_mode,
        xdp_attach=xdp_attach,
    )
    dk = DigestKey.load(digest_key) if digest_key is not None else None
    sk = SigningKey.load(signing_key)
    ctx = (
        _live_panel(source, not (as_json or quiet))
        if live_source
        else _progress("capture", not (as_json or quiet), source)
    )

    def sealing(_open_records: int) -> None:
        # no count: the batch being digested when the signal came is still added, and may close
        # the segment; the summary (or --json) gives what was sealed
        err.print("sealing the open segment… (Ctrl-C again to abandon it; it stays recoverable)")

    try:
        with ctx as cb:
            res = capture_file(
                source,
                ledger,
                digest_key=dk,
                signing_key=sk,
                algorithm=algorithm,
                strip=strip,
                link=link,
                segment_records=segment_records,
                leaf_records=leaf_records,
                leaf_hash=leaf_hash,
                progress=None if live_source else cb,
                monitor=cb if live_source else None,
                segment_seconds=segment_seconds,
                duration=seconds,
                max_frames=frames,
                live=opts,
                workers=workers,
                accept_forgery_risk=accept_gmac_forgery_risk,
                digest_key_id=digest_key_id,
                device_id=device_id,
                on_interrupt=sealing,
                ledger_format=None if ledger_format is None else int(ledger_format[1]),
                device_state=DeviceState.beside(signing_key),
                tiers=None if tiers is None else tuple(t.strip() for t in tiers.split(",")),
                window_ns=None if window is None else _window_ns(window),
                window_capacity=window_capacity,
            )
    except KeyboardInterrupt:
        raise Interrupted(_abandoned(Path(ledger), signing_key)) from None
    except Exception as e:
        if _raised_unwinding_ctrl_c(e):  # the second Ctrl-C, whatever it interrupted
            raise Interrupted(_abandoned(Path(ledger), signing_key)) from None
        raise
    _capture_report(res, source=source, ledger=ledger, link=link, as_json=as_json)


def _check_capture_options(
    source: str,
    digest_key: Path | None,
    ledger_format: str | None,
    leaf_hash: str | None,
    digest_key_id: str | None,
    device_id: str | None,
) -> None:
    """`capture`'s option combinations a typer type cannot check: UsageError (exit 2) on the
    first that does not fit the source."""
    from ..source.records import is_records

    records = is_records(source)
    if digest_key is None and not records:
        raise UsageError("--digest-key is required (only a records: source goes without it)")
    if ledger_format not in (None, "v1", "v2"):
        raise UsageError(f"--ledger-format must be v1 or v2, not {ledger_format!r}")
    if leaf_hash not in (None, "sha256", "blake3"):
        raise UsageError(f"--leaf-hash must be sha256 or blake3, not {leaf_hash!r}")
    if digest_key_id is not None and not records:
        raise UsageError("--digest-key-id is only for records: sources")
    if device_id is not None and not records:
        raise UsageError("--device-id is only for records: sources")


def _receive_options(
    source: str,
    *,
    ring_mb: float,
    rx_desc: int,
    block_kb: int,
    block_ms: int,
    fanout_group: int,
    pin: int | None,
    promisc: bool,
    eal: str,
    xdp_mode: str,
    xdp_attach: str,
):
    """The receive options of a live source as the typed value its receiver takes: BypassOptions
    for xdp:/dpdk:, LiveOptions for iface:, None for a file, standard input or records."""
    from ..source import is_bypass, is_live

    if is_bypass(source):
        from ..source.bypass import BypassOptions

        return BypassOptions(
            ring_mb=ring_mb,
            rx_desc=rx_desc,
            pin_cpu=pin,
            promisc=promisc,
            eal=eal,
            xdp_mode=xdp_mode,
            xdp_attach=xdp_attach,
        )
    if is_live(source):
        from ..source.live import LiveOptions

        return LiveOptions(
            ring_mb=ring_mb,
            block_kb=block_kb,
            block_ms=block_ms,
            fanout_group=fanout_group,
            promisc=promisc,
            pin_cpu=pin,
        )
    return None


def _capture_report(res, *, source: str, ledger: Path, link: str, as_json: bool) -> None:
    """What `capture` says once sealed: the sealed line, warnings and drops on stderr, then the
    JSON report or the summary lines on stdout."""
    from ..source import is_live

    live_source = is_live(source)
    _done(
        f"{ledger}: the capture was sealed ({plural(res.frames, 'frame', fmt=',')} in "
        f"{plural(len(res.segments), 'segment')}, its checkpoint signed)"
    )
    for w in res.warnings:
        err.print(styled(("warning:", "yellow"), f" {w}"))
    if res.drops:
        why = (
            "the receive ring was full, or a socket outside the fanout group took them"
            if live_source
            else "the capture declares them lost: ERF loss counters, or GAP records given"
        )
        were = "was" if res.drops == 1 else "were"
        err.print(
            styled(
                (
                    f"DROPS: {plural(res.drops, 'frame', fmt=',')} {were} not digested ({why}); "
                    "the ledger declares them in GAP records",
                    "bold red",
                )
            )
        )
    if as_json:
        _emit_json(res.to_json())
    else:
        _capture_summary(res, source=source, ledger=ledger, link=link)
    if res.interrupted:
        err.print(styled(("interrupted: open segment sealed", "yellow")))


def _capture_summary(res, *, source: str, ledger: Path, link: str) -> None:
    """`capture`'s summary lines on stdout (without --json)."""
    segs = f"{res.segments[0].index}..{res.segments[-1].index}" if res.segments else "none"
    seqs = f"{res.first_seq}..{res.next_seq - 1}" if res.next_seq > res.first_seq else "none"
    # the window tier alone keeps no per-frame segment or sequence number to name
    kept = f"segments {segs}, seq {seqs}, " if "frames" in res.tiers else ""
    out.print(
        f"captured {plural(res.frames, 'frame', fmt=',')} ({plural(res.bytes, 'byte', fmt=',')}) "
        f"from {source} into {ledger} link {link}: {kept}drops {res.drops}"
    )
    out.print(
        f"{res.elapsed_s:.3f} s, {_rate(res.frames_per_s)}frames/s, {res.gbit_per_s:.3g} Gbit/s"
        f" ({res.algorithm}, strip {res.strip})"
    )
    _fallback_line(res.strip_fallbacks, res.strip, res.frames, source)
    if res.live is None and res.stop_reason in ("duration", "frames"):
        # a file or workload has an end of its own: say that the capture may not have reached it
        out.print(
            f"stopped by --{res.stop_reason}: any frames of {source} after that point are not in "
            "the ledger"
        )
    if res.windows is not None:
        w = res.windows
        segs = ", ".join(map(str, w.segments)) or "none"
        span = "none" if w.first_index is None else f"{w.first_index}..{w.last_index}"
        out.print(
            f"window tier: {plural(w.windows, 'window', fmt=',')} "
            f"({plural(w.frames, 'frame', fmt=',')}) into {w.log}, windows {span}, segments {segs}"
            + ("" if "frames" in res.tiers else "; no per-frame records (--tiers windows)")
        )
    if res.live and ("xdp" in res.live or "dpdk" in res.live):
        out.print(_bypass_summary(res.live))


def _window_ns(text: str) -> int:
    """A window length ('100ms', '1s') in whole nanoseconds."""
    from ..plan import parse_duration

    ns = round(parse_duration(text, "window") * 1e9)
    if ns < 1:
        raise UsageError(f"--window {text!r} is shorter than 1 ns")
    return ns


def _bypass_summary(live: dict) -> str:
    """One line on how an xdp:/dpdk: capture received: zero-copy or copy, queues, drops per
    cause."""
    if "xdp" in live:
        x = live["xdp"]
        qs = ",".join(str(q["queue"]) for q in x["queues"])
        return (
            f"AF_XDP {x['mode']} mode, {x['attach']} XDP, "
            f"queue{'s' if len(x['queues']) > 1 else ''} {qs}: {live['kernel_packets']:,} frames "
            f"redirected, {live['kernel_drops']:,} dropped by the socket"
        )
    d = live["dpdk"]
    return (
        f"DPDK port {d['port']} ({d['driver']}), {len(d['queues'])} RX "
        f"queue{'s' if len(d['queues']) > 1 else ''}{' with RSS' if d['rss'] else ''}, zero-copy: "
        f"{live['kernel_packets']:,} frames seen, {live['kernel_drops']:,} dropped (imissed + "
        "rx_nombuf + ierrors)"
    )


# ---- replay ---------------------------------------------------------------------------------


@app.command()
def replay(
    file: Annotated[Path, typer.Argument(help="pcap/pcapng file to transmit (Ethernet frames).")],
    iface: Annotated[str, typer.Option("--iface", help="Interface to send on.")],
    pps: Annotated[float | None, typer.Option("--pps", help="Frames per second.")] = None,
    mbps: Annotated[
        float | None, typer.Option("--mbps", help="Megabits per second of frame bytes.")
    ] = None,
    topspeed: Annotated[
        bool, typer.Option("--topspeed", help="As fast as the socket takes them.")
    ] = False,
    loop: Annotated[int, typer.Option("--loop", help="Send the file this many times.", min=1)] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
) -> None:
    """Transmit a capture on an interface (PF_PACKET, sendmmsg), like tcpreplay.

    Without --pps/--mbps/--topspeed the frames keep the capture's own timing.
    """
    from ..source.live import replay as do_replay

    chosen = [
        name
        for name, on in (
            ("pps", pps is not None),
            ("mbps", mbps is not None),
            ("topspeed", topspeed),
        )
        if on
    ]
    if len(chosen) > 1:
        raise UsageError("choose one of --pps, --mbps, --topspeed")
    mode = chosen[0] if chosen else "timing"
    rate = pps if mode == "pps" else mbps if mode == "mbps" else None
    if iface.startswith("iface:"):
        iface = iface[len("iface:") :]
    res = do_replay(file, iface, mode=mode, rate=rate, loops=loop)
    skipped = res.skipped_too_large + res.skipped_too_short + res.skipped_linktype
    if skipped:
        err.print(
            styled(
                ("warning:", "yellow"),
                f" {plural(skipped, 'frame', fmt=',')} not sent: {res.skipped_too_large:,} longer "
                f"than the MTU allows, {res.skipped_too_short:,} shorter than an Ethernet header, "
                f"{res.skipped_linktype:,} not Ethernet",
            )
        )
    if res.send_errors:
        err.print(
            styled(
                ("warning:", "yellow"),
                f" {plural(res.send_errors, 'frame', fmt=',')} refused by the socket",
            )
        )
    if as_json:
        _emit_json(res.to_json())
    else:
        out.print(
            f"sent {plural(res.frames_sent, 'frame', fmt=',')} "
            f"({plural(res.bytes_sent, 'byte', fmt=',')}) on {iface} in {res.elapsed_s:.3f} s: "
            f"{res.frames_per_s:,.0f} frames/s, {res.mbit_per_s:,.1f} Mbit/s "
            f"({mode}{f' {rate:g}' if rate else ''}, {loop} loop{'s' if loop > 1 else ''})"
        )
    if res.interrupted:
        err.print(styled(("interrupted", "yellow")))


# ---- verify ---------------------------------------------------------------------------------


@app.command()
def verify(
    ledgers: Annotated[
        list[str],
        typer.Argument(
            metavar="DIR",
            help="Ledger directories (one or more): paths, file:// or fsspec URLs (s3://...).",
        ),
    ],
    trust: Annotated[Path, typer.Option("--trust", help="verifier.pub trust bundle.")],
    checkpoint: Annotated[
        Path | None, typer.Option("--checkpoint", help="A checkpoint the ledger must extend.")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            metavar="ADDRESS",
            help="Run the per-segment checks on a Dask cluster: tls://HOST:PORT (a scheduler), "
            "local:N (N worker processes here, TLS of their own) or, with --insecure-cluster, "
            "tcp://HOST:PORT; needs ledgertool[cluster].",
        ),
    ] = None,
    insecure_cluster: InsecureClusterOpt = False,
    witness_key: Annotated[
        list[str] | None,
        typer.Option(
            "--witness-key",
            metavar="VKEY",
            help="A witness's vkey whose cosignature on --checkpoint counts (repeat for each).",
        ),
    ] = None,
    witness_threshold: Annotated[
        int | None,
        typer.Option(
            "--witness-threshold", help="Cosignatures required (default: every --witness-key)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="No progress and no append-only note on stderr (--json still carries the note); "
            "warnings and the verdict stay.",
        ),
    ] = False,
) -> None:
    """Check signatures, chain, record files (v1: their hashes), Merkle roots, counts, sequences,
    checkpoints."""
    from ..keyfiles import TrustBundle
    from ..verify.ledger import verify_ledger

    if checkpoint is not None and len(ledgers) > 1:
        raise UsageError("--checkpoint is one ledger's checkpoint: give one DIR with it")
    ledgers = [location(d) for d in ledgers]
    bundle = TrustBundle.load(trust)
    note = _read_input(checkpoint, "checkpoint") if checkpoint is not None else None
    if witness_threshold is not None and not witness_key:
        raise UsageError("--witness-threshold counts the cosignatures of the --witness-key given")
    if witness_key and note is None:
        raise UsageError("--witness-key and --witness-threshold check the --checkpoint given")
    with _segment_checker(cluster, insecure_cluster) as checker, _shown(quiet, as_json) as progress:
        if len(ledgers) == 1:
            res = verify_ledger(
                ledgers[0], bundle, note, str(checkpoint), checker=checker, progress=progress
            )
        else:
            from ..verify.many import verify_ledgers  # several ledgers only

            many = verify_ledgers(ledgers, bundle, checker=checker, progress=progress)
    if len(ledgers) == 1:
        if witness_key:
            from .audit import witness_check

            wc = witness_check(note, witness_key, witness_threshold, str(checkpoint))
            for p in wc.problems:
                res.add(p)
            res.checkpoint = {**(res.checkpoint or {}), "witnesses": wc.to_json()}
        if as_json:
            _emit_json(res.to_json())
        else:
            _print_verify(res, "", quiet)
        raise typer.Exit(0 if res.ok else 1)
    if as_json:
        _emit_json(many.to_json())
    else:
        for o in many.outcomes:
            if o.result is None:
                err.print(f"error: {o.error}")
            else:
                _print_verify(o.result, f"{o.ledger}: ", quiet)
        t = many.total()
        unverifiable = (
            f", {plural(t.error_ledgers, 'ledger')} not verifiable" if t.error_ledgers else ""
        )
        status = (
            ("OK", "green")
            if many.ok
            else (f"{plural(t.problems, 'problem')}{unverifiable}", "red")
        )
        out.print(
            styled(
                "total: ",
                status,
                f": {plural(t.ledgers, 'ledger')} ({t.ok_ledgers} OK, {t.failed_ledgers} with "
                f"problems, {t.error_ledgers} not verifiable), "
                f"{plural(t.segments, 'segment')}, {plural(t.records, 'record', fmt=',')}, "
                f"{plural(t.frames, 'frame', fmt=',')}, {plural(t.drops_declared, 'drop')} "
                "declared",
            )
        )
    raise typer.Exit(many.exit_code)


@contextmanager
def _segment_checker(address: str | None, insecure: bool = False):
    """None (the checks run here), or a checker on the Dask cluster at `address` for the run."""
    if address is None:
        if insecure:
            raise UsageError("--insecure-cluster goes with --cluster tcp://HOST:PORT")
        yield None
        return
    with _cluster_client(address, insecure) as client:
        from ..verify.cluster import ClusterChecker

        yield ClusterChecker(client)


@contextmanager
def _cluster_client(address: str, insecure: bool = False):
    """A Dask client on the cluster at `address` (--cluster) for the run; a tcp:// scheduler only
    with `insecure` (--insecure-cluster)."""
    try:
        from ..verify import cluster
    except ImportError as e:
        if (e.name or "").split(".")[0] not in ("dask", "distributed"):
            raise
        raise UsageError(
            "--cluster needs Dask, which is not installed: install ledgertool[cluster] "
            "(pip install 'ledgertool[cluster]')"
        ) from None
    with cluster.connect(cluster.parse_address(address, plain_tcp=insecure)) as client:
        yield client


def _print_verify(res, prefix: str, quiet: bool = False) -> None:
    """One ledger's verify report as text: warnings on stderr, FAIL lines and the verdict on stdout,
    every line after `prefix` (several ledgers: `DIR: `, so each line names its ledger); the
    append-only note only without `quiet` (a cron job's run is silent when all is well)."""
    for w in res.warnings:
        err.print(styled(prefix, ("warning", "yellow"), f" {w.kind}{_where(w)}: {w.detail}"))
    for p in res.problems:
        out.print(styled(prefix, ("FAIL", "red"), f" {p.kind}{_where(p)}: {p.detail}"))
    # beside the warnings: stdout keeps FAIL lines and one verdict line
    if res.append_only.get("note") and not quiet:
        err.print(f"{prefix}note: {res.append_only['note']}")
    status = ("OK", "green") if res.ok else (f"{plural(len(res.problems), 'problem')}", "red")
    out.print(
        styled(
            prefix,
            status,
            f": {plural(res.segments, 'segment')}, {plural(res.records, 'record', fmt=',')}, "
            f"{plural(res.frames, 'frame', fmt=',')}, {plural(res.drops_declared, 'drop')} "
            f"declared, links {', '.join(res.links) or 'none'}"
            + "".join(
                f"; {w.log}: {plural(w.segments, 'segment')}, "
                f"{plural(w.windows, 'window', fmt=',')}, "
                f"{plural(w.frames, 'frame', fmt=',')}"
                for w in res.windows
            )
            + "".join(
                f"; pruned {p.link}: segments {p.first_segment}..{p.last_segment} "
                f"({plural(p.records, 'record', fmt=',')}; seals checked, records no longer held)"
                for p in res.pruned
            ),
        )
    )


def _unverified_warning(res) -> None:
    """One stderr line when a ledger was read with the keyless checks only (no --trust)."""
    if not res.signatures_checked:
        err.print(
            f"warning: {res.ledger}: UNVERIFIED: no --trust given, so seal signatures were not "
            "checked; the records are the ledger's as found, consistent only with their own seals"
        )


def _held_seq(ledger, link: str | None, digest: str):
    """`prove --digest` on a pruned ledger: the seq of the first held record with that digest
    (LedgerFormatError naming what was pruned when none has it); on a ledger never pruned, the
    digest is left to build_proof (returns None and keeps `digest`)."""
    from ..errors import LedgerFormatError
    from ..ledger.index import choose_link
    from ..verify.held import held_seq_of_digest, pruned_segments

    name = choose_link(ledger, link)
    gone = pruned_segments(ledger, name)
    try:
        want = bytes.fromhex(digest)
    except ValueError:
        want = None
    if not gone or want is None:
        return None
    seq = held_seq_of_digest(ledger, name, want)
    if seq is None:
        raise LedgerFormatError(
            f"{ledger}: link {name} has no held record with digest {digest}; the records of "
            f"segments {min(gone)}..{max(gone)} were pruned and can no longer be searched or proven"
        )
    return seq


def _pruned_note(res) -> None:
    """One stderr line per link whose per-frame records `prune` removed: readers of the records
    (query's `records` table) see the rest only."""
    for p in res.pruned:
        err.print(
            f"note: {res.ledger}: {p.text()}: the records table does not hold them (the seals "
            "and windows tables do)"
        )


def _read_input(path: Path, what: str) -> bytes:
    """A checkpoint file the user names: a regular file (a link is followed: it is the user's),
    never a FIFO or device that would block; fsio's one-line errors."""
    from ..fsio import read_regular
    from ..seal.checkpoint import MAX_NOTE_BYTES

    return read_regular(path, MAX_NOTE_BYTES, follow=True, what=what)


# ---- transparency: recover, checkpoints, proofs ---------------------------------------------


@app.command()
def recover(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    signing_key: Annotated[
        Path, typer.Option("--signing-key", help="The ledger's current signing.key.")
    ],
    trust_unauthenticated_open_segments: Annotated[
        bool,
        typer.Option(
            "--trust-unauthenticated-open-segments",
            help="Also seal v1 open segments, which carry no device MACs: only when the storage is "
            "trusted.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
) -> None:
    """Seal the authenticated prefix of the open segments a crash left, report what lay past it."""
    from ..keyfiles import SigningKey
    from ..ledger.devstate import DeviceState
    from ..ledger.recover import recover_ledger

    # the device's protected state lives beside its key: what it signed is never signed over again
    res = recover_ledger(
        ledger,
        SigningKey.load(signing_key),
        trust_unauthenticated=trust_unauthenticated_open_segments,
        device_state=DeviceState.beside(signing_key),
    )
    if as_json:
        _emit_json(res.to_json())
        raise typer.Exit(0 if res.ok else 1)
    for note in res.notes:
        err.print(f"note: {note}")
    for link, r in res.sealed:
        out.print(
            f"sealed link {link} segment {r.index}: {plural(r.records, 'record', fmt=',')} in "
            f"{plural(r.blocks, 'authenticated block')}, {plural(r.torn_bytes, 'byte')} past them "
            "not sealed"
            if r.blocks
            else f"sealed link {link} segment {r.index}: {plural(r.records, 'record', fmt=',')} "
            f"(v1, storage trusted), {plural(r.torn_bytes, 'torn byte')} discarded"
        )
    for d in res.discarded:
        out.print(f"discarded {d['path']}: {plural(d['bytes'], 'byte')} ({d['why']})")
    for a in res.set_aside:
        out.print(
            f"set aside {a.path} as {a.moved_to}: {plural(a.bytes, 'byte')} not sealed ({a.why})"
        )
    out.print(
        f"recovered {plural(len(res.sealed), 'segment')}, {plural(res.torn_bytes, 'byte')} "
        "discarded" + (f", {plural(len(res.set_aside), 'file')} set aside" if res.set_aside else "")
    )
    if not res.ok:
        raise typer.Exit(1)  # a block or header failed the device's authentication: a discrepancy


@app.command()
def prune(
    ledger: Annotated[Path, typer.Argument(metavar="DIR", help="Ledger directory.")],
    before: Annotated[
        str,
        typer.Option(
            "--before",
            metavar="TIME",
            help="Cut-off: ns since the epoch or ISO 8601 (UTC if no zone); segments whose "
            "records all lie before it lose their record files.",
        ),
    ],
    signing_key: Annotated[
        Path,
        typer.Option("--signing-key", metavar="FILE", help="The ledger's current signing.key."),
    ],
    link: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME", help="Prune only this link (repeatable)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Prune records the window tier does not cover too (verify then warns "
            "pruned_uncovered).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
) -> None:
    """Remove old per-frame record files, leaving their seals and a signed prune statement."""
    from ..keyfiles import SigningKey
    from ..ledger.prune import prune_ledger

    cut = _parse_time(before, "--before")
    res = prune_ledger(ledger, cut, SigningKey.load(signing_key), links=link or None, force=force)
    if as_json:
        _emit_json(res.to_json())
        return
    for p in res.pruned:
        out.print(
            f"pruned link {p.link} segments {p.from_segment}..{p.to_segment}: "
            f"{plural(p.records, 'record', fmt=',')} ({plural(p.frames, 'frame', fmt=',')}), "
            f"{plural(p.bytes_removed, 'byte', fmt=',')} removed; "
            + (
                f"the window tier holds {p.window_frames:,} frames of the link"
                if p.window_frames is not None
                else "no window tier holds them"
            )
        )
    for k in res.kept:
        out.print(k)
    out.print(
        f"statement {res.statement}" if res.statement else "nothing to prune before the cut-off"
    )


@app.command()
def compact(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory (format v2).")],
    link: Annotated[
        list[str] | None,
        typer.Option(metavar="NAME", help="Compact only this link (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Turn v2 segments' raw record files into Parquet, each checked against its seal's root
    first."""
    from ..ledger.compact import compact_ledger

    with _shown(quiet, as_json) as show:
        res = compact_ledger(ledger, link or None, progress=show)
    if as_json:
        _emit_json(res.to_json())
        return
    for c in res.compacted:
        out.print(
            f"compacted link {c.link} segment {c.index}: {plural(c.records, 'record', fmt=',')}, "
            f"{plural(c.parquet_bytes, 'byte', fmt=',')} of "
            f"Parquet" + (" (finished an interrupted compaction)" if c.finished_leftover else "")
        )
    out.print(
        f"compacted {plural(len(res.compacted), 'segment')}, "
        f"{plural(res.records, 'record', fmt=',')}; {res.already_parquet} already "
        "Parquet"
    )


@app.command("checkpoint")
def checkpoint_cmd(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the checkpoint note.")],
    signing_key: Annotated[
        Path | None,
        typer.Option(
            "--signing-key", help="Sign a fresh checkpoint of the ledger's current state."
        ),
    ] = None,
    link: Annotated[
        str | None, typer.Option(metavar="NAME", help="Link (default: the only one).")
    ] = None,
    witness: Annotated[
        list[str] | None,
        typer.Option(
            "--witness",
            metavar="URL=VKEY",
            help="A tlog-witness to cosign the checkpoint (repeat for each witness).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Export the link's checkpoint (C2SP tlog-checkpoint signed note), cosigned by witnesses."""
    from ..keyfiles import SigningKey
    from ..ledger.checkpoints import export_checkpoint
    from ..ledger.devstate import DeviceState

    sk = SigningKey.load(signing_key) if signing_key is not None else None
    specs = []
    if witness:  # every --witness checked before the checkpoint is written
        from .audit import witness_specs

        specs = witness_specs(witness)
    notes: list[str] = []
    cp = export_checkpoint(
        ledger,
        out_file,
        signing_key=sk,
        link=link,
        notes=notes,
        device_state=DeviceState.beside(signing_key) if signing_key else None,
    )
    for note in notes:
        err.print(f"note: {note}")
    cosigned = []
    if specs:
        from .audit import collect_cosignatures

        cosigned = collect_cosignatures(ledger, out_file, specs)
    if as_json:
        _emit_json({"ok": True, "out": str(out_file), **cp.to_json(), "cosigned_by": cosigned})
    else:
        out.print(
            f"checkpoint {cp.origin}: {plural(cp.size, 'segment')}, "
            f"{plural(cp.records, 'record')}, root {cp.root.hex()} -> {out_file}"
            + (f", cosigned by {', '.join(cosigned)}" if cosigned else "")
        )


@app.command("check-consistency")
def check_consistency_cmd(
    old: Annotated[Path, typer.Argument(help="Older checkpoint.")],
    new: Annotated[Path, typer.Argument(help="Newer checkpoint.")],
    ledger: Annotated[
        Path, typer.Option("--ledger", help="Ledger the consistency proof is built from.")
    ],
    trust: Annotated[Path, typer.Option("--trust", help="verifier.pub trust bundle.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
) -> None:
    """Check (RFC 9162 consistency proof) that checkpoint NEW extends checkpoint OLD."""
    from ..keyfiles import TrustBundle
    from ..ledger.checkpoints import check_consistency

    bundle = TrustBundle.load(trust)
    res = check_consistency(
        _read_input(old, "checkpoint"),
        _read_input(new, "checkpoint"),
        ledger,
        bundle,
        str(old),
        str(new),
    )
    if as_json:
        _emit_json(res.to_json())
    elif res.ok:
        out.print(
            styled(
                ("CONSISTENT", "green"),
                f": {new} ({plural(res.new.size, 'segment')}) extends {old} "
                f"({res.old.size}); proof of "
                f"{plural(len(res.proof), 'hash', 'hashes')}",
            )
        )
    else:
        out.print(styled(("INCONSISTENT", "red"), f": {res.reason}"))
    raise typer.Exit(0 if res.ok else 1)


@app.command()
def prove(
    ledger: Annotated[
        str, typer.Argument(metavar="DIR", help="Ledger directory (a path, file:// or fsspec URL).")
    ],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write PROOF.json.")],
    seq: Annotated[
        int | None, typer.Option("--seq", help="Sequence number of the record.", min=0)
    ] = None,
    digest: Annotated[
        str | None, typer.Option("--digest", metavar="HEX", help="Digest (hex) of the record.")
    ] = None,
    window: Annotated[
        str | None,
        typer.Option(
            "--window",
            metavar="TIME",
            help="Prove the window record of the window holding this time (ns since the epoch "
            "or ISO 8601, UTC if no zone; a window's start names it).",
        ),
    ] = None,
    link: Annotated[
        str | None, typer.Option(metavar="NAME", help="Link (default: the only one).")
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            help="Chain the proof to this checkpoint (default: the link's stored one).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Write an inclusion proof of one record (or one window record) under its signed seal and
    the link's checkpoint."""
    from ..fsio import write_atomic
    from ..verify.proof import build_proof, build_window_proof

    if window is None:
        if seq is None and digest is None:
            raise UsageError("prove needs one of --seq N, --digest HEX or --window TIME")
        if link is None and _LazyLedger(location(ledger)).windows_only():
            raise UsageError(
                f"{ledger}: the ledger keeps no per-frame records, only window records: prove "
                "a window record with --window TIME"
            )
    if window is None and digest is not None and seq is None:
        # a pruned ledger: search the records still held
        found = _held_seq(location(ledger), link, digest)
        if found is not None:
            seq, digest = found, None
    held = dict(
        link=link,
        checkpoint=_read_input(checkpoint, "checkpoint") if checkpoint else None,
        checkpoint_where=str(checkpoint) if checkpoint else "checkpoint",
    )
    if window is not None:
        if seq is not None or digest is not None:
            raise UsageError("prove --window proves a window: drop --seq and --digest")
        proof = build_window_proof(location(ledger), at_ns=_parse_time(window, "--window"), **held)
    else:
        proof = build_proof(location(ledger), seq=seq, digest=digest, **held)
    write_atomic(out_file.absolute(), proof.to_bytes(), what="proof")
    cp = proof.checkpoint
    summary = {
        "ok": True,
        "out": str(out_file),
        "link": proof.link,
        "segment": proof.segment,
        **_proved(proof),
        "audit_path": len(proof.audit_path),
        "checkpoint_size": cp.tree_size if cp else None,
    }
    if as_json:
        _emit_json(summary)
        return
    to = f", to the checkpoint of tree size {cp.tree_size}" if cp else ", no checkpoint covers it"
    n_path = len(proof.audit_path)
    what = (
        f"window {summary['window_index']} (start {summary['start_ns']} ns, log {proof.link} "
        f"segment {proof.segment} record {proof.leaf_index}"
        if "window_index" in summary
        else f"seq {summary['seq']} (link {proof.link} segment {proof.segment} record "
        f"{summary['record_index']}"
    )
    out.print(
        f"proof of {what}, {n_path} path hash{'' if n_path == 1 else 'es'}{to}) -> {out_file}"
    )


def _proved(proof) -> dict:
    """prove's JSON members naming what was proved: a record's place and seq, or a window's."""
    from ..verify.proof import WindowProof

    if isinstance(proof, WindowProof):
        w = proof.window
        return {
            "record_index": proof.leaf_index,
            "window_index": str(w.index),
            "start_ns": str(w.start_ns),
        }
    return {"record_index": proof.record_index, "seq": str(proof.record.seq)}


@app.command("check-proof")
def check_proof_cmd(
    proof: Annotated[Path, typer.Argument(help="PROOF.json from `ledgertool prove`.")],
    trust: Annotated[Path, typer.Option("--trust", help="verifier.pub trust bundle.")],
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint", help="A checkpoint you hold: the proof must reach exactly this one."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
) -> None:
    """Verify an inclusion proof offline (exit 0 valid, 1 invalid, 2 unreadable)."""
    from ..errors import LedgerFormatError
    from ..keyfiles import TrustBundle
    from ..seal.checkpoint import origin_for, parse_note
    from ..verify.proof import WindowProof, check_proof, load_proof

    bundle = TrustBundle.load(trust)
    doc = load_proof(proof)
    held = (
        parse_note(_read_input(checkpoint, "checkpoint"), str(checkpoint)) if checkpoint else None
    )
    if held is not None and held.checkpoint.origin != origin_for(doc.ledger_id, doc.link):
        # another ledger's or link's checkpoint is bad input (exit 2), as for verify and prove
        raise LedgerFormatError(
            f"{checkpoint}: checkpoint is for {held.checkpoint.origin}, "
            f"not {origin_for(doc.ledger_id, doc.link)}"
        )
    res = check_proof(doc, bundle, held)
    for w in res.warnings:
        err.print(styled(("warning:", "yellow"), f" {w}"))
    if as_json:
        _emit_json(res.to_json())
        raise typer.Exit(0 if res.ok else 1)
    where = f"ledger {doc.ledger_id} link {doc.link} segment {doc.segment}"
    if isinstance(doc, WindowProof):
        w = doc.window
        claim = f"window {w.index} of {where}"
        subject = (
            f"window {w.index} (start {w.start_ns} ns, {w.window_ns} ns long: "
            f"{plural(w.frames, 'frame')}, {w.wire_bytes} bytes, {w.drops} drops, {w.late} late) "
            f"is record {doc.leaf_index} of {where}"
        )
    else:
        r = doc.record
        claim = f"seq {r.seq} of {where}"
        subject = f"seq {r.seq} digest {r.digest.hex()} is record {doc.record_index} of {where}"
    if res.ok:
        to = (
            f" and the checkpoint of tree size {res.checkpoint.size}"
            if res.checkpoint
            else " (the proof carries no checkpoint)"
        )
        out.print(styled(("VALID", "green"), f": {subject} under its signed seal{to}"))
    else:  # what the proof claims, unverified: it names the proof, not a fact
        out.print(styled(("INVALID", "red"), f": {res.reason} (the proof claims {claim})"))
    raise typer.Exit(0 if res.ok else 1)


def _where(p) -> str:
    """' link L segment S record R' with only the parts that apply."""
    parts = [(k, getattr(p, k, None)) for k in ("link", "segment", "record")]
    return "".join(f" {k} {v}" for k, v in parts if v is not None)


# ---- recompute ------------------------------------------------------------------------------


@app.command()
def recompute(
    digest_key: Annotated[
        list[Path],
        typer.Option(
            "--digest-key",
            metavar="FILE",
            help="digest.key used for the ledger; repeat it for each key of a ledger whose digest "
            "key was rotated (with --pairs: every ledger's keys, each ledger takes those its key "
            "ids name).",
        ),
    ],
    sources: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="CAPTURE",
            help="pcap/pcapng files (gzip/xz/zstd-compressed too), - for standard input, or "
            "workload:SPEC.toml, to recompute (several: taken as one capture in the order given).",
        ),
    ] = None,
    ledger: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            metavar="DIR",
            help="Ledger to reconcile against (a path, file:// or fsspec URL).",
        ),
    ] = None,
    pairs: Annotated[
        Path | None,
        typer.Option(
            "--pairs",
            metavar="FILE.toml",
            help="Reconcile many ledgers, each with its own captures, listed as "
            "[[pair]] ledger = DIR, captures = [...] in FILE.toml; a report per pair "
            "and a total.",
        ),
    ] = None,
    trust: Annotated[
        Path | None,
        typer.Option(
            "--trust",
            help="With --ledger: verifier.pub; the ledger is verified before it is reconciled "
            "(without it only the keyless checks run and the result is UNVERIFIED, exit 1).",
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="With --ledger: a checkpoint the ledger must extend."),
    ] = None,
    algorithm: Annotated[
        str | None, typer.Option(help="Without --ledger: digest algorithm.")
    ] = None,
    strip: Annotated[
        str | None, typer.Option(metavar="MODE", help="Without --ledger: strip mode.")
    ] = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Without --ledger: per-frame Parquet output.")
    ] = None,
    from_time: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="TIME",
            help="Window start: ns since the epoch or ISO 8601 (UTC if no zone).",
        ),
    ] = None,
    to_time: Annotated[
        str | None,
        typer.Option("--to", metavar="TIME", help="Window end (exclusive), like --from."),
    ] = None,
    tolerance: Annotated[
        str,
        typer.Option(
            help="Timestamp tolerance at the window edges between two capture points, e.g. 5us, "
            "1ms."
        ),
    ] = "0",
    link: Annotated[
        list[str] | None,
        typer.Option(
            "--link", metavar="NAME", help="Restrict the ledger side to this link (repeatable)."
        ),
    ] = None,
    details: Annotated[
        Path | None,
        typer.Option("--details", help="Write every differing frame as JSON lines to FILE."),
    ] = None,
    memory_limit: Annotated[
        str, typer.Option(help="DuckDB memory limit; larger sets spill to a temporary directory.")
    ] = "4GB",
    workers: Annotated[
        int,
        typer.Option(
            help="Threads that digest each batch (0: every usable core); digests do not depend on "
            "it.",
            min=0,
        ),
    ] = 0,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            metavar="ADDRESS",
            help="With --ledger: digest, verify and reconcile on a Dask cluster: tls://HOST:PORT "
            "(a scheduler), local:N (N worker processes here, TLS of their own) or, with "
            "--insecure-cluster, tcp://HOST:PORT; needs ledgertool[cluster].",
        ),
    ] = None,
    insecure_cluster: InsecureClusterOpt = False,
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            metavar="frames|windows",
            help=(
                "With --ledger: compare with the link's per-frame records or its window records; "
                "default: windows when the ledger keeps no per-frame records, else frames."
            ),
        ),
    ] = None,
    windows_range: Annotated[
        str | None,
        typer.Option(
            "--windows-range",
            metavar="all|FROM..TO",
            help="Against windows without a shared clock: one verdict over the ledger's windows "
            "FROM..TO (indexes, inclusive) or all, against the whole capture.",
        ),
    ] = None,
    challenge: Annotated[
        Path | None,
        typer.Option(
            "--challenge",
            metavar="FILE",
            help="Recompute only the windows a challenge (`challenge draw`) selected; the "
            "capture is the prover's reveal.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report only.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Recompute digests of a capture and reconcile them with a ledger (multisets, DuckDB), or
    with its window records (--against windows)."""
    from ..keyfiles import DigestKey
    from ..reconcile.request import Mode
    from .recompute_mode import Given, recompute_mode

    dks = [DigestKey.load(k) for k in digest_key]
    opened = _LazyLedger(ledger)
    given = Given(
        sources=len(sources or ()),
        ledger=ledger is not None,
        pairs=pairs is not None,
        links=bool(link),
        trust=trust is not None,
        checkpoint=checkpoint is not None,
        digest_keys=len(dks),
        algorithm=bool(algorithm),
        strip=bool(strip),
        out=bool(out_file),
        cluster=cluster is not None,
        insecure_cluster=insecure_cluster,
        details=details is not None,
        against=against,
        windows_range=windows_range is not None,
        challenge=challenge is not None,
    )
    mode = recompute_mode(
        given, opened.windows_only, lambda: _recompute_window(from_time, to_time, tolerance)
    )
    if mode in (Mode.FRAMES, Mode.CLUSTER) and opened.windows_only():
        # --against frames: every frame would look added, there being nothing per frame to match
        raise UsageError(
            f"{opened.where}: the ledger keeps no per-frame records, only window records: "
            "recompute it against them (--against windows, its default)"
        )
    shown = (as_json, quiet, workers)
    if mode is Mode.PAIRS:
        window = _recompute_window(from_time, to_time, tolerance)
        _recompute_pairs(
            pairs,
            dks,
            trust,
            (cluster, insecure_cluster),
            details,
            shown,
            dict(**window.kwargs(), memory_limit=memory_limit),
        )
        return
    source = sources[0] if len(sources) == 1 else sources
    if mode is Mode.CHALLENGE:
        from .audit import recompute_challenge_cmd

        recompute_challenge_cmd(source, ledger, dks, challenge, trust, shown)
    if mode is Mode.DIGESTS:
        _recompute_digests(source, out_file, dks[0], (algorithm, strip), shown)
        return
    _recompute_ledger(
        mode,
        source,
        opened,
        dks,
        (trust, checkpoint),
        shown,
        dict(
            cluster=(cluster, insecure_cluster),
            window=(from_time, to_time, tolerance),
            links=link,
            details=details,
            memory_limit=memory_limit,
            windows_range=windows_range,
        ),
    )


class _LazyLedger:
    """recompute's (and prove's) ledger, opened once where it is first needed (OpenLedger); a
    ledger that does not open is handed on as its name, for the library to report as it does."""

    def __init__(self, where: str | None):
        self.where = where
        self._opened = None
        self._tried = False

    def get(self):
        if not self._tried:
            from ..ledger.opened import open_ledger

            self._tried = True
            try:
                self._opened = open_ledger(self.where) if self.where is not None else None
            except LedgerError:  # the library says so, after its own checks of the options
                self._opened = None
        return self._opened

    def target(self):
        """What the library takes: the opened ledger, or its name when it did not open."""
        return self.get() or self.where

    def windows_only(self) -> bool:
        """The ledger keeps window records and no per-frame records (recompute's default is
        then --against windows)."""
        head = self.get().header if self.get() is not None else None
        return head is not None and head.window is not None and "frames" not in head.tiers


def _recompute_window(from_time: str | None, to_time: str | None, tolerance: str):
    """--from, --to and --tolerance parsed (UsageError naming the option)."""
    from ..reconcile.request import Window

    return Window(
        _parse_time(from_time, "--from"), _parse_time(to_time, "--to"), _parse_tolerance(tolerance)
    )


def _recompute_digests(source, out_file: Path, dk, how: tuple, shown: tuple) -> None:
    """recompute without a ledger: the captures' digests to Parquet, exit 0 or 2 (bad input)."""
    from ..algorithms import get_algorithm
    from ..reconcile.recompute import digests_to_parquet

    algorithm, strip = how
    as_json, quiet, workers = shown
    alg = get_algorithm(algorithm)
    with _shown(quiet, as_json) as cb:
        run = digests_to_parquet(source, out_file, dk, alg, strip, cb, workers)
    for w in run.warnings:
        err.print(styled(("warning:", "yellow"), f" {w}"))
    doc = {
        "ok": run.stopped is None,
        "source": source,
        "frames": run.frames,
        "bytes": run.bytes,
        "out": str(out_file),
        "algorithm": alg.name,
        "strip": strip,
        "elapsed_s": round(run.elapsed_s, 6),
        **run.to_json(),
        "warnings": run.warnings,
    }
    if as_json:
        _emit_json(doc)
    else:
        out.print(
            f"wrote {plural(run.frames, 'digest', fmt=',')} ({alg.name}, strip {strip}) to "
            f"{out_file}"
        )
        _fallback_line(run.strip_fallbacks, strip, run.frames, source)
    if run.stopped is not None:  # bad input, as for capture: what was read before it is written
        err.print(
            f"ledgertool: error: {run.stopped.message}; the {plural(run.frames, 'frame', fmt=',')} "
            f"before it {'was' if run.frames == 1 else 'were'} written to {out_file}"
        )
        raise typer.Exit(2)


def _recompute_ledger(
    mode, source, opened: _LazyLedger, dks: list, verify: tuple, shown: tuple, opts: dict
) -> None:
    """recompute against a ledger (FRAMES, CLUSTER or WINDOWS): the request made from the
    options, the ledger opened once, the report, and exit 0 or 1."""
    from ..keyfiles import TrustBundle
    from ..reconcile.against_windows import parse_windows_range
    from ..reconcile.request import Mode, Request, Window, run

    trust, checkpoint = verify
    as_json, quiet, workers = shown
    bundle = TrustBundle.load(trust) if trust is not None else None
    note = _read_input(checkpoint, "checkpoint") if checkpoint is not None else None
    windows = mode is Mode.WINDOWS
    request = Request(
        mode,
        window=Window() if windows else _recompute_window(*opts["window"]),
        links=tuple(opts["links"]) if opts["links"] else None,
        details=opts["details"],
        memory_limit=opts["memory_limit"],
        workers=workers,
        windows_range=(
            parse_windows_range(opts["windows_range"])
            if windows and opts["windows_range"] is not None
            else None
        ),
    )
    kw = dict(trust=bundle, checkpoint=note, checkpoint_name=str(checkpoint))
    if mode is Mode.CLUSTER:
        from functools import partial

        with _cluster_client(*opts["cluster"]) as client:
            from ..reconcile.cluster import reconcile_on_cluster

            on_cluster = partial(reconcile_on_cluster, client)
            res = run(request, source, opened.target(), dks, on_cluster=on_cluster, **kw)
    else:
        with _shown(quiet, as_json) as cb:
            res = run(request, source, opened.target(), dks, progress=cb, **kw)
    if not windows:
        res.warnings += _pruned_warnings(opened.where, request.window)
    printer = _print_windows if windows else _print_reconcile
    _report(res, as_json, printer, opened.where, source)


def _pruned_warnings(ledger, window) -> list[str]:
    """Per-frame recompute of a pruned link: its pruned records are not in the ledger any more,
    so the capture's frames of that time count as capture-only; said once per link whose pruned
    time the recompute's --from does not already leave out."""
    from ..verify.held import pruned_ranges

    lo = None if window.from_ns is None else window.from_ns - window.tolerance_ns
    return [
        f"link {link}: the records of segments {first}..{last} (up to ts_ns {last_ts}) were "
        "pruned (`ledgertool prune`) and are no longer held: the capture's frames of that time "
        "count as capture-only here; compare them with --against windows, or give --from after it"
        for link, (first, last, last_ts) in sorted(pruned_ranges(location(ledger)).items())
        if lo is None or lo <= last_ts
    ]


def _report(res, as_json: bool, printer, ledger: str, source) -> None:
    """A recompute report: its warnings on stderr, JSON or `printer`'s text, exit 0 ok or 1."""
    for w in res.warnings:
        err.print(styled(("warning:", "yellow"), f" {w}"))
    if as_json:
        _emit_json(res.to_json())
    else:
        printer(res, ledger, source)
    raise typer.Exit(0 if res.ok else 1)


def _print_windows(res, ledger: str, source) -> None:
    """recompute against windows as text: a summary line, a line per differing window, and the
    frames decoded from its sketch."""
    tags = (
        ("MATCH", "green") if res.matches else ("DIFFER", "red"),
        "" if res.complete else (" (INCOMPLETE: the capture stopped early)", "red"),
        "" if res.verified else (" (UNVERIFIED: no --trust)", "red"),
    )
    head = (
        f": {plural(res.frames, 'frame', fmt=',')} recomputed from {res.source}, against "
        f"the window records of link {res.link} in {ledger}"
    )
    if res.mode == "range":
        lo, hi = res.range
        span = (
            "all windows"
            if lo is None and hi is None
            else (f"windows {'' if lo is None else lo}..{'' if hi is None else hi}")
        )
        out.print(
            styled(
                *tags,
                f"{head}: {span} ({plural(res.range_windows, 'window')}, "
                f"{res.ledger_frames:,} frames) against the whole capture "
                f"({res.frames:,} frames): "
                f"{'equal' if res.range_equal else 'not equal'} (one verdict "
                "over the range: no frame can be named without a shared clock)",
            )
        )
    else:
        out.print(
            styled(
                *tags,
                f"{head}: {plural(len(res.windows), 'window')}, matched "
                f"{res.count('match'):,}, differing {res.count('differ'):,}, "
                f"beyond capacity {res.count('beyond_capacity'):,}",
            )
        )
    for w in res.differing:
        diff = w.frames_difference
        more = (
            f"{abs(diff)} more in the {'ledger' if diff > 0 else 'capture'}"
            if diff
            else "the same number"
        )
        if w.status == "beyond_capacity":
            out.print(
                f"  window {w.index} (start {w.start_ns}): beyond capacity: ledger "
                f"{w.ledger_frames} frames, capture {w.capture_frames} ({more}); the "
                "differing frames are not named"
            )
            continue
        out.print(
            f"  window {w.index} (start {w.start_ns}): ledger {w.ledger_frames} frames, "
            f"capture {w.capture_frames} ({more}): ledger-only {len(w.ledger_only)}, "
            f"capture-only {len(w.capture_only)}"
        )
        for d in w.ledger_only:
            out.print(f"    ledger-only  digest {d.hex()}")
        for f in w.capture_only:
            out.print(
                f"    capture-only frame {f.seq} offset {f.offset} ts_ns {f.ts_ns} "
                f"wire_len {f.wire_len} digest {f.digest.hex()}"
                + (f" {f.summary}" if f.summary else "")
            )
    _fallback_line(res.capture.strip_fallbacks, res.capture.strip, res.capture.frames, source)


def _print_reconcile(res, ledger: str, source) -> None:
    """One reconciliation's report as text on stdout (its warnings are printed before it)."""
    out.print(
        styled(
            ("MATCH", "green") if res.matches else ("DIFFER", "red"),
            (" (partial)", "yellow") if res.partial else "",
            "" if res.complete else (" (INCOMPLETE: the capture stopped early)", "red"),
            "" if res.verified else (" (UNVERIFIED: no --trust)", "red"),
            f": {plural(res.frames, 'frame', fmt=',')} recomputed from {res.source}, "
            f"{plural(res.ledger_records, 'frame record', fmt=',')} in {ledger}: matched "
            f"{res.matched:,}, ledger-only {res.ledger_only:,}, capture-only {res.capture_only:,}",
        )
    )
    for p in res.per_second:
        if p["ledger_only"] or p["capture_only"]:
            out.print(
                f"  second {p['second']}: matched {p['matched']}, ledger-only {p['ledger_only']}, "
                f"capture-only {p['capture_only']}"
            )
    for e in res.examples_ledger_only:
        out.print(
            f"  ledger-only  link {e['link']} seq {e['seq']} ts_ns {e['ts_ns']} wire_len "
            f"{e['wire_len']} digest {e['digest']}"
        )
    for e in res.examples_capture_only:
        out.print(
            f"  capture-only frame {e['index']} ts_ns {e['ts_ns']} wire_len {e['wire_len']} digest "
            f"{e['digest']}"
        )
    shown = len(res.examples_ledger_only) + len(res.examples_capture_only)
    if res.ledger_only + res.capture_only > shown and not res.details_file:
        out.print(
            f"  … {res.ledger_only + res.capture_only - shown:,} more differing frames: "
            "--details FILE writes every one"
        )
    _fallback_line(res.capture.strip_fallbacks, res.capture.strip, res.capture.frames, source)


PAIRS_IN_FLIGHT = 4  # recompute --pairs --cluster: pairs whose tasks share the cluster at once


def _recompute_pairs(
    pairs_file: Path,
    dks: list,
    trust: Path | None,
    where: tuple[str | None, bool],
    details: Path | None,
    shown: tuple[bool, bool, int],
    window: dict,
) -> None:
    """recompute --pairs: every pair as a single recompute of it, then the total (docs/cli.md).
    `where`: --cluster and --insecure-cluster; `shown`: --json, --quiet and --workers."""
    cluster, insecure = where
    as_json, quiet, workers = shown
    from functools import partial

    from ..keyfiles import TrustBundle
    from ..reconcile.pairs import plan_pairs, read_pairs, reconcile_pairs
    from ..reconcile.recompute import check_request

    # (a bad window fails before any pair)
    check_request(dks, window["from_ns"], window["to_ns"], None)
    plans = plan_pairs(
        read_pairs(pairs_file), dks, TrustBundle.load(trust) if trust is not None else None
    )
    if cluster is not None:
        with _cluster_client(cluster, insecure) as client:
            from ..reconcile.cluster import reconcile_on_cluster

            # a few pairs in flight, so one pair's round trips overlap another's tasks
            # (docs/cluster.md)
            many = reconcile_pairs(
                plans,
                partial(reconcile_on_cluster, client, **window),
                details=details,
                describe=cli_message,
                in_flight=PAIRS_IN_FLIGHT,
            )
    else:
        from ..reconcile.recompute import reconcile

        with _shown(quiet, as_json) as cb:
            many = reconcile_pairs(
                plans,
                partial(reconcile, workers=workers, **window),
                details=details,
                progress=cb,
                describe=cli_message,
            )
    for o in many.outcomes:
        ledger = o.spec.ledger
        if o.result is None:
            err.print(f"error: pair {o.index} (ledger {ledger}): {o.error}")
            continue
        for w in o.result.warnings:
            err.print(
                styled(
                    ("warning:", "yellow"),
                    f" {w}" if w.startswith(f"{ledger}: ") else f" {ledger}: {w}",
                )
            )
        if not as_json:
            _print_reconcile(o.result, ledger, o.result.source)
    if as_json:
        _emit_json(many.to_json())
    else:
        t = many.total()
        out.print(
            styled(
                "total: ",
                ("MATCH", "green") if many.ok else ("DIFFER", "red"),
                f": {plural(t.pairs, 'pair')} ({t.ok_pairs} OK, {t.failed_pairs} not OK, "
                f"{t.error_pairs} not reconciled), {plural(t.frames, 'frame', fmt=',')} "
                f"recomputed, {plural(t.ledger_records, 'frame record', fmt=',')}: matched "
                f"{t.matched:,}, ledger-only {t.ledger_only:,}, capture-only {t.capture_only:,}",
            )
        )
    raise typer.Exit(many.exit_code)


def _fallback_line(fallbacks, strip: str, frames: int, source: str) -> None:
    """The summary line of a strip mode's fallbacks (docs/strip-modes.md), when there were any."""
    note = fallbacks.note(strip, frames, "standard input" if source == "-" else source)
    if note:
        out.print(note)


def _parse_time(text: str | None, opt: str) -> int | None:
    """ns since the epoch from an integer or an ISO 8601 timestamp (UTC when no zone is given)."""
    if text is None:
        return None
    # ASCII digits only: str.isdigit() also takes '²' and '٣', which int() refuses or reads
    if re.fullmatch(r"-?[0-9]+", text.strip()):
        return int(text)
    from datetime import datetime

    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{opt} {text!r}: expected ns since the epoch or an ISO 8601 time"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    td = dt - datetime(1970, 1, 1, tzinfo=UTC)
    return (td.days * 86400 + td.seconds) * 1_000_000_000 + td.microseconds * 1000


def _parse_tolerance(text: str) -> int:
    from ..plan import parse_duration

    if text.strip() in ("0", "0s", "0ns"):
        return 0
    return round(parse_duration(text, "tolerance") * 1e9)


# ---- query ----------------------------------------------------------------------------------


@app.command()
def query(
    ledger: Annotated[
        str, typer.Argument(metavar="DIR", help="Ledger directory (a path, file:// or fsspec URL).")
    ],
    sql: Annotated[
        str, typer.Argument(help="SQL over the views `records`, `seals` and `windows`.")
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            metavar="table|csv|json|jsonl|markdown|parquet",
            help="table (default), csv, json, jsonl, markdown or parquet (needs --output).",
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the result to FILE, not stdout.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    trust: Annotated[
        Path | None,
        typer.Option(
            "--trust",
            help="verifier.pub: verify signatures too before querying (without it only the keyless "
            "checks run, and a warning says so).",
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None, typer.Option("--checkpoint", help="A checkpoint the ledger must extend.")
    ] = None,
    allow_files: Annotated[
        bool,
        typer.Option(
            "--allow-files",
            help="Let the SQL read and write files and URLs (read_csv, COPY, ATTACH, extensions); "
            "without it the SQL sees only `records`, `seals` and `windows`.",
        ),
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Verify a ledger, then run SQL (DuckDB) over the verified `records`, `seals` and `windows`
    tables."""
    from ..fsio import atomic_path, check_writable, write_atomic
    from ..keyfiles import TrustBundle
    from ..reconcile.query import run_query
    from .results import FORMATS, render

    if as_json and fmt not in (None, "json"):
        raise UsageError(f"--json is --format json; drop --format {fmt}")
    fmt = "json" if as_json else fmt or "table"
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: use {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
    if fmt == "parquet" and output is None:
        raise UsageError("--format parquet writes a file: give --output FILE.parquet")
    if output is not None:  # before the ledger is verified and queried, not after
        check_writable(output, what="query result")
    bundle = TrustBundle.load(trust) if trust is not None else None
    note = _read_input(checkpoint, "checkpoint") if checkpoint is not None else None
    with _shown(quiet, False) as progress:
        res = run_query(
            location(ledger),
            sql,
            bundle,
            note,
            str(checkpoint),
            arrow=fmt == "parquet",
            progress=progress,
            allow_files=allow_files,
        )
    _unverified_warning(res.verification)
    if not quiet:  # a note, as verify's append-only one: a script's run stays silent
        _pruned_note(res.verification)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with atomic_path(output.absolute(), what="query result") as tmp:
            pq.write_table(res.table, tmp)
        err.print(f"wrote {res.table.num_rows:,} rows to {output}")
        return
    # a table fits the terminal only when it is shown on one; elsewhere every value is whole
    on_terminal = output is None and sys.stdout.isatty()
    text = render(fmt, res.columns, res.rows, out.width if on_terminal and fmt == "table" else None)
    if output is not None:
        write_atomic(output.absolute(), text.encode(), what="query result")
        err.print(f"wrote {len(res.rows):,} rows to {output}")
    else:
        sys.stdout.write(text)


# ---- export ---------------------------------------------------------------------------------


@app.command()
def export(
    ledger: Annotated[Path, typer.Argument(help="Ledger directory.")],
    out_dir: Annotated[
        Path,
        typer.Argument(metavar="OUT", help="New (or empty) directory for the Parquet dataset."),
    ],
    trust: Annotated[
        Path | None,
        typer.Option(
            "--trust",
            help="verifier.pub: verify signatures too before exporting (without it only the "
            "keyless checks run, and a warning says so).",
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None, typer.Option("--checkpoint", help="A checkpoint the ledger must extend.")
    ] = None,
    link: Annotated[
        list[str] | None,
        typer.Option("--link", metavar="NAME", help="Export only this link (repeatable)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON report.")] = False,
) -> None:
    """Verify a ledger, then write its records as a Parquet dataset DuckDB, pyarrow, polars and
    Spark read as is."""
    from ..keyfiles import TrustBundle
    from ..reconcile.export import export_dataset

    bundle = TrustBundle.load(trust) if trust is not None else None
    note = _read_input(checkpoint, "checkpoint") if checkpoint is not None else None
    res = export_dataset(ledger, out_dir, bundle, note, str(checkpoint), links=link)
    _unverified_warning(res.verification)
    if as_json:
        _emit_json(
            {
                "ok": True,
                "out": res.out,
                "files": res.files,
                "rows": res.rows,
                "links": list(res.links),
                "signatures_checked": res.verification.signatures_checked,
            }
        )
    else:
        out.print(
            f"exported {plural(res.rows, 'record', fmt=',')} of {plural(len(res.links), 'link')} "
            f"in {plural(res.files, 'Parquet file')} to {out_dir}"
        )


# ---- algorithms -----------------------------------------------------------------------------


@app.command()
def algorithms(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON document.")] = False,
) -> None:
    """List digest algorithms: key/output sizes and guarantees with a secret or a known key."""
    from rich.table import Column, Table

    from ..algorithms import ALGORITHMS
    from ..digest.engine import cpu_path, cpu_path_note, cpu_paths, merkle_lanes

    lanes = merkle_lanes()
    rows = [
        {
            "name": a.name,
            "key_bytes": a.key_size,
            "digest_bytes": a.digest_size,
            "ledger": a.ledger_ok,
            "cpu_path": cpu_path(a),
            "cpu_paths": cpu_paths(a),
            "secret_key": a.secret_key,
            "known_key": a.known_key,
            "reference": a.reference,
            "warning": a.creation_warning,
        }
        for a in ALGORITHMS.values()
    ]
    note = cpu_path_note()
    if note:
        err.print(styled(("warning:", "yellow"), f" {note}"))
    if as_json:
        _emit_json({"algorithms": rows, "merkle_leaf_lanes": lanes})
        return
    t = Table("key", "digest", "ledger", "CPU path in use", "paths on this CPU")
    t.columns.insert(0, Column("name", no_wrap=True))
    for r in rows:
        opt_in = ALGORITHMS[r["name"]].risk_opt_in
        ledger_ok = "bench only" if not r["ledger"] else f"with {opt_in}" if opt_in else "yes"
        t.add_row(
            r["name"],
            f"{r['key_bytes']} B",
            f"{r['digest_bytes']} B",
            ledger_ok,
            r["cpu_path"],
            ", ".join(r["cpu_paths"]),
        )
    table_console().print(t)
    way = {16: "AVX-512 lanes", 4: "SHA-NI streams"}.get(lanes, "one at a time")
    out.print(
        f"Merkle leaves (SHA-256): {lanes} side by side ({way})"
        if lanes > 1
        else f"Merkle leaves (SHA-256): {way}"
    )
    for r in rows:  # guarantees as paragraphs: too long for table cells on an 80-column terminal
        out.print()
        out.print(styled((r["name"], "bold")))
        out.print(f"  key secret: {r['secret_key']}")
        out.print(f"  key known to the prover: {r['known_key']}")
        if r["warning"]:
            out.print(styled("  ", ("note:", "yellow"), f" {r['warning']}"))


# ---- demo -----------------------------------------------------------------------------------


@app.command()
def demo(
    workdir: Annotated[
        Path | None,
        typer.Option(help="Where keys and the ledger go (default: a new temporary directory)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary only.")] = False,
) -> None:
    """The whole main job on the bundled sample: keys, capture, seal, verify, recompute, query."""
    from ..demo import run_demo

    summary = run_demo(workdir)
    if as_json:
        _emit_json(summary)
    else:
        for line in summary["lines"]:
            out.print(line)
    raise typer.Exit(0 if summary["ok"] else 1)


def _register_optional() -> None:
    from .plan import plan_app

    app.add_typer(plan_app, name="plan")
    from .workload import workload_app

    app.add_typer(workload_app, name="workload")
    from .bench import bench_command

    app.command("bench")(bench_command)
    from .provision import device_init_command, provision_command, unwrap_command

    keys_app.command("device-init")(device_init_command)
    keys_app.command("provision")(provision_command)
    keys_app.command("unwrap")(unwrap_command)
    from .conformance import conformance_app

    app.add_typer(conformance_app, name="conformance")
    from .audit import challenge_app, witness_app

    app.add_typer(challenge_app, name="challenge")
    app.add_typer(witness_app, name="witness")


_register_optional()


def _os_error_line(e: OSError) -> str:
    """'{file}: {strerror}; {advice}' for an OSError no library function turned into a message."""
    from ..fsio import ADVICE, final_name

    name = final_name(str(e.filename)) if e.filename is not None else None
    advice = ADVICE.get(e.errno or 0)
    text = e.strerror or str(e)
    return (f"{name}: " if name else "") + text + (f"; {advice}" if advice else "")


# : option value names in help, as tcpdump and DuckDB write them (`--trust FILE`, not typer's
# `<path>`)
_DIR_OPTIONS = {"ledger", "workdir", "png", "outdir", "directory"}


def _value_name(p) -> str:
    """FILE, DIR, N, X or the option's name in capitals, for an option that takes a value."""
    kind = getattr(getattr(p, "type_descriptor", None), "annotation", None)
    kind = typing_args[0] if (typing_args := getattr(kind, "__args__", None)) else kind
    if kind is Path:
        return "DIR" if p.name in _DIR_OPTIONS else "FILE"
    if p.name in _UNIT_NAMES:
        return _UNIT_NAMES[p.name]
    return {int: "N", float: "X"}.get(kind, p.name.upper().replace("_", "-"))


#: options whose value has a unit: the metavar says it (`--block-ms MS`, `--window 1s|100ms`)
_UNIT_NAMES = {
    "block_ms": "MS",
    "block_kb": "KIB",
    "min_time": "SECONDS",
    "noisy_cv": "RATIO",
    "tolerance": "5us|1ms",
    "valid_for": "1d|12h",
    "memory_limit": "SIZE",
    "window": "1s|100ms",
    "duration": "1d|12h",
    "rate": "BITS/S",
    "pps": "FRAMES/S",
    "frame": "BYTES|imix",
}


def click_command(argv: list[str] | None = None):
    """The app as a click command, every argument shown in capitals, as tcpdump and DuckDB write
    them (`SOURCE`, not typer's `{source}`), and option values named FILE, DIR, N (not `<path>`).
    Given the command line about to run (`argv`), only the command it names (`_named`)."""
    return _built(_named(argv) if argv else None)


@functools.cache
def _built(name: str | None):
    """The app, or its command or group `name` alone (`_named`), as a click command. Built once
    a process: typer reads every command's signature and type hints (~0.1 s of CPU for them all),
    and a program that runs the app more than once (the tests) would pay that each time."""
    from typer.core import TyperArgument

    from .helptext import epilog

    root = typer.main.get_command(_only(name) if name else app)

    def usage_name(p: TyperArgument):
        return lambda: (
            (p.metavar if p.required else f"[{p.metavar}]") + ("..." if p.nargs != 1 else "")
        )

    def lazy(p) -> None:
        if getattr(p, "_runtime_param", False) is None and hasattr(p, "get_runtime_param"):
            p._runtime_param = LazyCoercion(p)

    def walk(cmd, path: str = "") -> None:
        cmd.epilog = cmd.epilog or epilog(path)
        if hasattr(cmd, "get_help_option"):
            lazy(cmd.get_help_option(typer.Context(cmd, help_option_names=["--help", "-h"])))
        for p in cmd.params:
            lazy(p)
            if isinstance(p, TyperArgument):
                p.metavar = p.metavar or p.name.upper()
                if hasattr(p, "_usage_display_name"):  # typer >= 0.16 braces required arguments
                    p._usage_display_name = usage_name(p)
                # typer >= 0.2x adds `<list[Path]>` after the name
                if hasattr(p, "display_type_rich"):
                    p.display_type_rich = lambda ctx: None
            elif hasattr(p, "display_type_rich") and not (p.is_flag or p.count):
                p.display_type_rich = lambda ctx, name=p.metavar or _value_name(p): name  # noqa: B008
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(root)
    return root


def _named(argv: list[str]) -> str | None:
    """The command or group of `app` that `argv` starts with, built alone for the run: typer reads
    every command's signature to build it (~0.07 s of CPU for them all), and a run of one command
    uses no other. None (the whole app) for anything else (root options first, help, an unknown
    name, shell completion), for the same listings, suggestions and completions."""
    if os.environ.get("_LEDGERTOOL_COMPLETE"):
        return None
    names = [_command_name(c) for c in app.registered_commands]
    names += [g.name for g in app.registered_groups]
    return argv[0] if argv[0] in names else None


def _command_name(command) -> str:
    return command.name or typer.main.get_command_name(command.callback.__name__)


def _only(name: str):
    """A copy of `app` with its command or group `name` only."""
    named = copy.copy(app)
    named.registered_commands = [c for c in app.registered_commands if _command_name(c) == name]
    named.registered_groups = [g for g in app.registered_groups if g.name == name]
    return named


def main() -> None:
    """Console entry point: map errors to exit codes (0 ok, 1 discrepancy, 2 bad input/usage)."""
    code = _run(reserve_closed_descriptors())
    # Leave without the interpreter's teardown: native pool threads (Arrow's, DuckDB's) that outlive
    # it can abort the process after a correct report ("terminate called without an active
    # exception", exit 134; apache/arrow#34314), and a script must be able to trust the exit code.
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except OSError:  # _run reported it (stdout) or there is nowhere to (stderr)
            pass
    os._exit(code)


def _done(text: str) -> None:
    """What a command has done for good, said if its report then cannot be written (stdout full,
    closed, a broken pipe): `text` names the state, e.g. the ledger sealed, a rotation in force."""
    STATE["done"] = text


def _run(closed: set[int] = frozenset()) -> int:
    """Run the app; return the exit code. With --debug an error also prints its traceback.
    Standard output and error are guarded for the run (cli/streams.py): an error writing the
    report is one line and exit 2, an error writing stderr is dropped."""
    STATE["done"] = None
    saved = guard_streams(closed)
    try:
        return _run_guarded()
    finally:
        restore_streams(saved)


def _run_guarded() -> int:
    try:
        rc = click_command(sys.argv[1:])(prog_name="ledgertool", standalone_mode=False)
        sys.stdout.flush()  # a report that cannot be written fails here, not after the exit code
    except OutputError as e:
        done = STATE["done"]
        if e.errno == errno.EPIPE:
            return (
                2  # the reader left (`| head`): silent, as every Unix tool is; exit 2, no verdict
            )
        err.print(
            f"ledgertool: error: standard output: cannot write the report: {e.strerror}; "
            + (f"{done}; only the report was lost" if done else "the report is incomplete"),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return 2
    except LedgerError as e:
        if STATE["debug"]:
            traceback.print_exc()
        err.print(
            f"ledgertool: error: {cli_message(e)}", markup=False, highlight=False, soft_wrap=True
        )
        return exit_code_for(e)
    except typer.Exit as e:
        return e.exit_code
    except Interrupted as e:
        err.print(f"ledgertool: interrupted: {e}", markup=False, highlight=False, soft_wrap=True)
        return 130
    except (KeyboardInterrupt, typer.Abort):
        err.print("ledgertool: interrupted")
        return 130
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except OSError as e:
        # The places that write or read ledger files say what to do (ledgertool.fsio); this is the
        # last line for the rest: the file the OS names, never a temporary name, and exit 2.
        if STATE["debug"]:
            traceback.print_exc()
        err.print(
            f"ledgertool: error: {_os_error_line(e)}", markup=False, highlight=False, soft_wrap=True
        )
        return 2
    except Exception as e:  # noqa: BLE001
        # Option-parser errors (typer may vendor its own click): they know how to show themselves.
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            return 2 if e.exit_code == 2 else e.exit_code
        if _raised_unwinding_ctrl_c(e):
            if STATE["debug"]:
                traceback.print_exc()
            err.print("ledgertool: interrupted")
            return 130
        if STATE["debug"]:
            traceback.print_exc()
        err.print(
            f"ledgertool: internal error: {type(e).__name__}: {e} (rerun with --debug for a "
            "traceback)",
            markup=False,
            soft_wrap=True,
        )
        return 2
    if rc == 130:  # typer turns Ctrl-C in a command into a silent exit 130
        err.print("ledgertool: interrupted")
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    main()
