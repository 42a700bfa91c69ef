"""The examples of docs/cli.md, run as written (in a scratch directory set up as the doc
says: `samples` links to the repository's samples), with the exit codes the doc gives.

Every `$ ledgertool ...` line of the doc's fenced blocks is extracted (continuation lines joined);
the ones that can run here (no root, no NIC, no state the doc only describes) are listed in
EXAMPLES in the doc's order, and each must be a line of the doc. Where the doc shows `$ echo $?`
after a command, that code must be the one listed too.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from conftest import REPO, cli

DOC = REPO / "docs" / "cli.md"


def documented_commands(text: str) -> list[tuple[str, int | None]]:
    """(command after `$ ledgertool `, the exit code a following `$ echo $?` shows or None), in
    order."""
    out: list[tuple[str, int | None]] = []
    lines = text.splitlines()
    in_block = False
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("```"):
            in_block = not in_block
        elif in_block and line.startswith("$ ledgertool "):
            cmd = line[len("$ ledgertool ") :]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
            cmd = re.sub(r"\s+#.*$", "", cmd).strip()
            code = None
            for nxt in lines[i + 1 :]:
                s = nxt.strip()
                if s.startswith("```") or (s.startswith("$ ") and s != "$ echo $?"):
                    break
                if s == "$ echo $?":
                    idx = lines.index(nxt, i + 1)
                    code = int(lines[idx + 1].strip())
                    break
            out.append((cmd, code))
        i += 1
    return out


#: (command as in the doc, exit code), in the order the doc's state builds up (see _setup)
EXAMPLES: list[tuple[str, int]] = [
    ("frobnicate", 2),
    ("keys generate keys", 0),
    ("keys generate keys", 2),
    (
        "capture samples/sample.pcap --ledger L2 --digest-key keys/digest.key --signing-key "
        "keys/signing.key",
        2,
    ),
    (
        "capture samples/sample.pcapng --ledger L --digest-key keys/digest.key --signing-key "
        "keys/signing.key --segment-records 100",
        0,
    ),
    (
        "capture workload:samples/workloads/rocev2-allreduce.toml --ledger R --strip rdma "
        "--algorithm blake3-keyed-128 --digest-key keys/digest.key --signing-key keys/signing.key",
        0,
    ),
    (
        "capture samples/sample.pcapng --ledger G --digest-key keys/digest.key --signing-key "
        "keys/signing.key --algorithm aes-128-gmac",
        2,
    ),
    ("verify L --trust keys/verifier.pub", 0),
    ("verify L --trust keys/verifier.pub --json", 0),
    ("checkpoint L --out cp1", 0),
    ("checkpoint L --out cp2 --json", 0),
    ("verify L --trust keys/verifier.pub --checkpoint cp1", 0),
    ("check-consistency cp1 cp2 --ledger L --trust keys/verifier.pub", 0),
    ("check-consistency cp2 cp1 --ledger L --trust keys/verifier.pub", 2),
    ("prove L --seq 42 --out proof.json", 0),
    ("prove L --seq 42 --out proof.json --json", 0),
    ("prove L --seq 999 --out p2.json", 2),
    ("check-proof proof.json --trust keys/verifier.pub", 0),
    ("check-proof proof.json --trust k2/verifier.pub", 1),
    (
        "recompute samples/sample.pcapng --digest-key keys/digest.key --ledger L4 --trust "
        "keys/verifier.pub",
        0,
    ),
    ("recompute samples/sample.pcapng --digest-key keys/digest.key --ledger L4", 1),
    ("recompute short.pcap --digest-key keys/digest.key --ledger L4 --trust keys/verifier.pub", 1),
    (
        "recompute short.pcap --digest-key keys/digest.key --ledger L4 --trust keys/verifier.pub "
        "--json",
        1,
    ),
    (
        "recompute samples/sample.pcapng --digest-key keys/digest.key --algorithm siphash-1-3-128 "
        "--strip frame --out d.parquet --json",
        0,
    ),
    ("recompute samples/sample.pcapng --digest-key keys/digest.key", 2),
    (
        'query L4 "SELECT segment, first_seq, last_seq, records, frames, drops_declared FROM seals '
        'ORDER BY segment" '
        "--format csv --trust keys/verifier.pub",
        0,
    ),
    ('query L4 "SELECT seq, digest FROM records ORDER BY seq LIMIT 2" --format json', 0),
    ('query L4 "SELECT segment, records FROM seals ORDER BY segment" --format markdown', 0),
    ('query L4 "SELECT * FROM records" --format parquet --output records.parquet', 0),
    (
        'query L4 "SELECT link, segment, first_seq, last_seq, records, left(merkle_root, 16) AS '
        'root FROM seals ORDER BY segment"',
        0,
    ),
    ('query L4 "SELEC 1"', 2),
    ("algorithms --json", 0),
    ("plan collision --bits 64 --bits 128 --rate 400G --frame 64", 0),
    ("plan storage --pps 600M --links 4 --duration 30d", 0),
    ("bench --sizes 300MiB", 2),
    ("bench --leaf-hash blake3 --ledger-format v1", 2),
    ("workload generate samples/workloads/rocev2-allreduce.toml --out wl.pcap", 0),
    ("workload generate samples/workloads/rocev2-allreduce.toml --out wl.pcap", 2),
    ("workload generate samples/workloads/rocev2-allreduce.toml --out wl.pcap --force --json", 0),
    ("workload bench samples/workloads/rocev2-allreduce.toml --frames 200000", 0),
    ("conformance export kit", 0),
    (
        "conformance check kit/captures/ethernet.pcap --records "
        "kit/records/ethernet/siphash-1-3-128.l3.records --strip l3 --digest-key kit/digest.key",
        0,
    ),
    ("keys device-init device", 0),
    ("demo --workdir demo", 0),
    ("demo --workdir demo", 2),
]


def _short_pcap(src: Path, dst: Path, drop: int) -> None:
    """`src` (classic pcap) without frame `drop` (0-based): docs/cli.md's short.pcap."""
    data = src.read_bytes()
    endian = "little" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else "big"
    out, off, i = bytearray(data[:24]), 24, 0
    while off < len(data):
        caplen = int.from_bytes(data[off + 8 : off + 12], endian)
        if i != drop:
            out += data[off : off + 16 + caplen]
        off += 16 + caplen
        i += 1
    dst.write_bytes(bytes(out))


def _setup(scratch: Path, cmd: str) -> None:
    """The state the doc describes before some examples (done the documented way)."""

    def run(*args: str) -> None:
        r = cli(*args, cwd=scratch)
        assert r.returncode == 0, (args, r.stderr)

    # "chmod 644 keys/digest.key" first
    if cmd.startswith("capture samples/sample.pcap --ledger L2"):
        os.chmod(scratch / "keys" / "digest.key", 0o644)
    # "capture samples/sample.pcap --ledger L ... --segment-records 100"
    elif cmd == "checkpoint L --out cp2 --json":
        run(
            "capture",
            "samples/sample.pcap",
            "--ledger",
            "L",
            "--digest-key",
            "keys/digest.key",
            "--signing-key",
            "keys/signing.key",
            "--segment-records",
            "100",
        )
    elif cmd.startswith("check-proof proof.json --trust k2/"):
        run("keys", "generate", "k2")
    elif cmd.startswith(
        "recompute samples/sample.pcapng --digest-key keys/digest.key --ledger L4 --trust"
    ):
        run(
            "capture",
            "samples/sample.pcapng",
            "--ledger",
            "L4",
            "--digest-key",
            "keys/digest.key",
            "--signing-key",
            "keys/signing.key",
            "--segment-records",
            "100",
        )
        _short_pcap(REPO / "samples" / "sample.pcap", scratch / "short.pcap", 290)


def test_doc_examples_run_with_their_exit_codes(tmp_path):
    documented = documented_commands(DOC.read_text())
    codes = {}
    for cmd, code in documented:
        codes.setdefault(cmd, []).append(code)
    assert len(documented) > 60
    missing = [cmd for cmd, _ in EXAMPLES if cmd not in codes]
    assert not missing, f"no longer in docs/cli.md: {missing}"
    (tmp_path / "samples").symlink_to(REPO / "samples")
    wrong = []
    seen: dict[str, int] = {}
    for cmd, want in EXAMPLES:
        _setup(tmp_path, cmd)
        r = cli(*shlex.split(cmd), cwd=tmp_path)
        if cmd.startswith("capture samples/sample.pcap --ledger L2"):
            os.chmod(tmp_path / "keys" / "digest.key", 0o600)
        seen[cmd] = seen.get(cmd, -1) + 1  # the k-th run of a command is its k-th place in the doc
        doc_code = codes[cmd][min(seen[cmd], len(codes[cmd]) - 1)]
        if r.returncode != want or doc_code not in (None, want):
            wrong.append((cmd, r.returncode, want, doc_code, r.stderr.strip().splitlines()[-1:]))
        assert "Traceback" not in r.stderr, (cmd, r.stderr)
    assert not wrong, wrong


def test_doc_example_extraction():
    cmds = documented_commands(
        "```\n$ ledgertool a \\\n    --b c   # note\nout\n$ echo $?\n1\n$ ledgertool d\n```\n"
    )
    assert cmds == [("a --b c", 1), ("d", None)]


@pytest.mark.parametrize(
    "cmd",
    [
        "workload generate samples/workloads/rocev2-allreduce.toml --out wl.pcap",
        "workload bench samples/workloads/rocev2-allreduce.toml --frames 200000",
    ],
)
def test_workload_lines_do_not_wrap(tmp_path, cmd, monkeypatch):
    """docs/cli.md: result lines are never wrapped, workload's included (the old 80-column
    exception)."""
    (tmp_path / "samples").symlink_to(REPO / "samples")
    monkeypatch.setenv("COLUMNS", "40")
    r = cli(*shlex.split(cmd), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(len(ln) > 40 for ln in lines), lines
    assert lines[0].startswith(("wrote 1,152 frames", "generator alone: "))
