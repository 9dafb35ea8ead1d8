"""The shell's asyncio connection gives up on a silent daemon as the blocking client does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from roost.protocol.asyncio_client import AsyncClient
from roost.protocol import Response, Timeout
from tests.protocol.test_client import Peer, serving

QUICK = 0.4  # a client timeout short enough for a test; nothing asserts on timings


async def open_client(path: Path) -> AsyncClient:
    return await AsyncClient.open(str(path), client="test", on_notification=lambda e: None, timeout=QUICK)


def answer_hello(peer: Peer) -> None:
    (hello,) = peer.read_requests(1)
    assert hello.method == "hello"
    peer.send(Response(hello.msgid, None, {"pid": 1}))


@pytest.fixture
def sock_path(roost_env: Path) -> Path:
    return roost_env / "t.sock"


def test_a_call_to_a_silent_daemon_times_out_and_ends_the_connection(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        answer_hello(peer)
        assert [r.method for r in peer.read_requests(2)] == ["dispatch", "status"]
        assert peer.read_request() is None

    async def main() -> None:
        client = await open_client(sock_path)
        with pytest.raises(Timeout, match=f"the roost daemon at {sock_path} did not answer within"):
            await client.call("dispatch", task="t")
        assert client.closed
        await client.aclose()

    with serving(sock_path, script):
        asyncio.run(main())


def test_a_slow_answer_from_a_live_daemon_is_waited_for(sock_path: Path) -> None:
    def script(peer: Peer) -> None:
        answer_hello(peer)
        (call,) = peer.read_requests(1)
        for _ in range(3):
            (check,) = peer.read_requests(1)
            assert check.method == "status"
            peer.send(Response(check.msgid, None, {}))
        peer.send(Response(call.msgid, None, "fine"))
        assert peer.read_request() is None

    async def main() -> None:
        client = await open_client(sock_path)
        try:
            assert await client.call("compact", session="s") == "fine"
        finally:
            await client.aclose()

    with serving(sock_path, script):
        asyncio.run(main())
