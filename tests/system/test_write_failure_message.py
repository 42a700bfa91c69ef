"""A capture stopped by a failing write (here the file size limit, EFBIG, as a full disk stops it)
says exactly what `recover` will seal: the records of the whole authenticated blocks, and the
bytes of the block the error cut, which are discarded (never written whole, never durable)."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ledgertool.bench.measure import write_synthetic_pcap
from ledgertool.ledger import layout
from ledgertool.ledger.sealer import load_seal

CLI = [sys.executable, "-c", "from ledgertool.cli.app import main; main()"]


@pytest.fixture(scope="module")
def pcap(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("efbig") / "synthetic.pcap"
    write_synthetic_pcap(p, 200_000, 64, seed=7)
    return p


def _file_size_limit() -> None:  # in the child: the process under test meets EFBIG, not SIGXFSZ
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (5_000_000, 5_000_000))


def test_a_failed_append_names_the_records_recover_keeps(pcap, tmp_path, keydir):
    ledger = tmp_path / "L"
    r = subprocess.run(
        [
            *CLI,
            "capture",
            pcap,
            "--ledger",
            ledger,
            "--digest-key",
            keydir / "digest.key",
            "--signing-key",
            keydir / "signing.key",
        ],
        capture_output=True,
        text=True,
        preexec_fn=_file_size_limit,
        timeout=300,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    opened = layout.open_segment_path(ledger, "link0", 0)
    assert r.stderr.startswith(
        f"ledgertool: error: {opened}: cannot append to open segment: File too large"
    ), r.stderr
    assert "every record written before the error is kept" not in r.stderr
    m = re.search(
        rf"kept for `ledgertool recover {ledger}` to seal once that is fixed: ([0-9,]+) records in "
        rf"the (\d+) whole authenticated blocks? of {opened.name} \(the ([0-9,]+) bytes past them, "
        r"of a block the error cut, are discarded\)$",
        r.stderr.strip(),
    )
    assert m, r.stderr
    kept, torn = int(m[1].replace(",", "")), int(m[3].replace(",", ""))
    assert (
        kept > 0
        and torn > 0
        and opened.stat().st_size == 256 + int(m[2]) * (4 + 32) + kept * 48 + torn
    )
    r = subprocess.run(
        [*CLI, "recover", ledger, "--signing-key", keydir / "signing.key", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    seal = load_seal(layout.seal_path(ledger, "link0", 0))
    assert (seal.records, seal.torn_bytes_discarded) == (
        kept,
        torn,
    )  # exactly what the message said
