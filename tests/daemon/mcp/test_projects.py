"""MCP servers of several projects through a real daemon: a session reaches only the servers
of its own folder's configuration, whatever their names; one server configured in two
folders is one connection; a run keeps its servers while it lasts.

The probe is a real MCP server (the SDK's ``MCPServer`` over stdio) that answers with its
pid, its folder and the ``note.txt`` it finds there: what a session of the wrong project
would see is the other project's note.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.mcp import _manager
from roost.protocol.trio_client import TrioClient, open_client
from tests._procs import alive

from ..conftest import events_until, finished, serving, text, trust, trust_files, write_script
from .conftest import EVERYTHING_JS, everything

PROBE = '''
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool(structured_output=False)
def where() -> str:
    """This server's pid and folder, and the note.txt it finds there."""
    return f"pid {os.getpid()} in {os.getcwd()}: {Path('note.txt').read_text().strip()}"


server.run()
'''

#: Seconds for a run whose MCP servers start with it (a Python server takes 1-3 s here).
RUN_TIMEOUT = 60


def use(name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": input}


@pytest.fixture
def projects(tmp_path: Path) -> tuple[Path, Path]:
    """Two projects, each with a note and a ``.mcp.json``: the same ``probe`` entry word for
    word (so each runs in its own folder), and a ``shared`` server in one folder outside
    both, named by its bare command in one and by its absolute path in the other."""
    everything()  # fails with the install hint when node or server-everything is missing
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    shared = tmp_path / "shared"
    shared.mkdir()
    node = shutil.which("node")
    assert node is not None
    roots = []
    for name, command in (("alpha", "node"), ("beta", node)):
        root = tmp_path / name
        (root / ".git").mkdir(parents=True)
        (root / "note.txt").write_text(f"the note of {name}\n")
        (root / ".mcp.json").write_text(json.dumps({"mcpServers": {
            "probe": {"command": sys.executable, "args": [str(script)]},
            "shared": {"command": command, "args": [str(EVERYTHING_JS), "stdio"], "cwd": str(shared)},
        }}))
        trust_files(root, root / ".mcp.json")
        roots.append(root)
    return roots[0], roots[1]


async def run_calls(client: TrioClient, root: Path, *calls: dict[str, Any], **dispatch: Any) -> dict[str, str]:
    """Dispatch a full-mode run in ``root`` whose model makes ``calls``; their results by name."""
    model = write_script(root, list(calls), [text("done")], name=f"script-{os.urandom(4).hex()}.json")
    run = await client.call("dispatch", task="t", model=model, cwd=str(root), mode="full", attach=True, **dispatch)
    events = await events_until(client, finished(run["run"]), timeout=RUN_TIMEOUT)
    assert events[-1]["reason"] == "done", events[-1]
    return {e["name"]: e["result"] for e in events if e["type"] == "tool.finished" and not e.get("path")}


async def listed(client: TrioClient, root: Path) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in (await client.call("mcp.list", cwd=str(root)))["servers"]}


async def test_each_project_reaches_its_own_server_of_a_name(client: TrioClient, projects: tuple[Path, Path]) -> None:
    alpha, beta = projects
    a = await run_calls(client, alpha, use("probe__where"), use("shared__echo", message="from alpha"))
    b = await run_calls(client, beta, use("probe__where"), use("shared__echo", message="from beta"))
    assert a["probe__where"].endswith(f" in {alpha}: the note of alpha")
    assert b["probe__where"].endswith(f" in {beta}: the note of beta")
    assert (a["shared__echo"], b["shared__echo"]) == ("Echo: from alpha", "Echo: from beta")

    mine, theirs = await listed(client, alpha), await listed(client, beta)
    # Two servers named probe, each with its own process and log; one shared server.
    assert a["probe__where"].startswith(f"pid {mine['probe']['pid']} ")
    assert b["probe__where"].startswith(f"pid {theirs['probe']['pid']} ")
    assert mine["probe"]["pid"] != theirs["probe"]["pid"]
    assert mine["probe"]["log"] != theirs["probe"]["log"]
    assert mine["shared"]["state"] == theirs["shared"]["state"] == "ready"
    assert mine["shared"]["pid"] == theirs["shared"]["pid"] and mine["shared"]["restarts"] == 0

    # alpha again, after beta's server of that name started: still alpha's, the same one
    again = await run_calls(client, alpha, use("probe__where"))
    assert again["probe__where"] == a["probe__where"]

    # mcp.restart NAME restarts the server that name is for the folder asked about
    restarted = await client.call("mcp.restart", name="probe", cwd=str(beta))
    assert restarted["ok"] and restarted["server"]["pid"] not in (theirs["probe"]["pid"], mine["probe"]["pid"])
    assert (await listed(client, alpha))["probe"] == mine["probe"]


async def test_a_sub_agent_reaches_its_own_projects_servers(client: TrioClient, projects: tuple[Path, Path]) -> None:
    alpha, beta = projects
    await run_calls(client, beta, use("probe__where"))
    helper = write_script(alpha, [use("probe__where")], [text("helper done")], name="helper.json")
    lead = write_script(alpha, [{"type": "tool_use", "name": "helper", "input": {"message": "look"}}],
                        [text("lead done")], name="lead.json")
    # The user's own agents (only they may name the scripted model), run in alpha's folder.
    agents = Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text(f"---\nname: helper\nmodel: {helper}\ntools: [probe__where]\n---\nLook.\n")
    (agents / "lead.md").write_text(f"---\nname: lead\nmodel: {lead}\ntools: [helper]\n---\nAsk.\n")
    run = await client.call("dispatch", task="t", agent="lead", cwd=str(alpha), mode="full", attach=True)
    events = await events_until(client, finished(run["run"]), timeout=RUN_TIMEOUT)
    assert events[-1]["reason"] == "done"
    [nested] = [e for e in events if e["type"] == "tool.finished" and e.get("path")]
    assert nested["name"] == "probe__where" and nested["result"].endswith(f" in {alpha}: the note of alpha")


async def test_a_run_resumed_after_a_restart_reaches_its_own_server(
    tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    alpha, beta = projects
    db = tmp_path / "roost.db"
    model = write_script(alpha, [use("probe__where")], [text("done")])
    async with serving(db) as d, open_client(d.socket_path) as c:
        run = await c.call("dispatch", task="t", model=model, cwd=str(alpha), attach=True)
        asked = (await events_until(c, lambda e: e.get("type") == "permission.requested", timeout=RUN_TIMEOUT))[-1]
    async with serving(db) as d, open_client(d.socket_path) as c:
        # beta's probe starts first in this daemon: the resumed run must not reach it
        assert (await run_calls(c, beta, use("probe__where")))["probe__where"].endswith("the note of beta")
        await c.call("attach", session=run["session"])
        await c.call("permission.respond", session=run["session"], call_id=asked["call_id"], decision="approve")
        events = await events_until(c, finished(run["run"]), timeout=RUN_TIMEOUT)
    [result] = [e for e in events if e["type"] == "tool.finished"]
    assert result["result"].endswith(f" in {alpha}: the note of alpha") and events[-1]["reason"] == "done"


async def test_a_run_keeps_its_server_while_it_lasts_and_an_unused_one_goes(
    client: TrioClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_manager, "IDLE_STOP", 0)
    everything()
    root = tmp_path / "gamma"
    (root / ".git").mkdir(parents=True)

    def configure(value: str) -> None:
        (root / ".mcp.json").write_text(json.dumps({"mcpServers": {
            "ev": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"], "env": {"ROOST_V": value}},
        }}))
        trust_files(root, root / ".mcp.json")

    configure("1")
    model = write_script(root, [use("ev__get-env")], [text("done")])
    waiting = await client.call("dispatch", task="t", model=model, cwd=str(root), attach=True)
    asked = (await events_until(client, lambda e: e.get("type") == "permission.requested", timeout=RUN_TIMEOUT))[-1]
    old = (await listed(client, root))["ev"]["pid"]
    # The config is edited while that run waits: a new run gets the new server, and the
    # old one stays for the run that holds it.
    configure("2")
    assert (await run_calls(client, root, use("ev__echo", message="new")))["ev__echo"] == "Echo: new"
    new = (await listed(client, root))["ev"]["pid"]
    assert new != old and alive(old)
    await client.call("permission.respond", session=waiting["session"], call_id=asked["call_id"], decision="approve")
    events = await events_until(client, finished(waiting["run"]), timeout=RUN_TIMEOUT)
    [result] = [e for e in events if e["type"] == "tool.finished"]
    assert json.loads(result["result"])["ROOST_V"] == "1"
    # Let go, in no config, unused (for IDLE_STOP, here 0 s): stopped when the next run starts.
    await run_calls(client, root, use("ev__echo", message="again"))
    with trio.fail_after(10):
        while alive(old):
            await trio.sleep(0.02)
    assert (await listed(client, root))["ev"]["pid"] == new


async def test_a_projects_server_script_is_bound_into_trust(client: TrioClient, tmp_path: Path) -> None:
    root = tmp_path / "delta"
    (root / ".git").mkdir(parents=True)
    server = root / "server.py"

    def version(v: str) -> None:
        server.write_text(PROBE.replace("return f\"pid", f"return f\"{v} pid"))

    version("v1")
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"local": {"command": sys.executable, "args": ["server.py"]}}}))
    (root / "note.txt").write_text("the note of delta\n")
    await trust(client, root)
    assert (await run_calls(client, root, use("local__where")))["local__where"].startswith("v1 pid ")
    # A command rewrites the script the trusted server runs: the server waits for the user.
    version("v2")
    assert (await listed(client, root))["local"]["state"] == "untrusted"
    unavailable = (await run_calls(client, root, use("local__where")))["local__where"]
    assert "v2" not in unavailable and "v1" not in unavailable
    # Trusted again, the new script runs (another server, not the one started from v1).
    await trust(client, root)
    assert (await run_calls(client, root, use("local__where")))["local__where"].startswith("v2 pid ")
