"""Run settings: one place fills the defaults, a dispatch's "off" beats an agent's budget,
and a run resumed after a restart is set up exactly as its run.started recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.protocol import RpcError
from roost.protocol.trio_client import TrioClient, open_client
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import events_until, finished, serving, text, write_script


def _agent(project: Path, name: str, front: str) -> None:
    folder = project / ".roost" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(f"---\nname: {name}\n{front}\n---\nWork.\n")


async def test_think_off_from_a_dispatch_beats_the_agents_budget(client: TrioClient, project: Path) -> None:
    _agent(project, "deep", "think: high\ntools: [read]")
    model = write_script(project, [text("a")], [text("b")], [text("c")])
    runs = []
    for think in (None, "off", 1024):
        params = {"think": think} if think is not None else {}
        run = await client.call("dispatch", task="t", agent="deep", model=model, cwd=str(project), attach=True, **params)
        events = await events_until(client, finished(run["run"]))
        runs.append(next(e for e in events if e["type"] == "run.started").get("think"))
        model = write_script(project, [text("a")], [text("b")], [text("c")], name=f"s{len(runs)}.json")
    assert runs == [24576, None, 1024]


async def test_the_output_limit_comes_from_the_dispatch_then_the_agent_then_the_default(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _agent(project, "brief", "max_tokens: 555\ntools: [read]")
    reply = {"content": [{"type": "text", "text": "ok"}]}
    with serve_anthropic(default=reply) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-sentinel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        started = []
        for params in ({"max_tokens": 321}, {"agent": "brief"}, {"agent": "brief", "max_tokens": 77}, {}):
            run = await client.call(
                "dispatch", task="t", model="anthropic/claude-test", cwd=str(project), attach=True, **params
            )
            events = await events_until(client, finished(run["run"]))
            started.append(next(e for e in events if e["type"] == "run.started")["max_tokens"])
        sent = [r.body["max_tokens"] for r in server.requests]
    assert sent == started == [321, 555, 77, 8192]


async def test_an_output_limit_below_one_is_refused(client: TrioClient, project: Path) -> None:
    model = write_script(project, [text("a")])
    with pytest.raises(RpcError, match="max_tokens must be at least 1"):
        await client.call("dispatch", task="t", model=model, cwd=str(project), max_tokens=0)


async def test_a_run_resumed_after_a_restart_gets_what_it_started_with(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _agent(project, "helper", "description: Helps.\ntools: [read]")
    _agent(project, "lead", "model: anthropic/claude-test\nthink: 5000\nmax_tokens: 6000\ntools: [bash, read, helper]")
    script = [
        {"content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "touch made"}}],
         "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "done"}]},
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-sentinel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        db = tmp_path / "roost.db"
        async with serving(db) as d, open_client(d.socket_path) as c:
            run = await c.call("dispatch", task="t", agent="lead", cwd=str(project), attach=True, sandbox="off")
            events = await events_until(c, lambda e: e.get("type") == "permission.requested")
            started = next(e for e in events if e["type"] == "run.started")
        # The config changes while the daemon is down: the resumed run keeps what it had.
        _agent(project, "lead", "model: anthropic/claude-other\nthink: 100\nmax_tokens: 50\ntools: [read]")
        async with serving(db) as d, open_client(d.socket_path) as c:
            await c.call("attach", session=run["session"])
            await c.call("permission.respond", session=run["session"], call_id="toolu_1", decision="approve")
            events = await events_until(c, finished(run["run"]))
        first, second = (r.body for r in server.requests)
    assert events[-1]["reason"] == "done" and (project / "made").exists()
    assert started["think"] == 5000 and started["subagents"] == ["helper"]
    for body in (first, second):
        assert body["model"] == "claude-test"
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 5000}
        assert body["max_tokens"] == 6000
        assert sorted(t["name"] for t in body["tools"]) == ["bash", "helper", "read"]
        assert body["system"] == first["system"]
