"""A document with a raw control character in a string is refused naming the byte and the
character: the message read "(Invalid control character at)", cut off where Python's own text
goes on with a line and column."""

from __future__ import annotations

import pytest

from ledgertool.canonical import loads_strict
from ledgertool.errors import LedgerFormatError


@pytest.mark.parametrize("char, name", [("\n", "U+000A"), ("\x01", "U+0001"), ("\t", "U+0009")])
def test_a_raw_control_character_is_named(char, name):
    data = ('{"seal": "ab' + char + 'c"}').encode()
    with pytest.raises(LedgerFormatError) as e:
        loads_strict(data, "seg.seal.json")
    assert str(e.value) == f"seg.seal.json: not JSON at byte 12 (Invalid control character {name})"


def test_other_json_errors_keep_their_words():
    with pytest.raises(LedgerFormatError) as e:
        loads_strict(b'{"a": 1,}', "x.json")
    assert str(e.value).startswith("x.json: not JSON at byte 8 (")
    assert str(e.value).endswith(")") and " at)" not in str(e.value)
