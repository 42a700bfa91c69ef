"""The witness's HTTP server (c2sp.org/tlog-witness add-checkpoint), standard library only.

One lock makes "check the old size against the held checkpoint" and "persist the new one"
atomic, as the spec requires (a request for size N checked before one for N + K and persisted
after it would roll the witness back)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..errors import LedgerError
from ..seal.checkpoint import MAX_NOTE_BYTES
from ..seal.witness import Held, NoteKey, WitnessSigner, decide
from .state import load_state, lock_state, save_state

MAX_BODY = MAX_NOTE_BYTES + 64 * 50
# a whole request (headers and body) within REQUEST_S, each read within it too: a client that
# trickles bytes or goes quiet holds its thread and socket no longer
REQUEST_S = 30.0
# connections served at once: beyond them a connection is answered 503 and closed at once, so a
# flood of connections costs no thread each (a witness serves a few logs, not the public)
MAX_CONNECTIONS = 64
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class Witness:
    """The witness's key, its logs (origin -> trusted log keys) and what it holds per log."""

    def __init__(self, signer: WitnessSigner, logs: dict[str, list[NoteKey]], state_dir: Path):
        self.signer, self.logs, self.state_dir = signer, logs, Path(state_dir)
        # the state's lock before its contents: a second witness on the same directory would
        # hold its own copy and could cosign another root for a size this one cosigned
        self._lock_fd: int | None = lock_state(self.state_dir)
        try:
            self.held: dict[str, Held] = load_state(self.state_dir, logs)
        except BaseException:
            self.close()
            raise
        self.lock = threading.Lock()

    def close(self) -> None:
        """Release the state directory (another witness may serve from it)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

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

    request_s: float = REQUEST_S

    def handle_one_request(self) -> None:
        # the socket timeout bounds each read; the timer bounds the whole request, which a
        # client sending one byte a second would otherwise stretch for hours
        timer = threading.Timer(self.request_s, self._cut)
        timer.daemon = True
        timer.start()
        try:
            super().handle_one_request()
        finally:
            timer.cancel()

    def _cut(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send(
        self,
        status: int,
        body: bytes,
        ctype: str = "text/plain; charset=utf-8",
        *,
        close: bool = False,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if close:
            # the request's body was not read: on a kept-alive connection its bytes would be
            # parsed as the next request (a request hidden in a refused body would be served)
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.rstrip("/") != "/add-checkpoint":
            self._send(404, b"not found\n", close=True)
            return
        try:
            n = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._send(411, b"Content-Length required\n", close=True)
            return
        if not 0 <= n <= MAX_BODY:
            self._send(413, b"request too large\n", close=True)
            return
        body = self.rfile.read(n)
        if len(body) < n:  # the client ended or went quiet within its body
            self._send(400, b"request body cut short\n", close=True)
            return
        try:
            d = self.witness.add_checkpoint(body)
        except LedgerError as e:  # the state could not be written: nothing was cosigned
            self._send(500, f"{e}\n".encode(), close=True)
            return
        self._send(d.status, d.body, d.content_type)

    def do_GET(self) -> None:  # noqa: N802
        self._send(405, b"add-checkpoint takes POST\n", close=True)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    slots: threading.BoundedSemaphore  # one a connection being served (make_server)

    def process_request(self, request, client_address) -> None:
        if not self.slots.acquire(blocking=False):
            try:  # the answer fits any socket buffer: sent without waiting on the client
                request.settimeout(0)
                request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread took the slot
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request, client_address) -> None:
        # one line, not socketserver's traceback: a client that resets or is cut off mid-answer
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return
        print(
            f"ledgertool: witness: request from {client_address[0]}: internal error: {exc!r}",
            file=sys.stderr,
        )


def make_server(
    witness: Witness,
    host: str,
    port: int,
    *,
    request_s: float = REQUEST_S,
    max_connections: int = MAX_CONNECTIONS,
) -> ThreadingHTTPServer:
    """A server bound to (host, port) (port 0: any free one; `server_address` says which); a
    request must arrive whole within `request_s` seconds; at most `max_connections` are served at
    once, the rest answered 503."""
    attrs = {"witness": witness, "request_s": request_s, "timeout": request_s}
    handler = type("WitnessHandler", (_Handler,), attrs)
    srv = _Server((host, port), handler)
    srv.slots = threading.BoundedSemaphore(max_connections)
    return srv
