"""The ledger's roots and proofs check with Go's golang.org/x/mod/sumdb/tlog (built offline from
GOPATH; skipped without Go)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import rfc8785
from conftest import SAMPLES, TESTS, cli, load_keys

from ledgertool.capture.run import capture_file

RECORD = struct.Struct("<QqIIHHI")


def segment_records(ledger: Path, seal: dict) -> list[bytes]:
    """The segment's raw records as docs/ledger-format.md says: rebuilt from the Parquet columns
    (the v1 seal names the file), or the blocks of the raw record file seg-N.rec (v2) unframed:
    after its 256-byte header, each block is u32 count, count records, a 32-byte MAC."""
    size = seal["record_size"]
    if "parquet_file" in seal:
        return [RECORD.pack(r["seq"], r["ts_ns"], r["wire_len"], r["cap_len"], r["flags"], r["linktype"], r["aux"])
                + r["digest"] for r in pq.read_table(ledger / "link=link0" / seal["parquet_file"]).to_pylist()]
    data = (ledger / "link=link0" / f"seg-{seal['segment']:08d}.rec").read_bytes()
    assert data[:8] == b"LTSEGv2\n"
    out, pos = [], 256
    while pos < len(data):
        (count,) = struct.unpack_from("<I", data, pos)
        out += [data[pos + 4 + k * size:pos + 4 + (k + 1) * size] for k in range(count)]
        pos += 4 + count * size + 32
    assert pos == len(data)
    return out


def seal_hash(seal: dict) -> bytes:
    """SHA-256 of the RFC 8785 JSON of the seal without its signatures (docs/ledger-format.md)."""
    return hashlib.sha256(rfc8785.dumps({k: v for k, v in seal.items() if k != "signatures"})).digest()


def seals(ledger: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(ledger.glob("link=link0/seg-*.seal.json"))]


def note_tree(note: bytes) -> tuple[int, bytes]:
    """(tree size, root hash) of a c2sp.org/tlog-checkpoint note: lines 2 and 3 of its body."""
    lines = note.decode().split("\n")
    return int(lines[1]), base64.b64decode(lines[2], validate=True)


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def ledger(request, tmp_path, built_ledger) -> Path:
    """Three segments (100, 100, 94 records), leaf blocks of 8: a short last block in each; of
    ledger format v1 (Parquet) or v2 (raw record files)."""
    out = built_ledger(SAMPLES / "sample.pcapng", segment_records=100, leaf_records=8,
                       ledger_format=request.param).copy_to(tmp_path / "L")
    assert json.loads((out / "ledger.json").read_text())["format"] == f"ledgertool-ledger-v{request.param}"
    return out


@pytest.fixture(scope="module")
def seven(tmp_path_factory, keydir) -> tuple[Path, dict[int, Path]]:
    """A ledger after each of seven captures of one segment, and the checkpoint each capture
    stored: tree sizes 1..7, powers of two and not. A new ledger's default format (v2)."""
    dk, sk, _ = load_keys(keydir)
    d = tmp_path_factory.mktemp("seven")
    led, notes = d / "L", {}
    for _ in range(7):
        capture_file(SAMPLES / "sample.pcapng", led, digest_key=dk, signing_key=sk, segment_records=1000)
        note = (led / "checkpoint").read_bytes()
        size, _ = note_tree(note)
        notes[size] = d / f"cp{size}"
        notes[size].write_bytes(note)
    assert sorted(notes) == list(range(1, 8))
    return led, notes


def consistency(led: Path, old: Path, new: Path, pub: Path) -> dict:
    r = cli("check-consistency", old, new, "--ledger", led, "--trust", pub, "--json")
    assert r.returncode == 0, (old, new, r.stdout, r.stderr)
    return json.loads(r.stdout)


GOPATH = Path("/usr/share/gocode")  # Debian's golang-golang-x-mod-dev


TLOG = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb" / "tlog"


@pytest.fixture(scope="module")
def tlog_check(tmp_path_factory) -> Path:
    if not shutil.which("go") or not TLOG.is_dir():
        pytest.skip(f"Go toolchain or {TLOG} not installed (.ci/run installs golang-go and "
                    "golang-golang-x-mod-dev)")
    d = tmp_path_factory.mktemp("tlog")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(GOPATH), "GOCACHE": str(d / "cache")}
    exe = d / "tlog_check"
    r = subprocess.run(["go", "build", "-o", str(exe), str(TESTS / "tlog_check.go")],
                       check=False, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


def test_go_tlog_accepts_the_ledgers_roots_and_proofs(tlog_check, seven, keydir, tmp_path):
    """Segment roots over record blocks, the checkpoint root over seal hashes, `prove` audit paths
    (to the seal and to the checkpoint) and `check-consistency` proofs, each checked by tlog's
    TreeHash / CheckRecord / CheckTree; the same cases with one hash changed are refused."""
    led, notes = seven
    docs = seals(led)
    leaf = json.loads((led / "ledger.json").read_text())["leaf_records"]
    cases = [{"kind": "root", "entries": [seal_hash(s).hex() for s in docs], "root": note_tree(notes[7].read_bytes())[1].hex()}]
    for s in docs[:2]:
        recs = segment_records(led, s)
        cases.append({"kind": "root", "entries": [b"".join(recs[i:i + leaf]).hex() for i in range(0, len(recs), leaf)],
                      "root": s["merkle_root"]})
    for seq in (0, 293, 294 * 3 + 100, 294 * 7 - 1):
        out = tmp_path / f"p{seq}.json"
        r = cli("prove", led, "--seq", seq, "--out", out)
        assert r.returncode == 0, r.stderr
        doc = json.loads(out.read_text())
        cases.append({"kind": "inclusion", "index": doc["leaf_index"], "size": doc["tree_size"],
                      "entry": doc["leaf_block"]["hex"], "proof": doc["audit_path"], "root": doc["seal"]["merkle_root"]})
        cp = doc["checkpoint"]
        cases.append({"kind": "inclusion", "index": cp["leaf_index"], "size": cp["tree_size"],
                      "entry": seal_hash(doc["seal"]).hex(), "proof": cp["audit_path"],
                      "root": note_tree(cp["note"].encode())[1].hex()})
    for m, n in ((1, 7), (3, 7), (4, 7), (6, 7), (3, 5)):
        res = consistency(led, notes[m], notes[n], keydir / "verifier.pub")
        assert res["proof"]
        cases.append({"kind": "consistency", "old_size": m, "new_size": n, "old_root": res["old_root"],
                      "new_root": res["new_root"], "proof": res["proof"]})
    bad = []
    for c in cases:
        c = json.loads(json.dumps(c))
        if c["kind"] == "root":
            c["root"] = c["root"][:-1] + ("0" if c["root"][-1] != "0" else "1")
        else:
            c["proof"][-1] = "00" * 32
        bad.append(c)
    r = subprocess.run([str(tlog_check)], input="".join(json.dumps(c) + "\n" for c in cases + bad),
                       check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:len(cases)] == ["ok"] * len(cases)
    assert len(lines) == 2 * len(cases) and all(x.startswith("fail:") for x in lines[len(cases):])
