"""The Anthropic provider: the Messages API through the official SDK, streamed.

Design:

- One :class:`anthropic.AsyncAnthropic` per provider instance, built in ``__init__`` and shared
  by every session (a construction costs ~18 ms; the client keeps one connection pool).
  Importing this module costs ~0.9 s (the SDK), so the daemon's provider registry imports it
  lazily, on the first call that needs it.
- The request is built from the neutral :class:`ModelRequest`; content blocks are copied by
  whitelisting the API's fields, thinking blocks (and ``redacted_thinking``) go back exactly
  as they came, so their signatures stay valid (the API rejects a thinking block whose text
  or signature changed).
- Extended thinking: ``request.think`` (a budget in tokens) becomes ``thinking: {"type":
  "enabled", "budget_tokens": N}``. The API's minimum budget is 1024, so a smaller positive
  budget is raised to 1024; ``None`` or a budget of 0 or less means no thinking. The API
  also requires ``max_tokens > budget_tokens`` (the budget is part of the output): when the
  request's ``max_tokens`` is not above the budget, ``max_tokens`` becomes budget + the
  request's ``max_tokens``, so the answer after the thinking keeps the room the caller
  asked for. (The sum may exceed a model's output limit; the API then answers 400, which
  comes back as a :class:`ProviderError` naming the limit.)
- Prompt caching: the cache prefix is read in the order tools, system, messages, and the API
  caches up to each ``cache_control`` breakpoint (at most 4 per request). We set 3, each
  ``{"type": "ephemeral"}``: on the last tool definition (the tools alone, for when the system
  prompt changes), on the system prompt (sent as a list of one text block to carry it), and
  on the last cacheable block of the last message (not a thinking block, which cannot carry
  one). The last-message breakpoint moves forward every turn; the API finds the previous
  turn's entry by looking back from it (up to 20 blocks), so a long session re-reads its
  history from the cache and pays full price only for what the last turn added. For that
  the history must be sent byte for byte the same each turn, so a message whose content is
  a string is always sent as the one text block it stands for (it becomes a list when it
  is last and carries the mark). The marks go on the copies sent, never on the request's
  messages, and a ``cache_control`` arriving on a passed-through block is dropped, so the
  count stays ours.
- The body is built here as JSON bytes (:func:`json_body`, the SDK's own layout: the same
  bytes ``messages.create()`` would send) and sent with the SDK's lower-level
  ``client.post("/v1/messages", content=..., stream=True)``: the SDK still adds its headers
  and the key, resolves the base URL, retries, and turns error statuses into exceptions, but
  no longer walks and copies the whole history against its parameter types at every call
  (``create()`` does: ~1 ms for a 40-message history). The SSE body of the successful response is then
  read here, from ``response.aiter_bytes()`` inside ``aclosing``, through a small sans-IO
  decoder (:class:`SSEDecoder`) and fold (:class:`_Fold`) working on plain dicts. Not the
  SDK's event iterator, nor its ``MessageStream`` helper, because: (1) they stack more async
  generators on httpx2's, and when iteration stops early (an ``event: error``, a malformed
  event) those are left unfinished and trio reports each one with a ``ResourceWarning`` when
  it is collected; (2) they build a pydantic model per event (~70 µs each), and
  ``MessageStream`` re-parses the partial tool JSON at every ``input_json_delta`` (quadratic
  in the input size); (3) folding here lets us notice a stream that ends without
  ``message_stop``. httpx2 itself leaves one generator unfinished when its byte iterator is
  closed early, so after a failure inside the stream the body is drained to its end (an
  ``event: error`` is the last event anyway) rather than abandoned.
- Retries are the SDK's (``max_retries``; 408, 409, 429 and 5xx including 529, honouring
  ``retry-after``/``retry-after-ms``), and only happen before the first byte of the stream:
  once deltas have reached ``on_delta`` a failure is final, since they cannot be taken back.
- Errors are translated once, here, into :class:`ProviderError` with a one-line message, e.g.
  ``anthropic: 529 overloaded_error: Overloaded (after 2 retries)``. Cancellation
  (``trio.Cancelled``, a ``BaseException``) is never caught: it propagates, and the response
  (so its connection) is closed on the way out.
- What had arrived when a stream is cancelled is already with the caller: each chunk read
  from the socket is decoded and every text and thinking delta in it goes to ``on_delta``
  before the next read, with no checkpoint in between, and the read is the only place a
  cancellation can land. So the deltas the caller has collected are the partial reply. Not
  reported: a tool call's input still being streamed (it could not be run anyway) and the
  incomplete SSE event at the end of the last chunk, if any.

Error mapping::

    APIStatusError 401, 403, 404          -> ProviderUnavailable (bad key, no access,
                                             unknown model)
    APIStatusError (other statuses)       -> ProviderError "anthropic: 529 overloaded_error: ..."
    ``event: error`` inside the stream    -> ProviderError "anthropic: overloaded_error during
                                             the stream: Overloaded"
    APITimeoutError                       -> ProviderError "anthropic: request timed out ..."
    APIConnectionError                    -> ProviderError "anthropic: cannot reach ..."
    httpx2.TimeoutException mid-stream    -> ProviderError "anthropic: stream timed out ..."
    httpx2.TransportError mid-stream      -> ProviderError "anthropic: stream cut off ..."
    no message_stop / malformed events    -> ProviderError
    missing key at construction           -> ProviderUnavailable "ANTHROPIC_API_KEY is not set ..."
"""

from __future__ import annotations

import json
import os
import time
from contextlib import aclosing
from dataclasses import replace
from typing import Any, Mapping

import anthropic
import httpx2
from anthropic.types import Message, RawMessageStreamEvent

from ._base import (
    DeltaCallback,
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
)
from ._sse import SSEDecoder
from ._transport import plain_transport
from ._wire import after_retries, json_body, short

__all__ = ["AnthropicProvider"]

#: Statuses that mean the provider cannot be used as configured, not that this call failed.
_UNAVAILABLE_STATUSES = frozenset({401, 403, 404})

#: The smallest ``thinking.budget_tokens`` the API accepts.
_MIN_THINKING_BUDGET = 1024

#: Blocks that cannot carry ``cache_control``.
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
               "cache_creation_input_tokens")


#: What the SDK sends as the key to a server that needs none.
_NO_KEY = "no-key-needed"


class AnthropicProvider:
    """Claude models through the Anthropic Messages API.

    Args:
        api_key: the API key; defaults to ``$ANTHROPIC_API_KEY``; ``""``: none is needed.
        base_url: the API's base URL; defaults to ``$ANTHROPIC_BASE_URL``, then the SDK's
            default (``https://api.anthropic.com``).
        max_retries: retries the SDK makes on 408/409/429/5xx/connection errors before the
            stream starts.
        timeout: seconds without progress (connect is capped at 5 s) before a call fails.

    Error handling:
        The constructor raises :class:`ProviderUnavailable` when no key is given and
        ``ANTHROPIC_API_KEY`` is unset or empty, so the registry learns it at once.
        :meth:`stream` raises :class:`ProviderError` (see the module docstring for the map).

    Resource handling:
        Owns one SDK client and its connection pool; :meth:`aclose` releases them.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        max_retries: int = 2,
        timeout: float = 600.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        # "" is a provider that needs no key (a local gateway, api_key_env = ""): the SDK
        # still wants one, so it gets a placeholder the server ignores.
        key = _NO_KEY if api_key == "" else api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ProviderUnavailable(
                "ANTHROPIC_API_KEY is not set (export it, or configure an API key for the "
                "anthropic provider)"
            )
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        timeouts = httpx2.Timeout(timeout, connect=min(timeout, 5.0))
        # A server over plain HTTP (a local one, a gateway) gets the lean transport; the
        # SDK's own client serves the rest (its default URL, TLS, proxies).
        transport = plain_transport(url) if url is not None else None
        self._client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=url,
            max_retries=max_retries,
            timeout=timeouts,
            default_headers=dict(headers) if headers else None,
            http_client=(
                httpx2.AsyncClient(transport=transport, timeout=timeouts, follow_redirects=True)
                if transport is not None else None
            ),
        )
        self._closed = False

    @property
    def base_url(self) -> str:
        """The URL requests go to."""
        return str(self._client.base_url)

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={self.base_url!r})"

    async def stream(self, request: ModelRequest, on_delta: DeltaCallback) -> ModelReply:
        """Call the model, report text and thinking deltas as they arrive, return the reply.

        Error handling:
            Raises :class:`ProviderError` once the SDK's retries are exhausted or the stream
            fails midway; :class:`ProviderUnavailable` on 401/403/404. Cancellation
            propagates unchanged and closes the stream's connection. ``on_delta`` must not
            block or raise; if it raises, that exception propagates as is.

        Cancellation:
            Every text and reasoning delta received before the cancellation has been passed
            to ``on_delta`` by the time ``Cancelled`` propagates, so the caller can record the
            partial reply from the deltas it collected (see the module docstring).
        """
        if self._closed:
            raise ProviderError("anthropic: the provider is closed")
        params = _request_params(request)
        started = time.monotonic()
        first: float | None = None
        try:
            body = json_body(params)
        except ValueError as exc:
            raise ProviderError(f"anthropic: cannot send the request ({exc})") from None
        try:
            # The body is ready: the SDK sends it as it is (its headers, auth, retries and
            # errors), without checking and copying it against its types as create() does.
            stream = await self._client.post(
                "/v1/messages", content=body, cast_to=Message, stream=True,
                stream_cls=anthropic.AsyncStream[RawMessageStreamEvent])
        except anthropic.APIStatusError as exc:
            raise _status_error(exc) from exc
        except anthropic.APITimeoutError as exc:
            raise ProviderError(
                f"anthropic: request timed out{_after_retries(exc.request)}") from exc
        except anthropic.APIConnectionError as exc:
            cause = exc.__cause__
            why = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            raise ProviderError(
                f"anthropic: cannot reach {self.base_url} ({why}){_after_retries(exc.request)}"
            ) from exc
        except anthropic.AnthropicError as exc:
            raise ProviderError(f"anthropic: {type(exc).__name__}: {short(str(exc))}") from exc

        decoder = SSEDecoder()
        fold = _Fold()
        failure: ProviderError | None = None
        async with stream:  # closes the response, also on error and cancellation
            try:
                # aclosing: leaving early closes httpx2's byte iterator at once, not at GC.
                async with aclosing(stream.response.aiter_bytes()) as chunks:
                    async for chunk in chunks:
                        if failure is not None:
                            # Drain instead of leaving: httpx2's transport stream does not
                            # close the httpcore2 iterator under it when closed early, and
                            # trio reports that generator (ResourceWarning) when it is
                            # collected. An `event: error` is the last event anyway, and a
                            # drained connection goes back to the pool.
                            continue
                        for name, data in decoder.feed(chunk):
                            try:
                                delta = fold.feed(name, data)
                            except ProviderError as exc:
                                failure = exc
                                break
                            if first is None and fold.content_started:
                                first = time.monotonic() - started
                            if delta is not None:
                                on_delta(*delta)
            except httpx2.TimeoutException as exc:
                raise failure or ProviderError(
                    f"anthropic: stream timed out waiting for data ({type(exc).__name__})"
                ) from exc
            except httpx2.TransportError as exc:
                raise failure or ProviderError(
                    f"anthropic: stream cut off ({type(exc).__name__}: {exc})") from exc
        if failure is not None:
            raise failure
        return replace(fold.reply(), retries=_retries_taken(stream.response.request), first_token=first)

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._client.close()


# -- request ----------------------------------------------------------------------------------


def _request_params(request: ModelRequest) -> dict[str, Any]:
    max_tokens = request.max_tokens
    thinking: dict[str, Any] | None = None
    if request.think is not None and request.think > 0:
        budget = max(request.think, _MIN_THINKING_BUDGET)
        if max_tokens <= budget:  # the API wants max_tokens > budget_tokens
            max_tokens = budget + request.max_tokens
        thinking = {"type": "enabled", "budget_tokens": budget}
    # In the order messages.create() would send them.
    params: dict[str, Any] = {
        "max_tokens": max_tokens,
        "messages": [_api_message(m) for m in request.messages],
        "model": request.model,
        "stream": True,
    }
    if request.system:
        params["system"] = [{"type": "text", "text": request.system,
                             "cache_control": _ephemeral()}]
    if thinking is not None:
        params["thinking"] = thinking
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        params["tools"][-1]["cache_control"] = _ephemeral()
    if params["messages"]:
        _mark_last_block(params["messages"][-1])
    return params


def _ephemeral() -> dict[str, str]:
    return {"type": "ephemeral"}


def _mark_last_block(message: dict[str, Any]) -> None:
    """Put a cache breakpoint on the message's last block that can carry one (in place: the
    message is already our copy)."""
    content = message["content"]
    if isinstance(content, str):  # only an empty one, which the API rejects anyway
        return
    for block in reversed(content):
        if block.get("type") not in _UNCACHEABLE:
            block["cache_control"] = _ephemeral()
            return


def _api_message(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, str):
        # As the one text block it stands for, so that a message is sent the same whether it
        # is the last (where it carries the cache breakpoint) or history: same prefix bytes.
        if not content:
            return {"role": message["role"], "content": content}
        return {"role": message["role"], "content": [{"type": "text", "text": content}]}
    blocks = [_api_block(b) for b in content]
    # The API rejects empty text blocks; a reply may have held one (text before a tool call).
    blocks = [b for b in blocks if not (b["type"] == "text" and not b["text"])]
    return {"role": message["role"], "content": blocks}


def _api_block(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    try:
        if kind == "text":
            return {"type": "text", "text": block["text"]}
        if kind == "tool_use":
            return {"type": "tool_use", "id": block["id"], "name": block["name"],
                    "input": block["input"]}
        if kind == "tool_result":
            content = block.get("content", "")
            out: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": block["tool_use_id"],
                "content": content,
            }
            if block.get("is_error"):
                out["is_error"] = True
            return out
        if kind == "thinking":
            # Unchanged: the signature covers the thinking text.
            return {"type": "thinking", "thinking": block["thinking"],
                    "signature": block["signature"]}
        if kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": block["data"]}
    except KeyError as exc:
        raise ProviderError(
            f"anthropic: cannot send a {kind} block without {exc.args[0]!r}") from None
    # A kind we do not know (an image, say): the API's own shape, passed through, less any
    # cache breakpoint (we place those, and the API allows only 4).
    return {k: v for k, v in block.items() if k != "cache_control"}


# -- reply --------------------------------------------------------------------------------------


class _Fold:
    """Folds stream events into neutral blocks, stop reason and usage, sans IO.

    :meth:`feed` returns the ``(kind, text)`` delta to report, if the event carries one, so
    that the caller's ``on_delta`` runs outside the fold (its errors are not ours).
    """

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        # Text, thinking and tool JSON arrive in pieces; joined once, at content_block_stop.
        self._parts: dict[int, list[str]] = {}
        self._stop_reason: str | None = None
        self._usage: dict[str, int] = {}
        self._stopped = False
        #: Whether the reply's content has begun (its first block started).
        self.content_started = False

    def feed(self, name: str, data: str) -> tuple[str, str] | None:
        if name == "ping":
            return None
        try:
            event = json.loads(data)
            kind = event.get("type", name)
            if kind == "content_block_delta":
                return self._delta(event["index"], event["delta"])
            if kind == "content_block_start":
                self._start_block(event["index"], event["content_block"])
            elif kind == "content_block_stop":
                self._stop_block(event["index"])
            elif kind == "message_start":
                self._take_usage(event["message"].get("usage"))
            elif kind == "message_delta":
                self._stop_reason = event["delta"].get("stop_reason")
                # Counts on message_delta are cumulative: they replace message_start's.
                self._take_usage(event.get("usage"))
            elif kind == "message_stop":
                self._stopped = True
            elif kind == "error":
                error = event.get("error") or {}
                raise ProviderError(
                    f"anthropic: {error.get('type', 'error')} during the stream: "
                    f"{error.get('message', '')}"
                )
            # Unknown events: ignored, as the API's versioning policy asks.
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProviderError(
                f"anthropic: malformed {name} event ({type(exc).__name__}: {exc})") from None
        return None

    def _delta(self, index: int, delta: Mapping[str, Any]) -> tuple[str, str] | None:
        dtype = delta["type"]
        if dtype == "text_delta":
            self._parts[index].append(delta["text"])
            return ("text", delta["text"])
        if dtype == "thinking_delta":
            self._parts[index].append(delta["thinking"])
            return ("reasoning", delta["thinking"])
        if dtype == "input_json_delta":
            self._parts[index].append(delta["partial_json"])
        elif dtype == "signature_delta":
            self._blocks[index]["signature"] = delta["signature"]
        # citations_delta and unknown deltas: nothing the loop keeps.
        return None

    def _start_block(self, index: int, block: Mapping[str, Any]) -> None:
        self.content_started = True
        btype = block["type"]
        if btype == "text":
            self._blocks[index] = {"type": "text", "text": ""}
            self._parts[index] = [block.get("text", "")]
        elif btype == "thinking":
            self._blocks[index] = {"type": "thinking", "thinking": "",
                                   "signature": block.get("signature") or ""}
            self._parts[index] = [block.get("thinking", "")]
        elif btype == "tool_use":
            self._blocks[index] = {"type": "tool_use", "id": block["id"], "name": block["name"],
                                   "input": {}}
            self._parts[index] = []
        elif btype == "redacted_thinking":
            self._blocks[index] = {"type": "redacted_thinking", "data": block["data"]}
        else:
            self._blocks[index] = dict(block)

    def _stop_block(self, index: int) -> None:
        block = self._blocks.get(index)
        parts = self._parts.pop(index, None)
        if block is None or parts is None:
            return
        joined = "".join(parts)
        btype = block["type"]
        if btype == "text":
            block["text"] = joined
        elif btype == "thinking":
            block["thinking"] = joined
        elif btype == "tool_use":
            try:
                args = json.loads(joined) if joined else {}
            except ValueError as exc:
                raise ProviderError(
                    f"anthropic: tool_use {block['name']!r} input is not JSON ({exc})") from None
            if not isinstance(args, dict):
                raise ProviderError(
                    f"anthropic: tool_use {block['name']!r} input is not an object")
            block["input"] = args

    def _take_usage(self, usage: Mapping[str, Any] | None) -> None:
        if not usage:
            return
        for key in _USAGE_KEYS:
            value = usage.get(key)
            if value is not None:
                self._usage[key] = int(value)

    def reply(self) -> ModelReply:
        if not self._stopped or self._parts:
            raise ProviderError("anthropic: stream ended before message_stop")
        if self._stop_reason is None:
            raise ProviderError("anthropic: reply has no stop_reason")
        content = tuple(self._blocks[i] for i in sorted(self._blocks))
        return ModelReply(content=content, stop_reason=self._stop_reason, usage=dict(self._usage))


# -- errors -------------------------------------------------------------------------------------


def _retries_taken(request: httpx2.Request | None) -> int:
    # The SDK numbers its attempts in this header; the failing attempt's request carries it.
    if request is None:
        return 0
    try:
        return int(request.headers.get("x-stainless-retry-count", 0))
    except ValueError:
        return 0


def _after_retries(request: httpx2.Request | None) -> str:
    return after_retries(_retries_taken(request))


def _status_error(exc: anthropic.APIStatusError) -> ProviderError:
    etype = exc.type or "error"
    message = exc.api_message or short(exc.message)
    status = exc.status_code
    text = f"anthropic: {status} {etype}: {message}{_after_retries(exc.request)}"
    if status in _UNAVAILABLE_STATUSES:
        return ProviderUnavailable(text)
    return ProviderError(text)
