"""RFC 8785 canonical JSON and the safe-integer rule."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgertool.canonical import MAX_SAFE_INTEGER, canonical_json


def test_rfc8785_sorting_example():
    # RFC 8785 s3.2.3: members sorted by UTF-16 code units.
    src = (
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With '
        'Dagesh", "1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control",'
        ' "\\u00f6": "Latin Small Letter O With Diaeresis"}'
    )
    out = canonical_json(json.loads(src))
    values = list(json.loads(out).values())
    assert values == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]
    assert out.startswith(b'{"\\r":"Carriage Return","1":"One","\xc2\x80":"Control"')


def test_rfc8785_serialization_example():
    # RFC 8785 s3.2.2 / s3.2.4: numbers, string escapes, literals.
    src = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    ).encode("utf-8")
    assert canonical_json(json.loads(src)) == expected


def test_no_whitespace_and_sorted():
    assert canonical_json({"b": 1, "a": [True, None, "x"]}) == b'{"a":[true,null,"x"],"b":1}'


@pytest.mark.parametrize("value", [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 0, True, False])
def test_safe_integers_accepted(value):
    assert json.loads(canonical_json({"v": value})) == {"v": value}


@pytest.mark.parametrize(
    "value", [MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**64 - 1, -(2**63)]
)
def test_big_integers_rejected(value):
    with pytest.raises(ValueError, match="2\\^53"):
        canonical_json({"records": [{"seq": value}]})


def test_big_integer_error_names_where():
    with pytest.raises(ValueError, match=r"\$\.records\[0\]\.seq"):
        canonical_json({"records": [{"seq": 2**60}]})


def test_u64_as_decimal_string_is_fine():
    assert canonical_json({"seq": str(2**64 - 1)}) == b'{"seq":"18446744073709551615"}'


@pytest.mark.parametrize(
    "bad", [{1: "x"}, {"x": b"bytes"}, {"x": {1, 2}}, float("nan"), float("inf")]
)
def test_non_json_rejected(bad):
    with pytest.raises(ValueError):
        canonical_json(bad)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    )
)
def test_round_trip_and_idempotent(value):
    out = canonical_json(value)
    assert json.loads(out) == value
    assert canonical_json(json.loads(out)) == out
