"""The one face of the compiled native module, and the only importer of it.

`ledgertool._native` is built by native/build_ffi.py from the CDEF blocks of
native/include/ledgertool.h and ledgertool_testing.h. Every other module reaches C through
`ffi` and `lib` from here, and turns a native status code into an exception through the
functions here (the mapping lives nowhere else). The optional kernel-bypass modules
(`ledgertool._source_xdp`, `_source_dpdk`) load through `optional_module`.

At import the compiled module must have been built from the declarations and the package
version of this checkout: after a `git pull` that changed ledgertool.h, a stale build used to
fail deep inside a command with an AttributeError (a missing LT_MERKLE_MAX_LEAF_RECORDS); now
importing ledgertool's native code raises NativeModuleError, one line asking for a rebuild.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from ._version import __version__
from .errors import (
    CaptureFormatError,
    InterfaceError,
    KeyFileError,
    NativeModuleError,
    UsageError,
    WorkloadSpecError,
)

# LT_ABI_VERSION of the headers this package is written against (tests/test_binding.py pins the
# CDEF blocks' digest to it, so a changed declaration without a raised version fails a test).
ABI_VERSION = 4

_REBUILD = (
    "rebuild it: `pip install -e .` in the checkout (or `python native/build_ffi.py` for an "
    "in-place build)"
)


def _compiled_module() -> ModuleType:
    try:
        return importlib.import_module("ledgertool._native")
    except ModuleNotFoundError as e:
        if e.name != "ledgertool._native":
            raise
        raise NativeModuleError(
            f"ledgertool's native module (ledgertool._native) is not built: {_REBUILD}"
        ) from None


def check_build(
    module: ModuleType, abi_version: int = ABI_VERSION, package_version: str = __version__
) -> None:
    """NativeModuleError unless `module` was built from ABI `abi_version` and for `package_version`.

    A module older than the check itself has neither constant; that is a mismatch too."""
    try:
        built_abi = int(module.lib.LT_ABI_VERSION)
        built_for = module.ffi.string(module.lib.lt_package_version()).decode()
    except AttributeError:
        built_abi, built_for = None, None
    if (built_abi, built_for) != (abi_version, package_version):
        raise NativeModuleError(
            f"ledgertool's native module {module.__file__} was built from other sources (ABI "
            f"{built_abi if built_abi is not None else 'unknown'}, ledgertool "
            f"{built_for or 'unknown'}) than this checkout (ABI {abi_version}, ledgertool "
            f"{package_version}): {_REBUILD}"
        )


_native = _compiled_module()
check_build(_native)
ffi = _native.ffi
lib = _native.lib


# ---- optional source modules -----------------------------------------------------------------


@dataclass(frozen=True)
class OptionalModule:
    """A frame-source module built only where pkg-config finds its libraries
    (native/build_ffi.py)."""

    name: str  # the module ("ledgertool._source_xdp")
    label: str  # what it is, in messages ("AF_XDP")
    build: str  # the packages to build it
    runtime: str  # the packages it loads at run time


XDP = OptionalModule("ledgertool._source_xdp", "AF_XDP", "libxdp-dev libbpf-dev", "libxdp1 libbpf1")
DPDK = OptionalModule(
    "ledgertool._source_dpdk", "DPDK", "libdpdk-dev (or dpdk-dev)", "dpdk (its librte_* libraries)"
)


def optional_module(m: OptionalModule, source: str) -> ModuleType:
    """The compiled module of `m`, checked like ledgertool._native (NativeModuleError when it was
    built from other sources), or InterfaceError (exit 2) naming `source` and what to install."""
    try:
        module = importlib.import_module(m.name)
    except ModuleNotFoundError as e:
        if e.name != m.name:
            raise
        raise InterfaceError(
            f"{source}: the {m.label} source is not built: install {m.build} and pkg-config, "
            "then reinstall ledgertool",
            source,
        ) from None
    except ImportError as e:  # built, but a library it links is missing on this machine
        raise InterfaceError(
            f"{source}: the {m.label} source cannot load its libraries ({e}): install {m.runtime}",
            source,
        ) from None
    check_build(module)
    return module


# ---- status codes -> exceptions ----------------------------------------------------------------
# Native calls return LT_OK or an LT_ERR_* code and write the reason into a caller buffer or the
# reader's info. Which exception a failure is depends on what the call was working on, so there
# is one function per kind of subject; each returns the exception for the caller to raise.


def c_string(buf) -> str:
    """The NUL-terminated text native code wrote into a char buffer; bytes that are not UTF-8 (a
    file name's) kept as surrogates, as os.fsdecode keeps them, so messages show them as `\\xNN`."""
    return ffi.string(buf).decode(errors="surrogateescape")


def check(status: int, what: str) -> None:
    """For the entry points that only compute (digests, Merkle hashes, strip, CPU paths): return on
    LT_OK; MemoryError on LT_ERR_NOMEM; otherwise ValueError: `what` (the call and its argument)
    was rejected, which is a caller's bug or a bad argument, never bad data."""
    if status == lib.LT_OK:
        return
    if status == lib.LT_ERR_NOMEM:
        raise MemoryError(f"{what}: out of memory")
    raise ValueError(f"{what} (status {status})")


def capture_error(
    status: int, text: str, path: str, offset: int | None = None
) -> CaptureFormatError:
    """A capture file that cannot be opened or read (any status): the native text names the file
    and byte offset; `path` is prefixed where it does not."""
    text = text or f"cannot read (status {status})"
    return CaptureFormatError(text if text.startswith(path) else f"{path}: {text}", path, offset)


def pcap_write_error(text: str, out: str, source: str) -> CaptureFormatError:
    """lt_reader_write_pcap failed: the text names the source when reading it failed, else the
    output file (`out`, prefixed where the text does not name it)."""
    return CaptureFormatError(text if text.startswith((out, source)) else f"{out}: {text}", out)


def engine_error(status: int, text: str) -> CaptureFormatError:
    """lt_engine_new refused its configuration or could not allocate (every status; the text says
    which: an algorithm, key size, strip mode or worker count the caller checked before)."""
    return CaptureFormatError(text or f"cannot start the digest engine (status {status})")


def interface_error(status: int, text: str, iface: str) -> UsageError | InterfaceError:
    """A live source (AF_PACKET, AF_XDP, DPDK) that cannot be opened or read: LT_ERR_ARG is a bad
    setting (UsageError), anything else the interface or its environment (InterfaceError)."""
    text = text or f"{iface}: cannot open (status {status})"
    return UsageError(text) if status == lib.LT_ERR_ARG else InterfaceError(text, iface)


def live_read_error(status: int, text: str, source: str, iface: str) -> InterfaceError:
    """A live reader failed while it ran (the interface went away, a ring or queue error): the
    reader's text, prefixed with `source`."""
    return InterfaceError(f"{source}: {text or f'read error (status {status})'}", iface)


def replay_open_error(
    status: int, text: str, path: str, iface: str
) -> CaptureFormatError | UsageError | InterfaceError:
    """lt_replay_open failed: the capture file (a bad format, or an I/O error the text puts on the
    file), a bad setting, or the interface."""
    if status in (lib.LT_ERR_FORMAT, lib.LT_ERR_CORRUPT) or (
        status == lib.LT_ERR_IO and text.startswith(path)
    ):
        return CaptureFormatError(text or f"{path}: cannot read", path)
    if status == lib.LT_ERR_ARG:
        return UsageError(text)
    return InterfaceError(text or f"{iface}: replay failed (status {status})", iface)


def replay_run_error(text: str, iface: str) -> InterfaceError:
    """lt_replay_run failed (every status: the interface refused to send)."""
    return InterfaceError(text, iface)


def workload_error(text: str, path: str) -> WorkloadSpecError:
    """The generator refused a workload spec (every status: the spec breaks a rule)."""
    return WorkloadSpecError(f"{path}: {text}", path)


def plugin_error(status: int, source: str, kind: str) -> InterfaceError:
    """lt_reader_open_source refused an optional module's source: LT_ERR_ARG is a layout mismatch
    (the module was built from another ledgertool.h), anything else memory."""
    why = (
        "was built against another ledgertool.h: rebuild"
        if status == lib.LT_ERR_ARG
        else "out of memory"
    )
    return InterfaceError(f"{source}: the {kind} source module {why}", source)


def hardening_error(text: str, path: str | None) -> KeyFileError:
    """lt_no_core_dumps failed: no secret key is loaded into a process that could dump it."""
    return KeyFileError(
        f"{path or 'key'}: cannot disable core dumps before loading a secret key: {text}"
    )


def bench_error(status: int, what: str) -> UsageError:
    """A benchmark entry point refused its parameters (thread count, sizes: they come from the
    command line)."""
    return UsageError(f"bench: native benchmark failed (status {status}) for {what}")
