"""recompute --cluster cuts a large classic pcap into chunks at record boundaries: on every
classic pcap of the corpus, cut as finely as the cutter goes, the chunks'
digests, in order with their frame indexes shifted, are the digests of the whole file, and the
chunks stop where the whole file stops (corrupt or cut-short files included). The chunk tasks
are the cluster's own functions, called here (no cluster needed to run them)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS, corpus_rows, load_keys, needs_corpus

pytest.importorskip("distributed")

from ledgertool.algorithms import get_algorithm  # noqa: E402
from ledgertool.errors import CaptureFormatError  # noqa: E402
from ledgertool.reconcile.cluster import CaptureChunk, digest_chunk, plan_chunks  # noqa: E402

PCAPS = [r["file"] for r in corpus_rows() if r["format"].startswith("pcap ")]


@needs_corpus
@pytest.mark.parametrize("name", PCAPS)
def test_split_pcap_digests_equal_the_whole_file(name, keydir):
    path = str(CORPUS / "files" / name)
    alg = get_algorithm("siphash-1-3-128")
    subkey = load_keys(keydir)[0].subkey(alg.name, alg.key_size)
    try:
        whole_run, (whole,) = digest_chunk(CaptureChunk(path), subkey, alg.name, "frame", 1)
    except CaptureFormatError as e:  # not openable: the cutter refuses it the same way
        with pytest.raises(CaptureFormatError, match="^" + __import__("re").escape(str(e)) + "$"):
            plan_chunks([path], split_bytes=64)
        return
    chunks, stop = plan_chunks([path], split_bytes=64)
    runs, parts = [], []
    for c in chunks:
        r, (arr,) = digest_chunk(c, subkey, alg.name, "frame", 1)
        arr = arr.copy()
        arr["seq"] += np.uint64(sum(x.frames for x in runs))
        runs.append(r)
        parts.append(arr)
    got = np.concatenate(parts) if parts else whole[:0]
    assert sum(r.frames for r in runs) == whole_run.frames == len(whole)
    assert got.tobytes() == whole.tobytes()
    assert (stop.offset if stop else None) == (
        whole_run.stopped.offset if whole_run.stopped else None
    )
    assert [w for r in runs for w in r.warnings] == list(whole_run.warnings)
    if whole_run.frames > 1 and stop is None:  # cut finely: more than one chunk
        assert len(chunks) > 1 and all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
