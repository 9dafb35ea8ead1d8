"""The lean HTTP/1.1 transport against servers that misbehave: real sockets on 127.0.0.1, a
server in the same trio loop that does exactly what each test says."""

from __future__ import annotations

from functools import partial
from typing import AsyncIterator, Awaitable, Callable

import httpx2
import pytest
import trio

from roost.daemon.providers._transport import PlainTransport, plain_transport

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"

Serve = Callable[[trio.SocketStream], Awaitable[None]]


class Server:
    """Accepts connections on 127.0.0.1 and hands each to ``serve``."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.connections = 0
        self.url = ""

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        async with stream:
            await self.serve(stream)


@pytest.fixture
async def serving(nursery: trio.Nursery) -> AsyncIterator[Callable[[Serve], Awaitable[Server]]]:
    async def start(serve: Serve) -> Server:
        server = Server(serve)
        listeners = await nursery.start(partial(trio.serve_tcp, server._handle, 0, host="127.0.0.1"))
        server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/"
        return server

    yield start


async def read_request(stream: trio.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return data
        data += chunk
    return data


def client(**timeouts: float) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=PlainTransport(), timeout=httpx2.Timeout(5.0, **timeouts))


async def test_a_kept_alive_connection_is_reused(serving: Callable[[Serve], Awaitable[Server]]) -> None:
    async def serve(stream: trio.SocketStream) -> None:
        while await read_request(stream):
            await stream.send_all(OK)

    server = await serving(serve)
    async with client() as http:
        for _ in range(3):
            assert (await http.get(server.url)).text == "ok"
    assert server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_not_reused(
    serving: Callable[[Serve], Awaitable[Server]],
) -> None:
    closed = trio.Event()

    async def serve(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(OK)  # kept alive, by what it says; then closed all the same
        closed.set()

    server = await serving(serve)
    async with client() as http:
        assert (await http.get(server.url)).text == "ok"
        await closed.wait()
        await trio.sleep(0.01)  # the close reaches this end
        # Reused, it would fail: "Server disconnected without sending a response".
        assert (await http.get(server.url)).text == "ok"
    assert server.connections == 2


async def test_a_response_that_says_close_gives_its_connection_up(
    serving: Callable[[Serve], Awaitable[Server]],
) -> None:
    ended = []

    async def serve(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
        ended.append(await stream.receive_some(10))  # b"": the client closed its end

    server = await serving(serve)
    async with client() as http:
        for _ in range(2):
            assert (await http.get(server.url)).text == "ok"
    with trio.fail_after(5):
        while len(ended) < 2:
            await trio.sleep(0.001)
    assert server.connections == 2 and ended == [b"", b""]


async def test_large_bodies_go_and_come_whole(serving: Callable[[Serve], Awaitable[Server]]) -> None:
    async def echo(stream: trio.SocketStream) -> None:
        while head := await read_request(stream):
            head, _, body = head.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(body) < length:
                body += await stream.receive_some(65536)
            await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))

    server = await serving(echo)
    sent = bytes(range(256)) * 8192  # 2 MiB
    async with client() as http:
        for _ in range(2):
            assert (await http.post(server.url, content=sent)).content == sent
    assert server.connections == 1


async def test_a_body_that_ends_with_the_connection_is_whole(serving: Callable[[Serve], Awaitable[Server]]) -> None:
    # As an HTTP/1.0 server streams: no length, no chunks; the close ends the body.
    async def serve(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        for n in range(3):
            await stream.send_all(b"data: %d\n\n" % n)
            await trio.sleep(0.001)

    server = await serving(serve)
    async with client() as http:
        for _ in range(2):  # and the connection is not kept: the next request opens another
            async with http.stream("GET", server.url) as response:
                assert b"".join([chunk async for chunk in response.aiter_raw()]) == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    assert server.connections == 2


async def test_a_body_cut_short_is_a_protocol_error(serving: Callable[[Serve], Awaitable[Server]]) -> None:
    async def serve(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten b")

    server = await serving(serve)
    async with client() as http:
        async with http.stream("GET", server.url) as response:
            assert response.status_code == 200
            with pytest.raises(httpx2.RemoteProtocolError):
                await response.aread()


async def test_no_response_and_a_garbled_one_are_protocol_errors(
    serving: Callable[[Serve], Awaitable[Server]],
) -> None:
    async def hang_up(stream: trio.SocketStream) -> None:
        await read_request(stream)

    async def garble(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"SMTP ready\r\n\r\n")

    async with client() as http:
        with pytest.raises(httpx2.RemoteProtocolError, match="without sending a response"):
            await http.get((await serving(hang_up)).url)
        with pytest.raises(httpx2.RemoteProtocolError):
            await http.get((await serving(garble)).url)


async def test_a_silent_server_is_a_read_timeout(serving: Callable[[Serve], Awaitable[Server]]) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await trio.sleep_forever()

    async def stalls_midway(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nok")
        await trio.sleep_forever()

    # Real time, a little: a mock clock could jump past the connect timeout too.
    async with client(read=0.2) as http:
        with pytest.raises(httpx2.ReadTimeout):
            await http.get((await serving(silent)).url)
        async with http.stream("GET", (await serving(stalls_midway)).url) as response:
            with pytest.raises(httpx2.ReadTimeout):
                await response.aread()


async def test_nobody_listening_is_a_connect_error() -> None:
    with trio.socket.socket() as probe:  # a port that was free a moment ago
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with client() as http:
        with pytest.raises(httpx2.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/")


async def test_cancelling_midway_closes_the_connection(serving: Callable[[Serve], Awaitable[Server]]) -> None:
    ended = trio.Event()

    async def serve(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nok")
        await stream.receive_some(10)  # until the client closes
        ended.set()

    server = await serving(serve)
    async with client() as http:
        with trio.move_on_after(0.2):
            async with http.stream("GET", server.url) as response:
                await response.aread()
        with trio.fail_after(5):
            await ended.wait()


def test_tls_and_proxies_are_left_to_httpx2() -> None:
    assert plain_transport("https://api.anthropic.com", {}) is None
    assert plain_transport("http://127.0.0.1:8080", {"HTTP_PROXY": "http://127.0.0.1:3128"}) is None
    assert plain_transport("http://127.0.0.1:8080", {"all_proxy": "socks5://127.0.0.1:1080"}) is None
    assert isinstance(plain_transport("http://127.0.0.1:8080", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}),
                      PlainTransport)
