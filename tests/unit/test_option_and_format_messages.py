"""Refusals that name what is wrong: option values (NaN, empty, units), captures of formats the
reader does not take (compressed by bzip2/lz4, snoop, ERF), several SQL statements in one query;
and help that shows the unit of an option. In-process: the messages and exit codes are the CLI's."""

from __future__ import annotations

import bz2
import json
import struct

import pytest
from conftest import SAMPLES, cli_in_process

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames


def _capture(keydir, tmp_path, source, *extra):
    return cli_in_process(
        "capture",
        source,
        "--ledger",
        tmp_path / "L",
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        *extra,
    )


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--duration", "nan"), "--duration: bad duration 'nan'"),
        (("--duration", "5parsecs"), "--duration: bad duration '5parsecs'"),
        (("--duration", "0"), "--duration must be a positive finite number, got '0'"),
        (
            ("--segment-seconds", "nan"),
            "--segment-seconds must be a positive number of seconds, got nan",
        ),
        (("--segment-seconds", "-1"), "must be a positive number of seconds, got -1"),
        (("--algorithm", ""), "--algorithm is empty"),
        (("--strip", " "), "--strip is empty"),
    ],
)
def test_capture_refuses_a_bad_value_naming_its_option(keydir, tmp_path, extra, says):
    rc, out, err = _capture(keydir, tmp_path, SAMPLE, *extra)
    assert rc == 2 and err.startswith("ledgertool: error: ") and says in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "L").exists()


def test_capture_duration_takes_a_unit(keydir, tmp_path):
    rc, out, err = _capture(keydir, tmp_path, SAMPLE, "--duration", "5m", "--json")
    assert rc == 0, err
    assert (json.loads(out)["frames"], json.loads(out)["stop_reason"]) == (294, "end of capture")


def test_a_duration_error_names_the_option_it_came_from():
    rc, _, err = cli_in_process("plan", "storage", "--pps", "1M", "--duration", "5parsecs")
    assert rc == 2 and "--duration: bad duration '5parsecs'" in err, err
    rc, _, err = cli_in_process("plan", "storage", "--pps", "1M", "--window", "1parsec")
    assert rc == 2 and "--window: bad duration '1parsec'" in err, err


def test_capture_help_shows_units():
    rc, out, _ = cli_in_process("capture", "--help")
    assert rc == 0
    text = " ".join(out.split())
    for shown in ("--duration SECONDS|5m", "--segment-seconds SECONDS", "--ring-mb MIB"):
        assert shown in text, shown


def _erf(tmp_path):
    """One ERF record of a type not read (1, HDLC over SONET) as a DAG card writes it: no file
    header, its timestamp first."""
    frame = bytes(60)
    head = struct.pack(">HHH", 16 + 60, 0, 60)  # rlen, loss counter, wlen
    rec = struct.pack("<Q", 0x44332211002F4700) + bytes([1, 0x04]) + head
    p = tmp_path / "dag.erf"
    p.write_bytes(rec + frame)
    return p


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (
            lambda d: _write(d / "c.pcap.bz2", bz2.compress(SAMPLE.read_bytes())),
            "bzip2-compressed: decompress first",
        ),
        (
            lambda d: _write(d / "c.pcap.lz4", b"\x04\x22\x4d\x18" + bytes(40)),
            "lz4-compressed: decompress first",
        ),
        (
            lambda d: _write(d / "c.snoop", b"snoop\0\0\0" + struct.pack(">II", 2, 4) + bytes(40)),
            "a snoop capture (RFC 1761)",
        ),
        (_erf, "ERF record at byte 0 has type 1: only Ethernet"),
    ],
)
def test_a_capture_of_another_format_is_named(keydir, tmp_path, make, says):
    path = make(tmp_path)
    rc, _, err = _capture(keydir, tmp_path, path)
    assert rc == 2 and f"{path}: {says}" in err and "unknown magic" not in err, err


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_pcap_with_no_frames_is_not_taken_for_another_format(keydir, tmp_path):
    p = _write(tmp_path / "empty.pcap", SAMPLE.read_bytes()[:24])
    rc, out, err = _capture(keydir, tmp_path, p, "--json")
    assert rc == 0 and json.loads(out)["frames"] == 0, err


def test_query_refuses_several_statements(sample_ledger, keydir):
    rc, out, err = cli_in_process(
        "query", sample_ledger, "SELECT 1 AS a; SELECT 2 AS b", "--trust", keydir / "verifier.pub"
    )
    assert rc == 2 and out == ""
    assert "query runs one SQL statement, got 2" in err, err
    rc, out, err = cli_in_process(
        "query",
        sample_ledger,
        "SELECT count(*) AS n FROM records;",
        "--json",
        "--trust",
        keydir / "verifier.pub",
    )
    assert rc == 0 and json.loads(out) == [{"n": 294}], err
