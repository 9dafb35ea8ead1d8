"""A fake Anthropic Messages API on 127.0.0.1 that replays a script of turns.

Design: a stdlib :class:`http.server.ThreadingHTTPServer` (HTTP/1.1, keep-alive, chunked
SSE) with its accept loop on one background thread and one thread per connection. It needs
no event loop, so the same object serves trio tests in-process (start and stop are quick,
blocking calls) and benchmarks from a separate process (``python -m
tests.fakes.anthropic_server``). It imports only the standard library. That plumbing is
shared with :mod:`tests.fakes.openai_server` in :mod:`tests.fakes._http`; this module holds
the Messages API's wire format.

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
        "malformed_after": N,  # send N events, then a content_block_delta whose JSON is cut
                               # short ("malformed": its data instead), then carry on
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

import contextlib
import json
import ssl
from typing import Any, Iterable, Mapping

from tests.fakes import _http
from tests.fakes._http import TRANSCRIPTS, RecordedRequest, Turn

__all__ = [
    "DEFAULT_REPLY",
    "FakeAnthropicServer",
    "RecordedRequest",
    "TRANSCRIPTS",
    "serve_anthropic",
]

#: What the benchmark entry point serves when given no script: a short text reply.
DEFAULT_REPLY: Turn = {
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 10, "output_tokens": 1},
}

_PATH = "/v1/messages"

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


class _Handler(_http.FakeHandler):
    server: FakeAnthropicServer

    def respond(self, turn: Turn | None, body: Any, n: int) -> None:
        if self.path.split("?", 1)[0] != _PATH:
            self._send_error({"status": 404}, n)
        elif turn is None:
            self._send_error(
                {"status": 400, "error": {"type": "invalid_request_error",
                                          "message": "fake server: script exhausted"}}, n)
        elif "status" in turn:
            self._send_error(turn, n)
        elif "transcript" in turn or "sse" in turn:
            if "transcript" in turn:
                raw = (TRANSCRIPTS / turn["transcript"]).read_bytes()
            else:
                raw = turn["sse"].encode()
            self.send_stream_head(turn, n)
            for event in _http.split_events(raw):  # the bytes as they are, one event a chunk
                self.write_chunk(event)
            self.end_chunks()
        else:
            model = body.get("model", "claude-fake") if isinstance(body, dict) else "claude-fake"
            if isinstance(body, dict) and body.get("stream"):
                events = [_sse(name, data) for name, data in _events(turn, model, n)]
                extra: dict[int, bytes] = {}
                if turn.get("malformed_after") is not None:
                    bad = turn.get("malformed", '{"type":"content_block_delta","index":0,'
                                                '"delta":{"type":"text_delta","text":"wor')
                    extra[turn["malformed_after"]] = f"event: content_block_delta\ndata: {bad}\n\n".encode()
                self.send_events(turn, events, n, extra=extra, error_event=lambda: _sse("error", {
                    "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded",
                                               **turn.get("error", {})}}))
            else:
                self.send_json(200, _message(turn, model, n), turn.get("headers", {}), n)

    def _send_error(self, turn: Turn, n: int) -> None:
        status = int(turn["status"])
        etype, message = _ERROR_DEFAULTS.get(status, ("api_error", "Error"))
        error = {"type": etype, "message": message, **turn.get("error", {})}
        body = {"type": "error", "error": error, "request_id": f"req_fake_{n}"}
        self.send_json(status, body, turn.get("headers", {}), n)


class FakeAnthropicServer(_http.FakeServer):
    """The server; use :func:`serve_anthropic` rather than constructing it directly.

    :attr:`base_url` is ``http://127.0.0.1:PORT`` (no trailing slash); :attr:`requests` holds
    every request received, in arrival order; :meth:`enqueue` appends turns to the script.
    """

    handler = _Handler
    thread_name = "fake-anthropic"


def serve_anthropic(
    script: Iterable[Turn] = (), *, default: Turn | None = None, port: int = 0,
    tls: ssl.SSLContext | None = None,
) -> contextlib.AbstractContextManager[FakeAnthropicServer]:
    """Serve ``script`` (turns as in the module docstring, one per request) for the block.

    On 127.0.0.1, port ``port`` (0: a free one). ``default`` is served once the script is
    exhausted (for benchmarks), else such a request gets a 400. The server and its threads
    are closed when the block exits. With ``tls``, HTTPS.
    """
    return _http.serving(FakeAnthropicServer, script, default=default, port=port, tls=tls)


def _sse(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


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
            for piece in block.get("deltas") or _http.pieces(block["text"], size):
                delta(index, {"type": "text_delta", "text": piece})
        elif kind == "thinking":
            for piece in block.get("deltas") or _http.pieces(block["thinking"], size):
                delta(index, {"type": "thinking_delta", "thinking": piece})
            delta(index, {"type": "signature_delta", "signature": block.get("signature", "")})
        elif kind == "tool_use":
            parts = block.get("partial_json")
            if parts is None:
                parts = ["", *_http.pieces(json.dumps(block["input"]), size)]
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
    _http.run_cli(argv, prog="python -m tests.fakes.anthropic_server", description=main.__doc__,
                  serve=serve_anthropic, default_reply=DEFAULT_REPLY)


if __name__ == "__main__":
    main()
