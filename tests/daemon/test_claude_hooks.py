"""Claude Code hooks from settings.json through a real daemon: scripts written for Claude Code
(its payload, matchers, exit code 2 and JSON decisions) work unchanged, under the trust rules."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient, open_client

from roost.daemon._paths import state_dir

from .conftest import bash, events_until, finished, serving, text, trust, write_script

#: A hook as Claude Code's docs write them: it reads the call from stdin, logs what it got,
#: and refuses `rm` with exit code 2 and the reason on stderr.
GUARD = """\
import json, os, sys
payload = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "seen.jsonl"), "a") as log:
    log.write(json.dumps({**payload, "env_project": os.environ["CLAUDE_PROJECT_DIR"]}) + "\\n")
if payload.get("tool_name") == "Bash" and payload["tool_input"]["command"].startswith("rm "):
    print("rm is not allowed here; move files to trash/ instead", file=sys.stderr)
    sys.exit(2)
"""


def of_type(events: list[dict[str, Any]], type: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == type]


def settings(folder: Path, hooks: dict[str, Any], name: str = "settings.json") -> Path:
    """A Claude Code settings file with these hooks (events -> matcher groups)."""
    path = folder / ".claude" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"permissions": {"allow": ["Bash(ls:*)"]}, "hooks": hooks}, indent=2))
    return path


def script(project: Path, name: str, body: str) -> str:
    """A hook script in the project's .claude/hooks, as a command that finds it."""
    path = project / ".claude" / "hooks" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return f'python3 "$CLAUDE_PROJECT_DIR/.claude/hooks/{name}"'


def group(command: str, matcher: str | None = None, **extra: Any) -> dict[str, Any]:
    entry = {"type": "command", "command": command, **extra}
    return {**({"matcher": matcher} if matcher is not None else {}), "hooks": [entry]}


def seen(project: Path) -> list[dict[str, Any]]:
    path = project / "seen.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def run(client: TrioClient, project: Path, *responses: list[dict[str, Any]], **params: Any) -> list[dict[str, Any]]:
    model = write_script(project, *responses, name=f"s{len(list(project.glob('s*.json')))}.json")
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, **params)
    return await events_until(client, finished(started["run"]), timeout=30)


async def test_a_claude_code_hook_script_blocks_rm_and_the_model_sees_why(client: TrioClient, project: Path) -> None:
    settings(project, {"PreToolUse": [group(script(project, "guard.py", GUARD), "Bash")]})
    await trust(client, project)
    events = await run(client, project, [bash("rm a.txt")], [bash("echo kept")], [text("done")], yes=True)
    refused, ran = of_type(events, "tool.finished")
    assert refused["is_error"] and (project / "a.txt").exists()
    assert refused["result"] == "blocked by a hook: rm is not allowed here; move files to trash/ instead"
    assert ran["result"] == "kept\n" and not ran["is_error"]
    first, second = seen(project)
    session = events[0]["session"]
    assert first == {
        "session_id": session,
        "transcript_path": str(state_dir() / "transcripts" / f"{session}.jsonl"),
        "cwd": str(project),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm a.txt"},
        "tool_use_id": refused["call_id"],
        "env_project": str(project),
    }
    assert second["tool_input"] == {"command": "echo kept"}


async def test_post_tool_use_runs_only_for_calls_that_ran(client: TrioClient, project: Path) -> None:
    settings(project, {
        "PreToolUse": [group(script(project, "guard.py", GUARD), "Bash")],
        "PostToolUse": [group(script(project, "post.py", GUARD), "Bash")],
    })
    await trust(client, project)
    await run(client, project, [bash("rm a.txt")], [bash("echo kept")], [text("done")], yes=True)
    calls = [(p["hook_event_name"], p["tool_input"]["command"]) for p in seen(project)]
    assert calls == [("PreToolUse", "rm a.txt"), ("PreToolUse", "echo kept"), ("PostToolUse", "echo kept")]


async def test_json_decisions_deny_ask_and_allow(client: TrioClient, project: Path) -> None:
    decide = """\
import json, sys
call = json.load(sys.stdin)
path = call["tool_input"].get("file_path", "")
if path.endswith(".env"):
    decision, reason = "deny", "never touch .env"
elif path.endswith("b.txt"):
    decision, reason = "ask", "b.txt is shared"
else:
    decision, reason = "allow", "fine"
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                  "permissionDecision": decision, "permissionDecisionReason": reason}}))
"""
    old = "import json, sys\nprint(json.dumps({'decision': 'block', 'reason': 'no edits of c.py'}))\n"
    settings(project, {"PreToolUse": [
        group(script(project, "decide.py", decide), "Write|Edit"),
        group(script(project, "old.py", old), "MultiEdit"),
    ]})
    await trust(client, project)
    model = write_script(
        project,
        [{"type": "tool_use", "name": "write", "input": {"path": ".env", "content": "X=1"}}],
        [{"type": "tool_use", "name": "write", "input": {"path": "b.txt", "content": "b"}}],
        [{"type": "tool_use", "name": "write", "input": {"path": "new.txt", "content": "n"}}],
        [{"type": "tool_use", "name": "edit", "input": {"path": "c.py", "old": "c.py", "new": "d"}}],
        [text("done")],
    )
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, lambda e: e.get("type") == "permission.requested")
    # The hook's "ask": a person approves the write, which no rule asked about.
    asked = events[-1]
    assert asked["input"] == {"path": "b.txt", "content": "b"} and asked["reason"] == "a hook asks: b.txt is shared"
    await client.call("permission.respond", session=started["session"], call_id=asked["call_id"], decision="approve")
    events += await events_until(client, finished(started["run"]))
    env, shared, new, edit = of_type(events, "tool.finished")
    assert env["is_error"] and env["result"] == "blocked by a hook: never touch .env"
    assert not (project / ".env").exists()
    assert not shared["is_error"] and (project / "b.txt").read_text() == "b"
    # The hook's "allow" approved a write that would have asked in agent mode.
    assert len(of_type(events, "permission.requested")) == 1
    assert not new["is_error"] and (project / "new.txt").read_text() == "n"
    assert edit["result"] == "blocked by a hook: no edits of c.py"


async def test_post_tool_use_sees_the_response_and_feeds_the_model(client: TrioClient, project: Path) -> None:
    post = """\
import json, sys
call = json.load(sys.stdin)
response = call["tool_response"]
with open("post.json", "w") as out:
    json.dump(call, out)
if "TODO" in response["stdout"]:
    print(json.dumps({"decision": "block", "reason": "a TODO is left in the output"}))
"""
    settings(project, {"PostToolUse": [group(script(project, "post.py", post), "Bash")]})
    await trust(client, project)
    events = await run(client, project, [bash("echo TODO: fix")], [text("done")], yes=True)
    [result] = of_type(events, "tool.finished")
    assert result["result"] == "TODO: fix\n\n[PostToolUse hook] a TODO is left in the output"
    call = json.loads((project / "post.json").read_text())
    assert call["hook_event_name"] == "PostToolUse" and call["tool_name"] == "Bash"
    assert call["tool_response"]["stdout"] == "TODO: fix\n" and call["tool_response"]["success"] is True
    # The model saw the hook's words with the result.
    sent = of_type(events, "message.assistant")
    assert len(sent) == 2


async def test_a_hook_that_says_continue_false_stops_the_run(client: TrioClient, project: Path) -> None:
    stop = "echo '{\"continue\": false, \"stopReason\": \"the build is broken\"}'"
    settings(project, {"PostToolUse": [group(stop)]})
    await trust(client, project)
    events = await run(client, project, [bash("echo hi")], [text("never")], yes=True)
    assert events[-1]["reason"] == "aborted" and "the build is broken" in events[-1]["error"]
    assert len(of_type(events, "message.assistant")) == 1


async def test_user_prompt_submit_adds_context_and_refuses_prompts(client: TrioClient, project: Path) -> None:
    prompt = """\
import json, sys
prompt = json.load(sys.stdin)["prompt"]
if "password" in prompt:
    print("prompts with passwords are refused", file=sys.stderr)
    sys.exit(2)
print("The current branch is main.")
"""
    settings(project, {"UserPromptSubmit": [group(script(project, "prompt.py", prompt))]})
    await trust(client, project)
    model = write_script(project, [text("ok")])
    started = await client.call("dispatch", task="fix the bug", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(started["run"]))
    messages = [(e["origin"], e["text"]) for e in of_type(events, "message.user")]
    assert messages == [("task", "fix the bug"), ("hook", "The current branch is main.")]
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="my password is hunter2", model=model, session=started["session"])
    assert info.value.code == ErrorCode.PROMPT_BLOCKED
    assert "prompts with passwords are refused" in info.value.message
    stored = (await client.call("events", session=started["session"]))["events"]
    assert "hunter2" not in json.dumps(stored)


async def test_user_prompt_submit_judges_steering_too(client: TrioClient, project: Path) -> None:
    refuse = 'python3 -c "import json,sys; p=json.load(sys.stdin)[\'prompt\']; sys.exit(2 if \'push\' in p else 0)"'
    settings(project, {"UserPromptSubmit": [group(refuse)]})
    await trust(client, project)
    model = write_script(project, [bash("sleep 0.5")], [text("done")])
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    await events_until(client, lambda e: e.get("type") == "permission.requested")
    with pytest.raises(RpcError) as info:
        await client.call("steer", session=started["session"], text="and push it")
    assert info.value.code == ErrorCode.PROMPT_BLOCKED
    await client.call("steer", session=started["session"], text="and test it")
    await client.call("abort", session=started["session"])
    events = await events_until(client, finished(started["run"]))
    assert [e["text"] for e in of_type(events, "steer.queued")] == ["and test it"]


async def test_a_stop_hook_makes_the_run_go_on_once(client: TrioClient, project: Path) -> None:
    stop = """\
import json, sys
payload = json.load(sys.stdin)
with open("stops.jsonl", "a") as log:
    log.write(json.dumps(payload) + "\\n")
if not payload["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "run the tests before you stop"}))
"""
    settings(project, {"Stop": [group(script(project, "stop.py", stop))]})
    await trust(client, project)
    events = await run(client, project, [text("done")], [text("tests pass; done")])
    assert of_type(events, "run.started")[0]["stop_hooks"] is True
    blocked, ended = of_type(events, "stop_hooks.finished")
    assert blocked["reason"] == "run the tests before you stop" and "reason" not in ended
    [hook] = [e for e in of_type(events, "message.user") if e["origin"] == "hook"]
    assert hook["text"] == "run the tests before you stop"
    assert events[-1]["reason"] == "done" and events[-1]["turns"] == 2
    assert events[-1]["text"] == "tests pass; done"
    payloads = [json.loads(line) for line in (project / "stops.jsonl").read_text().splitlines()]
    assert [(p["hook_event_name"], p["stop_hook_active"]) for p in payloads] == [("Stop", False), ("Stop", True)]
    assert payloads[0]["last_assistant_message"] == "done"


async def test_untrusted_project_hooks_do_not_run_until_trusted(client: TrioClient, project: Path) -> None:
    local = settings(project, {"PreToolUse": [group("touch local-hook-ran", "Bash")]}, name="settings.local.json")
    shared = settings(project, {"Stop": [group("touch stop-hook-ran")],
                                "Notification": [group("touch never")]})
    events = await run(client, project, [bash("echo hi")], [text("done")], yes=True)
    [notice] = of_type(events, "project.untrusted")
    ignored = {(i["kind"], i["name"], i["detail"], i["source"]) for i in notice["ignored"]}
    assert ignored == {
        ("hook", "PreToolUse Bash", "touch local-hook-ran", str(local)),
        ("hook", "Stop *", "touch stop-hook-ran", str(shared)),
        ("hook", "Notification *", "touch never", str(shared)),
        # Each file's permissions.allow widens too, and waits for trust with its hooks.
        ("allow rule", "bash(ls:*)", "", str(local)),
        ("allow rule", "bash(ls:*)", "", str(shared)),
    }
    assert not (project / "local-hook-ran").exists() and not (project / "stop-hook-ran").exists()
    assert "stop_hooks" not in of_type(events, "run.started")[0]
    shown = await client.call("trust.show", cwd=str(project))
    assert set(shown["files"]) == {str(local), str(shared)}
    await trust(client, project)
    events = await run(client, project, [bash("echo hi")], [text("done")], yes=True)
    assert not of_type(events, "project.untrusted")
    assert (project / "local-hook-ran").exists() and (project / "stop-hook-ran").exists()
    assert not (project / "never").exists()
    # A pull that changes a file makes its hooks wait for the user again.
    local.write_text(local.read_text().replace("local-hook-ran", "pulled"))
    events = await run(client, project, [bash("echo hi")], [text("done")], yes=True)
    assert of_type(events, "project.untrusted") and not (project / "pulled").exists()


async def test_the_users_own_claude_settings_need_no_trust(client: TrioClient, project: Path) -> None:
    home = Path.home()
    settings(home, {"PreToolUse": [group("touch \"$CLAUDE_PROJECT_DIR/user-hook-ran\"", "Bash")]})
    events = await run(client, project, [bash("echo hi")], [text("done")], yes=True)
    assert not of_type(events, "project.untrusted")
    assert (project / "user-hook-ran").exists()


async def test_a_broken_settings_file_is_refused_with_its_name(client: TrioClient, project: Path) -> None:
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}')
    model = write_script(project, [text("done")])
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", model=model, cwd=str(project))
    assert info.value.code == ErrorCode.CONFIG_INVALID
    assert "settings.json: hooks.PreToolUse[0]" in info.value.message and "cannot be used: missing )" in info.value.message


#: A Stop hook as Anthropic's ralph-wiggum loop reads the transcript: the last line with
#: "role":"assistant", its text blocks; it notes what it saw (and every line's shape).
RALPH = """\
import json, sys
payload = json.load(sys.stdin)
lines = open(payload["transcript_path"]).read().splitlines()
last = [line for line in lines if '"role":"assistant"' in line][-1]
said = "\\n".join(b["text"] for b in json.loads(last)["message"]["content"] if b["type"] == "text")
with open("ralph.jsonl", "a") as out:
    out.write(json.dumps({"said": said, "lines": [json.loads(line) for line in lines]}) + "\\n")
if "<promise>DONE</promise>" not in said:
    print(json.dumps({"decision": "block", "reason": "keep going"}))
"""


async def test_transcript_path_names_the_conversation_so_far_as_claude_code_writes_it(
    client: TrioClient, project: Path
) -> None:
    settings(project, {"Stop": [group(script(project, "ralph.py", RALPH))]})
    await trust(client, project)
    events = await run(
        client, project, [bash("echo hi")], [text("not yet")], [text("all done <promise>DONE</promise>")], yes=True
    )
    assert events[-1]["reason"] == "done" and events[-1]["turns"] == 3
    first, second = [json.loads(line) for line in (project / "ralph.jsonl").read_text().splitlines()]
    # The hook (in the run's sandbox) read the conversation up to the reply it judges.
    assert first["said"] == "not yet" and second["said"] == "all done <promise>DONE</promise>"
    lines = second["lines"]
    session = events[0]["session"]
    assert [(line["type"], line["message"]["role"]) for line in lines] == [
        ("user", "user"), ("assistant", "assistant"), ("user", "user"),
        ("assistant", "assistant"), ("user", "user"), ("assistant", "assistant"),
    ]
    task, call, result, reply, hook, done = lines
    assert task["message"]["content"] == "t"
    [use] = call["message"]["content"]
    assert use["type"] == "tool_use" and use["name"] == "Bash" and use["input"] == {"command": "echo hi"}
    [block] = result["message"]["content"]
    assert block == {"tool_use_id": use["id"], "type": "tool_result", "content": "hi\n", "is_error": False}
    assert hook["message"]["content"] == "keep going"
    assert all(line["sessionId"] == session and line["cwd"] == str(project) for line in lines)
    assert not any(line["isSidechain"] for line in lines) and all(line["timestamp"].endswith("Z") for line in lines)
    # One chain: each line's parent is the line before it.
    assert [line["parentUuid"] for line in lines] == [None] + [line["uuid"] for line in lines[:-1]]
    # The file is the user's alone; it holds the whole run, the last reply too.
    path = Path(state_dir() / "transcripts" / f"{session}.jsonl")
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    kept = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["uuid"] for line in kept] == [line["uuid"] for line in lines]


async def written(path: Path, count: int) -> list[dict[str, Any]]:
    """The transcript's lines once it has ``count`` of them (the writer keeps up soon after)."""
    with trio.fail_after(10):
        while len(lines := path.read_text().splitlines() if path.exists() else []) < count:
            await trio.sleep(0.02)
    return [json.loads(line) for line in lines]


def said(lines: list[dict[str, Any]]) -> list[str]:
    return [line["message"]["content"] if line["type"] == "user" else line["message"]["content"][0]["text"] for line in lines]


async def test_the_transcript_goes_on_across_runs_and_daemons(tmp_path: Path, project: Path) -> None:
    db = tmp_path / "again.db"
    async with serving(db) as daemon, open_client(daemon.socket_path) as client:
        events = await run(client, project, [text("one")])
        session = events[0]["session"]
        path = state_dir() / "transcripts" / f"{session}.jsonl"
        # (the scripted model counts a session's calls: its script holds them all)
        await run(client, project, [text("one")], [text("two")], session=session)
        lines = await written(path, 4)
    assert said(lines) == ["t", "one", "t", "two"]
    # A file that lost its end (or never was: a session older than transcripts) is
    # caught up from the stored events by the next daemon, the chain unbroken.
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines[:2]))
    async with serving(db) as daemon, open_client(daemon.socket_path) as client:
        await run(client, project, [text("one")], [text("two")], [text("three")], session=session)
        lines = await written(path, 6)
    assert said(lines) == ["t", "one", "t", "two", "t", "three"]
    assert [line["parentUuid"] for line in lines] == [None] + [line["uuid"] for line in lines[:-1]]


async def test_session_start_sees_how_the_session_started_and_adds_context(client: TrioClient, project: Path) -> None:
    start = """\
import json, sys
payload = json.load(sys.stdin)
with open("starts.jsonl", "a") as log:
    log.write(json.dumps(payload) + "\\n")
print(f"Started by {payload['source']}.")
"""
    settings(project, {"SessionStart": [
        group(script(project, "start.py", start), "startup|resume"),
        group("touch compact-only", "compact"),
    ]})
    await trust(client, project)
    events = await run(client, project, [text("ok")])
    session = events[0]["session"]
    assert [(e["origin"], e["text"]) for e in of_type(events, "message.user")] == [("task", "t"), ("hook", "Started by startup.")]
    events = await run(client, project, [text("ok")], [text("again")], session=session)
    assert [(e["origin"], e["text"]) for e in of_type(events, "message.user")] == [("task", "t"), ("hook", "Started by resume.")]
    payloads = [json.loads(line) for line in (project / "starts.jsonl").read_text().splitlines()]
    assert [(p["hook_event_name"], p["source"], p["session_id"]) for p in payloads] == [
        ("SessionStart", "startup", session), ("SessionStart", "resume", session)
    ]
    assert payloads[0]["model"].endswith("s0.json") and not (project / "compact-only").exists()


async def test_subagent_stop_runs_for_the_matching_agent_like_stop(client: TrioClient, project: Path) -> None:
    check = """\
import json, sys
payload = json.load(sys.stdin)
payload["agent_lines"] = [json.loads(line) for line in open(payload["agent_transcript_path"])]
with open("subagent-stops.jsonl", "a") as log:
    log.write(json.dumps(payload) + "\\n")
if not payload["stop_hook_active"]:
    print(json.dumps({"decision": "block", "reason": "check it once more"}))
"""
    helper = write_script(project, [text("first")], [text("second")], name="helper.json")
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "helper.md").write_text(f"---\nname: helper\ndescription: Helps.\nmodel: {helper}\ntools: [read]\n---\nHelp.\n")
    settings(project, {"SubagentStop": [
        group(script(project, "check.py", check), "helper"),
        group("touch other-agent", "reviewer"),
    ], "Stop": [group("touch lead-stop")]})
    await trust(client, project)
    task = {"type": "tool_use", "name": "task", "input": {"subagent_type": "helper", "prompt": "go"}}
    events = await run(client, project, [task], [text("done")])
    top = [e for e in events if e.get("seq") and not e.get("path")]
    [result] = of_type(top, "tool.finished")
    assert result["result"] == "second" and events[-1]["reason"] == "done"
    first, second = [json.loads(line) for line in (project / "subagent-stops.jsonl").read_text().splitlines()]
    assert [(p["hook_event_name"], p["agent_type"], p["stop_hook_active"], p["last_assistant_message"])
            for p in (first, second)] == [("SubagentStop", "helper", False, "first"), ("SubagentStop", "helper", True, "second")]
    assert first["agent_id"] == result["call_id"]
    # The sub-agent's own transcript, beside the session's: its prompt and its replies so far.
    assert first["agent_transcript_path"].endswith(f"/subagents/agent-{result['call_id']}.jsonl")
    assert [line["type"] for line in first["agent_lines"]] == ["user", "assistant"]
    assert all(line["isSidechain"] and line["agentId"] == result["call_id"] for line in first["agent_lines"])
    assert not (project / "other-agent").exists() and (project / "lead-stop").exists()
