"""What Claude Code hooks decide, through a real daemon: a hook's ``continue: false`` ends
the run before another model request is made (the fake Anthropic server counts them), and
a PreToolUse hook's permission decision is weighed with the rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import bash, events_until, finished, text, trust, write_script
from .test_claude_hooks import group, of_type, run, settings


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


#: A PreToolUse hook that approves every call, and notes the commands it saw.
ALLOW_ALL = """\
import json, os, sys
call = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "judged.txt"), "a") as log:
    log.write(call["tool_input"].get("command", call["tool_input"].get("file_path", "")) + "\\n")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                  "permissionDecisionReason": "the hook knows this project"}}))
"""


def allowing(folder: Path, project: Path, permissions: dict[str, Any] | None = None) -> None:
    """Claude Code settings in ``folder`` with ``permissions`` and a hook allowing every call."""
    path = folder / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    hook = project / "allow.py"
    hook.write_text(ALLOW_ALL)
    hooks = {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": f"python3 {hook}"}]}]}
    path.write_text(json.dumps({"permissions": permissions or {}, "hooks": hooks}))


async def answer_each(client: TrioClient, run: str, session: str, decision: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's events to its end, each permission request answered ``decision``; and the
    requests."""
    events: list[dict[str, Any]] = []
    asked = []
    while not events or not finished(run)(events[-1]):
        events += await events_until(client, lambda e: finished(run)(e) or e.get("type") == "permission.requested")
        if events[-1].get("type") == "permission.requested":
            asked.append(events[-1])
            await client.call("permission.respond", session=session, call_id=events[-1]["call_id"], decision=decision)
    return events, asked


async def test_a_trusted_hooks_allow_approves_what_would_ask_never_a_deny_or_ask_rule(
    client: TrioClient, project: Path
) -> None:
    allowing(project, project, {"deny": ["Bash(rm:*)"], "ask": ["Bash(git push:*)"]})
    await trust(client, project)
    model = write_script(
        project,
        [bash("touch made")],
        [bash("rm a.txt")],
        [bash("git push")],
        [{"type": "tool_use", "name": "write", "input": {"path": ".claude/agents/x.md", "content": "x"}}],
        [text("done")],
    )
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events, asked = await answer_each(client, started["run"], started["session"], "deny")
    made, rm, push, protected = of_type(events, "tool.finished")
    # Approved by the hook: no one was asked.
    assert not made["is_error"] and (project / "made").exists()
    # The deny rule refuses whatever the hook says; the ask rule and the protected path ask.
    assert rm["meta"]["denied"] and "rule deny" in rm["result"] and (project / "a.txt").exists()
    assert [a["tool"] for a in asked] == ["bash", "write"]
    assert "rule ask" in asked[0]["reason"] and "protected" in asked[1]["reason"]
    assert push["meta"]["denied"] and protected["meta"]["denied"] and not (project / ".claude" / "agents").exists()
    # The hook judged every call, before the rules (as Claude Code runs it).
    assert (project / "judged.txt").read_text().splitlines() == [
        "touch made", "rm a.txt", "git push", str(project / ".claude" / "agents" / "x.md")
    ]


async def test_an_untrusted_projects_hook_that_says_allow_approves_nothing(client: TrioClient, project: Path) -> None:
    allowing(project, project)
    model = write_script(project, [bash("touch made")], [text("done")])
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events, asked = await answer_each(client, started["run"], started["session"], "deny")
    assert [a["input"] for a in asked] == [{"command": "touch made"}]
    assert of_type(events, "project.untrusted") and not (project / "made").exists()
    assert not (project / "judged.txt").exists()


async def test_the_users_own_hook_approves_without_trust(client: TrioClient, project: Path) -> None:
    allowing(Path.home(), project)
    events = await run(client, project, [bash("touch made")], [text("done")])
    assert not of_type(events, "permission.requested") and (project / "made").exists()
