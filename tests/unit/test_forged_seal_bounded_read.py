"""A seal's numbers are the storage holder's until its signatures verify (and, without --trust,
always): a forged seal claiming 2^40 records (a v1 seal also 2^50 `parquet_bytes`) beside a
sparse Parquet file larger than any segment can make must not size the read. The records file is
read at most to what a segment of the format's most records (MAX_SEGMENT_RECORDS) can make
(checks.most_records_file_bytes): a larger one is refused by its size, before any byte is read;
the seal's own findings (bad_signature under --trust) are still made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys

from ledgertool.errors import LedgerFormatError
from ledgertool.ledger.compact import compact_ledger
from ledgertool.ledger.reader import LedgerReader
from ledgertool.ledger.segment import HEADER_SIZE, MAX_SEGMENT_RECORDS
from ledgertool.verify.checks import most_records_file_bytes
from ledgertool.verify.ledger import verify_ledger

FORGED = 1 << 40


@pytest.fixture(params=["v1", "v2-compacted"])
def parquet_ledger(request, built_ledger, tmp_path) -> Path:
    """The sample capture (3 segments of 100 records) whose segments are Parquet files: a v1
    ledger's, or a v2 ledger's after `compact`."""
    v1 = {"ledger_format": 1} if request.param == "v1" else {}
    built = built_ledger(SAMPLES / "sample.pcapng", segment_records=100, **v1)
    ledger = built.copy_to(tmp_path / "L")
    if not v1:
        compact_ledger(ledger)
    return ledger


def _seg(ledger: Path, index: int, kind: str) -> Path:
    return ledger / "link=link0" / f"seg-{index:08d}.{kind}"


def _forge(ledger: Path) -> int:
    """Segment 1's seal made to claim 2^40 records (v1: and 2^50 Parquet bytes), its Parquet file
    a hole one byte larger than the format's bound; the bound returned."""
    seal = _seg(ledger, 1, "seal.json")
    doc = json.loads(seal.read_bytes())
    doc["records"] = FORGED
    doc["last_seq"] = str(int(doc["first_seq"]) + FORGED - 1)
    if "parquet_bytes" in doc:
        doc["parquet_bytes"] = 1 << 50
    seal.write_text(json.dumps(doc))
    bound = most_records_file_bytes(doc["record_size"])
    try:
        with open(_seg(ledger, 1, "parquet"), "r+b") as f:
            f.truncate(bound + 1)
    except OSError as e:  # a file system without files this large
        pytest.skip(f"cannot make a sparse file of {bound + 1} bytes: {e}")
    return bound


@pytest.fixture()
def reads(monkeypatch):
    """Every segment file read: (name, limit, size). A read without a limit below the file's size
    would be the whole file (here some GiB): it is recorded and refused instead, so the test
    stays small whichever code it runs against."""
    seen = []
    real = LedgerReader.read_segment_file

    def spy(self, link, index, kind, limit=None):
        path = self.segment_path(link, index, kind)
        size = path.stat().st_size
        seen.append((path.name, limit, size))
        if size > 64 << 20 and (limit is None or limit >= size):
            raise LedgerFormatError(f"{path}: the test refused to read {size} bytes whole")
        return real(self, link, index, kind, limit)

    monkeypatch.setattr(LedgerReader, "read_segment_file", spy)
    return seen


@pytest.mark.parametrize("trusted", [True, False], ids=["trust", "keyless"])
def test_a_forged_count_does_not_size_the_parquet_read(parquet_ledger, keydir, reads, trusted):
    bound = _forge(parquet_ledger)
    assert bound == HEADER_SIZE + MAX_SEGMENT_RECORDS * (48 + 36) + (1 << 20)  # 5.25 GiB
    res = verify_ledger(parquet_ledger, load_keys(keydir)[2] if trusted else None)
    big = [r for r in reads if r[0] == "seg-00000001.parquet"]
    assert big == [("seg-00000001.parquet", bound, bound + 1)], big
    found = {(p.kind.value, p.segment) for p in res.problems}
    assert ("bad_signature", 1) in found or not trusted, found
    refused = [p for p in res.problems if p.segment == 1 and "larger than" in p.detail]
    assert len(refused) == 1 and f"{bound + 1} bytes, larger than" in refused[0].detail, refused
    assert f"({bound})" in refused[0].detail
    assert not any("the test refused" in p.detail for p in res.problems)


def test_the_cli_names_the_file_and_exits_1(parquet_ledger, keydir, reads):
    bound = _forge(parquet_ledger)
    r = cli("verify", parquet_ledger, "--trust", keydir / "verifier.pub")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r
    assert f"seg-00000001.parquet: {bound + 1} bytes, larger than" in r.stdout + r.stderr


def test_a_genuine_seal_still_bounds_the_read_by_its_own_count(parquet_ledger, keydir, reads):
    """Unchanged for the seals that are what they claim: the limit is what the seal's records can
    make, far below the format's bound, and the ledger verifies."""
    res = verify_ledger(parquet_ledger, load_keys(keydir)[2])
    assert res.ok and res.records == 294, res.problems
    limits = [limit for name, limit, _ in reads if name.endswith(".parquet")]
    assert len(limits) == 3 and all(lim < (2 << 20) for lim in limits), limits
