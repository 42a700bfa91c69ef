"""I/O errors name the file the user asked for, never a hidden temporary name: fsio's own
(`NAME.<hex>.tmp`), a private stage directory's (`.NAME.<random>.tmp`), and a file inside one."""

from __future__ import annotations

import errno
import os
import tempfile

import pytest
from conftest import cli_in_process

from ledgertool import fsio


@pytest.mark.parametrize(
    ("shown", "final"),
    [
        ("L/link=a/seg-00000001.seal.json.0123456789abcdef.tmp", "L/link=a/seg-00000001.seal.json"),
        ("/x/ro/.ex.0msi8qzs.tmp", "/x/ro/ex"),
        ("/x/ro/.ex.0msi8qzs.tmp/part-00000000.parquet", "/x/ro/ex/part-00000000.parquet"),
        ("/x/.hidden/file.tmp", "/x/.hidden/file.tmp"),  # not a name ledgertool makes
        ("out.csv", "out.csv"),
    ],
)
def test_final_name(shown, final):
    assert fsio.final_name(shown) == final


def test_storage_error_names_the_final_file():
    e = OSError(errno.EROFS, os.strerror(errno.EROFS), "/x/ro/.ex.0msi8qzs.tmp")
    err = fsio.storage_error(e, "/x/ro/.ex.0msi8qzs.tmp", "create the export directory")
    assert str(err).startswith("/x/ro/ex: cannot create the export directory: Read-only")
    assert ".tmp" not in str(err)


def test_export_into_a_read_only_place_names_the_export(
    sample_ledger, keydir, tmp_path, monkeypatch
):
    def read_only(*args, dir=None, prefix="", suffix="", **kw):
        name = os.path.join(dir, f"{prefix}0msi8qzs{suffix}")
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), name)

    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    out = tmp_path / "ro" / "ex"
    out.parent.mkdir()
    rc, _, err = cli_in_process("export", sample_ledger, out, "--trust", keydir / "verifier.pub")
    assert rc == 2, err
    assert f"{out}: cannot create the export directory: Read-only file system" in err, err
    assert ".tmp" not in err and "0msi8qzs" not in err, err


def test_a_stray_os_error_line_names_the_final_file():
    from ledgertool.cli.app import _os_error_line

    e = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/d/.report.json.ab12cd34.tmp")
    assert _os_error_line(e).startswith("/d/report.json: No space left on device; free space")
