"""Canonical bytes for signed documents: RFC 8785 JSON Canonicalization Scheme (JCS).

Seals and checkpoints are signed over ``canonical_json(document)`` so that any
implementation can recompute the exact signed bytes from the parsed JSON.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

import rfc8785

__all__ = ["MAX_SAFE_INTEGER", "b64decode_canonical", "canonical_json", "sha256_hex"]

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer magnitude that survives RFC 8785's IEEE-754 double number model."""


def _check(obj: Any, where: str) -> None:
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, float)):
        return
    if isinstance(obj, int):
        if not -MAX_SAFE_INTEGER <= obj <= MAX_SAFE_INTEGER:
            raise ValueError(
                f"integer at {where} is outside +/-(2^53-1); JCS serialises numbers as IEEE "
                f"doubles, encode it as a decimal string instead"
            )
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, str):
                raise ValueError(f"object key {key!r} at {where} is not a string")
            _check(value, f"{where}.{key}")
        return
    if isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _check(value, f"{where}[{i}]")
        return
    raise ValueError(f"value at {where} has type {type(obj).__name__}, not a JSON type")


def canonical_json(obj: Any) -> bytes:
    """Serialise ``obj`` as RFC 8785 (JCS) canonical JSON, UTF-8 bytes.

    ``obj`` is built from dict (str keys), list/tuple, str, int, float, bool
    and None.  Object members are sorted by their UTF-16 code units, no
    whitespace is emitted, strings use the minimal escapes and numbers the
    ECMAScript shortest form (RFC 8785 s3.2).

    JCS models every number as an IEEE-754 double (RFC 8785 s3.2.2.3), so an
    integer beyond +/-(2^53-1) would silently lose precision in other
    implementations.  Such integers are rejected with ValueError; ledger code
    encodes u64 values (sequence numbers, nanosecond timestamps, byte
    counts) as decimal strings instead.  Also raises ValueError for non-string
    keys, non-JSON types, NaN and infinities.
    """
    _check(obj, "$")
    return rfc8785.dumps(obj)


def sha256_hex(b: bytes | bytearray | memoryview) -> str:
    """SHA-256 of ``b`` as 64 lowercase hex characters."""
    return hashlib.sha256(b).hexdigest()


def b64decode_canonical(s: str) -> bytes:
    """Decode standard padded base64 (RFC 4648 s4) and refuse any other spelling of the same bytes.

    RFC 4648 s3.5 lets decoders ignore the unused low bits of the last character; we do not, so a
    signature or key has exactly one accepted encoding and a changed character is always noticed.
    Raises ValueError (binascii.Error) when `s` is not canonical base64.
    """
    raw = base64.b64decode(s, validate=True)
    if base64.b64encode(raw).decode("ascii") != s:
        raise binascii.Error("non-canonical base64 (unused bits set in the last character)")
    return raw
