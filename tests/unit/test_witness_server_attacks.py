"""`witness serve` against a hostile network (docs/threat-model.md): the server on 127.0.0.1 in a
thread, spoken to over raw sockets. Oversized and framing-less bodies, slow and idle clients, bad
URLs and methods, malformed notes, rollbacks, forks, bad or huge proofs and racing requests each get
one answer from the spec's statuses (or a closed connection), never a hang, a traceback or two
different roots cosigned for one size."""

from __future__ import annotations

import hashlib
import socket
import threading
import time

import pytest
from conftest import load_keys

from ledgertool.seal import merkle
from ledgertool.seal.checkpoint import Checkpoint, sign_checkpoint, verifier_key
from ledgertool.seal.witness import ED25519_NOTE, WitnessSigner, parse_vkey, request_body
from ledgertool.witness import server
from ledgertool.witness.server import MAX_BODY, Witness, make_server

LEDGER_ID = "0123456789abcdef0123456789abcdef"
ORIGIN = f"ledgertool/{LEDGER_ID}/link0"
SIGNER = WitnessSigner("witness.test/w1", hashlib.sha256(b"w1").digest())


def _leaves(n: int, fork: bytes = b"") -> list[bytes]:
    return [merkle.leaf_hash(hashlib.sha256(fork + b"%d" % i).digest()) for i in range(n)]


class Served:
    """A witness serving in a thread of this process; `port`, `note(size)`, `stop()`."""

    def __init__(self, keydir, state, **opts):
        _, self.sk, trust = load_keys(keydir)
        key = parse_vkey(str(verifier_key(LEDGER_ID, trust)), "vkey", ED25519_NOTE)
        self.witness = Witness(SIGNER, {ORIGIN: [key]}, state)
        self.srv = make_server(self.witness, "127.0.0.1", 0, **opts)
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def note(self, size: int, fork: bytes = b"", origin: str = ORIGIN) -> bytes:
        root = merkle.root_from_leaf_hashes(_leaves(size, fork))
        return sign_checkpoint(Checkpoint(origin, size, root, size * 10), self.sk)

    def stop(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()
        self.witness.close()


@pytest.fixture()
def served(keydir, tmp_path):
    s = Served(keydir, tmp_path / "state")
    yield s
    s.stop()


def _exchange(port: int, data: bytes, *, timeout: float = 4.0) -> bytes:
    """Send `data` on a new connection, half-close it and read until the server closes (what it
    answered before closing early, when it does not read all of `data`)."""
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered and closed before taking every byte
            pass
        try:
            while chunk := s.recv(65536):
                out += chunk
        except ConnectionResetError:
            pass
    return out


def _post(body: bytes, path: str = "/add-checkpoint", extra: str = "") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: w\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def _responses(raw: bytes) -> list[int]:
    """The status of each HTTP response in `raw` (several on one kept-alive connection)."""
    return [int(line.split(b" ")[1]) for line in raw.split(b"\r\n") if line.startswith(b"HTTP/")]


def _body(response: bytes) -> bytes:
    return response.partition(b"\r\n\r\n")[2]


# ---- size and framing ----------------------------------------------------------------------


def test_a_body_larger_than_any_request_is_refused_before_it_is_read(served):
    # the header alone claims a gigabyte: 413 at once, without waiting for (or reading) a byte
    t0 = time.monotonic()
    head = b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: 1000000000\r\n\r\n"
    raw = _exchange(served.port, head)
    assert _responses(raw) == [413] and time.monotonic() - t0 < 2
    raw = _exchange(served.port, _post(b"x" * (MAX_BODY + 1)))
    assert _responses(raw) == [413]
    assert served.witness.held == {}


def test_a_refused_body_is_not_read_as_the_next_request(served):
    # an oversized body that holds a whole valid add-checkpoint request: the server must not
    # take it for a second request on the kept-alive connection (it would cosign it)
    inner = _post(request_body(0, [], served.note(3)))
    body = inner + b"x" * (MAX_BODY + 1 - len(inner))
    raw = _exchange(served.port, _post(body))
    assert 200 not in _responses(raw)
    assert served.witness.held == {}
    assert not list(served.witness.state_dir.glob("*.checkpoint"))


@pytest.mark.parametrize(
    "head",
    [
        b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\n\r\n",
        b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: -5\r\n\r\n",
        b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: 1e3\r\n\r\n",
        b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
    ],
    ids=["none", "negative", "not-a-number", "5000-digits"],
)
def test_a_body_without_a_usable_content_length_is_refused(served, head):
    raw = _exchange(served.port, head + b"old 0\n\n")
    assert _responses(raw) and _responses(raw)[0] in (411, 413), raw
    assert served.witness.held == {}


def test_a_chunked_body_is_refused_not_misread(served):
    body = request_body(0, [], served.note(3))
    chunked = b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"
    head = b"POST /add-checkpoint HTTP/1.1\r\nHost: w\r\nTransfer-Encoding: chunked\r\n\r\n"
    raw = _exchange(served.port, head + chunked)
    assert _responses(raw) == [411]
    assert served.witness.held == {}


# ---- slow and idle clients -----------------------------------------------------------------


def test_a_slow_client_does_not_hold_up_another(keydir, tmp_path):
    s = Served(keydir, tmp_path / "state", request_s=1.5)
    try:
        slow = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        slow.sendall(b"POST /add-checkpoint HTTP/1.1\r\nContent-Length: 100\r\n\r\nold")
        t0 = time.monotonic()
        raw = _exchange(s.port, _post(request_body(0, [], s.note(3))))
        assert _responses(raw) == [200] and time.monotonic() - t0 < 1.0
        # the slow client, one byte a second, is cut off once its request takes too long
        t0 = time.monotonic()
        closed = False
        for _ in range(5):
            try:
                slow.sendall(b" ")
                slow.settimeout(1.0)
                if slow.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except OSError:
                closed = True
                break
        assert closed and time.monotonic() - t0 < 4.0
        slow.close()
    finally:
        s.stop()


def test_an_idle_connection_is_closed(keydir, tmp_path):
    s = Served(keydir, tmp_path / "state", request_s=1.0)
    try:
        idle = socket.create_connection(("127.0.0.1", s.port), timeout=4)
        t0 = time.monotonic()
        assert idle.recv(1) == b""  # closed by the server, not by our 4 s timeout
        assert time.monotonic() - t0 < 3.0
        idle.close()
    finally:
        s.stop()


# ---- URLs, methods, bytes ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/../add-checkpoint",
        "/add-checkpoint/../../etc/passwd",
        "/%2e%2e/state",
        "/add-checkpoint?x=1",
        "/state/" + hashlib.sha256(ORIGIN.encode()).hexdigest() + ".checkpoint",
        "*",
    ],
)
def test_other_paths_are_not_found(served, path):
    raw = _exchange(served.port, _post(request_body(0, [], served.note(3)), path=path))
    assert _responses(raw) == [404] and _body(raw) == b"not found\n"
    assert served.witness.held == {}


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH"])
def test_other_methods_are_refused(served, method):
    raw = _exchange(served.port, f"{method} /add-checkpoint HTTP/1.1\r\nHost: w\r\n\r\n".encode())
    assert _responses(raw) and _responses(raw)[0] in (405, 501), raw
    assert served.witness.held == {}


def test_non_utf8_and_binary_bytes_are_a_400(served):
    note = served.note(3)
    for body in (
        b"\xff\xfe\x00old 0\n\n" + note,
        b"old 0\n\xc3\x28\n\n" + note,
        b"old 0\n\n" + note.replace(b"link0", b"link\xff"),
        b"old 0\n\n" + note[:10] + b"\x00" + note[11:],
        bytes(range(256)),
    ):
        raw = _exchange(served.port, _post(body))
        assert _responses(raw) == [400], (body, raw)
    raw = _exchange(served.port, b"P\xffST /add-checkpoint HTTP/1.1\r\n\r\n")
    assert _responses(raw) and _responses(raw)[0] in (400, 501)
    assert served.witness.held == {}


# ---- notes, origins, rollbacks, forks, proofs ----------------------------------------------


def test_truncated_and_malformed_notes_are_a_400(served):
    note = served.note(3)
    body = request_body(0, [], note)
    for cut in range(0, len(body), 7):
        raw = _exchange(served.port, _post(body[:cut]))
        assert _responses(raw) in ([400], [403]), (cut, raw)  # a cut signature fails to verify
    assert served.witness.held == {}
    assert _responses(_exchange(served.port, _post(body))) == [200]


def test_an_unknown_origin_is_a_404(served):
    other = f"ledgertool/{'f' * 32}/link0"
    raw = _exchange(served.port, _post(request_body(0, [], served.note(3, origin=other))))
    assert _responses(raw) == [404] and _body(raw) == f"unknown log {other}\n".encode()
    assert served.witness.held == {}


def test_a_smaller_tree_and_another_root_of_the_same_size_are_never_cosigned(served):
    assert _responses(_exchange(served.port, _post(request_body(0, [], served.note(5))))) == [200]
    held = served.witness.held[ORIGIN]
    # backwards: a smaller tree with every old size an attacker might claim
    for old in (0, 3, 4, 5):
        raw = _exchange(served.port, _post(request_body(old, [], served.note(4))))
        assert _responses(raw) == [409 if old < 5 else 400], (old, raw)
    # the same size, another root (with and without a proof)
    fork = served.note(5, fork=b"fork")
    for proof in ([], [b"\x00" * 32]):
        raw = _exchange(served.port, _post(request_body(5, proof, fork)))
        assert _responses(raw) == [409] and b"fork" in _body(raw), raw
    assert served.witness.held[ORIGIN] == held
    files = list((served.witness.state_dir).iterdir())
    assert [f.read_bytes() for f in files if f.suffix == ".checkpoint"] == [held.note]


def test_a_wrong_or_huge_consistency_proof_is_refused(served):
    assert _responses(_exchange(served.port, _post(request_body(0, [], served.note(5))))) == [200]
    leaves = _leaves(9)
    good = merkle.consistency_proof(5, leaves)
    note9 = served.note(9)
    for bad in (
        good[:-1],
        good + [b"\x00" * 32],
        [bytes(32)] * len(good),
        good[::-1],
        merkle.consistency_proof(5, _leaves(9, b"fork")),
    ):
        raw = _exchange(served.port, _post(request_body(5, bad, note9)))
        assert _responses(raw) == [422], raw
    huge = b"old 5\n" + b"".join([b"A" * 43 + b"=\n"] * 64) + b"\n" + note9
    assert _responses(_exchange(served.port, _post(huge))) == [400]
    # a tree size past 2^64 with a proof: refused, not an exception
    big = sign_checkpoint(Checkpoint(ORIGIN, 10**20 - 1, bytes(32), 1), served.sk)
    raw = _exchange(served.port, _post(request_body(5, good, big)))
    assert _responses(raw) == [422]
    assert served.witness.held[ORIGIN].size == 5
    assert _responses(_exchange(served.port, _post(request_body(5, good, note9)))) == [200]


# ---- races -----------------------------------------------------------------------------------


def test_racing_requests_for_one_size_cosign_one_root(served, monkeypatch):
    # each decision takes a while (as a slow fsync would): two requests for size 3 with
    # different roots, sent at once, must not both be checked against "nothing held"
    real = server.decide

    def slow(body, logs, held, signer, now):
        snapshot = dict(held)
        time.sleep(0.3)
        return real(body, logs, snapshot, signer, now)

    monkeypatch.setattr(server, "decide", slow)
    notes = [served.note(3), served.note(3, fork=b"fork")]
    out: list[bytes] = [b"", b""]

    def send(i: int) -> None:
        out[i] = _exchange(served.port, _post(request_body(0, [], notes[i])))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(_responses(o)[0] for o in out)
    assert statuses == [200, 409], out
    winner = out[0] if _responses(out[0]) == [200] else out[1]
    assert served.witness.held[ORIGIN].note == notes[out.index(winner)]


def test_a_state_that_cannot_be_written_is_a_500_and_nothing_is_cosigned(
    served, monkeypatch, capsys
):
    from ledgertool.errors import StorageError

    def full(directory, origin, held):
        raise StorageError(f"{directory}: cannot write witness state: No space left on device")

    monkeypatch.setattr(server, "save_state", full)
    raw = _exchange(served.port, _post(request_body(0, [], served.note(3))))
    assert _responses(raw) == [500]
    assert (
        _body(raw)
        == (
            f"{served.witness.state_dir}: cannot write witness state: No space left on device\n"
        ).encode()
    )
    assert served.witness.held == {}
    assert "Traceback" not in capsys.readouterr().err


def test_connections_beyond_the_cap_are_answered_503_at_once_and_the_slots_come_back(
    keydir, tmp_path
):
    s = Served(keydir, tmp_path / "state", request_s=10.0, max_connections=2)
    try:
        idle = [socket.create_connection(("127.0.0.1", s.port), timeout=4) for _ in range(2)]
        time.sleep(0.2)  # both accepted and held by their threads
        t0 = time.monotonic()
        third = _exchange(s.port, b"GET /add-checkpoint HTTP/1.1\r\nHost: w\r\n\r\n")
        assert third.startswith(b"HTTP/1.1 503 "), third
        assert time.monotonic() - t0 < 2.0  # not after the 10 s an idle connection may take
        idle[0].close()  # its thread sees the end and gives its slot back
        deadline = time.monotonic() + 4
        while True:
            got = _exchange(s.port, b"GET /add-checkpoint HTTP/1.1\r\nHost: w\r\n\r\n")
            if not got.startswith(b"HTTP/1.1 503 ") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert got.startswith(b"HTTP/1.0 405 ") or got.startswith(b"HTTP/1.1 405 "), got
        idle[1].close()
    finally:
        s.stop()
