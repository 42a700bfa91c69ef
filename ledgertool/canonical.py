"""Canonical bytes for signed documents: RFC 8785 JSON Canonicalization Scheme (JCS), and the one
strict parser for every JSON document ledgertool reads from storage or a user (`loads_strict`).

Seals and checkpoints are signed over ``canonical_json(document)`` so that any
implementation can recompute the exact signed bytes from the parsed JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

import rfc8785

from .errors import DataError, LedgerFormatError

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_DEPTH",
    "MAX_SAFE_INTEGER",
    "SignedDocument",
    "b64decode_canonical",
    "canonical_json",
    "loads_format_object",
    "loads_strict",
]

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
    if _plain(obj):
        # byte-identical to rfc8785.dumps for such documents (tests/test_canonical_fast.py proves it
        # against rfc8785): no whitespace; strings of ASCII need only the escapes of '"', '\\' and
        # U+0000-U+001F, which both write alike (\b \t \n \f \r, else \u00xx in lower case);
        # ensure_ascii=False because ensure_ascii=True would also escape U+007F, which RFC 8785
        # writes as itself; integers within +/-(2^53-1) are their decimal digits in both. Member
        # order: RFC 8785 sorts keys by UTF-16 code units, which for ASCII keys is the code-point
        # order Python's sort gives.
        return json.dumps(
            obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("ascii")
    _check(obj, "$")
    return rfc8785.dumps(obj)


_PLAIN_CONTAINERS = 1 << 16  # a seal has 3, a checkpoint or rotation statement a few


def _plain(obj: Any) -> bool:
    """Whether `obj` is a document json.dumps writes exactly as RFC 8785 does: made of dicts with
    ASCII str keys, lists, tuples, ASCII strs, ints within +/-(2^53-1), bools and None (exact
    types: subclasses such as IntEnum, and floats, take the rfc8785 path). Iterative, no paths
    built: verify calls it once a seal. More than _PLAIN_CONTAINERS containers (or a cycle, which
    would never end) also take the rfc8785 path, whose errors are the ones callers know."""
    stack = [obj]
    pop, push = stack.pop, stack.append
    containers = 0
    while stack:
        o = pop()
        t = type(o)
        if t is str:
            if not o.isascii():
                return False
        elif t is int:
            if not -MAX_SAFE_INTEGER <= o <= MAX_SAFE_INTEGER:
                return False
        elif t is dict or t is list or t is tuple:
            containers += 1
            if containers > _PLAIN_CONTAINERS:
                return False
            if t is dict:
                for k, v in o.items():
                    if type(k) is not str or not k.isascii():
                        return False
                    push(v)
            else:
                stack.extend(o)
        elif o is not None and t is not bool:
            return False
    return True


MAX_DOCUMENT_BYTES = 16 << 20
"""Largest document `loads_strict` parses: a proof with a thousand rotation statements is ~15 MB,
a seal ~10 kB."""

MAX_DOCUMENT_DEPTH = 32
"""Deepest nesting of arrays and objects `loads_strict` accepts (ledgertool documents nest <= 6)."""


class _Refused(ValueError):
    pass


class _Number(str):
    """The text of a JSON number `loads_strict` refuses (a fraction or exponent, or an integer too
    long to be safe), kept so that the tree walk can name where it is."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):  # a key came twice: name the first that did
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"duplicate member {key!r} in an object")
            seen.add(key)
    return doc


def _int(text: str) -> int | _Number:
    # 2^53 - 1 has 16 digits; a longer literal is never converted (int() of 5,000 digits raises)
    return _Number(text) if len(text.lstrip("-")) > 16 else int(text)


def _no_constant(name: str) -> float:
    raise _Refused(f"{name} is not a JSON number")


# a lone surrogate can only come from a \uD800-\uDFFF escape (the text itself was decoded from
# UTF-8); this also matches an escaped backslash followed by "ud8..", which only costs the full walk
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _tree_ok(doc: Any) -> bool:
    """Whether `doc` (as json.loads with loads_strict's hooks made it) passes _check_tree, for a
    document whose text holds no surrogate escape: no path strings are built. False sends the
    document to _check_tree, which names what is wrong and where."""
    stack = [(doc, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        obj, depth = pop()
        t = type(obj)
        if t is dict or t is list:
            if depth > MAX_DOCUMENT_DEPTH:
                return False
            for value in obj.values() if t is dict else obj:
                tv = type(value)
                if tv is str or tv is bool or value is None:
                    continue
                if tv is int:
                    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                        return False
                    continue
                push((value, depth + 1))
        elif t is int:
            if not -MAX_SAFE_INTEGER <= obj <= MAX_SAFE_INTEGER:
                return False
        elif not (t is str or t is bool or obj is None):  # a _Number, or anything else
            return False
    return True


def _check_tree(doc: Any) -> None:
    """Depth, numbers and strings (no lone surrogates) at every depth, without recursion."""
    stack = [(doc, "$", 1)]
    while stack:
        obj, path, depth = stack.pop()
        if isinstance(obj, _Number):
            shown = obj if len(obj) <= 24 else obj[:24] + "..."
            if obj.lstrip("-").isdigit():
                raise _Refused(
                    f"integer {shown} at {path} is outside +/-(2^53-1) (RFC 8785 numbers are IEEE "
                    "doubles)"
                )
            raise _Refused(
                f"number {shown} at {path} is not an integer (ledgertool documents hold integers "
                "only)"
            )
        if isinstance(obj, (dict, list)):
            if depth > MAX_DOCUMENT_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DOCUMENT_DEPTH} levels at {path}")
            if isinstance(obj, dict):
                for key, value in obj.items():
                    stack.append((key, f"{path} (a member name)", depth))
                    stack.append((value, f"{path}.{key}", depth + 1))
            else:
                stack.extend((value, f"{path}[{i}]", depth + 1) for i, value in enumerate(obj))
        elif isinstance(obj, str):
            try:
                obj.encode("utf-8")
            except UnicodeEncodeError:
                raise _Refused(
                    f"string at {path} holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape)"
                ) from None
        elif type(obj) is int and not -MAX_SAFE_INTEGER <= obj <= MAX_SAFE_INTEGER:
            raise _Refused(
                f"integer {obj} at {path} is outside +/-(2^53-1) (RFC 8785 numbers are IEEE "
                "doubles)"
            )


def loads_strict(data: bytes, where: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """Parse one untrusted JSON document (RFC 8259) so that every reader sees the same values.

    Refused, with LedgerFormatError ``"{where}: ..."`` naming the byte offset where the parser
    knows it: more than `max_bytes` bytes; not UTF-8 (RFC 8259 s8.1; a byte order mark too);
    duplicate object members (RFC 8259 s4 leaves their meaning open: one verifier could read the
    first, another the last); NaN / Infinity (not JSON) and numbers with a fraction or exponent
    (ledgertool documents hold integers only); integers beyond +/-(2^53-1) and lone surrogates
    (RFC 7493 I-JSON, which RFC 8785 canonicalisation assumes); nesting deeper than
    MAX_DOCUMENT_DEPTH; trailing data after the document.
    """
    if len(data) > max_bytes:
        raise LedgerFormatError(
            f"{where}: {len(data)} bytes, more than the {max_bytes} a document may have"
        )
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise LedgerFormatError(f"{where}: not UTF-8 at byte {e.start}") from None
    if text.startswith("\ufeff"):
        raise LedgerFormatError(
            f"{where}: starts with a byte order mark (RFC 8259 s8.1 forbids it)"
        )
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_unique_members,
            parse_float=_Number,
            parse_int=_int,
            parse_constant=_no_constant,
        )
        if _SURROGATE_ESCAPE.search(text) is not None or not _tree_ok(doc):
            _check_tree(doc)
    except json.JSONDecodeError as e:
        at = len(text[: e.pos].encode("utf-8"))
        why = e.msg
        if why.endswith(" at") and e.pos < len(text):  # "Invalid control character at": name it
            why = f"{why[:-3]} U+{ord(text[e.pos]):04X}"
        raise LedgerFormatError(f"{where}: not JSON at byte {at} ({why})") from None
    except _Refused as e:
        raise LedgerFormatError(f"{where}: {e}") from None
    except RecursionError:
        raise LedgerFormatError(
            f"{where}: nested deeper than {MAX_DOCUMENT_DEPTH} levels"
        ) from None
    return doc


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


def loads_format_object(
    data: bytes, where: str, fmt: str, what: str, error: type[DataError] = LedgerFormatError
) -> dict:
    """A strictly parsed JSON object (loads_strict) whose `format` member is `fmt`; otherwise
    `error` (LedgerFormatError, or KeyFileError for key files) naming `where` and `what`."""
    try:
        doc = loads_strict(data, where)
    except LedgerFormatError as e:
        raise error(f"{e} (expected {what})") from None
    if not isinstance(doc, dict):
        raise error(f"{where}: top level is not a JSON object (expected {what})")
    if doc.get("format") != fmt:
        raise error(f"{where}: format is {doc.get('format')!r}, expected {fmt!r} ({what})")
    return doc


@dataclass(frozen=True, kw_only=True)
class SignedDocument:
    """Base of the typed signed documents (seal.document.Seal, seal.rotation.RotationStatement):
    a subclass declares its members as fields; `of` fills them from a parsed mapping (a member's
    default when it is absent) and keeps the mapping privately, so the signed body is RFC 8785 of
    exactly the members that were signed, unknown ones included."""

    members: frozenset[str] = frozenset()  # the member names the document has
    _document: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, doc: Mapping):
        """The typed value of a parsed (or just built) document; the mapping is copied, not kept."""
        doc = dict(doc)
        known = {
            f.name: doc.get(f.name, None if f.default is MISSING else f.default)
            for f in fields(cls)
            if not f.kw_only
        }
        return cls(**known, members=frozenset(doc), _document=doc)

    def has(self, member: str) -> bool:
        return member in self.members

    def signed_body(self) -> bytes:
        """RFC 8785 bytes of every member but "signatures"; TypeError or ValueError when a member
        cannot be canonicalised."""
        return canonical_json({k: v for k, v in self._document.items() if k != "signatures"})

    def to_json(self) -> dict:
        """The document as parsed, every member (a copy: for JSON output)."""
        return dict(self._document)
