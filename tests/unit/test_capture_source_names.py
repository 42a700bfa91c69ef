"""What a capture signs and prints as its source: a file name whose bytes are not UTF-8 is
captured (signed as `\\xNN` escapes, printed the same way, never an internal error), and a
`workload:` spec is signed by its name without directory, like a capture file."""

from __future__ import annotations

import json
import os
import shutil

from conftest import SAMPLES, cli_in_process

BAD_NAME = os.fsdecode(b"cap-\xff\xfe.pcap")  # not UTF-8: a surrogate-escaped str, as argv gives it


def _keys(keydir):
    return ("--digest-key", keydir / "digest.key", "--signing-key", keydir / "signing.key")


def _sources(ledger) -> set:
    return {
        json.loads(p.read_text())["source"] for p in (ledger / "link=link0").glob("*.seal.json")
    }


def test_capture_file_with_non_utf8_name_is_captured_and_named_safely(
    tmp_path, keydir, monkeypatch, capsys
):
    cap = tmp_path / BAD_NAME
    shutil.copyfile(SAMPLES / "sample.pcap", cap)
    code, out, err = cli_in_process("capture", cap, "--ledger", tmp_path / "L", *_keys(keydir))
    assert code == 0, err
    assert _sources(tmp_path / "L") == {"cap-\\xff\\xfe.pcap"}
    assert f"captured 294 frames (124,027 bytes) from {tmp_path}/cap-\\xff\\xfe.pcap into" in out


def test_missing_capture_file_with_non_utf8_name_is_one_line(tmp_path, keydir, monkeypatch, capsys):
    code, out, err = cli_in_process(
        "capture",
        tmp_path / BAD_NAME,
        "--ledger",
        tmp_path / "L",
        *_keys(keydir),
    )
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"ledgertool: error: {tmp_path}/cap-\\xff\\xfe.pcap: cannot open: No such file or directory"
    ]


def test_workload_capture_signs_the_spec_name_without_directory(
    tmp_path, keydir, monkeypatch, capsys
):
    spec = tmp_path / "operator" / "private" / "imix.toml"
    spec.parent.mkdir(parents=True)
    shutil.copyfile(SAMPLES / "workloads" / "imix.toml", spec)
    code, _, err = cli_in_process(
        "capture",
        f"workload:{spec}",
        "--ledger",
        tmp_path / "L",
        *_keys(keydir),
        "--segment-records",
        "500",
    )
    assert code == 0, err
    assert _sources(tmp_path / "L") == {"workload:imix.toml"}
