"""Export of the conformance kit (`ledgertool conformance export DIR`).

`export_kit` writes a self-contained, versioned directory (format `KIT_FORMAT`, layout in the
kit's README.md and docs/devices.md): the crafted frames of `ledgertool.device.cases` as pcap files
(one per link type), for every frame and strip mode the hashed byte range and the record flags,
for every ledger algorithm x strip mode the digests and the exact record bytes (the record layout
of docs/ledger-format.md "Records", concatenated, nothing else: the files a `records:` source will
take), Merkle leaf hashes and roots of every record file, a small golden ledger captured from the
Ethernet capture, and its seals' canonical signed bytes. Everything but the golden ledger and
seals.json is a function of the catalogue, the kit key and the versions named in kit.json.
The check against a device's records is ledgertool.device.conformance.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import string
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import scapy
from scapy.utils import RawPcapWriter

from .._version import __version__
from ..algorithms import Algorithm
from ..capture.run import capture_file
from ..digest.engine import digest_one, merkle_leaves, merkle_root
from ..digest.record import FLAG_TRUNCATED, RECORD_FIXED
from ..digest.strip import flag_names, strip_range
from ..errors import LedgerFormatError, UsageError
from ..keyfiles import DigestKey, SigningKey
from ..ledger.header import LEDGER_FORMATS, load_ledger
from ..ledger.sealer import load_seal
from ..seal.document import genesis_hash
from ..source.file import CaptureReader
from ..verify.ledger import verify_ledger
from .cases import CAPTURE_NAMES, NAMESPACE, by_capture
from .conformance import (
    KIT_FORMAT,
    KIT_MASTER_KEY,
    KIT_VERSION,
    LEDGER_ALGORITHMS,
    STRIPS,
    VECTOR_LEAF_RECORDS,
    Record,
    compute_records,
    records_path,
)
from .vectors import write_device_vectors

FRAMES_FORMAT = f"ledgertool-conformance-frames-v{KIT_VERSION}"
DIGESTS_FORMAT = f"ledgertool-conformance-digests-v{KIT_VERSION}"
MERKLE_FORMAT = f"ledgertool-conformance-merkle-v{KIT_VERSION}"
SEALS_FORMAT = f"ledgertool-conformance-seals-v{KIT_VERSION}"

GOLDEN = {
    "capture": "ethernet",
    "algorithm": "siphash-1-3-128",
    "strip": "l3",
    "segment_records": 40,
    "leaf_records": VECTOR_LEAF_RECORDS,
}
# the format kit.json names (its schema: ledgertool-ledger-v1), whatever capture's default for new
# ledgers is
KIT_LEDGER_FORMAT = 1
# 2026-01-01T00:00:00Z: frame k of a capture is at BASE_TS_S + k s + (k * 7919 mod 10^6) us
BASE_TS_S = 1_767_225_600


def kit_signing_key() -> SigningKey:
    """The golden ledger's hybrid signing key, from published seeds (a test key: trust it for
    this kit only). Ed25519 private key = SHA-256("ledgertool conformance kit v1 ed25519"),
    ML-DSA-65 seed = SHA-256("ledgertool conformance kit v1 ml-dsa-65")."""
    return SigningKey.from_raw(
        "hybrid",
        ed25519_private=hashlib.sha256(b"ledgertool conformance kit v1 ed25519").digest(),
        mldsa65_seed=hashlib.sha256(b"ledgertool conformance kit v1 ml-dsa-65").digest(),
    )


def _generated_by() -> dict[str, str]:
    return {
        "tool": f"ledgertool {__version__}",
        "command": "ledgertool conformance export DIR",
        "generator": "ledgertool/device/kit.py with the frames of ledgertool/device/cases.py",
        "scapy": scapy.__version__,
        "python": platform.python_version(),
    }


@dataclass(frozen=True)
class ExportResult:
    """What `export_kit` wrote (schemas/conformance-export-report.schema.json)."""

    directory: str
    frames: int
    captures: int
    record_files: int
    golden_segments: int
    files: int

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "directory": self.directory,
            "kit_format": KIT_FORMAT,
            "frames": self.frames,
            "captures": self.captures,
            "record_files": self.record_files,
            "algorithms": [a.name for a in LEDGER_ALGORITHMS],
            "strip_modes": list(STRIPS),
            "golden_segments": self.golden_segments,
            "files": self.files,
        }


def _write(root: Path, rel: str, data: bytes, mode: int = 0o644) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)  # exactly, whatever the umask
    return hashlib.sha256(data).hexdigest()


def _json_bytes(doc: Any) -> bytes:
    return (json.dumps(doc, indent=1) + "\n").encode("utf-8")


def _write_pcap(path: Path, linktype: int, cases) -> list[int]:
    """One classic pcap (microsecond timestamps) written with scapy; returns each frame's ts_ns."""
    ts = []
    w = RawPcapWriter(str(path), linktype=linktype, sync=False)
    w.linktype = linktype  # scapy drops a falsy linktype (0, BSD loopback) and would guess one
    try:
        w.write_header(None)
        for k, case in enumerate(cases):
            sec, usec = BASE_TS_S + k, (k * 7919) % 1_000_000
            w.write_packet(
                case.frame, sec=sec, usec=usec, caplen=len(case.frame), wirelen=case.wire_len
            )
            ts.append(sec * 1_000_000_000 + usec * 1000)
    finally:
        w.close()
    return ts


def export_kit(outdir: str | os.PathLike[str]) -> ExportResult:
    """Write the conformance kit into ``outdir`` (which must not exist, or be an empty directory).

    The kit is built in a temporary sibling directory and renamed into place, so a failure leaves
    nothing half-written. Raises UsageError (exit 2) when ``outdir`` holds anything. The export
    checks itself and raises LedgerFormatError rather than write a kit that contradicts itself: the
    native reader must read back exactly the frames written, every record's digest must be the
    digest of its strip range, and the golden ledger must verify."""
    outdir = Path(outdir)
    if outdir.exists() and (not outdir.is_dir() or any(outdir.iterdir())):
        raise UsageError(
            f"{outdir}: exists and is not an empty directory; the kit goes into a new one"
        )
    tmp = outdir.with_name(f".{outdir.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        result = _export_into(tmp, outdir)
        if outdir.exists():
            outdir.rmdir()
        os.rename(tmp, outdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return result


@dataclass(frozen=True)
class _Kit:
    """The export in progress: what its phases share."""

    root: Path
    key: DigestKey
    generated_by: dict[str, str]
    groups: dict[str, list]  # capture name -> its cases (cases.ConformanceCase), in catalogue order
    # kit-relative file -> SHA-256 hex, as written
    sha: dict[str, str] = field(default_factory=dict)
    device_files: list[str] = field(default_factory=list)  # device/ (ledgertool.device.vectors)


# (capture, frame index) -> strip mode -> (offset, end, flags) of the hashed range
_Ranges = dict[tuple[str, int], dict[str, tuple[int, int, int]]]


def _export_into(root: Path, final: Path) -> ExportResult:
    kit = _Kit(
        root,
        DigestKey(KIT_MASTER_KEY),
        _generated_by(),
        {name: cases for name, cases in by_capture().items() if cases},
    )
    captures, frames, ranges = _write_captures(kit)
    record_files = _write_records(kit, ranges)

    def put(root: Path, rel: str, data: bytes) -> None:
        kit.sha[rel] = _write(root, rel, data)

    kit.device_files.extend(write_device_vectors(root, put))
    golden_segments = _write_golden(kit)
    _write_manifest(kit, captures, record_files, golden_segments)
    _write_readme(kit, captures, frames, golden_segments)
    nfiles = sum(1 for p in root.rglob("*") if p.is_file())
    return ExportResult(
        str(final), frames, len(captures), len(record_files), golden_segments, nfiles
    )


def _write_captures(kit: _Kit) -> tuple[list[dict[str, Any]], int, _Ranges]:
    """1. the captures, read back by the native reader, and frames.json; returns the captures'
    manifest entries, the number of frames and every frame's strip ranges."""
    root, sha = kit.root, kit.sha
    lt_of = {name: lt for lt, name in CAPTURE_NAMES.items()}
    frames_doc: list[dict[str, Any]] = []
    captures: list[dict[str, Any]] = []
    ranges: _Ranges = {}
    for cap, cases in kit.groups.items():
        rel = f"captures/{cap}.pcap"
        (root / "captures").mkdir(exist_ok=True)
        ts = _write_pcap(root / rel, lt_of[cap], cases)
        data = (root / rel).read_bytes()
        sha[rel] = hashlib.sha256(data).hexdigest()
        with CaptureReader(root / rel) as r:
            got = list(r.frames())
        if [(f.data, f.wire_len, f.ts_ns, f.linktype) for f in got] != [
            (c.frame, c.wire_len, t, c.linktype) for c, t in zip(cases, ts)
        ]:
            raise LedgerFormatError(
                f"{rel}: the native reader does not read back the frames written"
            )
        captures.append(
            {
                "name": cap,
                "file": rel,
                "linktype": lt_of[cap],
                "frames": len(cases),
                "sha256": sha[rel],
            }
        )
        for k, (case, t) in enumerate(zip(cases, ts)):
            strip_doc = {}
            for mode in STRIPS:
                rng = strip_range(case.frame, case.linktype, mode, case.wire_len)
                flags = rng.flags | (FLAG_TRUNCATED if len(case.frame) < case.wire_len else 0)
                ranges[(cap, k)] = {**ranges.get((cap, k), {}), mode: (rng.offset, rng.end, flags)}
                strip_doc[mode] = {
                    "offset": rng.offset,
                    "length": rng.length,
                    "flags": flags,
                    "flag_names": flag_names(flags),
                }
            frames_doc.append(
                {
                    "capture": cap,
                    "index": k,
                    "name": case.name,
                    "category": case.category,
                    "note": case.note,
                    "linktype": case.linktype,
                    "scapy": case.scapy,
                    "edits": [{"offset": o, "hex": h} for o, h in case.edits],
                    "cut_to": case.caplen,
                    "ts_ns": str(t),
                    "wire_len": case.wire_len,
                    "cap_len": len(case.frame),
                    "frame": case.frame.hex(),
                    "strip": strip_doc,
                }
            )
    helpers = {
        "Eth(**kw)": "Ether(dst='02:00:00:00:00:02', src='02:00:00:00:00:01', **kw)",
        "IP4(**kw)": "IP(src='192.0.2.1', dst='198.51.100.2', **kw)",
        "IP6(**kw)": "IPv6(src='2001:db8::1', dst='2001:db8::2', **kw)",
        "Arp()": "ARP(hwsrc='02:00:00:00:00:01', psrc='192.0.2.1', hwdst='00:00:00:00:00:00', "
        "pdst='198.51.100.2')",
        "ext_chain(n)": "n IPv6ExtHdrDestOpt() layers in a row",
        "PAYLOAD": "bytes(range(37))",
        "ROCE_PAYLOAD": "bytes(range(200, 232))",
    }
    frames_json = {
        "format": FRAMES_FORMAT,
        "kit_version": KIT_VERSION,
        "generated_by": kit.generated_by,
        "strip_modes": list(STRIPS),
        "helpers": helpers,
        "scapy_names": sorted(k for k in NAMESPACE if not k.startswith("__")),
        "frames": frames_doc,
    }
    sha["frames.json"] = _write(root, "frames.json", _json_bytes(frames_json))
    return captures, len(frames_doc), ranges


def _write_records(kit: _Kit, ranges: _Ranges) -> list[dict[str, Any]]:
    """2. records, digests and Merkle leaves for every algorithm x strip mode x capture, each
    record checked against the digest of its strip range; returns the record files' manifest
    entries."""
    root, sha, key, groups = kit.root, kit.sha, kit.key, kit.groups
    record_files: list[dict[str, Any]] = []
    merkle_files: list[dict[str, Any]] = []
    for alg in LEDGER_ALGORITHMS:
        subkey = key.subkey(alg.name, alg.key_size)
        rs = RECORD_FIXED + alg.digest_size
        per_frame: dict[tuple[str, int], dict[str, dict[str, str]]] = {}
        for cap, cases in groups.items():
            for mode in STRIPS:
                recs = _checked_records(
                    root / f"captures/{cap}.pcap", key, alg, mode, cap, cases, ranges, per_frame
                )
                rel = records_path(cap, alg.name, mode)
                sha[rel] = _write(root, rel, recs)
                leaves = merkle_leaves(recs, rs, VECTOR_LEAF_RECORDS)
                root_hash = merkle_root(leaves).hex()
                record_files.append(
                    {
                        "file": rel,
                        "capture": cap,
                        "algorithm": alg.name,
                        "strip": mode,
                        "record_bytes": rs,
                        "records": len(cases),
                        "sha256": sha[rel],
                        "merkle_root": root_hash,
                    }
                )
                merkle_files.append(
                    {
                        "file": rel,
                        "records": len(cases),
                        "root": root_hash,
                        "leaf_hashes": [
                            leaves[i : i + 32].hex() for i in range(0, len(leaves), 32)
                        ],
                    }
                )
        rel = f"digests/{alg.name}.json"
        sha[rel] = _write(
            root,
            rel,
            _json_bytes(
                {
                    "format": DIGESTS_FORMAT,
                    "kit_version": KIT_VERSION,
                    "generated_by": kit.generated_by,
                    "algorithm": alg.name,
                    "key_bytes": alg.key_size,
                    "digest_bytes": alg.digest_size,
                    "record_bytes": rs,
                    "subkey": subkey.hex(),
                    "digest_key_id": key.key_id(alg.name, alg.key_size),
                    "frames": [
                        {
                            "capture": cap,
                            "index": k,
                            "name": groups[cap][k].name,
                            **per_frame[(cap, k)],
                        }
                        for cap in groups
                        for k in range(len(groups[cap]))
                    ],
                }
            ),
        )
    sha["merkle.json"] = _write(
        root,
        "merkle.json",
        _json_bytes(
            {
                "format": MERKLE_FORMAT,
                "kit_version": KIT_VERSION,
                "generated_by": kit.generated_by,
                "leaf_records": VECTOR_LEAF_RECORDS,
                "hashing": "RFC 9162 s2.1.1 with SHA-256: leaf = SHA-256(0x00 || leaf_records "
                "consecutive records), node = SHA-256(0x01 || left || right)",
                "files": merkle_files,
            }
        ),
    )
    return record_files


def _checked_records(
    capture: Path,
    key: DigestKey,
    alg: Algorithm,
    mode: str,
    cap: str,
    cases: list,
    ranges: _Ranges,
    per_frame: dict[tuple[str, int], dict[str, dict[str, str]]],
) -> bytes:
    """The engine's records of one capture, each checked against the digest of its strip range;
    fills `per_frame` with every frame's digest and record hex for this strip mode."""
    rs = RECORD_FIXED + alg.digest_size
    subkey = key.subkey(alg.name, alg.key_size)
    recs = compute_records(capture, key, alg, mode)
    if len(recs) != rs * len(cases):
        raise LedgerFormatError(f"{cap}: {len(recs) // rs} records for {len(cases)} frames")
    for k, case in enumerate(cases):
        rec = recs[k * rs : (k + 1) * rs]
        off, end, flags = ranges[(cap, k)][mode]
        want = digest_one(alg, subkey, case.frame[off:end])
        r = Record.decode(rec, alg.digest_size)
        if r.digest != want or r.flags != flags or r.seq != k:
            raise LedgerFormatError(
                f"{cap} frame {k} ({case.name}) {alg.name} {mode}: the engine's "
                "record disagrees with the strip range and digest"
            )
        d = per_frame.setdefault((cap, k), {"digests": {}, "records": {}})
        d["digests"][mode], d["records"][mode] = want.hex(), rec.hex()
    return recs


def _write_golden(kit: _Kit) -> int:
    """3. the key files and the golden ledger, verified, and seals.json; returns its segment
    count."""
    root, sha = kit.root, kit.sha
    sha["digest.key"] = _write(root, "digest.key", (KIT_MASTER_KEY.hex() + "\n").encode(), 0o600)
    sk = kit_signing_key()
    sha["verifier.pub"] = _write(root, "verifier.pub", sk.trust_bundle().to_json().encode())
    golden = root / "golden-ledger"
    golden_run = capture_file(
        root / f"captures/{GOLDEN['capture']}.pcap",
        golden,
        digest_key=kit.key,
        signing_key=sk,
        algorithm=GOLDEN["algorithm"],
        strip=GOLDEN["strip"],
        segment_records=GOLDEN["segment_records"],
        leaf_records=GOLDEN["leaf_records"],
        workers=1,
        ledger_format=KIT_LEDGER_FORMAT,
    )
    check = verify_ledger(golden, sk.trust_bundle())
    if not check.ok:
        raise LedgerFormatError(f"golden ledger does not verify: {check.problems[0].detail}")
    _golden_seals(golden, root)
    return len(golden_run.segments)


def _write_manifest(
    kit: _Kit,
    captures: list[dict[str, Any]],
    record_files: list[dict[str, Any]],
    golden_segments: int,
) -> None:
    """4a. kit.json: the manifest of every file and how it was derived."""
    key, sha = kit.key, kit.sha
    alg_keys = {
        a.name: {
            "subkey": key.subkey(a.name, a.key_size).hex(),
            "key_id": key.key_id(a.name, a.key_size),
            "key_bytes": a.key_size,
            "digest_bytes": a.digest_size,
            "record_bytes": RECORD_FIXED + a.digest_size,
        }
        for a in LEDGER_ALGORITHMS
    }
    manifest = {
        "format": KIT_FORMAT,
        "kit_version": KIT_VERSION,
        "generated_by": kit.generated_by,
        "ledger_format": LEDGER_FORMATS[KIT_LEDGER_FORMAT],
        "digest_key": {
            "file": "digest.key",
            "master": KIT_MASTER_KEY.hex(),
            "derivation": "subkey = HKDF-SHA256(IKM=master, salt=empty, info='ledgertool digest v1 "
            "' || algorithm, L=key_bytes); key_id = SHA-256('ledgertool key id v1\\0' || "
            "subkey)[0:16]",
            "algorithms": alg_keys,
        },
        "strip_modes": list(STRIPS),
        "captures": captures,
        "records": record_files,
        "vector_files": [
            {"file": f, "sha256": sha[f]}
            for f in (
                "frames.json",
                *(f"digests/{a.name}.json" for a in LEDGER_ALGORITHMS),
                "merkle.json",
                *kit.device_files,
            )
        ],
        "golden_ledger": {
            "directory": "golden-ledger",
            "trust": "verifier.pub",
            "seals": "seals.json",
            "capture": f"captures/{GOLDEN['capture']}.pcap",
            "algorithm": GOLDEN["algorithm"],
            "strip": GOLDEN["strip"],
            "segment_records": GOLDEN["segment_records"],
            "leaf_records": GOLDEN["leaf_records"],
            "segments": golden_segments,
            "records_file": records_path(GOLDEN["capture"], GOLDEN["algorithm"], GOLDEN["strip"]),
            "reproducible": "records, Merkle roots and leaf hashes; not the ledger id, times, seal "
            "hashes or ML-DSA signatures (random or clock-dependent)",
        },
    }
    sha["kit.json"] = _write(kit.root, "kit.json", _json_bytes(manifest))


def _write_readme(
    kit: _Kit, captures: list[dict[str, Any]], frames: int, golden_segments: int
) -> None:
    """4b. README.md from the packaged template."""
    template = string.Template(
        resources.files("ledgertool").joinpath("data/conformance-kit-README.md").read_text()
    )
    readme = template.substitute(
        kit_format=KIT_FORMAT,
        version=__version__,
        scapy=kit.generated_by["scapy"],
        frames=frames,
        captures=", ".join(
            f"`{c['file']}` ({c['frames']}, linktype {c['linktype']})" for c in captures
        ),
        algorithms=", ".join(f"`{a.name}`" for a in LEDGER_ALGORITHMS),
        strips=", ".join(f"`{s}`" for s in STRIPS),
        master=KIT_MASTER_KEY.hex(),
        golden_alg=GOLDEN["algorithm"],
        golden_strip=GOLDEN["strip"],
        golden_segments=golden_segments,
        golden_records=records_path(GOLDEN["capture"], GOLDEN["algorithm"], GOLDEN["strip"]),
        leaf_records=VECTOR_LEAF_RECORDS,
    )
    _write(kit.root, "README.md", readme.encode("utf-8"))


def _golden_seals(golden: Path, root: Path) -> None:
    """seals.json: each golden seal's canonical signed bytes, hashes and leaf hashes (from its
    sidecar, checked against the signed root)."""
    ledger = load_ledger(golden)
    out = []
    for path in sorted((golden / "link=link0").glob("seg-*.seal.json")):
        seal = load_seal(path)
        leaves = path.with_name(path.name.removesuffix(".seal.json") + ".leaves").read_bytes()
        if merkle_root(leaves).hex() != seal.merkle_root:
            raise LedgerFormatError(f"{path}: leaf sidecar does not give the signed root")
        signed = seal.signed_bytes()
        out.append(
            {
                "file": str(path.relative_to(root)),
                "segment": seal.segment,
                "signed_bytes": signed.decode("utf-8"),
                "signed_bytes_sha256": hashlib.sha256(signed).hexdigest(),
                "canonical_body_sha256": hashlib.sha256(seal.signed_body()).hexdigest(),
                "seal_hash": seal.hash(),
                "prev_seal_hash": seal.prev_seal_hash,
                "genesis_hash": (
                    genesis_hash(ledger.ledger_id, "link0") if seal.segment == 0 else None
                ),
                "merkle_root": seal.merkle_root,
                "first_seq": seal.first_seq,
                "last_seq": seal.last_seq,
                "leaf_hashes": [leaves[i : i + 32].hex() for i in range(0, len(leaves), 32)],
            }
        )
    _write(
        root,
        "seals.json",
        _json_bytes(
            {
                "format": SEALS_FORMAT,
                "kit_version": KIT_VERSION,
                "generated_by": _generated_by(),
                "ledger": "golden-ledger",
                "ledger_id": ledger.ledger_id,
                "signed_bytes": "b'ledgertool seal v1\\n' || RFC 8785 JCS(seal without "
                "'signatures'), as UTF-8 text here",
                "seal_hash": "SHA-256(JCS(seal without 'signatures')) = canonical_body_sha256",
                "seals": out,
            }
        ),
    )
