"""Shared fixtures of both tiers: the corpus location, keys, ledgers built once a session, and the
CLI run in this process (`cli`) or, where the process is under test, as a subprocess (`run_cli`)."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# Test modules import helpers from each other (`from test_digests import reference`), across tiers.
sys.path[:0] = [str(TESTS / "unit"), str(TESTS / "system")]
# Bytecode caches are written (git ignores them) even where PYTHONDONTWRITEBYTECODE is set: else
# every run and every pytest-xdist worker compiles ledgertool again and rewrites the assertions of
# every test module (~5 s of CPU a worker), and so does each process the system tests start.
sys.dont_write_bytecode = False
CORPUS = Path(os.environ.get("LEDGERTOOL_CORPUS", REPO.parent / "shared" / "corpus"))
SAMPLES = REPO / "samples"


def corpus_rows(manifest: str = "manifest.csv") -> list[dict]:
    path = CORPUS / manifest
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


needs_corpus = pytest.mark.skipif(
    not (CORPUS / "manifest.csv").is_file(),
    reason=f"corpus not found at {CORPUS} (set LEDGERTOOL_CORPUS)",
)


@pytest.fixture(scope="session")
def keydir(tmp_path_factory) -> Path:
    from ledgertool.keyfiles import generate_keys

    d = tmp_path_factory.mktemp("keys")
    generate_keys(d)
    return d


@pytest.fixture(scope="session")
def other_keydir(tmp_path_factory) -> Path:
    from ledgertool.keyfiles import generate_keys

    d = tmp_path_factory.mktemp("otherkeys")
    generate_keys(d)
    return d


@pytest.fixture(autouse=True)
def _sigint_as_a_shell_gives_it():
    """Each test starts with SIGINT as a terminal's foreground job has it: Python's handler, not
    blocked. A process the test starts inherits an ignored SIGINT and the starting thread's signal
    mask, and what ran before in this worker (a library's threads, a fixture) may have left either
    changed: a child signalled with Ctrl-C under test then never saw it (seen once in a full run:
    three SIGINT tests waited out their timeouts)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


@pytest.fixture(autouse=True)
def _fresh_device_state(request):
    """The session's shared keys sign copies of the same ledgers (one ledger id) in many tests: each
    test starts with no protected state beside them (`KEYFILE.state`, written by the CLI's signing
    commands), as a device signing only that copy would. The protected state's own tests use keys
    of their own."""
    dirs = [
        request.getfixturevalue(n) for n in ("keydir", "other_keydir") if n in request.fixturenames
    ]
    yield
    for d in dirs:
        if isinstance(d, Path):  # (a module may name a keydir of its own, of another type)
            shutil.rmtree(d / "signing.key.state", ignore_errors=True)


def load_keys(d: Path):
    """(DigestKey, SigningKey, TrustBundle) from a `keys generate` directory."""
    from ledgertool.keyfiles import DigestKey, SigningKey, TrustBundle

    return (
        DigestKey.load(d / "digest.key"),
        SigningKey.load(d / "signing.key"),
        TrustBundle.load(d / "verifier.pub"),
    )


@pytest.fixture()
def on_path(request):
    """Force (algorithm name, CPU path) from the test's parameter, then return to the CPUID
    choice."""
    from ledgertool.algorithms import ALGORITHMS
    from ledgertool.digest.engine import cpu_path, force_cpu_path

    name, path = request.param
    alg = ALGORITHMS[name]
    force_cpu_path(alg, path)
    assert cpu_path(alg) == path
    yield alg
    force_cpu_path(alg, None)


def run_cli(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run `ledgertool ARGS` in a subprocess exactly as a user would (entry point `main`). Only for
    tests of the process itself (signals, pipes, start-up, exit under the interpreter); the rest use
    `cli`, which runs the same code in this process in a hundredth of the time."""
    return subprocess.run(
        [sys.executable, "-c", "from ledgertool.cli.app import main; main()", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


@dataclass(frozen=True)
class CliResult:
    """What `ledgertool ARGS` gave: its exit code and what it wrote (the attribute names of
    subprocess.CompletedProcess, so a test reads either the same way)."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


# The modules of ledgertool.cli that hold rich consoles made at import: each `cli` call gives them
# fresh ones bound to its own streams (colour and width decided as for a pipe, as in a subprocess).
_CONSOLE_MODULES = ("app", "provision", "workload", "conformance", "audit")


def cli(*args, cwd: Path | None = None) -> CliResult:
    """Run `ledgertool ARGS` in this process through the same entry as the console script
    (`ledgertool.cli.app._run`: the same error mapping, exit codes and one-line messages as `main`,
    less its final os._exit), with stdout and stderr captured."""
    import importlib

    from ledgertool.cli import app as appmod
    from ledgertool.cli.render import SafeConsole

    argv = ["ledgertool", *map(str, args)]
    stdout, stderr = io.StringIO(), io.StringIO()
    mods = [importlib.import_module(f"ledgertool.cli.{m}") for m in _CONSOLE_MODULES]
    saved = [(m, dict((k, getattr(m, k)) for k in ("out", "err") if hasattr(m, k))) for m in mods]
    old_argv, old_cwd, old_debug = sys.argv, os.getcwd(), appmod.STATE["debug"]
    try:
        sys.argv = argv
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            for m, consoles in saved:
                for k in consoles:
                    setattr(m, k, SafeConsole(stderr=(k == "err"), soft_wrap=True))
            code = appmod._run()
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        for m, consoles in saved:
            for k, c in consoles.items():
                setattr(m, k, c)
        sys.argv = old_argv
        os.chdir(old_cwd)
        appmod.STATE["debug"] = old_debug
    return CliResult(tuple(argv[1:]), code, stdout.getvalue(), stderr.getvalue())


def capture_windows(ledger: Path, keydir: Path, source: Path | None = None, *extra) -> CliResult:
    """`ledgertool capture SOURCE --ledger LEDGER --tiers windows EXTRA...` with `keydir`'s keys
    (default SOURCE: samples/sample.pcap): a ledger of window records alone."""
    return cli(
        "capture", source or SAMPLES / "sample.pcap", "--ledger", ledger, "--tiers", "windows",
        *extra, "--signing-key", keydir / "signing.key", "--digest-key", keydir / "digest.key",
    )  # fmt: skip


def capture_cli(source: Path, ledger: Path, keydir: Path, *extra) -> CliResult:
    """`ledgertool capture SOURCE --ledger LEDGER EXTRA...` with `keydir`'s keys."""
    return cli(
        "capture", source, "--ledger", ledger, "--digest-key", keydir / "digest.key",
        "--signing-key", keydir / "signing.key", *extra,
    )  # fmt: skip


def recompute_cli(source: Path, ledger: Path, keydir: Path, *extra) -> CliResult:
    """`ledgertool recompute SOURCE --ledger LEDGER EXTRA...` with `keydir`'s digest key, trusting
    its verifier.pub."""
    return cli(
        "recompute", source, "--ledger", ledger, "--digest-key", keydir / "digest.key",
        "--trust", keydir / "verifier.pub", *extra,
    )  # fmt: skip


def cli_in_process(*args) -> tuple[int, str, str]:
    """`ledgertool ARGS` in this process (`cli`): (exit code, stdout, stderr)."""
    r = cli(*args)
    return r.returncode, r.stdout, r.stderr


def run_killing_a_worker(work, what: str) -> dict:
    """Run `work(client)` on a LocalCluster of two worker processes and SIGKILL the first worker
    that holds tasks while they run (a lost worker gives the right answer or a clear
    ClusterError, never a partial one). Returns {"res": its result} or {"err": the ClusterError}."""
    import signal
    import threading
    import time

    from ledgertool.errors import ClusterError
    from ledgertool.verify.cluster import ClusterAddress, connect

    with connect(ClusterAddress(local_workers=2)) as c:
        c.wait_for_workers(2, timeout=60)
        pids = c.run(os.getpid)
        got: dict = {}

        def run():
            try:
                got["res"] = work(c)
            except ClusterError as e:
                got["err"] = e

        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + 60
        while not any(c.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.005)
        busy = [w for w, tasks in c.processing().items() if tasks]
        assert busy and t.is_alive(), f"the kill must land while {what}"
        os.kill(pids[busy[0]], signal.SIGKILL)
        t.join(120)
        assert not t.is_alive()
    return got


@dataclass(frozen=True)
class BuiltLedger:
    """A ledger `built_ledger` captured, and what capture_file returned for it."""

    path: Path
    result: object  # ledgertool.capture.run.CaptureResult

    def copy_to(self, dest: Path) -> Path:
        """A copy of the ledger at `dest` (for a test that changes it); returns `dest`."""
        shutil.copytree(self.path, dest, symlinks=True)
        return dest


@pytest.fixture(scope="session")
def built_ledger(tmp_path_factory, keydir):
    """`built_ledger(source, **capture_file options)`: the capture of `source` into a ledger
    signed with `keydir`'s keys, made once per session (per xdist worker) for each source and set
    of options. Read it in place, or take a copy (`.copy_to`) to change it: never change it in
    place, other tests read it after yours."""
    from ledgertool.capture.run import capture_file

    dk, sk, _ = load_keys(keydir)
    built: dict[tuple, BuiltLedger] = {}

    def get(source: Path, **options) -> BuiltLedger:
        key = (str(source), tuple(sorted(options.items())))
        if key not in built:
            out = tmp_path_factory.mktemp("built") / "L"
            res = capture_file(source, out, digest_key=dk, signing_key=sk, **options)
            built[key] = BuiltLedger(out, res)
        return built[key]

    return get


@pytest.fixture()
def sample_ledger(tmp_path, built_ledger) -> Path:
    """samples/sample.pcapng captured into a fresh ledger (tmp_path / "L"), 100 records a segment
    (294 frames: 3 segments), signed with `keydir`'s keys (a copy of one built once a session)."""
    return built_ledger(SAMPLES / "sample.pcapng", segment_records=100).copy_to(tmp_path / "L")


def go_build(tmp_path_factory, gopath: Path, package: Path, source: str) -> Path:
    """Build tests/SOURCE (a Go checker) offline from GOPATH into a fresh directory; skip where Go
    or `package` (a Debian golang-* source package) is not installed (.ci/run installs both)."""
    if not shutil.which("go") or not package.is_dir():
        pytest.skip(
            f"Go toolchain or {package} not installed (.ci/run installs golang-go and "
            "golang-golang-x-mod-dev)"
        )
    d = tmp_path_factory.mktemp(Path(source).stem)
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": str(gopath), "GOCACHE": str(d / "cache")}
    exe = d / Path(source).stem
    r = subprocess.run(
        ["go", "build", "-o", str(exe), str(TESTS / source)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return exe


_DUCKDB: list = []


def emptied_duckdb():
    """One DuckDB connection (ledgertool's open_duckdb) for the tests that pair many small tables:
    opening one costs ~30 ms of CPU, more than a small pairing. Every table and view the last
    user made is dropped first, so what the next one sees is a fresh connection's state."""
    from ledgertool.reconcile.query import open_duckdb

    if not _DUCKDB:
        # one thread: these pairings are a few rows, and a worker's second DuckDB thread only
        # contends with the other pytest worker for the machine's cores (15-25 % more CPU)
        _DUCKDB.append(open_duckdb({"threads": 1}))
    con = _DUCKDB[0]
    views = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    for (name,) in views:
        con.execute(f'DROP VIEW "{name}"')
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
        con.execute(f'DROP TABLE "{name}"')
    return con


def pytest_collection_finish(session) -> None:
    """What collection built (every test module, ledgertool, scapy's layers) lives for the whole
    run: moved out of the collector's reach, so that each full collection does not walk it again."""
    import gc

    gc.freeze()
