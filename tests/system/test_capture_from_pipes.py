"""Captures read from standard input through a pipe (`-`): the same records as the file, a slow
pipe's frames before the window fills, window edges and large records, recompute from a pipe."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import cli, needs_corpus
from test_capture_inputs import (  # noqa: F401  (shared with the in-process tests)
    ALG,
    COMPRESS,
    FILES,
    _ledger_records,
    _pcap,
    engine_records,
)

CLI = [sys.executable, "-c", "from ledgertool.cli.app import main; main()"]


def _out_digests(path) -> bytes:
    t = pq.read_table(path)
    return (
        b"".join(bytes(x) for x in t.column("digest").to_pylist())
        + t.column("ts_ns").to_numpy().tobytes()
    )


@pytest.mark.parametrize("ext", [None, "xz"])
@needs_corpus
def test_recompute_reads_standard_input(tmp_path, keydir, ext):
    name = "pcapngtg__le_test202.pcapng"
    args = [
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        "blake3-keyed-128",
        "--strip",
        "l3",
    ]
    ref = cli("recompute", FILES / name, *args, "--out", tmp_path / "ref.parquet")
    assert ref.returncode == 0, ref.stderr
    data = (FILES / name).read_bytes()
    piped = subprocess.run(
        [*CLI, "recompute", "-", *map(str, args), "--out", str(tmp_path / "in.parquet"), "--json"],
        input=COMPRESS[ext](data) if ext else data,
        capture_output=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["frames"] == 8
    assert _out_digests(tmp_path / "in.parquet") == _out_digests(tmp_path / "ref.parquet")


@needs_corpus
def test_capture_reads_standard_input_through_a_pipe(tmp_path, keydir):
    name = "gopacket__le_test301.pcapng"
    cat = subprocess.Popen(["cat", str(FILES / name)], stdout=subprocess.PIPE)
    r = subprocess.run(
        [
            *CLI,
            "capture",
            "-",
            "--ledger",
            str(tmp_path / "S"),
            "--digest-key",
            str(keydir / "digest.key"),
            "--signing-key",
            str(keydir / "signing.key"),
            "--json",
        ],
        stdin=cat.stdout,
        capture_output=True,
        text=True,
        timeout=120,
    )
    cat.stdout.close()
    cat.wait()
    assert r.returncode == 0, r.stderr
    assert (json.loads(r.stdout)["frames"], json.loads(r.stdout)["source"]) == (276, "-")
    p = cli(
        "capture",
        FILES / name,
        "--ledger",
        tmp_path / "P",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    assert p.returncode == 0, p.stderr
    assert _ledger_records(tmp_path / "S") == _ledger_records(tmp_path / "P") != []


def test_several_digest_keys_refuse_standard_input(tmp_path, keydir, other_keydir):
    r = subprocess.run(
        [
            *CLI,
            "recompute",
            "-",
            "--digest-key",
            str(keydir / "digest.key"),
            "--digest-key",
            str(other_keydir / "digest.key"),
            "--ledger",
            str(tmp_path),
        ],
        input=b"",
        capture_output=True,
    )
    assert r.returncode == 2 and b"standard input is read once" in r.stderr, r.stderr


def test_stream_window_edges_and_large_records(tmp_path, keydir):
    rng = np.random.default_rng(15)
    recs = []
    for _ in range(9000):  # ~ 9 MiB of frames of every size, cut at every place by the window
        n = int(rng.integers(14, 2000))
        recs.append((n, n, rng.bytes(n)))
    big = rng.bytes(5 << 20)  # one record larger than the window itself
    recs.insert(3000, (len(big), len(big), big))
    data = _pcap(recs, snaplen=8 << 20)
    plain = tmp_path / "big.pcap"
    plain.write_bytes(data)
    ref = engine_records(plain, "frame")
    assert ref[1] is None and len(ref[0]) == 9001 * 48
    args = [
        "--digest-key",
        str(keydir / "digest.key"),
        "--algorithm",
        "siphash-1-3-128",
        "--strip",
        "frame",
    ]
    ref_out = cli("recompute", plain, *args, "--out", tmp_path / "ref.parquet")
    # standard input that is a regular file: read through the window, not mapped
    with plain.open("rb") as f:
        piped = subprocess.run(
            [*CLI, "recompute", "-", *args, "--out", str(tmp_path / "in.parquet")],
            stdin=f,
            capture_output=True,
            timeout=120,
        )
    assert ref_out.returncode == 0 and piped.returncode == 0, piped.stderr
    assert _out_digests(tmp_path / "in.parquet") == _out_digests(tmp_path / "ref.parquet")
    assert engine_records(compressed_bytes(tmp_path, data, "zst"), "frame") == ref
    # a caplen above the snaplen's plausible bound is a frame where the bytes exist (the file
    # reader's rule), not corrupt because the window ends before them
    odd = _pcap(recs[:10] + [(3 << 20, 3 << 20, rng.bytes(3 << 20))] + recs[10:2000])
    plain.write_bytes(odd)
    ref = engine_records(plain, "frame")
    assert ref[1] is None and engine_records(compressed_bytes(tmp_path, odd, "gz"), "frame") == ref
    # ... and corrupt, with the same message, where the stream ends first
    cut = odd[: len(_pcap(recs[:10])) + 16 + (1 << 20)]
    plain.write_bytes(cut)
    ref = engine_records(plain, "frame")
    assert ref[1] and "exceeds both the snaplen 65535" in ref[1]
    assert engine_records(compressed_bytes(tmp_path, cut, "gz"), "frame") == ref


def compressed_bytes(tmp_path, data: bytes, ext: str):
    path = tmp_path / f"stream.{ext}"
    path.write_bytes(COMPRESS[ext](data))
    return path


def test_slow_pipe_frames_come_before_the_window_fills():
    """`tcpdump -w - | ledgertool capture -`: frames are handed out as they arrive, not once 4 MiB
    (the window) or the end of the stream have come; the pipe stays open throughout."""
    import select

    probe = (
        "from ledgertool.source import open_source\n"
        "with open_source('-') as r:\n"
        "    for f in r.frames(batch=8):\n"
        "        print(f.index, f.caplen, flush=True)\n"
        "        if f.index == 2:\n"
        "            break\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", probe], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        data = _pcap([(60 + i, 60 + i, bytes(60 + i)) for i in range(3)])
        for piece in (data[:10], data[10:40], data[40:]):  # the file header and a record in pieces
            child.stdin.write(piece)
            child.stdin.flush()
        lines = []
        while len(lines) < 3 and select.select([child.stdout], [], [], 60)[0]:
            line = child.stdout.readline()
            if not line:
                break
            lines.append(line.decode().split())
        assert lines == [["0", "60"], ["1", "61"], ["2", "62"]]
    finally:
        child.kill()
        child.wait()
