"""The `records:FILE` / `records:-` capture source: records a hardware pipeline
computed, sealed exactly as the engine's records are, and every refusal of records that do not fit.

The "device" here is ledgertool's own engine (`conformance.compute_records`, the records `capture`
writes), so a ledger sealed from its records must equal a direct capture record for record and
`recompute` of the capture against it must MATCH."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import SAMPLES, cli, load_keys
from ledger_files import sealed_table

from ledgertool.algorithms import get_algorithm
from ledgertool.device.conformance import compute_records
from ledgertool.digest.record import FLAG_GAP, record_dtype
from ledgertool.errors import LedgerFormatError
from ledgertool.ledger import layout
from ledgertool.source.records import CHUNK_BYTES, RecordsReader

SAMPLE = SAMPLES / "sample.pcap"  # 294 frames
ALG = "siphash-1-3-128"


def _records(keydir, alg: str = ALG, strip: str = "l3", first_seq: int = 0) -> bytes:
    dk, _, _ = load_keys(keydir)
    return compute_records(SAMPLE, dk, get_algorithm(alg), strip, first_seq)


def _key_id(keydir, alg: str = ALG) -> str:
    dk, _, _ = load_keys(keydir)
    a = get_algorithm(alg)
    return dk.key_id(a.name, a.key_size)


def _capture(keydir, source, ledger, *extra, stdin: bytes | None = None):
    """`ledgertool capture SOURCE` without a digest key, as a pipeline's host would run it."""
    args = [
        sys.executable,
        "-c",
        "from ledgertool.cli.app import main; main()",
        "capture",
        str(source),
        "--ledger",
        str(ledger),
        "--signing-key",
        str(keydir / "signing.key"),
        *map(str, extra),
    ]
    return subprocess.run(
        args, input=stdin if stdin is not None else b"", capture_output=True, timeout=300
    )


def _rows(ledger, n):
    return [sealed_table(ledger, i) for i in range(n)]


def test_records_from_a_pipe_seal_the_same_ledger_as_a_direct_capture_and_recompute_matches(
    tmp_path, keydir
):
    direct, piped = tmp_path / "direct", tmp_path / "piped"
    r = cli(
        "capture",
        SAMPLE,
        "--ledger",
        direct,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--strip",
        "l3",
        "--segment-records",
        "100",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    want = json.loads(r.stdout)
    p = _capture(
        keydir,
        "records:-",
        piped,
        "--strip",
        "l3",
        "--segment-records",
        "100",
        "--digest-key-id",
        _key_id(keydir),
        "--json",
        stdin=_records(keydir),
    )
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    for k in (
        "frames",
        "bytes",
        "drops",
        "first_seq",
        "next_seq",
        "segments",
        "algorithm",
        "strip",
        "created",
    ):
        assert got[k] == want[k], k
    assert (got["frames"], got["bytes"], got["segments"], got["source"]) == (
        294,
        want["bytes"],
        [0, 1, 2],
        "records:-",
    )
    # the same records, segment by segment, the same Merkle roots and ledger layout
    for mine, theirs in zip(_rows(piped, 3), _rows(direct, 3)):
        assert mine.equals(theirs)
    for i in range(3):
        a = json.loads(layout.seal_path(piped, "link0", i).read_text())
        b = json.loads(layout.seal_path(direct, "link0", i).read_text())
        assert (a["merkle_root"], a["records"], a["first_seq"]) == (
            b["merkle_root"],
            b["records"],
            b["first_seq"],
        )
        assert a["source"] == "records:-" and a["digest_key_id"] == b["digest_key_id"]
    assert layout.checkpoint_path(piped, "link0").is_file()
    v = cli("verify", piped, "--trust", keydir / "verifier.pub")
    assert v.returncode == 0 and "294 records" in v.stdout, v.stdout + v.stderr
    rc = cli(
        "recompute",
        SAMPLE,
        "--ledger",
        piped,
        "--digest-key",
        keydir / "digest.key",
        "--trust",
        keydir / "verifier.pub",
        "--json",
    )
    assert rc.returncode == 0, rc.stdout + rc.stderr
    rep = json.loads(rc.stdout)
    assert (rep["ok"], rep["frames"], rep["matched"], rep["ledger_only"], rep["capture_only"]) == (
        True,
        294,
        294,
        0,
        0,
    )


def test_records_file_appends_to_an_existing_ledger_with_its_digest_key_id(tmp_path, keydir):
    """blake3-keyed-256 (64-byte records) from a file: the ledger's own key id, no key given."""
    led = tmp_path / "L"
    r = cli(
        "capture",
        SAMPLE,
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--algorithm",
        "blake3-keyed-256",
        "--segment-records",
        "200",
    )
    assert r.returncode == 0, r.stderr
    f = tmp_path / "more.records"
    f.write_bytes(_records(keydir, "blake3-keyed-256", "frame", first_seq=294))
    p = _capture(keydir, f"records:{f}", led, "--segment-records", "200", "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert (rep["frames"], rep["first_seq"], rep["next_seq"], rep["segments"]) == (
        294,
        "294",
        "588",
        [2, 3],
    )
    assert (
        json.loads(layout.seal_path(led, "link0", 2).read_text())["source"]
        == "records:more.records"
    )
    v = cli("verify", led, "--trust", keydir / "verifier.pub")
    assert v.returncode == 0 and "588 records" in v.stdout, v.stdout + v.stderr


def test_gap_records_count_as_drops_and_take_one_seq(tmp_path, keydir):
    dt = record_dtype(16)
    arr = np.frombuffer(_records(keydir), dtype=dt).copy()
    gap = np.zeros(1, dtype=dt)
    gap["flags"], gap["aux"], gap["ts_ns"] = FLAG_GAP, 7, arr["ts_ns"][9]
    recs = np.concatenate((arr[:10], gap, arr[10:]))
    recs["seq"] = np.arange(len(recs), dtype=np.uint64)
    p = _capture(
        keydir,
        "records:-",
        tmp_path / "G",
        "--digest-key-id",
        _key_id(keydir),
        "--strip",
        "l3",
        "--json",
        stdin=recs.tobytes(),
    )
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert (rep["frames"], rep["drops"], rep["next_seq"]) == (294, 7, "295")
    seal = json.loads(layout.seal_path(tmp_path / "G", "link0", 0).read_text())
    assert (seal["records"], seal["frames"], seal["drops_declared"]) == (295, 294, 7)
    v = cli("verify", tmp_path / "G", "--trust", keydir / "verifier.pub")
    assert v.returncode == 0, v.stdout + v.stderr


def test_empty_input_records_nothing(tmp_path, keydir):
    led = tmp_path / "E"
    cli(
        "capture",
        SAMPLE,
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--strip",
        "l3",
    )
    before = sorted(p.name for p in layout.link_dir(led, "link0").iterdir())
    p = _capture(keydir, "records:-", led, "--json", stdin=b"")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert (rep["frames"], rep["segments"], rep["first_seq"], rep["next_seq"]) == (
        0,
        [],
        "294",
        "294",
    )
    assert sorted(p.name for p in layout.link_dir(led, "link0").iterdir()) == before


def _refused(p, *parts: str) -> str:
    err = p.stderr.decode()
    assert p.returncode == 2, (p.returncode, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for part in parts:
        assert part in err, (part, err)
    return err


def test_refuses_a_file_that_is_not_whole_records_before_writing_anything(tmp_path, keydir):
    f = tmp_path / "cut.records"
    f.write_bytes(_records(keydir)[:-12])  # 294 * 48 - 12 bytes
    p = _capture(keydir, f"records:{f}", tmp_path / "N", "--digest-key-id", _key_id(keydir))
    _refused(
        p,
        f"{f}: 14100 bytes is not a whole number of 48-byte siphash-1-3-128 records: "
        "record 293 is cut at byte 14064",
    )
    assert not (tmp_path / "N").exists()  # a new ledger that recorded nothing is not left behind


def test_refuses_a_torn_last_record_from_a_pipe_after_sealing_the_records_before_it(
    tmp_path, keydir
):
    p = _capture(
        keydir,
        "records:-",
        tmp_path / "T",
        "--digest-key-id",
        _key_id(keydir),
        "--strip",
        "l3",
        "--segment-records",
        "100",
        stdin=_records(keydir)[:-12],
    )
    _refused(
        p,
        "standard input: record 293 (byte 14064) is cut at byte 14100: 36 of 48 bytes (a torn last "
        "record)",
        "293 frames before it were sealed in segments 0..2",
    )
    v = cli("verify", tmp_path / "T", "--trust", keydir / "verifier.pub")
    assert v.returncode == 0 and "293 records" in v.stdout, v.stdout + v.stderr


def _doctored(keydir, edit) -> bytes:
    arr = np.frombuffer(_records(keydir), dtype=record_dtype(16)).copy()
    edit(arr)
    return arr.tobytes()


def test_refuses_a_seq_gap(tmp_path, keydir):
    def gap(a):
        a["seq"][150:] += 1

    p = _capture(
        keydir,
        "records:-",
        tmp_path / "S",
        "--digest-key-id",
        _key_id(keydir),
        "--strip",
        "l3",
        "--segment-records",
        "100",
        stdin=_doctored(keydir, gap),
    )
    _refused(
        p,
        "standard input: record 150 (byte 7200) seq 151 after seq 149: 1 seq number is missing",
        "150 frames before it were sealed in segments 0..1",
    )
    seals = [json.loads(layout.seal_path(tmp_path / "S", "link0", i).read_text()) for i in range(2)]
    assert [s["records"] for s in seals] == [100, 50]  # every record before the bad one, no more


def test_refuses_a_seq_restart(tmp_path, keydir):
    def restart(a):
        a["seq"][200:] -= 200

    p = _capture(
        keydir,
        "records:-",
        tmp_path / "R",
        "--digest-key-id",
        _key_id(keydir),
        "--strip",
        "l3",
        stdin=_doctored(keydir, restart),
    )
    _refused(
        p,
        "record 200 (byte 9600) seq 0 after seq 199: the sequence restarts or repeats",
        "200 frames before it were sealed in segments 0..0",
    )


def test_refuses_records_that_do_not_start_at_the_links_next_seq(tmp_path, keydir):
    led = tmp_path / "L"
    cli(
        "capture",
        SAMPLE,
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--strip",
        "l3",
    )
    p = _capture(keydir, "records:-", led, stdin=_records(keydir))  # numbered from 0 again
    _refused(
        p,
        "record 0 (byte 0) seq 0, but link link0 continues at seq 294",
        "0 frames before it were sealed",
    )
    assert not layout.seal_path(led, "link0", 1).exists()


def test_refuses_an_unknown_flag(tmp_path, keydir):
    def flag(a):
        a["flags"][7] |= 0x0100  # bit 8: reserved

    p = _capture(
        keydir,
        "records:-",
        tmp_path / "F",
        "--digest-key-id",
        _key_id(keydir),
        "--strip",
        "l3",
        stdin=_doctored(keydir, flag),
    )
    _refused(
        p,
        "record 7 (byte 336) has flags 0x0100: bits 0x0100 are not record flags",
        "7 frames before it were sealed",
    )


def test_refuses_records_of_another_algorithm_for_an_existing_ledger(tmp_path, keydir):
    """64-byte records into a 48-byte ledger: a pipe is refused at record 1, before anything is
    sealed; a file whose size fits neither way is refused by its size."""
    led = tmp_path / "L"
    cli(
        "capture",
        SAMPLE,
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
    )
    wide = _records(keydir, "blake3-keyed-256", "frame", first_seq=294)
    p = _capture(keydir, "records:-", led, stdin=wide)
    _refused(
        p,
        "standard input: record 1 (byte 48) does not continue record 0, but byte 64 does: these "
        "are 64-byte records (blake3-keyed-256), not the ledger's 48-byte siphash-1-3-128 records",
    )
    assert not layout.seal_path(led, "link0", 1).exists()
    f = tmp_path / "wide.records"
    f.write_bytes(wide[: 64 * 5])  # 320 bytes: not whole 48-byte records
    p = _capture(keydir, f"records:{f}", led)
    _refused(
        p,
        "320 bytes is not a whole number of 48-byte siphash-1-3-128 records",
        "whole records of blake3-keyed-256 (64 B)?",
    )
    p = _capture(keydir, "records:-", led, "--algorithm", "blake3-keyed-256", stdin=wide)
    _refused(p, "ledger uses algorithm 'siphash-1-3-128', not 'blake3-keyed-256'")


def test_digest_key_id_is_required_for_a_new_ledger_and_checked_for_an_existing_one(
    tmp_path, keydir, other_keydir
):
    p = _capture(keydir, "records:-", tmp_path / "N", stdin=_records(keydir))
    _refused(p, "a new ledger records the id of its digest key")
    assert not (tmp_path / "N").exists()
    led = tmp_path / "L"
    cli(
        "capture",
        SAMPLE,
        "--ledger",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--signing-key",
        keydir / "signing.key",
        "--strip",
        "l3",
    )
    more = _records(keydir, first_seq=294)
    p = _capture(keydir, "records:-", led, "--digest-key-id", _key_id(other_keydir), stdin=more)
    _refused(
        p,
        f"digest key id {_key_id(other_keydir)} given for the records is not the current "
        "digest key",
    )
    p = _capture(keydir, "records:-", led, "--digest-key", other_keydir / "digest.key", stdin=more)
    _refused(p, "is not the current digest key of ledger")
    p = _capture(
        keydir,
        "records:-",
        led,
        "--digest-key",
        keydir / "digest.key",
        "--digest-key-id",
        _key_id(keydir),
        stdin=more,
    )
    assert p.returncode == 0, p.stderr
    p = _capture(keydir, "records:-", tmp_path / "M", "--digest-key-id", "ABC", stdin=more)
    _refused(p, "digest key id 'ABC' is not 32 lowercase hex digits")
    p = _capture(keydir, SAMPLE, tmp_path / "M", stdin=b"")
    _refused(p, "--digest-key is required (only a records: source goes without it)")


def test_sigint_while_the_pipe_is_quiet_seals_what_arrived_and_stops(tmp_path, keydir):
    """A device's pipe that stays open without data must not keep Ctrl-C waiting (it is read with
    a poll timeout): the records that arrived are sealed, the run ends as interrupted."""
    led = tmp_path / "I"
    args = [
        sys.executable,
        "-c",
        "from ledgertool.cli.app import main; main()",
        "capture",
        "records:-",
        "--ledger",
        str(led),
        "--signing-key",
        str(keydir / "signing.key"),
        "--digest-key-id",
        _key_id(keydir),
        "--strip",
        "l3",
        "--leaf-records",
        "64",
        "--json",
    ]
    p = subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        p.stdin.write(_records(keydir)[: 100 * 48])
        p.stdin.flush()
        seg = layout.open_segment_path(led, "link0", 0)
        deadline = time.monotonic() + 60
        held = 256 + (4 + 64 * 48 + 32) + (4 + 36 * 48 + 32)
        # v2 open segment: 256-byte header, then blocks aligned to the 64-record leaves (u32 count,
        # the records, a 32-byte MAC): one leaf, then the 36 records of the open leaf
        while not (
            # zero-padded to 4 KiB under O_DIRECT, exact through the page cache
            seg.exists() and seg.stat().st_size in (held, -(-held // 4096) * 4096)
        ):
            assert time.monotonic() < deadline and p.poll() is None, (
                p.stderr.read() if p.poll() else "timeout"
            )
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=30)  # stdin is still open: only the signal ends the run
        rep = json.loads(p.stdout.read())
    finally:
        if p.poll() is None:
            p.kill()
        p.stdin.close()
    assert rc == 0
    assert (rep["frames"], rep["interrupted"], rep["stop_reason"], rep["segments"]) == (
        100,
        True,
        "signal",
        [0],
    )
    v = cli("verify", led, "--trust", keydir / "verifier.pub")
    assert v.returncode == 0 and "100 records" in v.stdout, v.stdout + v.stderr


# ---- the reader on its own: blocks, short reads -------------------------------------------------


def test_reader_joins_records_cut_by_short_pipe_reads_and_chunk_boundaries():
    """A pipe that holds a record and a half: the whole one comes out, the half waits for its rest;
    then more than one read block: every record once, in order, in blocks, not one per call."""
    alg = get_algorithm(ALG)
    n = CHUNK_BYTES // 48 + 1000
    arr = np.zeros(n, dtype=record_dtype(16))
    arr["seq"] = np.arange(n, dtype=np.uint64)
    arr["cap_len"] = 60
    data = arr.tobytes()
    rfd, wfd = os.pipe()
    w = os.fdopen(wfd, "wb", buffering=0)
    # a named pipe, as a device's FIFO
    reader = RecordsReader(f"records:/proc/self/fd/{rfd}", alg, "link0")
    feeder = threading.Thread(target=lambda: (w.write(data[96 + 22 :]), w.close()))
    try:
        w.write(data[:70])  # record 0 and 22 bytes of record 1: a short read ends inside a record
        recs, k, nbytes = reader.fill(0)
        assert (k, bytes(recs), nbytes) == (1, data[:48], 60)
        w.write(data[70 : 96 + 22])  # the rest of record 1, and 22 bytes of record 2
        recs, k, _ = reader.fill(1)
        assert (k, bytes(recs)) == (1, data[48:96])
        feeder.start()
        got, seq, calls, total = bytearray(data[:96]), 2, 0, 120
        while True:
            recs, k, nbytes = reader.fill(seq, 100_000)
            if k == 0:
                if reader.ended:
                    break
                continue  # the pipe was quiet for POLL_S
            got += recs
            seq, calls, total = seq + k, calls + 1, total + nbytes
        assert reader.ended and seq == n and bytes(got) == data and total == 60 * n
        assert calls < n // 100  # whole blocks per call
    finally:
        if feeder.is_alive():
            feeder.join()
        reader.close()
        os.close(rfd)


def test_reader_refuses_a_missing_file_a_directory_and_no_name(tmp_path):
    alg = get_algorithm(ALG)
    with pytest.raises(LedgerFormatError, match="file not found"):
        RecordsReader(f"records:{tmp_path / 'nope'}", alg, "link0")
    with pytest.raises(LedgerFormatError, match="is a directory"):
        RecordsReader(f"records:{tmp_path}", alg, "link0")
    with pytest.raises(LedgerFormatError, match="no file named"):
        RecordsReader("records:", alg, "link0")


def test_recompute_refuses_a_records_source(tmp_path, keydir):
    f = tmp_path / "x.records"
    f.write_bytes(_records(keydir))
    r = cli(
        "recompute",
        f"records:{f}",
        "--digest-key",
        keydir / "digest.key",
        "--algorithm",
        ALG,
        "--strip",
        "l3",
        "--out",
        tmp_path / "o.parquet",
    )
    assert (
        r.returncode == 2
        and f"records:{f}: holds records computed elsewhere, not frames" in r.stderr
    ), r.stderr
    assert not (tmp_path / "o.parquet").exists()


def test_records_from_a_terminal_are_refused_not_waited_for(tmp_path, keydir):
    master, slave = pty.openpty()
    try:
        args = [
            sys.executable,
            "-c",
            "from ledgertool.cli.app import main; main()",
            "capture",
            "records:-",
            "--ledger",
            str(tmp_path / "T"),
            "--signing-key",
            str(keydir / "signing.key"),
            "--digest-key-id",
            _key_id(keydir),
        ]
        p = subprocess.run(args, stdin=slave, capture_output=True)
    finally:
        os.close(slave)
        os.close(master)
    assert (
        p.returncode == 2
        and b"standard input is a terminal: records:- reads records from a pipe" in p.stderr
    )
    assert not (tmp_path / "T").exists()


def test_workers_for_a_records_source_says_it_is_ignored(tmp_path, keydir):
    """--workers means digest threads; a records: source digests nothing, so it says so on stderr
    and in the report instead of taking the option silently."""
    f = tmp_path / "r.records"
    f.write_bytes(_records(keydir))
    p = _capture(
        keydir,
        f"records:{f}",
        tmp_path / "L",
        "--strip",
        "l3",
        "--digest-key-id",
        _key_id(keydir),
        "--workers",
        "4",
        "--json",
    )
    assert p.returncode == 0, p.stderr
    note = (
        f"4 workers asked for, none used: a records:{f} source is not digested here (its "
        "records were computed elsewhere)"
    )
    assert p.stderr.decode().splitlines() == [f"warning: {note}"]
    rep = json.loads(p.stdout)
    assert rep["frames"] == 294 and rep["warnings"] == [note]
    p = _capture(
        keydir,
        f"records:{f}",
        tmp_path / "L2",
        "--strip",
        "l3",
        "--digest-key-id",
        _key_id(keydir),
        "--json",
    )
    assert p.returncode == 0 and p.stderr == b"" and json.loads(p.stdout)["warnings"] == [], (
        p.stderr
    )
