"""`ledgertool keys device-init|provision|unwrap`: thin typer commands over
ledgertool.device.provision.

Reference: docs/cli.md ("keys device-init", "keys provision", "keys unwrap");
walk-through: docs/devices.md.
The main CLI registers these on its `keys` group and maps every LedgerError to a one-line message
and its exit code (PackageRefused 1, everything else 2).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from .render import SafeConsole

out = SafeConsole(soft_wrap=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]


def _emit(doc: dict) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def device_init_command(
    outdir: Annotated[
        Path, typer.Argument(help="Directory for device.key (0600) and device.pub (0644).")
    ],
    as_json: JsonOpt = False,
) -> None:
    """On the device: an HPKE key pair (MLKEM768-X25519) and the device id derived from its
    public key."""
    from ..device.provision import device_init

    res = device_init(outdir)
    if as_json:
        _emit(res.to_json())
    else:
        out.print(f"device_key: {res.device_key}")
        out.print(f"device_pub: {res.device_pub}")
        out.print(f"device_id: {res.device_id}")


def provision_command(
    digest_key: Annotated[
        Path, typer.Option("--digest-key", help="digest.key to send (the master secret).")
    ],
    device: Annotated[
        Path, typer.Option("--device", help="The device's device.pub, obtained authentically.")
    ],
    signing_key: Annotated[
        Path, typer.Option("--signing-key", help="The verifier's hybrid signing.key.")
    ],
    ledger_id: Annotated[
        str,
        typer.Option(
            "--ledger-id",
            metavar="HEX",
            help="Ledger the key is for (32 hex, ledger.json `ledger_id`).",
        ),
    ],
    out_file: Annotated[
        Path, typer.Option("--out", help="Package file to write (refused if it exists).")
    ],
    device_id: Annotated[
        str | None,
        typer.Option(
            "--device-id",
            metavar="HEX",
            help="Refuse unless device.pub has this id (as the device printed it, out of band).",
        ),
    ] = None,
    valid_for: Annotated[
        str, typer.Option("--valid-for", help="Validity from now: 90s, 12h, 7d (at most 366d).")
    ] = "1d",
    as_json: JsonOpt = False,
) -> None:
    """On the verifier: seal the digest key to one device (HPKE) and sign the package (Ed25519 +
    ML-DSA-65)."""
    from ..device.provision import (
        MAX_VALID_S,
        DevicePublicKey,
        normalize_ledger_id,
        provision,
        write_package,
    )
    from ..errors import KeyFileError
    from ..keyfiles import DigestKey, SigningKey
    from ..plan import parse_duration

    lid = normalize_ledger_id(ledger_id)
    seconds = parse_duration(valid_for, "valid_for", (MAX_VALID_S, f"{MAX_VALID_S // 86400} days"))
    pub = DevicePublicKey.load(device)
    if device_id is not None and device_id.strip().lower() != pub.device_id:
        raise KeyFileError(
            f"{device}: device id is {pub.device_id}, not the expected {device_id.strip()}; "
            "refusing to seal a key to it"
        )
    pkg = provision(DigestKey.load(digest_key), pub, SigningKey.load(signing_key), lid, seconds)
    write_package(pkg, out_file)
    doc = {
        "ok": True,
        "out": str(out_file),
        "package_id": pkg.package_id,
        "ledger_id": pkg.ledger_id,
        "device_id": pkg.device_id,
        "digest_key_ids": pkg.digest_key_ids,
        "created_at": pkg.header()["created_at"],
        "expires_at": pkg.header()["expires_at"],
        "signer": pkg.signer,
    }
    if as_json:
        _emit(doc)
    else:
        out.print(
            f"package {pkg.package_id} -> {out_file}: digest key for ledger {pkg.ledger_id} sealed "
            f"to device {pkg.device_id}, valid until {doc['expires_at']}"
        )


def unwrap_command(
    package: Annotated[Path, typer.Argument(help="Key package from `keys provision`.")],
    device_key: Annotated[Path, typer.Option("--device-key", help="This device's device.key.")],
    trust: Annotated[Path, typer.Option("--trust", help="The verifier's verifier.pub (hybrid).")],
    out_file: Annotated[
        Path, typer.Option("--out", help="Where to write digest.key (0600; refused if it exists).")
    ],
    as_json: JsonOpt = False,
) -> None:
    """On the device: check both signatures, the binding, device, validity and replay state;
    write the key."""
    from ..device.provision import DeviceKey, unwrap
    from ..keyfiles import TrustBundle

    res = unwrap(package, DeviceKey.load(device_key), TrustBundle.load(trust), out_file)
    if as_json:
        _emit(res.to_json())
    else:
        p = res.package
        out.print(
            f"accepted package {p.package_id}: digest key for ledger {p.ledger_id} written to "
            f"{res.out}; recorded in {res.accepted_file}"
        )
        for alg, kid in p.digest_key_ids.items():
            out.print(f"  digest key id {alg}: {kid}")
