"""Highest zero-loss rate of `ledgertool capture` on a veth pair through each live source (AF_PACKET
`iface:`, AF_XDP `xdp:`, DPDK `dpdk:` over net_af_packet), next to tcpdump, in the same run.

Run as root (needs `ip`; tcpdump optional; the xdp/dpdk tools need their modules built):
    python scripts/live_veth_bench.py [--seconds 1] [--tools ledgertool,ledgertool-xdp,...]

Two fresh network namespaces joined by a veth pair (no addresses, IPv6 off); `ledgertool replay
--pps R` sends synthetic frames of 60 bytes (a minimum Ethernet frame without its FCS, "64 bytes"
on the wire) and of 1514 bytes from one end while the capture tool runs in the other. A rate
counts as zero-loss when every frame that reached the interface was recorded and no drop was
declared (net_af_packet reports no drops of its own: there, recorded == arrived decides). Prints
one CSV line per trial and a summary (docs/capture.md, "Benchmark").
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-c", "from ledgertool.cli.app import main; main()"]


def sh(*a: str) -> str:
    return subprocess.run(list(a), check=True, capture_output=True, text=True).stdout


def make_pcap(path: Path, frame_len: int, count: int) -> None:
    """Ethernet/IPv4/UDP frames of `frame_len` bytes, each with a distinct counter."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(count):
            eth = bytes.fromhex("02000000000b02000000000a0800")
            ip_len = frame_len - 14
            ip = struct.pack(
                "!BBHHHBBH4s4s",
                0x45,
                0,
                ip_len,
                i & 0xFFFF,
                0,
                64,
                17,
                0,
                bytes([10, 0, 0, 1]),
                bytes([10, 0, 0, 2]),
            )
            udp = struct.pack("!HHHH", 1024 + i % 1000, 9, ip_len - 20, 0)
            body = struct.pack("!Q", i) * ((frame_len - 42) // 8 + 1)
            frame = (eth + ip + udp + body)[:frame_len]
            f.write(
                struct.pack("<IIII", i // 1_000_000, i % 1_000_000, frame_len, frame_len) + frame
            )


def counters(ns: str, dev: str) -> int:
    return json.loads(sh("ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev))[0]["stats64"][
        "rx"
    ]["packets"]


# each ledgertool source with a 64 MiB receive buffer: AF_PACKET ring, AF_XDP UMEM (16384 frames),
# net_af_packet's TPACKET ring (32768 frames of 2048 bytes)
SOURCES = {
    "ledgertool": lambda rx: [f"iface:{rx}", "--ring-mb", "64"],
    "ledgertool-xdp": lambda rx: [f"xdp:{rx}", "--ring-mb", "64"],
    "ledgertool-dpdk": lambda rx: [
        "dpdk:net_af_packet0",
        "--eal",
        f"--no-huge --no-pci --vdev=net_af_packet0,iface={rx},framecnt=32768",
    ],
}


def available_tools() -> list[str]:
    import importlib.util

    tools = ["ledgertool"]
    for name, mod in (
        ("ledgertool-xdp", "ledgertool._source_xdp"),
        ("ledgertool-dpdk", "ledgertool._source_dpdk"),
    ):
        if importlib.util.find_spec(mod) is not None:
            tools.append(name)
        else:
            print(f"# {mod} not built: no {name}", file=sys.stderr)
    if shutil.which("tcpdump"):
        tools.append("tcpdump")
    else:
        print("# tcpdump not installed", file=sys.stderr)
    return tools


def trial(
    tool: str, ns_tx, tx, ns_rx, rx, pcap: Path, pps: int, loops: int, keys: Path, work: Path
) -> dict:
    rx0 = counters(ns_rx, rx)
    if tool in SOURCES:
        ledger = work / f"l{secrets.token_hex(4)}"
        proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ns_rx,
                *CLI,
                "capture",
                *SOURCES[tool](rx),
                "--ledger",
                str(ledger),
                "--digest-key",
                str(keys / "digest.key"),
                "--signing-key",
                str(keys / "signing.key"),
                "--json",
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while not (ledger / "ledger.json").exists():
            if proc.poll() is not None:
                raise SystemExit(
                    f"{tool}: capture exited {proc.returncode}: {proc.stderr.read().strip()}"
                )
            time.sleep(0.05)
        # the source opens before the ledger exists: let the capture reach its read loop
        time.sleep(0.5)
    else:
        proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                ns_rx,
                "tcpdump",
                "-i",
                rx,
                "-w",
                "/dev/null",
                "-n",
                "-B",
                "65536",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)  # tcpdump prints "listening" before its ring is set up; give it time
    r = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            ns_tx,
            *CLI,
            "replay",
            str(pcap),
            "--iface",
            tx,
            "--pps",
            str(pps),
            "--loop",
            str(loops),
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    sent = json.loads(r.stdout)
    # let the open ring block retire (tcpdump/libpcap: 1000 ms timeout; ledgertool drains on SIGINT)
    time.sleep(1.5 if tool == "tcpdump" else 0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    arrived = counters(ns_rx, rx) - rx0
    if tool in SOURCES:
        rep = json.loads(out)
        recorded, drops = rep["frames"], rep["drops"]
        shutil.rmtree(work / ledger.name, ignore_errors=True)
    else:
        recorded = int(re.search(r"(\d+) packets captured", err).group(1))
        drops = int(re.search(r"(\d+) packets dropped by kernel", err).group(1))
    return {
        "tool": tool,
        "frame_len": pcap.stat().st_size and int(pcap.stem.split("_")[1]),
        "target_pps": pps,
        "sent_pps": round(sent["frames_per_s"]),
        "sent": sent["frames_sent"],
        "arrived": arrived,
        "recorded": recorded,
        "drops": drops,
        "zero_loss": drops == 0 and recorded == arrived == sent["frames_sent"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rates", default="100000,200000,300000,400000,600000,800000,1000000")
    ap.add_argument(
        "--tools",
        help="comma-separated subset of ledgertool, ledgertool-xdp, ledgertool-dpdk, tcpdump",
    )
    a = ap.parse_args()
    tag = f"lb{secrets.token_hex(3)}"
    ns_tx, ns_rx, tx, rx = f"{tag}a", f"{tag}b", f"{tag}x", f"{tag}y"
    tools = a.tools.split(",") if a.tools else available_tools()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run(
            CLI + ["keys", "generate", str(work / "k")], cwd=REPO, check=True, capture_output=True
        )
        try:
            sh("ip", "netns", "add", ns_tx)
            sh("ip", "netns", "add", ns_rx)
            sh("ip", "link", "add", tx, "type", "veth", "peer", "name", rx)
            for ns, dev in ((ns_tx, tx), (ns_rx, rx)):
                sh("ip", "link", "set", dev, "netns", ns)
                sh(
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sh",
                    "-c",
                    f"echo 1 > /proc/sys/net/ipv6/conf/{dev}/disable_ipv6",
                )
                sh("ip", "-n", ns, "link", "set", dev, "up")
            best: dict = {}
            print("tool,frame_len,target_pps,sent_pps,sent,arrived,recorded,drops,zero_loss")
            for flen in (60, 1514):
                pcap = work / f"f_{flen}.pcap"
                make_pcap(pcap, flen, 10000)
                # rate by rate, every tool in turn: on a shared machine the tools then meet the same
                # load
                going = list(tools)
                for pps in map(int, a.rates.split(",")):
                    loops = max(1, int(pps * a.seconds / 10000))
                    for tool in list(going):
                        t = trial(tool, ns_tx, tx, ns_rx, rx, pcap, pps, loops, work / "k", work)
                        print(
                            ",".join(
                                str(t[k])
                                for k in (
                                    "tool",
                                    "frame_len",
                                    "target_pps",
                                    "sent_pps",
                                    "sent",
                                    "arrived",
                                    "recorded",
                                    "drops",
                                    "zero_loss",
                                )
                            ),
                            flush=True,
                        )
                        if not t["zero_loss"]:
                            going.remove(tool)
                            continue
                        best[(tool, flen)] = max(best.get((tool, flen), 0), t["sent_pps"])
            for (tool, flen), v in sorted(best.items()):
                print(f"# highest zero-loss rate: {tool} {flen} B frames: {v:,} frames/s")
        finally:
            for ns in (ns_tx, ns_rx):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)


if __name__ == "__main__":
    main()
