"""DPDK capture (`capture dpdk:PORT --eal "ARGS"`, native/bypass/source_dpdk.c), without hugepages
or a NIC: `--no-huge --no-pci` and a virtual device (docs/capture.md "Kernel bypass").

What is checked:
- net_pcap replaying a capture file (`rx_pcap=FILE`, the real PMD receive path): the ledger's
  records equal those of a file capture of the same file, field by field, sequence numbers and
  timestamps included (net_pcap hands out the file's own timestamps); where the file stores a frame
  truncated, net_pcap knows only the captured length, and that is the one difference;
- one engine: the same 2,000 frames captured from the file, through AF_PACKET, AF_XDP and DPDK
  give byte-identical records (digest, lengths, flags, link type, aux);
- on a live veth: net_af_packet records every frame, in order, and `recompute --trust` matches
  them (on frames without QinQ: net_af_packet rewrites 802.1ad tags and reassembles IP fragments,
  docs/capture.md); overload through net_pcap (`rx_iface=`, consumer stopped): libpcap's ring
  drops, the PMD counts them in imissed, they become GAP records and frames + drops == frames sent
  (net_af_packet reports no drops, so it cannot be the overload source);
- --workers 2: two RX queues of a net_af_packet port (its sockets share a fanout group), both read;
- one-line exit-2 errors for a bad EAL argument, a missing port (naming the device that did not
  probe), more queues than the port has, unbalanced quotes in --eal, the source not built.
Capture tests need the built module (and root + `ip` for the veth ones); they skip otherwise.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest
import test_live as tl
import test_xdp as tx
from conftest import REPO, SAMPLES, cli, run_cli

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames; frame 17 is stored truncated (96 of 1514 bytes)
BUILT = importlib.util.find_spec("ledgertool._source_dpdk") is not None
WHY_BUILT = (
    None
    if BUILT
    else (
        "the DPDK source is not built (install libdpdk-dev pkg-config, then rebuild: "
        "python native/build_ffi.py)"
    )
)
needs_dpdk = pytest.mark.skipif(WHY_BUILT is not None, reason=WHY_BUILT or "")
WHY_VETH = WHY_BUILT or tl.WHY
needs_dpdk_veth = pytest.mark.skipif(WHY_VETH is not None, reason=WHY_VETH or "")
NOHW = "--no-huge --no-pci"


def keyargs(keydir: Path) -> list:
    return ["--digest-key", keydir / "digest.key", "--signing-key", keydir / "signing.key"]


def capture_json(*args) -> dict:
    # a process per capture: DPDK's EAL is initialised once per process, with one set of arguments
    r = run_cli("capture", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def w2000(tmp_path_factory) -> Path:
    return tx.workload_pcap(tmp_path_factory.mktemp("dpdk"))


@pytest.fixture(scope="module")
def plain1850(tmp_path_factory) -> Path:
    """The 2,000-frame workload without its QinQ flow: 1,850 frames net_af_packet hands over intact
    (it writes 802.1ad tags back as 802.1Q; there are no IP fragments in a workload)."""
    d = tmp_path_factory.mktemp("plain")
    spec = tx.WORKLOAD_2000[: tx.WORKLOAD_2000.index('[[flows]]\nname = "qinq-udp"')]
    (d / "plain.toml").write_text(spec)
    assert cli("workload", "generate", d / "plain.toml", "--out", d / "plain.pcap").returncode == 0
    return d / "plain.pcap"


@pytest.fixture(scope="module")
def flows1850(tmp_path_factory) -> Path:
    """1,850 UDP frames in 25 flows of 74 (source ports 40000..40024): net_af_packet's fanout hash
    (keyed by a seed the kernel draws at boot) puts each flow on one of the two queues, and with
    25 flows both get some but with probability 2^-24; the four flows of plain1850 all went to one
    queue on one boot in eight."""
    flows = "".join(
        f"""
[[flows]]
name = "udp-{k}"
src_mac = "02:00:5e:00:01:01"
dst_mac = "02:00:5e:00:01:02"
src_ip = "192.0.2.1"
dst_ip = "198.51.100.1"
protocol = "udp"
src_port = {40000 + k}
dst_port = 9000
frames = 74
size = 128
"""
        for k in range(25)
    )
    spec = tx.WORKLOAD_2000[: tx.WORKLOAD_2000.index("[[flows]]")] + flows
    d = tmp_path_factory.mktemp("flows")
    (d / "flows.toml").write_text(spec)
    assert cli("workload", "generate", d / "flows.toml", "--out", d / "flows.pcap").returncode == 0
    return d / "flows.pcap"


@pytest.fixture(scope="module")
def veth():
    if WHY_VETH:
        pytest.skip(WHY_VETH)
    pair = tx.QueuedVeth(1)
    try:
        pair.up()
        yield pair
    finally:
        pair.down()


def columns(ledger: Path, *names: str) -> dict:
    t = tl.ledger_records(ledger)
    return {n: t.column(n).to_pylist() for n in names}


@needs_dpdk
def test_dpdk_net_pcap_records_equal_a_file_capture(keydir, tmp_path):
    f, d = tmp_path / "file", tmp_path / "dpdk"
    capture_json(SAMPLE, "--ledger", f, *keyargs(keydir))
    rep = capture_json(
        "dpdk:net_pcap0",
        "--eal",
        f"{NOHW} --vdev=net_pcap0,rx_pcap={SAMPLE}",
        "--frames",
        "294",
        "--ledger",
        d,
        *keyargs(keydir),
    )
    tl.schema_ok(rep, "capture-report.schema.json")
    live = rep["live"]
    assert rep["frames"] == 294 and rep["drops"] == 0 and live["kernel_packets"] == 294
    q = live["dpdk"]["queues"][0]
    assert (
        live["dpdk"]["driver"] == "net_pcap"
        and q["pmd_timestamps"] == 294
        and q["multi_segment"] == 0
    )
    a, b = tl.ledger_records(f), tl.ledger_records(d)
    assert a.num_rows == b.num_rows == 294
    cut = pc.less(a.column("cap_len"), a.column("wire_len")).to_pylist()
    assert cut.index(True) == 17 and sum(cut) == 1
    for name in a.schema.names:
        x, y = a.column(name).to_pylist(), b.column(name).to_pylist()
        if name in ("wire_len", "flags"):
            # net_pcap gives pkt_len = the captured length: the truncated frame is whole to DPDK
            assert [v for v, c in zip(x, cut) if not c] == [v for v, c in zip(y, cut) if not c], (
                name
            )
            assert (x[17], y[17]) == ((1514, 96) if name == "wire_len" else (1, 0)), name
        else:
            # digests, timestamps (the file's own, via the PMD), seq, lengths, ...
            assert x == y, name


@needs_dpdk_veth
def test_same_frames_same_records_through_file_afpacket_xdp_dpdk(veth, keydir, tmp_path, w2000):
    """One engine: the 2,000 frames recorded from the file, by AF_PACKET and AF_XDP off a veth, and
    by DPDK's net_pcap replaying the file have byte-identical records, in the same order."""
    if tx.WHY:
        pytest.skip(tx.WHY)
    capture_json(w2000, "--ledger", tmp_path / "file", *keyargs(keydir))
    capture_json(
        "dpdk:net_pcap0",
        "--eal",
        f"{NOHW} --vdev=net_pcap0,rx_pcap={w2000}",
        "--frames",
        "2000",
        "--ledger",
        tmp_path / "dpdk",
        *keyargs(keydir),
    )
    for name, source in (("afpacket", f"iface:{veth.rx}"), ("xdp", f"xdp:{veth.rx}")):
        proc = tx.start(veth, source, tmp_path / name, keydir)
        tl.replay(veth, w2000, "--pps", "20000")
        time.sleep(0.1)
        rep = tl.finish(proc)
        assert rep["frames"] == 2000 and rep["drops"] == 0, (name, rep["frames"], rep["drops"])
    fields = ("digest", "cap_len", "wire_len", "flags", "linktype", "aux")
    ref = columns(tmp_path / "file", *fields)
    assert len(ref["digest"]) == 2000
    for name in ("afpacket", "xdp", "dpdk"):
        assert columns(tmp_path / name, *fields) == ref, name
    # the file and the DPDK replay agree on the rest too: seq and the file's timestamps
    assert columns(tmp_path / "dpdk", "seq", "ts_ns") == columns(tmp_path / "file", "seq", "ts_ns")


def on_veth(veth) -> tuple[str, str, str]:
    """net_pcap reading the veth end live (libpcap's TPACKET_V3 ring underneath)."""
    return "dpdk:net_pcap0", "--eal", f"{NOHW} --vdev=net_pcap0,rx_iface={veth.rx}"


def start_settled(veth, source: str, ledger: Path, keydir: Path, *extra: str) -> subprocess.Popen:
    """tx.start, then time for the capture to reach its read loop: net_pcap's libpcap ring is 8
    blocks that the kernel retires every ~1 ms on a veth, so it absorbs ~8 ms of traffic only, and
    the port starts before the ledger is created (docs/capture.md)."""
    proc = tx.start(veth, source, ledger, keydir, *extra)
    time.sleep(1.0)
    return proc


@needs_dpdk_veth
def test_dpdk_on_a_veth_zero_loss_recompute_matches(veth, keydir, tmp_path, plain1850):
    """net_af_packet on the veth (a 4096-frame TPACKET ring): every frame recorded, in order, and
    matched by recompute --trust; the PMD's own count agrees."""
    ledger = tmp_path / "ledger"
    proc = tx.start(
        veth,
        "dpdk:net_af_packet0",
        ledger,
        keydir,
        "--eal",
        f"{NOHW} --vdev=net_af_packet0,iface={veth.rx},framecnt=4096",
    )
    sent = tl.replay(veth, plain1850, "--pps", "20000")
    time.sleep(0.2)
    rep = tl.finish(proc)
    tl.schema_ok({k: v for k, v in rep.items() if k != "_stderr"}, "capture-report.schema.json")
    assert sent["frames_sent"] == 1850
    assert rep["frames"] == 1850 == rep["live"]["kernel_packets"] and rep["drops"] == 0
    assert rep["live"]["dpdk"]["driver"] == "net_af_packet"
    doc = tx.verify_and_recompute(ledger, plain1850, keydir)
    assert doc["matched"] == 1850 and doc["ledger_only"] == doc["capture_only"] == 0
    t = tl.ledger_records(ledger)
    assert [bytes(d) for d in t.column("digest").to_pylist()] == tl.file_digests(plain1850, keydir)


@needs_dpdk_veth
def test_dpdk_overload_drops_are_declared_and_add_up(veth, keydir, tmp_path):
    ledger = tmp_path / "ledger"
    tx0 = veth.counters(veth.ns_tx, veth.tx)["tx"]["dropped"]
    source, *eal = on_veth(veth)
    proc = start_settled(veth, source, ledger, keydir, *eal, "--segment-records", "1000")
    os.kill(proc.pid, signal.SIGSTOP)  # libpcap's ring (2 MiB) behind a stopped consumer overflows
    try:
        sent = tl.replay(veth, SAMPLE, "--topspeed", "--loop", "20")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    time.sleep(0.3)
    rep = tl.finish(proc)
    veth_dropped = veth.counters(veth.ns_tx, veth.tx)["tx"]["dropped"] - tx0
    live = rep["live"]
    q = live["dpdk"]["queues"][0]
    assert sent["frames_sent"] == 5880 and rep["drops"] > 0
    assert (
        rep["frames"] + rep["drops"] == live["kernel_packets"] == sent["frames_sent"] - veth_dropped
    )
    assert rep["drops"] == q["imissed"] + q["rx_nombuf"] + q["ierrors"] == live["drops_declared"]
    assert q["rx_packets"] == rep["frames"]
    assert any("imissed" in w for w in rep["warnings"]) and "DROPS" in rep["_stderr"]
    v = json.loads(cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json").stdout)
    assert v["ok"] and v["drops_declared"] == rep["drops"] and v["frames"] == rep["frames"]


@needs_dpdk_veth
def test_dpdk_two_rx_queues(veth, keydir, tmp_path, flows1850):
    """--workers 2 = two RX queues, one reader thread each (registered as DPDK lcores);
    net_af_packet spreads flows over its queues with a fanout hash."""
    ledger = tmp_path / "ledger"
    proc = tx.start(
        veth,
        "dpdk:net_af_packet0",
        ledger,
        keydir,
        "--workers",
        "2",
        "--eal",
        f"{NOHW} --vdev=net_af_packet0,iface={veth.rx},qpairs=2,framecnt=4096",
    )
    sent = tl.replay(veth, flows1850, "--pps", "20000")
    time.sleep(0.2)
    rep = tl.finish(proc)
    live = rep["live"]
    assert (
        sent["frames_sent"] == rep["frames"] == 1850 == live["kernel_packets"] and rep["drops"] == 0
    )
    qs = live["dpdk"]["queues"]
    assert [q["queue"] for q in qs] == [0, 1] and min(live["worker_frames"]) > 0, live[
        "worker_frames"
    ]
    assert len({q["lcore"] for q in qs}) == 2 and min(q["lcore"] for q in qs) >= 0
    doc = tx.verify_and_recompute(ledger, flows1850, keydir)
    assert doc["matched"] == 1850


def dpdk_error(tmp_path: Path, keydir: Path, *args: str) -> str:
    return tx.capture_error(tmp_path, keydir, *args)


@needs_dpdk
def test_dpdk_bad_setups_are_one_line_errors(keydir, tmp_path):
    err = dpdk_error(tmp_path, keydir, "dpdk:0", "--eal", "--bogus-option")
    assert "EAL initialisation failed" in err and "--bogus-option" in err
    err = dpdk_error(
        tmp_path, keydir, "dpdk:3", "--eal", f"{NOHW} --vdev=net_pcap0,rx_pcap={SAMPLE}"
    )
    assert "no such port (ports: 0 net_pcap0)" in err
    missing = tmp_path / "missing.pcap"
    err = dpdk_error(
        tmp_path, keydir, "dpdk:0", "--eal", f"{NOHW} --vdev=net_pcap0,rx_pcap={missing}"
    )
    # why the device did not probe
    assert "no such port" in err and f"Couldn't open {missing}" in err
    err = dpdk_error(
        tmp_path,
        keydir,
        "dpdk:0",
        "--workers",
        "2",
        "--eal",
        f"{NOHW} --vdev=net_pcap0,rx_pcap={SAMPLE}",
    )
    assert "2 RX queues asked (--workers), port 0 (net_pcap) has at most 1" in err


def test_dpdk_eal_argument_quoting_and_not_built(keydir, tmp_path):
    assert "--eal: No closing quotation" in dpdk_error(
        tmp_path, keydir, "dpdk:0", "--eal", "--no-huge 'x"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['ledgertool._source_dpdk'] = None; "
            "from ledgertool.cli.app import main; main()",
            "capture",
            "dpdk:0",
            "--ledger",
            str(tmp_path / "never"),
            *map(str, keyargs(keydir)),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "DPDK source is not built: install libdpdk-dev" in r.stderr


def test_eal_argv_defaults():
    """--in-memory (--no-shconf with --no-huge, which EAL does not combine with --in-memory) and one
    lcore, unless the user's --eal sets them."""
    from ledgertool.source.bypass import eal_argv

    cpu = str(min(os.sched_getaffinity(0)))
    assert eal_argv("-a 0000:3b:00.0", None) == [
        "ledgertool",
        "-a",
        "0000:3b:00.0",
        "--in-memory",
        "-l",
        cpu,
    ]
    assert eal_argv("--no-huge --no-pci", 1) == [
        "ledgertool",
        "--no-huge",
        "--no-pci",
        "--no-shconf",
        "-l",
        "1",
    ]
    assert eal_argv("--file-prefix=x -l 2-3", None) == [
        "ledgertool",
        "--file-prefix=x",
        "-l",
        "2-3",
    ]
    assert eal_argv("--lcores=0@1 --in-memory", None) == [
        "ledgertool",
        "--lcores=0@1",
        "--in-memory",
    ]


@pytest.mark.skipif(
    WHY_BUILT is not None or tx.WHY is not None or not shutil.which("unshare"),
    reason=WHY_BUILT or tx.WHY or "needs unshare (util-linux)",
)
def test_without_the_runtime_libraries_only_the_bypass_sources_fail(keydir, tmp_path):
    """A build with both modules, run where libxdp and DPDK's EAL library are missing (hidden by
    bind mounts in a private mount namespace): ledgertool._native imports, a file capture works,
    and `capture xdp:` / `dpdk:` are one-line exit-2 errors naming what to install."""
    libs = [
        os.path.realpath(p)
        for p in ("/lib/x86_64-linux-gnu/librte_eal.so.23", "/lib/x86_64-linux-gnu/libxdp.so.1")
    ]
    if not all(os.path.exists(p) for p in libs):
        pytest.skip("library paths differ on this machine")
    keys = " ".join(f"--{n}-key {keydir / f'{n}.key'}" for n in ("digest", "signing"))
    cli = f"{sys.executable} -c 'from ledgertool.cli.app import main; main()' capture"
    script = "\n".join(
        [
            *(f"mount --bind /dev/null {p}" for p in libs),
            f"{sys.executable} -c 'import ledgertool._native' && echo native-ok",
            f"{cli} {SAMPLE} --ledger {tmp_path / 'file'} {keys} --json > {tmp_path / 'file.json'}",
            f"{cli} dpdk:0 --eal --no-huge --ledger {tmp_path / 'no'} {keys}; echo rc=$?",
            f"{cli} xdp:lo --ledger {tmp_path / 'no'} {keys}; echo rc=$?",
        ]
    )
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert r.stdout.split() == ["native-ok", "rc=2", "rc=2"], r.stdout + r.stderr
    assert json.loads((tmp_path / "file.json").read_text())["frames"] == 294
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in r.stderr, r.stderr
    assert "DPDK source cannot load its libraries" in lines[0] and "librte_eal" in lines[0]
    assert (
        "AF_XDP source cannot load its libraries" in lines[1]
        and "install libxdp1 libbpf1" in lines[1]
    )
    assert not (tmp_path / "no").exists()
