"""A ledger at an fsspec URL is read as the local one is: a records file is read only up to what
its seal allows (never whole into memory when the storage holder grew it), and a seal the listing
names but the store does not hold is the finding of a missing seal, not an error."""

from __future__ import annotations

import pytest
from conftest import SAMPLES, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.verify.ledger import verify_ledger

fsspec = pytest.importorskip("fsspec")

from ledgertool.ledger.remote import FsspecLedgerReader  # noqa: E402


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def mem(tmp_path, keydir, request):
    dk, sk, _ = load_keys(keydir)
    local = tmp_path / "L"
    capture_file(
        SAMPLES / "sample.pcap",
        local,
        digest_key=dk,
        signing_key=sk,
        segment_records=100,
        ledger_format=request.param,
    )
    fs = fsspec.filesystem("memory")
    root = "/" + "".join(c if c.isalnum() else "_" for c in request.node.name)
    for f in sorted(p for p in local.rglob("*") if p.is_file()):
        fs.pipe_file(f"{root}/{f.relative_to(local).as_posix()}", f.read_bytes())
    yield fs, root, request.param
    fs.rm(root, recursive=True)


def test_remote_records_file_grown_past_its_seal_is_not_read_whole(mem, keydir, monkeypatch):
    fs, root, version = mem
    name = f"{root}/link=link0/seg-00000001.{'rec' if version == 2 else 'parquet'}"
    grown = 64 << 20
    fs.pipe_file(name, fs.cat_file(name) + bytes(grown))
    asked = []
    real_read = FsspecLedgerReader._read

    def spy(self, path, limit, what):
        if path.path == name:
            asked.append(limit)
        return real_read(self, path, limit, what)

    monkeypatch.setattr(FsspecLedgerReader, "_read", spy)
    res = verify_ledger(f"memory://{root.lstrip('/')}", load_keys(keydir)[2])
    assert asked and all(a is not None and a < 2 << 20 for a in asked), asked
    kinds = [(p.kind.value, p.segment) for p in res.problems]
    assert kinds == [("records_unreadable" if version == 2 else "parquet_unreadable", 1)], (
        res.problems
    )
    assert "larger than" in res.problems[0].detail


def test_remote_seal_listed_but_absent_is_a_missing_seal_finding(mem, keydir, monkeypatch):
    fs, root, _ = mem
    seal = f"{root}/link=link0/seg-00000001.seal.json"
    size = len(fs.cat_file(seal))
    fs.rm(seal)
    real_ls = type(fs).ls

    def ls(self, path, detail=True, **kw):  # the store's listing still names it
        out = list(real_ls(self, path, detail=detail, **kw))
        if path.rstrip("/").endswith("link=link0"):
            out.append({"name": seal, "type": "file", "size": size})
        return out

    monkeypatch.setattr(type(fs), "ls", ls)
    res = verify_ledger(f"memory://{root.lstrip('/')}", load_keys(keydir)[2])
    first = res.problems[0]
    assert (first.kind.value, first.segment) == ("segment_missing", 1)
    assert first.detail == f"segment 1 has no seal: memory:/{seal} was listed but is not there"
