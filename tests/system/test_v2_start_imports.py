"""What `capture` and `verify` of a v2 ledger load: neither numpy nor pyarrow (0.1-0.2 s of CPU
each command would pay at start-up; docs/benchmarks.md, "CLI start-up"), nor typer's pydantic
coercion, nor the network's certificates and clients, nor what queries and clusters use. A real
interpreter: the process's modules are what is under test, so each command runs through the
command line's `_run` in a fresh child, which prints the modules loaded after each command. The
child starts without `site` (-S), the package and its dependencies on its path: what a site
hook of the machine's loads (a certifi hook, say) would hide what the commands load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "sample.pcapng"
#: What neither command loads: typer's pydantic coercion (~0.2 s of CPU; cli/coercion.py), rich
#: (their lines go to a pipe here: plain text; cli/render.py), the certificates and clients of the
#: network (witness and `checkpoint --witness` only), and what queries, v1 ledgers and clusters use.
NOT_LOADED = (
    *("pydantic", "pydantic_core", "rich", "certifi", "ssl", "http", "urllib.request", "fsspec"),
    *("numpy", "pyarrow", "duckdb", "dask", "distributed"),
)

DRIVER = """
import json, sys

runs, path = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.path[:0] = path
from ledgertool.cli.app import _run

out = []
for argv in runs:
    sys.argv = ["ledgertool", *argv]
    rc = _run()
    out.append({"rc": rc, "modules": sorted(sys.modules)})
print("RESULT " + json.dumps(out))
"""


def _run_in_child(*argvs: list[str]) -> list[dict]:
    path = [str(REPO)] + [p for p in sys.path if p and Path(p).is_dir()]
    r = subprocess.run(
        [sys.executable, "-S", "-c", DRIVER, json.dumps(argvs), json.dumps(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in ("numpy", "pyarrow")]


def capture_argv(ledger: Path, keydir: Path, *extra: str) -> list[str]:
    """`capture` of the sample into `ledger` with `keydir`'s keys, quietly, then `extra`."""
    return [
        "capture",
        str(SAMPLE),
        "--ledger",
        str(ledger),
        "--signing-key",
        str(keydir / "signing.key"),
        "--digest-key",
        str(keydir / "digest.key"),
        "--quiet",
        *extra,
    ]


def _capture_and_verify(ledger: Path, keydir: Path) -> tuple[list[str], list[str]]:
    capture = capture_argv(ledger, keydir, "--segment-records", "100")
    verify = ["verify", str(ledger), "--trust", str(keydir / "verifier.pub"), "--quiet"]
    return capture, verify


def test_capture_and_verify_of_a_v2_ledger_load_no_numpy_or_pyarrow(tmp_path, keydir):
    ledger = tmp_path / "L"
    cap, ver = _run_in_child(*_capture_and_verify(ledger, keydir))
    assert cap["rc"] == 0 and ver["rc"] == 0
    assert sorted(p.name for p in (ledger / "link=link0").glob("*.rec")) == [
        "seg-00000000.rec",
        "seg-00000001.rec",
        "seg-00000002.rec",
    ]  # v2: raw record files, 3 sealed
    assert (
        "ledgertool.capture.run" in cap["modules"] and "ledgertool.verify.ledger" in ver["modules"]
    )
    assert _heavy(cap["modules"]) == []
    assert _heavy(ver["modules"]) == []


def _loaded(modules: list[str], names) -> list[str]:
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_capture_and_verify_load_no_pydantic_network_or_query_modules(tmp_path, keydir):
    """Each command in a child of its own: what a `capture`, then what a `verify`, loads."""
    ledger = tmp_path / "L"
    capture, verify = _capture_and_verify(ledger, keydir)
    (cap,) = _run_in_child(capture)
    (ver,) = _run_in_child(verify)
    assert cap["rc"] == 0 and ver["rc"] == 0
    assert "ledgertool.capture.run" in cap["modules"] and "typer" in cap["modules"]
    assert "ledgertool.verify.ledger" in ver["modules"] and "typer" in ver["modules"]
    assert _loaded(cap["modules"], NOT_LOADED) == []
    assert _loaded(ver["modules"], NOT_LOADED) == []
    assert "ledgertool.verify.many" not in ver["modules"]  # one ledger: no fan-out over many


def test_the_import_check_sees_pydantic_where_typer_coerces_with_it(tmp_path, keydir):
    """The check above sees what typer's own coercion loads: a --segment-records value the plain
    coercion leaves to pydantic's adapter (spaces around the digits), which reads it alike."""
    ledger = tmp_path / "L"
    capture, _ = _capture_and_verify(ledger, keydir)
    (cap,) = _run_in_child([*capture, "--segment-records", " 100 "])
    assert cap["rc"] == 0
    assert "pydantic" in cap["modules"]
    assert len(list((ledger / "link=link0").glob("*.rec"))) == 3  # 100 a segment, as asked


def test_capture_of_a_v1_ledger_still_loads_pyarrow(tmp_path, keydir):
    """The check above sees what a command loads: a v1 capture writes Parquet, with pyarrow."""
    capture = [
        "capture",
        str(SAMPLE),
        "--ledger",
        str(tmp_path / "L1"),
        "--signing-key",
        str(keydir / "signing.key"),
        "--digest-key",
        str(keydir / "digest.key"),
        "--quiet",
        "--ledger-format",
        "v1",
    ]
    (cap,) = _run_in_child(capture)
    assert cap["rc"] == 0
    assert "pyarrow.parquet" in cap["modules"] and "numpy" in cap["modules"]
