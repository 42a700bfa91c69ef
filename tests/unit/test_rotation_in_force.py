"""`keys rotate` never reports a failure while its rotation is in force: a failure after the
statement is in place (the directory flush, printing the report) says the rotation is in force,
and one before it leaves the old key in force and says it failed. Failures are injected in-process
at each point."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys

import pytest
from conftest import SAMPLES, cli_in_process, load_keys

from ledgertool.capture.run import capture_file
from ledgertool.errors import KeyFileError
from ledgertool.keyfiles import SigningKey, generate_keys


def _rotate_args(ledger, keydir, new_dir, *extra):
    return (
        "keys",
        "rotate",
        ledger,
        "--old",
        keydir / "signing.key",
        "--new",
        new_dir / "signing.key",
        *extra,
    )


def _in_force(ledger, keydir, new_dir) -> bool:
    """Which key the ledger takes: True for the new one (the old is refused), False for the old."""
    dk = load_keys(keydir)[0]
    try:
        capture_file(
            SAMPLES / "sample.pcap",
            ledger,
            digest_key=dk,
            signing_key=SigningKey.load(keydir / "signing.key"),
            segment_records=100,
        )
    except KeyFileError:
        capture_file(
            SAMPLES / "sample.pcap",
            ledger,
            digest_key=dk,
            signing_key=SigningKey.load(new_dir / "signing.key"),
            segment_records=100,
        )
        return True
    return False


@pytest.fixture()
def new_dir(tmp_path):
    generate_keys(tmp_path / "new")
    return tmp_path / "new"


def _fail_fsync(monkeypatch, under, *, directory: bool, after_rename: bool):
    """os.fsync fails with EIO on a directory (or a file) inside `under` (the ledger: the keys'
    protected states beside them are written too), only after a rename (or before any)."""
    renamed = []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(src, dst, *a, **kw):
        real_replace(src, dst, *a, **kw)
        where = kw.get("dst_dir_fd")  # fsio renames by name inside a directory it holds open
        dst = os.readlink(f"/proc/self/fd/{where}") if where is not None else os.fspath(dst)
        if dst.startswith(f"{under}"):
            renamed.append(True)

    def fsync(fd):
        inside = os.readlink(f"/proc/self/fd/{fd}").startswith(f"{under}")
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
        if inside and is_dir == directory and bool(renamed) == after_rename:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_fsync(fd)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_rotation_whose_directory_flush_fails_says_it_is_in_force(
    sample_ledger, keydir, new_dir, monkeypatch, capsys, as_json
):
    _fail_fsync(monkeypatch, sample_ledger, directory=True, after_rename=True)
    code, out, err = cli_in_process(
        *_rotate_args(sample_ledger, keydir, new_dir, *(["--json"] if as_json else [])),
    )
    monkeypatch.undo()
    assert code == 0, err
    statement = sample_ledger / "rotations" / "rotation-0001.json"
    assert statement.is_file()
    assert (
        f"{statement}: rotation 1 is in force (the statement is in place), but its directory "
        "could not be flushed (Input/output error)" in err
    )
    if as_json:
        doc = json.loads(out)
        assert (
            doc["ok"] is True and doc["number"] == 1 and "rotation 1 is in force" in doc["warning"]
        )
    else:
        assert out.startswith(
            f"rotation 1 -> {statement}: the new key signs from link link0 segment 3"
        )
    assert _in_force(sample_ledger, keydir, new_dir)


def test_rotation_whose_statement_fails_to_write_is_not_in_force(
    sample_ledger, keydir, new_dir, monkeypatch, capsys
):
    _fail_fsync(monkeypatch, sample_ledger, directory=False, after_rename=False)
    code, out, err = cli_in_process(*_rotate_args(sample_ledger, keydir, new_dir))
    monkeypatch.undo()
    assert code == 2 and out == ""
    assert "cannot write rotation statement: Input/output error" in err
    assert not list((sample_ledger / "rotations").glob("*"))
    assert not _in_force(sample_ledger, keydir, new_dir)


class _FullStdout:
    encoding = "utf-8"

    def write(self, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self):
        pass

    def isatty(self):
        return False


def test_rotation_whose_report_cannot_be_printed_says_it_is_in_force(
    sample_ledger, keydir, new_dir, monkeypatch, capsys
):
    from ledgertool.cli.app import _run

    monkeypatch.setattr(
        sys, "argv", ["ledgertool", *map(str, _rotate_args(sample_ledger, keydir, new_dir))]
    )
    monkeypatch.setattr(sys, "stdout", _FullStdout())
    code = _run()
    monkeypatch.undo()
    err = capsys.readouterr().err
    statement = sample_ledger / "rotations" / "rotation-0001.json"
    assert code == 2
    # the old key's protected state starts from this ledger's seals (captured without it): said once
    assert [e for e in err.splitlines() if not e.startswith("note: ")] == [
        "ledgertool: error: standard output: cannot write the report: No space left on device; "
        f"rotation 1 is in force ({statement}: the new key applies from link link0 segment 3); "
        "only the report was lost"
    ]
    assert _in_force(sample_ledger, keydir, new_dir)
