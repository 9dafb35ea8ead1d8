"""A fake OpenAI-compatible Chat Completions API on 127.0.0.1 that replays a script of turns.

Design: the same as :mod:`tests.fakes.anthropic_server` (a stdlib
:class:`http.server.ThreadingHTTPServer`, HTTP/1.1 keep-alive, chunked SSE, the accept loop
on one background thread and one thread per connection), so one object serves trio tests
in-process and benchmarks from a separate process (``python -m tests.fakes.openai_server``).
It imports only the standard library. Accepted sockets get ``TCP_NODELAY`` (without it Nagle's
algorithm and delayed ACKs add ~44 ms to every streamed call), and are counted in
:attr:`FakeOpenAIServer.connections`, so tests can check that a client reuses its
connection.

Every ``POST /v1/chat/completions`` consumes the next turn of the script (in arrival order)
and is recorded in :attr:`FakeOpenAIServer.requests`. Once the script is exhausted the server
serves ``default`` if one was given, else a 400 ``invalid_request_error`` saying so.

Script format: a list of turns, each a JSON-compatible dict of one of three kinds.

A **reply** (neither ``"status"`` nor ``"transcript"``), streamed as OpenAI documents it:
``data: {chat.completion.chunk}`` events (a first one with ``delta.role``, then the pieces,
then one with ``finish_reason``, then, if the request asked for
``stream_options.include_usage``, one with ``"choices": []`` and ``usage``), then
``data: [DONE]``::

    {
        "content": "Hello",            # text, sent in `chunk`-sized pieces; or a list of
                                       # pieces: ["He", "llo"]
        "reasoning": "hmm",            # sent first, as delta[reasoning_key] (str or list)
        "reasoning_key": "reasoning_content",   # or "reasoning"
        "tool_calls": [                # each: first piece {index, id, type, function:
            {"id": "call_1", "name": "read", "arguments": {"path": "a"}},
                                       #  {name, arguments: ""}}, then the arguments' JSON
                                       #  text in `chunk`-sized pieces
            {"id": "call_2", "name": "ls", "parts": ["{\\"pa", "th\\": 1}"]},
                                       #  explicit argument pieces (may be broken JSON)
        ],
        "interleave": False,           # send the calls' pieces alternately
        "raw_tool_calls": [[{...}]],   # after tool_calls: each item is the delta.tool_calls
                                       # list of one chunk, sent as given (vendor quirks)
        "finish_reason": None,         # default "tool_calls" if there are tool calls, else
                                       # "stop"
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},   # sent as given (with
                                       # total_tokens added); null: no usage chunk at all
        "done": True,                  # send `data: [DONE]`
        "chunk": 8,                    # size of automatic pieces
        "delay": 0.0,                  # seconds between events
        "first_byte_after": 0.0,       # seconds before the status line (slow first byte;
                                       # any kind of turn)
        "cut_after": N,                # send N events, then close the connection mid-body
        "end_after": N,                # send N events, then end the body cleanly
        "stall_after": N,              # send N events, then go silent for stall_seconds
        "stall_seconds": None,         # (None: until the server closes), then carry on
        "error_after": N,              # send N events, then `data: {"error": ...}`, end
        "error": {"message": "...", "type": "server_error", "code": None},
        "malformed_after": N,          # send N events, then a `data:` line that is not
        "malformed": "{\\"id\\": \\"chat",   # JSON (this text), then carry on
        "headers": {...},              # extra response headers
        "json": False,                 # answer one chat.completion even to a streamed
                                       # request (a server that ignores "stream")
    }

A **transcript** (has ``"transcript"`` or ``"sse"``): a raw SSE file (a relative name is
looked up in ``tests/fakes/transcripts/``), or the given text, replayed byte for byte as a
200 ``text/event-stream``, one event (up to each blank line) per HTTP chunk, whatever the
request asked for. ``delay``, ``first_byte_after``, ``cut_after``, ``end_after``,
``stall_after``, ``error_after``, ``malformed_after`` and ``headers`` apply as above::

    {"transcript": "openai_parallel_tools.sse"}

An **error** (has ``"status"``): that HTTP status with OpenAI's JSON error body
``{"error": {"message", "type", "param", "code"}}``; ``"error"`` overrides fields of the
default for the status, ``"body"`` sends that text instead (an HTML page from a proxy, say),
``"headers"`` adds response headers, e.g. ``{"retry-after": "0.01"}`` or
``{"retry-after-ms": "10"}``::

    {"status": 429, "headers": {"retry-after": "0.01"}}

A request without ``"stream": true`` gets the same reply turn as one ``chat.completion``.

Resource handling: :meth:`FakeOpenAIServer.close` (called by :func:`serve_openai` on exit)
stops accepting, wakes stalled handlers, shuts down every open connection and joins all
threads, so no socket or thread outlives it.
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
import sys
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

__all__ = [
    "DEFAULT_REPLY",
    "TRANSCRIPTS",
    "FakeOpenAIServer",
    "RecordedRequest",
    "serve_openai",
    "transcript_events",
]

Turn = Mapping[str, Any]

#: Where transcript turns are looked up.
TRANSCRIPTS = Path(__file__).resolve().parent / "transcripts"

#: What the benchmark entry point serves when given no script: a short text reply.
DEFAULT_REPLY: Turn = {
    "content": "ok",
    "usage": {"prompt_tokens": 10, "completion_tokens": 1},
}

_PATH = "/v1/chat/completions"

_ERROR_DEFAULTS: dict[int, dict[str, Any]] = {
    400: {"message": "Invalid request", "type": "invalid_request_error", "code": None},
    401: {"message": "Incorrect API key provided: sk-bad. You can find your API key at "
                     "https://platform.openai.com/account/api-keys.",
          "type": "invalid_request_error", "code": "invalid_api_key"},
    403: {"message": "Country, region, or territory not supported",
          "type": "request_forbidden", "code": "unsupported_country_region_territory"},
    404: {"message": "The model `gpt-fake` does not exist or you do not have access to it.",
          "type": "invalid_request_error", "code": "model_not_found"},
    429: {"message": "Rate limit reached for gpt-fake in organization org-fake on requests "
                     "per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
          "type": "requests", "code": "rate_limit_exceeded"},
    500: {"message": "The server had an error while processing your request. Sorry about that!",
          "type": "server_error", "code": None},
    502: {"message": "Bad gateway.", "type": "server_error", "code": None},
    503: {"message": "The engine is currently overloaded, please try again later.",
          "type": "server_error", "code": None},
    529: {"message": "Overloaded", "type": "server_error", "code": "overloaded"},
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


class FakeOpenAIServer(ThreadingHTTPServer):
    """The server; use :func:`serve_openai` rather than constructing it directly."""

    daemon_threads = False  # handler threads are joined in server_close()
    block_on_close = True

    def __init__(
        self, script: Iterable[Turn] = (), *, default: Turn | None = None,
        host: str = "127.0.0.1", port: int = 0,
    ) -> None:
        super().__init__((host, port), _Handler)
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
        """``http://127.0.0.1:PORT/v1``: what an OpenAI-compatible client takes."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def enqueue(self, *turns: Turn) -> None:
        """Append turns to the script."""
        with self._lock:
            self._turns.extend(turns)

    def start(self) -> None:
        """Start the accept loop on a background thread."""
        self._thread = threading.Thread(target=self._serve, name="fake-openai", daemon=True)
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
def serve_openai(
    script: Iterable[Turn] = (), *, default: Turn | None = None, port: int = 0,
) -> Iterator[FakeOpenAIServer]:
    """Serve ``script`` on 127.0.0.1 (a free port unless given) for the ``with`` block.

    Args:
        script: the turns, served one per request in order (format in the module docstring).
        default: served for every request once the script is exhausted (for benchmarks);
            without it such a request gets a 400.
        port: 0 for a free port.

    Resource handling: the server and its threads are closed when the block exits.
    """
    server = FakeOpenAIServer(script, default=default, port=port)
    try:
        server.start()
        yield server
    finally:
        server.close()


def transcript_events(name: str | Path) -> list[bytes]:
    """The events of an SSE transcript file, each with its closing blank line."""
    path = Path(name)
    if not path.is_absolute():
        path = TRANSCRIPTS / path
    return _split_events(path.read_bytes())


def _split_events(raw: bytes) -> list[bytes]:
    # An event ends at a blank line (LF LF, or CRLF CRLF); the last one may lack it.
    return [m.group(0) for m in re.finditer(rb".*?(?:\r?\n\r?\n|\Z)", raw, re.S) if m.group(0)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeOpenAIServer

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
        if self.path.split("?", 1)[0] != _PATH:
            self._send_error({"status": 404, "error": {
                "message": f"Invalid URL (POST {self.path})", "code": None}}, n)
        elif turn is None:
            self._send_error({"status": 400, "error": {
                "message": "fake server: script exhausted"}}, n)
        elif "status" in turn:
            self._send_error(turn, n)
        else:
            request = body if isinstance(body, dict) else {}
            model = request.get("model", "gpt-fake")
            if "transcript" in turn:
                self._send_stream(turn, transcript_events(turn["transcript"]), n)
            elif "sse" in turn:
                self._send_stream(turn, _split_events(turn["sse"].encode()), n)
            elif request.get("stream") and not turn.get("json"):
                usage = bool((request.get("stream_options") or {}).get("include_usage"))
                self._send_stream(turn, _events(turn, model, n, usage), n)
            else:
                self._send_json(200, _completion(turn, model, n), turn.get("headers", {}), n)

    def _send_error(self, turn: Turn, n: int) -> None:
        status = int(turn["status"])
        if "body" in turn:
            data = str(turn["body"]).encode()
            ctype = "text/html; charset=utf-8"
        else:
            default = _ERROR_DEFAULTS.get(status, {"message": "Error", "type": "server_error",
                                                   "code": None})
            error = {"param": None, **default, **turn.get("error", {})}
            data = json.dumps({"error": error}).encode()
            ctype = "application/json"
        self._send_bytes(status, ctype, data, turn.get("headers", {}), n)

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str], n: int) -> None:
        self._send_bytes(status, "application/json", json.dumps(body).encode(), headers, n)

    def _send_bytes(self, status: int, ctype: str, data: bytes, headers: Mapping[str, str],
                    n: int) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", f"req_fake_{n}")
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, turn: Turn, events: list[bytes], n: int) -> None:
        cut_after = turn.get("cut_after")
        stall_after = turn.get("stall_after")
        error_after = turn.get("error_after")
        end_after = turn.get("end_after")
        malformed_after = turn.get("malformed_after")
        delay = float(turn.get("delay", 0.0))
        closing = self.server._closing

        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-request-id", f"req_fake_{n}")
        for name, value in turn.get("headers", {}).items():
            self.send_header(name, str(value))
        self.end_headers()

        for i, payload in enumerate(events):
            if i == cut_after:
                self.close_connection = True  # no terminating chunk: the body is cut short
                return
            if i == end_after:
                break
            if i == error_after:
                error = {"message": "The server had an error while processing your request.",
                         "type": "server_error", "param": None, "code": None,
                         **turn.get("error", {})}
                self._write_chunk(_data({"error": error}))
                break
            if i == malformed_after:
                bad = turn.get("malformed", '{"id": "chatcmpl-fake", "choices": [{"ind')
                self._write_chunk(f"data: {bad}\n\n".encode())
            if i == stall_after:
                closing.wait(turn.get("stall_seconds"))
                if closing.is_set():
                    self.close_connection = True
                    return
            if delay and i:
                closing.wait(delay)
            self._write_chunk(payload)
        self.wfile.write(b"0\r\n\r\n")

    def _write_chunk(self, payload: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))


def _data(obj: Any) -> bytes:
    return f"data: {json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _text_pieces(value: Any, size: int) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return _pieces(value, size) if value else []
    return list(value)


def _arguments(call: Mapping[str, Any]) -> str:
    if "parts" in call:
        return "".join(call["parts"])
    args = call.get("arguments", {})
    return args if isinstance(args, str) else json.dumps(args)


def _usage(turn: Turn) -> dict[str, Any] | None:
    if "usage" in turn and turn["usage"] is None:
        return None
    usage = dict(turn.get("usage") or {"prompt_tokens": 10, "completion_tokens": 5})
    usage.setdefault("prompt_tokens", 10)
    usage.setdefault("completion_tokens", 5)
    usage.setdefault("total_tokens", usage["prompt_tokens"] + usage["completion_tokens"])
    return usage


def _finish_reason(turn: Turn) -> str:
    if turn.get("finish_reason"):
        return str(turn["finish_reason"])
    return "tool_calls" if turn.get("tool_calls") or turn.get("raw_tool_calls") else "stop"


def _completion(turn: Turn, model: str, n: int) -> dict[str, Any]:
    """A reply turn as one (non-streamed) chat.completion."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": "".join(_text_pieces(turn.get("content"), 8)) or None,
                               "refusal": None}
    if turn.get("tool_calls"):
        message["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": _arguments(c)}}
            for c in turn["tool_calls"]
        ]
    out: dict[str, Any] = {
        "id": f"chatcmpl-fake{n}", "object": "chat.completion", "created": 1700000000,
        "model": model, "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": _finish_reason(turn)}],
    }
    usage = _usage(turn)
    if usage is not None:
        out["usage"] = usage
    return out


def _events(turn: Turn, model: str, n: int, include_usage: bool) -> list[bytes]:
    """The SSE events for a reply turn, in the order the Chat Completions API sends them."""
    size = int(turn.get("chunk", 8))
    head = {"id": f"chatcmpl-fake{n}", "object": "chat.completion.chunk", "created": 1700000000,
            "model": model, "system_fingerprint": "fp_fake"}
    tail = {"usage": None} if include_usage else {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _data({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                           "finish_reason": finish}], **tail})

    content = _text_pieces(turn.get("content"), size)
    calls = list(turn.get("tool_calls") or ())
    events = [chunk({"role": "assistant", "content": "" if content or not calls else None,
                     "refusal": None})]
    key = turn.get("reasoning_key", "reasoning_content")
    events += [chunk({key: piece}) for piece in _text_pieces(turn.get("reasoning"), size)]
    events += [chunk({"content": piece}) for piece in content]

    per_call: list[list[bytes]] = []
    for index, call in enumerate(calls):
        parts = list(call["parts"]) if "parts" in call else _pieces(_arguments(call), size)
        pieces = [chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                         "function": {"name": call["name"], "arguments": ""}}]})]
        pieces += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                   for p in parts]
        per_call.append(pieces)
    if turn.get("interleave"):
        for group in itertools.zip_longest(*per_call):
            events += [e for e in group if e is not None]
    else:
        for pieces in per_call:
            events += pieces
    events += [chunk({"tool_calls": raw}) for raw in turn.get("raw_tool_calls") or ()]

    events.append(chunk({}, _finish_reason(turn)))
    usage = _usage(turn)
    if include_usage and usage is not None:
        events.append(_data({**head, "choices": [], "usage": usage}))
    if turn.get("done", True):
        events.append(b"data: [DONE]\n\n")
    return events


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.fakes.openai_server [--port 0] [--script FILE]``.

    Prints the base URL (``http://127.0.0.1:PORT/v1``) on stdout, then serves until killed
    (SIGTERM or Ctrl-C). FILE is JSON: a list of turns, or ``{"turns": [...], "default":
    turn}``. Without ``--script`` every request gets :data:`DEFAULT_REPLY`; with a list, the
    script is followed by :data:`DEFAULT_REPLY` unless ``--no-default`` is given.
    """
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.openai_server",
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
    with serve_openai(turns, default=default, port=args.port) as server:
        print(server.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
