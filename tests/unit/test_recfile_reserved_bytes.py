"""A sealed segment's raw record file whose header has a non-zero reserved byte is refused by
every reader (verify, through the native walk and the in-memory walk alike), while the header
fields the format leaves unchecked (created_ns) still change nothing."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from conftest import load_keys

from ledgertool.errors import LedgerFormatError
from ledgertool.ledger.recfile import parse_record_file
from ledgertool.verify.ledger import verify_ledger


def _poke(path, offset: int, value: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] = value
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("offset", "why"),
    [
        (168, "record kind byte 168 is 0x01 (windows records)"),
        (200, "reserved header byte 200 is 0x01, not zero"),
        (255, "reserved header byte 255 is 0x01, not zero"),
    ],
)
def test_reserved_header_byte_of_a_sealed_record_file_is_refused(
    sample_ledger, keydir, offset, why
):
    rec = sample_ledger / "link=link0" / "seg-00000001.rec"
    assert rec.is_file()
    _poke(rec, offset, 0x01)
    res = verify_ledger(sample_ledger, load_keys(keydir)[2])
    assert [(p.kind.value, p.segment) for p in res.problems] == [("records_unreadable", 1)], (
        res.problems
    )
    assert why in res.problems[0].detail
    raw = pa.py_buffer(rec.read_bytes())  # the in-memory walk (a ledger at a URL) too
    with pytest.raises(LedgerFormatError, match=re.escape(why)):
        parse_record_file(raw, rec, 48, 64, 100)


def test_unchecked_header_field_still_verifies(sample_ledger, keydir):
    _poke(sample_ledger / "link=link0" / "seg-00000001.rec", 144, 0x5A)  # created_ns: the device's
    assert verify_ledger(sample_ledger, load_keys(keydir)[2]).ok
