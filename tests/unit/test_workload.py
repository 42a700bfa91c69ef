"""Workload specs and the native generator (docs/workloads.md, schemas/workload.schema.json).

Oracles: scapy (dissects the generated pcap and recomputes IPv4/UDP/TCP checksums and the RoCEv2
ICRC), ledgertool.digest.reference (pure-Python derivation of order, timestamps, size draws and
payload bytes) and scapy-built frames from the raw TOML values, independent of
ledgertool.source.workload.
"""

from __future__ import annotations

import collections
import hashlib
import json
import tomllib
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES, cli
from scapy.all import IP, TCP, UDP, Dot1AD, Dot1Q, Ether, IPv6, Raw, raw, rdpcap  # noqa: E402 - a runtime dependency
from scapy.contrib.roce import BTH  # noqa: E402

from ledgertool.digest import reference as R
from ledgertool.errors import WorkloadSpecError
from ledgertool.source import open_source
from ledgertool.source.workload import load_spec, open_workload, parse_spec, write_pcap

WORKLOADS = SAMPLES / "workloads"
SPECS = sorted(WORKLOADS.glob("*.toml"))
SCHEMA = json.loads((REPO / "schemas" / "workload.schema.json").read_text())
IMIX = {64: 7, 594: 4, 1518: 1}

# One small spec that touches every feature: IPv4/IPv6, UDP/TCP/RoCEv2, VLAN, QinQ, every size
# form, payloads that need Ethernet padding and RoCEv2 pad bytes, PSN wrap-around.
FEATURES = """
version = 1
seed = 0xfedcba9876543210
start_ns = 1767225600123456789
interframe_ps = 1680

[[flows]]
name = "v4-udp-vlan-imix"
src_mac = "02:00:5e:00:00:01"
dst_mac = "02:00:5e:00:00:02"
vlan = 100
vlan_pcp = 5
src_ip = "192.0.2.1"
dst_ip = "198.51.100.2"
protocol = "udp"
src_port = 1111
dst_port = 2222
ip_id = 65530
frames = 40
size = "imix"

[[flows]]
name = "v6-tcp-list"
src_mac = "02:00:5e:00:00:03"
dst_mac = "02:00:5e:00:00:04"
src_ip = "2001:db8::1"
dst_ip = "2001:db8::2"
dscp = 10
protocol = "tcp"
src_port = 443
dst_port = 50000
tcp_seq = 4294967000
tcp_ack = 7
frames = 25
size = [[100, 3], [1000, 1], [9018, 1]]

[[flows]]
name = "v4-udp-tiny"
src_mac = "02:00:5e:00:00:05"
dst_mac = "02:00:5e:00:00:06"
outer_vlan = 10
vlan = 20
src_ip = "203.0.113.5"
dst_ip = "203.0.113.6"
protocol = "udp"
frames = 7
payload = [[0, 1], [3, 1], [17, 1]]

[[flows]]
name = "roce-write"
src_mac = "02:00:5e:00:00:07"
dst_mac = "02:00:5e:00:00:08"
src_ip = "192.0.2.7"
dst_ip = "192.0.2.8"
protocol = "rocev2"
src_port = 49999
opcode = "RDMA_WRITE_ONLY"
dest_qp = 0xabcdef
psn = 16777213
va = 0x1000
rkey = 0x77
frames = 9
payload = [[4096, 1], [13, 1], [256, 2]]

[[flows]]
name = "roce6-send-qinq"
src_mac = "02:00:5e:00:00:09"
dst_mac = "02:00:5e:00:00:0a"
outer_vlan = 30
vlan = 40
src_ip = "2001:db8::7"
dst_ip = "2001:db8::8"
protocol = "rocev2"
opcode = "SEND_MIDDLE"
dest_qp = 5
frames = 6
size = [[1082, 1]]

[[flows]]
name = "roce-ack"
src_mac = "02:00:5e:00:00:08"
dst_mac = "02:00:5e:00:00:07"
src_ip = "192.0.2.8"
dst_ip = "192.0.2.7"
protocol = "rocev2"
opcode = "ACKNOWLEDGE"
dest_qp = 0x11
frames = 5
payload = 0
"""


@pytest.fixture(scope="module")
def features_spec(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("wl") / "features.toml"
    p.write_text(FEATURES)
    return p


@pytest.fixture(scope="module")
def generated(tmp_path_factory, features_spec) -> dict[str, Path]:
    """Each sample spec and the feature spec generated once through the CLI."""
    d = tmp_path_factory.mktemp("gen")
    out = {}
    for spec in [*SPECS, features_spec]:
        pcap = d / f"{spec.stem}.pcap"
        r = cli("workload", "generate", spec, "--out", pcap, "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["frames"] == sum(f["frames"] for f in doc["flows"])
        import jsonschema

        jsonschema.validate(
            doc, json.loads((REPO / "schemas" / "workload-generate-report.schema.json").read_text())
        )
        out[spec.stem] = pcap
    return out


def _toml(path: Path) -> dict:
    return tomllib.loads(path.read_text())


# ---- spec validation -------------------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.name)
def test_samples_are_valid_by_code_and_by_schema(spec):
    import jsonschema

    jsonschema.validate(_toml(spec), SCHEMA)
    assert load_spec(spec).total_frames > 0


def test_feature_spec_is_valid_by_schema():
    import jsonschema

    jsonschema.validate(tomllib.loads(FEATURES), SCHEMA)


BAD = [
    # (mutation of the feature spec, key named in the message, the schema rejects it too)
    (lambda d: d["flows"][0].update(vlan=5000), "flows[0].vlan", True),
    (lambda d: d["flows"][1].update(colour="red"), "flows[1].colour", True),
    (lambda d: d.pop("seed"), "seed", True),
    (lambda d: d.update(seed=-1), "seed", True),
    (lambda d: d["flows"][2].update(src_mac="02:00:5e:00:00"), "flows[2].src_mac", True),
    (lambda d: d["flows"][3].update(protocol="sctp"), "flows[3].protocol", True),
    (lambda d: d["flows"][0].update(size=63), "flows[0].size", True),
    (lambda d: d["flows"][1].update(size=[[100, 0]]), "flows[1].size[0][1]", True),
    (lambda d: d["flows"][1].update(payload=10), "flows[1].size", True),
    (lambda d: d.update(interframe_ns=5), "interframe_ps", True),
    (lambda d: d["flows"][0].update(dst_ip="2001:db8::9"), "flows[0].dst_ip", False),
    (lambda d: d["flows"][0].update(src_ip="192.0.2.300"), "flows[0].src_ip", False),
    (lambda d: d["flows"][1].update(size=[[64, 1]]), "flows[1].size[0][0]", False),
    (lambda d: d["flows"][4].update(size=1083), "flows[4].size", False),
    (lambda d: d["flows"][3].update(dst_port=4792), "flows[3].dst_port", False),
    (lambda d: d["flows"][0].update(opcode="SEND_ONLY"), "flows[0].opcode", False),
    (lambda d: d["flows"][3].pop("opcode"), "flows[3].opcode", False),
    (lambda d: d["flows"][2].pop("vlan"), "flows[2].outer_vlan", False),
]


def _dump_toml(doc: dict) -> str:
    """Minimal TOML writer for the shapes used here."""

    def val(v):
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return str(v)

    lines = [f"{k} = {val(v)}" for k, v in doc.items() if k != "flows"]
    for f in doc.get("flows", []):
        lines += ["", "[[flows]]"] + [f"{k} = {val(v)}" for k, v in f.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "mutate,key,schema_too", BAD, ids=[b[1] + str(i) for i, b in enumerate(BAD)]
)
def test_bad_spec_exit_2_one_line_naming_file_and_key(tmp_path, mutate, key, schema_too):
    doc = tomllib.loads(FEATURES)
    mutate(doc)
    spec = tmp_path / "bad.toml"
    spec.write_text(_dump_toml(doc))
    r = cli("workload", "generate", spec, "--out", tmp_path / "x.pcap")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(spec) in lines[0] and f": {key}:" in lines[0], lines[0]
    assert not (tmp_path / "x.pcap").exists()
    import jsonschema

    if schema_too:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, SCHEMA)


def test_bad_toml_and_missing_file_exit_2(tmp_path):
    spec = tmp_path / "syntax.toml"
    spec.write_text("version = 1\nseed = \n")
    for path in (spec, tmp_path / "absent.toml"):
        r = cli("workload", "generate", path, "--out", tmp_path / "x.pcap")
        assert (
            r.returncode == 2 and str(path) in r.stderr and len(r.stderr.strip().splitlines()) == 1
        )
    r = cli(
        "capture",
        f"workload:{tmp_path / 'absent.toml'}",
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        tmp_path / "k",
        "--signing-key",
        tmp_path / "s",
    )
    assert r.returncode == 2


def test_parse_spec_error_carries_key():
    doc = tomllib.loads(FEATURES)
    doc["flows"][5]["dest_qp"] = 1 << 24
    with pytest.raises(WorkloadSpecError) as e:
        parse_spec(doc, "mem.toml")
    assert e.value.key == "flows[5].dest_qp" and str(e.value).startswith(
        "mem.toml: flows[5].dest_qp: "
    )


# ---- determinism -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", [p.stem for p in SPECS] + ["features"])
def test_same_spec_same_pcap_bytes(tmp_path, generated, features_spec, name):
    spec = features_spec if name == "features" else WORKLOADS / f"{name}.toml"
    again = tmp_path / "again.pcap"
    with open_workload(spec) as r:
        write_pcap(r, again)
    assert (
        hashlib.sha256(again.read_bytes()).digest()
        == hashlib.sha256(generated[name].read_bytes()).digest()
    )


def test_generate_refuses_to_overwrite(tmp_path, generated):
    out = tmp_path / "x.pcap"
    out.write_bytes(b"keep")
    r = cli("workload", "generate", SPECS[0], "--out", out)
    assert r.returncode == 2 and out.read_bytes() == b"keep"
    assert cli("workload", "generate", SPECS[0], "--out", out, "--force").returncode == 0


# ---- what scapy sees in the generated pcap -----------------------------------------------------


def _flow_key(p) -> tuple:
    ip = p[IP] if IP in p else p[IPv6]
    l4 = p[UDP] if UDP in p else p[TCP]
    opcode = p[BTH].opcode if BTH in p else None
    return (ip.src, ip.dst, l4.sport, l4.dport, opcode)


OPCODE = {"RDMA_WRITE_ONLY": 10, "ACKNOWLEDGE": 17, "SEND_MIDDLE": 1}


def _expected_sizes(flow: dict, hdr_len: int) -> set[int]:
    """Captured lengths a flow may have (frame sizes minus the 4-byte FCS)."""
    if "size" in flow:
        s = flow["size"]
        sizes = IMIX if s == "imix" else ({s: 1} if isinstance(s, int) else dict(map(tuple, s)))
        return {x - 4 for x in sizes}
    p = flow["payload"]
    pays = [p] if isinstance(p, int) else [x for x, _ in p]
    roce = flow["protocol"] == "rocev2"
    return {max(60, hdr_len + x + ((-x) % 4 if roce else 0) + (4 if roce else 0)) for x in pays}


@pytest.mark.parametrize("name", [p.stem for p in SPECS] + ["features"])
def test_scapy_reads_what_the_spec_describes(generated, features_spec, name):
    spec_path = features_spec if name == "features" else WORKLOADS / f"{name}.toml"
    doc = _toml(spec_path)
    pkts = rdpcap(str(generated[name]))
    assert len(pkts) == sum(f["frames"] for f in doc["flows"])
    by_flow = collections.defaultdict(list)
    for p in pkts:
        by_flow[_flow_key(p)].append(p)
    assert len(by_flow) == len(doc["flows"])
    for f in doc["flows"]:
        proto = f["protocol"]
        sport = f.get("src_port", 49152)
        dport = f.get("dst_port", 4791 if proto == "rocev2" else 9)
        key = (f["src_ip"], f["dst_ip"], sport, dport, OPCODE.get(f.get("opcode")))
        got = by_flow[key]
        assert len(got) == f["frames"], f["name"]
        sizes = collections.Counter()
        for k, p in enumerate(got):
            rp = raw(p)  # built once: scapy rebuilds the bytes on every call
            assert p.src == f["src_mac"] and p.dst == f["dst_mac"]
            if "outer_vlan" in f:
                assert p[Dot1AD].vlan == f["outer_vlan"] and p[Dot1Q].vlan == f["vlan"]
            elif "vlan" in f:
                assert (
                    Dot1AD not in p
                    and p[Dot1Q].vlan == f["vlan"]
                    and p[Dot1Q].prio == f.get("vlan_pcp", 0)
                )
            else:
                assert Dot1Q not in p
            ip = p[IP] if IP in p else p[IPv6]
            assert (IP in p) == ("." in f["src_ip"])
            hdr = len(rp) - len(raw(ip)) + (20 if IP in p else 40)
            l4 = p[TCP] if proto == "tcp" else p[UDP]
            hdr += 20 if proto == "tcp" else 8
            if proto == "rocev2":
                bth = p[BTH]
                assert bth.opcode == OPCODE[f["opcode"]] and bth.dqpn == f.get("dest_qp", 0)
                assert bth.psn == (f.get("psn", 0) + k) % (1 << 24)
                hdr += 12 + {10: 16, 17: 4}.get(bth.opcode, 0)
            assert len(rp) in _expected_sizes(f, hdr), (f["name"], len(rp))
            sizes[len(rp)] += 1
            # Checksums (and the ICRC) as scapy recomputes them from scratch.
            q = Ether(rp)
            if IP in q:
                del q[IP].chksum
            del q[TCP if proto == "tcp" else UDP].chksum
            if BTH in q:
                del q[BTH].icrc
            assert raw(q) == rp, (f["name"], k)
            if proto == "tcp":
                assert l4.flags == "PA" and l4.ack == f.get("tcp_ack", 0)
        if f.get("size") == "imix" and f["frames"] >= 240:
            # 7:4:1 by count, within a generous tolerance for the seeded draw
            share = {s + 4: sizes[s] / f["frames"] for s in (60, 590, 1514)}
            for s, w in IMIX.items():
                assert abs(share[s] - w / 12) < 0.08, share


def test_allreduce_is_a_ring_of_4096_byte_writes(generated):
    pkts = rdpcap(str(generated["rocev2-allreduce"]))
    writes = [p for p in pkts if p[BTH].opcode == 10]
    acks = [p for p in pkts if p[BTH].opcode == 17]
    assert len(writes) == 4 * 256 and len(acks) == 4 * 32
    ring = {(p[IP].src, p[IP].dst) for p in writes}
    assert ring == {(f"192.0.2.{r + 1}", f"192.0.2.{(r + 1) % 4 + 1}") for r in range(4)}
    assert {len(raw(p[BTH])) - 12 - 16 - 4 for p in writes} == {4096}
    # RETH DMA length = the payload of each WRITE Only
    assert {int.from_bytes(raw(p[BTH])[24:28], "big") for p in writes} == {4096}
    assert {(p[IP].dst, p[IP].src) for p in acks} == ring
    # the weighted interleave spreads each flow evenly over the run: every 36 frames (1152 / 32),
    # one ACK of each ring link, and 8 writes of each between them
    for src, dst in ring:
        pos = [
            i
            for i, p in enumerate(pkts)
            if p[BTH].opcode == 17 and p[IP].src == dst and p[IP].dst == src
        ]
        assert {b - a for a, b in zip(pos, pos[1:])} == {36}


# ---- the Python reference ----------------------------------------------------------------------


def _reference_frame(doc: dict, flow: int, k: int, prev_payload: int) -> bytes:
    """Frame k of a flow built with scapy from the raw TOML and ledgertool.digest.reference
    alone."""
    f = doc["flows"][flow]
    proto = f["protocol"]
    e = Ether(src=f["src_mac"], dst=f["dst_mac"])
    if "outer_vlan" in f:
        e = e / Dot1AD(vlan=f["outer_vlan"])
    if "vlan" in f:
        e = e / Dot1Q(vlan=f["vlan"], prio=f.get("vlan_pcp", 0))
    tos = f.get("dscp", 0) << 2
    if "." in f["src_ip"]:
        e = e / IP(
            src=f["src_ip"],
            dst=f["dst_ip"],
            ttl=f.get("ttl", 64),
            tos=tos,
            flags="DF",
            id=(f.get("ip_id", 0) + k) % 65536,
        )
    else:
        e = e / IPv6(src=f["src_ip"], dst=f["dst_ip"], hlim=f.get("ttl", 64), tc=tos)
    sport = f.get("src_port", 49152)
    if proto == "tcp":
        e = e / TCP(
            sport=sport,
            dport=f.get("dst_port", 9),
            flags="PA",
            window=65535,
            ack=f.get("tcp_ack", 0),
            seq=(f.get("tcp_seq", 0) + prev_payload) % (1 << 32),
        )
    else:
        e = e / UDP(sport=sport, dport=f.get("dst_port", 4791 if proto == "rocev2" else 9))
    ext = b""
    if proto == "rocev2":
        op = OPCODE[f["opcode"]]
        ext = {
            10: (f.get("va", 0).to_bytes(8, "big") + f.get("rkey", 0).to_bytes(4, "big")),
            17: bytes([0x1F, 0, 0, 0]),
        }.get(op, b"")
    hdr = (
        len(raw(e))
        + (12 + len(ext) + 4 if proto == "rocev2" else 0)
        + (4 if ext and op == 10 else 0)
    )
    seed = doc["seed"]
    if "size" in f:
        s = f["size"]
        pairs = (
            list(IMIX.items())
            if s == "imix"
            else ([(s, 1)] if isinstance(s, int) else [tuple(x) for x in s])
        )
        i = R.workload_size_choice(seed, flow, k, [w for _, w in pairs])
        plen = pairs[i][0] - 4 - hdr
    else:
        p = f["payload"]
        pairs = [(p, 1)] if isinstance(p, int) else [tuple(x) for x in p]
        i = R.workload_size_choice(seed, flow, k, [w for _, w in pairs])
        plen = pairs[i][0]
    payload = R.workload_payload(seed, flow, k, plen)
    if proto == "rocev2":
        pad = (-plen) % 4
        if op == 10:
            ext += plen.to_bytes(4, "big")
        e = (
            e
            / BTH(
                opcode=op,
                migreq=1,
                padcount=pad,
                pkey=f.get("pkey", 0xFFFF),
                dqpn=f.get("dest_qp", 0),
                ackreq=1 if op == 10 else 0,
                psn=(f.get("psn", 0) + k) % (1 << 24),
            )
            / Raw(ext + payload + bytes(pad))
        )
    else:
        e = e / Raw(payload)
    b = raw(e)
    return b + bytes(max(0, 60 - len(b))), plen


def test_frames_equal_the_python_reference(features_spec):
    """Every frame of the feature spec, byte for byte, plus order and timestamps."""
    doc = _toml(features_spec)
    counts = [f["frames"] for f in doc["flows"]]
    order = R.workload_order(counts)
    with open_workload(features_spec) as r:
        frames = list(r.frames())
    assert len(frames) == len(order)
    cum = collections.Counter()
    for j, (fl, k) in enumerate(order):
        assert frames[j].ts_ns == R.workload_timestamp(doc["start_ns"], doc["interframe_ps"], j)
        want, plen = _reference_frame(doc, fl, k, cum[fl])
        cum[fl] += plen
        assert frames[j].data == want, (j, doc["flows"][fl]["name"], k)
        assert frames[j].wire_len == frames[j].caplen == len(want)


@pytest.mark.parametrize("name", [p.stem for p in SPECS])
def test_sample_payloads_equal_the_reference(name):
    """Sampled frames of each sample: payload bytes and order from ledgertool.digest.reference."""
    spec = load_spec(WORKLOADS / f"{name}.toml")
    order = R.workload_order([f.frames for f in spec.flows])
    with open_workload(spec) as r:
        frames = list(r.frames())
    for j in sorted(
        {0, 1, 2, len(order) // 3, len(order) // 2, len(order) - 1} | set(range(0, len(order), 97))
    ):
        fl, k = order[j]
        flow = spec.flows[fl]
        e = flow.sizes[R.workload_size_choice(spec.seed, fl, k, [s.weight for s in flow.sizes])]
        h = len(flow.header)
        assert frames[j].caplen == e.frame_len
        assert frames[j].data[h : h + e.payload_len] == R.workload_payload(
            spec.seed, fl, k, e.payload_len
        )


def test_reference_key_derivation_vectors():
    # splitmix64 from state 0: published first outputs (prng.di.unimi.it/splitmix64.c)
    assert R.mix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF
    assert R.workload_key(0)[:8] == (0xE220A8397B1DCDAF).to_bytes(8, "little")


# ---- capture / recompute through the generator --------------------------------------------------


def _digests(ledger: Path) -> list[str]:
    r = cli("query", ledger, "SELECT digest FROM records ORDER BY seq", "--format", "json")
    assert r.returncode == 0, r.stderr
    return [row["digest"] for row in json.loads(r.stdout)]


def test_capture_and_recompute_workload_sources(tmp_path, keydir, generated):
    spec = WORKLOADS / "imix.toml"
    keys = ["--digest-key", keydir / "digest.key", "--signing-key", keydir / "signing.key"]
    for name in ("a", "b"):
        r = cli(
            "capture",
            f"workload:{spec}",
            "--ledger",
            tmp_path / name,
            *keys,
            "--segment-records",
            "500",
            "--json",
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["frames"] == 1440
    da, db = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert len(da) == 1440 and da == db
    # recompute the generator against a ledger captured from the generated pcap
    r = cli("capture", generated["imix"], "--ledger", tmp_path / "p", *keys, "--json")
    assert r.returncode == 0, r.stderr
    assert _digests(tmp_path / "p") == da
    r = cli(
        "recompute",
        f"workload:{spec}",
        "--digest-key",
        keydir / "digest.key",
        "--ledger",
        tmp_path / "p",
        "--json",
        "--trust",
        keydir / "verifier.pub",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (
        doc["ok"]
        and doc["matched"] == 1440
        and doc["ledger_only"] == 0
        and doc["capture_only"] == 0
    )
    # and per-frame Parquet output without a ledger
    r = cli(
        "recompute",
        f"workload:{spec}",
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
        "--out",
        tmp_path / "d.parquet",
        "--json",
    )
    assert r.returncode == 0 and json.loads(r.stdout)["frames"] == 1440


def test_missing_interface_exits_2(tmp_path, keydir):
    r = cli(
        "capture",
        "iface:nosuchif0",
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    assert r.returncode == 2 and "nosuchif0" in r.stderr and not (tmp_path / "L").exists()


def test_open_source_and_reader_info(features_spec):
    with open_source(f"workload:{features_spec}") as r:
        assert sum(1 for _ in r.frames()) == 92
        info = r.info()
        assert info.format == "workload" and info.linktype == 1 and info.frames == 92
        assert r.path == f"workload:{features_spec}"
    with open_source(SAMPLES / "sample.pcap") as r:
        assert r.info().format == "pcap (µs)"


def test_write_pcap_from_a_capture_file(tmp_path):
    """lt_reader_write_pcap works on any reader: pcapng in, nanosecond pcap out, same frames."""
    out = tmp_path / "s.pcap"
    with open_source(SAMPLES / "sample.pcapng") as r:
        assert write_pcap(r, out) == 294
    with open_source(SAMPLES / "sample.pcapng") as a, open_source(out) as b:
        fa, fb = list(a.frames()), list(b.frames())
    assert [(f.ts_ns, f.caplen, f.wire_len, f.data) for f in fa] == [
        (f.ts_ns, f.caplen, f.wire_len, f.data) for f in fb
    ]
    assert out.read_bytes()[:4] == bytes.fromhex("4d3cb2a1")
    assert list(R.read_pcap(out.read_bytes()))[5][3] == fa[5].data


def test_generate_refuses_a_pcap_larger_than_the_free_space(tmp_path):
    spec = tmp_path / "huge.toml"
    text = (
        (SAMPLES / "workloads" / "worst-case-64.toml")
        .read_text()
        .replace("frames = 2048", "frames = 100000000000")
    )
    spec.write_text(text)
    r = cli("workload", "generate", spec, "--out", tmp_path / "huge.pcap")
    assert r.returncode == 2 and "GB are free" in r.stderr and not (tmp_path / "huge.pcap").exists()
