"""A fake Anthropic Messages API on 127.0.0.1 that replays a script of turns.

Design: a stdlib :class:`http.server.ThreadingHTTPServer` (HTTP/1.1, keep-alive, chunked
SSE) with its accept loop on one background thread and one thread per connection. It needs
no event loop, so the same object serves trio tests in-process (start and stop are quick,
blocking calls) and benchmarks from a separate process (``python -m
tests.fakes.anthropic_server``). It imports only the standard library.

Accepted sockets get ``TCP_NODELAY``: without it Nagle's algorithm and delayed ACKs add
~44 ms to every streamed call.

Every ``POST /v1/messages`` consumes the next turn of the script (in arrival order) and is
recorded in :attr:`FakeAnthropicServer.requests`. Once the script is exhausted the server
serves ``default`` if one was given, else a 400 ``invalid_request_error`` saying so (400,
so that the SDK does not retry it).

Script format: a list of turns, each a JSON-compatible dict of one of three kinds.

A **reply** (no ``"status"`` key), streamed as the documented SSE sequence
``message_start``, ``ping``, per block ``content_block_start`` / ``content_block_delta``\\* /
``content_block_stop``, ``message_delta``, ``message_stop``::

    {
        "content": [                       # blocks, in the API's own shape
            {"type": "text", "text": "Hello"},                 # split into text_delta
            {"type": "text", "deltas": ["He", "llo"]},         # explicit text_delta chunks
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},  # thinking_delta
                                                # chunks (or "deltas"), then signature_delta
            {"type": "redacted_thinking", "data": "..."},     # start + stop, no delta
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {...}},
                                    # input sent as input_json_delta: an empty first chunk,
                                    # then the JSON in `chunk`-sized pieces (or give
                                    # "partial_json": [...] explicitly)
        ],
        "stop_reason": "end_turn",         # default end_turn; stop_sequence optional
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5,   # cache_read_input_tokens and
                  "cache_read_input_tokens": 0},             # cache_creation_input_tokens
                                                             # are sent only if given
        "chunk": 8,            # size of automatic text/thinking/json pieces
        "ping": True,          # send a ping after message_start
        "delay": 0.0,          # seconds between events
        "cut_after": N,        # send N events, then close the connection mid-body
        "end_after": N,        # send N events, then end the body cleanly (no message_stop)
        "stall_after": N,      # send N events, then go silent for stall_seconds
        "stall_seconds": None, # (None: until the server closes), then carry on
        "error_after": N,      # send N events, then an `event: error` with "error"
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "headers": {...},      # extra response headers
    }

An **error** (has ``"status"``): that HTTP status with the documented JSON body
``{"type": "error", "error": {"type", "message"}, "request_id"}``; ``"error"`` defaults
from the status (529 -> ``overloaded_error`` / ``Overloaded``), and ``"headers"`` adds
response headers, e.g. ``{"retry-after": "0.01"}`` (the SDK honours fractional seconds, and
also ``retry-after-ms``; note that ``retry-after: 0`` makes it fall back to its own backoff
of about a second)::

    {"status": 529, "headers": {"retry-after": "0.01"}}

A **transcript** (has ``"transcript"`` or ``"sse"``): a 200 ``text/event-stream`` whose body
is the bytes of a file in ``tests/fakes/transcripts/`` (``"transcript":
"anthropic_text.sse"``), or the given text (``"sse": "event: ...\\ndata: ...\\n\\n"``),
replayed verbatim, one chunk per event (split after each blank line), whatever the request
asked for. ``"headers"`` adds response headers::

    {"transcript": "anthropic_tool_use.sse"}

Any turn may also hold ``"first_byte_after": seconds``: the server waits that long (or until
it closes) before sending anything, status line included.

A request with ``"stream": false`` gets a reply turn as one JSON message.

Resource handling: :meth:`FakeAnthropicServer.close` (called by :func:`serve_anthropic` on
exit) stops accepting, wakes stalled handlers, shuts down every open connection and joins all
threads, so no socket or thread outlives it.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import selectors
import signal
import socket
import sys
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

__all__ = [
    "DEFAULT_REPLY",
    "FakeAnthropicServer",
    "RecordedRequest",
    "TRANSCRIPTS",
    "serve_anthropic",
]

#: Where ``{"transcript": NAME}`` turns find their files.
TRANSCRIPTS = Path(__file__).parent / "transcripts"

Turn = Mapping[str, Any]

#: What the benchmark entry point serves when given no script: a short text reply.
DEFAULT_REPLY: Turn = {
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 10, "output_tokens": 1},
}

_ERROR_DEFAULTS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
    500: ("api_error", "An unexpected error has occurred internal to Anthropic's systems."),
    529: ("overloaded_error", "Overloaded"),
}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    #: Header names lower-cased.
    headers: Mapping[str, str]
    #: The JSON body, decoded (``None`` if it was not JSON).
    body: Any


class FakeAnthropicServer(ThreadingHTTPServer):
    """The server; use :func:`serve_anthropic` rather than constructing it directly."""

    daemon_threads = False  # handler threads are joined in server_close()
    block_on_close = True

    def __init__(
        self, script: Iterable[Turn] = (), *, default: Turn | None = None,
        host: str = "127.0.0.1", port: int = 0,
    ) -> None:
        super().__init__((host, port), _Handler)
        #: Every request received, in arrival order.
        self.requests: list[RecordedRequest] = []
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
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def enqueue(self, *turns: Turn) -> None:
        """Append turns to the script."""
        with self._lock:
            self._turns.extend(turns)

    def start(self) -> None:
        """Start the accept loop on a background thread."""
        self._thread = threading.Thread(target=self._serve, name="fake-anthropic", daemon=True)
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
        return conn, addr

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            self._conns.add(request)
        try:
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


@contextlib.contextmanager
def serve_anthropic(
    script: Iterable[Turn] = (), *, default: Turn | None = None, port: int = 0,
) -> Iterator[FakeAnthropicServer]:
    """Serve ``script`` on 127.0.0.1 (a free port unless given) for the ``with`` block.

    Args:
        script: the turns, served one per request in order (format in the module docstring).
        default: served for every request once the script is exhausted (for benchmarks);
            without it such a request gets a 400.
        port: 0 for a free port.

    Resource handling: the server and its threads are closed when the block exits.
    """
    server = FakeAnthropicServer(script, default=default, port=port)
    try:
        server.start()
        yield server
    finally:
        server.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeAnthropicServer

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
            closing = self.server._closing
            closing.wait(float(turn["first_byte_after"]))
            if closing.is_set():
                self.close_connection = True
                return
        if self.path.split("?", 1)[0] != "/v1/messages":
            self._send_error({"status": 404}, n)
        elif turn is None:
            self._send_error(
                {"status": 400, "error": {"type": "invalid_request_error",
                                          "message": "fake server: script exhausted"}}, n)
        elif "status" in turn:
            self._send_error(turn, n)
        elif "transcript" in turn or "sse" in turn:
            self._send_transcript(turn, n)
        else:
            model = body.get("model", "claude-fake") if isinstance(body, dict) else "claude-fake"
            if isinstance(body, dict) and body.get("stream"):
                self._send_stream(turn, model, n)
            else:
                self._send_json(200, _message(turn, model, n), turn.get("headers", {}), n)

    def _send_error(self, turn: Turn, n: int) -> None:
        status = int(turn["status"])
        etype, message = _ERROR_DEFAULTS.get(status, ("api_error", "Error"))
        error = {"type": etype, "message": message, **turn.get("error", {})}
        body = {"type": "error", "error": error, "request_id": f"req_fake_{n}"}
        self._send_json(status, body, turn.get("headers", {}), n)

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str], n: int) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_fake_{n}")
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def _send_transcript(self, turn: Turn, n: int) -> None:
        if "transcript" in turn:
            body = (TRANSCRIPTS / turn["transcript"]).read_bytes()
        else:
            body = turn["sse"].encode()
        self._send_stream_head(turn, n)
        start = 0
        while start < len(body):  # the bytes as they are, cut after each blank line
            end = body.find(b"\n\n", start)
            end = len(body) if end < 0 else end + 2
            self._write_chunk(body[start:end])
            start = end
        self.wfile.write(b"0\r\n\r\n")

    def _send_stream_head(self, turn: Turn, n: int) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", f"req_fake_{n}")
        for name, value in turn.get("headers", {}).items():
            self.send_header(name, str(value))
        self.end_headers()

    def _send_stream(self, turn: Turn, model: str, n: int) -> None:
        events = _events(turn, model, n)
        cut_after = turn.get("cut_after")
        stall_after = turn.get("stall_after")
        error_after = turn.get("error_after")
        end_after = turn.get("end_after")
        delay = float(turn.get("delay", 0.0))
        closing = self.server._closing

        self._send_stream_head(turn, n)
        for i, (name, data) in enumerate(events):
            if i == cut_after:
                self.close_connection = True  # no terminating chunk: the body is cut short
                return
            if i == end_after:
                break
            if i == error_after:
                error = {"type": "overloaded_error", "message": "Overloaded", **turn.get("error", {})}
                self._write_event("error", {"type": "error", "error": error})
                break
            if i == stall_after:
                closing.wait(turn.get("stall_seconds"))
                if closing.is_set():
                    self.close_connection = True
                    return
            if delay and i:
                closing.wait(delay)
            self._write_event(name, data)
        self.wfile.write(b"0\r\n\r\n")

    def _write_event(self, name: str, data: Any) -> None:
        payload = f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
        self._write_chunk(payload)

    def _write_chunk(self, payload: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _usage(turn: Turn) -> dict[str, int]:
    usage = dict(turn.get("usage", {}))
    usage.setdefault("input_tokens", 10)
    usage.setdefault("output_tokens", 5)
    return usage


def _final_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A scripted block as it appears in a complete (non-streamed) message."""
    kind = block["type"]
    if kind == "text":
        text = block["text"] if "text" in block else "".join(block["deltas"])
        return {"type": "text", "text": text}
    if kind == "thinking":
        thinking = block["thinking"] if "thinking" in block else "".join(block["deltas"])
        return {"type": "thinking", "thinking": thinking, "signature": block.get("signature", "")}
    if kind == "tool_use":
        args = block.get("input")
        if args is None:
            try:
                args = json.loads("".join(block["partial_json"]) or "{}")
            except ValueError:
                args = "".join(block["partial_json"])  # deliberately broken: sent as scripted
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": args}
    return dict(block)


def _message(turn: Turn, model: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_final_block(b) for b in turn.get("content", [])],
        "stop_reason": turn.get("stop_reason", "end_turn"),
        "stop_sequence": turn.get("stop_sequence"),
        "usage": _usage(turn),
    }


def _events(turn: Turn, model: str, n: int) -> list[tuple[str, Any]]:
    """The SSE events for a reply turn, in the order the Messages API sends them."""
    size = int(turn.get("chunk", 8))
    usage = _usage(turn)
    start_usage = {**usage, "output_tokens": 1}
    message = {**_message(turn, model, n), "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": start_usage}
    events: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": message})]
    if turn.get("ping", True):
        events.append(("ping", {"type": "ping"}))

    def delta(index: int, body: dict[str, Any]) -> None:
        events.append(("content_block_delta",
                       {"type": "content_block_delta", "index": index, "delta": body}))

    for index, block in enumerate(turn.get("content", [])):
        kind = block["type"]
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        else:
            start = dict(block)
        events.append(("content_block_start",
                       {"type": "content_block_start", "index": index, "content_block": start}))
        if kind == "text":
            for piece in block.get("deltas") or _pieces(block["text"], size):
                delta(index, {"type": "text_delta", "text": piece})
        elif kind == "thinking":
            for piece in block.get("deltas") or _pieces(block["thinking"], size):
                delta(index, {"type": "thinking_delta", "thinking": piece})
            delta(index, {"type": "signature_delta", "signature": block.get("signature", "")})
        elif kind == "tool_use":
            parts = block.get("partial_json")
            if parts is None:
                parts = ["", *_pieces(json.dumps(block["input"]), size)]
            for piece in parts:
                delta(index, {"type": "input_json_delta", "partial_json": piece})
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))

    events.append(("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": turn.get("stop_reason", "end_turn"),
                  "stop_sequence": turn.get("stop_sequence")},
        "usage": {"output_tokens": usage["output_tokens"]},
    }))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.fakes.anthropic_server [--port 0] [--script FILE]``.

    Prints the base URL on stdout, then serves until killed (SIGTERM or Ctrl-C). FILE is JSON:
    a list of turns, or ``{"turns": [...], "default": turn}``. Without ``--script`` every
    request gets :data:`DEFAULT_REPLY`; with a list, the script is followed by
    :data:`DEFAULT_REPLY` unless ``--no-default`` is given.
    """
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.anthropic_server",
                                     description=main.__doc__)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--script", help="JSON file of turns")
    parser.add_argument("--no-default", action="store_true",
                        help="answer 400 once the script is exhausted instead of repeating "
                             "the default reply")
    args = parser.parse_args(argv)

    turns: list[Turn] = []
    default: Turn | None = DEFAULT_REPLY
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
    with serve_anthropic(turns, default=default, port=args.port) as server:
        print(server.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
