"""OpenAI-compatible providers: ``POST {base_url}/chat/completions`` streamed, over httpx2.

One class serves OpenAI itself and the servers that copy its Chat Completions API (Ollama,
vLLM, llama.cpp, LM Studio, OpenRouter, ...). No SDK: the request is a JSON body, the reply
an SSE stream of ``chat.completion.chunk`` objects ending in ``data: [DONE]``.

Design:

- One :class:`httpx2.AsyncClient` per provider instance, shared by every session (httpx2 is
  the HTTP stack the Anthropic SDK and MCP use too: one stack, one kind of pool). Idle
  connections are kept for 60 s rather than httpx2's default 5 s, because an agent's turns
  are separated by tool runs that often take longer than 5 s; a connection the server has
  closed meanwhile is noticed by the pool, and the race that remains (closed just as it is
  reused) fails before the stream starts, where it is retried.
- The body of every successful response is read **to its end**, past ``data: [DONE]``:
  leaving at ``[DONE]`` closes the connection instead of returning it to the pool (101
  streams would open 101 connections instead of 1). That drain is bounded
  (:data:`_DRAIN_SECONDS`): a server that holds the body open after ``[DONE]`` costs its
  connection, not the call. The same bounded drain follows a failure inside the stream.
- The stream is cut short by cancelling a cancel scope around the read, never by leaving
  the ``async for``: httpx2 closes its byte iterator early without closing the generator
  beneath it, which trio then reports (``ResourceWarning``) when it is collected, whereas a
  cancellation raised at the socket unwinds every generator of the chain and closes the
  connection.
- Bytes become events through a small sans-IO SSE decoder (:class:`SSEDecoder`) and events
  become the reply through a sans-IO fold (:class:`_Fold`) on plain dicts.
- Retries happen only before the stream starts (once a delta has reached ``on_delta`` it
  cannot be taken back): on 429, 5xx (529 included) and transport errors (refused, reset,
  connect timeout, a pooled connection closed under us), at most ``max_retries`` times.
  The wait honours ``retry-after-ms`` then ``retry-after`` (seconds or an HTTP date), capped
  by ``retry_max``; without them it is ``retry_base * 2**n`` (capped) less up to 25 %
  jitter. A read timeout before the response is not retried: a server that said nothing
  for ``timeout`` seconds would most likely do it again, and the user would wait 3x longer.
- Cancellation (``trio.Cancelled``) is never caught: it propagates, and the response (so
  its connection) is closed on the way out, at once.

Request mapping (neutral :class:`ModelRequest` -> Chat Completions):

- ``system`` -> a first ``{"role": "system"}`` message (left out when empty).
- user text blocks -> one user message (several text blocks joined with a blank line).
- ``tool_result`` blocks -> one ``{"role": "tool", "tool_call_id", "content"}`` message each,
  placed before the user's text of the same message (the API wants tool messages right
  after the assistant message that called them). A list content keeps its text blocks,
  joined with newlines. ``is_error`` prefixes the content with ``"Error: "``: the API has
  no error flag, and the model should not mistake a failure for output.
- assistant text -> ``content``; ``tool_use`` -> ``tool_calls`` ``[{id, type: "function",
  function: {name, arguments: JSON text}}]``. With tool calls and no text, ``content`` is
  ``null`` (Gemini's and Ollama's endpoints reject ``""`` there). ``thinking`` and
  ``redacted_thinking`` blocks (from an Anthropic model earlier in the session) are dropped:
  they cannot be replayed elsewhere.
- tools -> ``[{type: "function", function: {name, description, parameters}}]``.
- the reply's length limit is sent as ``max_completion_tokens`` to OpenAI itself (its
  reasoning models, o-series and gpt-5, reject ``max_tokens``; the others take either) and
  as ``max_tokens`` elsewhere, which compatible servers (Ollama, llama.cpp, vLLM) know. A
  server that answers 400 naming the field it was sent and the other one is asked again,
  once, with the other, which it keeps for the rest of the daemon's life.
- ``think`` (a token budget, or None) -> ``reasoning_effort``: ``"low"`` below 4,096,
  ``"medium"`` below 16,384, else ``"high"``; sent only when ``think`` is set, since models
  without reasoning reject the parameter.
- always ``stream: true`` and ``stream_options: {include_usage: true}``.

Reply mapping:

- ``delta.content`` (and ``delta.refusal``) -> ``on_delta("text", ...)`` and one text block.
- ``delta.reasoning_content`` or ``delta.reasoning`` (vLLM, DeepSeek, Ollama, OpenRouter)
  -> ``on_delta("reasoning", ...)`` only: reasoning text is streamed, not kept in the
  history (those servers do not take it back).
- ``delta.tool_calls`` -> ``tool_use`` blocks, assembled by ``index`` across chunks (id and
  name usually in the first piece, ``arguments`` JSON text in any number of pieces, several
  calls possibly interleaved). Also handled: a call without ``index`` (Gemini: a new slot
  per call), a new id at an index whose call is complete (Ollama reuses index 0 for every
  parallel call), a call without an id (one is made up). Arguments must be a JSON object,
  else :class:`ProviderError` (unless the reply was cut at ``max_tokens``: then the call
  keeps ``{}`` and the loop answers it as not run).
- ``finish_reason``: ``stop`` -> ``end_turn``, ``tool_calls`` (and legacy ``function_call``)
  -> ``tool_use``, ``length`` -> ``max_tokens``, ``content_filter`` -> ``refusal``, others
  passed through. A reply with tool calls is ``tool_use`` even if the server says ``stop``.
- ``usage`` (the last chunk, thanks to ``include_usage``): ``completion_tokens`` ->
  ``output_tokens``; ``prompt_tokens_details.cached_tokens`` (or DeepSeek's
  ``prompt_cache_hit_tokens``) -> ``cache_read_input_tokens``; ``input_tokens`` is
  ``prompt_tokens`` **minus** the cached tokens, because OpenAI counts cached tokens inside
  ``prompt_tokens`` while the neutral usage (Anthropic's) does not, and cost is computed as
  ``input * price + cache_read * cache_price``.
- A server that ignores ``stream: true`` and answers one ``application/json`` completion is
  accepted: its text is reported as one delta.

Error mapping (``NAME`` is the provider's configured name, ``openai`` by default)::

    status 401, 403, 404                  -> ProviderUnavailable "NAME: 401 invalid_api_key: ..."
    status 429, 5xx, after the retries    -> ProviderError "NAME: 429 rate_limit_exceeded: ...
                                             (after 2 retries)"
    other statuses                        -> ProviderError "NAME: 400 invalid_request_error: ..."
    transport error, after the retries    -> ProviderError "NAME: cannot reach URL (...)"
    no response within ``timeout``        -> ProviderError "NAME: no response within 600 s ..."
    ``{"error": ...}`` inside the stream  -> ProviderError "NAME: server_error during the
                                             stream: ..."
    no data within ``timeout`` mid-stream -> ProviderError "NAME: stream timed out ..."
    connection lost mid-stream            -> ProviderError "NAME: stream cut off ..."
    malformed event, bad tool arguments,
    body ending before ``[DONE]``         -> ProviderError
    an unsendable block (an image, say)   -> ProviderError, before anything is sent
    a base_url that is not http(s)        -> ProviderUnavailable, at construction

The error code is the body's ``error.code`` when it is a string, else ``error.type``
(OpenAI's shape is ``{"error": {"message", "type", "param", "code"}}``; vLLM's and others'
variants are read as well).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import httpx2
import trio

from ._base import (
    DeltaCallback,
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
)
from ._sse import SSEDecoder
from ._transport import plain_transport
from ._wire import after_retries, json_body, json_text, short

__all__ = ["OpenAIProvider"]

#: Statuses that mean the provider cannot be used as configured, not that this call failed.
_UNAVAILABLE_STATUSES = frozenset({401, 403, 404})

#: How long the rest of a body is read after ``[DONE]`` or a failure before it is cut.
_DRAIN_SECONDS = 1.0

#: How long idle connections stay in the pool (httpx2's default is 5 s; see the docstring).
_KEEPALIVE_SECONDS = 60.0

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

_NO_DELTAS: tuple[tuple[str, str], ...] = ()


class OpenAIProvider:
    """Models behind an OpenAI-compatible Chat Completions API, streamed.

    Args:
        base_url: the API's base URL, up to the version: ``https://api.openai.com/v1``,
            ``http://127.0.0.1:11434/v1`` (Ollama). Requests go to
            ``{base_url}/chat/completions``.
        api_key: sent as ``Authorization: Bearer KEY``; None (or empty) sends no
            ``Authorization`` header, for local servers that need none.
        headers: extra request headers (they override the defaults, ``Authorization``
            included, e.g. for a gateway that wants ``api-key``).
        timeout: seconds without progress (no response, or no data mid-stream) before a
            call fails.
        connect_timeout: seconds to open a connection.
        max_retries: retries on 429, 5xx and transport errors before the stream starts.
        retry_base: the first backoff, in seconds, when the server gives no ``retry-after``;
            doubled at every retry.
        retry_max: the longest wait between attempts, ``retry-after`` included.
        name: the provider's name, first word of every error message.

    Error handling:
        :meth:`stream` raises :class:`ProviderError`, or :class:`ProviderUnavailable` on
        401/403/404 (see the module docstring for the map). The constructor does no IO; it
        raises :class:`ProviderUnavailable` for a ``base_url`` that is not http(s), and
        nothing for a missing key: servers that need one answer 401.

    Resource handling:
        Owns one :class:`httpx2.AsyncClient` and its connection pool; :meth:`aclose`
        releases them.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 5.0,
        max_retries: int = 2,
        retry_base: float = 0.5,
        retry_max: float = 8.0,
        name: str = "openai",
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ProviderUnavailable(
                f"{name}: base_url {base_url!r} must start with http:// or https://")
        self._base_url = base_url.rstrip("/")
        self._url = f"{self._base_url}/chat/completions"
        #: The name the reply's length limit goes by here (see the module docstring).
        self._limit_field = "max_completion_tokens" if httpx2.URL(self._base_url).host == "api.openai.com" else "max_tokens"
        self._name = name
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._retry_base = retry_base
        self._retry_max = retry_max
        all_headers = httpx2.Headers({"content-type": "application/json"})
        if api_key:
            all_headers["authorization"] = f"Bearer {api_key}"
        all_headers.update(headers or {})  # case-insensitive: replaces, never duplicates
        self._client = httpx2.AsyncClient(
            headers=all_headers,
            timeout=httpx2.Timeout(timeout, connect=min(timeout, connect_timeout)),
            limits=httpx2.Limits(max_connections=100, max_keepalive_connections=20,
                                 keepalive_expiry=_KEEPALIVE_SECONDS),
            # A server over plain HTTP (Ollama, vLLM, llama.cpp here or on the network) gets
            # the lean transport; httpx2's own serves TLS and proxies.
            transport=plain_transport(self._base_url, keepalive_expiry=_KEEPALIVE_SECONDS),
        )
        self._closed = False

    @property
    def base_url(self) -> str:
        """The base URL, without a trailing slash."""
        return self._base_url

    @property
    def name(self) -> str:
        """The provider's name, as error messages start."""
        return self._name

    def __repr__(self) -> str:
        return f"OpenAIProvider(base_url={self._base_url!r}, name={self._name!r})"

    async def stream(self, request: ModelRequest, on_delta: DeltaCallback) -> ModelReply:
        """Call the model, report text and reasoning deltas as they arrive, return the reply.

        Error handling:
            Raises :class:`ProviderError` once the retries are exhausted or the stream fails
            midway; :class:`ProviderUnavailable` on 401/403/404. Cancellation propagates
            unchanged and closes the stream's connection at once. ``on_delta`` must not
            block or raise; if it raises, the stream is cut and that exception propagates
            as is.

        Resource handling:
            The response is read to its end (its connection goes back to the pool) or, on
            failure and cancellation, closed before this returns.
        """
        if self._closed:
            raise ProviderError(f"{self._name}: the provider is closed")
        started = time.monotonic()
        response, retries = await self._send_request(request)
        try:
            if response.headers.get("content-type", "").startswith("application/json"):
                reply, first = await self._read_json(response, on_delta)
            else:
                reply, first = await self._read_stream(response, on_delta)
            return replace(reply, retries=retries, first_token=first - started if first is not None else None)
        finally:
            await response.aclose()  # a no-op once the body has been read or cut

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._client.aclose()

    # -- before the stream: send, retry -----------------------------------------------------

    async def _send_request(self, request: ModelRequest) -> tuple[httpx2.Response, int]:
        """Send ``request`` with this server's name for the length limit; on a 400 that says
        the other name is the one it takes, once more with that one. The response, and the
        retries it took."""
        for tried in range(2):
            body = _request_body(request, self._name)
            body[self._limit_field] = body.pop("max_tokens")
            try:
                encoded = json_body(body)
            except ValueError as exc:
                raise ProviderError(f"{self._name}: cannot send the request ({exc})") from None
            try:
                return await self._send(encoded)
            except ProviderError as exc:
                other = "max_tokens" if self._limit_field == "max_completion_tokens" else "max_completion_tokens"
                if tried or " 400 " not in exc.message or other not in exc.message:
                    raise
                self._limit_field = other
        raise AssertionError("unreachable")

    async def _send(self, body: bytes) -> tuple[httpx2.Response, int]:
        """POST until a 2xx response (its body unread) or a final error; the response and
        the retries it took."""
        attempt = 0
        while True:
            after = after_retries(attempt)
            try:
                response = await self._client.send(
                    self._client.build_request("POST", self._url, content=body), stream=True)
            except (httpx2.ReadTimeout, httpx2.WriteTimeout) as exc:
                raise ProviderError(
                    f"{self._name}: no response within {self._timeout:g} s "
                    f"({type(exc).__name__}){after}") from exc
            except httpx2.TransportError as exc:
                if attempt < self._max_retries:
                    await trio.sleep(self._backoff(attempt, None))
                    attempt += 1
                    continue
                raise ProviderError(
                    f"{self._name}: cannot reach {self._base_url} "
                    f"({type(exc).__name__}: {short(str(exc)) or 'no detail'}){after}"
                ) from exc
            except httpx2.HTTPError as exc:
                raise ProviderError(
                    f"{self._name}: request failed ({type(exc).__name__}: {short(str(exc))})"
                ) from exc
            if 200 <= response.status_code < 300:
                return response, attempt
            raw = await _read_error_body(response)
            status = response.status_code
            if (status == 429 or status >= 500) and attempt < self._max_retries:
                await trio.sleep(self._backoff(attempt, response.headers))
                attempt += 1
                continue
            raise _status_error(self._name, status, response.reason_phrase, raw, after)

    def _backoff(self, attempt: int, headers: httpx2.Headers | None) -> float:
        """Seconds to wait before retry number ``attempt + 1``."""
        asked = _retry_after(headers) if headers is not None else None
        if asked is not None:
            return min(asked, self._retry_max)
        delay = min(self._retry_base * 2.0 ** attempt, self._retry_max)
        return delay * (1.0 - 0.25 * random.random())

    # -- the stream -------------------------------------------------------------------------

    async def _read_stream(self, response: httpx2.Response, on_delta: DeltaCallback) -> tuple[ModelReply, float | None]:
        """The reply, and when (``time.monotonic``) its content began."""
        decoder = SSEDecoder()
        fold = _Fold(self._name)
        first: float | None = None
        failure: BaseException | None = None
        # Cancelled (its deadline set) to cut the body short once we no longer need it.
        with trio.CancelScope() as cut:
            try:
                async with aclosing(response.aiter_bytes()) as chunks:
                    async for chunk in chunks:
                        if failure is not None or fold.done:
                            continue  # draining, so that the connection can be reused
                        for name, data in decoder.feed(chunk):
                            try:
                                deltas = fold.feed(name, data)
                            except ProviderError as exc:
                                failure = exc
                                break
                            if first is None and fold.content_started:
                                first = time.monotonic()
                            try:
                                for delta in deltas:
                                    on_delta(*delta)
                            except Exception as exc:  # the caller's: cut now, re-raise below
                                failure = exc
                                cut.cancel()
                                break
                            if fold.done:
                                break
                        if failure is not None or fold.done:
                            cut.deadline = min(cut.deadline, trio.current_time() + _DRAIN_SECONDS)
            except httpx2.TimeoutException as exc:
                if failure is None and not fold.done:
                    raise ProviderError(
                        f"{self._name}: stream timed out waiting for data "
                        f"({type(exc).__name__})") from exc
            except httpx2.TransportError as exc:
                if failure is None and not fold.done:
                    raise ProviderError(
                        f"{self._name}: stream cut off ({type(exc).__name__}: "
                        f"{short(str(exc)) or 'no detail'})") from exc
            except httpx2.HTTPError as exc:  # a body that cannot be decoded, say
                if failure is None and not fold.done:
                    raise ProviderError(
                        f"{self._name}: stream failed ({type(exc).__name__}: "
                        f"{short(str(exc))})") from exc
        if failure is not None:
            raise failure
        return fold.reply(), first

    async def _read_json(self, response: httpx2.Response, on_delta: DeltaCallback) -> tuple[ModelReply, float | None]:
        """A server that ignored ``stream: true``: one chat.completion object (its content
        begins when it has all arrived)."""
        try:
            raw = await response.aread()
        except httpx2.TimeoutException as exc:
            raise ProviderError(
                f"{self._name}: stream timed out waiting for data ({type(exc).__name__})") from exc
        except httpx2.TransportError as exc:
            raise ProviderError(
                f"{self._name}: stream cut off ({type(exc).__name__}: {exc})") from exc
        except httpx2.HTTPError as exc:
            raise ProviderError(
                f"{self._name}: stream failed ({type(exc).__name__}: {short(str(exc))})") from exc
        first = time.monotonic()
        fold = _Fold(self._name)
        for delta in fold.feed_completion(raw.decode("utf-8", errors="replace")):
            on_delta(*delta)
        return fold.reply(), first


# -- request ----------------------------------------------------------------------------------


def _request_body(request: ModelRequest, name: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        role, content = message["role"], message["content"]
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
        elif role == "assistant":
            messages.append(_assistant_message(content, name))
        else:
            messages.extend(_user_messages(role, content, name))
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "max_tokens": request.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {"type": "function",
             "function": {"name": t.name, "description": t.description,
                          "parameters": t.input_schema}}
            for t in request.tools
        ]
    if request.think is not None:
        body["reasoning_effort"] = _reasoning_effort(request.think)
    return body


def _reasoning_effort(budget: int) -> str:
    if budget < 4096:
        return "low"
    if budget < 16384:
        return "medium"
    return "high"


def _assistant_message(blocks: Any, name: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        try:
            if kind == "text":
                if block["text"]:
                    texts.append(block["text"])
            elif kind == "tool_use":
                calls.append({
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"],
                                 "arguments": json_text(block["input"])},
                })
            elif kind in ("thinking", "redacted_thinking"):
                continue  # another vendor's private reasoning: cannot be replayed here
            else:
                raise ProviderError(f"{name}: cannot send a {kind} block in an assistant message")
        except KeyError as exc:
            raise ProviderError(f"{name}: cannot send a {kind} block without {exc.args[0]!r}") from None
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        out["tool_calls"] = calls
    elif out["content"] is None:
        out["content"] = ""
    return out


def _user_messages(role: str, blocks: Any, name: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        try:
            if kind == "text":
                texts.append(block["text"])
            elif kind == "tool_result":
                content = _result_text(block.get("content", ""), name)
                if block.get("is_error"):
                    content = f"Error: {content}" if content else "Error"
                results.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                                "content": content})
            else:
                raise ProviderError(f"{name}: cannot send a {kind} block in a {role} message")
        except KeyError as exc:
            raise ProviderError(f"{name}: cannot send a {kind} block without {exc.args[0]!r}") from None
    if texts:
        results.append({"role": role, "content": "\n\n".join(texts)})
    return results


def _result_text(content: Any, name: str) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block.get("type") != "text":
            raise ProviderError(f"{name}: cannot send a {block.get('type')} block in a tool result")
        parts.append(block["text"])
    return "\n".join(parts)


# -- reply --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Call:
    """A tool call being assembled."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def complete(self) -> bool:
        """Whether the arguments so far are a whole JSON value."""
        try:
            json.loads("".join(self.arguments))
        except ValueError:
            return False
        return True


class _Fold:
    """Folds ``chat.completion.chunk`` events into neutral blocks, stop reason and usage.

    Sans IO. :meth:`feed` returns the ``(kind, text)`` deltas to report, so that the
    caller's ``on_delta`` runs outside the fold (its errors are not ours). :attr:`done`
    turns true at ``[DONE]``.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._text: list[str] = []
        self._calls: list[_Call] = []
        self._slots: dict[int, _Call] = {}  # the call each raw index now points at
        self._finish: str | None = None
        self._usage: dict[str, int] = {}
        self.done = False
        #: Whether the reply's content (text, reasoning or a tool call) has begun.
        self.content_started = False

    def feed(self, event: str, data: str) -> tuple[tuple[str, str], ...] | list[tuple[str, str]]:
        if data == "[DONE]":
            self.done = True
            return _NO_DELTAS
        try:
            chunk = json.loads(data)
        except ValueError:
            if event == "error":
                raise ProviderError(
                    f"{self._name}: error during the stream: {short(data)}") from None
            raise ProviderError(
                f"{self._name}: malformed event in the stream (not JSON: {short(data, 80)!r})"
            ) from None
        if not isinstance(chunk, dict):
            raise ProviderError(
                f"{self._name}: malformed event in the stream (not an object: {short(data, 80)!r})")
        if chunk.get("error") or event == "error":
            kind, message = _error_fields(chunk)
            raise ProviderError(f"{self._name}: {kind} during the stream: {message}")
        try:
            return self._chunk(chunk)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                f"{self._name}: malformed chunk in the stream ({type(exc).__name__}: {exc})"
            ) from None

    def feed_completion(self, data: str) -> list[tuple[str, str]]:
        """A whole (non-streamed) ``chat.completion`` object; sets :attr:`done`."""
        try:
            completion = json.loads(data)
            if completion.get("error"):
                kind, message = _error_fields(completion)
                raise ProviderError(f"{self._name}: {kind}: {message}")
            choices = [{"index": c.get("index", 0), "delta": c.get("message") or {},
                        "finish_reason": c.get("finish_reason")}
                       for c in completion.get("choices") or ()]
            deltas = self._chunk({"choices": choices, "usage": completion.get("usage")})
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                f"{self._name}: malformed completion ({type(exc).__name__}: {exc})") from None
        self.done = True
        return deltas

    def _chunk(self, chunk: Mapping[str, Any]) -> list[tuple[str, str]]:
        deltas: list[tuple[str, str]] = []
        usage = chunk.get("usage")
        if usage:
            self._take_usage(usage)
        for choice in chunk.get("choices") or ():
            if choice.get("index") not in (0, None):
                continue  # we ask for one choice (n = 1)
            delta = choice.get("delta") or {}
            if any(delta.get(k) for k in ("content", "refusal", "reasoning_content", "reasoning", "tool_calls")):
                self.content_started = True
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                deltas.append(("reasoning", reasoning))
            for key in ("content", "refusal"):
                text = delta.get(key)
                if text:
                    self._text.append(text)
                    deltas.append(("text", text))
            for piece in delta.get("tool_calls") or ():
                self._tool_call_piece(piece)
            finish = choice.get("finish_reason")
            if finish:
                self._finish = finish
        return deltas

    def _tool_call_piece(self, piece: Mapping[str, Any]) -> None:
        function = piece.get("function") or {}
        call_id = piece.get("id") or ""
        name = function.get("name") or ""
        call = self._call_for(piece.get("index"), call_id, name)
        if call_id and not call.id:
            call.id = call_id
        if name and name != call.name:
            # Normally the whole name comes once; a repeated whole name is ignored, pieces
            # of a name are joined.
            call.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            if arguments:
                call.arguments.append(arguments)
        elif arguments is not None:  # an object instead of JSON text (some servers)
            call.arguments.append(json.dumps(arguments))

    def _call_for(self, index: Any, call_id: str, name: str) -> _Call:
        if index is None:
            # No index (Gemini): each call arrives whole; a new id or name is a new call.
            for known in self._calls:
                if call_id and known.id == call_id:
                    return known
            if call_id or name or not self._calls:
                return self._new_call()
            return self._calls[-1]
        call = self._slots.get(index)
        if call is None:
            call = self._slots[index] = self._new_call()
        elif call_id and call.id and call_id != call.id and call.complete():
            # Ollama sends every parallel call at index 0, told apart by id. (LM Studio sends
            # a new id with every piece of one call: its arguments are not complete yet.)
            call = self._slots[index] = self._new_call()
        return call

    def _new_call(self) -> _Call:
        call = _Call()
        self._calls.append(call)
        return call

    def _take_usage(self, usage: Mapping[str, Any]) -> None:
        # Counts are cumulative (servers that send usage on every chunk send running totals).
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens")
        if cached is None:
            cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek
        if prompt is not None:
            self._usage["input_tokens"] = int(prompt) - int(cached or 0)
        if completion is not None:
            self._usage["output_tokens"] = int(completion)
        if cached is not None:
            self._usage["cache_read_input_tokens"] = int(cached)

    def reply(self) -> ModelReply:
        if self._finish is None and not self.done:
            raise ProviderError(f"{self._name}: stream ended before [DONE]")
        stop_reason = _STOP_REASONS.get(self._finish or "", self._finish or "end_turn")
        if self._calls and stop_reason == "end_turn":
            stop_reason = "tool_use"  # some servers say "stop" after tool calls
        content: list[dict[str, Any]] = []
        text = "".join(self._text)
        if text:
            content.append({"type": "text", "text": text})
        for call in self._calls:
            content.append(self._tool_use(call, cut_off=stop_reason == "max_tokens"))
        return ModelReply(content=tuple(content), stop_reason=stop_reason, usage=dict(self._usage))

    def _tool_use(self, call: _Call, *, cut_off: bool) -> dict[str, Any]:
        if not call.name:
            raise ProviderError(f"{self._name}: a tool call came without a name")
        joined = "".join(call.arguments)
        try:
            args = json.loads(joined) if joined.strip() else {}
        except ValueError as exc:
            if not cut_off:
                raise ProviderError(
                    f"{self._name}: tool call {call.name!r} arguments are not JSON ({exc})"
                ) from None
            args = {}  # cut at max_tokens: the loop answers it as not run
        if not isinstance(args, dict):
            if not cut_off:
                raise ProviderError(
                    f"{self._name}: tool call {call.name!r} arguments are not a JSON object")
            args = {}
        return {"type": "tool_use", "id": call.id or f"call_{uuid.uuid4().hex[:24]}",
                "name": call.name, "input": args}


# -- errors -------------------------------------------------------------------------------------


async def _read_error_body(response: httpx2.Response) -> bytes:
    """The body of an error response (then the connection can be reused), or what came."""
    try:
        return await response.aread()
    except httpx2.HTTPError:
        return b""
    finally:
        await response.aclose()


def _error_fields(body: Any) -> tuple[str, str]:
    """``(code or type, message)`` from an error body in OpenAI's shape or a cousin's."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, str):
        return "error", error
    if not isinstance(error, dict):
        error = body if isinstance(body, dict) else {}
    code = error.get("code")
    kind = code if isinstance(code, str) and code else error.get("type") or "error"
    message = error.get("message") or ""
    return str(kind), short(str(message))


def _status_error(name: str, status: int, reason: str, raw: bytes, after: str) -> ProviderError:
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and (body.get("error") or body.get("message")):
        kind, message = _error_fields(body)
        text = f"{name}: {status} {kind}: {message}{after}"
    else:
        detail = short(raw.decode("utf-8", errors="replace"), 200)
        text = f"{name}: {status} {reason or 'error'}{': ' + detail if detail else ''}{after}"
    if status in _UNAVAILABLE_STATUSES:
        return ProviderUnavailable(text)
    return ProviderError(text)


def _retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, else ``retry-after``."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    import time
    from email.utils import parsedate_to_datetime  # an HTTP date: rare

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
