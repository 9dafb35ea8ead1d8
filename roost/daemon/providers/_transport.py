"""A lean HTTP/1.1 transport for model servers reached over plain HTTP.

A model server on this machine or the local network (llama.cpp, vLLM, Ollama, a gateway)
answers in a millisecond, so what the HTTP stack costs is most of a step. httpx2's own
transport goes through httpcore2's pool, its connection and stream objects and their
context managers on every request and every chunk of a streamed body: about a third of
the CPU a model call costs roost (bench/step_overhead.py). :class:`PlainTransport` is
that part, for ``http://`` only: h11 over a trio socket, kept-alive connections reused.
The client above it stays httpx2's (and, for Anthropic, the SDK's: its headers, retries
and errors).

What it does not do is left to httpx2's own transport, chosen by :func:`plain_transport`:
TLS (``https://``: a remote API, whose latency dwarfs this), and proxies (any proxy
variable set: an explicit transport would make httpx2 ignore them).

Errors are httpx2's, as its own transport raises them, so callers and the SDK see no
difference: ``ConnectError``/``ConnectTimeout``, ``WriteError``/``WriteTimeout``,
``ReadError``/``ReadTimeout``, ``RemoteProtocolError`` (a malformed response, or a
connection closed before the response ended). A kept-alive connection is checked before
it is reused: one the server closed meanwhile (or sent anything on) is dropped, not used.
"""

from __future__ import annotations

import os
import time
from types import TracebackType
from typing import AsyncIterator, Mapping

import h11
import httpx2
import trio

#: Variables that make httpx2 send requests through a proxy.
_PROXY_VARIABLES = ("http_proxy", "all_proxy")
#: Bytes read at once.
_READ_SIZE = 65536


def plain_transport(
    base_url: str, environ: Mapping[str, str] = os.environ, *, keepalive_expiry: float = 60.0
) -> PlainTransport | None:
    """The lean transport for requests to ``base_url``, or None where httpx2's own should
    serve them: ``https://``, or a proxy is configured."""
    if not base_url.startswith("http://"):
        return None
    if any(environ.get(name) or environ.get(name.upper()) for name in _PROXY_VARIABLES):
        return None
    return PlainTransport(keepalive_expiry=keepalive_expiry)


class _Connection:
    """One kept-alive connection: its socket and its h11 state."""

    __slots__ = ("stream", "h11", "idle_since")

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0

    def reusable(self, now: float, expiry: float) -> bool:
        # Readable while idle: the server closed it, or sent what nobody asked for.
        return now - self.idle_since < expiry and not self.stream.socket.is_readable()


class PlainTransport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 over plain TCP with h11, one request per connection at a time, idle
    connections kept for ``keepalive_expiry`` seconds (at most ``max_idle`` per origin).

    Resource handling: :meth:`aclose` closes the idle connections; a response's connection
    goes back to the pool when its body was read to the end and closed, and is closed
    otherwise.
    """

    def __init__(self, *, keepalive_expiry: float = 60.0, max_idle: int = 20) -> None:
        self._expiry = keepalive_expiry
        self._max_idle = max_idle
        self._idle: dict[tuple[str, int], list[_Connection]] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx2.UnsupportedProtocol(f"this transport speaks http:// only, not {url.scheme}://")
        timeouts = request.extensions.get("timeout", {})
        origin = (url.host, url.port or 80)
        connection = self._reuse(origin) or await _connect(origin, timeouts.get("connect"))
        try:
            await self._send(connection, request, timeouts.get("write"))
            head = await self._head(connection, timeouts.get("read"))
        except BaseException:
            await connection.stream.aclose()
            raise
        return httpx2.Response(
            head.status_code,
            headers=head.headers,
            stream=_Body(self, origin, connection, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason},
        )

    async def aclose(self) -> None:
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.stream.aclose()

    def _reuse(self, origin: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.reusable(now, self._expiry):
                return connection
            connection.stream.socket.close()
        return None

    def _keep(self, origin: tuple[str, int], connection: _Connection) -> bool:
        """Put a connection whose exchange ended back in the pool; false if it cannot be."""
        if connection.h11.our_state is not h11.DONE or connection.h11.their_state is not h11.DONE:
            return False
        idle = self._idle.setdefault(origin, [])
        if len(idle) >= self._max_idle:
            return False
        connection.h11.start_next_cycle()
        connection.idle_since = time.monotonic()
        idle.append(connection)
        return True

    async def _send(self, connection: _Connection, request: httpx2.Request, timeout: float | None) -> None:
        conn = connection.h11
        head = conn.send(h11.Request(method=request.method, target=request.url.raw_path, headers=request.headers.raw))
        parts = [head]
        async for chunk in request.stream:  # type: ignore[union-attr]
            if chunk:
                parts.append(conn.send(h11.Data(data=chunk)))
        parts.append(conn.send(h11.EndOfMessage()))
        with _AsHttpxErrors(httpx2.WriteError, httpx2.WriteTimeout, timeout):
            await connection.stream.send_all(b"".join(part for part in parts if part))

    async def _head(self, connection: _Connection, timeout: float | None) -> h11.Response:
        while True:
            event = await _next_event(connection, timeout)
            if isinstance(event, h11.Response):
                return event
            # An InformationalResponse (100 Continue and the like) comes before the answer.


class _Body(httpx2.AsyncByteStream):
    """A response's body, read as it comes; its connection goes back to the pool at the end."""

    def __init__(self, transport: PlainTransport, origin: tuple[str, int], connection: _Connection,
                 timeout: float | None) -> None:
        self._transport = transport
        self._origin = origin
        self._connection: _Connection | None = connection
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise httpx2.StreamClosed()
        while True:
            event = await _next_event(connection, self._timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and not self._transport._keep(self._origin, connection):
            await connection.stream.aclose()


async def _connect(origin: tuple[str, int], timeout: float | None) -> _Connection:
    with _AsHttpxErrors(httpx2.ConnectError, httpx2.ConnectTimeout, timeout):
        return _Connection(await trio.open_tcp_stream(*origin))


async def _next_event(connection: _Connection, timeout: float | None) -> h11.Event:
    conn = connection.h11
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise httpx2.RemoteProtocolError(str(exc)) from exc
        if isinstance(event, h11.Event):
            return event
        # NEED_DATA (PAUSED comes only after the response's end, which no caller reads past).
        with _AsHttpxErrors(httpx2.ReadError, httpx2.ReadTimeout, timeout):
            data = await connection.stream.receive_some(_READ_SIZE)
        if not data and conn.their_state is h11.SEND_RESPONSE:
            # As httpcore2 says it: the SDK and the OpenAI provider retry this (a kept-alive
            # connection closed just as it was reused).
            raise httpx2.RemoteProtocolError("Server disconnected without sending a response.")
        conn.receive_data(data)


class _AsHttpxErrors:
    """Within it, trio's socket errors and a timeout become httpx2's ``error`` and
    ``timed_out`` (``timeout`` None: no limit)."""

    def __init__(self, error: type[httpx2.TransportError], timed_out: type[httpx2.TimeoutException],
                 timeout: float | None) -> None:
        self._error, self._timed_out = error, timed_out
        self._scope = trio.move_on_after(timeout) if timeout is not None else None

    def __enter__(self) -> None:
        if self._scope is not None:
            self._scope.__enter__()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._scope is not None:
            self._scope.__exit__(kind, exc, tb)
            if self._scope.cancelled_caught:
                raise self._timed_out("timed out")
        if isinstance(exc, (OSError, trio.BrokenResourceError, trio.ClosedResourceError)):
            raise self._error(str(exc) or type(exc).__name__) from exc
