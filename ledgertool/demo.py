"""demo: the main job end to end on the bundled sample capture.

keys generate -> capture (several sealed segments) -> verify -> recompute -> query, returning a
summary; used by `ledgertool demo` and the README's first command.
"""

from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path

from .capture.run import capture_file
from .errors import HostError, Setting, UsageError
from .keyfiles import DigestKey, SigningKey, TrustBundle, generate_keys
from .plural import plural
from .reconcile.query import run_query
from .reconcile.recompute import reconcile
from .verify.ledger import verify_ledger

SAMPLE_NAME = "sample.pcapng"


def sample_path(name: str = SAMPLE_NAME) -> Path:
    """The bundled sample: package data when installed, samples/ in a source checkout."""
    packaged = resources.files("ledgertool").joinpath("data", name)
    if packaged.is_file():
        return Path(str(packaged))
    src = Path(__file__).resolve().parent.parent / "samples" / name
    if src.is_file():
        return src
    raise HostError(
        f"bundled sample {name} not found (looked in the package data and {src.parent})"
    )


def run_demo(workdir: Path | None = None, segment_records: int = 100) -> dict:
    """Run the demo in `workdir` (a new temporary directory by default). Returns a summary dict
    with "ok" and human-readable "lines"."""
    workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="ledgertool-demo-"))
    if workdir.exists() and not workdir.is_dir():
        raise UsageError(
            f"{workdir}: not a directory; ",
            Setting("workdir"),
            " needs a directory (it is created if absent)",
        )
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HostError(f"{workdir}: cannot create the demo directory: {e.strerror}") from None
    keydir, ledger = workdir / "keys", workdir / "ledger"
    if (keydir / "digest.key").exists() or ledger.exists():
        raise UsageError(
            f"{workdir}: already holds a demo (keys/ or ledger/); pick an empty ",
            Setting("workdir"),
        )
    sample = sample_path()
    generate_keys(keydir)
    dk = DigestKey.load(keydir / "digest.key")
    sk = SigningKey.load(keydir / "signing.key")
    trust = TrustBundle.load(keydir / "verifier.pub")
    cap = capture_file(
        sample, ledger, digest_key=dk, signing_key=sk, segment_records=segment_records
    )
    ver = verify_ledger(ledger, trust)
    rec = reconcile(sample, ledger, dk, trust=trust)
    q = run_query(
        ledger,
        "SELECT count(*) AS frames, sum(wire_len) AS wire_bytes, "
        "count(DISTINCT segment) AS segments FROM records",
        trust,
    )
    frames, wire_bytes, nseg = q.rows[0]
    ok = ver.ok and rec.ok and frames == cap.frames
    lines = [
        f"keys      {keydir}: digest.key, signing.key (Ed25519 + ML-DSA-65), verifier.pub",
        f"capture   {sample.name}: {plural(cap.frames, 'frame')} -> "
        f"{plural(len(cap.segments), 'sealed segment')} in {ledger}",
        f"verify    {'OK' if ver.ok else 'FAILED'}: {plural(ver.segments, 'segment')}, "
        f"{plural(ver.records, 'record')}, {plural(len(ver.problems), 'problem')}",
        f"recompute {'MATCH' if rec.ok else 'DIFFER'}: matched {rec.matched}, ledger-only "
        f"{rec.ledger_only}, capture-only {rec.capture_only}",
        f"query     SELECT count(*), sum(wire_len), count(DISTINCT segment) FROM records -> "
        f"{plural(frames, 'frame')}, {plural(wire_bytes, 'wire byte')}, {plural(nseg, 'segment')}",
        f"demo {'OK' if ok else 'FAILED'}  (try: ledgertool verify {ledger} --trust "
        f"{keydir / 'verifier.pub'})",
    ]
    return {
        "ok": ok,
        "workdir": str(workdir),
        "ledger": str(ledger),
        "frames": cap.frames,
        "segments": len(cap.segments),
        "verify": ver.to_json(),
        "recompute": rec.to_json(),
        "query": {"frames": frames, "wire_bytes": wire_bytes, "segments": nseg},
        "lines": lines,
    }
