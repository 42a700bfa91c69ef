"""Live capture (AF_PACKET TPACKET_V3) and replay on a real veth pair between two network
namespaces that each test module creates and removes (docs/capture.md).

The pair carries nothing but what we replay: both ends come up without addresses and with IPv6
disabled, so the kernel sends no router solicitations, MLD reports or ARP. What is checked:
- zero loss at a moderate rate: every frame's digest in the ledger equals the recomputed digest of
  the replayed file, nothing missing, nothing extra, no drops declared, the ledger verifies;
- deliberate overload (1 MiB ring, top speed, 20 loops, the capture process stopped while the
  replay runs): drops are declared in GAP records, and frames + drops == frames that reached the
  interface == frames sent (minus what the veth itself dropped, counted separately);
- --frames and --segment-seconds end and rotate a live capture;
- bad interfaces are one-line usage errors.
Needs root and `ip` (iproute2); those tests skip with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import CORPUS, REPO, SAMPLES, cli

CLI = [sys.executable, "-c", "from ledgertool.cli.app import main; main()"]
SAMPLE = SAMPLES / "sample.pcap"  # 294 Ethernet frames, 57 of them 802.1Q-tagged
# 5898 Ethernet frames <= 578 B
CORPUS_ETH = CORPUS / "files" / "rusticata__wireshark_samples-test.pcapng"


def _why_no_netns() -> str | None:
    if sys.platform != "linux":
        return "live capture is Linux-only"
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, AF_PACKET)"
    if not shutil.which("ip"):
        return "needs `ip` (iproute2); .ci/run installs it when missing"
    probe = f"ltp{secrets.token_hex(3)}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


WHY = _why_no_netns()
needs_netns = pytest.mark.skipif(WHY is not None, reason=WHY or "")


def sh(*args: str) -> str:
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


class VethPair:
    """Namespaces <tag>a / <tag>b joined by veth <tag>x (in a, the sender) -- <tag>y (in b)."""

    def __init__(self) -> None:
        tag = f"lt{secrets.token_hex(3)}"  # unique per run; interface names stay <= 15 chars
        self.ns_tx, self.ns_rx = f"{tag}a", f"{tag}b"
        self.tx, self.rx = f"{tag}x", f"{tag}y"

    def up(self) -> VethPair:
        sh("ip", "netns", "add", self.ns_tx)
        sh("ip", "netns", "add", self.ns_rx)
        sh("ip", "link", "add", self.tx, "type", "veth", "peer", "name", self.rx)
        for ns, dev in ((self.ns_tx, self.tx), (self.ns_rx, self.rx)):
            sh("ip", "link", "set", dev, "netns", ns)
            # before the link comes up: no IPv6 (no RS/MLD/DAD frames); no addresses at all
            knob = f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"
            sh("ip", "netns", "exec", ns, "sh", "-c", f"[ ! -e {knob} ] || echo 1 > {knob}")
            sh("ip", "-n", ns, "link", "set", dev, "up")
        return self

    def down(self) -> None:
        for ns in (self.ns_tx, self.ns_rx):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def counters(self, ns: str, dev: str) -> dict:
        link = json.loads(sh("ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev))[0]
        return link["stats64"]


@pytest.fixture(scope="module")
def veth():
    if WHY:
        pytest.skip(WHY)
    pair = VethPair()
    try:
        pair.up()
        yield pair
    finally:
        pair.down()


def start_capture(veth: VethPair, ledger: Path, keydir: Path, *extra: str) -> subprocess.Popen:
    """`ledgertool capture iface:RX --json` inside the receiving namespace; returns once the socket
    is bound (the ledger is created only after the source opened)."""
    proc = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            veth.ns_rx,
            *CLI,
            "capture",
            f"iface:{veth.rx}",
            "--ledger",
            str(ledger),
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
            "--block-ms",
            "5",
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


def finish(proc: subprocess.Popen, sig: int | None = signal.SIGINT, timeout: float = 30) -> dict:
    if sig is not None:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return {**json.loads(out), "_stderr": err}


def replay(veth: VethPair, path: Path, *args: str) -> dict:
    r = subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            veth.ns_tx,
            *CLI,
            "replay",
            str(path),
            "--iface",
            veth.tx,
            "--json",
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def schema_ok(doc: dict, name: str) -> None:
    import jsonschema

    jsonschema.Draft202012Validator(json.loads((REPO / "schemas" / name).read_text())).validate(doc)


def ledger_records(ledger: Path) -> pa.Table:
    """Every sealed record of the ledger, link by link in segment order, as verify checks them (a
    segment's Parquet file or raw record file, whichever form the ledger holds)."""
    from ledgertool.ledger.header import load_ledger
    from ledgertool.ledger.reader import LedgerReader
    from ledgertool.verify.ledger import verified_segment

    reader, lg = LedgerReader(ledger), load_ledger(ledger)
    return pa.concat_tables(
        [
            verified_segment(reader, lg, link, i).table
            for link in sorted(reader.links)
            for i in sorted(reader.listing(link).sealed)
        ]
    )


def file_digests(path: Path, keydir: Path) -> list[bytes]:
    from ledgertool.algorithms import get_algorithm, get_strip_mode
    from ledgertool.digest.engine import DigestEngine
    from ledgertool.digest.record import record_dtype
    from ledgertool.keyfiles import DigestKey
    from ledgertool.source.file import CaptureReader

    alg = get_algorithm("siphash-1-3-128")
    key = DigestKey.load(keydir / "digest.key").subkey(alg.name, alg.key_size)
    out: list[bytes] = []
    size = record_dtype(alg.digest_size).itemsize
    with CaptureReader(path) as r:
        e = DigestEngine(r, alg, get_strip_mode("frame"), key)
        while True:
            recs, n, _ = e.fill(len(out))
            if n == 0:
                break
            raw = bytes(recs)  # not numpy "S" fields: they drop trailing zero bytes
            out += [raw[i * size + size - alg.digest_size : (i + 1) * size] for i in range(n)]
    return out


@needs_netns
@pytest.mark.parametrize(
    "capture, rate",
    [(SAMPLE, "20000"), (CORPUS_ETH, "100000")],
    ids=["sample-vlan", "corpus-rusticata"],
)
def test_zero_loss_every_digest_matches_recompute(veth, keydir, tmp_path, capture, rate):
    if not capture.is_file():
        pytest.skip(f"{capture} not present")
    ledger = tmp_path / "ledger"
    rx0 = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"]
    proc = start_capture(veth, ledger, keydir)
    sent = replay(veth, capture, "--pps", rate)
    time.sleep(0.1)
    rep = finish(proc)
    rx = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"] - rx0
    schema_ok(sent, "replay-report.schema.json")
    schema_ok({k: v for k, v in rep.items() if k != "_stderr"}, "capture-report.schema.json")
    assert sent["skipped_too_large"] == sent["skipped_too_short"] == sent["skipped_linktype"] == 0
    assert sent["frames_sent"] == sent["frames_in_file"] == rx
    assert rep["drops"] == 0 and rep["live"]["kernel_drops"] == 0
    assert rep["frames"] == rx, "the interface carried frames we did not replay (or we lost some)"
    assert rep["stop_reason"] == "signal" and rep["interrupted"]

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
    assert doc["matched"] == doc["frames"] == rep["frames"]
    assert doc["ledger_only"] == doc["capture_only"] == 0
    # the same digests in the same order (a veth keeps order)
    t = ledger_records(ledger)
    assert [bytes(d) for d in t.column("digest").to_pylist()] == file_digests(capture, keydir)
    if capture == SAMPLE:
        assert rep["live"]["vlan_restored"] == 57  # tags the kernel stripped were put back


@needs_netns
def test_two_workers_zero_loss_merged_in_timestamp_order(veth, keydir, tmp_path):
    """--workers 2: two rings in one fanout group; the sealed ledger holds exactly the replayed
    frames' digests (as a multiset: flows are spread over the workers) in timestamp order."""
    capture = CORPUS_ETH if CORPUS_ETH.is_file() else SAMPLE
    ledger = tmp_path / "ledger"
    rx0 = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"]
    proc = start_capture(veth, ledger, keydir, "--workers", "2")
    sent = replay(veth, capture, "--pps", "100000")
    time.sleep(0.1)
    rep = finish(proc)
    rx = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"] - rx0
    schema_ok({k: v for k, v in rep.items() if k != "_stderr"}, "capture-report.schema.json")
    assert sent["frames_sent"] == sent["frames_in_file"] == rx
    assert rep["drops"] == 0 and rep["live"]["kernel_drops"] == 0
    assert rep["frames"] == rx == rep["live"]["kernel_packets"]
    live = rep["live"]
    assert live["workers"] == 2 and sum(live["worker_frames"]) == rep["frames"]
    assert min(live["worker_frames"]) > 0, (
        f"fanout put every flow on one worker: {live['worker_frames']}"
    )

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
    assert rc.returncode == 0 and doc["matched"] == doc["frames"] == rep["frames"], (
        rc.stdout + rc.stderr
    )
    t = ledger_records(ledger)
    assert sorted(bytes(d) for d in t.column("digest").to_pylist()) == sorted(
        file_digests(capture, keydir)
    )
    ts = np.array(t.column("ts_ns").to_pylist(), dtype=np.int64)
    assert (np.diff(ts) >= 0).all(), "sealed order is not timestamp order"
    assert t.column("seq").to_pylist() == list(range(len(ts)))


def test_merge_worker_records_orders_by_ts_worker_index():
    """The merge at a segment boundary: (ts_ns, worker, order within the worker); GAP records take
    their timestamp's place; seq renumbered contiguously; independent of the spread over workers."""
    from ledgertool.capture.workers import merge_worker_records, split_by_worker
    from ledgertool.digest.record import FLAG_GAP, record_dtype

    dt = record_dtype(16)

    def recs(rows):  # rows: (ts, tag, gap drops or None)
        a = np.zeros(len(rows), dtype=dt)
        for i, (ts, tag, drops) in enumerate(rows):
            a[i]["ts_ns"] = ts
            a[i]["seq"] = 999  # whatever the worker numbered: replaced
            a[i]["digest"] = tag.ljust(16, b"-")
            if drops is not None:
                a[i]["flags"], a[i]["aux"] = FLAG_GAP, drops
        return a

    w0 = recs(
        [(10, b"a", None), (20, b"b", None), (20, b"c", None), (35, b"g0", 7), (40, b"d", None)]
    )
    w1 = recs([(5, b"x", None), (20, b"y", None), (30, b"g1", 3), (40, b"z", None)])
    w2 = recs([])
    out, wid = merge_worker_records([w0, w1, w2], first_seq=100)
    tags = [bytes(d).rstrip(b"-") for d in out["digest"]]
    # ties at 20 and 40: worker 0 before worker 1; within worker 0, b before c (its own order)
    assert tags == [b"x", b"a", b"b", b"c", b"y", b"g1", b"g0", b"d", b"z"]
    assert wid.tolist() == [1, 0, 0, 0, 1, 1, 0, 0, 1]
    assert out["seq"].tolist() == list(range(100, 109))
    gap = (out["flags"] & FLAG_GAP) != 0
    assert out["aux"][gap].tolist() == [3, 7] and int(gap.sum()) == 2
    # a tail carried into the next segment splits back into each worker's own order
    back = split_by_worker(out[5:], wid[5:], 3)
    assert [[bytes(d).rstrip(b"-") for d in b["digest"]] for b in back] == [
        [b"g0", b"d"],
        [b"g1", b"z"],
        [],
    ]
    # distinct timestamps: the same records spread otherwise (or one worker) merge identically
    u = recs([(1, b"p", None), (4, b"q", None), (6, b"gq", 2)])
    v = recs([(2, b"r", None), (3, b"s", None), (5, b"t", None)])
    one, _ = merge_worker_records([np.concatenate([u, v])], first_seq=0)
    two, _ = merge_worker_records([u, v], first_seq=0)
    three, _ = merge_worker_records([v[:1], u, v[1:]], first_seq=0)
    assert one.tobytes() != b"" and one.tobytes() == two.tobytes() == three.tobytes()
    empty, ew = merge_worker_records([w2, w2], first_seq=5)
    assert len(empty) == 0 and len(ew) == 0


@needs_netns
@pytest.mark.parametrize("workers", ["1", "2"])
def test_overload_drops_are_declared_and_add_up(veth, keydir, tmp_path, workers):
    ledger = tmp_path / "ledger"
    tx0 = veth.counters(veth.ns_tx, veth.tx)
    rx0 = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"]
    proc = start_capture(
        veth, ledger, keydir, "--ring-mb", "1", "--segment-records", "1000", "--workers", workers
    )
    os.kill(proc.pid, signal.SIGSTOP)  # a stalled consumer: the ring fills, the kernel drops
    try:
        sent = replay(veth, SAMPLE, "--topspeed", "--loop", "20")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    time.sleep(0.2)
    rep = finish(proc)
    tx1 = veth.counters(veth.ns_tx, veth.tx)
    rx = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"] - rx0
    veth_dropped = tx1["tx"]["dropped"] - tx0["tx"]["dropped"]

    assert sent["frames_sent"] == 20 * 294
    assert sent["frames_sent"] == rx + veth_dropped  # what the veth did not deliver, it counted
    assert rep["drops"] > 0, "a 1 MiB ring behind a stopped consumer must overflow"
    assert rep["frames"] + rep["drops"] == rx  # every frame that arrived: recorded or declared
    live = rep["live"]
    assert (
        live["kernel_packets"] == rx
        and live["kernel_drops"] == rep["drops"] == live["drops_declared"]
    )
    assert "DROPS" in rep["_stderr"] and any("DROPPED" in w for w in rep["warnings"])

    v = json.loads(cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json").stdout)
    assert v["ok"], v
    assert v["drops_declared"] == rep["drops"] and v["frames"] == rep["frames"]
    assert v["records"] == rep["frames"] + live["gaps"]
    t = ledger_records(ledger)
    flags = np.array(t.column("flags").to_pylist())
    aux = np.array(t.column("aux").to_pylist())
    gap = (flags & 0x8000) != 0
    assert int(aux[gap].sum()) == rep["drops"]
    digests = [bytes(d) for d, g in zip(t.column("digest").to_pylist(), gap) if not g]
    assert set(digests) <= set(file_digests(SAMPLE, keydir)), "a recorded frame is not one we sent"


@needs_netns
@pytest.mark.parametrize("workers", ["1", "2"])
def test_frames_limit_and_segment_seconds(veth, keydir, tmp_path, workers):
    ledger = tmp_path / "ledger"
    proc = start_capture(
        veth, ledger, keydir, "--frames", "150", "--segment-seconds", "0.1", "--workers", workers
    )
    replay(veth, SAMPLE, "--pps", "400")  # ~0.75 s
    rep = finish(proc, sig=None)
    assert rep["stop_reason"] == "frames" and rep["frames"] == 150 and rep["drops"] == 0
    assert len(rep["segments"]) >= 2, rep["segments"]  # rotated by age, not by count
    v = json.loads(cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json").stdout)
    assert v["ok"] and v["frames"] == 150 and v["segments"] == len(rep["segments"])


@needs_netns
def test_duration_ends_an_idle_capture(veth, keydir, tmp_path):
    ledger = tmp_path / "ledger"
    t0 = time.monotonic()
    proc = start_capture(veth, ledger, keydir, "--duration", "0.5")
    rep = finish(proc, sig=None)
    assert rep["stop_reason"] == "duration" and rep["frames"] == 0 and rep["segments"] == []
    assert time.monotonic() - t0 < 15


def test_missing_interface_is_a_usage_error(keydir, tmp_path):
    r = cli(
        "capture",
        "iface:nosuchif0",
        "--ledger",
        tmp_path / "l",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--json",
    )
    assert r.returncode == 2 and r.stdout == ""
    assert "nosuchif0" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "l").exists()  # nothing created for a source that cannot open


def test_worker_pins_beyond_the_cpus_are_a_usage_error(keydir, tmp_path):
    r = cli(
        "capture",
        "iface:nosuchif0",
        "--ledger",
        tmp_path / "l",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--workers",
        "2",
        "--pin",
        "100000",
    )
    assert r.returncode == 2 and "CPU 100000" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "l").exists()


def test_replay_to_missing_interface_is_a_usage_error():
    r = cli("replay", SAMPLE, "--iface", "nosuchif0", "--topspeed")
    assert r.returncode == 2 and "nosuchif0" in r.stderr and "Traceback" not in r.stderr


def test_replay_rate_options_are_exclusive():
    r = cli("replay", SAMPLE, "--iface", "lo", "--pps", "10", "--topspeed")
    assert r.returncode == 2 and "one of" in r.stderr


# ---- the PACKET_FANOUT group -----------------------------------------------------------

_FOREIGN = """
import signal, socket, struct, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 3))
# SOL_PACKET, PACKET_FANOUT: group id | PACKET_FANOUT_HASH << 16
s.setsockopt(263, 18, int(sys.argv[2]))
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
print("joined", flush=True)
signal.sigwait({signal.SIGTERM})
# PACKET_STATISTICS: frames it took
print(struct.unpack("II", s.getsockopt(263, 6, 8))[0], flush=True)
"""


def join_fanout(veth: VethPair, group: int) -> subprocess.Popen:
    """Another CAP_NET_RAW process in the receiving namespace joins fanout group `group` on the
    capture's interface; SIGTERM makes it print how many frames it received."""
    p = subprocess.Popen(
        ["ip", "netns", "exec", veth.ns_rx, sys.executable, "-c", _FOREIGN, veth.rx, str(group)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = p.stdout.readline()
    assert line.strip() == "joined", (line, p.stderr.read() if p.poll() is not None else "")
    return p


def foreign_frames(p: subprocess.Popen) -> int:
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    return int(out.strip().splitlines()[-1])


def capture_pid(proc: subprocess.Popen) -> int:
    """`ip netns exec` execs the command: the capture's pid is the Popen's."""
    assert "python" in Path(f"/proc/{proc.pid}/comm").read_text(), Path(
        f"/proc/{proc.pid}/comm"
    ).read_text()
    return proc.pid


@needs_netns
@pytest.mark.parametrize("workers", ["1", "2"])
def test_predictable_fanout_group_takes_no_frames(veth, keydir, tmp_path, workers):
    """Capture joined group pid & 0xffff even with one worker; a process that joined that group took
    about half the frames, undeclared, and verify said OK. Now one worker joins no group and several
    join a random one: the old guess takes nothing from the capture."""
    ledger = tmp_path / "ledger"
    rx0 = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"]
    proc = start_capture(veth, ledger, keydir, "--workers", workers)
    old_group = capture_pid(proc) & 0xFFFF
    thief = join_fanout(veth, old_group)
    try:
        replay(veth, CORPUS_ETH if CORPUS_ETH.is_file() else SAMPLE, "--pps", "50000")
        time.sleep(0.2)
        rep = finish(proc)
    finally:
        took = foreign_frames(thief)
    rx = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"] - rx0
    assert rep["frames"] == rx and rep["drops"] == 0, (rep["frames"], rx, rep["drops"])
    assert took == rx, (
        "the other socket is alone in its group, so it sees every frame (its own copy)"
    )
    if workers == "2":
        fan = rep["live"]["fanout"]
        assert fan["group"] != old_group and fan["foreign_frames"] == 0
        assert fan["witness_frames"] == rx
    else:
        assert "fanout" not in rep["live"]
    assert not any("FANOUT" in w for w in rep["warnings"])


@needs_netns
def test_foreign_fanout_member_is_detected_and_declared(veth, keydir, tmp_path):
    """A process that finds the random group (here with `ss`, through packet_diag) and joins it
    still takes frames, but the capture's witness counts them: the ledger declares them in a GAP
    record, the report says FANOUT, and verify counts them as declared drops."""
    ledger = tmp_path / "ledger"
    rx0 = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"]
    proc = start_capture(veth, ledger, keydir, "--workers", "2")
    ss = subprocess.run(
        ["ip", "netns", "exec", veth.ns_rx, "ss", "-0", "-a", "-e"], capture_output=True, text=True
    )
    groups = {int(g) for g in __import__("re").findall(r"fanout\(id:(\d+)", ss.stdout)}
    if len(groups) != 1:
        proc.kill()
        proc.communicate()
        pytest.skip(
            f"cannot read the fanout group with ss (packet_diag): {ss.stdout[-300:]} {ss.stderr}"
        )
    thief = join_fanout(veth, groups.pop())
    try:
        replay(veth, CORPUS_ETH if CORPUS_ETH.is_file() else SAMPLE, "--pps", "50000")
        time.sleep(0.2)
        rep = finish(proc)
    finally:
        took = foreign_frames(thief)
    rx = veth.counters(veth.ns_rx, veth.rx)["rx"]["packets"] - rx0
    schema_ok({k: v for k, v in rep.items() if k != "_stderr"}, "capture-report.schema.json")
    assert 0 < took < rx, f"the joined socket took {took} of {rx} frames"
    fan = rep["live"]["fanout"]
    assert fan["foreign_frames"] == took and fan["witness_frames"] == rx
    assert rep["frames"] == rx - took and rep["drops"] == took and rep["live"]["kernel_drops"] == 0
    assert any(w.startswith(f"FANOUT: {took} frames") for w in rep["warnings"]), rep["warnings"]
    assert "FANOUT" in rep["_stderr"] and "DROPS" in rep["_stderr"]
    v = json.loads(cli("verify", ledger, "--trust", keydir / "verifier.pub", "--json").stdout)
    assert v["ok"] and v["drops_declared"] == took and v["frames"] == rx - took
