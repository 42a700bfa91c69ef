"""A per-link command (prove, checkpoint) on a ledger that has no link yet (a capture of an empty
file sealed nothing) says so, exit 2; it said `ledger has links none; choose one with --link`,
which sends the user to an option that cannot help."""

from __future__ import annotations

import struct

from conftest import capture_cli, cli


def test_no_link_yet_is_said_plainly(tmp_path, keydir):
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    ledger = tmp_path / "E"
    r = capture_cli(empty, ledger, keydir)
    assert r.returncode == 0, (r.stdout, r.stderr)
    for args in (
        ("prove", ledger, "--seq", "0", "--out", tmp_path / "p.json"),
        ("checkpoint", ledger, "--out", tmp_path / "cp"),
    ):
        r = cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr == (
            f"ledgertool: error: {ledger}: the ledger has no link yet: no segment was sealed\n"
        )
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "cp").exists()
