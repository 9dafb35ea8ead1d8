"""Claude Code hooks beyond the tool calls, through a real daemon: the session's transcript
gone with the session, Notification and PreCompact (with the instructions of roost compact), ``if`` and ``async``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from roost.daemon._paths import state_dir
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import bash, events_until, finished, text, trust, write_script
from .test_claude_hooks import group, of_type, run, script, settings, written
from .test_sandbox import INSIDE


async def test_a_deleted_sessions_transcript_goes_with_it(client: TrioClient, project: Path) -> None:
    events = await run(client, project, [text("one")])
    session = events[0]["session"]
    path = state_dir() / "transcripts" / f"{session}.jsonl"
    await written(path, 2)
    (path.with_suffix("") / "subagents").mkdir(parents=True, exist_ok=True)
    other = await run(client, project, [text("two")])
    kept = state_dir() / "transcripts" / f"{other[0]['session']}.jsonl"
    await written(kept, 2)
    pruned = await client.call("sessions.prune", older_than=0, sessions=[session])
    assert [s["id"] for s in pruned["sessions"]] == [session]
    assert not path.exists() and not path.with_suffix("").exists()
    assert kept.exists()


async def test_if_runs_a_hook_only_for_the_calls_its_rule_matches(client: TrioClient, project: Path) -> None:
    log = 'python3 -c "import json,sys; print(json.load(sys.stdin)[\'tool_input\'][\'command\'], file=open(\'git.log\', \'a\'))"'
    settings(project, {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": log, "if": "Bash(git *)"}]}],
        # An `if` where no tool is called: Claude Code never runs the hook.
        "Stop": [{"hooks": [{"type": "command", "command": "touch stop-ran", "if": "Bash(*)"}]}],
    })
    await trust(client, project)
    await run(client, project, [bash("echo hi")], [bash("ls && git status")], [bash("gitk")], [text("done")], yes=True)
    assert (project / "git.log").read_text().splitlines() == ["ls && git status"]
    assert not (project / "stop-ran").exists()


async def test_a_broken_if_is_refused_with_its_place(client: TrioClient, project: Path) -> None:
    settings(project, {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true", "if": "Bash("}]}]})
    model = write_script(project, [text("done")])
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", model=model, cwd=str(project))
    assert info.value.code == ErrorCode.CONFIG_INVALID and "hooks.PreToolUse[0].hooks[0]: if:" in info.value.message


async def test_an_async_hook_runs_off_the_runs_way_and_its_answer_is_ignored(client: TrioClient, project: Path) -> None:
    slow = """\
import json, sys, time
call = json.load(sys.stdin)
time.sleep(1.5)
open("async.json", "w").write(json.dumps(call))
print(json.dumps({"decision": "block", "reason": "too late to matter", "continue": False}))
"""
    hook = script(project, "slow.py", slow)
    settings(project, {"PostToolUse": [group(hook, "Bash", **{"async": True})]})
    await trust(client, project)
    began = trio.current_time()
    events = await run(client, project, [bash("echo hi")], [text("done")], yes=True)
    took = trio.current_time() - began
    [result] = of_type(events, "tool.finished")
    assert result["result"] == "hi\n" and events[-1]["reason"] == "done"
    assert took < 1.5 and not (project / "async.json").exists()
    with trio.fail_after(10):
        while not (project / "async.json").exists():
            await trio.sleep(0.05)
    await trio.sleep(0.1)
    call = json.loads((project / "async.json").read_text())
    assert call["hook_event_name"] == "PostToolUse" and call["tool_response"]["stdout"] == "hi\n"


LOG = """\
import json, sys
payload = json.load(sys.stdin)
with open("events.jsonl", "a") as log:
    log.write(json.dumps(payload) + "\\n")
"""


def logged(project: Path) -> list[dict[str, Any]]:
    path = project / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_notification_hooks_hear_when_a_call_waits_for_a_person(client: TrioClient, project: Path) -> None:
    hook = script(project, "log.py", LOG)
    settings(project, {"Notification": [group(hook, "permission_prompt"), group("touch idle", "idle_prompt")]})
    await trust(client, project)
    model = write_script(project, [bash("touch made")], [text("done")])
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    await events_until(client, lambda e: e.get("type") == "permission.requested")
    with trio.fail_after(10):
        while not logged(project):
            await trio.sleep(0.05)
    [note] = logged(project)
    assert note["hook_event_name"] == "Notification" and note["notification_type"] == "permission_prompt"
    assert note["message"] == "roost needs your permission to use Bash" and note["session_id"] == started["session"]
    await client.call("permission.respond", session=started["session"], call_id=(await pending(client))[0], decision="deny")
    await events_until(client, finished(started["run"]))
    assert not (project / "idle").exists()


async def pending(client: TrioClient) -> list[str]:
    return [p["call_id"] for p in (await client.call("pending"))["pending"]]


async def test_pre_compact_hooks_run_before_a_compaction(client: TrioClient, project: Path) -> None:
    hook = script(project, "log.py", LOG)
    settings(project, {"PreCompact": [group(hook, "auto"), group("touch manual", "manual")]})

    def reply(*blocks: dict[str, Any], tokens: int) -> dict[str, Any]:
        return {"content": list(blocks), "usage": {"input_tokens": tokens, "output_tokens": 5}}

    read = {"type": "tool_use", "name": "read", "input": {"path": "a.txt"}}
    path = project / "long.json"
    path.write_text(json.dumps({
        "responses": [reply(read, tokens=100), reply(read, tokens=900), reply(text("Finished."), tokens=200)],
        "summaries": [reply(text("They read a.txt twice."), tokens=50)],
    }))
    model = f"scripted/{path}"
    config = project / ".roost" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[context_windows]\n"{model}" = 1000\n[compaction]\nkeep_turns = 1\n')
    await trust(client, project)
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(started["run"]))
    assert of_type(events, "compacted") and events[-1]["reason"] == "done"
    [before] = logged(project)
    assert before["hook_event_name"] == "PreCompact" and before["trigger"] == "auto"
    assert before["custom_instructions"] == "" and not (project / "manual").exists()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)")
async def test_roost_compact_instructions_reach_the_summary_and_pre_compact(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = script(project, "log.py", LOG)
    # The project's hook runs in the compaction's sandbox, as in any run: it says where.
    settings(project, {"PreCompact": [group(f"{hook}; if {INSIDE}; then touch inside; fi", "manual")]})
    await trust(client, project)

    def reply(said: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": said}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5}}

    with serve_anthropic([reply("Noted."), reply("Still noted."), reply("The codename is HERON.")]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        model = "anthropic/claude-test"
        first = await client.call("dispatch", task="The codename is HERON.", model=model, cwd=str(project), attach=True)
        await events_until(client, finished(first["run"]))
        session = first["session"]
        second = await client.call("dispatch", task="Go on.", session=session, model=model, cwd=str(project))
        await events_until(client, finished(second["run"]))
        compact = await client.call("compact", session=session, keep_turns=1, instructions="Keep the codename.")
        events = await events_until(client, finished(compact["run"]))
        summary = server.requests[-1].body
    assert of_type(events, "compacted")[0]["summary"] == "The codename is HERON."
    assert of_type(events, "run.started")[-1]["instructions"] == "Keep the codename."
    # The model is asked for the summary with the instructions, as Claude Code's /compact TEXT.
    asked = summary["messages"][-1]["content"][-1]["text"]
    assert asked.endswith("Additional instructions for this summary:\nKeep the codename.")
    [before] = logged(project)
    assert before["hook_event_name"] == "PreCompact" and before["trigger"] == "manual"
    assert before["custom_instructions"] == "Keep the codename." and before["session_id"] == session
    assert (project / "inside").exists()


def _anthropic(*turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic replies: each turn's blocks (tool_use blocks get ids), usage made up."""
    replies = []
    for i, blocks in enumerate(turns):
        content = [{**b, "id": f"toolu_{i}"} if b["type"] == "tool_use" else b for b in blocks]
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        replies.append({"content": content, "stop_reason": stop, "usage": {"input_tokens": 10, "output_tokens": 5}})
    return replies


def _said(body: dict[str, Any]) -> list[str]:
    """The texts of the user messages of a request."""
    return [b.get("text", "") for m in body["messages"] if m["role"] == "user" for b in m["content"] if isinstance(b, dict)]


async def test_what_an_async_hook_says_reaches_the_model_on_the_next_turn(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lint = json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "lint: 2 warnings"}})
    note = json.dumps({"systemMessage": "remember to commit"})
    settings(project, {
        "PostToolUse": [group(f"grep -q first && echo '{lint}'; true", "Bash", **{"async": True})],
        "Stop": [group(f"echo '{note}'", **{"async": True})],
    })
    await trust(client, project)
    turns = _anthropic([bash("echo first")], [bash("sleep 3")], [text("Done.")], [text("Committed.")])
    with serve_anthropic(turns) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        model = "anthropic/claude-test"
        first = await client.call("dispatch", task="lint", model=model, cwd=str(project), attach=True, yes=True)
        events = await events_until(client, finished(first["run"]))
        # The Stop hook's word comes after the run: it waits for the session's next task.
        await trio.sleep(1)
        second = await client.call("dispatch", task="next", session=first["session"], model=model, cwd=str(project))
        await events_until(client, finished(second["run"]))
        bodies = [r.body for r in server.requests]
    # The lint result came while `sleep 3` ran: the next model call has it, not an earlier one.
    assert "[async PostToolUse hook] lint: 2 warnings" not in _said(bodies[1])
    assert "[async PostToolUse hook] lint: 2 warnings" in _said(bodies[2])
    assert [e["text"] for e in of_type(events, "message.user")][-1] == "[async PostToolUse hook] lint: 2 warnings"
    assert events[-1]["reason"] == "done"
    later = _said(bodies[3])
    assert later[-2:] == ["next", "[async Stop hook] remember to commit"]
