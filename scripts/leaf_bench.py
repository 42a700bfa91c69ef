"""Leaf construction and sealing costs for issue 14 (docs/benchmarks.md, "Leaf construction and
sealing costs (issue 14 groundwork)"; docs/adr/0008-leaf-construction.md). Measurement only.

  python scripts/leaf_bench.py [--blake3-c DIR] [--reps 61] [--sections leaf,dram,callgrind,pkg,io,layout,stages]

Builds scripts/leaf_bench.c against native/src (in --build, default /tmp/leaf_bench_build) and runs:

  leaf       wall ns/record (best and median of --reps rounds, candidates interleaved in every
             round) of every candidate for 48- and 64-byte records and leaves of 64, 256, 1024 and
             4096 records, on a 65,536-record segment (3-4 MiB: L3-resident, like records the
             engine has just written)
  dram       the main candidates on 1,048,576 records (48-64 MiB, larger than L3)
  callgrind  exact instructions per record (valgrind --tool=callgrind --toggle-collect=lb_once) of
             every candidate valgrind can run: it decodes neither SHA-NI nor VAES nor AVX-512, so
             the SHA-256 rows are the portable C code (what a CPU without SHA extensions runs)
  pkg        the `blake3` package (Rust crate with its assembly) from Python: one call per leaf
             block, and one call over the whole segment (its ceiling)
  io         one segment of 1,048,576 records written batch by batch (16,384 records) as a fresh
             file, a preallocated one, a reused one, through mmap, and fresh vs reused anonymous
             record buffers: wall, user and system ns/record, minor faults per 4 KiB page
  layout     siphash-1-3-128 avx2-mb over batches laid out like the engine's (76-byte pcap stride,
             digests into 48-byte records) against the isolation benchmark's layout
  stages     lt_engine_profile (scripts/hotpath_account.py's stage split) at engine batch sizes
             1,024 to 65,536 frames: the digest stage against the same digest in isolation on
             64-byte messages (the bench digest rows) and on 60-byte ones (what the engine digests)

--blake3-c DIR: the official BLAKE3 C implementation (its c/ directory, e.g. from Debian's
librust-blake3-dev: `apt-get download librust-blake3-dev && dpkg -x librust-blake3-dev_*.deb /tmp/b3`,
DIR = /tmp/b3/usr/share/cargo/registry/blake3-*/c); without it those rows are left out.
Prints Markdown. Wall figures depend on load (the load average is printed before and after);
instruction counts do not.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "native" / "src"
DRIVER = ROOT / "scripts" / "leaf_bench.c"
CFLAGS = ["-O3", "-std=gnu11", "-pthread", "-Wall", "-Wextra", "-Wno-unused-parameter"]
B3_REF = ["blake3.c", "blake3_dispatch.c", "blake3_portable.c", "blake3_sse2_x86-64_unix.S",
          "blake3_sse41_x86-64_unix.S", "blake3_avx2_x86-64_unix.S", "blake3_avx512_x86-64_unix.S"]

LEAF_CANDS = ["sha256-ni", "sha256-ni-x2", "sha256-ni-x4", "blake3-avx2-mb", "blake3-sse41-1msg", "blake3-ref-c",
              "blake3-ref-c-stream", "sha256-ni-x4:no-seq", "blake3-avx2-mb:no-seq", "sha256-ni-x4:digest+seq",
              "blake3-avx2-mb:digest+seq", "gather-no-seq", "gather-digest+seq", "entry-leafhash", "tree",
              "mac-hmac-entry", "mac-blake3-entry", "mac-blake3-block", "mac-siphash13-block", "mac-gmac-block",
              "mac-hmac-block", "seal-v1", "seal-v1-x4", "seal-b3", "verify-v1", "verify-v1-x4", "verify-b3"]
DRAM_CANDS = ["sha256-ni", "sha256-ni-x4", "blake3-avx2-mb", "blake3-ref-c-stream", "seal-v1-x4", "seal-b3",
              "verify-v1-x4", "verify-b3"]
SHANI = {"sha256-ni-x2", "sha256-ni-x3", "sha256-ni-x4", "sha256-ni-x4:no-seq", "sha256-ni-x4:digest+seq",
         "seal-v1-x4", "verify-v1-x4"}


def sh(cmd: list[str], **kw) -> str:
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, **kw)
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd[:3])}...: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r.stdout


def build(bdir: Path, b3c: Path | None) -> Path:
    """The driver binary; objects of the other native sources are kept between runs."""
    bdir.mkdir(parents=True, exist_ok=True)
    objs = []
    inc = ["-I", str(ROOT / "native" / "include"), "-I", str(SRC)]
    for c in sorted(SRC.glob("*.c")):
        if c.name in ("digest_hmac.c", "digest_blake3.c"):
            continue  # compiled into the driver itself (it times their static functions)
        o = bdir / (c.stem + ".o")
        if not o.exists() or o.stat().st_mtime < max(c.stat().st_mtime, *(h.stat().st_mtime for h in SRC.glob("*.h"))):
            sh(["gcc", *CFLAGS, *inc, "-c", str(c), "-o", str(o)])
        objs.append(str(o))
    extra = []
    if b3c:
        extra = ["-DLB_REF", "-I", str(b3c)]
        for f in B3_REF:
            o = bdir / ("ref_" + f + ".o")
            if not o.exists():
                sh(["gcc", "-O3", "-c", str(b3c / f), "-o", str(o)])
            objs.append(str(o))
    exe = bdir / ("leaf_bench_ref" if b3c else "leaf_bench")
    sh(["gcc", *CFLAGS, *inc, *extra, str(DRIVER), *objs, "-o", str(exe)])
    return exe


def parse(out: str) -> list[dict]:
    rows = []
    for line in out.splitlines():
        d = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if d:
            rows.append(d)
    return rows


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def sec_leaf(exe: Path, cands: list[str], reps: int, nrec: int, leafs=(64, 256, 1024, 4096), sizes=(48, 64)) -> dict:
    res = {}
    for rs in sizes:
        for lf in leafs:
            for d in parse(sh([str(exe), "time", str(rs), str(lf), str(nrec), str(reps), *cands])):
                res[(d["cand"], rs, lf)] = (float(d["best_ns"]), float(d["median_ns"]))
    return res


def print_wall(title: str, res: dict, cands: list[str], leafs, sizes) -> None:
    print(f"\n{title}\n")
    cols = [(rs, lf) for rs in sizes for lf in leafs]
    print("| candidate | " + " | ".join(f"{rs} B, leaf {lf}" for rs, lf in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for c in cands:
        cells = []
        for rs, lf in cols:
            v = res.get((c, rs, lf))
            cells.append("—" if v is None else f"{v[0]:.2f} ({v[1]:.2f})")
        print(f"| {c} | " + " | ".join(cells) + " |")


def sec_callgrind(exe: Path, cands: list[str], nrec: int, leafs=(64, 256, 1024, 4096), sizes=(48, 64)) -> dict:
    """Instruction counts are independent of load, so two valgrind runs go at once."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [(c, rs, lf) for c in cands if c not in SHANI for rs in sizes for lf in leafs]
    with tempfile.TemporaryDirectory() as d:
        def one(job):
            c, rs, lf = job
            out = Path(d) / f"cg.{c.replace(':', '_')}.{rs}.{lf}"
            sh(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--toggle-collect=lb_once",
                str(exe), "once", str(rs), str(lf), str(nrec), c])
            m = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
            return job, int(m.group(1)) / nrec

        with ThreadPoolExecutor(2) as ex:
            return dict(ex.map(one, jobs))


def print_cg(res: dict, cands: list[str], leafs, sizes) -> None:
    cols = [(rs, lf) for rs in sizes for lf in leafs]
    print("\nInstructions per record (callgrind, exact). † SHA-256 in it runs the portable C code (valgrind "
          "decodes no SHA-NI): what a CPU without SHA extensions executes, not a proxy for SHA-NI time\n")
    print("| candidate | " + " | ".join(f"{rs} B, leaf {lf}" for rs, lf in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for c in cands:
        if (c, cols[0][0], cols[0][1]) not in res:
            continue
        sha = c.startswith(("sha256", "seal", "verify", "tree", "entry-leafhash")) or "hmac" in c
        name = c.replace("sha256-ni", "sha256-portable") + (" †" if sha else "")
        print(f"| {name} | " + " | ".join(f"{res[(c, rs, lf)]:.1f}" for rs, lf in cols) + " |")


def sec_pkg(reps: int, leafs=(64, 256, 1024, 4096), sizes=(48, 64), nrec=65536) -> None:
    import blake3  # the project's reference package (tests)

    print(f"\n`blake3` package {blake3.__version__} (Rust crate + assembly), from Python, one thread: wall ns/record, "
          f"best (median) of {reps}\n")
    print("| record | leaf | one call per leaf block | one call over the segment |")
    print("|---|---:|---:|---:|")
    for rs in sizes:
        seg = os.urandom(rs * nrec)
        for lf in leafs:
            mv = memoryview(seg)
            lb = rs * lf
            blocks = [mv[i:i + lb] for i in range(0, len(seg), lb)]
            h = blake3.blake3
            per_leaf, whole = [], []
            for _ in range(reps):
                t = time.perf_counter_ns()
                for b in blocks:
                    h(b).digest()
                per_leaf.append((time.perf_counter_ns() - t) / nrec)
                t = time.perf_counter_ns()
                h(seg).digest()
                whole.append((time.perf_counter_ns() - t) / nrec)
            per_leaf.sort()
            whole.sort()
            print(f"| {rs} B | {lf} | {per_leaf[0]:.2f} ({per_leaf[reps // 2]:.2f}) | "
                  f"{whole[0]:.2f} ({whole[reps // 2]:.2f}) |")


def sec_io(exe: Path, reps: int, workdir: Path) -> None:
    print(f"\nWriting one segment of 1,048,576 records in batches of 16,384 (ns/record; {workdir}, "
          f"{sh(['df', '-T', str(workdir)]).splitlines()[-1].split()[1]}; medians of {reps} unless said)\n")
    print("| record | variant | wall best | wall median | user | system | minor faults / 4 KiB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for rs in (48, 64):
        for d in parse(sh([str(exe), "io", str(workdir), str(rs), "1048576", "16384", str(reps)])):
            if d["io"] == "unlink-previous":
                print(f"| {rs} B | unlink of the previous segment's file | {float(d['best_ns']):.2f} | "
                      f"{float(d['median_ns']):.2f} | | | |")
                continue
            print(f"| {rs} B | {d['io']} | {float(d['best_ns']):.2f} | {float(d['median_ns']):.2f} | "
                  f"{float(d['user_median_ns']):.2f} | {float(d['sys_median_ns']):.2f} | {float(d['minflt_per_4k']):.2f} |")


LAYOUTS = [  # (label, msg, stride, buf, out, touch)
    ("isolation (lt_bench_digest_batch-like): 64 B at 64, 256 KiB buffer, compact out", 64, 64, 256 << 10, 16, 0),
    ("60 B at 64, 256 KiB, compact out", 60, 64, 256 << 10, 16, 0),
    ("60 B at 76 (pcap), 256 KiB, compact out", 60, 76, 256 << 10, 16, 0),
    ("60 B at 76, 256 KiB, into 48-byte records", 60, 76, 256 << 10, 48, 0),
    ("60 B at 76, 1.2 MiB (one 16,384-frame batch), into records", 60, 76, 16384 * 76, 48, 0),
    ("60 B at 76, 1.2 MiB, into records, table built per batch + one load per frame", 60, 76, 16384 * 76, 48, 1),
    ("60 B at 76, 76 MiB (the 1 M-frame pcap), into records, table per batch + one load per frame", 60, 76,
     1000000 * 76, 48, 1),
    ("60 B at 76, 76 MiB, into records, no touch before the digest", 60, 76, 1000000 * 76, 48, 0),
]


def sec_layout(exe: Path, reps: int) -> None:
    print(f"\nsiphash-1-3-128 avx2-mb, batches of 16,384 messages: wall ns/message, best (median) of {reps}\n")
    print("| layout | ns/message |")
    print("|---|---:|")
    for label, msg, stride, buf, out, touch in LAYOUTS:
        d = parse(sh([str(exe), "layout", "avx2-mb", str(msg), str(stride), str(buf), str(out), "16384", str(reps),
                      str(touch)]))[0]
        print(f"| {label} | {float(d['best_ns']):.2f} ({float(d['median_ns']):.2f}) |")


def sec_stages(reps: int) -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    import hotpath_account as ha
    from ledgertool._binding import ffi, lib

    from ledgertool.algorithms import ALGORITHMS
    from ledgertool.digest.engine import DigestEngine, force_cpu_path
    from ledgertool.source.file import CaptureReader

    alg = ALGORITHMS["siphash-1-3-128"]
    force_cpu_path(alg, "avx2-mb")
    key = bytes(range(alg.key_size))
    print(f"\nlt_engine_profile, 1,000,000 frames of 64 B (60 captured), strip frame, siphash-1-3-128 avx2-mb: "
          f"ns/frame, best of {reps}; isolation: lt_bench_digest_batch, batches of 4096, on 64-byte messages "
          f"(what `ledgertool bench` digest rows use) and on 60-byte ones (what the engine digests)\n")
    print("| engine batch (frames) | read | strip + record | digest | digest / isolation 64 B | "
          "digest / isolation 60 B |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as d:
        pcap = Path(d) / "p.pcap"
        ha.make_pcap(pcap, 1_000_000, 64)
        pcap.read_bytes()
        iso, iso60 = ha.isolated_ns(alg, 64, reps), ha.isolated_ns(alg, 60, reps)
        for batch in (1024, 2048, 4096, 8192, 16384, 65536):
            best = [float("inf")] * 3
            for _ in range(reps):
                with CaptureReader(pcap) as r:
                    e = DigestEngine(r, alg, 0, key, batch_records=batch, batch=batch)
                    out = ffi.new("uint8_t[]", batch * e.record_size)
                    ns = ffi.new("uint64_t[3]")
                    fr = ffi.new("uint64_t *")
                    if lib.lt_engine_profile(e._e, out, batch, 1, ns, fr) != lib.LT_OK:
                        raise SystemExit("lt_engine_profile failed")
                    best = [min(b, ns[i] / fr[0]) for i, b in enumerate(best)]
            print(f"| {batch:,} | {best[0]:.2f} | {best[1]:.2f} | {best[2]:.2f} | {best[2] / iso:.2f}x | "
                  f"{best[2] / iso60:.2f}x |")
        print(f"| isolation, 64 B | | | {iso:.2f} | 1.00x | |")
        print(f"| isolation, 60 B | | | {iso60:.2f} | | 1.00x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--blake3-c", type=Path, default=None, help="the official BLAKE3 C directory (c/)")
    ap.add_argument("--build", type=Path, default=Path(tempfile.gettempdir()) / "leaf_bench_build")
    ap.add_argument("--reps", type=int, default=61, help="rounds per wall measurement (best and median kept)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()), help="directory for the io files")
    ap.add_argument("--sections", default="leaf,dram,callgrind,pkg,io,layout,stages")
    a = ap.parse_args()
    secs = set(a.sections.split(","))
    exe = build(a.build, a.blake3_c)
    chk = sh([str(exe), "check"])
    if "FAIL" in chk:
        raise SystemExit(f"leaf_bench check failed:\n{chk}")
    cands = [c for c in LEAF_CANDS if a.blake3_c or not c.startswith("blake3-ref")]
    model = next((ln.split(":", 1)[1].strip() for ln in sh(["lscpu"]).splitlines() if ln.startswith("Model name")), "?")
    print(f"CPU: {model}, {os.cpu_count()} logical CPUs; load average {load()} at the start; "
          f"driver {exe} (check: {len(chk.splitlines())} cases ok)")
    leafs, sizes = (64, 256, 1024, 4096), (48, 64)
    if "leaf" in secs:
        res = sec_leaf(exe, cands, a.reps, 65536)
        print_wall(f"Wall ns/record, best (median) of {a.reps} interleaved rounds, 65,536-record segment "
                   f"(L3-resident); load average {load()} after", res, cands, leafs, sizes)
    if "dram" in secs:
        dc = [c for c in DRAM_CANDS if c in cands]
        res = sec_leaf(exe, dc, max(7, a.reps // 6), 1 << 20, leafs=(256,))
        print_wall(f"Wall ns/record, best (median) of {max(7, a.reps // 6)}, 1,048,576-record segment (from DRAM); "
                   f"load average {load()} after", res, dc, (256,), sizes)
    if "callgrind" in secs:
        if not shutil.which("valgrind"):
            print("\n(callgrind: valgrind not installed, skipped)")
        else:
            res = sec_callgrind(exe, cands, 32768)
            print_cg(res, cands, leafs, sizes)
    if "pkg" in secs:
        sec_pkg(max(5, a.reps // 4))
    if "io" in secs:
        sec_io(exe, max(5, a.reps // 6), a.workdir)
    if "layout" in secs:
        sec_layout(exe, max(5, a.reps // 4))
    if "stages" in secs:
        sec_stages(max(5, a.reps // 4))
    print(f"\nload average {load()} at the end")


if __name__ == "__main__":
    main()
