"""Every corpus capture through the whole main job: capture -> query count -> verify -> recompute.

The reader's per-file facts are checked in test_reader_corpus.py; here the ledger must hold
exactly the frames the reader delivers, which equals the manifest's record count except where
the reader's documented policy deliberately differs (EXPECTED_DEVIATIONS).
"""

from __future__ import annotations

import pytest
from conftest import CORPUS, corpus_rows, needs_corpus

from ledgertool.capture.run import capture_file
from ledgertool.errors import CaptureFormatError
from ledgertool.keyfiles import DigestKey, SigningKey, TrustBundle
from ledgertool.reconcile.query import run_query
from ledgertool.reconcile.recompute import reconcile
from ledgertool.source.file import CaptureReader
from ledgertool.verify.ledger import verify_ledger

ROWS = [(r, CORPUS / "files" / r["file"]) for r in corpus_rows()] + [
    (r, CORPUS / "derived" / r["file"]) for r in corpus_rows("derived_manifest.csv")
]

# file -> (frames we record, why we differ from the manifest's tshark count)
EXPECTED_DEVIATIONS = {
    "pythonpcapng__test006.ntar": (0, "block length 167 is not a multiple of 4: corrupt by policy"),
}


def delivered(path) -> tuple[int, bool]:
    n, failed = 0, False
    try:
        with CaptureReader(path) as r:
            for _ in r.frames():
                n += 1
    except CaptureFormatError:
        failed = True
    return n, failed


@needs_corpus
@pytest.mark.parametrize("row,path", ROWS, ids=[r["file"] for r, _ in ROWS])
def test_corpus_file_through_ledger(row, path, keydir, tmp_path):
    dk = DigestKey.load(keydir / "digest.key")
    sk = SigningKey.load(keydir / "signing.key")
    trust = TrustBundle.load(keydir / "verifier.pub")
    n, failed = delivered(path)
    if row["file"] in EXPECTED_DEVIATIONS:
        assert n == EXPECTED_DEVIATIONS[row["file"]][0]
    elif not failed:
        assert n == int(row["records"])
    ledger = tmp_path / "ledger"
    if failed:
        with pytest.raises(CaptureFormatError) as e:
            capture_file(path, ledger, digest_key=dk, signing_key=sk, segment_records=50)
        assert str(path) in str(e.value)
        if not (ledger / "ledger.json").exists():
            assert n == 0 or e.value.offset is None
            return
    else:
        res = capture_file(path, ledger, digest_key=dk, signing_key=sk, segment_records=50)
        assert res.frames == n
    rows = run_query(ledger, "SELECT count(*) FROM records", trust).rows
    assert rows[0][0] == n
    v = verify_ledger(ledger, trust)
    assert v.ok, v.problems
    assert v.records == n
    if not failed:
        rec = reconcile(path, ledger, dk, trust=trust)
        assert (rec.matched, rec.ledger_only, rec.capture_only) == (n, 0, 0)
