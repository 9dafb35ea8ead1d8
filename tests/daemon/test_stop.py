"""The graceful stop through a real daemon: ``abort`` with ``after_step`` while a tool runs.

The tool waits for a file the test creates after it asked for the stop, so the stop always
arrives while the tool is in flight (no race, no timing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import bash, events_until, finished, stored, text, write_script
from .test_subagents import agent_file, call

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.02; done; echo finished"


async def test_after_step_lets_the_tool_finish_then_ends_the_run_aborted(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [
        {"content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": WAIT_FOR_GO}}],
         "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "a second reply nobody should ask for"}]},
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call(
            "dispatch", task="t", model="anthropic/claude-test", cwd=str(project), attach=True, yes=True, sandbox="off"
        )
        events = await events_until(client, lambda e: e.get("type") == "tool.started")
        assert (await client.call("abort", session=run["session"], after_step=True)) == {"ok": True, "run": run["run"]}
        events += await events_until(client, lambda e: e.get("type") == "run.stopping")
        (project / "go").touch()
        events += await events_until(client, finished(run["run"]))
        assert len(server.requests) == 1  # no further model call
    result = next(e for e in stored(events) if e["type"] == "tool.finished")
    assert (result["call_id"], result["result"], result["is_error"]) == ("toolu_1", "finished\n", False)
    last = events[-1]
    assert (last["reason"], last["error"]) == ("aborted", "stopped by the user after the step")
    types = [e["type"] for e in stored(events)]
    assert types.index("run.stopping") < types.index("tool.finished") < types.index("run.finished")


async def test_after_step_stops_sub_agents_after_their_steps_too(client: TrioClient, project: Path) -> None:
    helper = write_script(project, [bash(WAIT_FOR_GO)], [text("never said")], name="helper.json")
    lead = write_script(project, [call("helper", "wait for it")], [text("never said either")], name="lead.json")
    agent_file(project, "helper", f"model: {helper}\ntools: [bash]")
    agent_file(project, "lead", f"model: {lead}\ntools: [helper]")
    run = await client.call("dispatch", task="t", agent="lead", cwd=str(project), attach=True, yes=True, sandbox="off")
    events = await events_until(client, lambda e: e.get("type") == "tool.started" and e.get("path"))
    await client.call("abort", session=run["session"], after_step=True)
    (project / "go").touch()
    events += await events_until(client, finished(run["run"]))
    mine = stored(events)
    nested = [e for e in mine if e.get("path")]
    assert next(e for e in nested if e["type"] == "tool.finished")["result"] == "finished\n"
    assert next(e for e in nested if e["type"] == "run.finished")["reason"] == "aborted"
    # One reply each: neither the helper nor the lead was called again.
    assert [bool(e.get("path")) for e in mine if e["type"] == "message.assistant"] == [False, True]
    assert mine[-1]["reason"] == "aborted"


async def test_after_step_with_no_run_in_flight_is_not_running(client: TrioClient, project: Path) -> None:
    model = write_script(project, [text("hi")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    await events_until(client, finished(run["run"]))
    with pytest.raises(RpcError) as info:
        await client.call("abort", session=run["session"], after_step=True)
    assert info.value.code == ErrorCode.NOT_RUNNING
