"""A session that goes on without an MCP server (disabled in the user's config between two
runs) or with an agent whose tools changed: the clients get ``tools.changed``, and the model
reads which tools went and came, first in the run's first user message."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from roost.daemon.folder._project import user_config_file
from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from ..conftest import events_until, finished, stored, text, write_script
from .test_projects import PROBE, RUN_TIMEOUT

MODEL = "anthropic/claude-test"


def _reply(words: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": words}], "stop_reason": "end_turn"}


def _bare(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without the cache breakpoints the provider marks on the last ones."""
    return [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
        for m in messages
    ]


async def _run(client: TrioClient, project: Path, task: str, **more: Any) -> list[dict[str, Any]]:
    run = await client.call("dispatch", yes=True, task=task, model=MODEL, cwd=str(project), attach=True, **more)
    events = stored(await events_until(client, finished(run["run"]), timeout=RUN_TIMEOUT))
    assert events[-1]["reason"] == "done", events[-1]
    return events


async def test_an_mcp_server_disabled_between_runs_is_told_to_the_clients_and_the_model(
    client: TrioClient, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    config = user_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    server = f'[mcp.servers.probe]\ncommand = "{sys.executable}"\nargs = ["{probe}"]\n'
    config.write_text(server)
    with serve_anthropic([_reply("one"), _reply("two"), _reply("three")]) as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        first = await _run(client, project, "first")
        session = first[0]["session"]
        started = next(e for e in first if e["type"] == "run.started")
        assert "probe__where" in started["tools"] and "tools.changed" not in [e["type"] for e in first]

        config.write_text(server + "enabled = false\n")
        second = await _run(client, project, "second", session=session)
        third = await _run(client, project, "third", session=session)  # the same tools again
        requests = [r.body for r in fake.requests]

    assert [e["type"] for e in second[:3]] == ["run.started", "tools.changed", "message.user"]
    changed = second[1]
    assert changed["removed"] == ["probe__where"] and changed["added"] == []
    assert changed["note"] == (
        "[roost] Your tools changed since this session's last run. "
        "No longer available (calls to them fail): probe__where."
    )
    assert "tools.changed" not in [e["type"] for e in third]
    # The model: no such tool offered any more, and told so where the run begins; what it
    # saw before is sent as it was (a provider's cached prefix still holds).
    assert "probe__where" in {t["name"] for t in requests[0]["tools"]}
    assert "probe__where" not in {t["name"] for t in requests[1]["tools"]}
    one = {"role": "assistant", "content": [{"type": "text", "text": "one"}]}
    assert _bare(requests[1]["messages"][:2]) == _bare(requests[0]["messages"]) + [one]
    assert _bare(requests[1]["messages"][2:])[0]["content"] == [
        {"type": "text", "text": changed["note"]},
        {"type": "text", "text": "second"},
    ]
    # Later calls see it in the history, once.
    notes = [b for m in requests[2]["messages"] for b in m["content"] if b.get("text") == changed["note"]]
    assert len(notes) == 1
    # `roost logs` (events) has it, as the other stored events.
    logged = (await client.call("events", session=session))["events"]
    assert [e for e in logged if e["type"] == "tools.changed"] == [changed]


async def test_an_agent_whose_tools_changed_says_so(client: TrioClient, project: Path) -> None:
    agents = Path(user_config_file()).parent / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    model = write_script(project, [text("one")], [text("two")])
    (agents / "narrow.md").write_text(f"---\nname: narrow\nmodel: {model}\ntools: [read, grep, bash]\n---\nWork.\n")
    run = await client.call("dispatch", yes=True, task="t", agent="narrow", cwd=str(project), attach=True)
    await events_until(client, finished(run["run"]))
    (agents / "narrow.md").write_text(f"---\nname: narrow\nmodel: {model}\ntools: [read, glob]\n---\nWork.\n")
    again = await client.call("dispatch", yes=True, task="t", agent="narrow", session=run["session"], attach=True)
    events = stored(await events_until(client, finished(again["run"])))
    [changed] = [e for e in events if e["type"] == "tools.changed"]
    assert (changed["added"], changed["removed"]) == (["glob"], ["bash", "grep"])
