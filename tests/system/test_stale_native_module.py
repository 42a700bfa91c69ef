"""A stale compiled module (built from another header or version) is one error line at import, exit
2, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cffi import FFI

from ledgertool import __version__, _binding


@pytest.fixture(scope="module")
def stale_module(tmp_path_factory):
    """A real compiled cffi module as a build from before the check has it: constants but no
    LT_ABI_VERSION and no lt_package_version()."""
    out = tmp_path_factory.mktemp("stale")
    b = FFI()
    b.cdef("#define LT_OK 0\n#define LT_RECORD_FIXED 32\n")
    b.set_source("stale_native", "#define LT_OK 0\n#define LT_RECORD_FIXED 32\n")
    b.compile(tmpdir=str(out))
    return out


def test_stale_native_module_is_one_error_at_import(stale_module):
    """The regression: a .so from before a pull failed with an AttributeError deep in a command.
    Now the first import of native code refuses it, naming the file and the rebuild command."""
    code = (
        "import sys, importlib; sys.path.insert(0, sys.argv[1]); "
        "sys.modules['ledgertool._native'] = importlib.import_module('stale_native'); "
        "from ledgertool.errors import NativeModuleError\n"
        "try:\n import ledgertool.digest.engine\n"
        "except NativeModuleError as e:\n print(e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(stale_module)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip()
    assert "\n" not in line
    assert "stale_native" in line and "(ABI unknown, ledgertool unknown)" in line
    assert (
        f"(ABI {_binding.ABI_VERSION}, ledgertool {__version__})" in line
        and "pip install -e ." in line
    )


def test_cli_reports_a_stale_module_in_one_line_exit_2(stale_module, tmp_path):
    code = (
        "import sys, importlib; sys.path.insert(0, sys.argv[1]); "
        "sys.modules['ledgertool._native'] = importlib.import_module('stale_native'); "
        "sys.argv = ['ledgertool', 'algorithms']; "
        "from ledgertool.cli import main; main()"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(stale_module), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "pip install -e ." in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
