"""Which records of a pruned link are still held: the sequence number of a digest among the
segments no prune statement removed (`prove --digest` on a pruned ledger searches those only,
never stopping at a segment whose records are gone on purpose)."""

from __future__ import annotations

from pathlib import Path

from ..digest.record import record_dtype
from ..ledger.header import load_ledger
from ..ledger.index import choose_link
from ..ledger.remote import ledger_reader
from ..seal.prune import check_prunes, parse_prune
from .ledger import verified_segment


def pruned_segments(directory: Path, link: str) -> set[int]:
    """The segments of `link` the ledger's prune statements remove (as stated: verify checks
    them); empty for a ledger never pruned."""
    reader = ledger_reader(directory)
    statements = [parse_prune(raw, str(p)) for p, raw in reader.read_prune_files()]
    if not statements:
        return set()
    ledger = load_ledger(directory)
    return set(check_prunes(ledger.ledger_id, statements, None).of(link))


def pruned_ranges(directory: Path) -> dict[str, tuple[int, int, int]]:
    """Per link the prune statements name: (first segment, last segment, the last pruned record's
    timestamp), as the statements state them (verify checks them)."""
    reader = ledger_reader(directory)
    statements = [parse_prune(raw, str(p)) for p, raw in reader.read_prune_files()]
    if not statements:
        return {}
    ledger = load_ledger(directory)
    done = check_prunes(ledger.ledger_id, statements, None)
    out: dict[str, tuple[int, int, int]] = {}
    for st in done.statements:
        for pl in st.links:
            first, _, last_ts = out.get(pl.link, (pl.from_segment, 0, 0))
            out[pl.link] = (first, pl.to_segment, max(last_ts, pl.last_ts_ns))
    return out


def held_seq_of_digest(directory: Path, link: str | None, digest: bytes) -> int | None:
    """The sequence number of the first held record of `link` whose digest is `digest`, searching
    the verified records of every segment a prune statement did not remove; None when none has
    it. The verified_segment errors for a held segment that does not match its seal."""
    import numpy as np

    link = choose_link(directory, link)
    gone = pruned_segments(directory, link)
    reader = ledger_reader(directory)
    ledger = load_ledger(directory)
    dtype = record_dtype(ledger.digest_size)
    for index in reader.listing(link).sealed:
        if index in gone:
            continue
        arr = np.frombuffer(verified_segment(reader, ledger, link, index).records, dtype=dtype)
        hits = np.nonzero(arr["digest"] == np.void(digest))[0]
        if len(hits):
            return int(arr["seq"][hits[0]])
    return None
