"""AF_XDP capture (`capture xdp:IFACE[:QUEUE]`, native/bypass/source_xdp.c) on real veth pairs
between two network namespaces, as tests/system/test_live.py does for AF_PACKET (docs/capture.md
"Kernel bypass").

What is checked:
- zero loss: 2,000 replayed frames (a generated workload with IPv4/IPv6, TCP/UDP, 802.1Q and QinQ)
  are all recorded, in order, with the digests `recompute --trust` matches, no drop declared, and
  our XDP program's own counter equals the frames recorded; the report says copy mode (veth has no
  zero-copy) and native XDP;
- --workers 2 on a two-queue veth: one socket per queue, both used, the merged ledger holds
  exactly the frames sent; one socket on that veth sees one queue only, and the report warns;
- overload (a 64-frame UMEM behind a stopped consumer): drops are declared in GAP records and
  frames + drops == frames sent == the program's counter;
- --xdp-attach skb (generic XDP) with SIGTERM, --frames, --duration on an idle interface;
- one-line exit-2 errors: no such interface, queue out of range, --workers beyond the queues, a
  non-Ethernet device, zero-copy where the driver has none, no capabilities, an XDP program already
  attached, and the source not built;
- the build: the module is built only where pkg-config finds libxdp/libbpf, and ledgertool._native
  never links them.
Needs root, `ip` and the built module for the capture tests; they skip with the reason otherwise.
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

import numpy as np
import pytest
import test_live as tl
from conftest import REPO, SAMPLES, cli

SAMPLE = SAMPLES / "sample.pcap"
BUILT = importlib.util.find_spec("ledgertool._source_xdp") is not None
WHY = tl.WHY or (
    None
    if BUILT
    else "the AF_XDP source is not built (install libxdp-dev libbpf-dev pkg-config, "
    "then rebuild: python native/build_ffi.py)"
)
needs_xdp = pytest.mark.skipif(WHY is not None, reason=WHY or "")

# 2,000 frames: IPv4/IPv6, UDP/TCP, plain, 802.1Q and QinQ, every one within the veth's MTU
WORKLOAD_2000 = """
version = 1
name = "xdp-2000"
seed = 1717
start_ns = 1767225600000000000
interframe_ns = 1000

[[flows]]
name = "v4-udp"
src_mac = "02:00:5e:00:01:01"
dst_mac = "02:00:5e:00:01:02"
src_ip = "192.0.2.1"
dst_ip = "198.51.100.1"
protocol = "udp"
src_port = 40000
dst_port = 9000
frames = 700
size = "imix"

[[flows]]
name = "v4-tcp"
src_mac = "02:00:5e:00:01:03"
dst_mac = "02:00:5e:00:01:04"
src_ip = "192.0.2.3"
dst_ip = "198.51.100.3"
protocol = "tcp"
src_port = 443
dst_port = 51000
frames = 500
size = [[64, 3], [1000, 1]]

[[flows]]
name = "v6-udp"
src_mac = "02:00:5e:00:01:05"
dst_mac = "02:00:5e:00:01:06"
src_ip = "2001:db8::5"
dst_ip = "2001:db8:1::6"
protocol = "udp"
src_port = 53000
dst_port = 4500
frames = 400
size = [[86, 2], [700, 1]]

[[flows]]
name = "vlan-udp"
src_mac = "02:00:5e:00:01:07"
dst_mac = "02:00:5e:00:01:08"
vlan = 100
src_ip = "203.0.113.7"
dst_ip = "203.0.113.8"
protocol = "udp"
src_port = 5000
dst_port = 5001
frames = 250
size = [[128, 1], [1200, 1]]

[[flows]]
name = "qinq-udp"
src_mac = "02:00:5e:00:01:09"
dst_mac = "02:00:5e:00:01:0a"
outer_vlan = 10
vlan = 200
src_ip = "198.51.100.9"
dst_ip = "198.51.100.10"
protocol = "udp"
src_port = 6000
dst_port = 6001
frames = 150
size = [[96, 1], [900, 1]]
"""


def workload_pcap(tmp: Path) -> Path:
    spec, pcap = tmp / "w2000.toml", tmp / "w2000.pcap"
    spec.write_text(WORKLOAD_2000)
    r = cli("workload", "generate", spec, "--out", pcap, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["frames"] == 2000
    return pcap


class QueuedVeth(tl.VethPair):
    """tests/system/test_live.py's pair with `queues` RX/TX queues on each end (veth maps a frame
    sent on TX queue i of one end to RX queue i of the other; the sender's flow hash picks i)."""

    def __init__(self, queues: int) -> None:
        super().__init__()
        self.queues = queues

    def up(self) -> QueuedVeth:
        tl.sh("ip", "netns", "add", self.ns_tx)
        tl.sh("ip", "netns", "add", self.ns_rx)
        q = ["numtxqueues", str(self.queues), "numrxqueues", str(self.queues)]
        tl.sh("ip", "link", "add", self.tx, *q, "type", "veth", "peer", "name", self.rx, *q)
        for ns, dev in ((self.ns_tx, self.tx), (self.ns_rx, self.rx)):
            tl.sh("ip", "link", "set", dev, "netns", ns)
            knob = f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"
            tl.sh("ip", "netns", "exec", ns, "sh", "-c", f"[ ! -e {knob} ] || echo 1 > {knob}")
            tl.sh("ip", "-n", ns, "link", "set", dev, "up")
        return self


def _pair(queues: int):
    if WHY:
        pytest.skip(WHY)
    pair = QueuedVeth(queues)
    try:
        pair.up()
        yield pair
    finally:
        pair.down()


@pytest.fixture(scope="module")
def veth():
    yield from _pair(1)


@pytest.fixture(scope="module")
def veth2():
    yield from _pair(2)


@pytest.fixture(scope="module")
def w2000(tmp_path_factory) -> Path:
    return workload_pcap(tmp_path_factory.mktemp("xdp"))


def start(veth, source: str, ledger: Path, keydir: Path, *extra: str) -> subprocess.Popen:
    """`ledgertool capture SOURCE --json` in the receiving namespace; returns once the source is
    open (the ledger is created only after that)."""
    proc = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            veth.ns_rx,
            *tl.CLI,
            "capture",
            source,
            "--ledger",
            str(ledger),
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
            "--json",
            *extra,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (ledger / "ledger.json").exists():
        if proc.poll() is not None:
            raise AssertionError(f"capture exited {proc.returncode}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("capture did not start within 30 s")
        time.sleep(0.05)
    return proc


def verify_and_recompute(ledger: Path, capture: Path, keydir: Path) -> dict:
    v = cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json")
    assert v.returncode == 0, v.stdout + v.stderr
    rc = cli(
        "recompute",
        capture,
        "--digest-key",
        keydir / "digest.key",
        "--ledger",
        ledger,
        "--json",
        "--trust",
        keydir / "verifier.pub",
    )
    doc = json.loads(rc.stdout)
    assert rc.returncode == 0 and doc["ok"], rc.stdout + rc.stderr
    return doc


def xdp_attached(veth) -> bool:
    return "prog/xdp" in tl.sh("ip", "-n", veth.ns_rx, "-d", "link", "show", "dev", veth.rx)


@needs_xdp
def test_xdp_2000_frames_zero_loss_recompute_matches(veth, keydir, tmp_path, w2000):
    ledger = tmp_path / "ledger"
    proc = start(veth, f"xdp:{veth.rx}", ledger, keydir)
    assert xdp_attached(veth)
    sent = tl.replay(veth, w2000, "--pps", "20000")
    time.sleep(0.1)
    rep = tl.finish(proc)
    tl.schema_ok({k: v for k, v in rep.items() if k != "_stderr"}, "capture-report.schema.json")
    assert sent["frames_sent"] == sent["frames_in_file"] == 2000
    live = rep["live"]
    assert rep["frames"] == 2000 and rep["drops"] == 0 and live["kernel_drops"] == 0
    # our XDP program's count of frames it redirected to the socket
    assert live["kernel_packets"] == 2000
    x = live["xdp"]
    assert x["mode"] == "copy" and x["attach"] == "native"  # veth: native XDP, no zero-copy
    q = x["queues"][0]
    assert q["queue"] == 0 and q["frames"] == 2000 and q["rx_dropped"] == q["rx_ring_full"] == 0
    assert q["batches"] <= 2000 and q["umem_frames"] == 16384  # --ring-mb 64 of 4096-byte frames
    assert rep["stop_reason"] == "signal" and rep["interrupted"]
    assert not xdp_attached(veth), "the XDP program must go with the capture"

    doc = verify_and_recompute(ledger, w2000, keydir)
    assert (
        doc["matched"] == doc["frames"] == 2000 and doc["ledger_only"] == doc["capture_only"] == 0
    )
    t = tl.ledger_records(ledger)
    # in order
    assert [bytes(d) for d in t.column("digest").to_pylist()] == tl.file_digests(w2000, keydir)


@needs_xdp
def test_xdp_two_workers_one_socket_per_queue(veth2, keydir, tmp_path, w2000):
    ledger = tmp_path / "ledger"
    proc = start(veth2, f"xdp:{veth2.rx}", ledger, keydir, "--workers", "2")
    sent = tl.replay(veth2, w2000, "--pps", "20000")
    time.sleep(0.1)
    rep = tl.finish(proc)
    tl.schema_ok({k: v for k, v in rep.items() if k != "_stderr"}, "capture-report.schema.json")
    live = rep["live"]
    assert (
        sent["frames_sent"] == 2000
        and rep["frames"] == 2000 == live["kernel_packets"]
        and rep["drops"] == 0
    )
    assert [q["queue"] for q in live["xdp"]["queues"]] == [0, 1]
    assert live["workers"] == 2 and min(live["worker_frames"]) > 0, live["worker_frames"]
    assert [q["frames"] for q in live["xdp"]["queues"]] == live["worker_frames"]
    doc = verify_and_recompute(ledger, w2000, keydir)
    assert doc["matched"] == 2000
    t = tl.ledger_records(ledger)
    assert sorted(bytes(d) for d in t.column("digest").to_pylist()) == sorted(
        tl.file_digests(w2000, keydir)
    )
    assert t.column("seq").to_pylist() == list(range(2000))


@needs_xdp
def test_xdp_queues_without_a_socket_are_a_warning(veth2, keydir, tmp_path):
    """One socket on a two-queue interface sees only its queue: the frames the other queue carried
    reach the stack, not the ledger, and the report must say so (frames + drops < sent)."""
    proc = start(veth2, f"xdp:{veth2.rx}", tmp_path / "ledger", keydir)
    sent = tl.replay(veth2, SAMPLE, "--pps", "5000")
    time.sleep(0.1)
    rep = tl.finish(proc)
    assert 0 < rep["frames"] == rep["live"]["kernel_packets"] < sent["frames_sent"] == 294
    assert any(
        "sockets on 1 of the interface's 2 RX queues (0)" in w and "--workers" in w
        for w in rep["warnings"]
    )
    assert "1 of the interface's 2 RX queues" in rep["_stderr"]


@needs_xdp
def test_xdp_overload_drops_are_declared_and_add_up(veth, keydir, tmp_path):
    ledger = tmp_path / "ledger"
    tx0 = veth.counters(veth.ns_tx, veth.tx)["tx"]["dropped"]
    proc = start(
        veth, f"xdp:{veth.rx}", ledger, keydir, "--ring-mb", "0.25", "--segment-records", "1000"
    )
    # a stalled consumer: 64 UMEM frames fill up, the socket drops
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        sent = tl.replay(veth, SAMPLE, "--topspeed", "--loop", "20")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    time.sleep(0.2)
    rep = tl.finish(proc)
    veth_dropped = veth.counters(veth.ns_tx, veth.tx)["tx"]["dropped"] - tx0
    live = rep["live"]
    assert sent["frames_sent"] == 20 * 294
    assert rep["drops"] > 0 and rep["frames"] >= 64
    # every frame the program redirected is recorded or declared; what the veth dropped it counted
    assert (
        rep["frames"] + rep["drops"] == live["kernel_packets"] == sent["frames_sent"] - veth_dropped
    )
    q = live["xdp"]["queues"][0]
    assert (
        q["umem_frames"] == 64
        and rep["drops"] == q["rx_dropped"] + q["rx_ring_full"] == live["drops_declared"]
    )
    assert "DROPS" in rep["_stderr"] and any(
        "DROPPED by the AF_XDP socket" in w for w in rep["warnings"]
    )
    v = json.loads(cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json").stdout)
    assert v["ok"] and v["drops_declared"] == rep["drops"] and v["frames"] == rep["frames"]
    t = tl.ledger_records(ledger)
    gap = (np.array(t.column("flags").to_pylist()) & 0x8000) != 0
    assert int(np.array(t.column("aux").to_pylist())[gap].sum()) == rep["drops"]
    digests = [bytes(d) for d, g in zip(t.column("digest").to_pylist(), gap) if not g]
    assert set(digests) <= set(tl.file_digests(SAMPLE, keydir)), (
        "a recorded frame is not one we sent"
    )


@needs_xdp
def test_xdp_generic_attach_and_sigterm_seal(veth, keydir, tmp_path):
    ledger = tmp_path / "ledger"
    proc = start(
        veth, f"xdp:{veth.rx}:0", ledger, keydir, "--xdp-attach", "skb", "--xdp-mode", "copy"
    )
    tl.replay(veth, SAMPLE, "--pps", "5000")
    time.sleep(0.1)
    rep = tl.finish(proc, sig=signal.SIGTERM)
    assert rep["stop_reason"] == "signal" and rep["frames"] == 294 == rep["live"]["kernel_packets"]
    assert rep["live"]["xdp"]["attach"] == "skb" and rep["live"]["xdp"]["mode"] == "copy"
    # generic XDP runs before the stack strips VLAN tags: the frames' digests are the file's
    t = tl.ledger_records(ledger)
    assert [bytes(d) for d in t.column("digest").to_pylist()] == tl.file_digests(SAMPLE, keydir)


@needs_xdp
def test_xdp_frames_limit_and_idle_duration(veth, keydir, tmp_path):
    proc = start(
        veth,
        f"xdp:{veth.rx}",
        tmp_path / "a",
        keydir,
        "--frames",
        "150",
        "--segment-seconds",
        "0.1",
    )
    tl.replay(veth, SAMPLE, "--pps", "400")
    rep = tl.finish(proc, sig=None)
    assert rep["stop_reason"] == "frames" and rep["frames"] == 150 and rep["drops"] == 0
    assert len(rep["segments"]) >= 2
    t0 = time.monotonic()
    rep = tl.finish(
        start(veth, f"xdp:{veth.rx}", tmp_path / "b", keydir, "--duration", "0.5"), sig=None
    )
    assert rep["stop_reason"] == "duration" and rep["frames"] == 0 and rep["segments"] == []
    assert time.monotonic() - t0 < 15


def capture_error(
    tmp_path: Path,
    keydir: Path,
    source: str,
    *extra: str,
    ns: str | None = None,
    prefix: list[str] | None = None,
) -> str:
    """Run a capture that must fail: exit 2, one line on stderr, nothing on stdout, no ledger."""
    ledger = tmp_path / "never"
    cmd = [
        *(prefix or []),
        *tl.CLI,
        "capture",
        source,
        "--ledger",
        str(ledger),
        "--digest-key",
        str(keydir / "digest.key"),
        "--signing-key",
        str(keydir / "signing.key"),
        "--json",
        *extra,
    ]
    if ns:
        cmd = ["ip", "netns", "exec", ns, *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not ledger.exists()
    return r.stderr


@needs_xdp
def test_xdp_bad_sources_are_one_line_errors(veth, veth2, keydir, tmp_path):
    assert "no such interface" in capture_error(tmp_path, keydir, "xdp:nosuchif0")
    err = capture_error(tmp_path, keydir, f"xdp:{veth.rx}:3", ns=veth.ns_rx)
    assert "queue 3 out of range" in err and "1 RX queue" in err
    err = capture_error(tmp_path, keydir, f"xdp:{veth2.rx}:1", "--workers", "2", ns=veth2.ns_rx)
    assert "--workers 2 needs RX queues 1..2" in err
    assert "needs Ethernet" in capture_error(tmp_path, keydir, "xdp:lo", ns=veth.ns_rx)
    # veth has no zero-copy support: asked for explicitly, it is an error, not a silent copy
    err = capture_error(
        tmp_path, keydir, f"xdp:{veth.rx}", "--xdp-mode", "zero-copy", ns=veth.ns_rx
    )
    assert "zero-copy mode" in err
    assert "QUEUE must be a number" in capture_error(tmp_path, keydir, "xdp:eth0:x")


@needs_xdp
@pytest.mark.skipif(
    not shutil.which("capsh"), reason="needs capsh (libcap2-bin) to drop capabilities"
)
def test_xdp_without_capabilities_is_a_one_line_error(veth, keydir, tmp_path):
    drop = ["capsh", "--drop=cap_net_raw,cap_net_admin,cap_bpf,cap_sys_admin,cap_perfmon", "--"]
    cmd = " ".join(
        f"'{a}'"
        for a in [
            *tl.CLI,
            "capture",
            f"xdp:{veth.rx}",
            "--ledger",
            str(tmp_path / "never"),
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
        ]
    )
    r = subprocess.run(
        ["ip", "netns", "exec", veth.ns_rx, *drop, "-c", cmd],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "Operation not permitted" in r.stderr and "CAP_BPF" in r.stderr
    assert not (tmp_path / "never").exists()


@needs_xdp
def test_xdp_second_capture_on_the_interface_is_refused(veth, keydir, tmp_path):
    proc = start(veth, f"xdp:{veth.rx}", tmp_path / "first", keydir)
    try:
        err = capture_error(tmp_path, keydir, f"xdp:{veth.rx}", ns=veth.ns_rx)
        assert "already has an XDP program" in err
    finally:
        rep = tl.finish(proc)
    assert rep["frames"] == 0


def test_xdp_not_built_says_what_to_install(keydir, tmp_path):
    """Where the module was not built (no libxdp/libbpf at build time) the import fails: exit 2
    and the packages to install. A None entry in sys.modules makes that import fail as a missing
    file does."""
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['ledgertool._source_xdp'] = None; "
            "from ledgertool.cli.app import main; main()",
            "capture",
            "xdp:eth0",
            "--ledger",
            str(tmp_path / "never"),
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "not built: install libxdp-dev libbpf-dev" in r.stderr
    assert not (tmp_path / "never").exists()


def test_build_leaves_out_sources_without_their_libraries(tmp_path):
    """native/build_ffi.py builds ledgertool._source_xdp / _source_dpdk only where pkg-config finds
    their libraries (setup.py reads OPTIONAL_BUILDERS), and LEDGERTOOL_WITHOUT leaves them out."""
    if not shutil.which("pkg-config"):
        pytest.skip("needs pkg-config")
    script = REPO / "native" / "build_ffi.py"
    probe = (
        "import runpy, json, sys; g = runpy.run_path(sys.argv[1]); "
        "print(json.dumps(g['OPTIONAL_BUILDERS']))"
    )

    def builders(**env) -> list[str]:
        r = subprocess.run(
            [sys.executable, "-c", probe, str(script)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, **env},
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    empty = tmp_path / "no-pc"
    empty.mkdir()
    assert builders(PKG_CONFIG_LIBDIR=str(empty), PKG_CONFIG_PATH="") == []
    found = subprocess.run(["pkg-config", "--exists", "libxdp", "libbpf"]).returncode == 0
    assert ("xdp_builder" in builders()) == found
    assert "xdp_builder" not in builders(LEDGERTOOL_WITHOUT="xdp,dpdk")


def test_native_module_links_no_bypass_library():
    """ledgertool._native must import where libxdp, libbpf and DPDK are absent: it may not need
    them."""
    import ledgertool._native as native

    if not shutil.which("readelf"):
        pytest.skip("needs readelf (binutils)")
    dyn = subprocess.run(
        ["readelf", "-d", native.__file__], capture_output=True, text=True, check=True
    ).stdout
    needed = [line for line in dyn.splitlines() if "(NEEDED)" in line]
    assert needed and not [
        n for n in needed if any(lib in n for lib in ("libxdp", "libbpf", "librte_"))
    ], needed
