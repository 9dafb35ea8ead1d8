"""The Anthropic provider: the Messages API through the official SDK, streamed.

Design:

- One :class:`anthropic.AsyncAnthropic` per provider instance, built in ``__init__`` and shared
  by every session (a construction costs ~18 ms; the client keeps one connection pool).
  Importing this module costs ~0.9 s (the SDK), so the daemon's provider registry imports it
  lazily, on the first call that needs it.
- What is sent and how the answer is read are :mod:`._anthropic_wire`'s (sans IO: the
  request body with its thinking budget and cache breakpoints, the fold of the stream's
  events into the reply, the wording of error statuses); this module sends and reads.
- The body is written as JSON bytes (:func:`json_body`, the SDK's own layout: the same
  bytes ``messages.create()`` would send) and sent with the SDK's lower-level
  ``client.post("/v1/messages", content=..., stream=True)``: the SDK still adds its headers
  and the key, resolves the base URL, retries, and turns error statuses into exceptions, but
  no longer walks and copies the whole history against its parameter types at every call
  (``create()`` does: ~1 ms for a 40-message history). The SSE body of the successful
  response is then read here, from ``response.aiter_bytes()`` inside ``aclosing``, through
  a small sans-IO decoder (:class:`SSEDecoder`) and fold (:class:`AnthropicFold`) working
  on plain dicts. Not the SDK's event iterator, nor its ``MessageStream`` helper, because:
  (1) they stack more async generators on httpx2's, and when iteration stops early (an
  ``event: error``, a malformed event) those are left unfinished and trio reports each one
  with a ``ResourceWarning`` when it is collected; (2) they build a pydantic model per event (~70 µs each), and
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
    no message_stop / malformed events    -> ProviderError (see :mod:`._anthropic_wire`)
    missing key at construction           -> ProviderUnavailable "ANTHROPIC_API_KEY is not set ..."
"""

from __future__ import annotations

import os
import time
from contextlib import aclosing
from dataclasses import replace
from typing import Mapping

import anthropic
import httpx2
from anthropic.types import Message, RawMessageStreamEvent

from ._anthropic_wire import AnthropicFold, request_params, status_error
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
        params = request_params(request)
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
        fold = AnthropicFold()
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
                                deltas = fold.feed(name, data)
                            except ProviderError as exc:
                                failure = exc
                                break
                            if first is None and fold.content_started:
                                first = time.monotonic() - started
                            for delta in deltas:
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
    return status_error(exc.status_code, exc.type, exc.api_message or short(exc.message),
                        _retries_taken(exc.request))
