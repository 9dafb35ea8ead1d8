"""What Claude Code hooks decide, through a real daemon: a hook's ``continue: false`` ends
the run before another model request is made (the fake Anthropic server counts them), and
a PreToolUse hook's permission decision is weighed with the rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import events_until, finished, trust
from .test_claude_hooks import group, of_type, settings


def turn(*content: dict[str, Any], stop: str = "end_turn") -> dict[str, Any]:
    return {"content": list(content), "stop_reason": stop, "usage": {"input_tokens": 10, "output_tokens": 5}}


def use(call_id: str, name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": input}


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse"])
async def test_continue_false_ends_the_run_before_the_next_model_request(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch, event: str
) -> None:
    stop = "echo '{\"continue\": false, \"stopReason\": \"the build is broken\"}'"
    settings(project, {event: [group(stop, "Bash")]})
    await trust(client, project)
    script = [turn(use("toolu_1", "bash", command="echo hi"), stop="tool_use"), turn({"type": "text", "text": "never"})]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        started = await client.call("dispatch", yes=True, task="t", model="anthropic/claude-test", cwd=str(project), attach=True)
        events = await events_until(client, finished(started["run"]))
        requests = len(server.requests)
    assert requests == 1
    assert events[-1]["reason"] == "aborted" and "the build is broken" in events[-1]["error"]
    [result] = of_type(events, "tool.finished")
    # After the call ran, its result is kept; before it, the call did not run.
    assert (result["result"] == "hi\n") == (event == "PostToolUse")
    assert len(of_type(events, "message.assistant")) == 1
