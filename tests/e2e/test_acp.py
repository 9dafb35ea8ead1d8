"""`roost acp` driven by a client no one here wrote: the Agent Client Protocol's Python SDK,
as an editor drives an agent server. The editor's session is a roost session: a terminal
sees the same run, and an approval given there wins over the editor's question."""

from __future__ import annotations

import asyncio
from typing import Any

import acp
from acp import schema

from .conftest import E2E, ROOST, bash, text, wait_until


class Editor:
    """What an editor does with an agent's requests: keep the updates, answer or hold
    permission questions."""

    def __init__(self, answer: str | None) -> None:
        self.updates: list[Any] = []
        self.asked: list[schema.ToolCallUpdate] = []
        #: The option chosen for each question (None: never answered, as a person away).
        self.answer = answer

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **_: Any) -> Any:
        self.asked.append(tool_call)
        if self.answer is None:
            await asyncio.Event().wait()
        return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected", option_id=self.answer))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]


async def _scenario(e2e: E2E) -> None:
    editor = Editor(answer="once")
    commands = e2e.project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("---\ndescription: Review a file\nargument-hint: [file]\n---\nReview $0.\n")
    model = e2e.script([text("Making it."), bash("echo hi > made.txt")], [text("Made.")])
    env = {**e2e.env, "ROOST_MODEL": model}  # what the editor starts roost with
    async with acp.spawn_agent_process(editor, ROOST, "acp", env=env, cwd=str(e2e.project)) as (conn, _):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_capabilities.load_session and init.agent_info.name == "roost"
        session = (await conn.new_session(cwd=str(e2e.project), mcp_servers=[]))
        sid = session.session_id
        assert session.modes.current_mode_id == "agent"
        assert [m.id for m in session.modes.available_modes] == ["agent", "plan", "full", "exec"]
        assert e2e.session_row(sid)["cwd"] == str(e2e.project)
        # The folder's custom commands, as the editor offers them after a /.
        for _ in range(100):
            announced = [u for u in editor.updates if u.session_update == "available_commands_update"]
            if announced:
                break
            await asyncio.sleep(0.05)
        [(command,)] = [tuple(u.available_commands) for u in announced]
        assert (command.name, command.description, command.input.root.hint) == ("review", "Review a file", "[file]")

        # A prompt streams; a command asks the editor, which allows it once.
        reply = await _prompt(conn, sid, "make a file")
        assert reply.stop_reason == "end_turn"
        assert (e2e.project / "made.txt").read_text() == "hi\n"
        [asked] = editor.asked
        assert asked.kind == "execute" and asked.title == "bash echo hi > made.txt"
        kinds = editor.kinds()
        assert "agent_message_chunk" in kinds and "tool_call" in kinds and "tool_call_update" in kinds
        finished = [u for u in editor.updates if u.session_update == "tool_call_update" and u.status == "completed"]
        assert finished and finished[-1].tool_call_id == asked.tool_call_id
        text_sent = "".join(u.content.text for u in editor.updates if u.session_update == "agent_message_chunk")
        assert "Making it." in text_sent and "Made." in text_sent

        # The terminal's view of the same session: the same run, stored.
        stored = e2e.events(sid)
        assert [e["type"] for e in stored if e["type"] == "run.finished"] == ["run.finished"]

        # Listing and loading: the session's history replayed as updates.
        listed = await conn.list_sessions(cwd=str(e2e.project))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(sid, "make a file")]
        editor.updates.clear()
        await conn.load_session(cwd=str(e2e.project), session_id=sid, mcp_servers=[])
        assert editor.kinds()[0] == "user_message_chunk" and "tool_call" in editor.kinds()


async def _away(e2e: E2E) -> None:
    """An approval given in a terminal first wins, the editor never answering; cancel
    aborts."""
    editor = Editor(answer=None)
    # The scripted model answers by the session's turn: two prompts, four replies.
    model = e2e.script([bash("echo there > there.txt")], [text("Done there.")], [bash("sleep 30")], [text("never")])
    env = {**e2e.env, "ROOST_MODEL": model}
    async with acp.spawn_agent_process(editor, ROOST, "acp", env=env, cwd=str(e2e.project)) as (conn, _):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(e2e.project), mcp_servers=[])).session_id
        prompting = asyncio.create_task(_prompt(conn, sid, "write it"))
        while not editor.asked:
            await asyncio.sleep(0.05)
        [row] = await asyncio.to_thread(lambda: wait_until(lambda: e2e.json_out("pending", "--json"), what="the request"))
        await asyncio.to_thread(e2e.ok, "approve", sid)
        reply = await asyncio.wait_for(prompting, 20)
        assert reply.stop_reason == "end_turn" and (e2e.project / "there.txt").read_text() == "there\n"
        assert row["call_id"] == editor.asked[0].tool_call_id

        prompting = asyncio.create_task(_prompt(conn, sid, "take long", mode="full"))
        await asyncio.to_thread(lambda: e2e.wait_event(sid, lambda e: e["type"] == "tool.started" and e["name"] == "bash"))
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(prompting, 20)).stop_reason == "cancelled"


async def _prompt(conn: Any, sid: str, task: str, mode: str = "agent") -> Any:
    """A prompt in ``mode`` (the model: ROOST_MODEL of the environment the editor started
    roost with, as for any dispatch that names none)."""
    await conn.set_session_mode(session_id=sid, mode_id=mode)
    return await conn.prompt(session_id=sid, prompt=[acp.text_block(task)])


def test_an_editor_drives_a_roost_session_over_acp(e2e: E2E) -> None:
    asyncio.run(_scenario(e2e))


def test_an_approval_given_in_a_terminal_goes_on_without_the_editors_answer(e2e: E2E) -> None:
    asyncio.run(_away(e2e))


async def _searched(e2e: E2E) -> None:
    """A web search the provider ran (its blocks in the reply) reaches the editor as a tool
    call: the query, then what it found."""
    editor = Editor(answer=None)
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "trio nursery"}}
    results = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
        {"type": "web_search_result", "title": "Trio", "url": "https://trio.readthedocs.io/", "encrypted_content": "E"}]}
    model = e2e.script([text("Searching."), search, results, text("Found it.")])
    env = {**e2e.env, "ROOST_MODEL": model}
    async with acp.spawn_agent_process(editor, ROOST, "acp", env=env, cwd=str(e2e.project)) as (conn, _):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(e2e.project), mcp_servers=[])).session_id
        assert (await _prompt(conn, sid, "look it up")).stop_reason == "end_turn"
    [call] = [u for u in editor.updates if u.session_update == "tool_call"]
    assert (call.tool_call_id, call.title, call.kind, call.raw_input) == ("srvtoolu_1", "web_search trio nursery", "fetch", {"query": "trio nursery"})
    [done] = [u for u in editor.updates if u.session_update == "tool_call_update"]
    assert done.status == "completed" and done.content[0].content.text == "1 result: Trio (trio.readthedocs.io)"


PROBE = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool(structured_output=False)
def hello(name: str) -> str:
    \"\"\"Greets.\"\"\"
    import os
    return f"hello {name} from the editor's server ({os.environ['PROBE_TOKEN']})"


server.run()
"""


async def _editors_servers(e2e: E2E) -> None:
    """The MCP servers an editor configures reach the session's runs (and an SSE one, which
    roost does not speak, is left out without failing the prompt)."""
    import sys

    probe = e2e.project.parent / "probe.py"
    probe.write_text(PROBE)
    editor = Editor(answer=None)
    call = {"type": "tool_use", "name": "probe__hello", "input": {"name": "zed"}}
    model = e2e.script([call], [text("Greeted.")])
    servers = [
        schema.McpServerStdio(name="probe", command=sys.executable, args=[str(probe)],
                              env=[schema.EnvVariable(name="PROBE_TOKEN", value="t0k")]),
        schema.SseMcpServer(type="sse", name="old", url="http://127.0.0.1:9/sse", headers=[]),
    ]
    env = {**e2e.env, "ROOST_MODEL": model}
    async with acp.spawn_agent_process(editor, ROOST, "acp", env=env, cwd=str(e2e.project)) as (conn, _):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_capabilities.mcp_capabilities.http and not init.agent_capabilities.mcp_capabilities.sse
        sid = (await conn.new_session(cwd=str(e2e.project), mcp_servers=servers)).session_id
        assert (await _prompt(conn, sid, "greet", mode="full")).stop_reason == "end_turn"
    [done] = [u for u in editor.updates if u.session_update == "tool_call_update" and u.status == "completed"]
    assert done.content[0].content.text == "hello zed from the editor's server (t0k)"


def test_the_editors_mcp_servers_reach_its_sessions_runs(e2e: E2E) -> None:
    asyncio.run(_editors_servers(e2e))


def test_a_web_search_reaches_the_editor_as_a_tool_call(e2e: E2E) -> None:
    asyncio.run(_searched(e2e))


def test_bad_input_is_refused_and_the_agent_serves_on(e2e: E2E) -> None:
    import json
    import subprocess

    agent = subprocess.Popen([ROOST, "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env=e2e.env, cwd=e2e.project, text=True)
    assert agent.stdin is not None and agent.stdout is not None
    try:
        def send(message: str) -> dict[str, Any]:
            agent.stdin.write(message + "\n")
            agent.stdin.flush()
            return json.loads(agent.stdout.readline())

        # A line that is not JSON gets no answer from the SDK (it logs it); the agent serves on.
        agent.stdin.write("this is not json\n")
        assert send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "no/such", "params": {}}))["error"]["code"] == -32601
        unknown = send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                                   "params": {"sessionId": "nosuch", "prompt": [{"type": "text", "text": "hi"}]}}))
        assert "SESSION_NOT_FOUND" in json.dumps(unknown["error"])
        ready = send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}}))
        assert ready["result"]["agentInfo"]["name"] == "roost"
    finally:
        agent.stdin.close()
        code = agent.wait(timeout=10)
        agent.stdout.close()
    assert code == 0


EDITOR = """
import {{ spawn }} from "node:child_process";
import {{ Readable, Writable }} from "node:stream";
import * as acp from {sdk};
const [roost, cwd] = process.argv.slice(2);
const agent = spawn(roost, ["acp"], {{ cwd, stdio: ["pipe", "pipe", "inherit"] }});
const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
const updates = [];
const asked = [];
const editor = acp.client({{ name: "test-editor" }})
  .onRequest(acp.methods.client.session.requestPermission, ({{ params }}) => {{
    asked.push(params.toolCall.title);
    return {{ outcome: {{ outcome: "selected", optionId: "once" }} }};
  }})
  .onNotification(acp.methods.client.session.update, ({{ params }}) => {{ updates.push(params.update.sessionUpdate); }});
const result = await editor.connectWith(stream, async (ctx) => {{
  const init = await ctx.request(acp.methods.agent.initialize, {{ protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {{}} }});
  const session = await ctx.request(acp.methods.agent.session.new, {{ cwd, mcpServers: [] }});
  const reply = await ctx.request(acp.methods.agent.session.prompt, {{
    sessionId: session.sessionId, prompt: [{{ type: "text", text: "make a file" }}],
  }});
  return {{ agent: init.agentInfo.name, session: session.sessionId, stopReason: reply.stopReason }};
}});
agent.stdin.end();
console.log(JSON.stringify({{ ...result, updates, asked }}));
"""


def test_the_official_typescript_sdk_drives_roost_as_an_editor_does(e2e: E2E, tmp_path: Any) -> None:
    import json
    import shutil
    import subprocess

    from tests._agent_sdk import ensure_acp_sdk

    node = shutil.which("node")
    assert node is not None, "node is not on PATH: install Node.js 18 or later"
    sdk = ensure_acp_sdk() / "node_modules" / "@agentclientprotocol" / "sdk" / "dist" / "v1" / "stable" / "acp.js"
    script = tmp_path / "editor.mjs"
    script.write_text(EDITOR.format(sdk=json.dumps(sdk.as_uri())))
    model = e2e.script([text("Making it."), bash("echo ts > ts.txt")], [text("Made.")])
    done = subprocess.run([node, str(script), ROOST, str(e2e.project)], cwd=e2e.project,
                          env={**e2e.env, "ROOST_MODEL": model}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert (seen["agent"], seen["stopReason"]) == ("roost", "end_turn")
    assert seen["asked"] == ["bash echo ts > ts.txt"]
    assert {"agent_message_chunk", "tool_call", "tool_call_update"} <= set(seen["updates"])
    assert (e2e.project / "ts.txt").read_text() == "ts\n"
    assert e2e.session_row(seen["session"])["status"] == "done"
