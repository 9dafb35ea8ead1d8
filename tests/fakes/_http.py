"""The HTTP plumbing the fake vendor servers share; the wire formats live in each fake.

Design: a stdlib :class:`http.server.ThreadingHTTPServer` (HTTP/1.1, keep-alive, chunked
SSE) with its accept loop on one background thread and one thread per connection. It needs
no event loop, so the same object serves trio tests in-process (start and stop are quick,
blocking calls) and benchmarks from a separate process (``python -m tests.fakes.*_server``).
It imports only the standard library (and, to make a certificate, ``cryptography`` if it
is installed).

Accepted sockets get ``TCP_NODELAY``: without it Nagle's algorithm and delayed ACKs add
~44 ms to every streamed call. They are counted in :attr:`FakeServer.connections`. Given an
``ssl.SSLContext`` (``tls``), a fake serves HTTPS: each connection's handshake is made on its
own thread, and :attr:`FakeServer.base_url` says ``https``.

A fake subclasses :class:`FakeServer` (setting ``handler``, ``thread_name`` and, if its
clients want one, ``url_path``) and :class:`FakeHandler` (implementing ``respond``, which
gets each ``POST``'s turn after it was recorded and any ``first_byte_after`` wait was
served). :func:`serving` is the body of each fake's ``serve_*`` context manager and
:func:`run_cli` of its ``python -m`` entry point.

Resource handling: :meth:`FakeServer.close` stops accepting, wakes stalled handlers, shuts
down every open connection and joins all threads, so no socket or thread outlives it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

__all__ = [
    "FakeHandler",
    "FakeServer",
    "RecordedRequest",
    "TRANSCRIPTS",
    "Turn",
    "pieces",
    "run_cli",
    "self_signed",
    "serving",
    "split_events",
]

#: Where transcript turns find their files.
TRANSCRIPTS = Path(__file__).resolve().parent / "transcripts"

#: One turn of a script: a JSON-compatible dict (its format is each fake's own).
Turn = Mapping[str, Any]

S = TypeVar("S", bound="FakeServer")


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    #: Header names lower-cased.
    headers: Mapping[str, str]
    #: The JSON body, decoded (``None`` if it was not JSON).
    body: Any


class FakeServer(ThreadingHTTPServer):
    """A scripted server: each request takes the next turn, then ``default`` (or ``None``)."""

    daemon_threads = False  # handler threads are joined in server_close()
    block_on_close = True
    #: The request handler class.
    handler: type[FakeHandler]
    #: The accept loop thread's name.
    thread_name = "fake-server"
    #: Appended to ``http://HOST:PORT`` in :attr:`base_url`.
    url_path = ""

    def __init__(
        self, script: Iterable[Turn] = (), *, default: Turn | None = None,
        host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__((host, port), self.handler)
        self.scheme = "http" if tls is None else "https"
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)
        #: Every request received, in arrival order.
        self.requests: list[RecordedRequest] = []
        #: Connections accepted so far.
        self.connections = 0
        self._turns: deque[Turn] = deque(script)
        self._default = default
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closing = threading.Event()
        self._conns: set[socket.socket] = set()
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https`` with TLS) plus :attr:`url_path` (no
        trailing slash)."""
        host, port = self.server_address[:2]
        return f"{self.scheme}://{host}:{port}{self.url_path}"

    def enqueue(self, *turns: Turn) -> None:
        """Append turns to the script."""
        with self._lock:
            self._turns.extend(turns)

    def start(self) -> None:
        """Start the accept loop on a background thread."""
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving, cut every connection, join every thread. Idempotent."""
        if self._closing.is_set():
            return
        self._closing.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self.server_close()  # closes the listener and joins handler threads
        self._wake_r.close()
        self._wake_w.close()

    # -- socketserver hooks ------------------------------------------------------------------

    def _serve(self) -> None:
        # Our own loop rather than serve_forever(): close() wakes it at once through the
        # socketpair instead of waiting out a poll interval.
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._closing.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self.socket and not self._closing.is_set():
                        self._handle_request_noblock()

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self.connections += 1
        return conn, addr

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            self._conns.add(request)
        try:
            if isinstance(request, ssl.SSLSocket):
                request.do_handshake()  # here, not in the accept loop
            super().finish_request(request, client_address)
        finally:
            with self._lock:
                self._conns.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # the client went away, or close() cut the connection
            return
        super().handle_error(request, client_address)

    # -- used by the handler -----------------------------------------------------------------

    def _take(self, recorded: RecordedRequest) -> tuple[Turn | None, int]:
        with self._lock:
            self.requests.append(recorded)
            n = next(self._ids)
            if self._turns:
                return self._turns.popleft(), n
            return self._default, n


def self_signed(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate for 127.0.0.1, signed by its own key, in ``folder``: its file (what a
    client trusts through ``SSL_CERT_FILE``) and a server context that presents it. Made
    with the ``cryptography`` package if it is installed, else with the ``openssl`` tool."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        _make_certificate(cert, key)
    except ImportError:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return cert, context


def _make_certificate(cert: Path, key: Path) -> None:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))


@contextlib.contextmanager
def serving(
    cls: type[S], script: Iterable[Turn] = (), *, default: Turn | None = None, port: int = 0,
    tls: ssl.SSLContext | None = None,
) -> Iterator[S]:
    """A ``cls`` serving ``script`` on 127.0.0.1 for the ``with`` block.

    Args:
        script: the turns, served one per request in order.
        default: served for every request once the script is exhausted (for benchmarks);
            without it the fake answers such a request with a 400.
        port: 0 for a free port.
        tls: serve HTTPS with this context (its certificate loaded).

    Resource handling: the server is built and started on entry; it and its threads are
    closed when the block exits.
    """
    server = cls(script, default=default, port=port, tls=tls)
    try:
        server.start()
        yield server
    finally:
        server.close()


class FakeHandler(BaseHTTPRequestHandler):
    """Reads and records each ``POST``, then hands its turn to :meth:`respond`."""

    protocol_version = "HTTP/1.1"
    server: FakeServer
    #: The response header that carries ``req_fake_N``.
    request_id_header = "request-id"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass  # keep test and benchmark output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        recorded = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        turn, n = self.server._take(recorded)
        if turn is not None and turn.get("first_byte_after"):
            if self.pause(float(turn["first_byte_after"])):
                return
        self.respond(turn, body, n)

    def respond(self, turn: Turn | None, body: Any, n: int) -> None:
        """Answer request number ``n`` (its decoded ``body``) with ``turn``."""
        raise NotImplementedError

    def pause(self, seconds: float | None) -> bool:
        """Wait ``seconds`` (``None``: until the server closes); true if it closed meanwhile.

        If it did, the connection is marked to be closed: the caller should just return.
        """
        closing = self.server._closing
        closing.wait(seconds)
        if closing.is_set():
            self.close_connection = True
            return True
        return False

    def send_bytes(self, status: int, ctype: str, data: bytes, headers: Mapping[str, str],
                   n: int) -> None:
        """A whole response: ``data`` with a content-length, plus ``headers``."""
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.send_header(self.request_id_header, f"req_fake_{n}")
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status: int, body: Any, headers: Mapping[str, str], n: int) -> None:
        self.send_bytes(status, "application/json", json.dumps(body).encode(), headers, n)

    def send_stream_head(self, turn: Turn, n: int) -> None:
        """The status line and headers of a chunked 200 ``text/event-stream``."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header(self.request_id_header, f"req_fake_{n}")
        for name, value in turn.get("headers", {}).items():
            self.send_header(name, str(value))
        self.end_headers()

    def send_events(self, turn: Turn, events: Sequence[bytes], n: int, *,
                    error_event: Callable[[], bytes],
                    extra: Mapping[int, bytes] | None = None) -> None:
        """Stream ``events`` (encoded SSE events), one per HTTP chunk.

        Applies the turn's ``cut_after``, ``end_after``, ``error_after`` (sends
        ``error_event()``, then ends), ``stall_after`` / ``stall_seconds``, ``delay`` and
        ``headers``; ``extra[i]`` is sent just before event ``i``.
        """
        cut_after = turn.get("cut_after")
        stall_after = turn.get("stall_after")
        error_after = turn.get("error_after")
        end_after = turn.get("end_after")
        delay = float(turn.get("delay", 0.0))
        extra = extra or {}

        self.send_stream_head(turn, n)
        for i, payload in enumerate(events):
            if i == cut_after:
                self.close_connection = True  # no terminating chunk: the body is cut short
                return
            if i == end_after:
                break
            if i == error_after:
                self.write_chunk(error_event())
                break
            if i in extra:
                self.write_chunk(extra[i])
            if i == stall_after and self.pause(turn.get("stall_seconds")):
                return
            if delay and i:
                self.server._closing.wait(delay)
            self.write_chunk(payload)
        self.end_chunks()

    def write_chunk(self, payload: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")


def split_events(raw: bytes) -> list[bytes]:
    """SSE bytes cut into events, each with its closing blank line (the last may lack it)."""
    # An event ends at a blank line (LF LF, or CRLF CRLF).
    return [m.group(0) for m in re.finditer(rb".*?(?:\r?\n\r?\n|\Z)", raw, re.S) if m.group(0)]


def pieces(text: str, size: int) -> list[str]:
    """``text`` in ``size``-character pieces (one empty piece for empty text)."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def run_cli(argv: list[str] | None, *, prog: str, description: str | None,
            serve: Callable[..., contextlib.AbstractContextManager[FakeServer]],
            default_reply: Turn) -> None:
    """A fake's ``python -m`` entry point: ``[--port 0] [--script FILE] [--no-default]``.

    Prints the base URL on stdout, then serves until killed (SIGTERM or Ctrl-C).
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--script", help="JSON file of turns")
    parser.add_argument("--no-default", action="store_true",
                        help="answer 400 once the script is exhausted instead of repeating "
                             "the default reply")
    args = parser.parse_args(argv)

    turns: list[Turn] = []
    default: Turn | None = default_reply
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            loaded = json.load(f)
        if isinstance(loaded, dict):
            turns = list(loaded.get("turns", []))
            default = loaded.get("default", default)
        else:
            turns = list(loaded)
    if args.no_default:
        default = None

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    with serve(turns, default=default, port=args.port) as server:
        print(server.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
