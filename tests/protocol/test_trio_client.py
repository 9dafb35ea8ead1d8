"""The trio client against a small scripted server on a real Unix socket.

The server is a trio task in the test's own run; each test gives it a script. Real sockets
and the autojump clock do not mix, so socket tests bound themselves with ``fail_after`` in
real time; the timeout test runs over a memory stream on the autojump clock instead.
"""

from __future__ import annotations

import collections
import os
import socket
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest
import trio
import trio.testing

from roost.protocol import (
    PROTOCOL_VERSION,
    ConnectionClosed,
    Decoder,
    ErrorCode,
    Notification,
    Request,
    Response,
    RpcError,
    encode,
)
from roost.protocol.trio_client import TrioClient, open_client

WAIT = 10.0  # generous real-time bound, only reached when something is broken


class Peer:
    """The server's end of one connection."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._decoder = Decoder()
        self._inbox: collections.deque[Any] = collections.deque()

    async def read_request(self) -> Request | None:
        """The next request, or None when the client has closed."""
        while not self._inbox:
            try:
                data = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:
                return None
            if not data:
                return None
            self._inbox.extend(self._decoder.feed(data))
        message = self._inbox.popleft()
        assert isinstance(message, Request), message
        return message

    async def read_requests(self, n: int) -> list[Request]:
        requests = [await self.read_request() for _ in range(n)]
        assert all(r is not None for r in requests)
        return requests  # type: ignore[return-value]

    async def send(self, *messages: Any) -> None:
        for message in messages:
            await self.stream.send_all(encode(message))


Script = Callable[[Peer], Awaitable[None]]


def note(i: int) -> Notification:
    return Notification("event", [{"type": "text.delta", "seq": i}])


@asynccontextmanager
async def serving(path: Path, script: Script) -> AsyncIterator[Path]:
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.bind(os.fspath(path))
    sock.listen(1)
    listener = trio.SocketListener(sock)

    async def handle() -> None:
        stream = await listener.accept()
        async with stream:
            await script(Peer(stream))

    with trio.fail_after(WAIT):
        async with listener, trio.open_nursery() as nursery:
            nursery.start_soon(handle)
            yield path


async def answer_hello(peer: Peer) -> None:
    hello = await peer.read_request()
    assert hello is not None and hello.method == "hello"
    await peer.send(Response(hello.msgid, None, {"api_level": 1, "hello_params": hello.params}))


@pytest.fixture
def sock_path(roost_env: Path) -> Path:
    return roost_env / "t.sock"


async def test_open_client_says_hello(sock_path: Path) -> None:
    async def script(peer: Peer) -> None:
        await answer_hello(peer)
        assert await peer.read_request() is None

    async with serving(sock_path, script):
        async with open_client(sock_path, client="tester") as client:
            assert client.info["api_level"] == 1
            assert client.info["hello_params"] == [{"client": "tester", "protocol": PROTOCOL_VERSION}]


async def test_open_client_uses_roost_socket_by_default(
    sock_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOST_SOCKET", str(sock_path))

    async def script(peer: Peer) -> None:
        (req,) = await peer.read_requests(1)
        await peer.send(Response(req.msgid, None, "pong"))
        assert await peer.read_request() is None

    async with serving(sock_path, script), open_client(hello=False) as client:
        assert await client.call("ping") == "pong"


async def test_concurrent_calls_answered_out_of_order(sock_path: Path) -> None:
    async def script(peer: Peer) -> None:
        requests = await peer.read_requests(3)
        by_method = {r.method: r for r in requests}
        await peer.send(note(1), Response(by_method["c"].msgid, None, "C"), note(2))
        await peer.send(Response(by_method["a"].msgid, None, "A"), note(3))
        await peer.send(Response(by_method["b"].msgid, None, "B"), note(4))
        assert await peer.read_request() is None

    results: dict[str, Any] = {}

    async with serving(sock_path, script), open_client(sock_path, hello=False) as client:

        async def call(method: str) -> None:
            results[method] = await client.call(method, {"who": method})

        async with trio.open_nursery() as nursery:
            for method in "abc":
                nursery.start_soon(call, method)
        assert results == {"a": "A", "b": "B", "c": "C"}
        got = [await client.notifications.receive() for _ in range(4)]
        assert got == [note(1), note(2), note(3), note(4)]


async def test_notifications_during_a_call_are_kept_in_order(sock_path: Path) -> None:
    async def script(peer: Peer) -> None:
        (req,) = await peer.read_requests(1)
        await peer.send(note(1), note(2), note(3), Response(req.msgid, None, {"ok": True}))
        assert await peer.read_request() is None

    async with serving(sock_path, script), open_client(sock_path, hello=False) as client:
        assert await client.call("attach", session="s1") == {"ok": True}
        assert [client.notifications.receive_nowait() for _ in range(3)] == [note(1), note(2), note(3)]


async def test_params_map_and_kwargs_are_merged(sock_path: Path) -> None:
    seen: list[Request] = []

    async def script(peer: Peer) -> None:
        (req,) = await peer.read_requests(1)
        seen.append(req)
        await peer.send(Response(req.msgid, None, None))
        assert await peer.read_request() is None

    async with serving(sock_path, script), open_client(sock_path, hello=False) as client:
        assert await client.call("dispatch", {"task": "t"}, mode="exec") is None
    assert seen[0].params == [{"task": "t", "mode": "exec"}]


async def test_error_response_raises_rpc_error(sock_path: Path) -> None:
    async def script(peer: Peer) -> None:
        (req,) = await peer.read_requests(1)
        error = {"code": 11, "message": "busy", "data": {"run": "r1"}}
        await peer.send(Response(req.msgid, error, None))
        (req,) = await peer.read_requests(1)
        await peer.send(Response(req.msgid, None, "fine"))
        assert await peer.read_request() is None

    async with serving(sock_path, script), open_client(sock_path, hello=False) as client:
        with pytest.raises(RpcError) as info:
            await client.call("dispatch", task="t")
        assert (info.value.code, info.value.message, info.value.data) == (
            ErrorCode.SESSION_BUSY,
            "busy",
            {"run": "r1"},
        )
        assert await client.call("next") == "fine"


async def test_closed_connection_raises_connection_closed(sock_path: Path) -> None:
    async def script(peer: Peer) -> None:
        await peer.read_requests(2)
        await peer.send(note(1))  # then hang up with both calls unanswered

    outcomes: list[BaseException] = []

    async with serving(sock_path, script), open_client(sock_path, hello=False) as client:

        async def call(method: str) -> None:
            try:
                await client.call(method)
            except ConnectionClosed as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "a")
            nursery.start_soon(call, "b")
        assert len(outcomes) == 2
        with pytest.raises(ConnectionClosed):
            await client.call("again")
        # what arrived before the end is still there; then the channel ends
        assert [n async for n in client.notifications] == [note(1)]


async def test_closed_before_anything(sock_path: Path) -> None:
    async def script(peer: Peer) -> None:
        pass

    async with serving(sock_path, script), open_client(sock_path, hello=False) as client:
        with pytest.raises(ConnectionClosed):
            await client.call("status")


async def test_connect_to_nothing_raises_oserror(sock_path: Path) -> None:
    with pytest.raises(OSError):
        async with open_client(sock_path):
            pass  # pragma: no cover


# Over a memory stream, on the autojump clock: timeouts cost no real time.


@asynccontextmanager
async def memory_client() -> AsyncIterator[tuple[TrioClient, Peer]]:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    send, receive = trio.open_memory_channel[Notification](16)
    client = TrioClient(client_stream, receive, send)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client._read_loop)
        yield client, Peer(server_stream)
        nursery.cancel_scope.cancel()


async def test_no_notification_times_out(autojump_clock: trio.testing.MockClock) -> None:
    async with memory_client() as (client, peer):
        with trio.move_on_after(3600) as scope:
            await client.notifications.receive()
        assert scope.cancelled_caught
        await peer.send(note(1))
        with trio.fail_after(1):
            assert await client.notifications.receive() == note(1)


async def test_memory_stream_call_and_close(autojump_clock: trio.testing.MockClock) -> None:
    async with memory_client() as (client, peer):
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                (req,) = await peer.read_requests(1)
                await trio.sleep(60)  # a slow answer: costs nothing on the autojump clock
                await peer.send(note(1), Response(req.msgid, None, "late"))
                await peer.read_requests(1)
                await peer.stream.aclose()

            nursery.start_soon(serve)
            assert await client.call("slow") == "late"
            with pytest.raises(ConnectionClosed):
                await client.call("last")
        assert client.notifications.receive_nowait() == note(1)


async def test_a_full_queue_of_new_connections_is_waited_out(sock_path: Path) -> None:
    # A listener that accepts nothing yet, its queue (backlog 0: one connection) taken.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.fspath(sock_path))
    listener.listen(0)
    first = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    first.connect(os.fspath(sock_path))
    try:
        async def accept_later() -> None:
            await trio.sleep(0.3)
            trio_listener = trio.SocketListener(trio.socket.from_stdlib_socket(listener))
            for _ in range(2):  # the one that filled the queue, then the client's
                stream = await trio_listener.accept()
                nursery.start_soon(_serve_hello, stream)

        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(accept_later)
                async with open_client(sock_path, client="patient") as client:
                    assert client.info["hello_params"][0]["client"] == "patient"
                nursery.cancel_scope.cancel()
    finally:
        first.close()
        listener.close()


async def _serve_hello(stream: trio.SocketStream) -> None:
    async with stream:
        peer = Peer(stream)
        hello = await peer.read_request()
        if hello is not None:
            await peer.send(Response(hello.msgid, None, {"api_level": 1, "hello_params": hello.params}))
            await peer.read_request()
