"""A fake OpenAI-compatible Chat Completions API on 127.0.0.1 that replays a script of turns.

Design: the same as :mod:`tests.fakes.anthropic_server` (a stdlib
:class:`http.server.ThreadingHTTPServer`, HTTP/1.1 keep-alive, chunked SSE, the accept loop
on one background thread and one thread per connection), so one object serves trio tests
in-process and benchmarks from a separate process (``python -m tests.fakes.openai_server``);
the plumbing itself is in :mod:`tests.fakes._http`, and this module holds the wire format.
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

import contextlib
import itertools
import json
import ssl
from pathlib import Path
from typing import Any, Iterable, Mapping

from tests.fakes import _http
from tests.fakes._http import TRANSCRIPTS, RecordedRequest, Turn

__all__ = [
    "DEFAULT_REPLY",
    "TRANSCRIPTS",
    "FakeOpenAIServer",
    "RecordedRequest",
    "serve_openai",
    "transcript_events",
]

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


class _Handler(_http.FakeHandler):
    server: FakeOpenAIServer
    request_id_header = "x-request-id"

    def respond(self, turn: Turn | None, body: Any, n: int) -> None:
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
                self._send_stream(turn, _http.split_events(turn["sse"].encode()), n)
            elif request.get("stream") and not turn.get("json"):
                usage = bool((request.get("stream_options") or {}).get("include_usage"))
                self._send_stream(turn, _events(turn, model, n, usage), n)
            else:
                self.send_json(200, _completion(turn, model, n), turn.get("headers", {}), n)

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
        self.send_bytes(status, ctype, data, turn.get("headers", {}), n)

    def _send_stream(self, turn: Turn, events: list[bytes], n: int) -> None:
        extra: dict[int, bytes] = {}
        if turn.get("malformed_after") is not None:
            bad = turn.get("malformed", '{"id": "chatcmpl-fake", "choices": [{"ind')
            extra[turn["malformed_after"]] = f"data: {bad}\n\n".encode()
        self.send_events(turn, events, n, extra=extra, error_event=lambda: _data({"error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error", "param": None, "code": None, **turn.get("error", {})}}))


class FakeOpenAIServer(_http.FakeServer):
    """The server; use :func:`serve_openai` rather than constructing it directly.

    :attr:`base_url` is ``http://127.0.0.1:PORT/v1``, what an OpenAI-compatible client takes;
    :attr:`requests` holds every request received, in arrival order; :attr:`connections`
    counts the connections accepted so far; :meth:`enqueue` appends turns to the script.
    """

    handler = _Handler
    thread_name = "fake-openai"
    url_path = "/v1"


def serve_openai(
    script: Iterable[Turn] = (), *, default: Turn | None = None, port: int = 0,
    tls: ssl.SSLContext | None = None,
) -> contextlib.AbstractContextManager[FakeOpenAIServer]:
    """Serve ``script`` (turns as in the module docstring, one per request) for the block.

    On 127.0.0.1, port ``port`` (0: a free one). ``default`` is served once the script is
    exhausted (for benchmarks), else such a request gets a 400. The server and its threads
    are closed when the block exits. With ``tls``, HTTPS.
    """
    return _http.serving(FakeOpenAIServer, script, default=default, port=port, tls=tls)


def transcript_events(name: str | Path) -> list[bytes]:
    """The events of an SSE transcript file, each with its closing blank line."""
    path = Path(name)
    if not path.is_absolute():
        path = TRANSCRIPTS / path
    return _http.split_events(path.read_bytes())


def _data(obj: Any) -> bytes:
    return f"data: {json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}\n\n".encode()


def _text_pieces(value: Any, size: int) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return _http.pieces(value, size) if value else []
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
        parts = list(call["parts"]) if "parts" in call else _http.pieces(_arguments(call), size)
        chunks = [chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                         "function": {"name": call["name"], "arguments": ""}}]})]
        chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                   for p in parts]
        per_call.append(chunks)
    if turn.get("interleave"):
        for group in itertools.zip_longest(*per_call):
            events += [e for e in group if e is not None]
    else:
        for chunks in per_call:
            events += chunks
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
    _http.run_cli(argv, prog="python -m tests.fakes.openai_server", description=main.__doc__,
                  serve=serve_openai, default_reply=DEFAULT_REPLY)


if __name__ == "__main__":
    main()
