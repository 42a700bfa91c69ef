"""The conformance kit: vectors a hardware pipeline is checked against, and the check itself.

`export_kit` writes a self-contained, versioned directory (format `KIT_FORMAT`, layout in the
kit's README.md and docs/devices.md): the crafted frames of `conformance_cases` as pcap files
(one per link type), for every frame and strip mode the hashed byte range and the record flags,
for every ledger algorithm x strip mode the digests and the exact record bytes (the record layout
of docs/ledger-format.md "Records", concatenated, nothing else: the files a `records:` source will
take), Merkle leaf hashes and roots of every record file, a small golden ledger captured from the
Ethernet capture, and its seals' canonical signed bytes. Everything but the golden ledger and
seals.json is a function of the catalogue, the kit key and the versions named in kit.json.

`check_records` compares the records a device produced for a capture with the records ledgertool
computes (the engine `capture` runs, sequence numbers from 0), byte for byte, and explains the
first differing frames: which fields differ, a scapy dissection, the range ledgertool hashes, and
the byte range (if any, near the expected one or another strip mode's) whose digest is the
device's, which names an off-by-one in strip offsets at once; no such range points at the key,
algorithm or digest code instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import stat
import string
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..algorithms import (
    ALGORITHMS,
    STRIP_MODES,
    Algorithm,
    get_algorithm,
    get_strip_mode,
)
from ..digest.engine import DigestEngine, digest_one, merkle_leaves, merkle_root
from ..digest.record import FLAG_TRUNCATED, RECORD_FIXED, record_dtype
from ..source.file import CaptureReader
from ..errors import LedgerFormatError, UsageError
from ..keyfiles import DigestKey, SigningKey
from ..ledger.header import load_ledger

KIT_VERSION = 1
KIT_FORMAT = f"ledgertool-conformance-kit-v{KIT_VERSION}"
FRAMES_FORMAT = f"ledgertool-conformance-frames-v{KIT_VERSION}"
DIGESTS_FORMAT = f"ledgertool-conformance-digests-v{KIT_VERSION}"
MERKLE_FORMAT = f"ledgertool-conformance-merkle-v{KIT_VERSION}"
SEALS_FORMAT = f"ledgertool-conformance-seals-v{KIT_VERSION}"

KIT_MASTER_KEY = bytes(range(32))
"""The kit's digest master key: public, for vectors only (digest.key = 000102...1f)."""
VECTOR_LEAF_RECORDS = 4
"""Records per Merkle leaf in merkle.json and the golden ledger: small, so the vectors have many leaves."""
GOLDEN = {"capture": "ethernet", "algorithm": "siphash-1-3-128", "strip": "l3", "segment_records": 40,
          "leaf_records": VECTOR_LEAF_RECORDS}
BASE_TS_S = 1_767_225_600  # 2026-01-01T00:00:00Z: frame k of a capture is at BASE_TS_S + k s + (k * 7919 mod 10^6) us

LEDGER_ALGORITHMS = tuple(a for a in ALGORITHMS.values() if a.ledger_ok)
STRIPS = tuple(STRIP_MODES)
SEARCH = 8
"""`check_records` looks for the device's digest among byte ranges whose start and end are within
this many bytes of the expected ones."""


def kit_signing_key() -> SigningKey:
    """The golden ledger's hybrid signing key, from published seeds (a test key: trust it for this
    kit only). Ed25519 private key = SHA-256("ledgertool conformance kit v1 ed25519"), ML-DSA-65 seed
    = SHA-256("ledgertool conformance kit v1 ml-dsa-65")."""
    return SigningKey.from_raw(
        "hybrid", ed25519_private=hashlib.sha256(b"ledgertool conformance kit v1 ed25519").digest(),
        mldsa65_seed=hashlib.sha256(b"ledgertool conformance kit v1 ml-dsa-65").digest())


def _generated_by() -> dict[str, str]:
    import scapy

    return {"tool": f"ledgertool {__version__}", "command": "ledgertool conformance export DIR",
            "generator": "ledgertool/device/conformance.py with the frames of ledgertool/device/cases.py",
            "scapy": scapy.__version__, "python": platform.python_version()}


def records_path(capture: str, algorithm: str, strip: str) -> str:
    """Kit-relative path of a record file."""
    return f"records/{capture}/{algorithm}.{strip}.records"


# --------------------------------------------------------------------------- the records


def compute_records(capture: str | os.PathLike[str], key: DigestKey, alg: Algorithm, strip: str,
                    first_seq: int = 0) -> bytes:
    """The records `capture` writes for every frame of a capture file, numbered from ``first_seq``
    (the native engine: reader, strip, digest, record), as one bytes object. CaptureFormatError
    (exit 2) for an unreadable or corrupt capture."""
    out = bytearray()
    with CaptureReader(capture) as reader:
        engine = DigestEngine(reader, alg, get_strip_mode(strip), key.subkey(alg.name, alg.key_size))
        seq = first_seq
        while True:
            recs, n, _ = engine.fill(seq)
            if n == 0:
                return bytes(out)
            out += recs
            seq += n


@dataclass(frozen=True)
class Record:
    """One fixed-size record, decoded (docs/ledger-format.md "Records")."""

    seq: int
    ts_ns: int
    wire_len: int
    cap_len: int
    flags: int
    linktype: int
    aux: int
    digest: bytes

    FIELDS = ("seq", "ts_ns", "wire_len", "cap_len", "flags", "linktype", "aux", "digest")

    @classmethod
    def decode(cls, raw: bytes, digest_size: int) -> Record:
        r = np.frombuffer(raw, dtype=record_dtype(digest_size), count=1)[0]
        return cls(int(r["seq"]), int(r["ts_ns"]), int(r["wire_len"]), int(r["cap_len"]), int(r["flags"]),
                   int(r["linktype"]), int(r["aux"]), bytes(r["digest"]))

    def to_json(self) -> dict[str, Any]:
        from ..digest.strip import flag_names

        return {"seq": self.seq, "ts_ns": self.ts_ns, "wire_len": self.wire_len, "cap_len": self.cap_len,
                "flags": self.flags, "flag_names": flag_names(self.flags), "linktype": self.linktype,
                "aux": self.aux, "digest": self.digest.hex()}


# --------------------------------------------------------------------------- export


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
        return {"ok": True, "directory": self.directory, "kit_format": KIT_FORMAT, "frames": self.frames,
                "captures": self.captures, "record_files": self.record_files, "algorithms": [a.name for a in
                                                                                           LEDGER_ALGORITHMS],
                "strip_modes": list(STRIPS), "golden_segments": self.golden_segments, "files": self.files}


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
    from scapy.utils import RawPcapWriter

    ts = []
    w = RawPcapWriter(str(path), linktype=linktype, sync=False)
    w.linktype = linktype  # scapy drops a falsy linktype (0, BSD loopback) and would guess one
    try:
        w.write_header(None)
        for k, case in enumerate(cases):
            sec, usec = BASE_TS_S + k, (k * 7919) % 1_000_000
            w.write_packet(case.frame, sec=sec, usec=usec, caplen=len(case.frame), wirelen=case.wire_len)
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
        raise UsageError(f"{outdir}: exists and is not an empty directory; the kit goes into a new one")
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


def _export_into(root: Path, final: Path) -> ExportResult:
    from ..capture.run import capture_file
    from ..digest.strip import flag_names, strip_range
    from ..verify.ledger import verify_ledger
    from .cases import CAPTURE_NAMES, NAMESPACE, by_capture

    gen = _generated_by()
    key = DigestKey(KIT_MASTER_KEY)
    sha: dict[str, str] = {}
    groups = {name: cases for name, cases in by_capture().items() if cases}
    lt_of = {name: lt for lt, name in CAPTURE_NAMES.items()}

    # 1. captures, read back by the native reader
    frames_doc: list[dict[str, Any]] = []
    captures: list[dict[str, Any]] = []
    ranges: dict[tuple[str, int], dict[str, tuple[int, int, int]]] = {}
    for cap, cases in groups.items():
        rel = f"captures/{cap}.pcap"
        (root / "captures").mkdir(exist_ok=True)
        ts = _write_pcap(root / rel, lt_of[cap], cases)
        data = (root / rel).read_bytes()
        sha[rel] = hashlib.sha256(data).hexdigest()
        with CaptureReader(root / rel) as r:
            got = list(r.frames())
        if [(f.data, f.wire_len, f.ts_ns, f.linktype) for f in got] != [(c.frame, c.wire_len, t, c.linktype)
                                                                         for c, t in zip(cases, ts)]:
            raise LedgerFormatError(f"{rel}: the native reader does not read back the frames written")
        captures.append({"name": cap, "file": rel, "linktype": lt_of[cap], "frames": len(cases), "sha256": sha[rel]})
        for k, (case, t) in enumerate(zip(cases, ts)):
            strip_doc = {}
            for mode in STRIPS:
                rng = strip_range(case.frame, case.linktype, mode, case.wire_len)
                flags = rng.flags | (FLAG_TRUNCATED if len(case.frame) < case.wire_len else 0)
                ranges[(cap, k)] = {**ranges.get((cap, k), {}), mode: (rng.offset, rng.end, flags)}
                strip_doc[mode] = {"offset": rng.offset, "length": rng.length, "flags": flags,
                                   "flag_names": flag_names(flags)}
            frames_doc.append({"capture": cap, "index": k, "name": case.name, "category": case.category,
                               "note": case.note, "linktype": case.linktype, "scapy": case.scapy,
                               "edits": [{"offset": o, "hex": h} for o, h in case.edits], "cut_to": case.caplen,
                               "ts_ns": str(t), "wire_len": case.wire_len, "cap_len": len(case.frame),
                               "frame": case.frame.hex(), "strip": strip_doc})
    helpers = {"Eth(**kw)": "Ether(dst='02:00:00:00:00:02', src='02:00:00:00:00:01', **kw)",
               "IP4(**kw)": "IP(src='192.0.2.1', dst='198.51.100.2', **kw)",
               "IP6(**kw)": "IPv6(src='2001:db8::1', dst='2001:db8::2', **kw)",
               "Arp()": "ARP(hwsrc='02:00:00:00:00:01', psrc='192.0.2.1', hwdst='00:00:00:00:00:00', pdst='198.51.100.2')",
               "ext_chain(n)": "n IPv6ExtHdrDestOpt() layers in a row",
               "PAYLOAD": "bytes(range(37))", "ROCE_PAYLOAD": "bytes(range(200, 232))"}
    frames_json = {"format": FRAMES_FORMAT, "kit_version": KIT_VERSION, "generated_by": gen,
                   "strip_modes": list(STRIPS), "helpers": helpers,
                   "scapy_names": sorted(k for k in NAMESPACE if not k.startswith("__")), "frames": frames_doc}
    sha["frames.json"] = _write(root, "frames.json", _json_bytes(frames_json))

    # 2. records, digests and Merkle leaves for every algorithm x strip mode x capture
    record_files: list[dict[str, Any]] = []
    merkle_files: list[dict[str, Any]] = []
    for alg in LEDGER_ALGORITHMS:
        subkey = key.subkey(alg.name, alg.key_size)
        rs = RECORD_FIXED + alg.digest_size
        per_frame: dict[tuple[str, int], dict[str, dict[str, str]]] = {}
        for cap, cases in groups.items():
            for mode in STRIPS:
                recs = compute_records(root / f"captures/{cap}.pcap", key, alg, mode)
                if len(recs) != rs * len(cases):
                    raise LedgerFormatError(f"{cap}: {len(recs) // rs} records for {len(cases)} frames")
                for k, case in enumerate(cases):
                    rec = recs[k * rs:(k + 1) * rs]
                    off, end, flags = ranges[(cap, k)][mode]
                    want = digest_one(alg, subkey, case.frame[off:end])
                    r = Record.decode(rec, alg.digest_size)
                    if r.digest != want or r.flags != flags or r.seq != k:
                        raise LedgerFormatError(f"{cap} frame {k} ({case.name}) {alg.name} {mode}: the engine's "
                                                "record disagrees with the strip range and digest")
                    d = per_frame.setdefault((cap, k), {"digests": {}, "records": {}})
                    d["digests"][mode], d["records"][mode] = want.hex(), rec.hex()
                rel = records_path(cap, alg.name, mode)
                sha[rel] = _write(root, rel, recs)
                leaves = merkle_leaves(recs, rs, VECTOR_LEAF_RECORDS)
                root_hash = merkle_root(leaves).hex()
                record_files.append({"file": rel, "capture": cap, "algorithm": alg.name, "strip": mode,
                                     "record_bytes": rs, "records": len(cases), "sha256": sha[rel],
                                     "merkle_root": root_hash})
                merkle_files.append({"file": rel, "records": len(cases), "root": root_hash,
                                     "leaf_hashes": [leaves[i:i + 32].hex() for i in range(0, len(leaves), 32)]})
        rel = f"digests/{alg.name}.json"
        sha[rel] = _write(root, rel, _json_bytes({
            "format": DIGESTS_FORMAT, "kit_version": KIT_VERSION, "generated_by": gen, "algorithm": alg.name,
            "key_bytes": alg.key_size, "digest_bytes": alg.digest_size, "record_bytes": rs,
            "subkey": subkey.hex(), "digest_key_id": key.key_id(alg.name, alg.key_size),
            "frames": [{"capture": cap, "index": k, "name": groups[cap][k].name, **per_frame[(cap, k)]}
                       for cap in groups for k in range(len(groups[cap]))]}))
    sha["merkle.json"] = _write(root, "merkle.json", _json_bytes({
        "format": MERKLE_FORMAT, "kit_version": KIT_VERSION, "generated_by": gen,
        "leaf_records": VECTOR_LEAF_RECORDS,
        "hashing": "RFC 9162 s2.1.1 with SHA-256: leaf = SHA-256(0x00 || leaf_records consecutive records), "
                   "node = SHA-256(0x01 || left || right)", "files": merkle_files}))

    # 3. the key files and the golden ledger
    sha["digest.key"] = _write(root, "digest.key", (KIT_MASTER_KEY.hex() + "\n").encode(), 0o600)
    sk = kit_signing_key()
    sha["verifier.pub"] = _write(root, "verifier.pub", sk.trust_bundle().to_json().encode())
    golden = root / "golden-ledger"
    golden_run = capture_file(root / f"captures/{GOLDEN['capture']}.pcap", golden, digest_key=key, signing_key=sk,
                       algorithm=GOLDEN["algorithm"], strip=GOLDEN["strip"],
                       segment_records=GOLDEN["segment_records"], leaf_records=GOLDEN["leaf_records"], workers=1)
    check = verify_ledger(golden, sk.trust_bundle())
    if not check.ok:
        raise LedgerFormatError(f"golden ledger does not verify: {check.problems[0].detail}")
    _golden_seals(golden, root)

    # 4. the manifest and the README
    alg_keys = {a.name: {"subkey": key.subkey(a.name, a.key_size).hex(), "key_id": key.key_id(a.name, a.key_size),
                         "key_bytes": a.key_size, "digest_bytes": a.digest_size,
                         "record_bytes": RECORD_FIXED + a.digest_size} for a in LEDGER_ALGORITHMS}
    manifest = {
        "format": KIT_FORMAT, "kit_version": KIT_VERSION, "generated_by": gen, "ledger_format": "ledgertool-ledger-v1",
        "digest_key": {"file": "digest.key", "master": KIT_MASTER_KEY.hex(),
                       "derivation": "subkey = HKDF-SHA256(IKM=master, salt=empty, info='ledgertool digest v1 ' "
                                     "|| algorithm, L=key_bytes); key_id = SHA-256('ledgertool key id v1\\0' || "
                                     "subkey)[0:16]", "algorithms": alg_keys},
        "strip_modes": list(STRIPS), "captures": captures, "records": record_files,
        "vector_files": [{"file": f, "sha256": sha[f]} for f in ("frames.json", *(f"digests/{a.name}.json" for a in
                                                                                  LEDGER_ALGORITHMS), "merkle.json")],
        "golden_ledger": {"directory": "golden-ledger", "trust": "verifier.pub", "seals": "seals.json",
                          "capture": f"captures/{GOLDEN['capture']}.pcap", "algorithm": GOLDEN["algorithm"],
                          "strip": GOLDEN["strip"], "segment_records": GOLDEN["segment_records"],
                          "leaf_records": GOLDEN["leaf_records"], "segments": len(golden_run.segments),
                          "records_file": records_path(GOLDEN["capture"], GOLDEN["algorithm"], GOLDEN["strip"]),
                          "reproducible": "records, Merkle roots and leaf hashes; not the ledger id, times, seal "
                                          "hashes or ML-DSA signatures (random or clock-dependent)"},
    }
    sha["kit.json"] = _write(root, "kit.json", _json_bytes(manifest))
    template = string.Template(resources.files("ledgertool").joinpath("data/conformance-kit-README.md").read_text())
    readme = template.substitute(
        kit_format=KIT_FORMAT, version=__version__, scapy=gen["scapy"], frames=len(frames_doc),
        captures=", ".join(f"`{c['file']}` ({c['frames']}, linktype {c['linktype']})" for c in captures),
        algorithms=", ".join(f"`{a.name}`" for a in LEDGER_ALGORITHMS), strips=", ".join(f"`{s}`" for s in STRIPS),
        master=KIT_MASTER_KEY.hex(), golden_alg=GOLDEN["algorithm"], golden_strip=GOLDEN["strip"],
        golden_segments=len(golden_run.segments), golden_records=records_path(GOLDEN["capture"], GOLDEN["algorithm"],
                                                                       GOLDEN["strip"]),
        leaf_records=VECTOR_LEAF_RECORDS)
    _write(root, "README.md", readme.encode("utf-8"))
    nfiles = sum(1 for p in root.rglob("*") if p.is_file())
    return ExportResult(str(final), len(frames_doc), len(captures), len(record_files), len(golden_run.segments),
                        nfiles)


def _golden_seals(golden: Path, root: Path) -> None:
    """seals.json: each golden seal's canonical signed bytes, hashes and leaf hashes (from its sidecar,
    checked against the signed root)."""
    from ..seal.canonical import canonical_json
    from ..seal.document import (
        genesis_hash,
        load_seal,
        seal_body,
        seal_hash,
        seal_signed_bytes,
    )

    ledger = load_ledger(golden)
    out = []
    for path in sorted((golden / "link=link0").glob("seg-*.seal.json")):
        doc = load_seal(path)
        leaves = path.with_name(path.name.removesuffix(".seal.json") + ".leaves").read_bytes()
        if merkle_root(leaves).hex() != doc["merkle_root"]:
            raise LedgerFormatError(f"{path}: leaf sidecar does not give the signed root")
        signed = seal_signed_bytes(doc)
        out.append({"file": str(path.relative_to(root)), "segment": doc["segment"],
                    "signed_bytes": signed.decode("utf-8"), "signed_bytes_sha256": hashlib.sha256(signed).hexdigest(),
                    "canonical_body_sha256": hashlib.sha256(canonical_json(seal_body(doc))).hexdigest(),
                    "seal_hash": seal_hash(doc), "prev_seal_hash": doc["prev_seal_hash"],
                    "genesis_hash": genesis_hash(ledger.ledger_id, "link0") if doc["segment"] == 0 else None,
                    "merkle_root": doc["merkle_root"], "first_seq": doc["first_seq"], "last_seq": doc["last_seq"],
                    "leaf_hashes": [leaves[i:i + 32].hex() for i in range(0, len(leaves), 32)]})
    _write(root, "seals.json", _json_bytes({
        "format": SEALS_FORMAT, "kit_version": KIT_VERSION, "generated_by": _generated_by(),
        "ledger": "golden-ledger", "ledger_id": ledger.ledger_id,
        "signed_bytes": "b'ledgertool seal v1\\n' || RFC 8785 JCS(seal without 'signatures'), as UTF-8 text here",
        "seal_hash": "SHA-256(JCS(seal without 'signatures')) = canonical_body_sha256", "seals": out}))


# --------------------------------------------------------------------------- check


@dataclass
class Difference:
    """One frame whose device record is not byte-exact (or a record with no frame, or the reverse)."""

    index: int
    fields: list[str]
    expected: Record | None
    device: Record | None
    summary: str | None = None
    explanation: str | None = None
    expected_range: tuple[int, int] | None = None
    device_range: tuple[int, int] | None = None
    device_range_note: str | None = None
    frame: bytes | None = None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "fields": self.fields,
                "expected": self.expected.to_json() if self.expected else None,
                "device": self.device.to_json() if self.device else None, "summary": self.summary,
                "explanation": self.explanation,
                "expected_range": list(self.expected_range) if self.expected_range else None,
                "device_range": list(self.device_range) if self.device_range else None,
                "device_range_note": self.device_range_note,
                "frame": self.frame.hex() if self.frame is not None else None}


@dataclass
class CheckResult:
    """Outcome of `check_records` (schemas/conformance-check-report.schema.json)."""

    capture: str
    records_file: str
    algorithm: str
    strip: str
    digest_key_id: str
    frames: int
    device_records: int
    matched: int
    differing: int
    first_differences: list[Difference] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.differing == 0 and self.frames == self.device_records

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "capture": self.capture, "records_file": self.records_file,
                "algorithm": self.algorithm, "strip": self.strip, "digest_key_id": self.digest_key_id,
                "frames": self.frames, "device_records": self.device_records, "matched": self.matched,
                "differing": self.differing, "first_differences": [d.to_json() for d in self.first_differences],
                "warnings": self.warnings}


def _open_device_records(path: Path, rs: int, alg: Algorithm):
    """The device's record file, opened, and its number of records; LedgerFormatError (exit 2)
    naming the file, and the byte where the last record is cut, when it is not whole records."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise LedgerFormatError(f"{path}: file not found (expected device records)") from None
    except IsADirectoryError:
        raise LedgerFormatError(f"{path}: is a directory (expected device records)") from None
    except OSError as e:
        raise LedgerFormatError(f"{path}: cannot read device records: {e.strerror or e}") from None
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode):
        f.close()
        raise LedgerFormatError(f"{path}: not a regular file (expected device records)")
    size = st.st_size
    if size % rs:
        f.close()
        whole = size // rs
        others = [f"{a.name} ({RECORD_FIXED + a.digest_size} B)" for a in LEDGER_ALGORITHMS
                  if size % (RECORD_FIXED + a.digest_size) == 0 and a.digest_size != alg.digest_size]
        hint = f"; whole records of {others[0]}?" if others else ""
        raise LedgerFormatError(f"{path}: {size} bytes is not a whole number of {rs}-byte {alg.name} records: "
                                f"record {whole} is cut at byte {whole * rs}{hint}")
    return f, size // rs


def check_records(capture: str | os.PathLike[str], records_file: str | os.PathLike[str], digest_key: DigestKey,
                  algorithm: str = "siphash-1-3-128", strip: str = "frame", max_report: int = 10) -> CheckResult:
    """Compare a device's records for ``capture`` with ledgertool's, frame by frame, byte for byte.

    ``records_file`` holds whole records (docs/ledger-format.md "Records", 32 + digest bytes each,
    little-endian, nothing else), the first numbered 0, one per frame in capture order; it is read
    in step with the capture, so neither is held in memory whole. The first ``max_report``
    differing frames are explained (`Difference`). Raises LedgerFormatError, CaptureFormatError,
    AlgorithmError, KeyFileError (exit 2) for unreadable or mismatched input."""
    alg = get_algorithm(algorithm)
    strip_id = get_strip_mode(strip)
    if max_report < 0:
        raise UsageError("--max-report must be >= 0")
    rs = RECORD_FIXED + alg.digest_size
    subkey = digest_key.subkey(alg.name, alg.key_size)
    f, count = _open_device_records(Path(records_file), rs, alg)
    res = CheckResult(str(capture), str(records_file), alg.name, strip, digest_key.key_id(alg.name, alg.key_size),
                      0, count, 0, 0)
    report: dict[int, tuple[bytes | None, bytes | None]] = {}  # index -> (ledgertool's record, the device's)
    with f:
        with CaptureReader(capture) as reader:
            engine = DigestEngine(reader, alg, strip_id, subkey)
            while True:
                recs, n, _ = engine.fill(res.frames)
                if n == 0:
                    break
                lo = res.frames
                theirs = f.read(max(0, min(n, count - lo)) * rs)
                both = len(theirs) // rs
                diff: list[int] = []
                if both:
                    a = np.frombuffer(recs, dtype=np.uint8, count=both * rs).reshape(-1, rs)
                    b = np.frombuffer(theirs, dtype=np.uint8).reshape(-1, rs)
                    diff = np.flatnonzero((a != b).any(axis=1)).tolist()
                res.differing += len(diff)
                res.matched += both - len(diff)
                for k in [*diff, *range(both, n)]:  # differing records, then frames with no device record
                    if len(report) < max_report:
                        report[lo + k] = (bytes(recs[k * rs:(k + 1) * rs]),
                                          theirs[k * rs:(k + 1) * rs] if k < both else None)
                res.frames += n
            note = reader.info().truncation_note()
        res.differing += abs(res.frames - count)
        for i in range(res.frames, count):  # device records past the capture's last frame
            if len(report) >= max_report:
                break
            f.seek(i * rs)
            report[i] = (None, f.read(rs))
    if note:
        res.warnings.append(note)
    res.first_differences = _explain(capture, report, alg, subkey, strip)
    return res


def _explain(capture, report: dict[int, tuple[bytes | None, bytes | None]], alg: Algorithm, subkey: bytes,
             strip: str) -> list[Difference]:
    if not report:
        return []
    from ..digest.strip import explain, strip_range
    from ..reconcile.dissect import dissect_line

    wanted = {i for i, (mine, theirs) in report.items() if mine is not None and theirs is not None}
    frames: dict[int, Any] = {}
    if wanted:
        with CaptureReader(capture) as reader:
            for fr in reader.frames():
                if fr.index in wanted:
                    frames[fr.index] = fr
                    if len(frames) == len(wanted):
                        break
    out = []
    for i, (mine, theirs) in sorted(report.items()):
        exp = Record.decode(mine, alg.digest_size) if mine is not None else None
        dev = Record.decode(theirs, alg.digest_size) if theirs is not None else None
        if exp is None:
            out.append(Difference(i, ["extra record"], None, dev))
            continue
        if dev is None:
            out.append(Difference(i, ["missing record"], exp, None))
            continue
        fr = frames[i]
        d = Difference(i, [n for n in Record.FIELDS if getattr(exp, n) != getattr(dev, n)], exp, dev,
                       summary=dissect_line(fr.data, fr.linktype),
                       explanation=explain(fr.data, fr.linktype, strip, fr.wire_len), frame=fr.data)
        rng = strip_range(fr.data, fr.linktype, strip, fr.wire_len)
        d.expected_range = (rng.offset, rng.end)
        if "digest" in d.fields:
            d.device_range, d.device_range_note = _find_device_range(fr.data, fr.linktype, fr.wire_len, rng,
                                                                     dev.digest, alg, subkey, strip)
        out.append(d)
    return out


def _find_device_range(frame: bytes, linktype: int, wire_len: int, rng, digest: bytes, alg: Algorithm, subkey: bytes,
                       strip: str) -> tuple[tuple[int, int] | None, str]:
    """The byte range of ``frame`` whose digest under ``subkey`` is the device's: another strip mode's
    range first, then ranges within `SEARCH` bytes of the expected start and end (closest first)."""
    from ..digest.strip import strip_range

    for mode in STRIPS:
        if mode == strip:
            continue
        other = strip_range(frame, linktype, mode, wire_len)
        if (other.offset, other.end) != (rng.offset, rng.end) and \
                digest_one(alg, subkey, frame[other.offset:other.end]) == digest:
            return (other.offset, other.end), f"the device hashed strip {mode}'s range [{other.offset}, {other.end})"
    shifts = sorted(((ds, de) for ds in range(-SEARCH, SEARCH + 1) for de in range(-SEARCH, SEARCH + 1)
                     if (ds, de) != (0, 0)), key=lambda t: (abs(t[0]) + abs(t[1]), t))
    for ds, de in shifts:
        a, b = rng.offset + ds, rng.end + de
        if 0 <= a <= b <= len(frame) and digest_one(alg, subkey, frame[a:b]) == digest:
            parts = [f"start {ds:+d}" if ds else "", f"end {de:+d}" if de else ""]
            return (a, b), (f"the device hashed [{a}, {b}) instead of [{rng.offset}, {rng.end}) "
                            f"({', '.join(p for p in parts if p)})")
    return None, (f"no byte range within {SEARCH} bytes of [{rng.offset}, {rng.end}) and no other strip mode's "
                  "range gives the device's digest under this key: look at the key, the algorithm and the digest "
                  "code rather than the strip offsets")
