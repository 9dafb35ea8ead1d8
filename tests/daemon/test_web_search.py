"""Web search through the daemon: an agent that names ``WebSearch`` gets Anthropic's server
tool (the request carries it, a paused turn is continued, results and citations are stored
with the reply), or an MCP tool standing in for it, or a warning that says why it goes
without. The fake Messages API replays streams in the web search tool's documented shape.

Security side: searches leave the machine from the provider's side, so agent mode offers
them only under a rule the user wrote; a project's allow rule waits for trust like any.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import events_until, finished, stored, text, trust, user_dir, write, write_script

RESEARCHER = """---
name: researcher
description: Looks things up.
tools: Read, WebSearch
---
You research.
"""
PAUSED = {"transcript": "anthropic_web_search_paused.sse"}
CITED = {"transcript": "anthropic_web_search_cited.sse"}
SERVER_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}


@pytest.fixture
def researcher(project: Path) -> Path:
    """The project's Claude Code agent that names WebSearch (it only narrows: it loads untrusted)."""
    write(project / ".claude" / "agents" / "researcher.md", RESEARCHER)
    return project


def _offered(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in body.get("tools", []) if t.get("type", "").startswith("web_search")]


async def _dispatch(client: TrioClient, project: Path, **kw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    run = await client.call("dispatch", task="what does a trio nursery do?", cwd=str(project), attach=True,
                            agent="researcher", **kw)
    return run, await events_until(client, finished(run["run"]))


async def test_an_agent_that_names_websearch_searches_through_anthropic(
    client: TrioClient, researcher: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(user_dir() / "config.toml", '[tools.web_search]\nblocked_domains = ["example.com"]\n')
    with serve_anthropic([PAUSED, CITED]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-sentinel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run, events = await _dispatch(client, researcher, model="anthropic/claude-test", mode="full")
        first, second = (r.body for r in server.requests)

    assert run["warnings"] == []
    # The request carries the server tool beside the agent's own tool, as the user's config says.
    assert [t["name"] for t in first["tools"]] == ["read", "web_search"]
    assert _offered(first) == [{**SERVER_TOOL, "blocked_domains": ["example.com"], "cache_control": {"type": "ephemeral"}}]
    # The paused turn goes back whole, last, for the model to carry on.
    paused = second["messages"][-1]
    assert paused["role"] == "assistant"
    assert [b["type"] for b in paused["content"]] == ["text", "server_tool_use", "web_search_tool_result"]
    assert paused["content"][2]["content"][0]["encrypted_content"].startswith("EqgfCio")

    started = next(e for e in events if e["type"] == "run.started")
    assert "web_search" in started["tools"]
    done = events[-1]
    assert done["reason"] == "done"
    assert done["text"].endswith("A nursery waits for all of its children before it exits.")
    assert done["usage"]["web_search_requests"] == 1
    # What was searched, what was found and the sources cited are stored with the replies.
    replies = [e for e in stored(events) if e["type"] == "message.assistant"]
    assert [r["stop_reason"] for r in replies] == ["pause_turn", "end_turn"]
    search = next(b for b in replies[0]["content"] if b["type"] == "server_tool_use")
    assert search["input"] == {"query": "trio nursery cancel scope"}
    cited = next(b for b in replies[1]["content"] if b.get("citations"))
    assert cited["citations"][0]["url"] == "https://trio.readthedocs.io/en/stable/reference-core.html"


async def test_agent_mode_offers_it_only_under_a_rule_the_user_wrote(
    client: TrioClient, researcher: Path, anthropic: Any
) -> None:
    run, _ = await _dispatch(client, researcher, model="anthropic/claude-test")
    [warning] = run["warnings"]
    assert warning.startswith("web_search is not available: web_search asks in agent mode")
    assert "allow it with a rule" in warning
    assert not _offered(anthropic.requests[-1].body)

    run, _ = await _dispatch(client, researcher, model="anthropic/claude-test", allow=["WebSearch"])
    assert run["warnings"] == []
    assert _offered(anthropic.requests[-1].body) == [{**SERVER_TOOL, "cache_control": {"type": "ephemeral"}}]

    run, _ = await _dispatch(client, researcher, model="anthropic/claude-test", mode="full", deny=["web_search"])
    assert "rule deny web_search" in run["warnings"][0]
    assert not _offered(anthropic.requests[-1].body)


async def test_a_projects_allow_rule_for_websearch_waits_for_trust(
    client: TrioClient, researcher: Path, anthropic: Any
) -> None:
    write(researcher / ".claude" / "settings.json", json.dumps({"permissions": {"allow": ["WebSearch"]}}))
    run, _ = await _dispatch(client, researcher, model="anthropic/claude-test")
    assert "web_search is not available" in run["warnings"][0]
    assert not _offered(anthropic.requests[-1].body)

    await trust(client, researcher)
    run, _ = await _dispatch(client, researcher, model="anthropic/claude-test")
    assert run["warnings"] == []
    assert _offered(anthropic.requests[-1].body)


async def test_the_default_agent_searches_only_when_the_user_says_so(
    client: TrioClient, project: Path, anthropic: Any
) -> None:
    run = await client.call("dispatch", task="t", cwd=str(project), attach=True, model="anthropic/claude-test", mode="full")
    await events_until(client, finished(run["run"]))
    assert not _offered(anthropic.requests[-1].body) and run["warnings"] == []

    write(user_dir() / "config.toml", "[tools.web_search]\ndefault = true\nmax_uses = 2\n")
    run = await client.call("dispatch", task="t", cwd=str(project), attach=True, model="anthropic/claude-test", mode="full")
    await events_until(client, finished(run["run"]))
    assert _offered(anthropic.requests[-1].body) == [{**SERVER_TOOL, "max_uses": 2, "cache_control": {"type": "ephemeral"}}]


async def test_another_providers_model_goes_without_and_is_told_why(client: TrioClient, researcher: Path) -> None:
    model = write_script(researcher, [text("done")])
    run, events = await _dispatch(client, researcher, model=model, mode="full")
    [warning] = run["warnings"]
    assert "is not an Anthropic model" in warning and "[tools.web_search] mcp" in warning
    started = next(e for e in events if e["type"] == "run.started")
    assert started["tools"] == ["read"]


SEARCH_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("search")


@server.tool(structured_output=False)
def web(query: str) -> str:
    """Search the web."""
    return f"1. Trio docs (https://trio.readthedocs.io/) for {query!r}"


server.run()
'''


async def test_an_mcp_tool_stands_in_for_any_model(client: TrioClient, researcher: Path, tmp_path: Path) -> None:
    server = write(tmp_path / "search_server.py", SEARCH_SERVER)
    write(user_dir() / "config.toml", f"""
[mcp.servers.search]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(server))}]

[tools.web_search]
mcp = "search__web"
""")
    call = {"type": "tool_use", "name": "search__web", "input": {"query": "nursery"}}
    model = write_script(researcher, [call], [text("done")])
    run, events = await _dispatch(client, researcher, model=model, mode="full")
    assert run["warnings"] == []
    started = next(e for e in events if e["type"] == "run.started")
    assert started["tools"] == ["read", "search__web"]
    result = next(e for e in events if e["type"] == "tool.finished")
    assert result["result"] == "1. Trio docs (https://trio.readthedocs.io/) for 'nursery'"


async def test_a_projects_config_cannot_turn_web_search_on(client: TrioClient, project: Path, anthropic: Any) -> None:
    config = write(project / ".roost" / "config.toml", '[tools.web_search]\ndefault = true\nmcp = "evil__exfiltrate"\n')
    await trust(client, project)  # trusted or not: these keys are the user's alone
    run = await client.call("dispatch", task="t", cwd=str(project), attach=True, model="anthropic/claude-test", mode="full")
    await events_until(client, finished(run["run"]))
    assert run["warnings"] == [f"{config}: [tools.web_search] is read from your own config.toml only: left out"]
    assert not _offered(anthropic.requests[-1].body)
