"""Every path inside a ledger directory, spelled once (docs/ledger-format.md, "Directory layout").

    DIR/ledger.json                          the ledger header
    DIR/.lock                                the writer lock
    DIR/checkpoint                           the link's checkpoint, while the ledger has one link
    DIR/rotations/rotation-NNNN.json         key rotation statements
    DIR/pruned/prune-NNNN.json               prune statements (`ledgertool prune`)
    DIR/set-aside/link=NAME/seg-NNNNNNNN.*   open segments (or their tails) recovery could not seal
    DIR/link=NAME/                           one hive-style partition per link
    DIR/link=NAME/checkpoint                 the link's latest signed checkpoint
    DIR/link=NAME/seg-NNNNNNNN.open          an open segment (until it is sealed)
    DIR/link=NAME/seg-NNNNNNNN.rec           sealed records, v2: the raw file (until compacted)
    DIR/link=NAME/seg-NNNNNNNN.parquet       sealed records, Parquet (v1; v2 after compaction)
    DIR/link=NAME/seg-NNNNNNNN.leaves        their Merkle leaf hashes (sidecar)
    DIR/link=NAME/seg-NNNNNNNN.seal.json     the signed seal document
    DIR/windows=NAME/                        the window log of link NAME: the same files (seg-N.*,
                                             checkpoint), its records window records

Pure functions of names (no I/O), so they can be table-tested; every reader and writer takes its
paths from here. Names read back from storage are parsed as ASCII only.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import LedgerFormatError

LEDGER_FILE = "ledger.json"
LOCK_FILE = ".lock"
CHECKPOINT_FILE = "checkpoint"
ROTATIONS_DIR = "rotations"
SET_ASIDE_DIR = "set-aside"
PRUNED_DIR = "pruned"
LINK_PREFIX = "link="
#: the window log of link NAME is the log named "windows=NAME": never a link name ("=" is not a
#: link name character), so its directory, seal chain (genesis), checkpoint origin and device
#: state are its own, apart from the link's per-frame log
WINDOWS_PREFIX = "windows="

#: Segment file kinds, by suffix.
OPEN, PARQUET, RECORDS, LEAVES, SEAL = "open", "parquet", "rec", "leaves", "seal.json"

# [0-9]: ASCII only
_SEGMENT_NAME = re.compile(r"seg-([0-9]{8})\.(open|parquet|rec|leaves|seal\.json)")
_LINK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")  # ASCII only
_ROTATION_NAME = re.compile(r"rotation-([0-9]{4})\.json")
_PRUNE_NAME = re.compile(r"prune-([0-9]{4})\.json")


def check_link_name(link: str) -> str:
    """`link` when it is a valid link name (1-32 of A-Z a-z 0-9 . _ -, starting with a letter or
    digit), else LedgerFormatError."""
    if not isinstance(link, str) or not _LINK_NAME.fullmatch(link):
        raise LedgerFormatError(f"invalid link name {link!r}: use 1-32 of A-Z a-z 0-9 . _ -")
    return link


def is_link_name(name: str) -> bool:
    return bool(_LINK_NAME.fullmatch(name))


def window_log(link: str) -> str:
    """The name of link `link`'s window log ('windows=link0'): the `link` a window segment's seal,
    chain and checkpoint name, and its directory's name."""
    return f"{WINDOWS_PREFIX}{check_link_name(link)}"


def window_log_link(log: str) -> str | None:
    """The link of a window log's name ('windows=link0' -> 'link0'); None for a link's own name."""
    if log.startswith(WINDOWS_PREFIX) and is_link_name(log[len(WINDOWS_PREFIX) :]):
        return log[len(WINDOWS_PREFIX) :]
    return None


def log_dir_name(log: str) -> str:
    """'link=NAME' for a link's per-frame log, 'windows=NAME' for its window log."""
    return log if window_log_link(log) is not None else f"{LINK_PREFIX}{log}"


def link_dir(ledger: Path, link: str) -> Path:
    """Hive-style partition directory of one link (DIR/link=NAME), or of a window log
    (DIR/windows=NAME for `window_log(NAME)`)."""
    return Path(ledger) / log_dir_name(link)


def segment_stem(index: int) -> str:
    return f"seg-{index:08d}"


def segment_name(index: int, kind: str) -> str:
    """'seg-00000003.seal.json' for (3, SEAL)."""
    return f"{segment_stem(index)}.{kind}"


def segment_path(ledger: Path, link: str, index: int, kind: str) -> Path:
    return link_dir(ledger, link) / segment_name(index, kind)


def open_segment_path(ledger: Path, link: str, index: int) -> Path:
    return segment_path(ledger, link, index, OPEN)


def parquet_path(ledger: Path, link: str, index: int) -> Path:
    return segment_path(ledger, link, index, PARQUET)


def records_path(ledger: Path, link: str, index: int) -> Path:
    """A v2 ledger's sealed records: the closed open segment, renamed (docs/ledger-format.md)."""
    return segment_path(ledger, link, index, RECORDS)


def seal_path(ledger: Path, link: str, index: int) -> Path:
    return segment_path(ledger, link, index, SEAL)


def leaves_path(ledger: Path, link: str, index: int) -> Path:
    """Sidecar of a sealed segment's Merkle leaf hashes (32 raw bytes each, in leaf order). It is
    authenticated by the seal's merkle_root, not by its own signature; verify uses it to name the
    leaf block (and so the records) that changed."""
    return segment_path(ledger, link, index, LEAVES)


def checkpoint_path(ledger: Path, link: str) -> Path:
    """The link's stored checkpoint: DIR/link=NAME/checkpoint."""
    return link_dir(ledger, link) / CHECKPOINT_FILE


def top_checkpoint_path(ledger: Path) -> Path:
    """DIR/checkpoint: the same note while the ledger has one link."""
    return Path(ledger) / CHECKPOINT_FILE


def rotations_dir(ledger: Path) -> Path:
    return Path(ledger) / ROTATIONS_DIR


def rotation_path(ledger: Path, number: int) -> Path:
    """DIR/rotations/rotation-NNNN.json, numbered from 1."""
    return rotations_dir(ledger) / f"rotation-{number:04d}.json"


def set_aside_dir(ledger: Path, link: str) -> Path:
    """Where recovery moves what it cannot seal of a link's open segments: DIR/set-aside/link=NAME
    (DIR/set-aside/windows=NAME for a window log's)."""
    return Path(ledger) / SET_ASIDE_DIR / log_dir_name(link)


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """'seg-00000003.seal.json' -> (3, 'seal.json'); None for any other name. ASCII digits only."""
    m = _SEGMENT_NAME.fullmatch(name)
    return (int(m.group(1)), m.group(2)) if m else None


def prune_path(ledger: Path, number: int) -> Path:
    """DIR/pruned/prune-NNNN.json, numbered from 1: the signed statements of `ledgertool prune`."""
    return Path(ledger) / PRUNED_DIR / f"prune-{number:04d}.json"


def parse_prune_name(name: str) -> int | None:
    """'prune-0002.json' -> 2; None for any other name. ASCII digits only."""
    m = _PRUNE_NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def parse_rotation_name(name: str) -> int | None:
    """'rotation-0002.json' -> 2; None for any other name. ASCII digits only."""
    m = _ROTATION_NAME.fullmatch(name)
    return int(m.group(1)) if m else None
