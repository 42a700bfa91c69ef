"""A segment header with a wrong header-size field is named by that field and its byte (10), not
reported as an unsupported format version."""

from __future__ import annotations

import pytest

from ledgertool.errors import LedgerFormatError
from ledgertool.ledger.segment import SegmentHeader


@pytest.mark.parametrize(("at", "value"), [(10, 0x01), (11, 0x02), (10, 0xFF)])
def test_a_changed_header_size_is_named(sample_ledger, at, value):
    path = sample_ledger / "link=link0" / "seg-00000001.rec"
    raw = bytearray(path.read_bytes()[:256])
    SegmentHeader.decode(bytes(raw), str(path))  # as written: decodes
    raw[at] ^= value
    size = int.from_bytes(raw[10:12], "little")
    with pytest.raises(LedgerFormatError) as e:
        SegmentHeader.decode(bytes(raw), str(path))
    assert str(e.value) == f"{path}: header size {size} at byte 10 is not 256"
