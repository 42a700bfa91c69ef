"""The sealed records of a ledger's segments in either ledger format, for tests that read or
rewrite them (docs/ledger-format.md, "Sealed segment"): a v1 segment's records are its Parquet
file; a v2 segment's are its raw record file `seg-N.rec`, or its Parquet after `ledgertool compact`.
Every parse goes through ledgertool's own code (ledgertool.ledger.recfile, ledgertool.ledger.layout,
ledgertool.seal.document); nothing here is a second implementation of the format.

The rewriting helpers are the adversary's tools (a tamper test's): they write what a key holder,
or anyone with write access to the storage, could write, in the segment's own form.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ledgertool.keyfiles import SigningKey
from ledgertool.ledger import layout
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.openmac import OpenSegmentKey
from ledgertool.ledger.parquet import records_to_table, table_to_records
from ledgertool.ledger.recfile import parse_record_file
from ledgertool.ledger.sealer import load_seal, seal_committed, seal_records
from ledgertool.ledger.segment import HEADER_SIZE, SegmentHeader, SegmentWriter, now_ns

LINK = "link0"
#: ids for tests parametrized over the ledger format: (ledger_format argument, id)
FORMATS = {"v1": 1, "v2": 2}


def records_kind(ledger: Path) -> str:
    """The kind of file a new sealed segment of this ledger has: RECORDS (v2) or PARQUET (v1)."""
    return layout.RECORDS if load_ledger(ledger).version == 2 else layout.PARQUET


def sealed_files(ledger: Path, index: int, link: str = LINK) -> list[Path]:
    """The files of sealed segment `index` that exist: its records file(s), leaves sidecar, seal."""
    kinds = (layout.RECORDS, layout.PARQUET, layout.LEAVES, layout.SEAL)
    return [p for p in (layout.segment_path(ledger, link, index, k) for k in kinds) if p.exists()]


def sealed_records_path(ledger: Path, index: int, link: str = LINK) -> Path:
    """The file verify reads a sealed segment's records from: seg-N.rec when present, else
    seg-N.parquet."""
    rec = layout.records_path(ledger, link, index)
    return rec if rec.exists() else layout.parquet_path(ledger, link, index)


def sealed_records(ledger: Path, index: int, link: str = LINK) -> bytes:
    """The raw records (ledger.record_size bytes each, framing stripped) of sealed segment `index`,
    from whichever form it is in. Not authenticated: this reads what is stored."""
    led = load_ledger(ledger)
    path = sealed_records_path(ledger, index, link)
    if path.suffix == ".rec":
        first = int(load_seal(layout.seal_path(ledger, link, index)).first_seq)
        rec = parse_record_file(path.read_bytes(), path, led.record_size, led.leaf_records, first)
        return rec.records.to_pybytes()
    return table_to_records(pq.read_table(path), led.digest_size)


def sealed_table(ledger: Path, index: int, link: str = LINK) -> pa.Table:
    """The records of sealed segment `index` as the Arrow table of the Parquet schema, either
    form."""
    return records_to_table(
        sealed_records(ledger, index, link), load_ledger(ledger).digest_size, index
    )


def _write_rec(ledger: Path, link: str, header: SegmentHeader, records: bytes, key: SigningKey):
    """Write `records` as seg-N.rec with the device's MAC chain (what the writer's seal renames)."""
    led = load_ledger(ledger)
    opened = layout.open_segment_path(ledger, link, header.index)
    w = SegmentWriter(opened, header, OpenSegmentKey.derive(key, led.ledger_id), ledger)
    w.append(records, len(records) // header.record_size)
    commitment = w.finish()
    w.close()
    opened.rename(layout.records_path(ledger, link, header.index))
    return commitment


def rewrite_sealed_records(
    ledger: Path, index: int, records: bytes, key: SigningKey, link: str = LINK
) -> None:
    """Replace the stored records of sealed segment `index` by `records`, in the form it has (the
    seal is left as it is). A raw record file keeps its header and gets valid MACs from `key`'s
    device key (verify ignores them; they are the strongest adversary's)."""
    path = sealed_records_path(ledger, index, link)
    if path.suffix == ".rec":
        header = SegmentHeader.decode(path.read_bytes()[:HEADER_SIZE], str(path))
        path.unlink()
        _write_rec(ledger, link, header, records, key)
    else:
        pq.write_table(records_to_table(records, load_ledger(ledger).digest_size, index), path)


def reseal_segment(
    ledger: Path, index: int, records: bytes, key: SigningKey, prev_hash: str, link: str = LINK
) -> dict:
    """What a key holder does to rewrite sealed segment `index` properly: remove its files, write
    `records` in the ledger's form and sign a new seal chained to `prev_hash`. Returns the seal."""
    led = load_ledger(ledger)
    old = load_seal(layout.seal_path(ledger, link, index))
    led = led.for_digest_key(old.digest_key_id)
    for p in sealed_files(ledger, index, link):
        p.unlink()
    first = int(old.first_seq)
    seal_file = layout.seal_path(ledger, link, index)
    if led.version == 1:
        return seal_records(
            ledger_dir=ledger,
            ledger=led,
            link=link,
            index=index,
            first_seq=first,
            records=records,
            prev_hash=prev_hash,
            signing_key=key,
            parquet=layout.parquet_path(ledger, link, index),
            seal_file=seal_file,
        )[0]
    mac_key_id = OpenSegmentKey.derive(key, led.ledger_id).key_id
    header = SegmentHeader(
        led.ledger_id,
        link,
        index,
        led.algorithm,
        led.strip,
        led.digest_key_id,
        led.record_size,
        led.digest_size,
        led.leaf_records,
        first,
        now_ns(),
        mac_key_id,
    )
    c = _write_rec(ledger, link, header, records, key)
    return seal_committed(
        ledger_dir=ledger,
        ledger=led,
        link=link,
        index=index,
        first_seq=first,
        totals=c.totals,
        leaves=c.leaves,
        prev_hash=prev_hash,
        signing_key=key,
        seal_file=seal_file,
    )[0]
