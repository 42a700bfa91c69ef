"""The tlog-witness on loopback (a threaded server in this process): cosigning a growing link
with consistency proofs, refusing forks and rollbacks with the spec's status codes, keeping its
state across restarts; cosignatures checked by an implementation written from
c2sp.org/tlog-cosignature here (Ed25519 over the spec's message, the spec's key id), and `verify
--witness-key` requiring k of n."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import threading
import urllib.error
import urllib.request

import pytest
from conftest import SAMPLES, cli, load_keys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledgertool.capture.run import capture_file
from ledgertool.errors import LedgerFormatError
from ledgertool.seal.checkpoint import Checkpoint, parse_note, sign_checkpoint, verifier_key
from ledgertool.seal.witness import (
    ED25519_NOTE,
    NoteKey,
    WitnessSigner,
    cosigned_message,
    parse_signer,
    parse_vkey,
    request_body,
)
from ledgertool.witness.server import Witness, make_server

SAMPLE = SAMPLES / "sample.pcapng"


@pytest.fixture()
def ledger(tmp_path, built_ledger):
    return built_ledger(SAMPLE, segment_records=100, leaf_records=8).copy_to(tmp_path / "L")


class Running:
    """A witness serving on 127.0.0.1 in a thread; `url`, `vkey`, `stop()`."""

    def __init__(self, signer: WitnessSigner, logs: dict, state):
        self.witness = Witness(signer, logs, state)
        self.srv = make_server(self.witness, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.vkey = str(signer.public)
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()
        self.witness.close()


def _log_key(ledger, keydir) -> tuple[str, NoteKey]:
    _, _, trust = load_keys(keydir)
    ledger_id = json.loads((ledger / "ledger.json").read_text())["ledger_id"]
    vk = str(verifier_key(ledger_id, trust))
    return f"ledgertool/{ledger_id}/link0", parse_vkey(vk, "vkey", ED25519_NOTE)


@pytest.fixture()
def witness(ledger, keydir, tmp_path):
    origin, key = _log_key(ledger, keydir)
    signer = WitnessSigner("witness.test/w1", hashlib.sha256(b"w1").digest())
    w = Running(signer, {origin: [key]}, tmp_path / "state")
    yield w
    w.stop()


def _post(url: str, body: bytes) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url + "/add-checkpoint", data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


def _spec_cosignature_ok(note: bytes, vkey: str, now: int) -> list[int]:
    """Timestamps of the valid cosignatures by `vkey` on the note, checked from the spec: key id
    SHA-256(name || 0x0A || 0x04 || key)[:4], signature = key id || u64be time || Ed25519 over
    "cosignature/v1\\ntime <t>\\n" || note text."""
    name, kid_hex, b64 = vkey.split("+", 2)
    raw = base64.b64decode(b64)
    assert raw[0] == 0x04 and len(raw) == 33
    kid = hashlib.sha256(name.encode() + b"\n\x04" + raw[1:]).digest()[:4]
    assert kid.hex() == kid_hex
    text, _, sigs = note.partition(b"\n\n")
    text += b"\n"
    out = []
    for line in sigs.decode().splitlines():
        dash, n, sig = line.split(" ")
        assert dash == "\u2014"
        sig = base64.b64decode(sig)
        if n != name or sig[:4] != kid:
            continue
        t = int.from_bytes(sig[4:12], "big")
        msg = b"cosignature/v1\ntime " + str(t).encode() + b"\n" + text
        Ed25519PublicKey.from_public_bytes(raw[1:]).verify(sig[12:], msg)  # raises if bad
        assert t <= now + 5
        out.append(t)
    return out


def test_cosigns_a_growing_link_and_the_cosignature_checks_from_the_spec(
    ledger, keydir, witness, tmp_path
):
    import time

    dk, sk, _ = load_keys(keydir)
    cp1 = tmp_path / "cp1"
    r = cli("checkpoint", ledger, "--out", cp1, "--witness", f"{witness.url}={witness.vkey}")
    assert r.returncode == 0, r.stderr
    assert "cosigned by witness.test/w1" in r.stdout
    assert len(_spec_cosignature_ok(cp1.read_bytes(), witness.vkey, int(time.time()))) == 1
    assert parse_note(cp1.read_bytes()).checkpoint.size == 3
    capture_file(
        SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=sk, segment_records=100
    )
    cp2 = tmp_path / "cp2"
    r = cli(
        "checkpoint", ledger, "--out", cp2, "--witness", f"{witness.url}={witness.vkey}", "--json"
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cosigned_by"] == ["witness.test/w1"]
    assert len(_spec_cosignature_ok(cp2.read_bytes(), witness.vkey, int(time.time()))) == 1
    held = witness.witness.held[parse_note(cp2.read_bytes()).checkpoint.origin]
    assert held.size == 6 and held.root == parse_note(cp2.read_bytes()).checkpoint.root
    # the cosigned note still verifies as the ledger's checkpoint, with and without the witness
    pub = keydir / "verifier.pub"
    r = cli("verify", ledger, "--trust", pub, "--checkpoint", cp2, "--witness-key", witness.vkey)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_rollback_and_a_fork_are_refused(ledger, keydir, witness, tmp_path):
    dk, sk, _ = load_keys(keydir)
    fork = tmp_path / "fork"
    shutil.copytree(ledger, fork)
    cp1 = tmp_path / "cp1"
    assert cli("checkpoint", ledger, "--out", cp1).returncode == 0
    capture_file(
        SAMPLES / "sample.pcap", ledger, digest_key=dk, signing_key=sk, segment_records=100
    )
    cp2 = tmp_path / "cp2"
    wit = f"{witness.url}={witness.vkey}"
    assert cli("checkpoint", ledger, "--out", cp2, "--witness", wit).returncode == 0
    # rollback: the older checkpoint after the newer one
    r = cli("checkpoint", ledger, "--out", tmp_path / "again", "--witness", wit)
    assert r.returncode == 0  # the same size and root again is fine
    status, ctype, body = _post(witness.url, request_body(0, [], cp1.read_bytes()))
    assert (status, ctype, body) == (409, "text/x.tlog.size", b"6\n")
    status, _, _ = _post(witness.url, request_body(6, [], cp1.read_bytes()))
    assert status == 400  # old size larger than the checkpoint's
    old = tmp_path / "old"
    shutil.copy(cp1, old)
    from ledgertool.witness.client import WitnessSpec, cosign

    spec = WitnessSpec(witness.url, parse_vkey(witness.vkey, "w", 0x04))
    with pytest.raises(Exception, match="rollback"):
        cosign(ledger, old.read_bytes(), spec)
    # fork, same size: another history of 6 segments signed by the log's key
    capture_file(SAMPLES / "sample.pcap", fork, digest_key=dk, signing_key=sk, segment_records=50)
    fnote = (fork / "checkpoint").read_bytes()
    fcp = parse_note(fnote).checkpoint
    assert fcp.size > 6
    same = sign_checkpoint(
        Checkpoint(fcp.origin, 6, hashlib.sha256(b"other").digest(), 600, None, fcp.time), sk
    )
    status, _, body = _post(witness.url, request_body(6, [], same))
    assert status == 409 and b"fork" in body
    # fork, larger: the fork's own consistency proof from 6 does not reach the witness's root
    (tmp_path / "fcp").write_bytes(fnote)
    r = cli("checkpoint", fork, "--out", tmp_path / "fcp2", "--witness", wit)
    assert r.returncode == 1 and "422" in r.stderr, r.stderr
    assert witness.witness.held[fcp.origin].size == 6  # nothing was cosigned or stored


def test_status_codes_of_the_spec(ledger, keydir, other_keydir, witness, tmp_path):
    _, osk, _ = load_keys(other_keydir)
    note = (ledger / "checkpoint").read_bytes()
    cp = parse_note(note).checkpoint
    assert _post(witness.url, b"nonsense")[0] == 400
    assert _post(witness.url, b"old 0\nnot-base64\n\n" + note)[0] == 400
    unknown = sign_checkpoint(
        Checkpoint(f"ledgertool/{'0' * 32}/link0", cp.size, cp.root, cp.records), osk
    )
    assert _post(witness.url, request_body(0, [], unknown))[0] == 404
    assert _post(witness.url, request_body(0, [], sign_checkpoint(cp, osk)))[0] == 403
    assert _post(witness.url, request_body(0, [b"\x00" * 32], note))[0] == 422
    status, ctype, body = _post(witness.url, request_body(0, [], note))
    assert status == 200 and body.startswith("\u2014 witness.test/w1 ".encode())
    assert _post(witness.url, request_body(1, [b"\x00" * 32], note))[0] == 409


def test_state_survives_a_restart_and_a_tampered_state_stops_the_witness(
    ledger, keydir, witness, tmp_path
):
    note = (ledger / "checkpoint").read_bytes()
    assert _post(witness.url, request_body(0, [], note))[0] == 200
    witness.stop()
    origin, key = _log_key(ledger, keydir)
    again = Witness(
        WitnessSigner("witness.test/w1", b"k" * 32), {origin: [key]}, tmp_path / "state"
    )
    assert again.held[origin].size == 3
    assert again.add_checkpoint(request_body(0, [], note)).status == 409
    again.close()
    (state,) = (tmp_path / "state").glob("*.checkpoint")
    state.write_bytes(state.read_bytes().replace(b"\n3\n", b"\n2\n"))
    with pytest.raises(LedgerFormatError, match="cannot trust"):
        Witness(WitnessSigner("w", b"k" * 32), {origin: [key]}, tmp_path / "state")


def test_verify_requires_k_of_n_cosignatures(ledger, keydir, tmp_path):
    origin, key = _log_key(ledger, keydir)
    ws = [
        Running(
            WitnessSigner(f"w{i}.test", hashlib.sha256(b"%d" % i).digest()),
            {origin: [key]},
            tmp_path / f"s{i}",
        )
        for i in range(3)
    ]
    try:
        cp = tmp_path / "cp"
        args = [a for w in ws[:2] for a in ("--witness", f"{w.url}={w.vkey}")]
        r = cli("checkpoint", ledger, "--out", cp, *args)
        assert r.returncode == 0, r.stderr
        pub = keydir / "verifier.pub"
        keys = [a for w in ws for a in ("--witness-key", w.vkey)]
        base = ("verify", ledger, "--trust", pub, "--checkpoint", cp)
        assert cli(*base, *keys, "--witness-threshold", "2").returncode == 0
        r = cli(*base, *keys, "--json")  # default: every key given, 3
        rep = json.loads(r.stdout)
        assert r.returncode == 1 and [p["kind"] for p in rep["problems"]] == [
            "checkpoint_unwitnessed"
        ]
        assert rep["checkpoint"]["witnesses"]["cosigned_by"] == ["w0.test", "w1.test"]
        # the finding names the file it read, and counts in words that agree
        assert rep["problems"][0]["detail"].startswith(
            f"{cp}: cosigned by 2 of the 3 witnesses given (w0.test, w1.test), 3 required"
        )
        r = cli(*base, "--witness-key", ws[0].vkey, "--witness-threshold", "2")
        assert r.returncode == 2
        assert "witness threshold 2: give 1 to 1, the number of witness keys given" in r.stderr
        # a cosignature changed in one byte no longer counts
        text = cp.read_text().splitlines(keepends=True)
        i = next(n for n, ln in enumerate(text) if ln.startswith("\u2014 w1.test "))
        raw = bytearray(base64.b64decode(text[i].split(" ")[2]))
        raw[-1] ^= 1
        text[i] = "\u2014 w1.test " + base64.b64encode(bytes(raw)).decode() + "\n"
        bad = tmp_path / "bad"
        bad.write_text("".join(text))
        r = cli(
            "verify",
            ledger,
            "--trust",
            pub,
            "--checkpoint",
            bad,
            *keys,
            "--witness-threshold",
            "2",
            "--json",
        )
        rep = json.loads(r.stdout)
        assert r.returncode == 1 and rep["checkpoint"]["witnesses"]["failed"] == ["w1.test"]
        r = cli("verify", ledger, "--trust", pub, "--witness-key", ws[0].vkey)
        assert r.returncode == 2 and "--checkpoint" in r.stderr
        r = cli(*base, "--witness-key", "nonsense")
        assert r.returncode == 2 and "vkey" in r.stderr
    finally:
        for w in ws:
            w.stop()


def test_the_spec_example_and_key_encodings():
    # c2sp.org/tlog-cosignature's example: the signed message and the signature line's layout
    text = b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    assert cosigned_message(text, 1679315147) == (
        b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
        b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    )
    example = (
        "jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0"
        "xUe+mbIUBkBIfZ+qnA=="
    )
    raw = base64.b64decode(example)
    assert len(raw) == 4 + 8 + 64 and int.from_bytes(raw[4:12], "big") == 1679315147
    s = WitnessSigner("w.test/x", bytes(range(32)))
    assert parse_signer(s.encode(), "k") == s
    assert parse_vkey(str(s.public), "v", 0x04) == s.public
    line = s.cosign(text, 1679315147)
    assert int.from_bytes(base64.b64decode(line.split(" ")[2])[4:12], "big") == 1679315147
    with pytest.raises(Exception, match="type 0x04"):
        parse_vkey(str(NoteKey("w", 0x01, s.public.public_key)), "v", 0x04)


def test_any_request_body_gets_a_spec_status_and_never_moves_the_witness_back(ledger, keydir):
    """Arbitrary bodies, and real checkpoints with arbitrary old sizes and proofs: the answer is
    one of the spec's statuses, a 200 only for a checkpoint at least as large as the one held and
    consistent with it."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from ledgertool.seal.witness import Held, decide

    origin, key = _log_key(ledger, keydir)
    note = (ledger / "checkpoint").read_bytes()
    cp = parse_note(note).checkpoint
    signer = WitnessSigner("w.test", b"s" * 32)
    held = {origin: Held(2, hashlib.sha256(b"held").digest(), b"")}

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.one_of(
            st.binary(max_size=300),
            st.builds(
                lambda old, proof: request_body(old, proof, note),
                st.integers(0, 10),
                st.lists(st.binary(min_size=32, max_size=32), max_size=4),
            ),
        )
    )
    def check(body):
        d = decide(body, {origin: [key]}, dict(held), signer, 1_700_000_000)
        assert d.status in (200, 400, 403, 404, 409, 422)
        if d.status == 409 and d.content_type == "text/x.tlog.size":
            assert d.body == b"2\n"
        # the held tree (size 2) is not a prefix of the ledger's: nothing is ever cosigned
        assert d.status != 200 and d.new is None
        assert cp.size == 3

    check()
