"""cffi build script (out-of-line API mode) for ledgertool._native.

Not shipped in the wheel. cffi sees only the CDEF block of native/include/ledgertool.h.
"""
import os
import re
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
HEADER = HERE / "include" / "ledgertool.h"
SOURCES = sorted(str(p.relative_to(HERE.parent)) for p in (HERE / "src").glob("*.c"))


def cdef_block() -> str:
    text = HEADER.read_text()
    m = re.search(r"/\* CDEF BEGIN \*/(.*)/\* CDEF END \*/", text, re.S)
    if not m:
        raise RuntimeError(f"{HEADER}: CDEF markers missing")
    return m.group(1)


ffibuilder = FFI()
ffibuilder.cdef(cdef_block())
ffibuilder.set_source(
    "ledgertool._native",
    '#include "ledgertool.h"',
    sources=SOURCES,
    include_dirs=[str(HERE.relative_to(HERE.parent) / "include"), "native/src"],
    # LEDGERTOOL_SANITIZE=1: ASan + UBSan, and -fno-wrapv to undo the -fwrapv that Python's own
    # CFLAGS add (with it signed overflow is defined and UBSan cannot report it).
    extra_compile_args=["-O3", "-std=gnu11", "-fno-strict-aliasing", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-pthread"] + (["-g", "-fsanitize=address,undefined", "-fno-wrapv"]
                                                    if os.environ.get("LEDGERTOOL_SANITIZE") else []),
    # LEDGERTOOL_PORTABLE_ONLY=1 builds the portable C paths alone (what arm64 gets).
    define_macros=[("LT_PORTABLE_ONLY", "1")] if os.environ.get("LEDGERTOOL_PORTABLE_ONLY") else [],
    extra_link_args=["-pthread"] + (["-fsanitize=address,undefined"] if os.environ.get("LEDGERTOOL_SANITIZE") else []),
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
