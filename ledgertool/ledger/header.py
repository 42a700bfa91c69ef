"""The ledger header, DIR/ledger.json: format, ledger id, algorithm, strip mode, genesis digest
key id, record size and Merkle leaf size (docs/ledger-format.md#ledgerjson). `LedgerHeader` is the
checked, typed value; `parse_ledger_header` is pure, `load_ledger` / `create_ledger` do the I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .. import fsio
from ..algorithms import ALGORITHMS, STRIP_MODES
from ..canonical import loads_strict
from ..digest.engine import LEAF_HASHES, MERKLE_MAX_LEAF_RECORDS, valid_leaf_records
from ..digest.record import RECORD_FIXED
from ..digest.window import cells_for_capacity
from ..digest.window import record_size as window_record_size
from ..errors import LedgerFormatError, UsageError
from ..fsio import write_atomic
from ..urls import location
from .layout import LEDGER_FILE
from .reader import MAX_LEDGER_FILE_BYTES
from .remote import ledger_reader

LEDGER_FORMAT = "ledgertool-ledger-v1"
LEDGER_FORMAT_V2 = (
    "ledgertool-ledger-v2"  # sealed segments are the raw record files (docs/ledger-format.md)
)
LEDGER_FORMATS = {1: LEDGER_FORMAT, 2: LEDGER_FORMAT_V2}
# what `capture` creates for a new ledger; v1 with --ledger-format v1 (v1 ledgers keep verifying and
# keep v1 seals when appended to)
DEFAULT_LEDGER_FORMAT = 2
DEFAULT_LEAF_RECORDS = 64  # records per Merkle leaf of a v1 ledger (docs/ledger-format.md: why 64)
DEFAULT_LEAF_RECORDS_V2 = 256  # v2 (docs/adr/0008-leaf-construction.md)
#: Per ledger format version: the leaf size a new ledger takes unless told, and the leaf
#: constructions it may record (BLAKE3 leaf entries are v2's: docs/adr/0013-blake3-leaf-entries.md)
FORMAT_LEAF_DEFAULTS = {1: DEFAULT_LEAF_RECORDS, 2: DEFAULT_LEAF_RECORDS_V2}
FORMAT_LEAF_HASHES = {1: ("sha256",), 2: LEAF_HASHES}
DEFAULT_LINK = "link0"
# a new ledger's leaf construction: sha256 until the deployment CPUs say otherwise
# (docs/adr/0013-blake3-leaf-entries.md: blake3 is 2.5x on AVX-512 Intel, slower on Zen 3)
DEFAULT_LEAF_HASH = "sha256"


TIERS = ("frames", "windows")  # in the order ledger.json lists them


@dataclass(frozen=True)
class WindowParams:
    """The window tier's parameters, fixed per ledger (ledger.json `window`): the window length,
    the capacity asked for and the table's cells (docs/ledger-format.md, "Window records")."""

    window_ns: int
    capacity: int
    cells: int
    digest_size: int

    @property
    def record_size(self) -> int:
        return window_record_size(self.cells, self.digest_size)

    def to_json(self) -> dict:
        return {"window_ns": self.window_ns, "capacity": self.capacity, "cells": self.cells}


@dataclass(frozen=True)
class LedgerHeader:
    """DIR/ledger.json, checked (docs/ledger-format.md#ledgerjson, schemas/ledger.schema.json).

    `digest_key_id` is the genesis digest key id (a digest-key rotation moves later segments to
    another key; `for_digest_key` gives the parameters new segments carry). `sha256` is the
    SHA-256 (hex) of the exact bytes parsed: what new seals sign as `ledger_header_sha256`."""

    ledger_id: str  # 32 lowercase hex
    algorithm: str
    strip: str
    digest_key_id: str  # 32 lowercase hex
    digest_size: int  # bytes
    record_size: int  # bytes: RECORD_FIXED (32) + digest_size
    leaf_records: int  # records per Merkle leaf, a power of two
    sha256: str
    created_at: str | None = None
    format: str = LEDGER_FORMAT
    #: the tiers every capture into the ledger writes: per-frame records ("frames") and window
    #: records ("windows"); fixed at creation, like the window parameters below
    tiers: tuple[str, ...] = ("frames",)
    window: WindowParams | None = None  # with the "windows" tier
    #: the frames tier's leaf construction (engine.LEAF_HASHES); ledger.json without `leaf_hash`
    #: (every ledger written before it existed) is "sha256". Seals bind it through
    #: ledger_header_sha256.
    leaf_hash: str = "sha256"

    @property
    def frames_tier(self) -> bool:
        return "frames" in self.tiers

    @property
    def version(self) -> int:
        """1 or 2: the ledger format, which decides the seal format of every segment."""
        return 2 if self.format == LEDGER_FORMAT_V2 else 1

    def window_view(self) -> LedgerHeader:
        """The parameters of the ledger's window logs: record_size a window record's, one record
        per Merkle leaf (what their segment headers and seals carry; ledger.json is unchanged and
        its SHA-256 the same). LedgerFormatError for a ledger without a window tier."""
        if self.window is None:
            raise LedgerFormatError("the ledger has no window tier (ledger.json has no `window`)")
        return dataclasses.replace(
            self, record_size=self.window.record_size, leaf_records=1, leaf_hash="sha256"
        )

    def for_digest_key(self, key_id: str) -> LedgerHeader:
        """The same parameters with the digest key id of the epoch being written: what segment
        headers and seals carry (ledger.json itself keeps the genesis id)."""
        return dataclasses.replace(self, digest_key_id=key_id)


def create_ledger(
    directory: Path,
    *,
    algorithm: str,
    strip: str,
    digest_key_id: str,
    digest_size: int,
    leaf_records: int | None = None,
    version: int = DEFAULT_LEDGER_FORMAT,
    tiers: tuple[str, ...] = ("frames",),
    window_ns: int | None = None,
    capacity: int | None = None,
    leaf_hash: str = "sha256",
) -> LedgerHeader:
    """Create DIR/ledger.json of ledger format `version` (1 or 2; default DEFAULT_LEDGER_FORMAT, 2,
    what `capture` creates; leaf_records defaults to 64 for v1, 256 for v2) in DIR (which may exist
    but must not hold a ledger) and return its header as `load_ledger` would. LedgerFormatError for
    a bad version or leaf size or a DIR that already holds a ledger; StorageError / FileTypeError as
    fsio.write_atomic. `tiers` with "windows" records `window_ns` and `capacity` (and the cells of
    that capacity) for every later capture. `leaf_hash` "blake3" (v2 only) is recorded in
    ledger.json; "sha256" is said by leaving it out, so such ledger.json reads as before."""
    if version not in LEDGER_FORMATS:
        raise LedgerFormatError(f"ledger format version {version!r} is not one of 1, 2")
    if leaf_records is None:
        leaf_records = FORMAT_LEAF_DEFAULTS[version]
    if leaf_hash not in LEAF_HASHES:
        raise LedgerFormatError(f"leaf hash {leaf_hash!r} is not one of {', '.join(LEAF_HASHES)}")
    if leaf_hash not in FORMAT_LEAF_HASHES[version]:
        raise LedgerFormatError(
            f"{directory}: leaf hash {leaf_hash!r} is for ledger format v2 only (a v1 ledger "
            "keeps sha256 leaves)"
        )
    fsio.make_dirs(directory)
    if os.path.lexists(directory / LEDGER_FILE):
        raise LedgerFormatError(f"{directory}: already holds a ledger")
    if not valid_leaf_records(leaf_records):
        raise LedgerFormatError(
            f"leaf size {leaf_records} is not a power of two in 1..{MERKLE_MAX_LEAF_RECORDS}"
        )
    doc = {
        "format": LEDGER_FORMATS[version],
        "ledger_id": uuid.uuid4().hex,
        "algorithm": algorithm,
        "strip": strip,
        "digest_key_id": digest_key_id,
        "digest_size": digest_size,
        "record_size": RECORD_FIXED + digest_size,
        "leaf_records": leaf_records,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if leaf_hash != "sha256":
        doc["leaf_hash"] = leaf_hash
    if tuple(tiers) != ("frames",):
        doc["tiers"] = [t for t in TIERS if t in tiers]
    if "windows" in tiers:
        doc["window"] = {
            "window_ns": window_ns,
            "capacity": capacity,
            "cells": cells_for_capacity(capacity),
        }
    raw = (json.dumps(doc, indent=1) + "\n").encode()
    write_atomic(directory / LEDGER_FILE, raw, root=directory, what="ledger header")
    return parse_ledger_header(raw, directory / LEDGER_FILE)


def _header_fields(path: str, doc: object) -> None:
    """Check every ledger.json member against its bounds (schemas/ledger.schema.json); raise
    LedgerFormatError naming the file and the field. Integers must be JSON integers, not
    booleans."""

    def bad(name: str, why: str) -> LedgerFormatError:
        return LedgerFormatError(f"{path}: field {name!r} {why}")

    if not isinstance(doc, dict):
        raise LedgerFormatError(f"{path}: not a {LEDGER_FORMAT} header (not a JSON object)")
    if doc.get("format") not in LEDGER_FORMATS.values():
        raise bad(
            "format", f"is {doc.get('format')!r}, not {LEDGER_FORMAT!r} or {LEDGER_FORMAT_V2!r}"
        )
    for name in _HEADER_REQUIRED:
        if name not in doc:
            raise bad(name, "is missing")
    extra = sorted(
        set(doc) - set(_HEADER_REQUIRED) - {"format", "created_at", "tiers", "window", "leaf_hash"}
    )
    if extra:
        raise bad(extra[0], "is not a ledger.json member")
    for name in ("ledger_id", "digest_key_id"):
        if not (type(doc[name]) is str and _HEX32.fullmatch(doc[name])):
            raise bad(name, "must be 32 lowercase hex digits")
    alg = ALGORITHMS.get(doc["algorithm"]) if type(doc["algorithm"]) is str else None
    if alg is None or not alg.ledger_ok:
        raise bad("algorithm", f"{doc['algorithm']!r} is not a ledger algorithm")
    if not (type(doc["strip"]) is str and doc["strip"] in STRIP_MODES):
        raise bad("strip", f"{doc['strip']!r} is not a strip mode ({', '.join(STRIP_MODES)})")
    for name in ("digest_size", "record_size", "leaf_records"):
        if type(doc[name]) is not int:
            raise bad(name, f"must be an integer, not {type(doc[name]).__name__}")
    if doc["digest_size"] != alg.digest_size:
        raise bad(
            "digest_size",
            f"is {doc['digest_size']}; {alg.name} digests are {alg.digest_size} bytes",
        )
    if doc["record_size"] != RECORD_FIXED + doc["digest_size"]:
        raise bad(
            "record_size",
            f"is {doc['record_size']}, not {RECORD_FIXED} + digest_size = "
            f"{RECORD_FIXED + doc['digest_size']}",
        )
    if not valid_leaf_records(doc["leaf_records"]):
        raise bad(
            "leaf_records",
            f"is {doc['leaf_records']}, not a power of two in 1..{MERKLE_MAX_LEAF_RECORDS}",
        )
    # "sha256" is said by leaving the member out: one ledger.json spelling per construction
    leaf_hash = doc.get("leaf_hash")
    if "leaf_hash" in doc and (
        leaf_hash not in LEAF_HASHES[1:] or doc["format"] != LEDGER_FORMAT_V2
    ):
        raise bad(
            "leaf_hash",
            f'is {leaf_hash!r}, not "blake3" in a {LEDGER_FORMAT_V2} '
            "header (sha256 leaves: no leaf_hash member)",
        )
    if "created_at" in doc and type(doc["created_at"]) is not str:
        raise bad("created_at", "must be a string")
    _tier_fields(doc, bad)


def _tier_fields(doc: dict, bad) -> None:
    """`tiers` (a non-empty list of TIERS, in that order, not just ["frames"], which is said by
    leaving it out) and `window`, present exactly when the tiers include "windows"."""
    tiers = doc.get("tiers", ["frames"])
    if (
        type(tiers) is not list
        or not tiers
        or any(t not in TIERS for t in tiers)
        or tiers != [t for t in TIERS if t in tiers]
    ):
        raise bad("tiers", f"is {tiers!r}, not a list of {', '.join(TIERS)} in that order")
    if ("window" in doc) != ("windows" in tiers):
        raise bad("window", "must be given exactly when the tiers include windows")
    win = doc.get("window")
    if win is None:
        return
    if (
        type(win) is not dict
        or set(win) != {"window_ns", "capacity", "cells"}
        or any(type(v) is not int for v in win.values())
    ):
        raise bad("window", "must be an object of the integers window_ns, capacity and cells")
    if not 0 < win["window_ns"] <= 2**53 - 1:
        raise bad("window", f"window_ns {win['window_ns']} is not 1 ns .. 2^53 - 1 ns")
    try:
        cells = cells_for_capacity(win["capacity"])
    except UsageError:
        cells = None
    if cells is None or cells != win["cells"]:
        raise bad("window", f"cells {win['cells']} is not the table of capacity {win['capacity']}")


_HEADER_REQUIRED = (
    "ledger_id",
    "algorithm",
    "strip",
    "digest_key_id",
    "digest_size",
    "record_size",
    "leaf_records",
)
_HEX32 = re.compile(r"[0-9a-f]{32}")


def load_ledger(directory: Path) -> LedgerHeader:
    """Read and check DIR/ledger.json (strict JSON: `canonical.loads_strict`); LedgerFormatError
    (one line naming the file and the field) when DIR is not a ledger or a member is out of bounds
    (docs/ledger-format.md#ledgerjson)."""
    directory = location(directory)
    return parse_ledger_header(
        ledger_reader(directory).read_header_bytes(), directory / LEDGER_FILE
    )


def parse_ledger_header(raw: bytes, path: Path | str) -> LedgerHeader:
    """The checked header of ledger.json bytes (see `load_ledger`; pure, no I/O); `path` names the
    file in the LedgerFormatError raised for anything out of bounds."""
    doc = loads_strict(raw, str(path), MAX_LEDGER_FILE_BYTES)
    _header_fields(str(path), doc)
    return LedgerHeader(
        doc["ledger_id"],
        doc["algorithm"],
        doc["strip"],
        doc["digest_key_id"],
        doc["digest_size"],
        doc["record_size"],
        doc["leaf_records"],
        hashlib.sha256(raw).hexdigest(),
        doc.get("created_at"),
        doc["format"],
        tuple(doc.get("tiers", ["frames"])),
        _window_params(doc),
        doc.get("leaf_hash", "sha256"),
    )


def _window_params(doc: dict) -> WindowParams | None:
    win = doc.get("window")
    if win is None:
        return None
    return WindowParams(win["window_ns"], win["capacity"], win["cells"], doc["digest_size"])
