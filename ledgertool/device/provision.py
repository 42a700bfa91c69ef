"""Digest-key provisioning for hashing devices (FPGA, ASIC, DPU): post-quantum, signed, one-shot.

A hardware pipeline that computes ledger records needs the digest master key. The verifier never
hands it over in the clear: the device makes an HPKE key pair (`device_init`), the verifier seals
the master key to the device's public key and signs the package (`provision`), and the device
checks and opens it (`unwrap`). docs/devices.md walks through it, docs/threat-model.md ("Digest-key
provisioning") says what it protects, ADR 0006 why this suite.

Suite (RFC 9180 HPKE, mode_base, single-shot), as `cryptography`'s ``hpke`` module provides it::

    KEM   0x647A  MLKEM768-X25519 (X-Wing: draft-connolly-cfrg-xwing-kem-08 combiner,
                  the hybrid KEM of draft-ietf-hpke-pq)
    KDF   0x0001  HKDF-SHA256
    AEAD  0x0002  AES-256-GCM

The public single-shot API takes ``info`` and no AAD; everything the package binds goes into
``info`` (RFC 9180 s8.1 advises exactly that for single-shot use)::

    info          = b"ledgertool key package info v1\\n" || JCS(header)
    signed bytes  = b"ledgertool key package v1\\n"      || JCS(package without "signatures")

where the header is the package without ``ciphertext`` and ``signatures`` and JCS is RFC 8785
(`ledgertool.canonical.canonical_json`). Both hybrid signatures (Ed25519, ML-DSA-65) must verify
(`keys.TrustBundle`); the package is refused for another device, after its expiry, before its
creation time (beyond `CLOCK_SKEW_S`), and when it was already accepted or is older than one
accepted for the same ledger (the device's replay state, `AcceptedPackages`).

Every refusal raises a LedgerError with one line: exit 1 (`PackageRefused`: the package was
checked and failed) or exit 2 (`KeyFileError` and `LedgerFormatError`: wrong or unreadable input,
including a package for another device). Secrets never appear in messages or reprs.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric import mlkem, x25519

from ..algorithms import ALGORITHMS
from ..canonical import b64decode_canonical, canonical_json, loads_format_object
from ..errors import DiscrepancyError, KeyFileError, LedgerFormatError, Setting, UsageError
from ..keyfiles import (
    MASTER_KEY_SIZE,
    DigestKey,
    SigningKey,
    TrustBundle,
    write_new_key_file,
)

__all__ = [
    "HPKE_SUITE",
    "DEVICE_KEY_FILE",
    "DEVICE_PUB_FILE",
    "ACCEPTED_FILE",
    "PackageRefused",
    "WrongDeviceError",
    "DeviceKey",
    "DevicePublicKey",
    "KeyPackage",
    "AcceptedPackages",
    "device_id",
    "digest_key_ids",
    "device_init",
    "normalize_ledger_id",
    "provision",
    "write_package",
    "unwrap",
]

DEVICE_KEY_FILE = "device.key"
DEVICE_PUB_FILE = "device.pub"
ACCEPTED_FILE = "accepted-packages"
"""The device's replay state, next to its device.key: one line per package it accepted."""

DEVICE_KEY_FORMAT = "ledgertool-device-key-v1"
DEVICE_PUB_FORMAT = "ledgertool-device-pub-v1"
PACKAGE_FORMAT = "ledgertool-key-package-v1"

HPKE_SUITE: dict[str, Any] = {
    "mode": "base",
    "kem": "MLKEM768-X25519",
    "kem_id": 0x647A,
    "kdf": "HKDF-SHA256",
    "kdf_id": 0x0001,
    "aead": "AES-256-GCM",
    "aead_id": 0x0002,
}
"""The package's ``hpke`` member: RFC 9180 mode and the IANA HPKE registry ids, compared exactly."""

_SUITE = hpke.Suite(hpke.KEM.MLKEM768_X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_256_GCM)

_INFO_PREFIX = b"ledgertool key package info v1\n"
_SIGN_PREFIX = b"ledgertool key package v1\n"
_DEVICE_ID_PREFIX = b"ledgertool device id v1\x00"

MLKEM768_SEED_BYTES = 64  # FIPS 203 s7.1 seed d || z
X25519_KEY_BYTES = 32  # RFC 7748 scalar
PUBLIC_KEY_BYTES = 1216  # ML-KEM-768 encapsulation key (1184) || X25519 public key (32), as X-Wing
CIPHERTEXT_BYTES = 1120 + MASTER_KEY_SIZE + 16  # KEM ciphertext || AES-256-GCM(master) || tag

CLOCK_SKEW_S = 300
"""A package whose creation time is this far ahead of the device's clock is refused (not yet
valid)."""
MAX_VALID_S = 366 * 86400
"""Longest validity `provision` signs: a package is a delivery, not a standing credential."""

_MAX_FILE = 1 << 16  # every valid device key, device.pub and package is far smaller
_HEX = {16: re.compile(r"[0-9a-f]{32}"), 32: re.compile(r"[0-9a-f]{64}")}
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00")
_UUID_DASHED = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ACCEPTED_LINE = re.compile(r"([0-9a-f]{32}) ([0-9a-f]{32}) (\S+) (\S+)")


class PackageRefused(DiscrepancyError):
    """`unwrap` checked a key package and refused it (exit 1). `reason` is one of
    bad_signature, expired, not_yet_valid, replayed, superseded, binding_mismatch."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class WrongDeviceError(KeyFileError):
    """A correctly signed package sealed to another device (exit 2: the wrong input for this
    key)."""


# --------------------------------------------------------------------------- small helpers


def device_id(raw_public: bytes) -> str:
    """Device id: ``hex(SHA-256(b"ledgertool device id v1\\x00" || public key)[0:16])``, 32 hex.

    ``raw_public`` is the 1216-byte MLKEM768-X25519 public key (`PUBLIC_KEY_BYTES`)."""
    return hashlib.sha256(_DEVICE_ID_PREFIX + bytes(raw_public)).digest()[:16].hex()


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).replace(microsecond=0).isoformat(timespec="seconds")


def _parse_time(text: object, where: str) -> datetime:
    if not isinstance(text, str) or not _TIME.fullmatch(text):
        raise LedgerFormatError(f"{where}: not an ISO 8601 UTC time like 2026-01-31T12:00:00+00:00")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise LedgerFormatError(f"{where}: {text!r} is not a valid date and time") from None


def _read_file(path: str, what: str, secret: bool) -> bytes:
    """Read a small file; one-line KeyFileError naming it. A secret readable by group or others
    (mode & 0o077) is refused, as `keys` refuses digest and signing keys."""
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise KeyFileError(f"{path}: not a regular file (expected {what})")
            data = f.read(_MAX_FILE + 1)
    except FileNotFoundError:
        raise KeyFileError(f"{path}: file not found (expected {what})") from None
    except IsADirectoryError:
        raise KeyFileError(f"{path}: is a directory (expected {what})") from None
    except PermissionError:
        raise KeyFileError(f"{path}: permission denied reading {what}") from None
    except OSError as e:
        raise KeyFileError(f"{path}: cannot read {what}: {e.strerror or e}") from None
    if len(data) > _MAX_FILE:
        raise KeyFileError(f"{path}: file too large to be {what}")
    if secret and mode & 0o077:
        raise KeyFileError(
            f"{path}: UNPROTECTED PRIVATE KEY FILE: mode {stat.S_IMODE(mode):04o} lets group or "
            f"others read this {what}; refused (run `chmod 600 {path}`)"
        )
    return data


def _json_object(data: bytes, path: str, fmt: str, what: str, members: set[str]) -> dict[str, Any]:
    """Strictly parsed JSON object with exactly ``members`` and ``format`` == ``fmt``."""
    doc = loads_format_object(data, path, fmt, what)
    if set(doc) != members:
        missing, extra = sorted(members - set(doc)), sorted(set(doc) - members)
        raise LedgerFormatError(
            f"{path}: {what}: "
            + (f"missing member(s) {missing}" if missing else f"unexpected member(s) {extra}")
        )
    return doc


def _hex(doc: dict, name: str, nbytes: int, path: str) -> bytes:
    value = doc[name]
    pattern = _HEX.get(nbytes)
    ok = isinstance(value, str) and (
        pattern.fullmatch(value)
        if pattern
        else len(value) == 2 * nbytes and re.fullmatch(r"[0-9a-f]*", value)
    )
    if not ok:
        raise LedgerFormatError(f"{path}: $.{name} is not {2 * nbytes} lowercase hex characters")
    return bytes.fromhex(value)


def _b64(doc: dict, name: str, nbytes: int, path: str) -> bytes:
    value = doc[name]
    try:
        raw = b64decode_canonical(value) if isinstance(value, str) else None
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or len(raw) != nbytes:
        raise LedgerFormatError(f"{path}: $.{name} is not canonical base64 of {nbytes} bytes")
    return raw


def normalize_ledger_id(text: str) -> str:
    """A ledger id as ledger.json writes it (32 lowercase hex), from that form or the dashed UUID
    form; UsageError otherwise."""
    t = text.strip().lower()
    if _UUID_DASHED.fullmatch(t):
        t = t.replace("-", "")
    if not _HEX[16].fullmatch(t):
        raise UsageError(
            Setting("ledger_id"),
            f" {text!r}: expected the ledger's id, 32 hex characters (ledger.json "
            "`ledger_id`) or a dashed UUID",
        )
    return t


def digest_key_ids(key: DigestKey) -> dict[str, str]:
    """Digest key id (docs/ledger-format.md, "Digest key id") of ``key`` for every ledger
    algorithm."""
    return {a.name: key.key_id(a.name, a.key_size) for a in ALGORITHMS.values() if a.ledger_ok}


# --------------------------------------------------------------------------- device keys


class DevicePublicKey:
    """A device's HPKE public key (``device.pub``): 1216 bytes, ML-KEM-768 encapsulation key
    (FIPS 203) followed by the X25519 public key (RFC 7748), as X-Wing serialises it."""

    def __init__(self, raw: bytes, path: str | None = None):
        raw = bytes(raw)
        if len(raw) != PUBLIC_KEY_BYTES:
            raise ValueError(f"device public key must be {PUBLIC_KEY_BYTES} bytes")
        # both halves are decoded (and ML-KEM's modulus check run) here, not at first use
        self._key = hpke.MLKEM768X25519PublicKey(
            mlkem.MLKEM768PublicKey.from_public_bytes(raw[:1184]),
            x25519.X25519PublicKey.from_public_bytes(raw[1184:]),
        )
        self.raw = raw
        self.path = path

    @property
    def device_id(self) -> str:
        return device_id(self.raw)

    def __repr__(self) -> str:
        return f"DevicePublicKey(device_id={self.device_id!r}, path={self.path!r})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": DEVICE_PUB_FORMAT,
            "kem": HPKE_SUITE["kem"],
            "device_id": self.device_id,
            "public_key": base64.b64encode(self.raw).decode("ascii"),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``device.pub`` (JSON, `schemas/device-pub.schema.json`), mode 0644; never
        overwrites."""
        write_new_key_file(
            os.fspath(path),
            (json.dumps(self.to_dict(), indent=2) + "\n").encode(),
            0o644,
            "a device public key",
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DevicePublicKey:
        """Read ``device.pub``: strict JSON, exact members, canonical base64 of 1216 bytes that
        decode as an ML-KEM-768 and an X25519 key, and a ``device_id`` equal to the one derived
        from them. KeyFileError / LedgerFormatError (exit 2) naming the file otherwise."""
        path = os.fspath(path)
        data = _read_file(path, "a device public key (device.pub)", secret=False)
        doc = _json_object(
            data,
            path,
            DEVICE_PUB_FORMAT,
            "a device public key (device.pub)",
            {"format", "kem", "device_id", "public_key"},
        )
        if doc["kem"] != HPKE_SUITE["kem"]:
            raise LedgerFormatError(
                f"{path}: $.kem is {doc['kem']!r}, expected {HPKE_SUITE['kem']!r}"
            )
        raw = _b64(doc, "public_key", PUBLIC_KEY_BYTES, path)
        try:
            pub = cls(raw, path)
        except ValueError:
            raise LedgerFormatError(
                f"{path}: $.public_key is not a valid MLKEM768-X25519 public key"
            ) from None
        if doc["device_id"] != pub.device_id:
            raise LedgerFormatError(
                f"{path}: $.device_id {doc['device_id']!r} does not match its public key "
                f"(which gives {pub.device_id})"
            )
        return pub


class DeviceKey:
    """A device's HPKE private key (``device.key``, mode 0600): the ML-KEM-768 seed d || z (64
    bytes, FIPS 203 s7.1) and the X25519 private key (32 bytes, RFC 7748). ``repr`` shows the id
    only."""

    def __init__(self, mlkem_seed: bytes, x25519_private: bytes, path: str | None = None):
        if len(mlkem_seed) != MLKEM768_SEED_BYTES or len(x25519_private) != X25519_KEY_BYTES:
            raise ValueError("device key needs a 64-byte ML-KEM-768 seed and a 32-byte X25519 key")
        self._mlkem = mlkem.MLKEM768PrivateKey.from_seed_bytes(bytes(mlkem_seed))
        self._x25519 = x25519.X25519PrivateKey.from_private_bytes(bytes(x25519_private))
        self._key = hpke.MLKEM768X25519PrivateKey(self._mlkem, self._x25519)
        self.public = DevicePublicKey(
            self._mlkem.public_key().public_bytes_raw()
            + self._x25519.public_key().public_bytes_raw()
        )
        self.path = path

    @classmethod
    def generate(cls) -> DeviceKey:
        """A fresh key pair from the OS CSPRNG (through `cryptography`)."""
        return cls(
            mlkem.MLKEM768PrivateKey.generate().private_bytes_raw(),
            x25519.X25519PrivateKey.generate().private_bytes_raw(),
        )

    @property
    def device_id(self) -> str:
        return self.public.device_id

    def __repr__(self) -> str:
        return f"DeviceKey(device_id={self.device_id!r}, path={self.path!r})"

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``device.key`` (JSON, `schemas/device-key.schema.json`), mode 0600; never
        overwrites."""
        doc = {
            "format": DEVICE_KEY_FORMAT,
            "kem": HPKE_SUITE["kem"],
            "mlkem768_seed": self._mlkem.private_bytes_raw().hex(),
            "x25519_private": self._x25519.private_bytes_raw().hex(),
        }
        write_new_key_file(
            os.fspath(path), (json.dumps(doc, indent=2) + "\n").encode(), 0o600, "a device key"
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DeviceKey:
        """Read ``device.key``; refused (KeyFileError, exit 2) when group or others may read it, and
        LedgerFormatError (exit 2) when it is not exactly a ledgertool-device-key-v1 document."""
        path = os.fspath(path)
        data = _read_file(path, "device key", secret=True)
        doc = _json_object(
            data,
            path,
            DEVICE_KEY_FORMAT,
            "a device key (device.key)",
            {"format", "kem", "mlkem768_seed", "x25519_private"},
        )
        if doc["kem"] != HPKE_SUITE["kem"]:
            raise LedgerFormatError(
                f"{path}: $.kem is {doc['kem']!r}, expected {HPKE_SUITE['kem']!r}"
            )
        return cls(
            _hex(doc, "mlkem768_seed", MLKEM768_SEED_BYTES, path),
            _hex(doc, "x25519_private", X25519_KEY_BYTES, path),
            path,
        )

    def open(self, ciphertext: bytes, info: bytes) -> bytes:
        """HPKE single-shot open (RFC 9180 s6.1, mode_base); InvalidTag when it does not open."""
        return _SUITE.decrypt(ciphertext, self._key, info=info)


@dataclass(frozen=True)
class DeviceInitResult:
    """What `device_init` wrote (schemas/keys-device-init-report.schema.json)."""

    outdir: str
    device_key: str
    device_pub: str
    device_id: str

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "outdir": self.outdir,
            "device_key": self.device_key,
            "device_pub": self.device_pub,
            "device_id": self.device_id,
            "kem": HPKE_SUITE["kem"],
        }


def device_init(outdir: str | os.PathLike[str]) -> DeviceInitResult:
    """Create ``device.key`` (0600) and ``device.pub`` (0644) in ``outdir`` (created 0700 if
    needed).

    Refuses (KeyFileError, exit 2) if either file exists; nothing is written then, and a failure
    part-way removes what this call wrote."""
    outdir = os.fspath(outdir)
    try:
        os.makedirs(outdir, mode=0o700, exist_ok=True)
    except OSError as e:
        raise KeyFileError(f"{outdir}: cannot create key directory: {e.strerror or e}") from None
    if not os.path.isdir(outdir):
        raise KeyFileError(f"{outdir}: not a directory")
    key_path, pub_path = (
        os.path.join(outdir, DEVICE_KEY_FILE),
        os.path.join(outdir, DEVICE_PUB_FILE),
    )
    for p in (key_path, pub_path):
        if os.path.lexists(p):
            raise KeyFileError(f"{p}: already exists; refusing to overwrite a device key")
    key = DeviceKey.generate()
    key.save(key_path)
    try:
        key.public.save(pub_path)
    except BaseException:
        os.unlink(key_path)
        raise
    return DeviceInitResult(outdir, key_path, pub_path, key.device_id)


# --------------------------------------------------------------------------- the package


_HEADER_MEMBERS = (
    "format",
    "hpke",
    "package_id",
    "ledger_id",
    "device_id",
    "digest_key_ids",
    "created_at",
    "expires_at",
    "signer",
)
_MEMBERS = {*_HEADER_MEMBERS, "ciphertext", "signatures"}


@dataclass(frozen=True)
class KeyPackage:
    """A digest master key sealed to one device and signed by the verifier
    (``ledgertool-key-package-v1``, schemas/key-package.schema.json).

    ``ciphertext`` is the HPKE single-shot output ``enc || ct`` (1120 + 48 bytes);
    ``digest_key_ids`` commits to the key inside (its id for every ledger algorithm)."""

    package_id: str
    ledger_id: str
    device_id: str
    digest_key_ids: dict[str, str]
    created_at: datetime
    expires_at: datetime
    signer: dict[str, str]
    ciphertext: bytes = field(repr=False)
    signatures: dict[str, str] = field(default_factory=dict, repr=False)

    def header(self) -> dict[str, Any]:
        """Every member but ``ciphertext`` and ``signatures``: what HPKE ``info`` binds."""
        return {
            "format": PACKAGE_FORMAT,
            "hpke": dict(HPKE_SUITE),
            "package_id": self.package_id,
            "ledger_id": self.ledger_id,
            "device_id": self.device_id,
            "digest_key_ids": dict(self.digest_key_ids),
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "signer": dict(self.signer),
        }

    def info(self) -> bytes:
        """HPKE ``info``: ``b"ledgertool key package info v1\\n" || JCS(header)``."""
        return _INFO_PREFIX + canonical_json(self.header())

    def signed_bytes(self) -> bytes:
        """What Ed25519 and ML-DSA-65 sign: ``b"ledgertool key package v1\\n" || JCS(package
        without signatures)``, the ciphertext as base64 as in the file."""
        body = {**self.header(), "ciphertext": base64.b64encode(self.ciphertext).decode("ascii")}
        return _SIGN_PREFIX + canonical_json(body)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.header(),
            "ciphertext": base64.b64encode(self.ciphertext).decode("ascii"),
            "signatures": dict(self.signatures),
        }

    def to_bytes(self) -> bytes:
        """The package file: indented JSON and a newline (only the canonical form is signed)."""
        return (json.dumps(self.to_dict(), indent=2) + "\n").encode("utf-8")

    @classmethod
    def parse(cls, data: bytes, where: str) -> KeyPackage:
        """Strictly parse a package file (`canonical.loads_strict`; exact members and types,
        lowercase hex, canonical base64, ISO 8601 UTC times, the one HPKE suite). Signatures are
        not checked here. LedgerFormatError (exit 2) naming ``where`` and the member otherwise."""
        doc = _json_object(data, where, PACKAGE_FORMAT, "a ledgertool key package", _MEMBERS)
        # compared as JSON text: Python's true == 1 must not let "kdf_id": true pass for 1
        if json.dumps(doc["hpke"], sort_keys=True) != json.dumps(HPKE_SUITE, sort_keys=True):
            raise LedgerFormatError(
                f"{where}: $.hpke is {json.dumps(doc['hpke'])}, not the one suite this "
                f"version opens ({json.dumps(HPKE_SUITE)})"
            )
        for name in ("package_id", "ledger_id", "device_id"):
            _hex(doc, name, 16, where)
        ids = doc["digest_key_ids"]
        want = sorted(a.name for a in ALGORITHMS.values() if a.ledger_ok)
        if (
            not isinstance(ids, dict)
            or sorted(ids) != want
            or not all(isinstance(v, str) and _HEX[16].fullmatch(v) for v in ids.values())
        ):
            raise LedgerFormatError(
                f"{where}: $.digest_key_ids must map each of {want} to a 32-hex key id"
            )
        signer, sigs = doc["signer"], doc["signatures"]
        for name, obj in (("signer", signer), ("signatures", sigs)):
            if not isinstance(obj, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in obj.items()
            ):
                raise LedgerFormatError(
                    f"{where}: $.{name} must be an object of algorithm -> string"
                )
        return cls(
            package_id=doc["package_id"],
            ledger_id=doc["ledger_id"],
            device_id=doc["device_id"],
            digest_key_ids=dict(ids),
            created_at=_parse_time(doc["created_at"], f"{where}: $.created_at"),
            expires_at=_parse_time(doc["expires_at"], f"{where}: $.expires_at"),
            signer=dict(signer),
            ciphertext=_b64(doc, "ciphertext", CIPHERTEXT_BYTES, where),
            signatures=dict(sigs),
        )


def provision(
    digest_key: DigestKey,
    device: DevicePublicKey,
    signing_key: SigningKey,
    ledger_id: str,
    valid_for_s: float = 86400.0,
    now: datetime | None = None,
) -> KeyPackage:
    """Seal ``digest_key``'s 32-byte master secret to ``device`` and sign the package (verifier
    side).

    ``ledger_id``: 32 lowercase hex (`normalize_ledger_id`). ``valid_for_s``: seconds from ``now``
    (default: the current UTC time) to the expiry, 1 s .. `MAX_VALID_S`. The signing key must be
    hybrid (Ed25519 + ML-DSA-65): a package must stay authentic against a quantum adversary too.
    Raises UsageError (exit 2) for a non-hybrid key or a validity out of range."""
    if signing_key.scheme != "hybrid":
        raise UsageError(
            f"{signing_key.path or 'signing key'}: scheme {signing_key.scheme}; a key package is "
            "signed with a hybrid (Ed25519 + ML-DSA-65) signing key"
        )
    if not 1 <= valid_for_s <= MAX_VALID_S:
        raise UsageError(
            Setting("valid_for_s"),
            f": {valid_for_s:g} s is outside 1 s .. {MAX_VALID_S // 86400} days",
        )
    if not _HEX[16].fullmatch(ledger_id):
        raise UsageError(f"ledger id {ledger_id!r} is not 32 lowercase hex characters")
    created = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    unsigned = KeyPackage(
        package_id=secrets.token_hex(16),
        ledger_id=ledger_id,
        device_id=device.device_id,
        digest_key_ids=digest_key_ids(digest_key),
        created_at=created,
        expires_at=created + timedelta(seconds=int(valid_for_s)),
        signer=signing_key.trust_bundle().key_ids,
        ciphertext=bytes(CIPHERTEXT_BYTES),
    )
    sealed = _SUITE.encrypt(digest_key.master, device._key, info=unsigned.info())
    pkg = dataclasses.replace(unsigned, ciphertext=sealed)
    return dataclasses.replace(pkg, signatures=signing_key.sign(pkg.signed_bytes()))


def write_package(pkg: KeyPackage, out: str | os.PathLike[str]) -> None:
    """Write the package file, mode 0644 (it holds only ciphertext); never overwrites
    (KeyFileError)."""
    write_new_key_file(os.fspath(out), pkg.to_bytes(), 0o644, "a key package")


# --------------------------------------------------------------------------- device side


@dataclass(frozen=True)
class Accepted:
    package_id: str
    ledger_id: str
    created_at: datetime
    expires_at: datetime


class AcceptedPackages:
    """The device's replay state: ``accepted-packages`` next to its ``device.key``, mode 0600, one
    line per accepted package: ``PACKAGE_ID LEDGER_ID CREATED_AT EXPIRES_AT`` (hex, hex, ISO 8601).

    Held under an exclusive flock(2) from `check` to `record`, so two unwraps cannot both accept
    the same package. A line that does not parse refuses every unwrap (KeyFileError, exit 2): a
    damaged state must not turn into "nothing accepted yet"."""

    def __init__(self, path: str):
        self.path = path
        self._fd: int | None = None

    def __enter__(self) -> AcceptedPackages:
        try:
            flags = (
                os.O_RDWR
                | os.O_CREAT
                | os.O_APPEND
                | getattr(os, "O_CLOEXEC", 0)
                | getattr(os, "O_NOFOLLOW", 0)
            )
            self._fd = os.open(self.path, flags, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError as e:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            raise KeyFileError(
                f"{self.path}: cannot open the device's replay state: {e.strerror or e}"
            ) from None
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None

    def entries(self) -> list[Accepted]:
        assert self._fd is not None
        data = b""
        while chunk := os.pread(self._fd, 1 << 16, len(data)):
            data += chunk
        out = []
        for n, line in enumerate(data.decode("ascii", errors="replace").splitlines(), 1):
            m = _ACCEPTED_LINE.fullmatch(line)
            if m is None:
                raise KeyFileError(
                    f"{self.path}: line {n} is not `PACKAGE_ID LEDGER_ID CREATED_AT EXPIRES_AT`; "
                    "the replay state is damaged, refusing to unwrap"
                )
            try:
                out.append(
                    Accepted(
                        m[1],
                        m[2],
                        _parse_time(m[3], f"{self.path}: line {n}"),
                        _parse_time(m[4], f"{self.path}: line {n}"),
                    )
                )
            except LedgerFormatError as e:
                raise KeyFileError(
                    f"{e}; the replay state is damaged, refusing to unwrap"
                ) from None
        return out

    def check(self, pkg: KeyPackage, where: str) -> None:
        """PackageRefused ``replayed`` for a package id already accepted, ``superseded`` for a
        package created before one already accepted for the same ledger (a rollback to an older
        key)."""
        for a in self.entries():
            if a.package_id == pkg.package_id:
                raise PackageRefused(
                    f"{where}: package {pkg.package_id} was already accepted by this device "
                    f"(replayed; {self.path})",
                    "replayed",
                )
            if a.ledger_id == pkg.ledger_id and a.created_at > pkg.created_at:
                raise PackageRefused(
                    f"{where}: package created {_iso(pkg.created_at)} is older than package "
                    f"{a.package_id} (created {_iso(a.created_at)}) already accepted for ledger "
                    f"{pkg.ledger_id} (superseded; {self.path})",
                    "superseded",
                )

    def record(self, pkg: KeyPackage) -> None:
        """Append the package's line and fsync it (and the directory, for a new file)."""
        assert self._fd is not None
        created, expires = _iso(pkg.created_at), _iso(pkg.expires_at)
        line = f"{pkg.package_id} {pkg.ledger_id} {created} {expires}\n".encode()
        try:
            os.write(self._fd, line)
            os.fsync(self._fd)
            dfd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError as e:
            raise KeyFileError(
                f"{self.path}: cannot record the accepted package: {e.strerror or e}"
            ) from None


@dataclass(frozen=True)
class UnwrapResult:
    """What `unwrap` accepted and wrote (schemas/keys-unwrap-report.schema.json)."""

    package: KeyPackage
    out: str
    accepted_file: str

    def to_json(self) -> dict[str, Any]:
        p = self.package
        return {
            "ok": True,
            "out": self.out,
            "package_id": p.package_id,
            "ledger_id": p.ledger_id,
            "device_id": p.device_id,
            "digest_key_ids": p.digest_key_ids,
            "created_at": _iso(p.created_at),
            "expires_at": _iso(p.expires_at),
            "signer": p.signer,
            "accepted_file": self.accepted_file,
        }


def unwrap(
    package_path: str | os.PathLike[str],
    device_key: DeviceKey,
    trust: TrustBundle,
    out: str | os.PathLike[str],
    now: datetime | None = None,
    accepted_file: str | os.PathLike[str] | None = None,
) -> UnwrapResult:
    """Check a key package and write its digest key to ``out`` (64 hex + newline, mode 0600).

    Steps, in order (each refusal is one line naming the package):

    1. the package parses strictly (`KeyPackage.parse`) — else exit 2;
    2. ``trust`` is hybrid and both signatures verify over the signed bytes with it, and ``signer``
       names its keys — else `PackageRefused` bad_signature (tampered, or another verifier's);
    3. ``device_id`` is this device's — else `WrongDeviceError` (exit 2);
    4. ``created_at`` <= now + `CLOCK_SKEW_S` (not_yet_valid) and now < ``expires_at`` (expired);
    5. ``out`` does not exist yet — else KeyFileError (exit 2);
    6. under the replay-state lock: not accepted before (replayed) and not older than a package
       accepted for the same ledger (superseded);
    7. HPKE opens the ciphertext with ``info`` over the signed header, the plaintext is 32 bytes,
       and its digest key ids equal the signed ``digest_key_ids`` — else binding_mismatch;
    8. the package is recorded as accepted, then the key is written.

    Recording before writing fails closed: a crash in between leaves a package that will not open
    twice, never a key installed without a record. ``accepted_file`` defaults to
    ``accepted-packages`` next to ``device_key``'s file."""
    where = os.fspath(package_path)
    out = os.fspath(out)
    now = (now or datetime.now(UTC)).astimezone(UTC)
    pkg = KeyPackage.parse(_read_file(where, "a key package", secret=False), where)

    if trust.scheme != "hybrid":
        raise KeyFileError(
            f"{trust.path or 'trust bundle'}: scheme {trust.scheme}; key packages are checked "
            "against a hybrid (Ed25519 + ML-DSA-65) trust bundle"
        )
    problems = trust.verify(pkg.signed_bytes(), pkg.signatures)
    if pkg.signer != trust.key_ids:
        problems.insert(
            0,
            f"signed by {json.dumps(pkg.signer, sort_keys=True)}, not by the trusted keys "
            f"{json.dumps(trust.key_ids, sort_keys=True)}",
        )
    if problems:
        raise PackageRefused(
            f"{where}: signature check failed (tampered, or not from the trusted verifier): "
            + "; ".join(problems),
            "bad_signature",
        )

    if pkg.device_id != device_key.device_id:
        raise WrongDeviceError(
            f"{where}: package is sealed to device {pkg.device_id}, not to this device "
            f"{device_key.device_id} ({device_key.path or 'device key'})"
        )
    if pkg.created_at > now + timedelta(seconds=CLOCK_SKEW_S):
        raise PackageRefused(
            f"{where}: created {_iso(pkg.created_at)}, later than this device's clock "
            f"({_iso(now)}) allows; not yet valid",
            "not_yet_valid",
        )
    if now >= pkg.expires_at:
        raise PackageRefused(
            f"{where}: expired at {_iso(pkg.expires_at)} (now {_iso(now)})", "expired"
        )
    if os.path.lexists(out):
        raise KeyFileError(f"{out}: already exists; refusing to overwrite a digest key")
    if not os.path.isdir(os.path.dirname(out) or "."):
        raise KeyFileError(f"{out}: its directory does not exist; the package is left unused")

    if accepted_file is None:
        if device_key.path is None:
            raise UsageError("unwrap: no replay state file (device key has no path)")
        accepted_file = os.path.join(os.path.dirname(device_key.path), ACCEPTED_FILE)
    state = AcceptedPackages(os.fspath(accepted_file))
    with state:
        state.check(pkg, where)
        try:
            master = device_key.open(pkg.ciphertext, pkg.info())
        except (InvalidTag, ValueError):
            raise PackageRefused(
                f"{where}: the signed ciphertext does not open with this device key under its "
                "signed header (binding mismatch)",
                "binding_mismatch",
            ) from None
        if len(master) != MASTER_KEY_SIZE:
            raise PackageRefused(
                f"{where}: the sealed key is {len(master)} bytes, not {MASTER_KEY_SIZE} "
                "(binding mismatch)",
                "binding_mismatch",
            )
        key = DigestKey(master)
        got = digest_key_ids(key)
        if got != pkg.digest_key_ids:
            alg = next(a for a in got if got[a] != pkg.digest_key_ids.get(a))
            raise PackageRefused(
                f"{where}: the sealed key's {alg} key id is {got[alg]}, the package signs "
                f"{pkg.digest_key_ids[alg]} (binding mismatch)",
                "binding_mismatch",
            )
        state.record(pkg)
        key.save(out)
    return UnwrapResult(pkg, out, state.path)
