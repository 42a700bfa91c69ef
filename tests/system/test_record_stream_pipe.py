"""An authenticated record stream through a real pipe (`records:-`), written in small pieces that
cut blocks and the header anywhere: sealed as from a file; a block rewritten on the way is refused
at its offset, with the verified blocks before it sealed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from device_spec import Device, Frame, parse_blocks  # noqa: E402
from record_stream_cli import capture_args, new_ledger  # noqa: E402

DEVICE = "ef" * 16


def _ledger(tmp_path: Path, keydir: Path) -> tuple[Path, str, bytes]:
    return new_ledger(tmp_path, keydir, "--device-id", DEVICE)


def _args(source: str, lg: Path, keydir: Path) -> list[str]:
    return capture_args(source, lg, keydir, 50, "--device-id", DEVICE)


def _stream(master: bytes, lid: str) -> bytes:
    d = Device(master, lid, DEVICE, lanes=4, block_records=7)
    for i in range(300):
        digest = (i * 0x9E3779B97F4A7C15 % 2**128).to_bytes(16, "little")
        d.frame(i % 4, 1_767_225_600_000_000_000 + i, Frame(64, 64, 0, 1, digest))
    return d.close()


def _pipe(data: bytes, lg: Path, keydir: Path) -> subprocess.CompletedProcess:
    p = subprocess.Popen(
        [sys.executable, "-c", "from ledgertool.cli.app import main; main()"]
        + _args("records:-", lg, keydir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=False,
    )

    def write() -> None:
        try:
            for i in range(0, len(data), 333):  # pieces that cut headers, blocks and tags
                p.stdin.write(data[i : i + 333])
                p.stdin.flush()
                if i % 3330 == 0:
                    time.sleep(0.01)
        except BrokenPipeError:
            pass  # a refused stream: the sealer stopped reading
        finally:
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass

    t = threading.Thread(target=write)
    t.start()
    t.join(timeout=300)  # before communicate, which would close stdin under the writer
    p.stdin = None
    out, err = p.communicate(timeout=300)
    return subprocess.CompletedProcess(p.args, p.returncode, out.decode(), err.decode())


def test_stream_through_a_pipe_in_pieces_is_sealed(tmp_path, keydir):
    lg, lid, master = _ledger(tmp_path, keydir)
    r = _pipe(_stream(master, lid), lg, keydir)
    assert r.returncode == 0, r.stderr
    assert "captured 300 frames" in r.stdout
    seals = [json.loads(p.read_text()) for p in sorted(lg.glob("link=link0/*.seal.json"))]
    assert [s["source"] for s in seals] == [f"records:- device {DEVICE} stream 1"] * 6


def test_rewritten_block_in_a_pipe_is_refused_at_its_offset(tmp_path, keydir):
    lg, lid, master = _ledger(tmp_path, keydir)
    data = bytearray(_stream(master, lid))
    head, blocks = parse_blocks(bytes(data))
    at = len(head) + sum(len(b) for b in blocks[:20])
    data[at + 16 + 8] ^= 0x80  # block 20's first record's timestamp
    r = _pipe(bytes(data), lg, keydir)
    assert r.returncode == 2
    assert f"standard input: block 20 (byte {at}) tag does not verify" in r.stderr
    assert "140 frames before it were sealed" in r.stderr
