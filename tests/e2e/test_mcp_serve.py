"""`roost mcp serve` driven by a client no one here wrote: the MCP Python SDK's, over stdio,
as Claude Code runs it (`claude mcp add roost -- roost mcp serve`)."""

from __future__ import annotations

import json
from typing import Any

import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from .conftest import E2E, ROOST, bash, text


async def _call(client: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result
    return json.loads(result.content[0].text)


async def test_another_agent_hands_roost_a_task_and_reads_its_result(e2e: E2E) -> None:
    server = StdioServerParameters(command=ROOST, args=["mcp", "serve"], env=e2e.env, cwd=str(e2e.project))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names == {"roost_dispatch", "roost_start", "roost_status", "roost_sessions", "roost_report"}

        model = e2e.script([text("Three files.")])
        done = await _call(session, "roost_dispatch", task="count the files", cwd=str(e2e.project), model=model)
        assert (done["state"], done["reason"], done["text"]) == ("ended", "done", "Three files.")
        [row] = await _call(session, "roost_sessions")
        assert (row["id"], row["title"]) == (done["session"], "count the files")
        report = await _call(session, "roost_report", run=done["run"])
        assert report["run"] == done["run"]

        # A command asks the user: the calling agent is told the run waits, and how it is
        # answered; the user answers with their own client, and the run ends.
        model = e2e.script([bash("echo hi > made.txt")], [text("Made it.")])
        waiting = await _call(session, "roost_dispatch", task="make a file", cwd=str(e2e.project), model=model)
        assert waiting["state"] == "waiting for the user"
        [request] = waiting["requests"]
        assert request["answer_with"].startswith(f"roost approve {waiting['session']} ")
        assert not (e2e.project / "made.txt").exists()
        e2e.ok(*request["answer_with"].split()[1:])
        for _ in range(100):
            status = await _call(session, "roost_status", session=waiting["session"])
            if status["state"] == "ended":
                break
            await trio.sleep(0.1)
        assert (status["reason"], status["text"]) == ("done", "Made it.")
        assert (e2e.project / "made.txt").read_text() == "hi\n"

        # The rules are the user's: a mode without approvals is not the calling agent's to ask.
        refused = await session.call_tool("roost_start", {"task": "x", "cwd": str(e2e.project), "mode": "full"})
        assert refused.is_error and "what runs without asking is the user's to say" in refused.content[0].text
        # What the daemon refuses is said as it says it, and the server serves on.
        unknown = await session.call_tool("roost_dispatch", {"task": "x", "cwd": str(e2e.project), "model": "nosuch/x"})
        assert unknown.is_error and "unknown provider 'nosuch'" in unknown.content[0].text
        assert (await _call(session, "roost_status", session="nosuch"))["error"] == "no session nosuch"


def test_the_mcp_inspector_lists_roosts_tools_and_dispatches_a_task(e2e: E2E) -> None:
    import subprocess

    from tests._agent_sdk import ensure_inspector

    inspector = str(ensure_inspector())

    def call(*args: str) -> Any:
        done = subprocess.run([inspector, "--cli", ROOST, "mcp", "serve", *args], cwd=e2e.project, env=e2e.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    tools = {tool["name"]: tool for tool in call("--method", "tools/list")["tools"]}
    assert set(tools) == {"roost_dispatch", "roost_start", "roost_status", "roost_sessions", "roost_report"}
    assert tools["roost_dispatch"]["description"].startswith("Run TASK in the folder CWD (absolute)")
    model = e2e.script([text("Counted.")])
    result = call("--method", "tools/call", "--tool-name", "roost_dispatch", "--tool-arg", "task=count",
                  "--tool-arg", f"cwd={e2e.project}", "--tool-arg", f"model={model}")
    done = json.loads(result["content"][0]["text"])
    assert (done["state"], done["reason"], done["text"]) == ("ended", "done", "Counted.")


#: The MCP Python SDK's client over streamable HTTP, in a process of its own (on asyncio,
#: as an agent runs it): argv is the URL, the Unix socket or "", the bearer token or "",
#: then a tool and its JSON arguments; it prints the tool names, then the tool's result.
HTTP_CLIENT = """
import asyncio, json, sys
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def main(url, uds, token, tool, arguments):
    transport = httpx2.AsyncHTTPTransport(uds=uds) if uds else None
    headers = {"Authorization": "Bearer " + token} if token else {}
    client = httpx2.AsyncClient(transport=transport, headers=headers, timeout=60)
    async with client, streamable_http_client(url, http_client=client) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            print(json.dumps(sorted(t.name for t in (await session.list_tools()).tools)))
            result = await session.call_tool(tool, json.loads(arguments))
            print(result.content[0].text)

asyncio.run(main(*sys.argv[1:]))
"""


def _http_client(e2e: E2E, url: str, uds: str, token: str, tool: str, **arguments: Any) -> tuple[list[str], Any]:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", HTTP_CLIENT, url, uds, token, tool, json.dumps(arguments)],
                          capture_output=True, text=True, timeout=90, env=e2e.env)
    assert done.returncode == 0, done.stderr[-2000:]
    names, result = done.stdout.split("\n", 1)
    return json.loads(names), json.loads(result)


def test_over_http_on_a_unix_socket_only_its_user_may_reach(e2e: E2E, tmp_path: Any) -> None:
    import os
    import stat
    import subprocess

    path = tmp_path / "mcp.sock"
    served = subprocess.Popen([ROOST, "mcp", "serve", "--unix", str(path)], env=e2e.env, cwd=e2e.project,
                              stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert served.stderr is not None
        assert served.stderr.readline() == f"roost mcp serve: http over {path} (endpoint /mcp)\n"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        model = e2e.script([text("Over a socket.")])
        names, done = _http_client(e2e, "http://127.0.0.1:1/mcp", str(path), "", "roost_dispatch",
                                   task="say where", cwd=str(e2e.project), model=model)
        assert "roost_dispatch" in names and (done["reason"], done["text"]) == ("done", "Over a socket.")
    finally:
        served.terminate()
        served.wait(10)
        assert served.stderr is not None
        served.stderr.close()


def test_over_http_on_a_loopback_port_only_with_the_token(e2e: E2E, tmp_path: Any) -> None:
    import socket
    import subprocess
    import time
    import urllib.error
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token_file = tmp_path / "token"
    served = subprocess.Popen([ROOST, "mcp", "serve", "--port", str(port), "--token-file", str(token_file)],
                              env=e2e.env, cwd=e2e.project, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert served.stderr is not None
        assert served.stderr.readline() == f"roost mcp serve: http://127.0.0.1:{port}/mcp (bearer token in {token_file})\n"
        token = token_file.read_text().strip()
        assert len(token) >= 32 and token_file.stat().st_mode & 0o777 == 0o600
        url = f"http://127.0.0.1:{port}/mcp"
        for bearer in ("", "Bearer nope"):
            request = urllib.request.Request(url, data=b"{}", headers={"Authorization": bearer} if bearer else {})
            for _ in range(100):  # until it listens
                try:
                    urllib.request.urlopen(request, timeout=10)
                except urllib.error.HTTPError as refused:
                    assert refused.code == 401
                    break
                except urllib.error.URLError:
                    time.sleep(0.1)
            else:
                raise AssertionError("roost mcp serve --port never listened")
        names, sessions = _http_client(e2e, url, "", token, "roost_sessions")
        assert "roost_dispatch" in names and sessions == []
    finally:
        served.terminate()
        served.wait(10)
        assert served.stderr is not None
        served.stderr.close()
