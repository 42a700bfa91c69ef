"""Memory safety of the native core and the bounds of what it is handed.

ledger.json is unsigned storage. Its fields are bounded when it is loaded, the C Merkle
code refuses sizes it cannot hold, and the header is bound to the signed chain
(`ledger_header_sha256` in every new seal), so an edited header is a named problem.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import SAMPLES, cli, load_keys

SAMPLE = SAMPLES / "sample.pcap"  # 294 Ethernet frames
SEG, LEAF = 100, 8


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, keydir) -> Path:
    from ledgertool.capture.run import capture_file

    dk, sk, _ = load_keys(keydir)
    out = tmp_path_factory.mktemp("ledger") / "ledger"
    capture_file(SAMPLE, out, digest_key=dk, signing_key=sk, segment_records=SEG, leaf_records=LEAF)
    return out


@pytest.fixture()
def ledger(pristine, tmp_path) -> Path:
    d = tmp_path / "ledger"
    shutil.copytree(pristine, d)
    return d


@pytest.fixture()
def v1_ledger(tmp_path, keydir) -> Path:
    """The same ledger in format v1, whose seals were once written without ledger_header_sha256."""
    from ledgertool.capture.run import capture_file

    dk, sk, _ = load_keys(keydir)
    out = tmp_path / "v1"
    capture_file(SAMPLE, out, digest_key=dk, signing_key=sk, segment_records=SEG, leaf_records=LEAF, ledger_format=1)
    return out


def _edit_header(ledger: Path, **changes) -> None:
    path = ledger / "ledger.json"
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def _verify(ledger: Path, keydir: Path) -> dict:
    r = cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


# ---- the overflow itself ---------------------------------------------------------------

@pytest.mark.parametrize("command", ["verify", "recover"])
def test_leaf_records_overflow(ledger, keydir, command):
    """leaf_records = 2^60 + 1 wrapped `record_size * leaf_records` to 48 in lt_merkle_leaves: verify
    aborted (ASan heap-buffer-overflow), recover corrupted the heap. Now: one line naming ledger.json
    and the field, exit 2, before any record is hashed."""
    _edit_header(ledger, leaf_records=2**60 + 1)
    extra = ["--trust", keydir / "verifier.pub"] if command == "verify" else ["--signing-key", keydir / "signing.key"]
    r = cli(command, ledger, *extra)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "ledger.json" in lines[0] and "leaf_records" in lines[0] and str(2**60 + 1) in lines[0]


def test_merkle_leaves_checks_every_size_in_c():
    """The C entry point itself refuses what it cannot hold, whatever Python passes: no write
    past `out`, status LT_ERR_ARG."""
    from ledgertool._binding import ffi, lib

    records = bytes(48 * 10)
    out = ffi.new("uint8_t[]", 64)
    sentinel = bytes(ffi.buffer(out))

    def call(record_size, count, leaf, out_len=64):
        return lib.lt_merkle_leaves(records, record_size, count, leaf, out, out_len)

    assert call(48, 10, 2**60 + 1) == lib.LT_ERR_ARG        # the reported overflow
    assert call(48, 10, 3) == lib.LT_ERR_ARG                # not a power of two
    assert call(48, 10, 2 * lib.LT_MERKLE_MAX_LEAF_RECORDS) == lib.LT_ERR_ARG
    assert call(48, 10, 0) == lib.LT_ERR_ARG
    assert call(17, 10, 8) == lib.LT_ERR_ARG                # not a record size
    assert call(48, 2**62, 8) == lib.LT_ERR_ARG             # count * record_size overflows
    assert call(48, 10, 4) == lib.LT_ERR_ARG                # 3 leaves do not fit 64 bytes
    assert bytes(ffi.buffer(out)) == sentinel               # nothing was written
    assert call(48, 10, 8) == lib.LT_OK                     # 2 leaves fit
    assert bytes(ffi.buffer(out)) != sentinel


_COUNT_PROBE = """
from ledgertool._binding import ffi, lib
from ledgertool.algorithms import get_algorithm
from ledgertool.digest.engine import DigestEngine
from ledgertool.source.file import CaptureReader
alg = get_algorithm("siphash-1-3-128")
with CaptureReader(__import__("sys").argv[1]) as r:
    e = DigestEngine(r, alg, 0, bytes(16), batch_records=16)
    n, b = ffi.new("size_t *"), ffi.new("uint64_t *")
    out = ffi.new("uint8_t[]", 16 * 48)
    print(lib.lt_engine_fill(e._e, 0, out, 2**62, n, b), n[0])  # 2^62 records of 48 bytes: no size_t
msg = ffi.new("uint8_t[]", b"frame")
msgs, lens = ffi.new("const uint8_t *[]", [msg] * 2), ffi.new("uint32_t[]", [5, 5])
print(lib.lt_digest_many(alg.native_id, bytes(16), msgs, lens, 2, ffi.new("uint8_t[32]"), 2**63))
"""


def test_native_counts_times_sizes_are_checked():
    """lt_engine_fill and lt_digest_many computed `count * record size` unchecked: a count whose
    byte size wraps now gets LT_ERR_ARG instead of writes past the buffer."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _COUNT_PROBE, str(SAMPLE)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    from ledgertool._binding import lib

    assert r.stdout.split() == [str(lib.LT_ERR_ARG), "0", str(lib.LT_ERR_ARG)]


def test_workload_timestamps_cannot_overflow():
    """start_ns + frames x interframe past 2^63 - 1 ns overflowed the generator's int64 clock
    (signed overflow: negative timestamps); now the spec is refused."""
    import dataclasses

    from ledgertool.errors import WorkloadSpecError
    from ledgertool.source.workload import load_spec, open_workload

    spec = load_spec(SAMPLES / "workloads" / "imix.toml")
    with open_workload(dataclasses.replace(spec, start_ns=2**63 - 10**12, interframe_ps=10**6)):
        pass  # fits
    with pytest.raises(WorkloadSpecError, match="past 2\\^63 - 1 ns"):
        open_workload(dataclasses.replace(spec, start_ns=2**63 - 10, interframe_ps=10**15))


# ---- every header field bounded on load -----------------------------------------------

@pytest.mark.parametrize("field, value", [
    ("leaf_records", 0), ("leaf_records", 3), ("leaf_records", 2**17), ("leaf_records", True),
    ("leaf_records", 64.0), ("leaf_records", "64"), ("record_size", 64), ("record_size", True),
    ("digest_size", 32), ("digest_size", False), ("algorithm", "siphash-1-3-64"), ("algorithm", "md5"),
    ("algorithm", 1), ("strip", "everything"), ("ledger_id", "ABCDEF" * 5 + "ab"), ("ledger_id", "00" * 15),
    ("ledger_id", 7), ("digest_key_id", "zz" * 16), ("digest_key_id", None), ("format", "ledgertool-ledger-v3"),
    ("created_at", 5), ("surprise", 1),
])
def test_ledger_header_fields_are_bounded(ledger, field, value):
    from ledgertool.errors import LedgerFormatError
    from ledgertool.ledger.header import load_ledger

    _edit_header(ledger, **{field: value})
    with pytest.raises(LedgerFormatError) as e:
        load_ledger(ledger)
    msg = str(e.value)
    assert "\n" not in msg and "ledger.json" in msg and field in msg, msg


def test_ledger_header_duplicate_member_and_size(ledger):
    from ledgertool.errors import LedgerFormatError
    from ledgertool.ledger.header import load_ledger

    path = ledger / "ledger.json"
    text = path.read_text()
    path.write_text(text.replace('"leaf_records": 8', '"leaf_records": 8, "leaf_records": 2147483648'))
    with pytest.raises(LedgerFormatError, match="'leaf_records' appears twice|duplicate member 'leaf_records'"):
        load_ledger(ledger)
    path.write_text(text[:-2] + ', "pad": "' + "x" * 70000 + '"}\n')
    with pytest.raises(LedgerFormatError, match="65536"):
        load_ledger(ledger)


@pytest.mark.parametrize("field, value, where", [
    ("leaf_records", 2**31, "byte 36"), ("leaf_records", 0, "byte 36"), ("leaf_records", 96, "byte 36"),
    ("algorithm", "siphash-1-3-64", "byte 96"), ("algorithm", "blake3-keyed-256", "byte 96"),
    ("strip", "nothing", "byte 128"), ("link", "../x", "byte 64"),
])
def test_segment_header_is_bounded(field, value, where):
    from ledgertool.errors import LedgerFormatError
    from ledgertool.ledger.segment import SegmentHeader

    good = dict(ledger_id="ab" * 16, link="link0", index=3, algorithm="siphash-1-3-128", strip="frame",
                key_id="cd" * 16, record_size=48, digest_size=16, leaf_records=64, first_seq=0, created_ns=1)
    assert SegmentHeader.decode(SegmentHeader(**good).encode(), "x.open") == SegmentHeader(**good)
    raw = SegmentHeader(**{**good, field: value}).encode()
    with pytest.raises(LedgerFormatError, match=where):
        SegmentHeader.decode(raw, "x.open")


# ---- the header is bound to the signed chain -------------------------------------------

def test_new_seals_sign_the_header_bytes(ledger):
    import hashlib

    want = hashlib.sha256((ledger / "ledger.json").read_bytes()).hexdigest()
    seals = sorted((ledger / "link=link0").glob("*.seal.json"))
    assert len(seals) == 3
    assert {json.loads(p.read_text())["ledger_header_sha256"] for p in seals} == {want}


def test_edited_header_is_a_named_problem(ledger, keydir):
    """A header edit that keeps every compared parameter (created_at) was invisible; one that
    changes leaf_records made verify hash the records with the unsigned value. Now both are
    `ledger_header_mismatch`, and records are still hashed with the seals' signed layout."""
    assert _verify(ledger, keydir)["ok"]
    _edit_header(ledger, created_at="1999-01-01T00:00:00+00:00")
    v = _verify(ledger, keydir)
    assert not v["ok"] and {p["kind"] for p in v["problems"]} == {"ledger_header_mismatch"}
    (p,) = v["problems"]
    assert p["segment"] == 0 and "ledger.json" in p["detail"] and "segments 0..2" in p["detail"]

    _edit_header(ledger, created_at=json.loads((ledger / "ledger.json").read_text())["created_at"], leaf_records=128)
    kinds = [p["kind"] for p in _verify(ledger, keydir)["problems"]]
    assert "ledger_header_mismatch" in kinds and "parameter_mismatch" in kinds
    assert "merkle_mismatch" not in kinds, "records were hashed with the unsigned header's leaf size"


def test_capture_refuses_to_append_over_an_edited_header(ledger, keydir):
    _edit_header(ledger, created_at="1999-01-01T00:00:00+00:00")
    before = sorted(p.name for p in (ledger / "link=link0").iterdir())
    r = cli("capture", SAMPLE, "--ledger", ledger, "--digest-key", keydir / "digest.key",
            "--signing-key", keydir / "signing.key")
    assert r.returncode == 2 and "ledger.json" in r.stderr and "ledger_header_sha256" in r.stderr, r.stderr
    assert sorted(p.name for p in (ledger / "link=link0").iterdir()) == before


def _strip_binding(ledger: Path, keydir: Path) -> None:
    """Re-sign every seal without ledger_header_sha256, as seals were written before it existed
    (the chain and the stored checkpoint follow)."""
    from ledgertool.ledger.checkpoints import write_checkpoint
    from ledgertool.ledger.header import load_ledger
    from ledgertool.seal.document import genesis_hash, seal_hash, seal_signed_bytes

    _, sk, _ = load_keys(keydir)
    header = load_ledger(ledger)
    prev = genesis_hash(header.ledger_id, "link0")
    for path in sorted((ledger / "link=link0").glob("*.seal.json")):
        doc = json.loads(path.read_text())
        del doc["ledger_header_sha256"]
        doc["prev_seal_hash"] = prev
        doc.pop("signatures")
        doc["signatures"] = sk.sign(seal_signed_bytes(doc))
        path.write_text(json.dumps(doc, indent=1) + "\n")
        prev = seal_hash(doc)
    write_checkpoint(ledger, header, "link0", sk)


def test_old_seals_without_the_binding_still_verify(v1_ledger, keydir):
    """v1 seals from before the binding (v2 seals were never written without it: next test)."""
    ledger = v1_ledger
    _strip_binding(ledger, keydir)
    assert _verify(ledger, keydir)["ok"]
    _edit_header(ledger, created_at="1999-01-01T00:00:00+00:00")  # not covered by an old seal
    assert _verify(ledger, keydir)["ok"]
    _edit_header(ledger, leaf_records=128)
    v = _verify(ledger, keydir)
    kinds = {p["kind"] for p in v["problems"]}
    assert kinds == {"parameter_mismatch"}, v["problems"]  # the seals' own leaf size is the one used
    assert len(v["problems"]) == 3


def test_v2_seals_without_the_binding_are_malformed(ledger, keydir):
    _strip_binding(ledger, keydir)
    v = _verify(ledger, keydir)
    assert [(p["kind"], p["segment"]) for p in v["problems"]] == [("seal_malformed", i) for i in range(3)], v
    assert all("ledgertool-seal-v2 seal lacks ledger_header_sha256" in p["detail"] for p in v["problems"])


# ---- key wipes, core dumps, a capture file that shrinks, replay timing -----------------

def _native_so() -> Path:
    from ledgertool import _native

    return Path(_native.__file__)


@pytest.mark.skipif(not shutil.which("objdump"), reason="needs objdump (binutils, installed with gcc)")
@pytest.mark.parametrize("func", ["lt_engine_free", "lt_digest", "lt_digest_many", "lt_gmac_aes128",
                                  "lt_hmac_sha256"])
def test_key_wipe_survives_the_optimiser(func):
    """GCC removed lt_engine_free's memset of the expanded keys (a dead store before free): the
    compiled function must still clear them, through explicit_bzero."""
    import platform
    import subprocess

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("explicit_bzero is used where glibc has it; elsewhere a volatile memset pointer")
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={func}", str(_native_so())],
                         capture_output=True, text=True, check=True).stdout
    assert f"<{func}>:" in asm, asm[-500:]
    assert "explicit_bzero" in asm, f"{func} no longer wipes its key material:\n{asm[-2000:]}"


_CORE_PROBE = """
import ctypes, json, os, resource, sys
libc = ctypes.CDLL(None)
state = lambda: [list(resource.getrlimit(resource.RLIMIT_CORE)), libc.prctl(3, 0, 0, 0, 0)]  # PR_GET_DUMPABLE
before = state()
from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys
{load}
print(json.dumps([before, state()]), flush=True)
os.abort()
"""


@pytest.mark.parametrize("load", [
    "DigestKey.load(sys.argv[1] + '/digest.key')",
    "SigningKey.load(sys.argv[1] + '/signing.key')",
    "generate_keys(sys.argv[1] + '/new')",
])
def test_no_core_dump_once_a_secret_key_is_loaded(keydir, tmp_path, load):
    """A crash with keys in memory wrote them to a core file. Loading or generating a secret key
    now sets RLIMIT_CORE to 0 (soft and hard) and PR_SET_DUMPABLE to 0."""
    import resource
    import subprocess
    import sys

    def allow_cores():
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):  # not root and this process's hard limit is already 0
            pass

    keys = tmp_path / "keys"
    shutil.copytree(keydir, keys)
    work = tmp_path / "cwd"
    work.mkdir()
    r = subprocess.run([sys.executable, "-c", _CORE_PROBE.format(load=load), str(keys)], cwd=work,
                       capture_output=True, text=True, preexec_fn=allow_cores)
    assert r.returncode < 0, r.stderr  # os.abort()
    (limit0, dumpable0), (limit, dumpable) = json.loads(r.stdout.strip().splitlines()[-1])
    assert limit == [0, 0] and dumpable == 0, r.stdout
    if dumpable0 == 1 and limit0[0] != 0 and Path("/proc/sys/kernel/core_pattern").read_text().strip() == "core":
        assert not list(work.iterdir()), "a core file was written"  # cores were possible before the load


def _big_pcap(path: Path, frames: int, size: int = 64) -> Path:
    """A classic pcap of `frames` distinct `size`-byte Ethernet frames (numpy: fast for millions)."""
    import numpy as np

    rec = np.zeros(frames, dtype=[("sec", "<u4"), ("usec", "<u4"), ("cap", "<u4"), ("len", "<u4"),
                                  ("data", f"V{size}")])
    rec["sec"] = 1_700_000_000 + np.arange(frames) // 1_000_000
    rec["usec"] = np.arange(frames) % 1_000_000
    rec["cap"] = rec["len"] = size
    payload = np.zeros((frames, size), dtype=np.uint8)
    payload[:, 12:14] = (0x08, 0x00)
    payload[:, 16:24] = np.arange(frames, dtype="<u8").view(np.uint8).reshape(frames, 8)
    rec["data"] = payload.view(f"V{size}").ravel()
    with open(path, "wb") as f:
        f.write(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
        rec.tofile(f)
    return path


_SHRINK_PROBE = """
import os, sys
from ledgertool.algorithms import get_algorithm
from ledgertool.digest.engine import DigestEngine
from ledgertool.source.file import CaptureReader
from ledgertool.errors import CaptureFormatError
path, how = sys.argv[1], sys.argv[2]
alg = get_algorithm("siphash-1-3-128")
with CaptureReader(path) as r:
    try:
        if how == "frames":
            for i, f in enumerate(r.frames()):
                if i == 300:
                    os.truncate(path, 8192)
        else:
            # engine-partial: 1024 of the 4096 frames read are hashed; engine-workers: 2 workers,
            # the next batch is read ahead. Either way frames in hand now point past the new end.
            workers = 2 if how == "engine-workers" else 1
            records = 1024 if how == "engine-partial" else 4096
            e = DigestEngine(r, alg, 0, bytes(16), batch_records=records, workers=workers, batch=4096)
            e.fill(0)
            os.truncate(path, 8192)
            while e.fill(0)[1]:
                pass
    except CaptureFormatError as exc:
        print(exc)
        sys.exit(2)
print("no error")
"""


@pytest.mark.parametrize("how", ["engine", "engine-partial", "engine-workers", "frames"])
def test_capture_file_truncated_while_read(tmp_path, how):
    """The reader maps the file: truncating it under a read raised SIGBUS and killed the process.
    Now the fault is caught wherever it happens (the reader's parsing, a worker hashing frames of
    a batch read ahead, Python copying frames out): one line naming the file and byte, exit 2."""
    import subprocess
    import sys

    cap = _big_pcap(tmp_path / "cap.pcap", 40_000)
    r = subprocess.run([sys.executable, "-c", _SHRINK_PROBE, str(cap), how], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    msg = r.stdout.strip()
    assert msg.startswith(f"{cap}: the file shrank while it was read: byte ") and "\n" not in msg, msg
    byte = int(msg.split("byte ")[1].split()[0])
    assert 8192 <= byte < 40_000 * 80 + 24


@pytest.mark.parametrize("command", ["recompute", "capture"])
def test_recompute_and_capture_survive_truncation_mid_run(tmp_path, keydir, command):
    """End to end: a 2-million-frame capture is cut to 1 MB while `recompute` (or `capture`)
    digests it with every core."""
    import subprocess
    import sys
    import time

    cap = _big_pcap(tmp_path / "big.pcap", 2_000_000)
    args = (["recompute", cap, "--digest-key", keydir / "digest.key", "--algorithm", "siphash-1-3-128", "--strip",
             "frame", "--out", tmp_path / "d.parquet"]
            if command == "recompute" else
            ["capture", cap, "--ledger", tmp_path / "ledger", "--digest-key", keydir / "digest.key",
             "--signing-key", keydir / "signing.key", "--segment-records", "100000"])
    proc = subprocess.Popen([sys.executable, "-c", "from ledgertool.cli.app import main; main()", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # truncate once the run is under way: the capture is mapped (root may read the maps of the
    # process, which is not dumpable once it holds keys), and it has written output
    written = (lambda: any(tmp_path.glob("d.parquet*"))) if command == "recompute" else \
        (lambda: any(tmp_path.glob("ledger/link=*/seg-*")))

    def started() -> bool:
        try:
            return str(cap) in Path(f"/proc/{proc.pid}/maps").read_text() and written()
        except OSError:
            return written()
    deadline = time.monotonic() + 60
    while not started() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    os.truncate(cap, 1 << 20)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (proc.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(cap) in lines[0] and "shrank while it was read: byte " in lines[0], lines[0]
    if command == "recompute":  # the digests of the frames before it are written, as capture seals them
        import pyarrow.parquet as pq

        written = int(lines[0].split("; the ")[1].split(" frames before it were written")[0].replace(",", ""))
        assert written < 2_000_000 and pq.read_metadata(tmp_path / "d.parquet").num_rows == written
        assert not list(tmp_path.glob("d.parquet.tmp-*"))


_REC_SHRINK_PROBE = """
import json, os, sys
from pathlib import Path
from ledgertool.ledger import reader as R
ledger, how, cut_to = sys.argv[1], sys.argv[2], int(sys.argv[3])
opened = R.LedgerReader._open_records

def open_then_cut(self, path, what, *held):
    # the storage holder truncates segment 1's file after verify opened and fstat'd it: the walk's
    # map covers the old length, and every page past the new end is gone
    got = opened(self, path, what, *held)
    if Path(path).name == "seg-00000001.rec":
        os.truncate(path, cut_to)
    return got

R.LedgerReader._open_records = open_then_cut
if how == "cli":
    from ledgertool.cli.app import main
    sys.argv = ["ledgertool", "verify", ledger, "--trust", sys.argv[4]]
    main()
from ledgertool.verify.ledger import verify_ledger
seen = []
res = verify_ledger(Path(ledger), None, on_segment=lambda s: seen.append(s.index))
print(json.dumps([seen, [(p.kind.value, p.segment, p.detail) for p in res.problems
                         if p.kind.value != "signatures_unchecked"]]))
"""


@pytest.mark.parametrize("how", ["cli", "readers"])
def test_rec_file_truncated_under_the_map(tmp_path, keydir, how):
    """verify walks a raw record file in a map of the length it fstat'd (no
    read copy). The storage holder can truncate the file under that map: the walk faulted (SIGBUS)
    and killed the process. Now the fault is caught: records_unreadable naming the file and the
    byte that is gone, exit 1; for readers (the copying walk: query, recompute) the same, and the
    segment is not handed on."""
    import subprocess
    import sys

    from v2_reference import synthetic_records, write_v2_ledger

    segs = [synthetic_records(4000, i * 4000, seed=i) for i in range(3)]
    d = tmp_path / "L"
    write_v2_ledger(d, load_keys(keydir)[1], segs, leaf_records=16)
    rec = d / "link=link0" / "seg-00000001.rec"
    size = rec.stat().st_size
    args = [sys.executable, "-c", _REC_SHRINK_PROBE, str(d), how, "8192", str(keydir / "verifier.pub")]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == (1 if how == "cli" else 0), (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.returncode >= 0, r.stderr
    assert rec.stat().st_size == 8192  # a page boundary: the next page is gone, not zeros
    if how == "cli":
        line = [ln for ln in r.stdout.splitlines() if "records_unreadable" in ln or "shrank" in ln]
        assert len(line) == 1, r.stdout
        text = line[0]
    else:
        seen, found = json.loads(r.stdout.strip().splitlines()[-1])
        assert seen == [0, 2] and len(found) == 1, r.stdout
        kind, segment, text = found[0]
        assert (kind, segment) == ("records_unreadable", 1)
    assert f"{rec}: the file shrank while it was read: byte " in text, text
    byte = int(text.split("byte ")[1].split()[0])
    assert 8192 <= byte < 8192 + 804 and f" of {size} is gone" in text, (byte, size, text)  # 804: one block


def _saturated_pcapng(path: Path) -> Path:
    """Two Ethernet frames whose pcapng timestamps saturate to INT64_MIN and INT64_MAX ns: each on
    its own interface, with if_tsoffset -2^62 and +2^62 seconds."""
    import struct

    def block(btype: int, body: bytes) -> bytes:
        body += bytes(-len(body) % 4)
        n = 12 + len(body)
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = [block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HHq", 14, 8, off) + bytes(4))
           for off in (-(2**62), 2**62)]
    frame = bytes(6) + bytes.fromhex("020000000001") + b"\x08\x00" + bytes(46)
    epb = [block(6, struct.pack("<IIIII", ifid, 0, 1, len(frame), len(frame)) + frame) for ifid in (0, 1)]
    path.write_bytes(shb + b"".join(idb) + b"".join(epb))
    return path


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="replay opens a PF_PACKET socket (root or CAP_NET_RAW)")


def test_saturated_pcapng_reads_as_int64_limits(tmp_path):
    from ledgertool.source.file import CaptureReader

    with CaptureReader(_saturated_pcapng(tmp_path / "sat.pcapng")) as r:
        assert [f.ts_ns for f in r.frames()] == [-(2**63), 2**63 - 1]


@needs_root
def test_replay_timing_refuses_saturated_timestamps(tmp_path):
    """--timing computed INT64_MAX - INT64_MIN (signed overflow: UBSan reports it; plain builds
    wrapped to -1 and sent both frames at once). Now a one-line usage error naming the frame."""
    cap = _saturated_pcapng(tmp_path / "sat.pcapng")
    r = cli("replay", cap, "--iface", "lo", "--json")
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert f"{cap}: frame 1 (byte " in r.stderr and "--pps, --mbps or --topspeed" in r.stderr


@needs_root
def test_replay_rate_schedule_saturates(tmp_path):
    """--pps 1e-300: the second frame is due after ~1e309 ns, which was cast to int64 (undefined
    behaviour; GCC's UBSan does not check float casts, and the plain build happened to wait). The
    schedule now saturates explicitly: the frame waits until the replay is stopped."""
    import signal
    import subprocess
    import sys
    import time

    cap = _saturated_pcapng(tmp_path / "sat.pcapng")  # --pps does not look at the timestamps
    proc = subprocess.Popen([sys.executable, "-c", "from ledgertool.cli.app import main; main()", "replay", str(cap),
                             "--iface", "lo", "--pps", "1e-300", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    fds = Path(f"/proc/{proc.pid}/fd")
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:  # until the PF_PACKET socket is open
        try:
            if any(os.readlink(fd).startswith("socket:") for fd in fds.iterdir()):
                break
        except OSError:
            pass
        time.sleep(0.01)
    time.sleep(0.5)  # the first frame is due at once, the second never
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    doc = json.loads(out)
    assert doc["frames_sent"] == 1 and doc["interrupted"] is True, (doc, err)
