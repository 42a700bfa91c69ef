"""The witness's HTTP server (c2sp.org/tlog-witness add-checkpoint), standard library only.

One lock makes "check the old size against the held checkpoint" and "persist the new one"
atomic, as the spec requires (a request for size N checked before one for N + K and persisted
after it would roll the witness back)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..seal.checkpoint import MAX_NOTE_BYTES
from ..seal.witness import Held, NoteKey, WitnessSigner, decide
from .state import load_state, save_state

MAX_BODY = MAX_NOTE_BYTES + 64 * 50


class Witness:
    """The witness's key, its logs (origin -> trusted log keys) and what it holds per log."""

    def __init__(self, signer: WitnessSigner, logs: dict[str, list[NoteKey]], state_dir: Path):
        self.signer, self.logs, self.state_dir = signer, logs, Path(state_dir)
        self.held: dict[str, Held] = load_state(self.state_dir, logs)
        self.lock = threading.Lock()

    def add_checkpoint(self, body: bytes):
        with self.lock:
            d = decide(body, self.logs, self.held, self.signer, int(time.time()))
            if d.new is not None:
                origin = _origin(d.new.note)
                save_state(self.state_dir, origin, d.new)  # persisted before the answer
                self.held[origin] = d.new
            return d


def _origin(note: bytes) -> str:
    return note.split(b"\n", 1)[0].decode()


class _Handler(BaseHTTPRequestHandler):
    server_version = "ledgertool-witness"
    protocol_version = "HTTP/1.1"
    witness: Witness

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.rstrip("/") != "/add-checkpoint":
            self._send(404, b"not found\n")
            return
        try:
            n = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._send(411, b"Content-Length required\n")
            return
        if not 0 <= n <= MAX_BODY:
            self._send(413, b"request too large\n")
            return
        d = self.witness.add_checkpoint(self.rfile.read(n))
        self._send(d.status, d.body, d.content_type)

    def do_GET(self) -> None:  # noqa: N802
        self._send(405, b"add-checkpoint takes POST\n")


def make_server(witness: Witness, host: str, port: int) -> ThreadingHTTPServer:
    """A server bound to (host, port) (port 0: any free one; `server_address` says which)."""
    handler = type("WitnessHandler", (_Handler,), {"witness": witness})
    srv = ThreadingHTTPServer((host, port), handler)
    srv.daemon_threads = True
    return srv
