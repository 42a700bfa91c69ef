"""The capture command line the record-stream tests run (`capture records:...`), and the new,
empty ledger they append to (shared by tests/unit and tests/system)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import cli


def capture_args(
    source: str, lg: Path, keydir: Path, segment_records: int, *extra: str
) -> list[str]:
    """`ledgertool capture SOURCE` into `lg` with the test keys, `segment_records` a segment."""
    return [
        "capture",
        source,
        "--ledger",
        str(lg),
        "--signing-key",
        str(keydir / "signing.key"),
        "--digest-key",
        str(keydir / "digest.key"),
        "--segment-records",
        str(segment_records),
        *extra,
    ]


def new_ledger(tmp_path: Path, keydir: Path, *extra: str) -> tuple[Path, str, bytes]:
    """A new, empty ledger (capture of an empty records file): its directory, ledger id and digest
    master key."""
    empty = tmp_path / "empty.records"
    empty.write_bytes(b"")
    lg = tmp_path / "L"
    r = cli(*capture_args(f"records:{empty}", lg, keydir, 16, *extra))
    assert r.returncode == 0, r.stderr
    ledger_id = json.loads((lg / "ledger.json").read_text())["ledger_id"]
    return lg, ledger_id, bytes.fromhex((keydir / "digest.key").read_text().strip())
