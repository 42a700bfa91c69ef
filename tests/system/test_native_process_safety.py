"""Memory safety of the native core where a process is under test: key wipes the optimiser keeps,
no core dump once a secret key is loaded, capture and record files that shrink while read, replay
timing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import load_keys
from test_native_safety import (  # noqa: F401  (shared with the in-process tests)
    SAMPLE,
    _saturated_pcapng,
    needs_root,
)

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
    # 2^62 records of 48 bytes: no size_t
    print(lib.lt_engine_fill(e._e, 0, out, 2**62, n, b), n[0])
msg = ffi.new("uint8_t[]", b"frame")
msgs, lens = ffi.new("const uint8_t *[]", [msg] * 2), ffi.new("uint32_t[]", [5, 5])
print(lib.lt_digest_many(alg.native_id, bytes(16), msgs, lens, 2, ffi.new("uint8_t[32]"), 2**63))
"""


def test_native_counts_times_sizes_are_checked():
    """lt_engine_fill and lt_digest_many computed `count * record size` unchecked: a count whose
    byte size wraps now gets LT_ERR_ARG instead of writes past the buffer."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", _COUNT_PROBE, str(SAMPLE)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    from ledgertool._binding import lib

    assert r.stdout.split() == [str(lib.LT_ERR_ARG), "0", str(lib.LT_ERR_ARG)]


def _native_so() -> Path:
    from ledgertool import _native

    return Path(_native.__file__)


@pytest.mark.skipif(
    not shutil.which("objdump"), reason="needs objdump (binutils, installed with gcc)"
)
@pytest.mark.parametrize(
    "func", ["lt_engine_free", "lt_digest", "lt_digest_many", "lt_gmac_aes128", "lt_hmac_sha256"]
)
def test_key_wipe_survives_the_optimiser(func):
    """GCC removed lt_engine_free's memset of the expanded keys (a dead store before free): the
    compiled function must still clear them, through explicit_bzero."""
    import platform
    import subprocess

    if platform.libc_ver()[0] != "glibc":
        pytest.skip(
            "explicit_bzero is used where glibc has it; elsewhere a volatile memset pointer"
        )
    asm = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", f"--disassemble={func}", str(_native_so())],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"<{func}>:" in asm, asm[-500:]
    assert "explicit_bzero" in asm, f"{func} no longer wipes its key material:\n{asm[-2000:]}"


_CORE_PROBE = """
import ctypes, json, os, resource, sys
libc = ctypes.CDLL(None)
# prctl(3): PR_GET_DUMPABLE
state = lambda: [list(resource.getrlimit(resource.RLIMIT_CORE)), libc.prctl(3, 0, 0, 0, 0)]
before = state()
from ledgertool.keyfiles import DigestKey, SigningKey, generate_keys
{load}
print(json.dumps([before, state()]), flush=True)
os.abort()
"""


@pytest.mark.parametrize(
    "load",
    [
        "DigestKey.load(sys.argv[1] + '/digest.key')",
        "SigningKey.load(sys.argv[1] + '/signing.key')",
        "generate_keys(sys.argv[1] + '/new')",
    ],
)
def test_no_core_dump_once_a_secret_key_is_loaded(keydir, tmp_path, load):
    """A crash with keys in memory wrote them to a core file. Loading or generating a secret key
    now sets RLIMIT_CORE to 0 (soft and hard) and PR_SET_DUMPABLE to 0."""
    import resource
    import subprocess
    import sys

    def allow_cores():
        try:
            resource.setrlimit(
                resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            )
        except (ValueError, OSError):  # not root and this process's hard limit is already 0
            pass

    keys = tmp_path / "keys"
    shutil.copytree(keydir, keys)
    work = tmp_path / "cwd"
    work.mkdir()
    r = subprocess.run(
        [sys.executable, "-c", _CORE_PROBE.format(load=load), str(keys)],
        cwd=work,
        capture_output=True,
        text=True,
        preexec_fn=allow_cores,
    )
    assert r.returncode < 0, r.stderr  # os.abort()
    (limit0, dumpable0), (limit, dumpable) = json.loads(r.stdout.strip().splitlines()[-1])
    assert limit == [0, 0] and dumpable == 0, r.stdout
    if (
        dumpable0 == 1
        and limit0[0] != 0
        and Path("/proc/sys/kernel/core_pattern").read_text().strip() == "core"
    ):
        # cores were possible before the load
        assert not list(work.iterdir()), "a core file was written"


def _big_pcap(path: Path, frames: int, size: int = 64) -> Path:
    """A classic pcap of `frames` distinct `size`-byte Ethernet frames (numpy: fast for
    millions)."""
    import numpy as np

    rec = np.zeros(
        frames,
        dtype=[
            ("sec", "<u4"),
            ("usec", "<u4"),
            ("cap", "<u4"),
            ("len", "<u4"),
            ("data", f"V{size}"),
        ],
    )
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
            e = DigestEngine(
                r, alg, 0, bytes(16), batch_records=records, workers=workers, batch=4096
            )
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
    r = subprocess.run(
        [sys.executable, "-c", _SHRINK_PROBE, str(cap), how],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    msg = r.stdout.strip()
    assert msg.startswith(f"{cap}: the file shrank while it was read: byte ") and "\n" not in msg, (
        msg
    )
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
    args = (
        [
            "recompute",
            cap,
            "--digest-key",
            keydir / "digest.key",
            "--algorithm",
            "siphash-1-3-128",
            "--strip",
            "frame",
            "--out",
            tmp_path / "d.parquet",
        ]
        if command == "recompute"
        else [
            "capture",
            cap,
            "--ledger",
            tmp_path / "ledger",
            "--digest-key",
            keydir / "digest.key",
            "--signing-key",
            keydir / "signing.key",
            "--segment-records",
            "100000",
        ]
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", "from ledgertool.cli.app import main; main()", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # truncate once the run is under way: the capture is mapped (root may read the maps of the
    # process, which is not dumpable once it holds keys), and it has written output
    written = (
        (lambda: any(tmp_path.glob("d.parquet*")))
        if command == "recompute"
        else (lambda: any(tmp_path.glob("ledger/link=*/seg-*")))
    )

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
    # the digests of the frames before it are written, as capture seals them
    if command == "recompute":
        import pyarrow.parquet as pq

        written = int(
            lines[0].split("; the ")[1].split(" frames before it were written")[0].replace(",", "")
        )
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
    args = [
        sys.executable,
        "-c",
        _REC_SHRINK_PROBE,
        str(d),
        how,
        "8192",
        str(keydir / "verifier.pub"),
    ]
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
    assert 8192 <= byte < 8192 + 804 and f" of {size} is gone" in text, (
        byte,
        size,
        text,
    )  # 804: one block


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
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ledgertool.cli.app import main; main()",
            "replay",
            str(cap),
            "--iface",
            "lo",
            "--pps",
            "1e-300",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
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
