"""MCP servers a client brings to its dispatch (an editor's, over ACP): they reach that
run's tools, take the place of the folder's server of the same name, and a malformed one is
refused before anything starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from ..conftest import events_until, finished, text, user_dir, write, write_script

SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool(structured_output=False)
def who() -> str:
    """Says whose server this is."""
    return "{owner}"


server.run()
'''


def _server(folder: Path, owner: str) -> dict[str, object]:
    script = write(folder / f"{owner}.py", SERVER.replace("{owner}", owner))
    return {"command": sys.executable, "args": [str(script)]}


async def test_a_clients_server_serves_its_run_in_place_of_the_folders(client: TrioClient, project: Path, tmp_path: Path) -> None:
    mine = _server(tmp_path, "the config's")
    write(user_dir() / "config.toml", f"[mcp.servers.probe]\ncommand = {json.dumps(mine['command'])}\nargs = {json.dumps(mine['args'])}\n")
    call = {"type": "tool_use", "name": "probe__who", "input": {}}
    # The scripted model answers by the session's turn: two runs, four replies.
    model = write_script(project, [call], [text("done")], [call], [text("done")])
    run = await client.call("dispatch", task="t", cwd=str(project), model=model, mode="full", attach=True,
                            mcp_servers={"probe": _server(tmp_path, "the editor's")})
    events = await events_until(client, finished(run["run"]), timeout=60)
    result = next(e for e in events if e["type"] == "tool.finished")
    assert result["result"] == "the editor's"
    # The next dispatch without it has the folder's own again.
    run = await client.call("dispatch", task="t", session=run["session"], model=model, mode="full", attach=True)
    events = await events_until(client, finished(run["run"]), timeout=60)
    assert next(e for e in events if e["type"] == "tool.finished")["result"] == "the config's"


@pytest.mark.parametrize(
    ("servers", "said"),
    [
        ({"bad name!": {"command": "x"}}, "'bad name!'"),
        ({"probe": {"args": ["x"]}}, "needs command"),
        ({"old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}, "SSE transport is not supported"),
    ],
)
async def test_a_malformed_server_is_refused_before_anything_starts(
    client: TrioClient, project: Path, servers: dict[str, object], said: str
) -> None:
    before = (await client.call("sessions.list"))["sessions"]
    with pytest.raises(RpcError) as caught:
        await client.call("dispatch", task="t", cwd=str(project), model="scripted/demo", mcp_servers=servers)
    assert said in caught.value.message and "the client's MCP server" in caught.value.message
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    assert (await client.call("sessions.list"))["sessions"] == before
