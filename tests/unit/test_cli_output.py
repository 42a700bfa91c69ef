"""Output and interaction: progress on a terminal's stderr only, help for every command,
query's output path checked first, and the examples of docs/cli.md run as documented."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from conftest import REPO, SAMPLES, cli

SAMPLE = SAMPLES / "sample.pcapng"
CLI = [sys.executable, "-c", "from ledgertool.cli.app import main; main()"]


def _keys(keydir: Path) -> list[str]:
    return [
        "--digest-key",
        str(keydir / "digest.key"),
        "--signing-key",
        str(keydir / "signing.key"),
    ]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory, keydir) -> Path:
    """The sample in 3 segments."""
    led = tmp_path_factory.mktemp("output") / "L"
    r = cli("capture", SAMPLE, "--ledger", led, *_keys(keydir), "--segment-records", "100")
    assert r.returncode == 0, r.stderr
    return led


def test_verify_progress_counts_segments_of_total(ledger, keydir):
    """The library's typed updates: segments done of the link's total, records as items."""
    from ledgertool.keyfiles import TrustBundle
    from ledgertool.progress import Progress
    from ledgertool.verify.ledger import verify_ledger

    seen: list[Progress] = []
    res = verify_ledger(ledger, TrustBundle.load(keydir / "verifier.pub"), progress=seen.append)
    assert res.ok
    assert seen[0] == Progress("verify", 0, 3, "segments", 0, "records")
    assert [(p.done, p.total, p.items) for p in seen] == [
        (0, 3, 0),
        (1, 3, 100),
        (2, 3, 200),
        (3, 3, 294),
    ]


def test_recompute_progress_ends_at_the_file_size(ledger, keydir):
    from ledgertool.keyfiles import DigestKey, TrustBundle
    from ledgertool.progress import Progress
    from ledgertool.reconcile.recompute import reconcile

    seen: list[Progress] = []
    res = reconcile(
        SAMPLE,
        ledger,
        DigestKey.load(keydir / "digest.key"),
        trust=TrustBundle.load(keydir / "verifier.pub"),
        progress=seen.append,
    )
    assert res.ok
    phases = [p.phase for p in seen]
    assert phases.index("recompute") > phases.index("verify")  # the ledger is verified first
    last = seen[-1]
    assert last == Progress(
        "recompute", SAMPLE.stat().st_size, SAMPLE.stat().st_size, "bytes", 294, "frames"
    )
    done = [p.done for p in seen if p.phase == "recompute"]
    assert done == sorted(done) and all(d <= last.total for d in done)


# ---- help ---------------------------------------------------------------------------------------


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and group of the CLI, as its words after `ledgertool`."""
    from ledgertool.cli.app import click_command

    paths = []

    def walk(cmd, path: tuple[str, ...]) -> None:
        paths.append(path)
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, (*path, name))

    walk(click_command(), ())
    return paths


def test_every_command_help_says_reads_writes_exit_codes_example():
    from click.testing import CliRunner

    from ledgertool.cli.app import click_command

    paths = _command_paths()
    assert len(paths) >= 30 and ("conformance", "check") in paths and ("plan", "storage") in paths
    runner = CliRunner()
    for path in paths:
        r = runner.invoke(click_command(), [*path, "-h"], prog_name="ledgertool")
        assert r.exit_code == 0, (path, r.output)
        text = r.output
        example = text.split("\n  Example:\n    ", 1)
        assert len(example) == 2, (path, text)
        assert example[1].startswith("ledgertool " + " ".join(path)), (path, example[1])
        # the paragraph from "Exit codes: 0 " to its end (wrapped: continuations indented by 4)
        lines = text.splitlines()
        at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Exit codes: 0 ")), 0)
        codes = " ".join([lines[at]] + [ln for ln in lines[at + 1 :] if ln.startswith("    ")][:4])
        assert ", 2 " in " ".join(codes.split()), (path, text)
        if path not in {
            (),
            ("keys",),
            ("plan",),
            ("workload",),
            ("conformance",),
            ("challenge",),
            ("witness",),
        }:  # groups: their commands say
            assert "\n  Reads: " in text and "\n  Writes: " in text, (path, text)


# ---- start-up -----------------------------------------------------------------------------------


# ---- query --output checked first ---------------------------------------------------------------


@pytest.mark.parametrize("where", ["missing-dir", "a-dir", "under-a-file"])
def test_query_output_checked_before_the_query(tmp_path, where):
    """A bad --output is one line, exit 2, before the ledger is read: the ledger here does not even
    exist, and the output error is the one reported; nothing is left in the directory."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    out, line = {
        "missing-dir": (
            tmp_path / "nodir" / "r.csv",
            f"{tmp_path / 'nodir' / 'r.csv'}: cannot write query result: "
            f"No such file or directory; {tmp_path / 'nodir'} is not an existing directory",
        ),
        "a-dir": (
            tmp_path,
            f"{tmp_path}: cannot write query result: Is a directory; give a file name (the "
            "directory is not replaced)",
        ),
        "under-a-file": (
            afile / "r.csv",
            f"{afile / 'r.csv'}: cannot write query result: Not a directory; "
            f"{afile} is not an existing directory",
        ),
    }[where]
    before = sorted(tmp_path.iterdir())
    r = cli("query", tmp_path / "no-ledger", "SELECT 1", "--output", out, "--format", "csv")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"ledgertool: error: {line}"
    assert r.stdout == "" and sorted(tmp_path.iterdir()) == before


def test_query_output_good_path_still_written(ledger, tmp_path):
    out = tmp_path / "n.csv"
    r = cli(
        "query", ledger, "SELECT count(*) AS n FROM records", "--output", out, "--format", "csv"
    )
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "n\n294\n" and sorted(p.name for p in tmp_path.iterdir()) == ["n.csv"]


# ---- bench dashboard: the answer first ----------------------------------------------------------

LINERATE_CSV = REPO / "docs" / "bench" / "linerate.csv"


def test_dashboard_answer_cores_needed():
    """Cores needed from the measured rows: 400G of 64 B frames is 595.2 Mframes/s, divided by the
    fastest per-thread rate measured for the algorithm (over CPU paths and thread counts)."""
    from ledgertool.bench.dashboard import ANSWER_SIZES, answer_rows, latest
    from ledgertool.bench.rows import read_csv

    rows = read_csv(LINERATE_CSV)
    answers = {a.label: a for a in answer_rows(rows)}
    assert ANSWER_SIZES == (64, 1500)
    assert list(answers)[:2] == [
        "capture path (digest engine), siphash-1-3-128",
        "capture path (with sealing), siphash-1-3-128",
    ]
    sip = [r for r in latest(rows) if r.benchmark == "digest" and r.algorithm == "siphash-1-3-128"]
    for i, size in enumerate(ANSWER_SIZES):
        best = max(r.frames_per_s / r.threads for r in sip if r.size == size)
        for j, bps in enumerate((400e9, 800e9, 1.6e12)):
            want = bps / ((size + 20) * 8) / best
            assert answers["siphash-1-3-128"].cores[i][j] == pytest.approx(want, rel=1e-9)
    assert answers["siphash-1-3-128"].cores[0][0] == pytest.approx(
        595.238e6 / best_at(sip, 64), rel=1e-4
    )
    assert answers["siphash-1-3-128"].cores[0][2] == pytest.approx(
        4 * answers["siphash-1-3-128"].cores[0][0]
    )


def best_at(rows, size: int) -> float:
    return max(r.frames_per_s / r.threads for r in rows if r.size == size)


def test_dashboard_layout():
    from ledgertool.bench.dashboard import render_html
    from ledgertool.bench.rows import read_csv

    page = render_html(read_csv(LINERATE_CSV))
    assert page.index('id="answer"') < page.index("<svg")  # the answer first
    # one header line, not one per CPU path
    assert page.count('<div class="meta">vm · AMD EPYC') == 1
    assert "CPU paths aesni-pclmul, avx2-mb, avx512-mb" in page
    n_alg = page.count('data-kind="size"')
    assert n_alg == 5 and page.count('data-kind="threads"') == n_alg
    assert page.count('data-label="1.6T ÷ 2 cores"') == n_alg  # a 1.6T line in every plot
    assert page.count('data-label="1.6T × threads ÷ 2 cores"') == n_alg
    assert page.count("tcpdump -r FILE -w /dev/null (64 B)") == 1  # the latest of the two runs
    bars = re.findall(r'text-anchor="end">([^<]*tcpdump[^<]*)</text>', page)
    assert bars and not any("siphash" in b for b in bars)
    assert page.count("<thead>") == 3  # the answer's, the sealed ÷ engine ratios', the raw table's


# ---- docs/cli.md: output files ------------------------------------------------------------------


def test_recompute_details_keeps_the_old_file_on_failure(ledger, keydir, tmp_path):
    """docs/cli.md, "Output files": a failed run leaves the old file. --details used to be
    truncated at the start, so a run that failed later destroyed it."""
    details = tmp_path / "d.jsonl"
    details.write_text("old\n")
    bad = tmp_path / "bad.pcap"
    # a corrupt record is reconciled up to where it stopped (a report, --details written): what
    # fails the run is a capture that cannot be opened at all
    data = bytearray(SAMPLE.with_suffix(".pcap").read_bytes())
    data[0:4] = b"\x00\x01\x02\x03"
    bad.write_bytes(bytes(data))
    r = cli(
        "recompute",
        bad,
        "--ledger",
        ledger,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--details",
        details,
    )
    assert r.returncode == 2 and "magic" in r.stderr, r.stderr
    assert details.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.pcap",
        "d.jsonl",
    ]  # no temporary left
