"""arm64: the NEON multi-buffer paths ("neon-mb" for SipHash and keyed BLAKE3) run under qemu-user,
and every native source cross-compiles for aarch64.

There is no arm64 machine in CI: native/tests/selftest.c (the digest sources and a small driver, no
Python) is cross-compiled with aarch64-linux-gnu-gcc and run under qemu-aarch64. It checks every
path against the published vectors of tests/vectors/ and every non-portable path against the
portable one on deterministic random batches of mixed lengths; here its --digest mode also puts the
NEON outputs of random messages next to the independent references (pure-Python SipHash, the blake3
package). The same self-test built natively checks this machine's x86 paths. .ci/run installs
gcc-aarch64-linux-gnu and qemu-user when missing. Timings under qemu mean nothing, so nothing here
measures speed.
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import shutil
import struct
import subprocess

import pytest
from conftest import REPO
from test_digests import reference as independent_reference

from ledgertool.algorithms import ALGORITHMS
from ledgertool.digest.engine import cpu_paths
from ledgertool.digest.reference import siphash

CROSS_CC = "aarch64-linux-gnu-gcc"
QEMU = "qemu-aarch64"
SYSROOT = "/usr/aarch64-linux-gnu"
MB_ALGS = [
    "siphash-1-3-128",
    "siphash-2-4-128",
    "siphash-1-3-64",
    "siphash-2-4-64",
    "blake3-keyed-128",
    "blake3-keyed-256",
]

needs_cross = pytest.mark.skipif(
    not (shutil.which(CROSS_CC) and shutil.which(QEMU)),
    reason=f"{CROSS_CC} and {QEMU} not on PATH (.ci/run installs "
    "gcc-aarch64-linux-gnu and qemu-user)",
)

_spec = importlib.util.spec_from_file_location(
    "build_selftest", REPO / "native" / "tests" / "build_selftest.py"
)
build_selftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_selftest)


def compiled(fn, *args):
    try:
        return fn(*args)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"{e.cmd[0]} failed:\n{e.stderr}")


@pytest.fixture(scope="module")
def arm64_objects(tmp_path_factory):
    """Every native/src/*.c compiled for aarch64 (default flags), once for the module."""
    return compiled(
        build_selftest.compile_objects, CROSS_CC, tmp_path_factory.mktemp("aarch64-obj")
    )


@pytest.fixture(scope="module")
def arm64_selftest(tmp_path_factory, arm64_objects):
    return compiled(
        build_selftest.build, CROSS_CC, tmp_path_factory.mktemp("aarch64"), (), arm64_objects
    )


def qemu(exe, *args, env=None, timeout=300):
    return subprocess.run(
        [QEMU, "-L", SYSROOT, str(exe), *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def parse(stdout: str) -> tuple[dict[str, list[str]], dict[str, int], tuple[int, int, int]]:
    """(paths per algorithm, random messages per algorithm, (vector checks, random checks,
    mismatches))."""
    paths, counts = {}, {}
    for name, plist, n in re.findall(
        r"^selftest: (\S+) paths (\S+): (\d+) random messages", stdout, re.M
    ):
        paths[name] = plist.split(",")
        counts[name] = int(n)
    total = re.search(
        r"^selftest: (\d+) vector checks, (\d+) random comparisons, (\d+) mismatches$", stdout, re.M
    )
    assert total, stdout
    return paths, counts, tuple(int(x) for x in total.groups())


def elf_aarch64(path) -> bool:
    head = path.read_bytes()[:20]
    # e_machine EM_AARCH64
    return head[:4] == b"\x7fELF" and struct.unpack_from("<H", head, 18)[0] == 183


def defined_symbols(objs: dict) -> dict[str, set[str]]:
    # binutils-aarch64-linux-gnu comes with the cross compiler
    nm = shutil.which("aarch64-linux-gnu-nm")
    assert nm, "aarch64-linux-gnu-nm not on PATH"
    return {
        stem: {
            line.split()[-1]
            for line in subprocess.run(
                [nm, "--defined-only", str(o)], capture_output=True, text=True, check=True
            ).stdout.splitlines()
            if line.strip()
        }
        for stem, o in objs.items()
    }


@needs_cross
def test_every_native_source_cross_compiles_for_aarch64(arm64_objects):
    """-Wall -Wextra -Werror, each file alone: nothing x86-only leaks into an arm64 build (the x86
    kernel files compile to empty objects) and the NEON kernels are in."""
    assert sorted(arm64_objects) == sorted(p.stem for p in (REPO / "native" / "src").glob("*.c"))
    assert all(elf_aarch64(o) for o in arm64_objects.values())
    syms = defined_symbols(arm64_objects)
    assert "lt_siphash_many_neon" in syms["digest_siphash_neon"]
    assert "lt_blake3_many_neon" in syms["digest_blake3_neon"]
    for stem in (
        "digest_siphash_avx2",
        "digest_siphash_avx512",
        "digest_blake3_avx2",
        "digest_blake3_avx512",
    ):
        assert syms[stem] == set(), (stem, syms[stem])


@needs_cross
def test_portable_only_aarch64_build_leaves_the_neon_kernels_out(tmp_path):
    """LEDGERTOOL_PORTABLE_ONLY=1 (LT_PORTABLE_ONLY) on arm64: the files it changes compile,
    without NEON."""
    srcs = build_selftest.digest_sources()
    objs = compiled(
        build_selftest.compile_objects, CROSS_CC, tmp_path, ["-DLT_PORTABLE_ONLY"], srcs
    )
    syms = defined_symbols(objs)
    assert syms["digest_siphash_neon"] == set() and syms["digest_blake3_neon"] == set()
    assert "lt_cpu_has_neon" in syms["cpu"] and "lt_siphash_impls" in syms["digest_siphash"]


@needs_cross
def test_neon_paths_equal_vectors_and_portable_under_qemu(arm64_selftest):
    r = qemu(arm64_selftest)
    assert r.returncode == 0, r.stdout + r.stderr
    paths, counts, (vectors, randoms, mismatches) = parse(r.stdout)
    assert mismatches == 0 and r.stdout.rstrip().endswith("selftest: OK")
    for name in MB_ALGS:
        assert paths[name] == ["neon-mb", "portable"], (name, paths[name])
        assert counts[name] > 1000, (
            name,
            counts[name],
        )  # 22 batches: fixed edge shapes and random ones
    assert paths["aes-128-gmac"] == ["portable"] and paths["hmac-sha256-128"] == ["portable"]
    # 64 SipHash-2-4 messages x (64 + 128 bit) x (batch + single) x 2 paths, 22 BLAKE3 cases x 2 x 2
    # x 2, 7 RFC 4231 + 7 GMAC cases on the one portable path
    assert vectors == 64 * 2 * 2 * 2 + 22 * 2 * 2 * 2 + 7 + 7
    assert randoms > 6 * 1000


@needs_cross
def test_selftest_fails_when_a_reference_is_wrong(arm64_selftest):
    """--corrupt flips a bit of every expected value: every comparison must then report a
    mismatch."""
    r = qemu(arm64_selftest, "--corrupt")
    assert r.returncode == 1, r.stdout + r.stderr
    _, _, (vectors, randoms, mismatches) = parse(r.stdout)
    assert mismatches == vectors + randoms > 0
    assert "MISMATCH vector (batch) siphash-2-4-64 path neon-mb message 0 (0 bytes)" in r.stderr


@needs_cross
def test_dispatch_picks_neon_and_cpu_path_env_forces_portable(arm64_selftest):
    def in_use(env_value):
        env = {k: v for k, v in os.environ.items() if k != "LEDGERTOOL_CPU_PATH"}
        if env_value is not None:
            env["LEDGERTOOL_CPU_PATH"] = env_value
        r = qemu(arm64_selftest, "--paths", env=env)
        assert r.returncode == 0, r.stderr
        rows = dict(line.split(" ", 1) for line in r.stdout.splitlines())
        return {k: v.split()[0] for k, v in rows.items() if k != "note"}, rows.get("note", "")

    default, note = in_use(None)
    assert (
        default
        == {
            **{a: "neon-mb" for a in MB_ALGS},
            "aes-128-gmac": "portable",
            "hmac-sha256-128": "portable",
        }
        and note == ""
    )
    forced, note = in_use("portable")
    assert set(forced.values()) == {"portable"} and note == ""
    one, _ = in_use("blake3-keyed-128=portable")
    assert one == {**default, "blake3-keyed-128": "portable"}
    _, note = in_use("avx2-mb")
    assert note == "LEDGERTOOL_CPU_PATH: no algorithm has a CPU path named avx2-mb; ignored"


def independent(name: str, key: bytes, msg: bytes) -> bytes:
    a = ALGORITHMS[name]
    if name.startswith("siphash-"):
        c, d = (1, 3) if name.startswith("siphash-1-3") else (2, 4)
        return siphash(key[:16], msg, c, d, a.digest_size)
    return independent_reference(name, key[: a.key_size], msg)


@needs_cross
def test_neon_outputs_equal_independent_references_under_qemu(arm64_selftest, tmp_path):
    rng = random.Random("neon-independent")
    key = rng.randbytes(32)
    lens = [0, 1, 7, 8, 63, 64, 65, 1023, 1024, 1025, 1500, 2049] + [
        rng.choice((rng.randint(0, 2000), rng.randint(0, 80))) for _ in range(36)
    ]
    msgs = [rng.randbytes(n) for n in lens]
    f = tmp_path / "messages.bin"
    f.write_bytes(key + b"".join(struct.pack("<I", len(m)) + m for m in msgs))
    r = qemu(arm64_selftest, "--digest", f)
    assert r.returncode == 0, r.stderr
    got = {}
    for line in r.stdout.splitlines():
        name, path, i, h = line.split()
        got[name, path, int(i)] = bytes.fromhex(h)
    for name in ALGORITHMS:
        for i, m in enumerate(msgs):
            want = independent(name, key, m)
            assert got[name, "portable", i] == want, (name, len(m))
            if name in MB_ALGS:
                assert got[name, "neon-mb", i] == want, (name, len(m))


def test_native_selftest_checks_this_machines_paths(tmp_path):
    """The same self-test built for this machine: its paths (x86: avx512-mb, avx2-mb, ...) against
    the vectors and the portable path, and the path lists equal what the package reports."""
    # a package built with LEDGERTOOL_PORTABLE_ONLY=1 lists portable alone: build the self-test
    # alike
    portable_only = all(cpu_paths(a) == ["portable"] for a in ALGORITHMS.values())
    exe = compiled(
        build_selftest.build,
        shutil.which("cc") or "gcc",
        tmp_path,
        ["-DLT_PORTABLE_ONLY"] if portable_only else [],
    )
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    paths, counts, (vectors, randoms, mismatches) = parse(r.stdout)
    assert mismatches == 0 and vectors > 0 and randoms > 0
    for name, a in ALGORITHMS.items():
        assert paths[name] == cpu_paths(a), name
        assert (counts[name] > 0) == (len(paths[name]) > 1), name


@needs_cross
def test_conformance_kit_digests_under_qemu(arm64_selftest, tmp_path):
    """The conformance kit's digests (every frame x strip mode, each ledger algorithm under its kit
    subkey) from the arm64 build: neon-mb and portable must both give the kit's values. The strip
    itself (native/src/strip.c) is not in the self-test; see docs/devices.md, "CPU paths"."""
    import json

    from ledgertool.device.kit import export_kit

    kit = tmp_path / "kit"
    export_kit(kit)
    frames = json.loads((kit / "frames.json").read_text())["frames"]
    for a in (a for a in ALGORITHMS.values() if a.ledger_ok):
        doc = json.loads((kit / "digests" / f"{a.name}.json").read_text())
        msgs, want = [], []
        for f, d in zip(frames, doc["frames"]):
            frame = bytes.fromhex(f["frame"])
            for mode, s in f["strip"].items():
                msgs.append(frame[s["offset"] : s["offset"] + s["length"]])
                want.append(d["digests"][mode])
        key = bytes.fromhex(doc["subkey"]).ljust(32, b"\0")  # the self-test takes key[:key size]
        path = tmp_path / f"{a.name}.bin"
        path.write_bytes(key + b"".join(struct.pack("<I", len(m)) + m for m in msgs))
        r = qemu(arm64_selftest, "--digest", path)
        assert r.returncode == 0, r.stderr
        got: dict[str, list[str]] = {}
        for line in r.stdout.splitlines():
            name, p, i, h = line.split()
            if name == a.name:
                got.setdefault(p, []).append(h)
        assert sorted(got) == sorted(
            ["neon-mb", "portable"] if a.name in MB_ALGS else ["portable"]
        ), a.name
        for p, hexes in got.items():
            assert hexes == want, (a.name, p)
        assert len(want) == 4 * len(frames)
