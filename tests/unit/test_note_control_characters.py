"""A signed note (a checkpoint) holds no control character but newline: parse_note refuses each of
the other 31 anywhere in the note, text or signature lines, before it reads a line, and takes the
same note without it."""

from __future__ import annotations

import pytest

from ledgertool.errors import LedgerFormatError
from ledgertool.keyfiles import SigningKey
from ledgertool.seal.checkpoint import Checkpoint, parse_note, sign_checkpoint

CONTROLS = [chr(c) for c in range(0x20) if c != 0x0A]


@pytest.fixture(scope="module")
def note(keydir) -> bytes:
    cp = Checkpoint("ledgertool/" + "ab" * 16 + "/link0", 3, bytes(range(32)), records=7)
    return sign_checkpoint(cp, SigningKey.load(keydir / "signing.key"))


def test_the_note_without_a_control_character_parses(note):
    parsed = parse_note(note)
    assert parsed.checkpoint.size == 3 and parsed.checkpoint.records == 7
    assert len(parsed.signatures) == 2  # Ed25519 and ML-DSA-65


@pytest.mark.parametrize("ch", CONTROLS, ids=[f"{ord(c):#04x}" for c in CONTROLS])
@pytest.mark.parametrize("where", ["origin", "text end", "signature line"])
def test_a_control_character_anywhere_is_refused(note, ch, where):
    at = {"origin": 3, "text end": note.index(b"\n\n"), "signature line": len(note) - 5}[where]
    bad = note[:at] + ch.encode() + note[at:]
    with pytest.raises(LedgerFormatError, match="cp.txt: control character in a signed note"):
        parse_note(bad, "cp.txt")
