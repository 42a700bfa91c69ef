"""The one native boundary (ledgertool/_binding.py) and the shape of native/src.

- The CDEF blocks cffi compiles are pinned, by digest, to LT_ABI_VERSION: changing a declaration
  without raising the version fails here, so the binding's import check can be trusted.
- A compiled module from other sources (another ABI, another package version, or one older than
  the check) is refused at import with one NativeModuleError asking for a rebuild.
- Only _binding.py imports ledgertool._native or the optional source modules.
- Ids, flags and sizes in Python come from the header (no literals drifting from C).
- No cycle in native/src: neither in the #include graph nor, by symbol ownership, in the call graph.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import runpy
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import python_source
from conftest import REPO

from ledgertool import __version__, _binding
from ledgertool.algorithms import ALGORITHMS, STRIP_MODES
from ledgertool.digest import record
from ledgertool.errors import NativeModuleError

NATIVE = REPO / "native"
BUILD = runpy.run_path(str(NATIVE / "build_ffi.py"), run_name="build_ffi")

# LT_ABI_VERSION -> SHA-256 of the declarations cffi compiles: the CDEF blocks of _native and of the
# optional modules, and the binding's own. A new version gets a new line; old lines stay, so a
# version is never reused.
CDEF_DIGESTS = {
    1: "a38f52969368ae9e7631b2b7290ab62dc0ad97ef5c9c6d89273fa25458fedd8b",
    # strip fallbacks, lt_reader_open_fd, lt_rec_records, lt_rec_leaves, lt_rec_file,
    # lt_segment_writer_*, lt_once_each, lt_pair_in_order, lt_reader_next_before,
    # lt_reader_pcapng_context, lt_mset_add, lt_mset_accelerated, lt_second_runs, lt_rec_file_mset
    2: "c4ccb0a638f9fa6342b9ec370c80b805002e0895b3ff19299c368847e07fc8dc",
    # lt_mset_add_parts, lt_window_* (window records), LT_REC_READ, LT_LEAF_BLAKE3; one version
    # until the next release
    3: "1f05447cd7d3bd9c673e30b27a4874b2a0b617e8b238bf0c8c5562af41b409da",
    # lt_segment_writer_direct, lt_segment_writer_trim (segment files by direct I/O);
    # LT_FMT_ERF, lt_reader_declare_losses; lt_reader_info.damaged_*, warning; lt_rec_from_columns;
    # LT_WINDOW_PATH_*, lt_window_path_supported, lt_window_path_name (lt_window_new's `path`);
    # lt_mset_add_parts_ids, lt_mset_parts_where, lt_rec_file_mset's ids, lt_engine_fill_select,
    # lt_pread_records
    4: "fd1e5fe0849162b319d0be2661ce546e59a616b895b375fc5ee4888e55108f43",
}


def cdef_text() -> str:
    block = BUILD["cdef_block"]
    optional = "".join(
        block(NATIVE / "bypass" / header) for _, _, header in BUILD["OPTIONAL"].values()
    )
    return (
        block()
        + block(BUILD["TESTING_HEADER"])
        + BUILD["BINDING_CDEF"]
        + optional
        + BUILD["OPTIONAL_CDEF"]
    )


def header_abi_version() -> int:
    m = re.search(
        r"^#define LT_ABI_VERSION (\d+)$", (NATIVE / "include" / "ledgertool.h").read_text(), re.M
    )
    assert m, "ledgertool.h declares no LT_ABI_VERSION"
    return int(m.group(1))


def test_cdef_blocks_are_pinned_to_the_abi_version():
    version = header_abi_version()
    digest = hashlib.sha256(cdef_text().encode()).hexdigest()
    assert CDEF_DIGESTS.get(version) == digest, (
        f"the CDEF blocks changed (sha256 {digest}): raise LT_ABI_VERSION in ledgertool.h and "
        f"_binding.ABI_VERSION, and add {{{version + 1}: {digest!r}}} to CDEF_DIGESTS"
    )
    assert _binding.ABI_VERSION == version == _binding.lib.LT_ABI_VERSION


def test_the_built_module_names_this_package_version():
    assert _binding.ffi.string(_binding.lib.lt_package_version()).decode() == __version__
    _binding.check_build(_binding._native)  # the module under test passes its own check


@pytest.mark.parametrize("m", [_binding.XDP, _binding.DPDK], ids=["xdp", "dpdk"])
def test_optional_modules_carry_the_same_versions(m):
    if importlib.util.find_spec(m.name) is None:
        pytest.skip(f"{m.name} is not built on this machine")
    mod = _binding.optional_module(m, "test")  # checks the build
    assert mod.lib.LT_ABI_VERSION == _binding.ABI_VERSION
    assert mod.ffi.string(mod.lib.lt_package_version()).decode() == __version__


def test_another_abi_or_package_version_asks_for_a_rebuild():
    abi = _binding.ABI_VERSION
    with pytest.raises(
        NativeModuleError,
        match=rf"was built from other sources \(ABI {abi}, ledgertool "
        rf"[^)]+\) than this checkout \(ABI {abi + 1}, .*pip install -e \.",
    ):
        _binding.check_build(_binding._native, abi_version=abi + 1)
    with pytest.raises(
        NativeModuleError, match=rf"than this checkout \(ABI {abi}, ledgertool 9\.9\.9\)"
    ):
        _binding.check_build(_binding._native, package_version="9.9.9")


def _native_imports(path: Path) -> list[str]:
    """Modules named `_native` / `_source_*` that `path` imports, statically or by import_module."""
    tree = python_source.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module or ''}.{a.name}" for a in node.names]
            found += [n for n in names if re.search(r"(^|\.)(_native|_source_\w+)$", n)]
        elif isinstance(node, ast.Import):
            found += [
                a.name for a in node.names if re.search(r"(^|\.)(_native|_source_\w+)$", a.name)
            ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"ledgertool\.(_native|_source_\w+)", node.value):
                found.append(node.value)
    return found


def test_only_the_binding_imports_the_compiled_modules():
    offenders = {
        str(p.relative_to(REPO)): imps
        for p in sorted((REPO / "ledgertool").rglob("*.py"))
        if p.name != "_binding.py" and (imps := _native_imports(p))
    }
    assert offenders == {}
    assert _native_imports(REPO / "ledgertool" / "_binding.py")  # the scan does see imports


def test_ids_flags_and_sizes_come_from_the_header():
    lib = _binding.lib
    for name, alg in ALGORITHMS.items():
        const = getattr(lib, "LT_ALG_" + name.upper().replace("-", "_"))
        assert alg.native_id == const
        assert (alg.key_size, alg.digest_size) == (
            lib.lt_key_size(const),
            lib.lt_digest_size(const),
        )
        assert record.record_size(alg) == lib.LT_RECORD_FIXED + alg.digest_size
    assert STRIP_MODES == {
        "frame": lib.LT_STRIP_FRAME,
        "l3": lib.LT_STRIP_L3,
        "payload": lib.LT_STRIP_PAYLOAD,
        "rdma": lib.LT_STRIP_RDMA,
    }
    header = (NATIVE / "include" / "ledgertool.h").read_text()
    flags = {
        int(v, 16): n
        for n, v in re.findall(r"^#define LT_FLAG_(\w+) (0x[0-9A-Fa-f]+)", header, re.M)
    }
    assert record.FLAG_NAMES == flags
    assert record.RECORD_FIXED == record.record_dtype(16).itemsize - 16 == 32


def test_status_codes_map_to_exceptions_by_subject():
    lib = _binding.lib
    _binding.check(lib.LT_OK, "nothing")
    with pytest.raises(MemoryError, match="lt_x: out of memory"):
        _binding.check(lib.LT_ERR_NOMEM, "lt_x")
    with pytest.raises(ValueError, match=r"lt_x \(status -4\)"):
        _binding.check(lib.LT_ERR_ARG, "lt_x")
    e = _binding.capture_error(lib.LT_ERR_CORRUPT, "corrupt record header at byte 24", "a.pcap", 24)
    assert (str(e), e.path, e.offset, e.exit_code) == (
        "a.pcap: corrupt record header at byte 24",
        "a.pcap",
        24,
        2,
    )
    assert (
        type(_binding.interface_error(lib.LT_ERR_ARG, "bad ring", "eth0")).__name__ == "UsageError"
    )
    assert _binding.interface_error(lib.LT_ERR_IO, "", "eth0").iface == "eth0"
    assert (
        type(
            _binding.replay_open_error(lib.LT_ERR_IO, "x.pcap: cannot open", "x.pcap", "eth0")
        ).__name__
        == "CaptureFormatError"
    )
    assert (
        type(_binding.replay_open_error(lib.LT_ERR_IO, "eth0: down", "x.pcap", "eth0")).__name__
        == "InterfaceError"
    )


# ---- native/src: no cycles -----------------------------------------------------------------------


def _code(path: Path) -> str:
    """C source without comments and string literals (so names in them are no references)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", path.read_text(), flags=re.S)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


def include_graph() -> dict[str, set[str]]:
    files = {p.name: p for d in ("src", "include") for p in (NATIVE / d).glob("*.[ch]")}
    return {
        name: {
            m for m in re.findall(r'^\s*#\s*include\s+"([^"]+)"', p.read_text(), re.M) if m in files
        }
        for name, p in files.items()
    }


# A top-level definition (not a declaration) of an external function or object named lt_*.
_DEF = re.compile(
    r"^(?!static\b)(?!extern\b)(?:[A-Za-z_][\w\s\*]*?\b)(lt_\w+)\s*(?:\([^;{]*\)\s*\{|\[\]\s*=|=)",
    re.M,
)


def call_graph(src: Path = NATIVE / "src") -> dict[str, set[str]]:
    """File -> files whose lt_* functions or tables it names, by which .c file defines them."""
    code = {p.stem: _code(p) for p in sorted(src.glob("*.c"))}
    owner = {}
    for f, text in code.items():
        for sym in _DEF.findall(text):
            owner.setdefault(sym, f)
    return {
        f: {owner[s] for s in set(re.findall(r"\blt_\w+\b", text)) if s in owner and owner[s] != f}
        for f, text in code.items()
    }


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the stack, 2 done

    def visit(n, stack):
        state[n] = 1
        for m in sorted(graph.get(n, ())):
            if state[m] == 1:
                return stack[stack.index(m) :] + [m]
            if state[m] == 0 and (c := visit(m, stack + [m])):
                return c
        state[n] = 2
        return None

    for n in sorted(graph):
        if state[n] == 0 and (c := visit(n, [n])):
            return c
    return None


def test_native_include_graph_has_no_cycle():
    g = include_graph()
    # the scan sees edges
    assert "sha256.h" in g["merkle.c"] and "ledgertool.h" in g["ledgertool_testing.h"]
    assert cycle(g) is None


def test_native_call_graph_has_no_cycle():
    g = call_graph()
    assert {"dispatch", "reader", "strip"} <= g["engine"] and "digest_siphash" in g["dispatch"]
    assert cycle(g) is None, f"native/src files call each other in a cycle: {' -> '.join(cycle(g))}"


def test_call_graph_check_sees_the_old_digest_dispatch_cycle(tmp_path):
    """The check fails on the layout before change 5 (digest.c owned the SipHash table dispatch.c
    names, and called dispatch.c's lt_dctx_init)."""
    old = "3169d3c"  # main before change 5
    for name in ("digest.c", "dispatch.c"):
        blob = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{old}:native/src/{name}"],
            capture_output=True,
            text=True,
        )
        if blob.returncode:
            pytest.skip("no git history in this checkout")
        (tmp_path / name).write_text(blob.stdout)
    assert cycle(call_graph(tmp_path)) in (
        ["digest", "dispatch", "digest"],
        ["dispatch", "digest", "dispatch"],
    )
