"""Key material: the digest master key, signing keys and the verifier trust bundle.

Three files, all written by `generate_keys` (``ledgertool keys generate``):

``digest.key`` (mode 0600)
    The 32-byte digest master secret as 64 lowercase hex characters and a
    newline.  Each digest algorithm uses its own subkey,
    ``HKDF-SHA256(ikm=master, salt=empty, info="ledgertool digest v1 " + name)``
    (RFC 5869), and ledgers name the subkey only by a one-way key id.

``signing.key`` (mode 0600)
    JSON ``{"format": "ledgertool-signing-key-v1", "scheme": ...,
    "ed25519_private": hex, "mldsa65_seed": hex}`` holding the raw 32-byte
    Ed25519 private key (RFC 8032) and/or the 32-byte ML-DSA-65 seed
    (FIPS 204), as the scheme requires.

``verifier.pub`` (mode 0644)
    JSON ``{"format": "ledgertool-verifier-v1", "scheme": ..., "keys":
    [{"algorithm": "ed25519" | "ml-dsa-65", "key_id": hex, "public_key":
    base64}]}``: what a verifier trusts.

Signing schemes: ``hybrid`` (default; Ed25519 *and* ML-DSA-65, a signature
set is valid only when both verify), ``ed25519`` and ``mldsa65``.  Signatures
travel as ``{"ed25519": base64, "ml-dsa-65": base64}``.  The signing
functions sign exactly the bytes they are given; callers add domain
separation (`seal_message`).

Every problem with a file raises `KeyFileError` with one line that names the
file.  Secrets never appear in messages or reprs.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.asymmetric.mldsa import (
    MLDSA65PrivateKey,
    MLDSA65PublicKey,
)
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from . import fsio
from ._binding import c_string, ffi, hardening_error, lib
from .canonical import b64decode_canonical, loads_format_object, loads_strict
from .errors import (
    AlgorithmError,
    FileTypeError,
    KeyFileError,
    LedgerFormatError,
    StorageError,
)

__all__ = [
    "DIGEST_KEY_FILE",
    "SIGNING_KEY_FILE",
    "VERIFIER_FILE",
    "SCHEMES",
    "DEFAULT_SCHEME",
    "DigestKey",
    "SigningKey",
    "TrustBundle",
    "SignatureFinding",
    "seal_message",
    "generate_keys",
    "write_new_key_file",
]

DIGEST_KEY_FILE = "digest.key"
SIGNING_KEY_FILE = "signing.key"
VERIFIER_FILE = "verifier.pub"
#: Kinds of signature problem (`TrustBundle.verify_detailed`), as verify reports them.
SIGNATURE_MISSING, BAD_SIGNATURE = "signature_missing", "bad_signature"


@dataclass(frozen=True)
class SignatureFinding:
    """One problem `TrustBundle.verify_detailed` found: its kind (SIGNATURE_MISSING or
    BAD_SIGNATURE), the algorithm whose signature it concerns (None when the signatures are not
    an object at all) and the English detail."""

    kind: str
    algorithm: str | None
    detail: str


ED25519 = "ed25519"
MLDSA65 = "ml-dsa-65"

SCHEMES: dict[str, tuple[str, ...]] = {
    "hybrid": (ED25519, MLDSA65),
    "ed25519": (ED25519,),
    "mldsa65": (MLDSA65,),
}
"""Signing scheme name -> signature algorithms it requires, in signing order."""

DEFAULT_SCHEME = "hybrid"

SIGNING_KEY_FORMAT = "ledgertool-signing-key-v1"
VERIFIER_FORMAT = "ledgertool-verifier-v1"

MASTER_KEY_SIZE = 32
_HKDF_INFO_PREFIX = b"ledgertool digest v1 "
_DIGEST_KEY_ID_PREFIX = b"ledgertool key id v1\x00"
_SEAL_PREFIX = b"ledgertool seal v1\n"
_KEY_ID_BYTES = 16

_PUBLIC_KEY_SIZES = {ED25519: 32, MLDSA65: 1952}
_MAX_KEY_FILE = 1 << 16  # every valid key file is far smaller
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")

_SECRET_KINDS = {"digest": "digest key", "signing": "signing key"}
_KINDS = {
    "digest": "a digest key (64 hex characters)",
    "signing": "a ledgertool signing key",
    "verifier": "a verifier trust bundle (verifier.pub)",
}


# --------------------------------------------------------------------------- file helpers


def _read_key_file(path: str, kind: str) -> bytes:
    """Read a small key file; every failure is a one-line KeyFileError naming it. A link is
    followed (key files are the operator's), a FIFO, device or directory is refused unread.

    A secret (`digest.key`, `signing.key`) that group or others may read (mode & 0o077, as the
    opened file reports it) is refused, as ssh refuses an unprotected private key: whoever can read
    it can forge digests or seals. A file that is another kind of key file is left to the caller's
    wrong-kind message."""
    what = _KINDS[kind]
    try:
        data, st = fsio.read_with_stat(path, _MAX_KEY_FILE, follow=True, what=what)
    except StorageError as e:
        if e.errno == errno.ENOENT:
            raise KeyFileError(f"{path}: file not found (expected {what})") from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise KeyFileError(f"{path}: permission denied reading {what}") from None
        raise KeyFileError(str(e)) from None
    except FileTypeError as e:
        raise KeyFileError(str(e)) from None
    except LedgerFormatError:
        raise KeyFileError(f"{path}: file too large to be {what}") from None
    mode = st.st_mode
    if not data.strip():
        raise KeyFileError(f"{path}: file is empty (expected {what})")
    if kind in _SECRET_KINDS and mode & 0o077 and _sniff(data) in (None, kind):
        raise KeyFileError(
            f"{path}: UNPROTECTED PRIVATE KEY FILE: mode {stat.S_IMODE(mode):04o} lets group or "
            f"others read this {_SECRET_KINDS[kind]}; refused (run `chmod 600 {path}`)"
        )
    return data


def _sniff(data: bytes) -> str | None:
    """Which kind of ledgertool key file ``data`` looks like, if any."""
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    if _HEX64.fullmatch(text):
        return "digest"
    try:
        doc = loads_strict(data, "key file")
    except LedgerFormatError:
        return None
    if isinstance(doc, dict):
        fmt = doc.get("format")
        if fmt == SIGNING_KEY_FORMAT:
            return "signing"
        if fmt == VERIFIER_FORMAT:
            return "verifier"
    return None


def _wrong_kind(path: str, data: bytes, expected: str) -> KeyFileError | None:
    found = _sniff(data)
    if found is not None and found != expected:
        return KeyFileError(f"{path}: is {_KINDS[found]}, expected {_KINDS[expected]}")
    return None


def _load_json_doc(path: str, kind: str, fmt: str) -> dict[str, Any]:
    data = _read_key_file(path, kind)
    err = _wrong_kind(path, data, kind)
    if err is not None:
        raise err
    what = _KINDS[kind]
    return loads_format_object(data, path, fmt, what, KeyFileError)


def write_new_key_file(path: str, data: bytes, mode: int, what: str) -> None:
    """Create ``path`` with exactly ``mode`` and write ``data``; never overwrite (fsio.create_new:
    not even through a link planted at ``path``)."""
    try:
        fsio.create_new(path, data, mode=mode, what=what)
    except StorageError as e:
        if e.errno == errno.EEXIST:
            raise KeyFileError(f"{path}: already exists; refusing to overwrite {what}") from None
        raise KeyFileError(str(e)) from None
    except FileTypeError as e:
        raise KeyFileError(str(e)) from None


def _key_id(raw_public: bytes) -> str:
    return hashlib.sha256(raw_public).digest()[:_KEY_ID_BYTES].hex()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _check_scheme(scheme: object) -> str:
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise AlgorithmError(
            f"unknown signing scheme {scheme!r} (expected one of: {', '.join(SCHEMES)})"
        )
    return scheme


# --------------------------------------------------------------------------- digest key


def no_core_dumps(path: str | None) -> None:
    """Disable core dumps for the rest of the process before a secret key enters memory
    (RLIMIT_CORE 0 and PR_SET_DUMPABLE 0, native/src/process.c; docs/threat-model.md). KeyFileError
    naming `path` when the kernel refuses."""
    err = ffi.new("char[256]")
    if lib.lt_no_core_dumps(err, 256) != lib.LT_OK:
        raise hardening_error(c_string(err), path)


@dataclass(frozen=True)
class DigestKey:
    """The 32-byte digest master secret and the file it came from.

    ``master`` is never shown by ``repr``; ``path`` is None for a key that was
    generated and not yet saved.
    """

    master: bytes = field(repr=False)
    path: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.master, bytes) or len(self.master) != MASTER_KEY_SIZE:
            raise ValueError(f"digest master key must be {MASTER_KEY_SIZE} bytes")
        no_core_dumps(self.path)

    @classmethod
    def generate(cls) -> DigestKey:
        """A new random master key from the OS CSPRNG (``path`` None)."""
        return cls(secrets.token_bytes(MASTER_KEY_SIZE))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DigestKey:
        """Read a digest key file: 64 hex characters, optionally followed by a newline.

        Raises KeyFileError (one line naming the file) when it is missing,
        unreadable, empty, another kind of ledgertool key file, or not exactly
        64 hex characters.
        """
        path = os.fspath(path)
        no_core_dumps(path)  # before the secret is read
        data = _read_key_file(path, "digest")
        err = _wrong_kind(path, data, "digest")
        if err is not None:
            raise err
        try:
            text = data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise KeyFileError(f"{path}: not a digest key (expected 64 hex characters)") from None
        if len(text) != 64:
            raise KeyFileError(
                f"{path}: not a digest key (expected 64 hex characters, found {len(text)} "
                "characters)"
            )
        if not _HEX64.fullmatch(text):
            raise KeyFileError(
                f"{path}: not a digest key (expected 64 hex characters, found non-hex)"
            )
        return cls(bytes.fromhex(text), path)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the key as 64 lowercase hex characters + newline, mode 0600.

        Raises KeyFileError if ``path`` exists (never overwrites) or cannot be
        written.
        """
        path = os.fspath(path)
        write_new_key_file(path, (self.master.hex() + "\n").encode("ascii"), 0o600, "a digest key")

    def subkey(self, algorithm: str, length: int) -> bytes:
        """Per-algorithm subkey of ``length`` bytes (RFC 5869 HKDF-SHA256).

        ``HKDF(ikm=master, salt=empty, info=b"ledgertool digest v1 " +
        algorithm, L=length)``.  ``algorithm`` is the algorithm name as in
        ledgers (e.g. ``"siphash-1-3-128"``), encoded as UTF-8; ``length`` is
        the algorithm's key size in bytes, 1..8160.  Raises ValueError on an
        empty name or a length out of range.
        """
        if not isinstance(algorithm, str) or not algorithm:
            raise ValueError("subkey: algorithm name must be a non-empty string")
        if not isinstance(length, int) or isinstance(length, bool) or not 1 <= length <= 255 * 32:
            raise ValueError(f"subkey: length must be 1..8160 bytes, got {length!r}")
        hkdf = HKDF(
            algorithm=hashes.SHA256(),
            length=length,
            salt=None,
            info=_HKDF_INFO_PREFIX + algorithm.encode("utf-8"),
        )
        return hkdf.derive(self.master)

    def key_id(self, algorithm: str, length: int) -> str:
        """One-way id of the subkey, as written into ledgers: 32 lowercase hex characters.

        ``SHA-256(b"ledgertool key id v1\\x00" + subkey(algorithm, length))``,
        first 16 bytes.  Same errors as `subkey`.
        """
        sub = self.subkey(algorithm, length)
        return hashlib.sha256(_DIGEST_KEY_ID_PREFIX + sub).digest()[:_KEY_ID_BYTES].hex()


# --------------------------------------------------------------------------- trust bundle


class TrustBundle:
    """The public keys a verifier trusts (``verifier.pub``) and the scheme they form.

    ``public_keys`` maps algorithm name (``"ed25519"``, ``"ml-dsa-65"``) to the
    raw public key bytes (32 and 1952 bytes); exactly the algorithms of
    ``scheme`` must be present.
    """

    def __init__(self, scheme: str, public_keys: Mapping[str, bytes], path: str | None = None):
        self.scheme = _check_scheme(scheme)
        required = SCHEMES[scheme]
        if set(public_keys) != set(required):
            raise ValueError(
                f"scheme {scheme} needs public keys {list(required)}, got {sorted(public_keys)}"
            )
        self._raw: dict[str, bytes] = {}
        self._keys: dict[str, Ed25519PublicKey | MLDSA65PublicKey] = {}
        for alg in required:
            raw = bytes(public_keys[alg])
            if len(raw) != _PUBLIC_KEY_SIZES[alg]:
                raise ValueError(f"{alg} public key must be {_PUBLIC_KEY_SIZES[alg]} bytes")
            cls = Ed25519PublicKey if alg == ED25519 else MLDSA65PublicKey
            self._keys[alg] = cls.from_public_bytes(raw)
            self._raw[alg] = raw
        self.path = path

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Signature algorithms this bundle requires, in scheme order."""
        return SCHEMES[self.scheme]

    @property
    def public_keys(self) -> dict[str, bytes]:
        """Algorithm -> raw public key bytes (a copy)."""
        return dict(self._raw)

    @property
    def key_ids(self) -> dict[str, str]:
        """Algorithm -> key id (first 16 bytes of SHA-256(raw public key), 32 hex chars)."""
        return {alg: _key_id(raw) for alg, raw in self._raw.items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TrustBundle):
            return NotImplemented
        return self.scheme == other.scheme and self._raw == other._raw

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        # the key objects of `cryptography` do not pickle; the raw public keys do, and are checked
        # again when rebuilt (a verify --cluster task carries the key schedule to its worker)
        return (TrustBundle, (self.scheme, self._raw, self.path))

    def __repr__(self) -> str:
        return f"TrustBundle(scheme={self.scheme!r}, key_ids={self.key_ids!r}, path={self.path!r})"

    def to_dict(self) -> dict[str, Any]:
        """The ``ledgertool-verifier-v1`` document as a dict."""
        ids = self.key_ids
        return {
            "format": VERIFIER_FORMAT,
            "scheme": self.scheme,
            "keys": [
                {"algorithm": alg, "key_id": ids[alg], "public_key": _b64(self._raw[alg])}
                for alg in self.algorithms
            ],
        }

    def to_json(self) -> str:
        """The ``verifier.pub`` file text: indented JSON with a trailing newline."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``verifier.pub`` with mode 0644; KeyFileError if it exists or cannot be written."""
        path = os.fspath(path)
        write_new_key_file(path, self.to_json().encode("utf-8"), 0o644, "a verifier trust bundle")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TrustBundle:
        """Read and validate a ``verifier.pub`` file.

        Checks the format tag, the scheme, that the keys are exactly those the
        scheme requires (no duplicates, no unknown fields), that each public
        key decodes (strict base64, right size) and that each ``key_id``
        matches its key.  Raises KeyFileError naming the file otherwise,
        including when the file is a signing key or digest key instead.
        """
        path = os.fspath(path)
        doc = _load_json_doc(path, "verifier", VERIFIER_FORMAT)
        return cls.from_dict(doc, path)

    @classmethod
    def from_dict(cls, doc: object, where: str = "trust bundle") -> TrustBundle:
        """Validate a ``ledgertool-verifier-v1`` document already parsed from JSON (a file, or
        the key set embedded in a rotation statement); KeyFileError naming ``where`` otherwise."""
        path = where
        if not isinstance(doc, dict) or doc.get("format") != VERIFIER_FORMAT:
            raise KeyFileError(f"{path}: not a {VERIFIER_FORMAT} key set")
        extra = set(doc) - {"format", "scheme", "keys"}
        if extra:
            raise KeyFileError(f"{path}: unknown field(s) {sorted(extra)} in verifier trust bundle")
        scheme = doc.get("scheme")
        if not isinstance(scheme, str) or scheme not in SCHEMES:
            raise KeyFileError(
                f"{path}: unknown signing scheme {scheme!r} (expected one of: {', '.join(SCHEMES)})"
            )
        entries = doc.get("keys")
        if not isinstance(entries, list):
            raise KeyFileError(f"{path}: 'keys' is missing or not a list")
        raw_keys: dict[str, bytes] = {}
        for i, entry in enumerate(entries):
            where = f"{path}: keys[{i}]"
            if not isinstance(entry, dict) or set(entry) != {"algorithm", "key_id", "public_key"}:
                raise KeyFileError(f"{where} must be an object with algorithm, key_id, public_key")
            alg, kid, pub = entry["algorithm"], entry["key_id"], entry["public_key"]
            if alg not in _PUBLIC_KEY_SIZES:
                raise KeyFileError(f"{where}: unknown algorithm {alg!r}")
            if alg in raw_keys:
                raise KeyFileError(f"{where}: duplicate {alg} key")
            if alg not in SCHEMES[scheme]:
                raise KeyFileError(f"{where}: {alg} key does not belong to scheme {scheme}")
            if not isinstance(pub, str):
                raise KeyFileError(f"{where}: public_key is not a base64 string")
            try:
                raw = b64decode_canonical(pub)
            except (binascii.Error, ValueError):
                raise KeyFileError(f"{where}: public_key is not valid base64") from None
            if len(raw) != _PUBLIC_KEY_SIZES[alg]:
                raise KeyFileError(
                    f"{where}: {alg} public key is {len(raw)} bytes, expected "
                    f"{_PUBLIC_KEY_SIZES[alg]}"
                )
            if kid != _key_id(raw):
                raise KeyFileError(f"{where}: key_id {kid!r} does not match its {alg} public key")
            raw_keys[alg] = raw
        missing = [alg for alg in SCHEMES[scheme] if alg not in raw_keys]
        if missing:
            raise KeyFileError(f"{path}: scheme {scheme} needs a {missing[0]} key, none given")
        try:
            return cls(scheme, raw_keys, where)
        except ValueError as e:
            raise KeyFileError(f"{path}: invalid public key: {e}") from None

    def verify(self, message: bytes, signatures: Mapping[str, str]) -> list[str]:
        """Check ``signatures`` over exactly ``message``; return the problems found as text
        (`verify_detailed` without the kinds). Returns ``[]`` when everything verifies."""
        return [f.detail for f in self.verify_detailed(message, signatures)]

    def verify_detailed(
        self, message: bytes, signatures: Mapping[str, str]
    ) -> list[SignatureFinding]:
        """Check ``signatures`` over exactly ``message``; return a SignatureFinding per problem.

        ``signatures`` maps algorithm name to a base64 signature.  Every
        algorithm of the scheme must be present and verify (under ``hybrid``
        both Ed25519 and ML-DSA-65: RFC 8032 s5.1.7, FIPS 204 ML-DSA.Verify
        with an empty context).  Each missing, undecodable or non-verifying
        signature is its own problem: kind ``signature_missing`` (e.g. detail
        ``"ml-dsa-65 signature missing"``) or ``bad_signature`` (e.g.
        ``"ed25519 signature does not verify with key <key id>"``).  A
        signature for an algorithm the bundle has no key for is a
        ``bad_signature`` too.  Never raises for bad input.
        """
        if not isinstance(signatures, Mapping):
            return [
                SignatureFinding(
                    BAD_SIGNATURE,
                    None,
                    "signatures must be an object of algorithm -> base64 "
                    f"signature, got {type(signatures).__name__}",
                )
            ]
        message = bytes(message)
        ids = self.key_ids
        problems: list[SignatureFinding] = []
        for alg in self.algorithms:
            sig = signatures.get(alg)
            if sig is None:
                problems.append(
                    SignatureFinding(SIGNATURE_MISSING, alg, f"{alg} signature missing")
                )
                continue
            if not isinstance(sig, str):
                problems.append(
                    SignatureFinding(BAD_SIGNATURE, alg, f"{alg} signature is not a base64 string")
                )
                continue
            try:
                raw = b64decode_canonical(sig)
            except (binascii.Error, ValueError):
                problems.append(
                    SignatureFinding(BAD_SIGNATURE, alg, f"{alg} signature is not valid base64")
                )
                continue
            try:
                self._keys[alg].verify(raw, message)
            except (InvalidSignature, ValueError):
                problems.append(
                    SignatureFinding(
                        BAD_SIGNATURE, alg, f"{alg} signature does not verify with key {ids[alg]}"
                    )
                )
        for alg in sorted(str(a) for a in signatures if a not in self.algorithms):
            problems.append(
                SignatureFinding(
                    BAD_SIGNATURE,
                    alg,
                    f"unexpected {alg!r} signature: trust bundle "
                    f"(scheme {self.scheme}) has no such key",
                )
            )
        return problems


# --------------------------------------------------------------------------- signing key


class SigningKey:
    """Private signing key(s) for one scheme.  ``repr`` shows key ids only."""

    def __init__(
        self,
        scheme: str,
        ed25519: Ed25519PrivateKey | None,
        mldsa65: MLDSA65PrivateKey | None,
        path: str | None = None,
    ):
        self.scheme = _check_scheme(scheme)
        need = SCHEMES[scheme]
        if (ed25519 is not None) != (ED25519 in need) or (mldsa65 is not None) != (MLDSA65 in need):
            raise ValueError(f"scheme {scheme} needs exactly the keys {list(need)}")
        no_core_dumps(path)
        self._ed = ed25519
        self._ml = mldsa65
        self.path = path

    @classmethod
    def generate(cls, scheme: str = DEFAULT_SCHEME) -> SigningKey:
        """Fresh random key(s) for ``scheme``; AlgorithmError for an unknown scheme."""
        _check_scheme(scheme)
        need = SCHEMES[scheme]
        return cls(
            scheme,
            Ed25519PrivateKey.generate() if ED25519 in need else None,
            MLDSA65PrivateKey.generate() if MLDSA65 in need else None,
        )

    @classmethod
    def from_raw(
        cls,
        scheme: str,
        *,
        ed25519_private: bytes | None = None,
        mldsa65_seed: bytes | None = None,
        path: str | None = None,
    ) -> SigningKey:
        """Build from raw secrets: 32-byte Ed25519 private key (RFC 8032 s5.1.5), 32-byte ML-DSA-65
        seed.

        Raises AlgorithmError for an unknown scheme, ValueError when the keys
        given do not match the scheme or have the wrong size.
        """
        _check_scheme(scheme)
        for name, raw in (("ed25519_private", ed25519_private), ("mldsa65_seed", mldsa65_seed)):
            if raw is not None and len(raw) != 32:
                raise ValueError(f"{name} must be 32 bytes")
        ed = (
            None
            if ed25519_private is None
            else Ed25519PrivateKey.from_private_bytes(bytes(ed25519_private))
        )
        ml = (
            None if mldsa65_seed is None else MLDSA65PrivateKey.from_seed_bytes(bytes(mldsa65_seed))
        )
        return cls(scheme, ed, ml, path)

    @property
    def algorithms(self) -> tuple[str, ...]:
        """Signature algorithms of the scheme, in signing order."""
        return SCHEMES[self.scheme]

    def __repr__(self) -> str:
        return f"SigningKey(scheme={self.scheme!r}, key_ids={self.trust_bundle().key_ids!r})"

    def _to_dict(self) -> dict[str, str]:
        doc = {"format": SIGNING_KEY_FORMAT, "scheme": self.scheme}
        if self._ed is not None:
            doc["ed25519_private"] = self._ed.private_bytes_raw().hex()
        if self._ml is not None:
            doc["mldsa65_seed"] = self._ml.private_bytes_raw().hex()
        return doc

    def derive_secret(self, info: bytes, salt: bytes, length: int = 32) -> bytes:
        """A secret derived from this key's private material (RFC 5869 HKDF-SHA256):
        ``HKDF(ikm=ed25519_private || mldsa65_seed, salt, info, L=length)``, each part present
        only where the scheme has that key (Ed25519 first). Only the holder of the signing key
        can compute it; it reveals nothing about the key
        (docs/adr/0009-authenticated-open-segments.md)."""
        ikm = b"".join(k.private_bytes_raw() for k in (self._ed, self._ml) if k is not None)
        return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the ``ledgertool-signing-key-v1`` JSON file, mode 0600.

        Raises KeyFileError if ``path`` exists (never overwrites) or cannot be
        written.
        """
        path = os.fspath(path)
        text = json.dumps(self._to_dict(), indent=2) + "\n"
        write_new_key_file(path, text.encode("utf-8"), 0o600, "a signing key")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SigningKey:
        """Read a ``signing.key`` file.

        Raises KeyFileError naming the file when it is missing, not this
        format (including a verifier.pub or digest key given by mistake), has
        an unknown scheme or field, or lacks / has extra key material for its
        scheme.
        """
        path = os.fspath(path)
        no_core_dumps(path)  # before the secret is read
        doc = _load_json_doc(path, "signing", SIGNING_KEY_FORMAT)
        scheme = doc.get("scheme")
        if not isinstance(scheme, str) or scheme not in SCHEMES:
            raise KeyFileError(
                f"{path}: unknown signing scheme {scheme!r} (expected one of: {', '.join(SCHEMES)})"
            )
        need = SCHEMES[scheme]
        fields = {"format", "scheme"}
        if ED25519 in need:
            fields.add("ed25519_private")
        if MLDSA65 in need:
            fields.add("mldsa65_seed")
        if set(doc) != fields:
            missing, extra = sorted(fields - set(doc)), sorted(set(doc) - fields)
            detail = f"missing {missing}" if missing else f"unexpected {extra}"
            raise KeyFileError(f"{path}: signing key for scheme {scheme}: {detail}")
        raw: dict[str, bytes] = {}
        for name in sorted(fields - {"format", "scheme"}):
            value = doc[name]
            if not isinstance(value, str) or not _HEX64.fullmatch(value):
                raise KeyFileError(f"{path}: {name} is not 64 hex characters")
            raw[name] = bytes.fromhex(value)
        try:
            return cls.from_raw(scheme, path=path, **raw)
        except ValueError:
            raise KeyFileError(f"{path}: invalid key material in signing key") from None

    def sign(self, message: bytes) -> dict[str, str]:
        """Sign exactly ``message`` with every key of the scheme.

        Returns ``{"ed25519": base64, "ml-dsa-65": base64}`` (only the
        algorithms the scheme has).  Ed25519 per RFC 8032 (64-byte
        signature); ML-DSA-65 per FIPS 204 with an empty context (3309-byte
        signature, hedged/randomised).
        """
        message = bytes(message)
        out: dict[str, str] = {}
        if self._ed is not None:
            out[ED25519] = _b64(self._ed.sign(message))
        if self._ml is not None:
            out[MLDSA65] = _b64(self._ml.sign(message))
        return out

    def trust_bundle(self) -> TrustBundle:
        """The matching public `TrustBundle` (not yet saved, ``path`` None)."""
        pubs: dict[str, bytes] = {}
        if self._ed is not None:
            pubs[ED25519] = self._ed.public_key().public_bytes_raw()
        if self._ml is not None:
            pubs[MLDSA65] = self._ml.public_key().public_bytes_raw()
        return TrustBundle(self.scheme, pubs)


# --------------------------------------------------------------------------- domain separation


def seal_message(canonical: bytes) -> bytes:
    """Bytes signed for a seal: ``b"ledgertool seal v1\\n" + canonical``.

    ``canonical`` is the seal document's RFC 8785 encoding
    (`ledgertool.canonical.canonical_json`) without its signatures.  The
    prefix keeps a seal signature from being valid for any other message
    type signed with the same key.
    """
    if not isinstance(canonical, (bytes, bytearray, memoryview)):
        raise TypeError("seal_message: canonical must be bytes")
    return _SEAL_PREFIX + bytes(canonical)


# --------------------------------------------------------------------------- key generation


def generate_keys(outdir: str | os.PathLike[str], scheme: str = DEFAULT_SCHEME) -> dict[str, Any]:
    """Create ``digest.key``, ``signing.key`` and ``verifier.pub`` in ``outdir``.

    Creates ``outdir`` (mode 0700) if needed.  Refuses, with KeyFileError
    naming the file, if any of the three already exists; nothing is written
    then, and a failure part-way removes the files this call created.
    AlgorithmError for an unknown ``scheme``.

    Returns ``{"outdir", "scheme", "digest_key", "signing_key", "verifier"``
    (paths) ``, "key_ids": {algorithm: signing key id}}``.  Digest key ids
    depend on the digest algorithm and are not part of the result.
    """
    _check_scheme(scheme)
    outdir = os.fspath(outdir)
    try:
        os.makedirs(outdir, mode=0o700, exist_ok=True)
    except OSError as e:
        raise KeyFileError(f"{outdir}: cannot create key directory: {e.strerror or e}") from None
    if not os.path.isdir(outdir):
        raise KeyFileError(f"{outdir}: not a directory")
    paths = {
        "digest_key": os.path.join(outdir, DIGEST_KEY_FILE),
        "signing_key": os.path.join(outdir, SIGNING_KEY_FILE),
        "verifier": os.path.join(outdir, VERIFIER_FILE),
    }
    for p in paths.values():
        if os.path.lexists(p):
            raise KeyFileError(f"{p}: already exists; refusing to overwrite existing keys")

    digest = DigestKey.generate()
    signing = SigningKey.generate(scheme)
    bundle = signing.trust_bundle()
    written: list[str] = []
    try:
        digest.save(paths["digest_key"])
        written.append(paths["digest_key"])
        signing.save(paths["signing_key"])
        written.append(paths["signing_key"])
        bundle.save(paths["verifier"])
        written.append(paths["verifier"])
    except BaseException:
        for p in written:
            try:
                os.unlink(p)
            except OSError:
                pass
        raise
    return {"outdir": outdir, "scheme": scheme, **paths, "key_ids": bundle.key_ids}
