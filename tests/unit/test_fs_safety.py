"""The file system is the adversary's, and it fails: planted links, one writer per ledger, I/O
errors as one line naming the file, files that are not files, and open segments with a corrupt
header. docs/threat-model.md, "File system".

Faults are real: a small tmpfs for ENOSPC and a read-only remount (root only), an ext4 image on a
loop device whose backing tmpfs is too small for EIO on fsync, dropped DAC capabilities
(setpriv) or a non-root user for EACCES, mkfifo for FIFOs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SAMPLES, CliResult, cli, load_keys

from ledgertool import fsio
from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.capture.run import capture_file
from ledgertool.errors import FileTypeError, LedgerLockedError, OpenSegmentRefusedError, StorageError
from ledgertool.keyfiles import SigningKey
from ledgertool.ledger import layout
from ledgertool.ledger import segment as segments
from ledgertool.ledger.checkpoints import export_checkpoint
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.index import link_state
from ledgertool.ledger.layout import LOCK_FILE, checkpoint_path
from ledgertool.ledger.lock import writer_lock
from ledgertool.ledger.reader import LedgerReader
from ledgertool.ledger.openmac import OpenSegmentKey
from ledgertool.ledger.recover import recover_ledger
from ledgertool.ledger.rotations import rotate_keys
from ledgertool.seal.checkpoint import parse_note
from ledgertool.seal.document import load_seal
from ledgertool.verify.ledger import verified_segment, verify_ledger

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
CLI = [sys.executable, "-c", "from ledgertool.cli.app import main; main()"]
IS_ROOT = os.geteuid() == 0


def _capture_args(src: Path, ledger: Path, keydir: Path, *extra: str) -> list[str]:
    return ["capture", str(src), "--ledger", str(ledger), "--digest-key", str(keydir / "digest.key"),
            "--signing-key", str(keydir / "signing.key"), *extra]


def _one_error_line(r: CliResult | subprocess.CompletedProcess) -> str:
    """The run failed as a user error: exit 2, one line on stderr, not an internal error."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("ledgertool: error: "), r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    return lines[0]


@pytest.fixture()
def ledger(tmp_path, built_ledger) -> Path:
    """294 frames in segments 0..2 (100, 100, 94 records) of link0."""
    return built_ledger(SAMPLE, segment_records=100).copy_to(tmp_path / "L")


@pytest.fixture(scope="module")
def big_pcap(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("fs") / "synthetic.pcap"
    write_synthetic_pcap(p, 400_000, 64, seed=11)
    return p


def _sealed_records(ledger: Path, index: int) -> bytes:
    """The records of sealed segment `index` of link0 as verify checks them, in either form (v1:
    the Parquet file; v2: the raw record file)."""
    return bytes(verified_segment(LedgerReader(ledger), load_ledger(ledger), "link0", index).records)


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# ---- links planted in a ledger are never followed ---------------------------------------

@pytest.mark.parametrize("planted", ["checkpoint.tmp", "link=link0/checkpoint.tmp",
                                     "link=link0/seg-00000003.seal.json.tmp", "link=link0/seg-00000003.parquet.tmp",
                                     "ledger.json.tmp"])
def test_planted_tmp_link_is_never_written_through(planted, ledger, keydir, tmp_path):
    """Old writers used NAME.tmp: a link planted there made the next capture overwrite its target
    (here a copy of the signing key). Temporaries now get an unpredictable name created with
    O_EXCL|O_NOFOLLOW; a link found where recovery looks is refused by name. The Parquet
    temporary is a v1 ledger's (v2 writes no Parquet in a capture): that case runs on v1."""
    if planted.endswith(".parquet.tmp"):
        dk, sk, _ = load_keys(keydir)
        ledger = tmp_path / "V1"
        capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100, ledger_format=1)
    victim = tmp_path / "victim.key"
    shutil.copy(keydir / "signing.key", victim)
    before = victim.read_bytes()
    (ledger / planted).symlink_to(victim)
    r = cli(*_capture_args(SAMPLE, ledger, keydir, "--segment-records", "100"))
    assert victim.read_bytes() == before
    if planted.startswith("link=link0/"):  # recovery of the link looks at *.tmp: the link is named
        assert str(ledger / planted) in _one_error_line(r) and "symbolic link" in r.stderr
    else:
        assert r.returncode == 0, r.stderr
    r = cli("recover", ledger, "--signing-key", keydir / "signing.key")
    assert str(ledger / planted) in _one_error_line(r) and "symbolic link" in r.stderr
    assert victim.read_bytes() == before
    (ledger / planted).unlink()
    assert cli("recover", ledger, "--signing-key", keydir / "signing.key").returncode == 0
    v = cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json")
    assert v.returncode == 0 and json.loads(v.stdout)["records"] in (294, 588), v.stdout + v.stderr


@pytest.mark.parametrize("name", ["link=link0", "rotations", "link=link0/seg-00000002.seal.json", "ledger.json"])
def test_linked_ledger_paths_are_refused(name, ledger, keydir, tmp_path):
    """A ledger directory, the rotations directory, a seal or ledger.json replaced by a link to a
    copy elsewhere: writers refuse it by name and write nothing through it."""
    if name == "rotations":
        (ledger / "rotations").mkdir()
    target = tmp_path / "elsewhere"
    os.rename(ledger / name, target)
    (ledger / name).symlink_to(target)
    outside = _tree(target) if target.is_dir() else {"": target.read_bytes()}
    r = cli(*_capture_args(SAMPLE, ledger, keydir))
    assert str(ledger / name) in _one_error_line(r) and "symbolic link" in r.stderr
    if name == "rotations":
        r = cli("keys", "rotate", ledger, "--old", keydir / "signing.key", "--new", keydir / "signing.key")
        assert str(ledger / name) in _one_error_line(r)
    assert (_tree(target) if target.is_dir() else {"": target.read_bytes()}) == outside


def test_out_files_never_follow_a_planted_temporary_name(ledger, keydir, tmp_path):
    """checkpoint --out and prove --out wrote OUT.tmp first: a link there redirected the write."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    for args, out in ((["checkpoint", ledger, "--out"], tmp_path / "cp.note"),
                      (["prove", ledger, "--seq", "5", "--out"], tmp_path / "proof.json")):
        Path(f"{out}.tmp").symlink_to(victim)
        r = cli(*args, out)
        assert r.returncode == 0, r.stderr
        assert victim.read_bytes() == b"precious\n" and out.is_file() and not out.is_symlink()
    assert parse_note((tmp_path / "cp.note").read_bytes()).checkpoint.size == 3
    assert json.loads((tmp_path / "proof.json").read_text())["record"]["seq"] == "5"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.is_symlink()) == ["L", "cp.note", "proof.json", "victim"]


def test_fsio_write_atomic_replaces_a_link_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "t"
    victim = tmp_path / "v"
    victim.write_bytes(b"v")
    target.symlink_to(victim)
    fsio.write_atomic(target, b"new")
    assert victim.read_bytes() == b"v" and target.read_bytes() == b"new" and not target.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t", "v"]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "sub").symlink_to(tmp_path)
    with pytest.raises(FileTypeError, match="sub: is a symbolic link"):
        fsio.write_atomic(tmp_path / "d" / "sub" / "x", b"", root=tmp_path / "d")
    assert not (tmp_path / "x").exists()


# ---- one writer per ledger -------------------------------------------------------------

def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_holder(ledger: Path, proc: subprocess.Popen, timeout: float = 60) -> dict:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and proc.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads((ledger / LOCK_FILE).read_bytes())
            if doc["pid"] == proc.pid and any(ledger.glob("link=*/*.open")):
                return doc
        time.sleep(0.01)
    raise AssertionError(f"capture never held the lock: {proc.poll()} {proc.stderr.read() if proc.poll() is not None else ''}")


def test_second_capture_and_recover_are_refused_while_one_runs(big_pcap, tmp_path, keydir):
    """Two captures into one ledger, or recover during a capture, broke the chain for good."""
    ledger = tmp_path / "L"
    first = _start(_capture_args(big_pcap, ledger, keydir, "--segment-records", "2000", "--json"))
    try:
        _wait_for_holder(ledger, first)
        others = [_start(args) for args in (
            _capture_args(SAMPLE, ledger, keydir), ["recover", ledger, "--signing-key", keydir / "signing.key"],
            ["keys", "rotate", ledger, "--old", keydir / "signing.key", "--new", keydir / "signing.key"],
            ["checkpoint", ledger, "--out", tmp_path / "cp", "--signing-key", keydir / "signing.key"])]
        for p in others:
            out, err = p.communicate(timeout=120)
            line = _one_error_line(subprocess.CompletedProcess(p.args, p.returncode, out, err))
            assert f"another writer holds the ledger: pid {first.pid} " in line and "(capture, since " in line
        assert first.poll() is None  # they all ran while the capture did
        out, err = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0, err
    assert json.loads(out)["frames"] == 400_000
    v = verify_ledger(ledger, load_keys(keydir)[2], checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and not v.warnings and v.records == 400_000, (v.problems, v.warnings)


def test_two_concurrent_captures_leave_a_ledger_that_verifies(big_pcap, tmp_path, keydir):
    """Started together: exactly one records, the other is refused; the ledger verifies. Each
    reads its capture on a pipe (`-`), written only once the refused one has exited, so the one
    holding the lock is still running when the other asks for it, however loaded the machine."""
    ledger = tmp_path / "L"
    ledger.mkdir()
    args = [*CLI, *map(str, _capture_args("-", ledger, keydir, "--segment-records", "20000", "--json"))]
    procs = [subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    try:
        deadline = time.monotonic() + 180
        while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = next(p for p in procs if p.poll() is not None)
        (winner,) = (p for p in procs if p is not refused)
        assert winner.poll() is None  # blocked on its pipe, holding the lock, when the other ended
        refused_out, refused_err = refused.communicate(timeout=60)
        out, err = winner.communicate(big_pcap.read_bytes(), timeout=180)
    finally:
        for p in procs:
            p.kill()
    assert sorted([winner.returncode, refused.returncode]) == [0, 2], (out, err, refused_err)
    assert b"another writer holds the ledger" in refused_err and not refused_out
    assert json.loads(out)["frames"] == 400_000
    v = verify_ledger(ledger, load_keys(keydir)[2], checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and not v.warnings and v.records == 400_000, (v.problems, v.warnings)


def test_lock_of_a_killed_capture_does_not_block(big_pcap, tmp_path, keydir):
    ledger = tmp_path / "L"
    proc = _start(_capture_args(big_pcap, ledger, keydir, "--segment-records", "5000"))
    _wait_for_holder(ledger, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert (ledger / LOCK_FILE).is_file()  # the file stays; the kernel dropped the flock
    r = cli("recover", ledger, "--signing-key", keydir / "signing.key", "--json")
    assert r.returncode == 0, r.stderr
    v = verify_ledger(ledger, load_keys(keydir)[2], checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and not v.warnings, (v.problems, v.warnings)


def test_lock_in_process(ledger):
    with writer_lock(ledger, "test") as me:
        assert json.loads((ledger / LOCK_FILE).read_bytes())["pid"] == me.pid == os.getpid()
        with pytest.raises(LedgerLockedError, match=rf"pid {os.getpid()} on .* \(test, since "):
            with writer_lock(ledger, "second"):
                pass
    with writer_lock(ledger, "again"):
        pass


def test_verify_during_a_capture_sees_no_problem(big_pcap, tmp_path, keydir):
    """Readers take no lock: each file is renamed into place whole, so verify running while a
    capture seals 2,000 segments reports at most open segments and temporaries (warnings). Today's
    code failed on an open segment sealed and removed between verify's listing and its read."""
    ledger = tmp_path / "L"
    trust = load_keys(keydir)[2]
    proc = _start(_capture_args(big_pcap, ledger, keydir, "--segment-records", "200"))
    runs, kinds = 0, set()
    try:
        while proc.poll() is None:
            if not (ledger / "link=link0").is_dir():
                time.sleep(0.01)
                continue
            res = verify_ledger(ledger, trust)
            assert res.ok, res.problems
            kinds |= {w.kind for w in res.warnings}
            runs += 1
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0 and runs >= 20, (proc.returncode, runs)
    assert kinds <= {"open_segment", "torn_segment", "temp_file"}, kinds


class _RenamedWhileRead(LedgerReader):
    """A reader of a v2 segment left sealed but not yet renamed (seg-N.open beside its seal) that
    does the capture's rename to seg-N.rec itself, at the moment `window` names: just before it
    looks the .open up by name ("look-up") or just before it reads it ("read")."""

    def __init__(self, directory: Path, window: str):
        self.window = window
        super().__init__(directory)

    def _rename_now(self, link: str, index: int) -> None:
        src = self.segment_path(link, index, layout.OPEN)
        if src.exists():
            src.rename(self.segment_path(link, index, layout.RECORDS))

    def exists(self, link: str, index: int, kind: str, *, follow_symlinks: bool) -> bool:
        if kind == layout.OPEN and self.window == "look-up":
            self._rename_now(link, index)
        return super().exists(link, index, kind, follow_symlinks=follow_symlinks)

    def read_segment_file(self, link: str, index: int, kind: str, limit: int | None = None):
        if kind == layout.OPEN and self.window == "read":
            self._rename_now(link, index)
        return super().read_segment_file(link, index, kind, limit)


@pytest.mark.parametrize("window", ["look-up", "read"])
def test_segment_renamed_while_verify_reads_it_is_not_missing(window, ledger):
    """verify during a v2 capture reported records_missing ("neither seg-N.rec nor seg-N.parquet
    exists; seg-N.open is still there") for a segment the writer renamed from .open to .rec after
    verify had found no .rec: the rename is atomic, so once the .open is gone the .rec is there,
    and verify now looks again."""
    lg = load_ledger(ledger)
    assert lg.version == 2
    want = _sealed_records(ledger, 1)
    layout.records_path(ledger, "link0", 1).rename(layout.open_segment_path(ledger, "link0", 1))
    reader = _RenamedWhileRead(ledger, window)
    got = verified_segment(reader, lg, "link0", 1)
    assert bytes(got.records) == want and len(want) == 100 * lg.record_size
    assert layout.records_path(ledger, "link0", 1).exists()  # the rename happened inside the read


# ---- I/O errors are one line naming the file -------------------------------------------

@pytest.fixture()
def tmpfs(tmp_path):
    """A 2 MiB tmpfs at tmp_path/mnt (root only); yields (mount point, remount(options))."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if not IS_ROOT or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                                     capture_output=True).returncode != 0:
        pytest.skip("needs root and mount -t tmpfs")

    def remount(opts: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{opts}", str(mnt)], check=True)
    try:
        yield mnt, remount
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _whole_records(ledger: Path) -> int:
    """Records a recovery must end up with: sealed ones plus whole ones in open segments."""
    n = 0
    for p in ledger.glob("link=*/seg-*.seal.json"):
        n += load_seal(p)["records"]
    for p in ledger.glob("link=*/seg-*.open"):
        seal = p.with_name(p.name.replace(".open", ".seal.json"))
        if not seal.exists() and p.stat().st_size >= segments.HEADER_SIZE:
            n += segments.read_open_segment(p).count
    return n


def _fill_to(mnt: Path, free_pages: int) -> None:
    """Leave exactly `free_pages` 4 KiB pages free on the tmpfs at `mnt`."""
    st = os.statvfs(mnt)
    with open(mnt / "filler", "wb") as f:
        f.write(b"\0" * max(st.f_bavail * st.f_frsize - free_pages * 4096, 0))


# the files a capture writes, by ledger format: v1 seals into Parquet; v2 renames the closed open
# segment to the raw record file (a rename needs no free space) and writes no Parquet
SEALED_WRITES = {1: {"open", "parquet", "leaves", "seal.json"}, 2: {"open", "leaves", "seal.json"}}


@pytest.mark.parametrize("ledger_format", [1, 2], ids=["v1", "v2"])
def test_enospc_at_every_write_is_one_line_naming_the_file(ledger_format, tmpfs, keydir, tmp_path):
    """A full file system at each write of a capture (the free pages move the point): the error
    names the ledger file (never a *.tmp name) and says what to do; once there is room, recover
    seals every whole record written before the error. Today 26 of 67 such messages named no file.
    Both ledger formats: each writes its own set of files (SEALED_WRITES)."""
    mnt, _ = tmpfs
    dk, sk, trust = load_keys(keydir)
    template = tmp_path / "template"
    capture_file(SAMPLE, template, digest_key=dk, signing_key=sk, segment_records=100, ledger_format=ledger_format)
    def sweep(segment_records: int) -> tuple[set[str], int]:
        named = set()
        for free in range(0, 40):
            ledger = mnt / "L"
            shutil.copytree(template, ledger)
            _fill_to(mnt, free)
            try:
                capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=segment_records)
            except StorageError as e:
                msg = str(e)
                assert "\n" not in msg and msg.startswith(f"{e.path}: cannot ") and "No space left on device" in msg
                assert "free space" in msg and e.path.startswith(str(ledger)) and not e.path.endswith(fsio.TMP_SUFFIX), msg
                named.add(Path(e.path).name.split(".", 1)[-1] if Path(e.path).name.startswith("seg-") else Path(e.path).name)
            else:
                break  # room enough for the whole capture from here on
            finally:
                (mnt / "filler").unlink()
            want = _whole_records(ledger)
            recover_ledger(ledger, sk)
            v = verify_ledger(ledger, trust, checkpoint_path(ledger, "link0").read_bytes())
            assert v.ok and not v.warnings and v.records == want >= 294, (free, v.problems, v.warnings, v.records, want)
            shutil.rmtree(ledger)
        return named, free

    # three segments: the sealer thread writes segment k's files while the capture thread writes
    # segment k + 1, so which write meets the full file system first depends on their timing
    concurrent, free = sweep(100)
    assert free > 3 and concurrent <= SEALED_WRITES[ledger_format] | {"checkpoint"}, (free, concurrent)
    shutil.rmtree(mnt / "L")  # the capture that had room
    # one segment: the writes come one after another, so the sweep meets each of them in turn
    named, free = sweep(1000)
    assert free > 3 and SEALED_WRITES[ledger_format] <= named, (free, named)
    assert ledger_format == 1 or "parquet" not in named, named
    # the other writers, in a full file system: recover (the checkpoint), keys rotate, checkpoint --out
    ledger = mnt / "L"
    shutil.rmtree(ledger)
    shutil.copytree(template, ledger)
    _fill_to(mnt, 0)
    other = SigningKey.generate()
    for call, name in ((lambda: recover_ledger(ledger, sk), ledger / "link=link0" / "checkpoint"),
                       (lambda: rotate_keys(ledger, sk, other), ledger / "rotations" / "rotation-0001.json"),
                       (lambda: export_checkpoint(ledger, mnt / "cp"), mnt / "cp")):
        with pytest.raises(StorageError) as e:
            call()
        assert e.value.path == str(name) and "No space left on device; free space" in str(e.value), e.value
    assert not list(mnt.rglob("*.tmp")) and not (ledger / "rotations" / "rotation-0001.json").exists()
    (mnt / "filler").unlink()
    assert verify_ledger(ledger, trust, checkpoint_path(ledger, "link0").read_bytes()).ok
    shutil.rmtree(ledger)
    _fill_to(mnt, 0)  # a new ledger in a full file system: nothing is left behind
    with pytest.raises(StorageError, match=f"^{mnt / 'N' / LOCK_FILE}: cannot write the ledger's writer lock: No "
                                           "space left on device; free space"):
        capture_file(SAMPLE, mnt / "N", digest_key=dk, signing_key=sk)
    assert not (mnt / "N").exists()


def test_enospc_during_a_long_capture_cli(tmpfs, big_pcap, keydir):
    mnt, remount = tmpfs
    ledger = mnt / "L"
    line = _one_error_line(cli(*_capture_args(big_pcap, ledger, keydir, "--segment-records", "3000")))
    path = line.removeprefix("ledgertool: error: ").split(": ")[0]
    assert path.startswith(str(ledger / "link=link0" / "seg-")) and not path.endswith(fsio.TMP_SUFFIX), line
    assert "No space left on device; free space on that file system" in line, line
    assert line.endswith(f"every record written before the error is kept: once that is fixed, `ledgertool recover "
                         f"{ledger}` seals it"), line
    remount("size=64m")
    want = _whole_records(ledger)
    r = cli("recover", ledger, "--signing-key", keydir / "signing.key")
    assert r.returncode == 0, r.stderr
    v = verify_ledger(ledger, load_keys(keydir)[2], checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and not v.warnings and v.records == want > 0, (v.problems, v.warnings, v.records, want)


def test_read_only_ledger(tmpfs, keydir, tmp_path):
    mnt, remount = tmpfs
    ledger = mnt / "L"
    assert cli(*_capture_args(SAMPLE, ledger, keydir, "--segment-records", "100")).returncode == 0
    remount("ro")
    for args in (_capture_args(SAMPLE, ledger, keydir), ["recover", ledger, "--signing-key", keydir / "signing.key"],
                 ["keys", "rotate", ledger, "--old", keydir / "signing.key", "--new", keydir / "signing.key"],
                 ["checkpoint", ledger, "--out", tmp_path / "cp", "--signing-key", keydir / "signing.key"]):
        line = _one_error_line(cli(*args))
        assert line == (f"ledgertool: error: {ledger / LOCK_FILE}: cannot open the ledger's writer lock: Read-only "
                        "file system; the file system is mounted read-only: remount it read-write or use another "
                        "directory"), line
    assert cli("verify", ledger, "--trust", keydir / "verifier.pub").returncode == 0
    r = cli(*_capture_args(SAMPLE, mnt / "new", keydir))
    assert "Read-only file system" in _one_error_line(r) and str(mnt / "new") in r.stderr


@pytest.fixture()
def loop_ext4(tmp_path):
    """An ext4 file system on a loop device over a 64 MiB image on a tmpfs; yields (mount point,
    resize(bytes)): shrinking the image under the mounted file system makes every write past the
    new end fail in the block layer, so write-back and fsync(2) report EIO for real."""
    back, mnt = tmp_path / "back", tmp_path / "ext4"
    back.mkdir()
    mnt.mkdir()
    if not IS_ROOT or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root, losetup and mkfs.ext4")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", str(back)], capture_output=True).returncode:
        pytest.skip("cannot mount tmpfs")
    img = back / "img"
    dev = None
    try:
        subprocess.run(["truncate", "-s", "64M", str(img)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", str(img)], check=True)
        loop = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
        if loop.returncode:
            pytest.skip(f"no loop device here: {loop.stderr.strip()}")
        dev = loop.stdout.strip()
        if subprocess.run(["mount", dev, str(mnt)], capture_output=True).returncode:
            pytest.skip("cannot mount the ext4 image")

        def resize(size: int) -> None:
            os.sync()
            os.truncate(img, size)
            subprocess.run(["losetup", "-c", dev], check=True)
        yield mnt, resize
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        if dev:
            subprocess.run(["losetup", "-d", dev], check=False)
        subprocess.run(["umount", "-l", str(back)], check=False)


def test_eio_is_one_line_naming_the_file_and_nothing_is_lost(loop_ext4, big_pcap, keydir):
    mnt, resize = loop_ext4
    ledger = mnt / "L"
    assert cli(*_capture_args(SAMPLE, ledger, keydir, "--segment-records", "100")).returncode == 0
    resize(16 << 20)
    line = _one_error_line(cli(*_capture_args(big_pcap, ledger, keydir, "--segment-records", "20000")))
    path = line.removeprefix("ledgertool: error: ").split(": ")[0]
    assert path.startswith(str(ledger / "link=link0" / "seg-")) and not path.endswith(fsio.TMP_SUFFIX), line
    assert ": Input/output error; the storage reported an I/O error: check the device (dmesg)" in line, line
    assert line.endswith(f"`ledgertool recover {ledger}` seals it"), line
    resize(64 << 20)
    want = _whole_records(ledger)
    r = cli("recover", ledger, "--signing-key", keydir / "signing.key")
    assert r.returncode == 0, r.stderr
    v = verify_ledger(ledger, load_keys(keydir)[2], checkpoint_path(ledger, "link0").read_bytes())
    assert v.ok and not v.warnings and v.records == want > 294, (v.problems, v.warnings, v.records, want)


def _without_dac() -> list[str]:
    """A command prefix under which chmod 000 denies reading: nothing for a user, setpriv
    without the DAC override capabilities for root."""
    if not IS_ROOT:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("root without setpriv: chmod 000 does not deny reading")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("name", ["ledger.json", "link=link0/seg-00000002.seal.json", "link=link0/checkpoint",
                                  "link=link0/seg-00000003.open"])
def test_unreadable_ledger_file_is_one_line(name, ledger, keydir):
    if name.endswith(".open"):
        shutil.copy(ledger / "link=link0/seg-00000002.leaves", ledger / name)
    os.chmod(ledger / name, 0)
    cmds = [["verify", ledger, "--trust", keydir / "verifier.pub"]]
    if name in ("ledger.json", "link=link0/checkpoint"):
        cmds.append(["checkpoint", ledger, "--out", ledger.parent / "cp"])
    cmds += [_capture_args(SAMPLE, ledger, keydir), ["recover", ledger, "--signing-key", keydir / "signing.key"]]
    for args in cmds:
        r = subprocess.run([*_without_dac(), *CLI, *map(str, args)], capture_output=True, text=True, timeout=120)
        if name == "link=link0/checkpoint" and args[0] in ("capture", "recover"):
            assert r.returncode == 0, r.stderr  # the stored checkpoint is replaced, never read
            continue
        line = _one_error_line(r)
        assert str(ledger / name) in line and "Permission denied" in line and "permissions" in line, line


@pytest.mark.parametrize("how", ["directory", "unreadable"])
def test_checkpoint_is_never_signed_over_a_partial_read(how, ledger, keydir):
    """capture's closing checkpoint read seals 0..n; a read error on seal 1 made it sign a
    checkpoint of 1 segment and exit 0. Now capture reads the chain once, before it captures
    anything, and holds it in memory: a seal it cannot read stops it there (exit 2, nothing
    captured, nothing signed)."""
    seal1 = ledger / "link=link0" / "seg-00000001.seal.json"
    old_cp = checkpoint_path(ledger, "link0").read_bytes()
    prefix = []
    if how == "directory":
        seal1.unlink()
        seal1.mkdir()
    else:
        os.chmod(seal1, 0)
        prefix = _without_dac()
    r = subprocess.run([*prefix, *CLI, *_capture_args(SAMPLE, ledger, keydir, "--segment-records", "100")],
                       capture_output=True, text=True, timeout=120)
    line = _one_error_line(r)
    assert str(seal1) in line, line
    assert not (ledger / "link=link0" / "seg-00000003.seal.json").exists()
    assert checkpoint_path(ledger, "link0").read_bytes() == old_cp
    assert parse_note((ledger / "checkpoint").read_bytes()).checkpoint.size == 3
    r = subprocess.run([*prefix, *CLI, "checkpoint", str(ledger), "--out", str(ledger.parent / "cp"),
                        "--signing-key", str(keydir / "signing.key")], capture_output=True, text=True)
    assert str(seal1) in _one_error_line(r) and not (ledger.parent / "cp").exists()


def test_remaining_os_errors_name_the_file(tmp_path):
    """The CLI's last line of defence: an OSError no library code translated is one line naming
    the file, exit 2 (was `internal error: FileNotFoundError ...`)."""
    spec = next((SAMPLES / "workloads").glob("*.toml"))
    r = cli("workload", "generate", spec, "--out", tmp_path / "no-such-dir" / "w.pcap")
    assert _one_error_line(r) == f"ledgertool: error: {tmp_path / 'no-such-dir'}: No such file or directory"


# ---- files that are not files ----------------------------------------------------------

@pytest.mark.parametrize("name", ["link=link0/seg-00000001.seal.json", "link=link0/seg-00000003.open",
                                  "ledger.json", "rotations/rotation-0001.json", "link=link0/checkpoint"])
def test_fifo_in_a_ledger_never_blocks(name, ledger, keydir, tmp_path):
    """A FIFO in place of a seal made verify block forever. Reads open with O_NONBLOCK and refuse
    anything but a regular file, by name."""
    (ledger / name).parent.mkdir(exist_ok=True)
    (ledger / name).unlink(missing_ok=True)
    os.mkfifo(ledger / name)
    cmds = [["recover", ledger, "--signing-key", keydir / "signing.key"], _capture_args(SAMPLE, ledger, keydir)]
    if name != "link=link0/checkpoint":  # capture and recover replace the checkpoint, never read it
        cmds.append(["verify", ledger, "--trust", keydir / "verifier.pub"])
    else:
        cmds = [["checkpoint", ledger, "--out", tmp_path / "cp"],
                ["verify", ledger, "--trust", keydir / "verifier.pub", "--checkpoint", ledger / name]]
    for args in cmds:
        r = cli(*args)
        if args[0] == "verify" and name.startswith("link=link0/seg-"):
            # verify lists a FIFO at a segment file's name as what it is and reads it never: a finding
            # about the ledger (exit 1), where writers refuse to go on (exit 2)
            assert r.returncode == 1 and "FAIL segment_name_shadow" in r.stdout, (r.stdout, r.stderr)
            assert f"{ledger / name}: a FIFO where a segment file belongs" in r.stdout
            continue
        line = _one_error_line(r)
        assert f"{ledger / name}: is a FIFO (named pipe)" in line, line


SEALED_SHADOWS = {"fifo": "a FIFO", "link-inside": "a symbolic link", "link-outside": "a symbolic link",
                  "directory": "a directory", "device": "a character device"}


@pytest.mark.parametrize("ledger_format,kind", [(2, k) for k in SEALED_SHADOWS] + [(1, "fifo"), (1, "link-outside")],
                         ids=[f"v2-{k}" for k in SEALED_SHADOWS] + ["v1-fifo", "v1-link-outside"])
def test_sealed_record_file_that_is_not_a_file(ledger_format, kind, keydir, tmp_path):
    """A sealed segment's record file (v2 seg-N.rec; v1 seg-N.parquet) replaced by a FIFO, a link
    to a segment file inside the ledger or to a copy outside it, a directory or /dev/zero's device:
    verify, query, recompute, prove and compact never open or follow it, never block, and name it.
    verify lists it (exit 1, segment_name_shadow); the readers refuse the ledger (exit 1) in one
    line naming it; compact compacts the segments before it, then stops naming it (exit 1)."""
    if kind == "device" and not IS_ROOT:
        pytest.skip("mknod needs root")
    dk, sk, _ = load_keys(keydir)
    ledger = tmp_path / "L"
    capture_file(SAMPLE, ledger, digest_key=dk, signing_key=sk, segment_records=100, ledger_format=ledger_format)
    form = layout.RECORDS if ledger_format == 2 else layout.PARQUET
    seg = ledger / "link=link0" / layout.segment_name(1, form)
    outside = tmp_path / "outside"
    shutil.copy(seg, outside)
    before = outside.read_bytes()
    seg.unlink()
    if kind == "fifo":
        os.mkfifo(seg)
    elif kind == "link-inside":
        seg.symlink_to(layout.segment_name(0, form))
    elif kind == "link-outside":
        seg.symlink_to(outside)
    elif kind == "directory":
        seg.mkdir()
    else:
        os.mknod(seg, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero: a reader would never finish
    what = f"{seg}: {SEALED_SHADOWS[kind]} where a segment file belongs"
    trust = keydir / "verifier.pub"

    def one_line(r, code=1) -> str:
        lines = r.stderr.strip().splitlines()
        assert r.returncode == code and len(lines) == 1, (r.returncode, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr
        return lines[0]

    r = cli("verify", ledger, "--trust", trust)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"FAIL segment_name_shadow link link0 segment 1: {what}" in r.stdout, r.stdout
    assert "194 records" in r.stdout  # segments 0 and 2; segment 1's records were not read from anywhere
    line = one_line(cli("query", ledger, "SELECT count(*) FROM records", "--trust", trust))
    assert "does not verify, so it is not queried" in line and what in line, line
    line = one_line(cli("recompute", SAMPLE, "--ledger", ledger, "--digest-key", keydir / "digest.key",
                            "--trust", trust))
    assert "does not verify, so it is not reconciled" in line and what in line, line
    line = one_line(cli("prove", ledger, "--seq", 150, "--out", tmp_path / "p.json"))
    assert line == (f"ledgertool: error: link link0 segment 1: segment_name_shadow: {what}; it was not read; "
                    "run `ledgertool verify`"), line
    assert not (tmp_path / "p.json").exists()
    assert cli("prove", ledger, "--seq", 5, "--out", tmp_path / "p0.json").returncode == 0
    r = cli("compact", ledger)
    line = one_line(r)
    assert line == f"ledgertool: error: {what}; segment 1 of link link0 not compacted (`ledgertool verify`)", line
    assert layout.segment_name(0, layout.PARQUET) in os.listdir(ledger / "link=link0")
    assert layout.segment_name(1, layout.PARQUET) not in os.listdir(ledger / "link=link0") or ledger_format == 1
    assert os.lstat(seg).st_mode & 0o170000 == {"fifo": stat.S_IFIFO, "directory": stat.S_IFDIR,
                                                 "device": stat.S_IFCHR}.get(kind, stat.S_IFLNK)
    assert outside.read_bytes() == before  # nothing wrote through the link


@pytest.mark.parametrize("what", ["capture", "digest key", "workload spec"])
def test_fifo_given_as_an_input_never_blocks(what, tmp_path, keydir):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    if what == "capture":
        args = _capture_args(fifo, tmp_path / "L", keydir)
    elif what == "digest key":
        args = ["capture", SAMPLE, "--ledger", tmp_path / "L", "--digest-key", fifo,
                "--signing-key", keydir / "signing.key"]
    else:
        args = ["workload", "generate", fifo, "--out", tmp_path / "w.pcap"]
    line = _one_error_line(cli(*args))
    assert f"{fifo}: is a FIFO (named pipe)" in line, line
    assert not (tmp_path / "L").exists()


def test_read_regular_refuses_each_kind(tmp_path):
    import socket

    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "f")
    (tmp_path / "l").symlink_to(tmp_path / "d")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "s"))
    try:
        for name, kind in (("d", "a directory"), ("f", "a FIFO"), ("l", "a symbolic link"), ("s", "a socket")):
            with pytest.raises(FileTypeError, match=f"{name}: is {kind}"):
                fsio.read_regular(tmp_path / name)
        with pytest.raises(FileTypeError, match="is a character device"):
            fsio.read_regular("/dev/null", follow=True)
    finally:
        s.close()


# ---- an open segment with a corrupt header -----------------------------------------------

@pytest.fixture()
def torn(ledger, keydir) -> Path:
    """The ledger with segment 2 turned back into the open segment a killed capture leaves."""
    lg = load_ledger(ledger)
    ldir = ledger / "link=link0"
    rec = _sealed_records(ledger, 2)
    for p in ldir.glob("seg-00000002.*"):
        p.unlink()
    _, sk, _ = load_keys(keydir)
    from ledgertool.ledger.checkpoints import write_checkpoint
    write_checkpoint(ledger, lg, "link0", sk)
    st = link_state(ledger, lg, "link0")
    key = OpenSegmentKey.derive(sk, lg.ledger_id)
    hdr = segments.SegmentHeader(lg.ledger_id, "link0", 2, lg.algorithm, lg.strip, lg.digest_key_id,
                                 lg.record_size, lg.digest_size, lg.leaf_records, st.next_seq, 1, key.key_id)
    w = segments.SegmentWriter(layout.open_segment_path(ledger, "link0", 2), hdr, key, ledger)
    w.append(rec, len(rec) // lg.record_size)
    w.close()
    return ledger


# one byte in each header field (offset: field), and in the padding
HEADER_BYTES = {0: "magic", 8: "version", 10: "header size", 12: "record size", 14: "digest size",
                16: "ledger id", 32: "segment index", 36: "leaf records", 40: "first seq", 48: "digest key id",
                64: "link", 96: "algorithm", 128: "strip", 144: "created", 152: "mac key id", 200: "padding"}


@pytest.mark.parametrize("offset", sorted(HEADER_BYTES), ids=[HEADER_BYTES[o] for o in sorted(HEADER_BYTES)])
def test_recover_does_what_verify_says_for_a_corrupt_header(offset, torn, keydir):
    """Corrupt one byte of the open segment's header: verify's warning says whether `recover`
    discards it or seals what the device's MACs authenticate, recover does exactly that (reporting
    the bytes it discards), and the ledger verifies with no warning after; a capture after it
    works. Today recover and capture both stopped at exit 2 on most of these while verify said
    recover discards the segment. In format v2 the header is bound into block 0's MAC: a byte
    the header checks do not look at (creation time, MAC key id, padding) makes recover refuse
    the segment (exit 1, nothing sealed), and the capture after it refuses too."""
    dk, sk, trust = load_keys(keydir)
    path = layout.open_segment_path(torn, "link0", 2)
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x80 if offset in (64, 96, 128) else 0x5A  # names: a non-ASCII byte
    path.write_bytes(raw)
    warn = [w for w in verify_ledger(torn, trust).warnings if w.segment == 2]
    assert len(warn) == 1 and warn[0].kind in ("open_segment", "torn_segment"), warn
    seals = "`ledgertool recover` (or the next capture) seals it" in warn[0].detail
    assert seals or "`ledgertool recover` discards it" in warn[0].detail, warn[0].detail
    assert seals == (offset in (144, 152, 200)), warn[0].detail
    if seals:  # the MAC chain starts from the header: nothing of the segment authenticates
        why = "names MAC key" if offset == 152 else r"block 0 \(byte 256\) fails authentication"
        with pytest.raises(OpenSegmentRefusedError, match=why):
            recover_ledger(torn, sk)
        with pytest.raises(OpenSegmentRefusedError, match=why):
            capture_file(SAMPLE, torn, digest_key=dk, signing_key=sk, segment_records=100)
        assert path.read_bytes() == raw and verify_ledger(torn, trust).records == 200
        return
    res = recover_ledger(torn, sk)
    assert not res.sealed and [(d["path"], d["bytes"]) for d in res.discarded] == [(str(path), len(raw))]
    v = verify_ledger(torn, trust, checkpoint_path(torn, "link0").read_bytes())
    assert v.ok and not v.warnings and v.records == 200, (v.problems, v.warnings)
    capture_file(SAMPLE, torn, digest_key=dk, signing_key=sk, segment_records=100)
    v = verify_ledger(torn, trust, checkpoint_path(torn, "link0").read_bytes())
    assert v.ok and not v.warnings and v.records == 494, (v.problems, v.warnings)


def test_capture_after_a_corrupt_header_reports_the_discard(torn, keydir):
    path = layout.open_segment_path(torn, "link0", 2)
    raw = bytearray(path.read_bytes())
    raw[0] ^= 0xFF
    path.write_bytes(raw)
    r = cli(*_capture_args(SAMPLE, torn, keydir, "--segment-records", "100"))
    assert r.returncode == 0, r.stderr
    assert f"warning: recovery discarded {path} ({len(raw)} bytes: segment header does not decode (not a ledgertool " \
           "segment (bad magic at byte 0)): its records cannot be attributed)" in r.stderr, r.stderr
