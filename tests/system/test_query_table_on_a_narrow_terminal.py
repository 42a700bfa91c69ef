"""`query` on an 80-column terminal (a real process on a pseudo-terminal, COLUMNS=80): every line
fits, ts_ns stays whole, a digest is shortened in the middle, and columns that do not fit are
hidden whole and named in a footer, after DuckDB's CLI; off a terminal every value stays whole."""

from __future__ import annotations

import os
import pty
import subprocess

from conftest import SAMPLES
from test_cli_output import CLI

TS_FIRST = "1767225600000000000"  # samples/sample.pcapng's first frame


def _on_terminal(*args, columns: int = 80) -> str:
    """Run `ledgertool ARGS` with stdout on a pseudo-terminal of `columns` columns."""
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS=str(columns), LINES="50", TERM="dumb")
    p = subprocess.Popen([*CLI, *map(str, args)], stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        out += chunk
    assert p.wait(timeout=60) == 0
    os.close(master)
    return out.decode().replace("\r\n", "\n")


def _ledger(built_ledger):
    return built_ledger(SAMPLES / "sample.pcapng", segment_records=100).path


def test_all_columns_at_80_hide_whole_columns_and_say_so(built_ledger, keydir):
    text = _on_terminal(
        "query",
        _ledger(built_ledger),
        "SELECT * FROM records LIMIT 3",
        "--trust",
        keydir / "verifier.pub",
    )
    lines = text.rstrip("\n").split("\n")
    assert max(len(line) for line in lines) <= 80, text
    assert TS_FIRST in text, text  # whole, not cut to 5 characters
    assert lines[-1] == "10 columns (7 shown; hidden: linktype, aux, digest)", text


def test_a_digest_is_shortened_in_the_middle(built_ledger, keydir):
    ledger = _ledger(built_ledger)
    sql = "SELECT seq, ts_ns, wire_len, digest, link FROM records ORDER BY seq LIMIT 3"
    full = (
        subprocess.run(
            [
                *CLI,
                "query",
                str(ledger),
                sql,
                "--trust",
                str(keydir / "verifier.pub"),
                "--format",
                "csv",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.splitlines()[1]
        .split(",")
    )
    digest = full[3]
    text = _on_terminal("query", ledger, sql, "--trust", keydir / "verifier.pub", columns=80)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert f"{digest[:8]}…{digest[-8:]}" in text and digest not in text, text
    assert TS_FIRST in text and "link0" in text and "columns (" not in text, text
