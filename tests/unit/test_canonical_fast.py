"""The fast paths of ledgertool.canonical (verify's per-segment cost).

`canonical_json` writes a document of ASCII strings, safe integers, bools, null, lists and objects
with ASCII keys with json.dumps, and everything else with rfc8785; these tests prove the two give
the same bytes over random such documents and over real seals, and that every other document
takes the rfc8785 path. `loads_strict` skips its path-naming tree walk when a cheap one finds
nothing wrong; these tests prove the two walks agree, and that a refused document is refused
with the same message as before.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path

import pytest
import rfc8785
from conftest import SAMPLES, TESTS, load_keys
from hypothesis import given, settings
from hypothesis import strategies as st

from ledgertool import canonical
from ledgertool.canonical import MAX_DOCUMENT_DEPTH, MAX_SAFE_INTEGER, canonical_json, loads_strict
from ledgertool.capture.run import capture_file
from ledgertool.errors import LedgerFormatError
from ledgertool.seal.document import seal_body

GOLDEN = TESTS / "golden"
_RFC8785 = rfc8785.dumps  # the real one: the spy below replaces the module's attribute

ascii_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=12)
safe_int = st.one_of(
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    st.sampled_from([0, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 2**31, -(2**31), 2**32]),
)
plain_leaf = st.one_of(st.none(), st.booleans(), safe_int, ascii_text)
plain_doc = st.recursive(
    plain_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=5),
        st.lists(kids, max_size=5).map(tuple),
        st.dictionaries(ascii_text, kids, max_size=6),
    ),
    max_leaves=40,
)


class _Spy:
    """Counts the calls canonical_json makes to rfc8785.dumps."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, obj):
        self.calls += 1
        return _RFC8785(obj)


@pytest.fixture()
def spy(monkeypatch) -> _Spy:
    s = _Spy()
    monkeypatch.setattr(canonical.rfc8785, "dumps", s)
    return s


@settings(max_examples=500, deadline=None)
@given(plain_doc)
def test_fast_path_is_rfc8785_for_plain_documents(doc):
    assert canonical._plain(doc)
    assert canonical_json(doc) == _RFC8785(doc)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(ascii_text, plain_doc, max_size=8))
def test_fast_path_taken_for_plain_objects(doc):
    spy = _Spy()
    real = canonical.rfc8785.dumps
    canonical.rfc8785.dumps = spy
    try:
        out = canonical_json(doc)
    finally:
        canonical.rfc8785.dumps = real
    assert spy.calls == 0 and out == _RFC8785(doc)


def test_every_ascii_character_and_escape(spy):
    # the control characters (\b \t \n \f \r, \u00xx lower case), '"', '\\', '/' and DEL (U+007F
    # is written as itself by RFC 8785; json.dumps(ensure_ascii=True) would escape it)
    s = "".join(map(chr, range(0x80)))
    doc = {s: [s, s[::-1]], "\x7f": "\x7f", "/": "\\/"}
    assert canonical_json(doc) == _RFC8785(doc)
    assert b"\x7f" in canonical_json(doc) and b"\\u001f" in canonical_json(doc)
    assert spy.calls == 0


def _golden_and_fresh_seals(tmp_path: Path, keydir: Path) -> list[Path]:
    dk, sk, _ = load_keys(keydir)
    out = tmp_path / "L"
    capture_file(SAMPLES / "sample.pcapng", out, digest_key=dk, signing_key=sk, segment_records=100)
    seals = sorted(GOLDEN.glob("*/ledger/link=*/*.seal.json")) + sorted(
        out.glob("link=*/*.seal.json")
    )
    assert len(seals) >= 6
    return seals


def test_real_seals_take_the_fast_path_and_match_rfc8785(tmp_path, keydir, spy):
    for path in _golden_and_fresh_seals(tmp_path, keydir):
        doc = loads_strict(path.read_bytes(), str(path))
        for part in (doc, seal_body(doc)):
            assert canonical._plain(part), path
            assert canonical_json(part) == _RFC8785(part), path
    assert spy.calls == 0


@pytest.mark.parametrize(
    "doc",
    [
        {"a": 1.5},  # a float: ECMAScript number form
        {"a": [1, 2.0]},
        {"a": "caf\u00e9"},  # non-ASCII string
        {"\u00e9": 1},  # non-ASCII key
        {"\U0001f600": 1, "\ufb33": 2},  # UTF-16 order differs from code-point order here
        {"a": {"b": ["\u20ac"]}},
    ],
)
def test_fallback_documents_go_to_rfc8785(doc, spy):
    assert not canonical._plain(doc)
    assert canonical_json(doc) == _RFC8785(doc)
    assert spy.calls == 1


def test_utf16_key_order_kept_by_the_fallback():
    # U+FB33 sorts before U+1F600 by code point, after it by UTF-16 code units (RFC 8785 s3.2.3)
    out = canonical_json({"\U0001f600": 1, "\ufb33": 2})
    assert out.index("\U0001f600".encode()) < out.index("\ufb33".encode())


class _Color(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize(
    "doc", [{"a": _Color.RED}, {"a": type("S", (str,), {})("x")}, {"a": 2**53}]
)
def test_subclasses_and_big_integers_take_the_checked_path(doc, spy):
    assert not canonical._plain(doc)
    if doc["a"] == 2**53:
        with pytest.raises(ValueError, match="2\\^53"):
            canonical_json(doc)
        assert spy.calls == 0  # refused by the check before rfc8785
    else:
        assert canonical_json(doc) == _RFC8785(doc)
        assert spy.calls == 1


@pytest.mark.parametrize("bad", [{1: "x"}, {"a": {1, 2}}, {"a": b"x"}, {"a": float("nan")}])
def test_non_json_still_refused(bad):
    with pytest.raises(ValueError):
        canonical_json(bad)


def test_a_cycle_is_not_an_endless_walk():
    a: list = []
    a.append(a)
    assert not canonical._plain(a)  # the container bound stops it; the checked path then refuses
    with pytest.raises((ValueError, RecursionError)):
        canonical_json(a)


# ---- loads_strict -------------------------------------------------------------------------------

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
json_doc = st.recursive(
    json_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=4), kids, max_size=4)
    ),
    max_leaves=30,
)


def _parsed(text: str):
    return json.loads(
        text,
        object_pairs_hook=canonical._unique_members,
        parse_float=canonical._Number,
        parse_int=canonical._int,
        parse_constant=canonical._no_constant,
    )


def _slow_verdict(doc) -> str | None:
    try:
        canonical._check_tree(doc)
    except canonical._Refused as e:
        return str(e)
    return None


@settings(max_examples=500, deadline=None)
@given(json_doc, st.integers(0, MAX_DOCUMENT_DEPTH + 3))
def test_fast_tree_walk_agrees_with_the_naming_walk(doc, wrap):
    for _ in range(wrap):
        doc = [doc]
    text = json.dumps(doc, ensure_ascii=False)
    parsed = _parsed(text)
    assert canonical._tree_ok(parsed) == (_slow_verdict(parsed) is None)
    # and loads_strict refuses exactly what the naming walk refuses, with its message
    want = _slow_verdict(parsed)
    if want is None:
        assert loads_strict(text.encode(), "d") == parsed
    else:
        with pytest.raises(LedgerFormatError) as e:
            loads_strict(text.encode(), "d")
        assert str(e.value) == f"d: {want}"


@pytest.mark.parametrize(
    "data, want",
    [
        (b'{"a": "\\uD800"}', "lone UTF-16 surrogate"),  # upper-case hex escape
        (b'{"a": ["x", {"b": "\\udfff"}]}', "at $.a[1].b"),
        (b'{"\\udc00": 1}', "(a member name)"),
        (b'{"a": 1, "b": 2, "c": {"d": 1, "e": 2, "d": 3}}', "duplicate member 'd'"),
        (
            b'{"a": 1, "b": 2, "a": 3, "b": 4}',
            "duplicate member 'a'",
        ),  # the first key seen twice is named
        (b'{"a": [1, 2, 9007199254740992]}', "integer 9007199254740992 at $.a[2] is outside"),
        (b'{"a": {"b": 0.5}}', "number 0.5 at $.a.b is not an integer"),
    ],
)
def test_refusals_keep_their_messages(data, want):
    with pytest.raises(LedgerFormatError) as e:
        loads_strict(data, "doc.json")
    assert str(e.value).startswith("doc.json: ") and want in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "data, value",
    [
        (
            b'{"a": "\\ud83d\\ude00"}',
            {"a": "\U0001f600"},
        ),  # a surrogate pair: the prefilter hits, the walk passes
        (b'{"a": "\\\\ud800"}', {"a": "\\ud800"}),  # an escaped backslash, then text: no surrogate
        (b'{"a": [-9007199254740991, 9007199254740991]}', {"a": [-(2**53 - 1), 2**53 - 1]}),
    ],
)
def test_accepted_documents(data, value):
    assert loads_strict(data, "doc.json") == value
