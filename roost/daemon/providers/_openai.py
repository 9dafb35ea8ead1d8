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
  become the reply through a sans-IO fold (:class:`OpenAIFold`) on plain dicts.
- Retries happen only before the stream starts (once a delta has reached ``on_delta`` it
  cannot be taken back): on 429, 5xx (529 included) and transport errors (refused, reset,
  connect timeout, a pooled connection closed under us), at most ``max_retries`` times.
  The wait honours ``retry-after-ms`` then ``retry-after`` (seconds or an HTTP date), capped
  by ``retry_max``; without them it is ``retry_base * 2**n`` (capped) less up to 25 %
  jitter. A read timeout before the response is not retried: a server that said nothing
  for ``timeout`` seconds would most likely do it again, and the user would wait 3x longer.
- Cancellation (``trio.Cancelled``) is never caught: it propagates, and the response (so
  its connection) is closed on the way out, at once.

What is sent and how the answer is read are :mod:`._openai_wire`'s (sans IO: the request
body, the fold of the stream's chunks into the reply, the reading of error bodies); this
module sends, retries and reads. The reply's length limit is sent as
``max_completion_tokens`` to OpenAI itself (its reasoning models, o-series and gpt-5, reject
``max_tokens``; the others take either) and as ``max_tokens`` elsewhere, which compatible
servers (Ollama, llama.cpp, vLLM) know. A server that answers 400 naming the field it was
sent and the other one is asked again, once, with the other, which it keeps for the rest of
the daemon's life. A server that ignores ``stream: true`` and answers one
``application/json`` completion is accepted: its text is reported as one delta.

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
    body ending before ``[DONE]``         -> ProviderError (see :mod:`._openai_wire`)
    an unsendable block (another vendor's) -> ProviderError, before anything is sent
    a 400 about images (no vision)        -> the request again, images as notes
    a base_url that is not http(s)        -> ProviderUnavailable, at construction
"""

from __future__ import annotations

import random
import time
from contextlib import aclosing
import logging
from dataclasses import replace
from typing import Mapping, Sequence

import httpx2
import trio

from ._base import (
    DeltaCallback,
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
)
from ._openai_wire import OpenAIFold, embeddings_of, has_images, request_body, status_error
from ._sse import SSEDecoder
from ._transport import plain_transport
from ._wire import after_retries, json_body, short

__all__ = ["OpenAIProvider"]

log = logging.getLogger(__name__)

#: How long the rest of a body is read after ``[DONE]`` or a failure before it is cut.
_DRAIN_SECONDS = 1.0

#: How long idle connections stay in the pool (httpx2's default is 5 s; see the docstring).
_KEEPALIVE_SECONDS = 60.0


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
        #: The models that refused images (see _send_request): theirs are sent as notes.
        self._no_images: set[str] = set()
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

    async def embed(self, model: str, texts: Sequence[str]) -> list[list[float]]:
        """The embedding of each of ``texts`` by ``model``, in order: ``POST
        {base_url}/embeddings`` on this provider's client, retried as a model call is.

        Error handling:
            Raises :class:`ProviderError` (or :class:`ProviderUnavailable`) as :meth:`stream`
            does, and for an answer that is not one vector of numbers per text.
        """
        if self._closed:
            raise ProviderError(f"{self._name}: the provider is closed")
        response, _ = await self._send(json_body({"model": model, "input": list(texts)}), f"{self._base_url}/embeddings")
        try:
            raw = await response.aread()
        except httpx2.HTTPError as exc:
            raise ProviderError(f"{self._name}: embeddings cut off ({type(exc).__name__})") from exc
        finally:
            await response.aclose()
        return embeddings_of(self._name, raw, len(texts))

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._client.aclose()

    # -- before the stream: send, retry -----------------------------------------------------

    async def _send_request(self, request: ModelRequest) -> tuple[httpx2.Response, int]:
        """Send ``request`` with this server's name for the length limit; on a 400 that says
        the other name is the one it takes, once more with that one; on a 400 about images
        to a request with images, once more with notes in their place. The response, and
        the retries it took."""
        for tried in range(3):
            body = request_body(request, self._name, self._limit_field, request.model not in self._no_images)
            try:
                encoded = json_body(body)
            except ValueError as exc:
                raise ProviderError(f"{self._name}: cannot send the request ({exc})") from None
            try:
                return await self._send(encoded)
            except ProviderError as exc:
                other = "max_tokens" if self._limit_field == "max_completion_tokens" else "max_completion_tokens"
                if tried == 2 or " 400 " not in exc.message:
                    raise
                if other in exc.message:
                    self._limit_field = other
                elif request.model not in self._no_images and "image" in exc.message.lower() and has_images(request):
                    # A model without vision: its images become notes that say so, from now on.
                    log.info("%s/%s: images refused (%s); notes in their place", self._name, request.model, exc.message)
                    self._no_images.add(request.model)
                else:
                    raise
        raise AssertionError("unreachable")

    async def _send(self, body: bytes, url: str | None = None) -> tuple[httpx2.Response, int]:
        """POST (to ``url``, else Chat Completions) until a 2xx response (its body unread)
        or a final error; the response and the retries it took."""
        attempt = 0
        while True:
            after = after_retries(attempt)
            try:
                response = await self._client.send(
                    self._client.build_request("POST", url or self._url, content=body), stream=True)
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
            raise status_error(self._name, status, response.reason_phrase, raw, attempt)

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
        fold = OpenAIFold(self._name)
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
        fold = OpenAIFold(self._name)
        for delta in fold.feed_completion(raw.decode("utf-8", errors="replace")):
            on_delta(*delta)
        return fold.reply(), first


# -- errors -------------------------------------------------------------------------------------


async def _read_error_body(response: httpx2.Response) -> bytes:
    """The body of an error response (then the connection can be reused), or what came."""
    try:
        return await response.aread()
    except httpx2.HTTPError:
        return b""
    finally:
        await response.aclose()


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
    from email.utils import parsedate_to_datetime  # an HTTP date: rare

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
