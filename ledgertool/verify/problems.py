"""Typed verify findings: a `Kind` per finding (the JSON `kind` values of
schemas/verify-report.schema.json, unchanged), grouped as docs/cli.md groups them, and the
`Problem` value that carries where it was found (link, segment, record) and its English detail.

Callers classify findings by `Kind` and `Group`, never by their text."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Group(enum.Enum):
    """The groups of docs/cli.md's problem-kind table, and the warnings (never a failure)."""

    SEAL_AND_FILES = "seal and files"
    SIGNATURES_AND_KEYS = "signatures and keys"
    CHAIN_AND_SEGMENTS = "chain and segments"
    RECORDS = "records"
    CHECKPOINTS = "checkpoints"
    WARNING = "warning"


class Kind(enum.StrEnum):
    """A verify finding's kind; its value is the JSON `kind` string. A Kind equals, hashes and
    formats as that string, so reports and sets of strings keep working."""

    __hash__ = str.__hash__  # Enum hashes by member name; a Kind must hash as its value does

    # seal and files
    SEAL_UNREADABLE = "seal_unreadable"
    SEAL_MALFORMED = "seal_malformed"
    FOREIGN_SEAL = "foreign_seal"
    SEAL_MISPLACED = "seal_misplaced"
    PARAMETER_MISMATCH = "parameter_mismatch"
    LEDGER_HEADER_MISMATCH = "ledger_header_mismatch"
    # a .parquet or a v2 .rec without a seal (the name is the report contract)
    UNSEALED_PARQUET = "unsealed_parquet"
    PARQUET_MISSING = "parquet_missing"
    PARQUET_HASH_MISMATCH = "parquet_hash_mismatch"
    PARQUET_UNREADABLE = "parquet_unreadable"
    RECORDS_MISSING = "records_missing"
    RECORDS_UNREADABLE = "records_unreadable"
    RECORDS_HEADER_MISMATCH = "records_header_mismatch"
    SEGMENT_NAME_SHADOW = "segment_name_shadow"
    WINDOWS_MISSING = "windows_missing"  # a link without the window log ledger.json's tiers promise
    # signatures and keys
    BAD_SIGNATURE = "bad_signature"
    SIGNATURE_MISSING = "signature_missing"
    ROTATION_INVALID = "rotation_invalid"
    DIGEST_KEY_MISMATCH = "digest_key_mismatch"
    PRUNE_INVALID = "prune_invalid"  # a prune statement that does not verify or bind to the seals
    # chain and segments
    CHAIN_BROKEN = "chain_broken"
    SEGMENT_MISSING = "segment_missing"
    SEGMENT_DUPLICATED = "segment_duplicated"
    SEQUENCE_GAP = "sequence_gap"
    SEQUENCE_OVERLAP = "sequence_overlap"
    # records
    COUNT_MISMATCH = "count_mismatch"
    RANGE_MISMATCH = "range_mismatch"
    TIMESTAMP_MISMATCH = "timestamp_mismatch"
    DROPS_MISMATCH = "drops_mismatch"
    MERKLE_MISMATCH = "merkle_mismatch"
    RECORD_MISSING = "record_missing"
    RECORD_DUPLICATED = "record_duplicated"
    RECORD_REORDERED = "record_reordered"
    # checkpoints
    CHECKPOINT_BAD_SIGNATURE = "checkpoint_bad_signature"
    CHECKPOINT_NOT_EXTENDED = "checkpoint_not_extended"
    CHECKPOINT_MISMATCH = "checkpoint_mismatch"
    CHECKPOINT_UNREADABLE = "checkpoint_unreadable"
    CHECKPOINT_MISSING = "checkpoint_missing"
    CHECKPOINT_UNWITNESSED = "checkpoint_unwitnessed"
    # warnings
    OPEN_SEGMENT = "open_segment"
    TORN_SEGMENT = "torn_segment"
    TEMP_FILE = "temp_file"
    STRAY_FILE = "stray_file"
    SIGNATURES_UNCHECKED = "signatures_unchecked"
    ALGORITHM_CAVEAT = "algorithm_caveat"
    COMPACTION_LEFTOVER = "compaction_leftover"
    PRUNED_UNCOVERED = "pruned_uncovered"  # records pruned (--force) the window tier did not hold

    @property
    def group(self) -> Group:
        return _GROUPS[self]

    @property
    def is_warning(self) -> bool:
        return _GROUPS[self] is Group.WARNING


_GROUPS: dict[Kind, Group] = {
    **dict.fromkeys(
        (
            Kind.SEAL_UNREADABLE,
            Kind.SEAL_MALFORMED,
            Kind.FOREIGN_SEAL,
            Kind.SEAL_MISPLACED,
            Kind.PARAMETER_MISMATCH,
            Kind.LEDGER_HEADER_MISMATCH,
            Kind.UNSEALED_PARQUET,
            Kind.PARQUET_MISSING,
            Kind.PARQUET_HASH_MISMATCH,
            Kind.PARQUET_UNREADABLE,
            Kind.RECORDS_MISSING,
            Kind.RECORDS_UNREADABLE,
            Kind.RECORDS_HEADER_MISMATCH,
            Kind.SEGMENT_NAME_SHADOW,
            Kind.WINDOWS_MISSING,
        ),
        Group.SEAL_AND_FILES,
    ),
    **dict.fromkeys(
        (
            Kind.BAD_SIGNATURE,
            Kind.SIGNATURE_MISSING,
            Kind.ROTATION_INVALID,
            Kind.DIGEST_KEY_MISMATCH,
            Kind.PRUNE_INVALID,
        ),
        Group.SIGNATURES_AND_KEYS,
    ),
    **dict.fromkeys(
        (
            Kind.CHAIN_BROKEN,
            Kind.SEGMENT_MISSING,
            Kind.SEGMENT_DUPLICATED,
            Kind.SEQUENCE_GAP,
            Kind.SEQUENCE_OVERLAP,
        ),
        Group.CHAIN_AND_SEGMENTS,
    ),
    **dict.fromkeys(
        (
            Kind.COUNT_MISMATCH,
            Kind.RANGE_MISMATCH,
            Kind.TIMESTAMP_MISMATCH,
            Kind.DROPS_MISMATCH,
            Kind.MERKLE_MISMATCH,
            Kind.RECORD_MISSING,
            Kind.RECORD_DUPLICATED,
            Kind.RECORD_REORDERED,
        ),
        Group.RECORDS,
    ),
    **dict.fromkeys(
        (
            Kind.CHECKPOINT_BAD_SIGNATURE,
            Kind.CHECKPOINT_NOT_EXTENDED,
            Kind.CHECKPOINT_MISMATCH,
            Kind.CHECKPOINT_UNREADABLE,
            Kind.CHECKPOINT_MISSING,
            Kind.CHECKPOINT_UNWITNESSED,
        ),
        Group.CHECKPOINTS,
    ),
    **dict.fromkeys(
        (
            Kind.OPEN_SEGMENT,
            Kind.TORN_SEGMENT,
            Kind.TEMP_FILE,
            Kind.STRAY_FILE,
            Kind.SIGNATURES_UNCHECKED,
            Kind.ALGORITHM_CAVEAT,
            Kind.COMPACTION_LEFTOVER,
            Kind.PRUNED_UNCOVERED,
        ),
        Group.WARNING,
    ),
}
assert len(_GROUPS) == len(Kind), "every Kind has a group"


@dataclass(frozen=True)
class Problem:
    """One finding: its kind, where (segment index, link, record index within the segment; None
    where none applies) and the English detail the text and JSON reports print. A warning is a
    Problem whose kind `is_warning`. Picklable."""

    kind: Kind
    segment: int | None
    detail: str
    link: str | None = None
    record: int | None = None  # index of the record within its segment, where one is named

    def __post_init__(self) -> None:
        # a typo in a kind fails here, not in a report
        object.__setattr__(self, "kind", Kind(self.kind))

    @property
    def group(self) -> Group:
        return self.kind.group

    def to_json(self) -> dict:
        return {
            "kind": self.kind.value,
            "segment": self.segment,
            "record": self.record,
            "link": self.link,
            "detail": self.detail,
        }
