"""cffi build script (out-of-line API mode) for ledgertool._native, and for the optional
kernel-bypass source modules ledgertool._source_xdp and ledgertool._source_dpdk.

Not shipped in the wheel. cffi sees only the CDEF blocks of native/include/ledgertool.h and
ledgertool_testing.h (and of native/bypass/source_xdp.h, source_dpdk.h for the optional modules),
plus lt_package_version(): the ledgertool version this module was built for, which
ledgertool/_binding.py checks at import together with LT_ABI_VERSION.

The optional modules are separate shared objects so that _native never links libxdp, libbpf or
DPDK: a wheel built with them still imports where those libraries are absent (only
`capture xdp:`/`dpdk:` then fail, exit 2). Each is built only when pkg-config finds its
libraries; LEDGERTOOL_WITHOUT=xdp,dpdk leaves them out on purpose (OPTIONAL_BUILDERS names the
ones this machine builds; setup.py reads it).
"""

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
HEADER = HERE / "include" / "ledgertool.h"
TESTING_HEADER = HERE / "include" / "ledgertool_testing.h"
# name -> (pkg-config packages, source file, its CDEF header), both in native/bypass/ (not in src/,
# whose every .c file is part of _native: the aarch64 cross-compile test and fuzz.sh build them all)
OPTIONAL = {
    "xdp": ("libxdp libbpf", "source_xdp.c", "source_xdp.h"),
    "dpdk": ("libdpdk", "source_dpdk.c", "source_dpdk.h"),
}
SOURCES = sorted(str(p.relative_to(HERE.parent)) for p in (HERE / "src").glob("*.c"))


def cdef_block(header: Path = HEADER) -> str:
    text = header.read_text()
    m = re.search(r"/\* CDEF BEGIN \*/(.*)/\* CDEF END \*/", text, re.S)
    if not m:
        raise RuntimeError(f"{header}: CDEF markers missing")
    return m.group(1)


def package_version() -> str:
    """ledgertool.__version__, read from ledgertool/_version.py (the package is not importable
    yet)."""
    init = HERE.parent / "ledgertool" / "_version.py"
    m = re.search(r'^__version__ = "([^"\\]+)"$', init.read_text(), re.M)
    if not m:
        raise RuntimeError(f"{init}: no __version__ line")
    return m.group(1)


# Defined in each cffi module itself (_native and the optional ones): what the binding's import
# check compares with the package (ledgertool/_binding.py, check_build).
BINDING_CDEF = "const char *lt_package_version(void);"
PACKAGE_VERSION_SOURCE = (
    "static const char *lt_package_version(void) { return LT_PACKAGE_VERSION; }\n"
)
BINDING_SOURCE = (
    '#include "ledgertool.h"\n#include "ledgertool_testing.h"\n' + PACKAGE_VERSION_SOURCE
)
# An optional module takes LT_ABI_VERSION from ledgertool.h, which it is compiled with.
OPTIONAL_CDEF = "#define LT_ABI_VERSION ...\n" + BINDING_CDEF
VERSION_MACROS = [("LT_PACKAGE_VERSION", json.dumps(package_version()))]


def pkg_config(packages: str) -> tuple[list[str], list[str]] | None:
    """(compile flags, link flags) of `packages`, or None when pkg-config does not find them all."""
    try:
        cflags = subprocess.run(
            ["pkg-config", "--cflags", *packages.split()], capture_output=True, text=True
        )
        libs = subprocess.run(
            ["pkg-config", "--libs", *packages.split()], capture_output=True, text=True
        )
    except OSError:  # no pkg-config at all
        return None
    if cflags.returncode or libs.returncode:
        return None
    return shlex.split(cflags.stdout), shlex.split(libs.stdout)


ffibuilder = FFI()
ffibuilder.cdef(cdef_block() + cdef_block(TESTING_HEADER) + BINDING_CDEF)
ffibuilder.set_source(
    "ledgertool._native",
    BINDING_SOURCE,
    sources=SOURCES,
    include_dirs=[str(HERE.relative_to(HERE.parent) / "include"), "native/src"],
    # LEDGERTOOL_SANITIZE=1: ASan + UBSan, and -fno-wrapv to undo the -fwrapv that Python's own
    # CFLAGS add (with it signed overflow is defined and UBSan cannot report it).
    extra_compile_args=[
        "-O3",
        "-std=gnu11",
        "-fno-strict-aliasing",
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
        "-pthread",
    ]
    + (
        ["-g", "-fsanitize=address,undefined", "-fno-wrapv"]
        if os.environ.get("LEDGERTOOL_SANITIZE")
        else []
    ),
    # LEDGERTOOL_PORTABLE_ONLY=1 builds the portable C paths alone (what arm64 gets).
    define_macros=VERSION_MACROS
    + ([("LT_PORTABLE_ONLY", "1")] if os.environ.get("LEDGERTOOL_PORTABLE_ONLY") else []),
    extra_link_args=["-pthread"]
    + (["-fsanitize=address,undefined"] if os.environ.get("LEDGERTOOL_SANITIZE") else []),
)


def optional_builder(name: str) -> FFI | None:
    """The builder of ledgertool._source_NAME, or None when its libraries are not found here."""
    if name in {w.strip() for w in os.environ.get("LEDGERTOOL_WITHOUT", "").split(",")}:
        return None
    packages, source, header = OPTIONAL[name]
    flags = pkg_config(packages)
    if flags is None:
        return None
    cflags, libs = flags
    b = FFI()
    b.cdef(cdef_block(HERE / "bypass" / header) + OPTIONAL_CDEF)
    b.set_source(
        f"ledgertool._source_{name}",
        f'#include "ledgertool.h"\n#include "{header}"\n' + PACKAGE_VERSION_SOURCE,
        sources=[f"native/bypass/{source}"],
        define_macros=VERSION_MACROS,
        include_dirs=["native/include", "native/src", "native/bypass"],
        extra_compile_args=[
            "-O2",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Wno-unused-parameter",
            "-pthread",
            *cflags,
        ],
        extra_link_args=["-pthread", *libs],
    )
    return b


xdp_builder = optional_builder("xdp")
dpdk_builder = optional_builder("dpdk")
OPTIONAL_BUILDERS = [f"{n}_builder" for n in OPTIONAL if globals()[f"{n}_builder"] is not None]

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
    for n in OPTIONAL:
        b = globals()[f"{n}_builder"]
        if b is None:
            why = (
                "LEDGERTOOL_WITHOUT"
                if n in os.environ.get("LEDGERTOOL_WITHOUT", "")
                else f"pkg-config does not find {OPTIONAL[n][0]}"
            )
            print(f"ledgertool._source_{n}: not built ({why})")
        else:
            b.compile(verbose=True)
