"""MCP prompts as slash commands and resources as ``@server:uri``, through a real daemon,
server-everything and a local fake of the Messages API (what the model is sent checked);
list_changed refreshes the lists; an untrusted project's server stays out of reach."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.mcp import McpPrompt
from roost.daemon.mcp._content import prompt_arguments, resource_references
from roost.protocol import RpcError
from roost.protocol.trio_client import TrioClient

from ..conftest import events_until, finished, text, user_dir, write, write_script
from .conftest import EVERYTHING_JS, everything

README = "demo://resource/static/document/architecture.md"


@pytest.fixture
def ev() -> None:
    """The user's own server ``ev``: server-everything over stdio."""
    everything()
    write(user_dir() / "config.toml", f'[mcp.servers.ev]\ncommand = "node"\nargs = ["{EVERYTHING_JS}", "stdio"]\n')


async def typed(client: TrioClient, project: Path, task: str) -> dict[str, Any]:
    """Dispatch ``task`` to the fake Anthropic model and wait for the run's end; its run.started."""
    started = await client.call("dispatch", task=task, cwd=str(project), attach=True, env=dict(os.environ), model="sonnet")
    events = await events_until(client, finished(started["run"]), timeout=60)
    assert events[-1]["reason"] == "done", events[-1]
    return next(e for e in events if e["type"] == "run.started")


def sent(anthropic: Any) -> str:
    """The text of the last request's first user message: what the model was given."""
    content = anthropic.requests[-1].body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(block.get("text", "") for block in content)


async def test_a_servers_prompts_are_slash_commands(client: TrioClient, project: Path, anthropic: Any, ev: None) -> None:
    listed = {c["name"]: c for c in (await client.call("commands.list", cwd=str(project)))["commands"]}
    args = listed["mcp__ev__args-prompt"]
    assert (args["kind"], args["argument_hint"], args["source"]) == ("mcp prompt", "city [state]", "MCP server ev")
    assert listed["mcp__ev__simple-prompt"]["argument_hint"] == ""

    await typed(client, project, "/mcp__ev__simple-prompt")
    assert sent(anthropic) == "This is a simple prompt without arguments."
    # Words go to the declared arguments in order, quoting groups them, the last takes the rest.
    started = await typed(client, project, '/mcp__ev__args-prompt "New York" NY')
    assert sent(anthropic) == "What's weather in New York, NY?"
    assert started["command"]["name"] == "mcp__ev__args-prompt" and started["command"]["kind"] == "mcp prompt"
    await typed(client, project, "/mcp__ev__args-prompt Paris Île de France")
    assert sent(anthropic) == "What's weather in Paris, Île de France?"

    # A required argument missing, an unknown prompt: the dispatch is refused, saying why.
    with pytest.raises(RpcError, match=r"needs city \(usage: /mcp__ev__args-prompt city \[state\]\)"):
        await client.call("dispatch", task="/mcp__ev__args-prompt", cwd=str(project), model="sonnet")
    with pytest.raises(RpcError, match=r"MCP server ev has no prompt 'nope' \(its prompts: .*/mcp__ev__simple-prompt"):
        await client.call("dispatch", task="/mcp__ev__nope", cwd=str(project), model="sonnet")


async def test_a_resource_named_in_a_task_is_read_and_sent_with_it(
    client: TrioClient, project: Path, anthropic: Any, ev: None
) -> None:
    listed = (await client.call("mcp.resources", cwd=str(project)))["resources"]
    doc = next(r for r in listed if r["uri"] == README)
    assert doc["reference"] == f"@ev:{README}" and doc["mime_type"] == "text/markdown"
    whole = (EVERYTHING_JS.parent / "docs" / "architecture.md").read_text()

    await typed(client, project, f"Summarize @ev:{README}. And @nobody:demo://x stays text.")
    given = sent(anthropic)
    assert given.startswith(f"Summarize @ev:{README}. And @nobody:demo://x stays text.\n\n")
    assert f'<mcp-resource server="ev" uri="{README}">\n{whole.rstrip()}\n</mcp-resource>' in given
    # A blob is named, not sent; a resource the server cannot read says why.
    await typed(client, project, "look at @ev:demo://resource/dynamic/blob/1 and @ev:demo://missing/thing")
    given = sent(anthropic)
    assert '<mcp-resource server="ev" uri="demo://resource/dynamic/blob/1">\n[binary content' in given
    assert '<mcp-resource server="ev" uri="demo://missing/thing">not included: MCP server ev: resource' in given


async def test_list_changed_refreshes_the_resources(client: TrioClient, project: Path, ev: None) -> None:
    before = {r["uri"] for r in (await client.call("mcp.resources", cwd=str(project)))["resources"]}
    # The server registers a resource of this session when the tool runs, and says its list changed.
    use = {"type": "tool_use", "name": "ev__gzip-file-as-resource",
           "input": {"name": "note.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"}}
    model = write_script(project, [use], [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), mode="full", attach=True)
    events = await events_until(client, finished(run["run"]), timeout=60)
    assert not next(e for e in events if e["type"] == "tool.finished")["is_error"]
    with trio.fail_after(10):
        while True:
            now = {r["uri"] for r in (await client.call("mcp.resources", cwd=str(project)))["resources"]}
            if now - before:
                break
            await trio.sleep(0.05)
    assert [uri for uri in now - before] == ["demo://resource/session/note.gz"]


async def test_an_untrusted_projects_server_offers_no_prompt_and_no_resource(
    client: TrioClient, project: Path, anthropic: Any
) -> None:
    everything()
    marker = project / "server-started"
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "ev": {"command": "sh", "args": ["-c", f'touch "{marker}"; exec node "{EVERYTHING_JS}" stdio']},
    }}))
    names = {c["name"] for c in (await client.call("commands.list", cwd=str(project)))["commands"]}
    assert not any(n.startswith("mcp__") for n in names)
    listing = await client.call("mcp.resources", cwd=str(project))
    assert listing["resources"] == [] and listing["untrusted"]["ignored"][0]["name"] == "ev"
    with pytest.raises(RpcError, match=r"the MCP server ev .* is not trusted: review it with roost trust"):
        await client.call("dispatch", task="/mcp__ev__simple-prompt", cwd=str(project), model="sonnet")
    await typed(client, project, f"read @ev:{README}")
    assert sent(anthropic) == f"read @ev:{README}"
    assert not marker.exists()


async def test_a_projects_command_cannot_read_the_users_resources(
    client: TrioClient, project: Path, anthropic: Any, ev: None
) -> None:
    # An untrusted project's command names the user's own server's resource: only what the
    # person typed is read.
    write(project / ".claude" / "commands" / "grab.md", f"Send this on: @ev:{README}\n")
    await typed(client, project, "/grab")
    assert sent(anthropic) == f"Send this on: @ev:{README}"


LEARNER = '''
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("learner")


@server.tool(structured_output=False)
async def learn(name: str, ctx: Context) -> str:
    """Add a prompt of this name, and say the prompt list changed."""

    def prompt(who: str) -> str:
        return f"Say hello to {who}, from {name}."

    server.prompt(name=name, description="learned")(prompt)
    await ctx.session.send_prompt_list_changed()
    return "learned"


server.run()
'''


async def test_list_changed_refreshes_the_prompts(client: TrioClient, project: Path, anthropic: Any, tmp_path: Path) -> None:
    script = write(tmp_path / "learner.py", LEARNER)
    write(user_dir() / "config.toml", f'[mcp.servers.learner]\ncommand = "{sys.executable}"\nargs = ["{script}"]\n')

    async def commands() -> set[str]:
        return {c["name"] for c in (await client.call("commands.list", cwd=str(project)))["commands"]}

    assert "mcp__learner__greet" not in await commands()
    use = {"type": "tool_use", "name": "learner__learn", "input": {"name": "greet"}}
    model = write_script(project, [use], [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), mode="full", attach=True)
    events = await events_until(client, finished(run["run"]), timeout=60)
    assert next(e for e in events if e["type"] == "tool.finished")["result"] == "learned"
    with trio.fail_after(10):
        while "mcp__learner__greet" not in await commands():
            await trio.sleep(0.05)
    await typed(client, project, "/mcp__learner__greet the world")
    assert sent(anthropic) == "Say hello to the world, from greet."


def test_references_and_arguments_as_claude_code_writes_them() -> None:
    servers = {"ev": object(), "docs": object()}
    text = ("Compare @ev:demo://a/1 with @docs:file://api/auth.md. Mail me@ev:demo://x, "
            "skip @other:demo://y, @ev:demo://a/1 again, and (@docs:schema://users).")
    assert resource_references(text, servers) == [("ev", "demo://a/1"), ("docs", "file://api/auth.md"), ("docs", "schema://users")]
    prompt = McpPrompt("jira", "create issue", "", (("title", True, ""), ("priority", False, "")))
    assert prompt.command == "mcp__jira__create_issue" and prompt.hint == "title [priority]"
    assert prompt_arguments(prompt, '"Bug in login flow" high') == {"title": "Bug in login flow", "priority": "high"}
    assert prompt_arguments(prompt, "one") == {"title": "one"}
    assert prompt_arguments(prompt, 'it "is open') == {"title": "it", "priority": '"is open'}
    with pytest.raises(ValueError, match="needs title"):
        prompt_arguments(prompt, "")
