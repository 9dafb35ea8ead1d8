"""McpManager against server-everything in streamable HTTP mode (on 127.0.0.1)."""

from __future__ import annotations

from functools import partial

import pytest
import trio

from roost.daemon.mcp import McpManager, McpServerConfig

from .conftest import HttpServer, everything

# The SDK's streamable HTTP transport cancels its SSE reads when it closes and leaves
# httpx2's async generators to the garbage collector, which trio reports as a
# ResourceWarning (harmless: the connection is closed by then; only the warning is ignored).
pytestmark = pytest.mark.filterwarnings(
    "ignore:Async generator '(httpx2|httpcore2)\\..*' was garbage collected:ResourceWarning"
)


async def test_http_server_tools_and_calls(manager: McpManager, http_everything: HttpServer) -> None:
    servers = {"web": http_everything.config(headers={"x-roost-test": "1"}), "everything": everything()}
    await manager.ensure(servers)
    [status] = [s for s in manager.status(servers) if s["name"] == "web"]
    assert (status["state"], status["transport"], status["url"], status["pid"]) == (
        "ready", "http", http_everything.url, None
    )
    assert "web__echo" in {t.name for t in manager.tools(servers)}
    # the headers are part of what the server is: other headers, another server
    assert manager.status({"web": http_everything.config()})[0]["state"] == "stopped"

    async def echo(text: str) -> None:
        result = await manager.call("web__echo", {"message": text}, servers=servers)
        assert (result.text, result.is_error) == (f"Echo: {text}", False)

    # two tasks, one HTTP session, alongside a stdio server
    async with trio.open_nursery() as n:
        for text in ("one", "two"):
            n.start_soon(echo, text)
        n.start_soon(partial(manager.call, "everything__echo", {"message": "stdio"}, servers=servers))

    seen: list[dict[str, object]] = []
    done = await manager.call(
        "web__trigger-long-running-operation", {"duration": 0.2, "steps": 2}, servers=servers, on_progress=seen.append
    )
    assert not done.is_error and seen


async def test_http_session_is_terminated_on_close(nursery: trio.Nursery, http_everything: HttpServer) -> None:
    manager = McpManager(nursery, http_everything.stdout.parent / "logs")
    servers = {"web": http_everything.config()}
    await manager.ensure(servers)
    assert manager.status(servers)[0]["state"] == "ready"
    await manager.aclose()
    # the connection was left normally, so the server was told the session ended (DELETE)
    assert "Received session termination request" in http_everything.stdout.read_text()
    assert manager.status(servers)[0]["state"] == "stopped"


async def test_http_server_that_goes_away_and_comes_back(manager: McpManager, http_everything: HttpServer) -> None:
    servers = {"web": http_everything.config()}
    await manager.ensure(servers)
    http_everything.process.kill()
    await http_everything.process.wait()
    # An HTTP connection is found dead by using it: this call, or a request of the SDK's own
    # (a tools/list after a change, an answer to the server) if one came first; either way
    # the call is an error result, and the server is reconnected (and fails while nothing
    # listens).
    lost = await manager.call("web__echo", {"message": "anyone?"}, servers=servers)
    assert lost.is_error, lost.text
    assert "lost during the call" in lost.text or "MCP server web is not available" in lost.text, lost.text
    with trio.fail_after(10):
        while manager.status(servers)[0]["state"] != "failed":
            await trio.sleep(0.02)
    assert "ConnectError" in manager.status(servers)[0]["error"]


async def test_unreachable_url_fails(manager: McpManager) -> None:
    servers = {"nowhere": McpServerConfig("nowhere", "http", url="http://127.0.0.1:9/mcp")}
    await manager.ensure(servers)
    status = manager.status(servers)[0]
    assert status["state"] == "failed" and "ConnectError" in status["error"]
