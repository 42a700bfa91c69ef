"""`ledgertool challenge commit|draw`, `witness keygen|vkey|serve`, and the audit parts of
`recompute --challenge`, `checkpoint --witness` and `verify --witness-key`: thin commands over
ledgertool.seal.challenge / reconcile.challenge and seal.witness / witness/ (docs/cli.md;
docs/transparency.md, "Audits" and "Witnesses")."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from ..errors import HostError, KeyFileError, UsageError
from ..plural import plural
from .render import SafeConsole, styled

out = SafeConsole(soft_wrap=True)
err = SafeConsole(stderr=True, soft_wrap=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]

challenge_app = typer.Typer(
    help="Audit challenges: a random sample of a checkpointed log drawn from both sides' "
    "randomness.",
    no_args_is_help=True,
)
witness_app = typer.Typer(
    help="A C2SP tlog-witness for ledgertool checkpoints.", no_args_is_help=True
)


def _emit(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _hex(text: str | None, opt: str) -> bytes:
    try:
        if text is None or text != text.lower():
            raise ValueError
        return bytes.fromhex(text)
    except ValueError:
        raise UsageError(f"{opt} {text!r}: give lowercase hex") from None


def _read(path: Path, what: str, limit: int = 1 << 20) -> bytes:
    from .. import fsio

    return fsio.read_regular(path, limit, follow=True, what=what)


# ---- challenge -------------------------------------------------------------------------------


@challenge_app.command("commit")
def challenge_commit(
    checkpoint: Annotated[
        Path, typer.Option("--checkpoint", help="The checkpoint the audit will sample.")
    ],
    out_file: Annotated[
        Path, typer.Option("--out", help="New file for the prover nonce (keep it secret).")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Prover: a fresh 32-byte nonce (written to --out, 0600) and its commitment for the checkpoint
    (printed), to be published with the checkpoint before the verifier reveals its nonce."""
    from .. import fsio
    from ..seal.challenge import NONCE_BYTES, commitment
    from ..seal.checkpoint import parse_note

    note = parse_note(_read(checkpoint, "checkpoint"), str(checkpoint))
    nonce = os.urandom(NONCE_BYTES)
    # Never replaced: the nonce in an existing file may be the one a published commitment opens.
    fsio.create_new(out_file, (nonce.hex() + "\n").encode(), mode=0o600, what="prover nonce")
    c = commitment(note.text, nonce).hex()
    if as_json:
        _emit({"ok": True, "out": str(out_file), "prover_commitment": c})
    else:
        out.print(f"prover commitment {c} (nonce in {out_file}: reveal it after the verifier's)")


@challenge_app.command("draw")
def challenge_draw(
    ledger: Annotated[str, typer.Argument(metavar="DIR", help="Ledger directory.")],
    checkpoint: Annotated[
        Path, typer.Option("--checkpoint", help="The checkpoint the sample is drawn from.")
    ],
    trust: Annotated[Path, typer.Option("--trust", help="verifier.pub trust bundle.")],
    k: Annotated[int, typer.Option("-k", "--k", help="How many windows or ranges to draw.")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the challenge.")],
    verifier_nonce: Annotated[
        str | None,
        typer.Option("--verifier-nonce", metavar="HEX", help="The verifier's nonce (hex)."),
    ] = None,
    prover_nonce: Annotated[
        str | None,
        typer.Option(
            "--prover-nonce",
            metavar="HEX|@FILE",
            help="The prover's nonce (hex, or @FILE from commit).",
        ),
    ] = None,
    prover_commitment: Annotated[
        str | None,
        typer.Option(
            "--prover-commitment", metavar="HEX", help="The commitment published before (hex)."
        ),
    ] = None,
    beacon: Annotated[
        str | None,
        typer.Option("--beacon", metavar="HEX", help="A public beacon value (hex), instead."),
    ] = None,
    range_records: Annotated[
        int, typer.Option("--range-records", help="Records per range (per-frame tier).")
    ] = 64,
    as_json: JsonOpt = False,
) -> None:
    """Draw the challenge: K windows (a window log's checkpoint) or K record ranges (a link's)."""
    from .. import fsio
    from ..keyfiles import TrustBundle
    from ..reconcile.challenge import draw_challenge
    from ..seal.challenge import BEACON, JOINT, Randomness

    if beacon is not None:
        if verifier_nonce or prover_nonce or prover_commitment:
            raise UsageError(
                "--beacon replaces --verifier-nonce, --prover-nonce and --prover-commitment"
            )
        rnd = Randomness(BEACON, beacon=_hex(beacon, "--beacon"))
    else:
        if not (verifier_nonce and prover_nonce and prover_commitment):
            raise UsageError(
                "give --verifier-nonce, --prover-nonce and --prover-commitment, or --beacon"
            )
        if prover_nonce.startswith("@"):
            prover_nonce = _read(Path(prover_nonce[1:]), "prover nonce").decode().strip()
        rnd = Randomness(
            JOINT,
            verifier_nonce=_hex(verifier_nonce, "--verifier-nonce"),
            prover_nonce=_hex(prover_nonce, "--prover-nonce"),
            prover_commitment=_hex(prover_commitment, "--prover-commitment"),
        )
    ch = draw_challenge(
        ledger,
        _read(checkpoint, "checkpoint"),
        TrustBundle.load(trust),
        k,
        rnd,
        range_records=range_records,
        note_name=str(checkpoint),
    )
    fsio.write_atomic(out_file.absolute(), ch.canonical(), what="challenge")
    if as_json:
        _emit({"ok": True, "out": str(out_file), "challenge_sha256": ch.sha256(), **ch.to_json()})
        return
    what = "windows" if ch.tier == "windows" else f"ranges of {ch.range_records} records"
    out.print(
        f"challenge {ch.sha256()}: {ch.k} of the {ch.population} {what} of {ch.origin} -> "
        f"{out_file}"
    )


def load_challenge(path: Path):
    """(Challenge, SHA-256 of the file's bytes) for `recompute --challenge`."""
    from ..seal.challenge import parse_challenge
    from ..seal.checkpoint import parse_note

    data = _read(path, "challenge", 1 << 24)
    return parse_challenge(data, str(path), parse_note), hashlib.sha256(data).hexdigest()


def recompute_challenge_cmd(source, ledger, dks, challenge: Path, trust, how) -> None:
    """recompute --challenge: the report and exit 0 (every challenged window matches) or 1."""
    from ..keyfiles import TrustBundle
    from ..reconcile.challenge import recompute_challenge

    as_json, quiet, workers = how
    if trust is None:
        raise UsageError(
            "recompute --challenge needs --trust (the challenge rests on the checkpoint)"
        )
    ch, sha = load_challenge(challenge)
    res = recompute_challenge(
        source, ledger, dks, ch, sha, trust=TrustBundle.load(trust), workers=workers
    )
    for w in res.warnings:
        err.print(styled(("warning:", "yellow"), f" {w}"))
    if as_json:
        _emit(res.to_json())
        raise typer.Exit(0 if res.ok else 1)
    from ..reconcile.challenge_ranges import describe

    for it, o in res.items:
        if o.status != "match":
            out.print(
                f"  {describe(it, o)}: {o.status.upper()}, ledger "
                f"{plural(o.ledger_frames, 'frame')}, revealed {o.capture_frames}"
            )
    tag = ("MATCH", "green") if res.matches else ("DIFFER", "red")
    what = "window" if ch.tier == "windows" else "range"
    ignored = (
        plural(res.ignored_windows, "revealed window")
        if ch.tier == "windows"
        else plural(res.ignored_frames, "revealed frame")
    )
    out.print(
        styled(
            tag,
            f": challenge {sha[:16]}…, {res.count('match')} of {plural(len(res.items), what)} "
            f"match ({res.count('differ')} differ, {res.count('beyond_capacity')} beyond capacity, "
            f"{res.count('missing')} missing); {ignored} outside the challenge ignored",
        )
    )
    for b in res.bounds:
        out.print(
            f"  at {b.confidence:.0%} confidence this rules out an alteration of {b.fraction:.2%} "
            f"of the {res.population} {what}s or more ({plural(b.items, what)})"
        )
    raise typer.Exit(0 if res.ok else 1)


# ---- witness ---------------------------------------------------------------------------------


@witness_app.command("keygen")
def witness_keygen(
    name: Annotated[str, typer.Option("--name", help="The witness's name (a schema-less URL).")],
    out_file: Annotated[Path, typer.Option("--out", help="Private key file (written 0600).")],
) -> None:
    """A new witness key (Ed25519, cosignature/v1); prints its vkey."""
    from .. import fsio
    from ..seal.witness import WitnessSigner, is_witness_name

    if not is_witness_name(name):
        raise UsageError(f"--name {name!r}: no spaces, '+' or em dashes")
    if os.path.lexists(out_file):
        raise KeyFileError(f"{out_file}: already exists; refusing to overwrite a key")
    signer = WitnessSigner(name, os.urandom(32))
    fsio.write_atomic(out_file.absolute(), signer.encode().encode(), mode=0o600)
    out.print(str(signer.public))


def load_signer(path: Path):
    from ..seal.witness import parse_signer

    return parse_signer(_read(path, "witness key", 4096).decode("utf-8", "replace"), str(path))


@witness_app.command("vkey")
def witness_vkey(key: Annotated[Path, typer.Argument(help="Witness private key file.")]) -> None:
    """Print the witness's vkey (what verifiers give to verify --witness-key)."""
    out.print(str(load_signer(key).public))


def parse_log(text: str):
    """ORIGIN=VKEY (the log's Ed25519 vkey, `keys vkey`); an origin may hold '=' (a window log's
    `ledgertool/<id>/windows=NAME`), a link name never does."""
    import re

    from ..seal.witness import ED25519_NOTE, parse_vkey

    m = re.match(r"ledgertool/[0-9a-f]{32}/(windows=)?[A-Za-z0-9][A-Za-z0-9._-]{0,31}=", text)
    if m is None:
        raise UsageError(f"--log {text!r}: give ORIGIN=VKEY, ORIGIN ledgertool/<ledger id>/<link>")
    origin = m.group(0)[:-1]
    return origin, parse_vkey(text[m.end() :], f"--log {origin}", ED25519_NOTE)


@witness_app.command("serve")
def witness_serve(
    key: Annotated[Path, typer.Option("--key", help="Witness private key file.")],
    state: Annotated[
        Path,
        typer.Option(
            "--state", metavar="DIR", help="Directory of the latest cosigned checkpoints."
        ),
    ],
    logs: Annotated[
        list[str],
        typer.Option(
            "--log",
            metavar="ORIGIN=VKEY",
            help="ORIGIN=VKEY of a log to witness (repeat for each log).",
        ),
    ],
    addr: Annotated[
        str,
        typer.Option(
            "--addr", metavar="HOST:PORT", help="HOST:PORT to listen on (port 0: any free one)."
        ),
    ] = "127.0.0.1:0",
) -> None:
    """Run the witness (POST /add-checkpoint) until SIGINT or SIGTERM."""
    from ..witness.server import Witness, make_server

    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--addr {addr!r}: give HOST:PORT, PORT 0 to 65535")
    table: dict = {}
    for spec in logs:
        origin, vkey = parse_log(spec)
        table.setdefault(origin, []).append(vkey)
    signer = load_signer(key)
    witness = Witness(signer, table, state)
    try:
        srv = make_server(witness, host, int(port))
    except OSError as e:
        witness.close()
        raise HostError(f"--addr {addr}: cannot listen: {e.strerror or e}") from None
    h, p = srv.server_address[:2]
    out.print(f"witness {signer.public} listening on http://{h}:{p}")
    sys.stdout.flush()

    def stop(*_):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
        witness.close()


# ---- checkpoint --witness, verify --witness-key ----------------------------------------------


def _check_url(url: str) -> None:
    """A witness URL urllib can open: a bad port or bracket was an internal ValueError there."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a port that is not 0..65535)
    except ValueError as e:
        raise UsageError(f"--witness {url}: not a URL ({e})") from None
    if not parts.hostname:
        raise UsageError(f"--witness {url}: not a URL (no host)")


def witness_specs(witnesses: list[str]) -> list:
    """The witnesses of --witness URL=VKEY (WitnessSpec each); UsageError naming the first that is
    not one. Checked before anything is written."""
    from ..seal.witness import COSIGNATURE_V1, parse_vkey
    from ..witness.client import WitnessSpec

    specs = []
    for w in witnesses:
        url, sep, vkey = w.partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise UsageError(f"--witness {w!r}: give URL=VKEY, a URL without =")
        _check_url(url)
        specs.append(WitnessSpec(url, parse_vkey(vkey, f"--witness {url}", COSIGNATURE_V1)))
    return specs


def collect_cosignatures(ledger: str, out_file: Path, specs: list) -> list[str]:
    """Send the note at out_file to each witness (`witness_specs`), add the cosignatures to it;
    the witnesses' names. A refusal is raised after what the others gave is written."""
    from .. import fsio
    from ..errors import LedgerError
    from ..seal.witness import with_signatures
    from ..urls import location
    from ..witness.client import cosign

    note = _read(out_file, "checkpoint")
    lines, names, failure = [], [], None
    for s in specs:
        try:
            lines.append(cosign(Path(location(ledger)), note, s))
            names.append(s.key.name)
        except LedgerError as e:
            failure = failure or e
    if lines:
        fsio.write_atomic(out_file.absolute(), with_signatures(note, lines), what="checkpoint")
    if failure is not None:
        raise failure
    return names


def witness_check(note_data: bytes, vkeys: list[str], threshold: int | None, name: str):
    """The WitnessCheck of verify --witness-key."""
    from ..seal.checkpoint import parse_note
    from ..seal.witness import COSIGNATURE_V1, parse_vkey
    from ..verify.witnessed import check_witnesses

    keys = [parse_vkey(v, f"--witness-key {v[:40]}", COSIGNATURE_V1) for v in vkeys]
    k = len(keys) if threshold is None else threshold
    return check_witnesses(parse_note(note_data, name), keys, k, int(time.time()), name)
