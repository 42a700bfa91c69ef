"""aes-128-gmac with its fixed IV is forgeable by whoever holds the ledger.

The attack, done here without the digest key: the prover sends two frames that differ only in
their last 16-byte block through the tapped link, reads their tags from the ledger it stores, and
solves for the GHASH key H (one square root in GF(2^128)) and the mask S = AES_K(J0). From then on
it knows the tag of every frame, and, GHASH being linear, it can rewrite every captured frame into
different bytes with the same tag: `recompute` says MATCH for a capture of which not one frame was
on the wire. So a GMAC ledger is created only with `--accept-gmac-forgery-risk`, and `verify`,
`recompute` and `check-proof` state the caveat with every verdict on one.

The key appears below only to check the attacker's arithmetic against `cryptography`'s AES-GCM.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from conftest import SAMPLES, cli
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ledgertool.algorithms import GMAC_CAVEAT
from ledgertool.keyfiles import DigestKey
from ledgertool.ledger.header import load_ledger
from ledgertool.ledger.reader import LedgerReader
from ledgertool.source.file import CaptureReader
from ledgertool.verify.ledger import verified_segment

# ---- GF(2^128) as GCM defines it (NIST SP 800-38D s6.3): blocks are big-endian integers, bit 0 of
# the standard is the integer's most significant bit

_R = 0xE1 << 120
_ONE = 1 << 127


def gf_mul(x: int, y: int) -> int:
    z, v = 0, y
    for i in range(127, -1, -1):
        if (x >> i) & 1:
            z ^= v
        v = (v >> 1) ^ _R if v & 1 else v >> 1
    return z


def gf_pow(x: int, e: int) -> int:
    r = _ONE
    while e:
        if e & 1:
            r = gf_mul(r, x)
        x = gf_mul(x, x)
        e >>= 1
    return r


def gf_inv(x: int) -> int:
    return gf_pow(x, 2**128 - 2)


def gf_sqrt(x: int) -> int:  # squaring is a bijection in characteristic 2: sqrt(x) = x^(2^127)
    for _ in range(127):
        x = gf_mul(x, x)
    return x


def blocks(frame: bytes) -> list[int]:
    """GHASH input for a GMAC tag with an empty ciphertext: the frame (AAD) zero-padded to 16-byte
    blocks, then [8 * len]_64 || [0]_64."""
    padded = frame + bytes(-len(frame) % 16)
    out = [int.from_bytes(padded[i : i + 16], "big") for i in range(0, len(padded), 16)]
    return out + [(8 * len(frame)) << 64]


def ghash(h: int, frame: bytes) -> int:
    y = 0
    for b in blocks(frame):
        y = gf_mul(y ^ b, h)
    return y


def solve_h_and_s(a: bytes, ta: bytes, b: bytes, tb: bytes) -> tuple[int, int]:
    """From two equal-length frames that differ only in their last block m (of m data blocks):
    T_a ^ T_b = (A_m ^ B_m) * H^2, the length block and S cancelling. No key involved."""
    xa, xb = blocks(a), blocks(b)
    assert len(a) == len(b) and xa[:-2] == xb[:-2] and xa[-2] != xb[-2]
    h2 = gf_mul(int.from_bytes(ta, "big") ^ int.from_bytes(tb, "big"), gf_inv(xa[-2] ^ xb[-2]))
    h = gf_sqrt(h2)
    return h, int.from_bytes(ta, "big") ^ ghash(h, a)


def forge(h: int, s: int, frame: bytes) -> bytes:
    return (ghash(h, frame) ^ s).to_bytes(16, "big")


def rewrite_same_tag(h: int, frame: bytes, delta: int) -> bytes:
    """Other bytes, same GHASH: add delta to data block 2 and delta * H to block 3 (1-based), whose
    contributions X_j * H^(m+2-j) then cancel. Needs 48 bytes; Ethernet/IP header bytes change."""
    xs = blocks(frame)[:-1]
    xs[1] ^= delta
    xs[2] ^= gf_mul(delta, h)
    raw = b"".join(x.to_bytes(16, "big") for x in xs)[: len(frame)]
    assert len(frame) >= 48 and raw != frame
    return raw


def write_pcap(path: Path, frames: list[tuple[int, bytes]]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))  # ns-resolution pcap
        for ts, data in frames:
            f.write(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), len(data)) + data)


def sample_frames() -> list[tuple[int, bytes]]:
    with CaptureReader(SAMPLES / "sample.pcap") as r:
        return [(f.ts_ns, f.data) for f in r.frames()]


@pytest.fixture(scope="module")
def gmac_ledger(tmp_path_factory, keydir):
    """A GMAC ledger of the sample's 294 frames plus the prover's probe pair (frames 294, 295)."""
    d = tmp_path_factory.mktemp("gmac")
    frames = sample_frames()
    probe = frames[0][1][:60]  # 60 bytes: 4 data blocks, the last one partial
    probe_b = probe[:48] + bytes(b ^ 0x5A for b in probe[48:])
    ts = frames[-1][0]
    write_pcap(d / "capture.pcap", frames + [(ts + 1000, probe), (ts + 2000, probe_b)])
    led = d / "L"
    r = cli(
        "capture",
        d / "capture.pcap",
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--algorithm",
        "aes-128-gmac",
        "--segment-records",
        "100",
        "--accept-gmac-forgery-risk",
    )
    assert r.returncode == 0, r.stderr
    assert "fixed all-zero IV" in r.stderr  # the creation warning still shows
    reader, lg = (
        LedgerReader(led),
        load_ledger(led),
    )  # the tags as the ledger's files hold them, either form
    tags = [
        t
        for seg in range(3)
        for t in verified_segment(reader, lg, "link0", seg).table.column("digest").to_pylist()
    ]
    assert len(tags) == len(frames) + 2
    return d, led, frames, (probe, probe_b), tags


def test_two_tags_from_the_ledger_forge_every_tag_without_the_key(gmac_ledger, keydir):
    d, led, frames, (a, b), tags = gmac_ledger
    h, s = solve_h_and_s(a, tags[-2], b, tags[-1])
    # every tag the ledger holds is predicted exactly
    assert [forge(h, s, f) for _, f in frames] == tags[:-2]
    # and so is the tag of a frame the ledger has never seen, as the device would compute it
    new = bytes(range(256)) * 5 + b"not captured"
    subkey = DigestKey.load(keydir / "digest.key").subkey("aes-128-gmac", 16)
    real = AESGCM(subkey).encrypt(bytes(12), b"", new)  # empty plaintext, frame as AAD: the tag
    assert forge(h, s, new) == real
    # with a random guess instead of the solved H, nothing is predicted (the test can fail)
    assert forge(h ^ 1, s, frames[5][1]) != tags[5]


def test_rewritten_capture_matches_and_the_verdict_carries_the_caveat(gmac_ledger, keydir):
    d, led, frames, (a, b), tags = gmac_ledger
    h, _ = solve_h_and_s(a, tags[-2], b, tags[-1])
    fake = [(ts, rewrite_same_tag(h, f, 0x1234 + i)) for i, (ts, f) in enumerate(frames)] + [
        (frames[-1][0] + 1000, a),
        (frames[-1][0] + 2000, b),
    ]
    assert all(x[1] != y[1] for x, y in zip(fake, frames))  # not one sample frame left as it was
    write_pcap(d / "rewritten.pcap", fake)
    r = cli(
        "recompute",
        d / "rewritten.pcap",
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--json",
        "--trust",
        keydir / "verifier.pub",
    )
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["ok"] and doc["matched"] == len(frames) + 2, r.stdout
    assert GMAC_CAVEAT in doc["warnings"] and f"warning: {GMAC_CAVEAT}" in r.stderr
    r = cli(
        "recompute",
        d / "rewritten.pcap",
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
    )
    assert (
        r.returncode == 0
        and r.stdout.startswith("MATCH")
        and f"warning: {GMAC_CAVEAT}\n" in r.stderr
    )


def test_verify_and_check_proof_state_the_caveat(gmac_ledger, keydir, tmp_path):
    _, led, *_ = gmac_ledger
    r = cli(
        "verify",
        led,
        "--trust",
        keydir / "verifier.pub",
        "--checkpoint",
        led / "link=link0" / "checkpoint",
    )
    assert r.returncode == 0 and r.stdout.startswith("OK")
    assert r.stderr == f"warning algorithm_caveat: {GMAC_CAVEAT}\n"
    r = cli("verify", led, "--trust", keydir / "verifier.pub", "--json")
    doc = json.loads(r.stdout)
    assert (
        doc["ok"]
        and {
            "kind": "algorithm_caveat",
            "segment": None,
            "record": None,
            "link": None,
            "detail": GMAC_CAVEAT,
        }
        in doc["warnings"]
    )
    proof = tmp_path / "proof.json"
    assert cli("prove", led, "--seq", "7", "--out", proof).returncode == 0
    r = cli("check-proof", proof, "--trust", keydir / "verifier.pub")
    assert (
        r.returncode == 0
        and r.stdout.startswith("VALID")
        and r.stderr == f"warning: {GMAC_CAVEAT}\n"
    )
    r = cli("check-proof", proof, "--trust", keydir / "verifier.pub", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["warnings"] == [GMAC_CAVEAT]


def test_gmac_ledger_needs_the_opt_in(tmp_path, keydir):
    led = tmp_path / "L"
    args = (
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--algorithm",
        "aes-128-gmac",
    )
    r = cli(*args)
    assert r.returncode == 2 and not led.exists() and r.stdout == ""
    [line] = r.stderr.splitlines()
    assert (
        line.startswith(
            "ledgertool: error: aes-128-gmac uses a fixed IV: whoever holds two of the ledger's "
            "(frame, tag) pairs"
        )
        and "--accept-gmac-forgery-risk" in line
        and "docs/algorithms.md" in line
    )
    assert cli(*args, "--accept-gmac-forgery-risk").returncode == 0
    r = cli(*args[:-2])  # appending to the GMAC ledger it created: no opt-in again
    assert r.returncode == 0, r.stderr
    r = cli("verify", led, "--trust", keydir / "verifier.pub")
    assert r.returncode == 0 and "algorithm_caveat" in r.stderr
    other = tmp_path / "S"  # no caveat on other algorithms
    r = cli(
        "capture",
        SAMPLES / "sample.pcap",
        "--ledger",
        other,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    r = cli(
        "verify",
        other,
        "--trust",
        keydir / "verifier.pub",
        "--checkpoint",
        other / "link=link0" / "checkpoint",
    )
    assert r.returncode == 0 and r.stderr == ""
