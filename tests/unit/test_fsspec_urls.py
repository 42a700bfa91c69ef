"""Ledgers at fsspec URLs (data where it lives; docs/cluster.md): a real ledger
copied into fsspec's in-process memory filesystem verifies, queries and reconciles exactly as the
local copy does, tampering and strays there are found as locally, and nothing outside the layout
is read. The command line cannot share memory:// across processes, so it is tested with file://.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys

fsspec = pytest.importorskip("fsspec")

from ledgertool.capture.run import capture_file  # noqa: E402
from ledgertool.errors import LedgerFormatError, UsageError  # noqa: E402
from ledgertool.ledger.remote import FsspecLedgerReader, ledger_reader  # noqa: E402
from ledgertool.reconcile.query import run_query  # noqa: E402
from ledgertool.reconcile.recompute import reconcile  # noqa: E402
from ledgertool.urls import UrlPath, location  # noqa: E402
from ledgertool.verify.ledger import verify_ledger  # noqa: E402
from ledgertool.verify.proof import build_proof  # noqa: E402

SEG = 100  # records per segment: sample.pcap's 294 records give segments 0..2


@pytest.fixture(scope="module", params=[1, 2], ids=["v1", "v2"])
def local(tmp_path_factory, keydir, request) -> Path:
    """Two links of sample.pcap, in ledger format v1 (Parquet at seal) and v2 (raw record files)."""
    dk, sk, _ = load_keys(keydir)
    out = tmp_path_factory.mktemp("fsspec") / "ledger"
    for link in ("link0", "link1"):
        capture_file(
            SAMPLES / "sample.pcap",
            out,
            digest_key=dk,
            signing_key=sk,
            link=link,
            segment_records=SEG,
            ledger_format=request.param,
        )
    return out


@pytest.fixture()
def mem(local, request) -> str:
    """A copy of `local` in the memory filesystem, removed after the test."""
    fs = fsspec.filesystem("memory")
    root = "/" + "".join(c if c.isalnum() else "_" for c in request.node.name)
    for f in sorted(p for p in local.rglob("*") if p.is_file()):
        fs.pipe_file(f"{root}/{f.relative_to(local).as_posix()}", f.read_bytes())
    yield f"memory://{root.lstrip('/')}"
    fs.rm(root, recursive=True)


def _same(report: dict, a: str, b: str) -> dict:
    """`report` with ledger location `a` spelled `b` (the only difference two copies may show)."""
    return json.loads(json.dumps(report).replace(a, b))


def test_memory_ledger_verifies_queries_and_reconciles_as_local(local, mem, keydir):
    dk, _, trust = load_keys(keydir)
    assert isinstance(ledger_reader(mem), FsspecLedgerReader)
    here, there = verify_ledger(local, trust), verify_ledger(mem, trust)
    assert here.ok and there.ok and there.segments == 6 and there.records == 588
    assert _same(there.to_json(), mem, str(local)) == here.to_json()
    sql = (
        "SELECT link, count(*), sum(wire_len), min(seq), max(seq) FROM records GROUP BY link "
        "ORDER BY link"
    )
    q_here, q_there = run_query(local, sql, trust), run_query(mem, sql, trust)
    assert q_there.rows == q_here.rows and q_there.rows[0][1] == 294
    r_here = reconcile(SAMPLES / "sample.pcap", local, dk, trust=trust, links=["link1"])
    r_there = reconcile(SAMPLES / "sample.pcap", mem, dk, trust=trust, links=["link1"])
    assert (r_there.matched, r_there.ledger_only, r_there.capture_only) == (294, 0, 0)
    assert _same(r_there.to_json() | {"elapsed_s": 0}, mem, str(local)) == r_here.to_json() | {
        "elapsed_s": 0
    }


def test_memory_ledger_proves_as_local(local, mem):
    here = build_proof(local, seq=150, link="link0").to_json()
    there = build_proof(mem, seq=150, link="link0").to_json()
    assert there == here and there["segment"] == 1 and there["record"]["seq"] == "150"
    assert there["checkpoint"]["tree_size"] == 3


def test_tampered_memory_copy_gives_the_local_problem(local, mem, keydir, tmp_path):
    trust = load_keys(keydir)[2]
    fs = fsspec.filesystem("memory")
    rec = next(
        f"link=link0/{p.name}"
        for p in (local / "link=link0").glob("seg-00000001.*")
        if p.suffix in (".rec", ".parquet")
    )
    path = f"{mem[len('memory://') :]}/{rec}".join(["/", ""])
    data = bytearray(fs.cat_file(path))
    data[300] ^= 1
    fs.pipe_file(path, bytes(data))
    copy = tmp_path / "ledger"
    for f in sorted(p for p in local.rglob("*") if p.is_file()):
        (copy / f.relative_to(local)).parent.mkdir(parents=True, exist_ok=True)
        (copy / f.relative_to(local)).write_bytes(f.read_bytes())
    (copy / rec).write_bytes(bytes(data))
    here, there = verify_ledger(copy, trust), verify_ledger(mem, trust)
    assert not there.ok and [(p.kind, p.link, p.segment) for p in there.problems][0][1:] == (
        "link0",
        1,
    )
    assert _same(there.to_json(), mem, str(copy)) == here.to_json()


def test_strays_in_memory_are_reported_and_never_read(mem, keydir, monkeypatch):
    trust = load_keys(keydir)[2]
    fs = fsspec.filesystem("memory")
    root = mem[len("memory://") :]
    fs.pipe_file(f"/{root}/link=link0/notes.txt", b"x")
    fs.pipe_file(f"/{root}/link=link0/seg-0000000\u0661.seal.json", b"{}")  # ARABIC-INDIC DIGIT ONE
    fs.pipe_file(f"/{root}/link=bad name/seg-00000000.seal.json", b"{}")
    opened: list[str] = []
    real_open = type(fs)._open
    monkeypatch.setattr(
        type(fs),
        "_open",
        lambda self, path, *a, **k: opened.append(path) or real_open(self, path, *a, **k),
    )
    res = verify_ledger(mem, trust)
    found = sorted((w.kind, w.detail) for w in res.warnings + res.problems)
    assert [k for k, _ in found] == ["segment_name_shadow", "stray_file", "stray_file"], found
    assert found[0][1].startswith(f"{mem}/link=link0/seg-0000000\u0661.seal.json: ")
    assert found[1][1].startswith(f"{mem}/link=bad name: ")
    assert found[2][1].startswith(f"{mem}/link=link0/notes.txt: ")
    assert not res.ok and res.segments == 6
    assert not any("notes.txt" in p or "\u0661" in p or "bad name" in p for p in opened)
    # the real files were read here
    assert any(p.endswith("seg-00000001.seal.json") for p in opened)


def test_missing_and_unknown_locations_are_one_line_errors():
    with pytest.raises(
        LedgerFormatError, match=r"^memory://no-such-ledger: no such ledger directory$"
    ):
        verify_ledger("memory://no-such-ledger", None)
    try:
        import s3fs  # noqa: F401
    except ImportError:
        with pytest.raises(
            UsageError, match=r"^s3://bucket/ledger: s3:// needs s3fs: pip install s3fs$"
        ):
            location("s3://bucket/ledger")
    with pytest.raises(UsageError, match="knows no filesystem for nosuch://"):
        location("nosuch://x")
    assert location("file:///tmp/a%20b") == Path("/tmp/a b")
    assert location(Path("memory://x")) == Path("memory:/x")  # a Path is always local
    assert location("memory://a/b") == UrlPath("memory://a/b", "/a/b", "memory")


def test_cli_file_url_is_the_local_path(local, keydir):
    trust = keydir / "verifier.pub"
    here = cli("verify", local, "--trust", trust, "--json")
    there = cli("verify", f"file://{local}", "--trust", trust, "--json")
    assert here.returncode == there.returncode == 0
    assert json.loads(there.stdout) == json.loads(here.stdout)
    missing = cli("verify", "memory://nothing-here", "--trust", trust)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "ledgertool: error: memory://nothing-here: no such ledger directory"
    ]


@pytest.fixture()
def mem_captures(request):
    """sample.pcap and a gzip copy of it in the memory filesystem."""
    import gzip

    fs = fsspec.filesystem("memory")
    root = "/cap-" + "".join(c if c.isalnum() else "_" for c in request.node.name)
    raw = (SAMPLES / "sample.pcap").read_bytes()
    fs.pipe_file(f"{root}/sample.pcap", raw)
    fs.pipe_file(f"{root}/sample.pcap.gz", gzip.compress(raw))
    yield f"memory://{root.lstrip('/')}"
    fs.rm(root, recursive=True)


def test_capture_url_streams_like_the_local_file(local, mem, mem_captures, keydir):
    dk, _, trust = load_keys(keydir)
    here = reconcile(SAMPLES / "sample.pcap", local, dk, trust=trust, links=["link0"])
    for name in ("sample.pcap", "sample.pcap.gz"):
        there = reconcile(f"{mem_captures}/{name}", mem, dk, trust=trust, links=["link0"])
        assert (there.frames, there.matched, there.ledger_only, there.capture_only) == (
            294,
            294,
            0,
            0,
        )
        assert (
            there.per_second == here.per_second
            and there.capture.to_json() == here.capture.to_json()
        )


def test_capture_url_errors_are_one_line(mem_captures, monkeypatch):
    from fsspec.implementations.memory import MemoryFile

    from ledgertool.errors import CaptureFormatError
    from ledgertool.source import open_source

    with pytest.raises(CaptureFormatError, match=r"^memory://nothing/here.pcap: no such capture$"):
        open_source("memory://nothing/here.pcap")
    with pytest.raises(CaptureFormatError, match=r": is a directory, not a capture file$"):
        open_source(mem_captures)
    real = MemoryFile.read
    calls = []

    def failing(self, n=-1):
        calls.append(n)
        if len(calls) > 1:
            raise ConnectionResetError("connection reset by peer")
        return real(self, n)

    monkeypatch.setattr(MemoryFile, "read", failing)
    # one chunk (64 KiB) arrives, then the error
    with open_source(f"{mem_captures}/sample.pcap") as reader:
        with pytest.raises(
            CaptureFormatError, match=r"sample.pcap: read error at byte 65536: connection reset"
        ):
            sum(1 for _ in reader.frames())


def test_cli_recompute_with_file_urls(local, keydir):
    args = (
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--link",
        "link0",
        "--json",
    )
    here = cli("recompute", SAMPLES / "sample.pcap", "--ledger", local, *args)
    there = cli(
        "recompute", f"file://{SAMPLES / 'sample.pcap'}", "--ledger", f"file://{local}", *args
    )
    assert here.returncode == there.returncode == 0, there.stderr
    a, b = json.loads(here.stdout), json.loads(there.stdout)
    assert b["source"] == f"file://{SAMPLES / 'sample.pcap'}" and b["ledger"] == str(local)
    drop = ("source", "elapsed_s", "ledger")
    assert {k: v for k, v in b.items() if k not in drop} == {
        k: v for k, v in a.items() if k not in drop
    }
    assert b["matched"] == 294
