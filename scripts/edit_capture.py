"""Write a copy of a classic pcap with frames removed and frames added: the capture a prover might
claim against a ledger that saw the original (README, "Finding changed frames from window records
alone").

Usage:  python scripts/edit_capture.py IN.pcap OUT.pcap [--remove 40] [--add 25] [--seed 7]

`--remove N` frames, chosen at random (seeded), are left out. `--add M` frames are inserted, each
right after a randomly chosen frame, with that frame's timestamp + 1 ns and its bytes with the last
byte changed (bytes no frame of the input has). OUT is a nanosecond pcap. Prints, one a line,
`removed INDEX` (the frame's index in IN) and `added INDEX` (the new frame's index in OUT).
"""

from __future__ import annotations

import argparse
import random
import struct
from pathlib import Path

_MAGIC = {
    0xA1B2C3D4: ("<", 1000),
    0xA1B23C4D: ("<", 1),
    0xD4C3B2A1: (">", 1000),
    0x4D3CB2A1: (">", 1),
}


def read_pcap(path: Path) -> tuple[int, list[tuple[int, bytes, int]]]:
    """(link type, [(ts_ns, data, wire_len)]) of a classic pcap."""
    raw = path.read_bytes()
    (magic,) = struct.unpack("<I", raw[:4]) if len(raw) >= 24 else (None,)
    if magic not in _MAGIC:
        raise SystemExit(f"{path}: not a classic pcap (a pcapng? convert it with editcap -F pcap)")
    end, scale = _MAGIC[magic]
    linktype = struct.unpack(end + "I", raw[20:24])[0]
    out, at = [], 24
    while at + 16 <= len(raw):
        sec, frac, cap, wire = struct.unpack(end + "IIII", raw[at : at + 16])
        out.append((sec * 10**9 + frac * scale, raw[at + 16 : at + 16 + cap], wire))
        at += 16 + cap
    return linktype, out


def edit(
    frames: list[tuple[int, bytes, int]], remove: int, add: int, seed: int
) -> tuple[list[tuple[int, bytes, int]], list[int], list[int]]:
    """(the edited frames, the indexes in `frames` removed, the indexes in the result added)."""
    rng = random.Random(seed)
    removed = set(rng.sample(range(len(frames)), remove))
    after = set(rng.sample(sorted(set(range(len(frames))) - removed), add))
    rows, added = [], []
    for i, (ts, data, wire) in enumerate(frames):
        if i not in removed:
            rows.append((ts, data, wire))
        if i in after:
            added.append(len(rows))
            rows.append((ts + 1, data[:-1] + bytes([data[-1] ^ 0xA5]), wire))
    return rows, sorted(removed), added


def write_pcap(path: Path, rows: list[tuple[int, bytes, int]], linktype: int = 1) -> None:
    """A nanosecond pcap of (ts_ns, data, wire_len)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, linktype))
        for ts, data, wire in rows:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), wire) + data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="a classic pcap (not pcapng)")
    ap.add_argument("out", type=Path, help="the edited copy, a nanosecond pcap")
    ap.add_argument("--remove", type=int, default=40, help="frames left out, chosen at random")
    ap.add_argument("--add", type=int, default=25, help="frames added, each after a random one")
    ap.add_argument("--seed", type=int, default=7, help="the random choices' seed")
    a = ap.parse_args()
    linktype, frames = read_pcap(a.src)
    rows, removed, added = edit(frames, a.remove, a.add, a.seed)
    write_pcap(a.out, rows, linktype)
    for i in removed:
        print(f"removed {i}")
    for i in added:
        print(f"added {i}")


if __name__ == "__main__":
    main()
