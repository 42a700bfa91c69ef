"""The native window accumulator against an implementation written from docs/ledger-format.md alone
(tests/window_spec.py, which imports no ledgertool code): byte-identical records for the digests of
real corpus captures and of a workload, with the keys derived the same way."""

from __future__ import annotations

import ast
import sys

import numpy as np
import pytest
import python_source
from conftest import CORPUS, REPO, corpus_rows, needs_corpus

from ledgertool.algorithms import get_algorithm
from ledgertool.digest.engine import DigestEngine
from ledgertool.digest.record import FLAG_GAP, record_dtype
from ledgertool.digest.strip import get_strip_mode
from ledgertool.digest.window import WindowAccumulator, WindowKeys, cells_for_capacity
from ledgertool.source import open_source

sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))
import window_spec  # noqa: E402
from scale_bench import SPEC  # noqa: E402

MASTER = bytes(range(32))
LEDGER_ID = "0123456789abcdef0123456789abcdef"


def _records(source: str, alg_name: str) -> np.ndarray:
    alg = get_algorithm(alg_name)
    key = bytes(range(alg.key_size))
    parts, seq = [], 0
    with open_source(source) as src:
        eng = DigestEngine(src, alg, get_strip_mode("frame"), key)
        while True:
            view, n, _ = eng.fill(seq)
            if not n:
                break
            parts.append(np.frombuffer(bytes(view), record_dtype(alg.digest_size)).copy())
            seq += n
    return np.concatenate(parts) if parts else np.zeros(0, record_dtype(alg.digest_size))


def _both(records: np.ndarray, alg: str, window_ns: int, capacity: int, link: str = "tap0"):
    dsize = records.dtype.fields["digest"][0].itemsize
    keys = WindowKeys.derive(MASTER, alg, LEDGER_ID, link, window_ns)
    kf, kpad = window_spec.window_keys(MASTER, alg, LEDGER_ID, link, window_ns)
    assert (keys.element, keys.pad) == (kf, kpad)
    cells = cells_for_capacity(capacity)
    acc = WindowAccumulator(keys, dsize, window_ns=window_ns, cells=cells)
    native = [r.serialize() for r in acc.add(records) + acc.finish()]
    rows = [
        (int(r["ts_ns"]), int(r["wire_len"]), int(r["flags"]), int(r["aux"]), bytes(r["digest"]))
        for r in records
    ]
    return native, window_spec.windows(rows, kf, kpad, window_ns, cells, dsize)


def test_the_spec_module_imports_no_ledgertool_code():
    tree = python_source.parse((REPO / "tests" / "window_spec.py").read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names and not [n for n in names if n.startswith("ledgertool") or n == "conftest"]


def _corpus_files(count: int) -> list[str]:
    rows = [r for r in corpus_rows() if not r["truncated_or_error"] and int(r["records"] or 0) > 1]
    rows.sort(key=lambda r: -int(r["records"]))
    return [r["file"] for r in rows[:count]]


@needs_corpus
@pytest.mark.parametrize("window_ns", [1_000, 1_000_000_000])
def test_corpus_frames_give_identical_window_records(window_ns):
    files = _corpus_files(4)
    assert files
    seen = 0
    for name in files:
        recs = _records(str(CORPUS / "files" / name), "siphash-1-3-128")
        native, spec = _both(recs, "siphash-1-3-128", window_ns, 8)
        assert native == spec, name
        seen += len(native)
        assert sum(int.from_bytes(r[32:40], "little") for r in native) == int(
            (recs["flags"] & FLAG_GAP == 0).sum()
        )
    assert seen >= len(files)


@pytest.mark.parametrize("alg", ["siphash-1-3-128", "blake3-keyed-256"])
def test_a_workload_gives_identical_window_records(tmp_path, alg):
    spec = tmp_path / "w.toml"
    spec.write_text(SPEC.format(n=3000, a=2000, b=1000))
    recs = _records(f"workload:{spec}", alg)
    assert len(recs) == 3000
    native, indep = _both(recs, alg, 100, 16, link="link=a")  # 1.68 ns apart: 100 ns windows
    assert len(native) == 51 and native == indep


def test_late_frames_and_drops_follow_the_document():
    """Timestamps that go back, a GAP record and a window after a jump: the assignment rule."""
    recs = np.zeros(7, record_dtype(16))
    recs["ts_ns"] = [5_000, 5_100, 3_000, 9_000, 2_000, 9_500, 20_000]
    recs["wire_len"] = 60
    recs["flags"][4], recs["aux"][4] = FLAG_GAP, 17
    recs["digest"] = np.frombuffer(bytes(range(7 * 16)), "V16")
    native, spec = _both(recs, "siphash-1-3-128", 1_000, 4)
    assert native == spec
    heads = [np.frombuffer(r[16:64], "<i8") for r in native]
    # (window_ns, index, frames, wire, drops, late)
    assert [tuple(h) for h in heads] == [
        (1000, 5, 3, 180, 0, 1),
        (1000, 9, 2, 120, 17, 0),
        (1000, 20, 1, 60, 0, 0),
    ]
