"""``roost dispatch`` as ``claude -p``: Claude Code's output formats (the exact message
shapes, line by line), its flags mapped onto roost's rules and modes, and a dispatch with
no terminal that says at once how a waiting call is answered, and fails when nobody did."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.fakes.anthropic_server import serve_anthropic

from .conftest import ROOST, E2E, LineReader, bash, text, wait_until

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
TOOLS = [
    "bash", "bash_output", "kill_shell", "read", "write", "edit", "notebook_read", "notebook_edit", "glob", "grep",
    "ask_human", "skill", "remember", "recall", "todo", "web_fetch",
]


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def shaped(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with what differs from run to run checked and set aside: its uuid, and
    the durations of a result."""
    assert UUID.match(message.pop("uuid")), message
    if message["type"] == "result":
        for key in ("duration_ms", "duration_api_ms"):
            assert isinstance(message.pop(key), int)
    return message


def test_stream_json_is_claude_codes_messages_line_by_line(e2e: E2E) -> None:
    model = e2e.script([text("Looking."), bash("echo hi")], [text("Done: hi.")])
    done = e2e.roost(
        "dispatch", "-p", "say hi", "--model", model, "--output-format", "stream-json", "--verbose",
        "--allowedTools", "Bash(echo:*)",
    )
    assert done.returncode == 0, done.stderr
    init, first, result_of_call, last, result = [shaped(m) for m in lines(done.stdout)]
    session = init["session_id"]
    assert init == {
        "type": "system", "subtype": "init", "cwd": str(e2e.project), "session_id": session,
        "tools": TOOLS, "mcp_servers": [], "model": model, "permissionMode": "default",
    }
    assert first == {
        "type": "assistant",
        "message": {
            "id": first["message"]["id"], "type": "message", "role": "assistant", "model": model,
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "name": "bash", "input": {"command": "echo hi"}, "id": "toolu_s1_1"},
            ],
            "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 7},
        },
        "parent_tool_use_id": None, "session_id": session,
    }
    assert first["message"]["id"].startswith("msg_")
    assert result_of_call == {
        "type": "user",
        "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_s1_1", "content": "hi\n", "is_error": False},
        ]},
        "parent_tool_use_id": None, "session_id": session,
    }
    assert last["type"] == "assistant" and last["message"]["content"] == [{"type": "text", "text": "Done: hi."}]
    assert last["message"]["stop_reason"] == "end_turn" and last["message"]["id"] != first["message"]["id"]
    assert result == {
        "type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "session_id": session,
        "result": "Done: hi.", "total_cost_usd": 0.0,
        "usage": {"input_tokens": 10, "output_tokens": 9, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        "permission_denials": [],
    }
    assert done.stderr == ""


def test_json_prints_the_result_alone_and_text_the_final_text_alone(e2e: E2E) -> None:
    model = e2e.script([text("Checked.")])
    out = e2e.ok("dispatch", "check", "--model", model, "--output-format", "json").stdout
    [result] = lines(out)
    assert shaped(result)["subtype"] == "success" and result["result"] == "Checked." and result["num_turns"] == 1
    assert e2e.ok("dispatch", "check", "--model", model, "--output-format", "text").stdout == "Checked.\n"


def test_a_run_that_fails_is_an_error_result(e2e: E2E) -> None:
    model = e2e.script([bash("echo 1")], [bash("echo 2")])
    done = e2e.roost("dispatch", "loop", "--model", model, "--yes", "--max-turns", "1", "--output-format", "json")
    assert done.returncode == 3
    [result] = lines(done.stdout)
    assert (result["type"], result["subtype"], result["is_error"]) == ("result", "error_max_turns", True)
    assert result["errors"][0].startswith("max_turns") and "result" not in result
    text_done = e2e.roost("dispatch", "loop", "--model", model, "--yes", "--max-turns", "1", "--output-format", "text")
    assert text_done.returncode == 3 and text_done.stdout == "" and "roost: max_turns" in text_done.stderr


def test_disallowed_tools_deny_and_the_result_lists_the_denials(e2e: E2E) -> None:
    model = e2e.script([bash("git push --force")], [text("Not pushed.")])
    done = e2e.roost(
        "dispatch", "push", "--model", model, "--output-format", "stream-json",
        "--disallowed-tools", "Bash(git push:*), WebFetch",
    )
    assert done.returncode == 0, done.stderr
    messages = lines(done.stdout)
    [tool_result] = [m["message"]["content"][0] for m in messages if m["type"] == "user"]
    assert tool_result["is_error"] and "rule deny bash(git push:*) (from dispatch)" in tool_result["content"]
    assert messages[-1]["permission_denials"] == [
        {"tool_name": "bash", "tool_use_id": tool_result["tool_use_id"], "tool_input": {"command": "git push --force"}}
    ]
    session = messages[0]["session_id"]
    started = next(e for e in e2e.events(session) if e["type"] == "run.started")
    assert [r["rule"] for r in started["permissions"]["rules"]] == ["bash(git push:*)", "web_fetch"]


def test_accept_edits_lets_edits_in_the_folder_run_and_commands_ask(e2e: E2E) -> None:
    outside = e2e.tmp / "outside.txt"
    model = e2e.script(
        [{"type": "tool_use", "name": "write", "input": {"path": "notes.md", "content": "kept\n"}}],
        [{"type": "tool_use", "name": "write", "input": {"path": str(outside), "content": "no\n"}}],
        [bash("echo ran > ran.txt")],
        [text("Tried.")],
    )
    done = e2e.roost(
        "dispatch", "edit", "--model", model, "--permission-mode", "acceptEdits", "--output-format", "json",
        "--approval-timeout", "0.5",
    )
    # Two calls asked and nobody answered: the run ended done, but not all was done.
    assert done.returncode == 11, done.stdout + done.stderr
    assert (e2e.project / "notes.md").read_text() == "kept\n"
    assert not outside.exists() and not (e2e.project / "ran.txt").exists()
    [result] = lines(done.stdout)
    assert result["subtype"] == "success" and result["result"] == "Tried."
    assert [d["tool_name"] for d in result["permission_denials"]] == ["write", "bash"]
    assert done.stderr.count("roost approve ") == 2 and "--approval-timeout" in done.stderr


def test_plan_and_bypass_permissions_are_roosts_plan_and_full(e2e: E2E) -> None:
    planned = e2e.ok("dispatch", "plan it", "--model", e2e.script([text("1. Do it.")]), "--permission-mode", "plan",
                     "--output-format", "stream-json").stdout
    init = lines(planned)[0]
    assert (init["permissionMode"], init["tools"]) == ("plan", [])
    assert next(e for e in e2e.events(init["session_id"]) if e["type"] == "run.started")["mode"] == "plan"

    model = e2e.script([bash("echo free > free.txt")], [text("ok")])
    done = e2e.ok("dispatch", "go", "--model", model, "--permission-mode", "bypassPermissions", "--output-format", "stream-json")
    assert lines(done.stdout)[0]["permissionMode"] == "bypassPermissions"
    assert (e2e.project / "free.txt").read_text() == "free\n"

    clash = e2e.roost("dispatch", "go", "--mode", "full", "--permission-mode", "plan")
    assert clash.returncode == 2 and "--permission-mode" in clash.stderr
    for other in ("--json", "--detach"):
        both = e2e.roost("dispatch", "go", other, "--output-format", "json")
        assert both.returncode == 2 and "not with --json or --detach" in both.stderr


def test_resume_runs_in_an_existing_session(e2e: E2E) -> None:
    # The scripted model answers a session's model calls in order, across its runs.
    model = e2e.script([text("first")], [text("second")], [text("third")])
    first = json.loads(e2e.ok("dispatch", "one", "--model", model, "--output-format", "json").stdout)
    session = first["session_id"]
    elsewhere = e2e.tmp / "elsewhere"
    elsewhere.mkdir()
    out = e2e.ok("dispatch", "two", "-r", session[:6], "--model", model,
                 "--output-format", "stream-json", cwd=elsewhere).stdout
    init, *_, result = lines(out)
    # The session's folder, wherever the command runs.
    assert (init["session_id"], init["cwd"], result["session_id"]) == (session, str(e2e.project), session)
    assert result["result"] == "second"
    again = e2e.ok("dispatch", "three", "--resume", session, "--model", model, "--output-format", "text")
    assert again.stdout == "third\n"
    assert [e["text"] for e in e2e.events(session) if e["type"] == "run.finished"] == ["first", "second", "third"]


def test_append_system_prompt_reaches_the_model_and_cost_is_reported(e2e: E2E) -> None:
    config = Path(e2e.env["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[prices."anthropic/claude-test"]\ninput = 3.0\noutput = 15.0\n')
    reply = {"content": [{"type": "text", "text": "Terse."}], "usage": {"input_tokens": 1000, "output_tokens": 100}}
    with serve_anthropic([reply]) as server:
        env = dict(e2e.env, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.base_url)
        done = e2e.roost("dispatch", "hello", "--model", "anthropic/claude-test", "--output-format", "json",
                         "--append-system-prompt", "Answer in one word.", env=env)
        assert done.returncode == 0, done.stderr
        [request] = server.requests
    system = "".join(block["text"] for block in request.body["system"])
    assert system.rstrip().endswith("Answer in one word.")
    [result] = lines(done.stdout)
    assert result["total_cost_usd"] == (1000 * 3.0 + 100 * 15.0) / 1e6
    assert result["usage"]["input_tokens"] == 1000 and result["usage"]["output_tokens"] == 100


def test_a_sub_agents_messages_name_the_call_that_runs_it(e2e: E2E) -> None:
    helper = e2e.script([bash("echo from-helper")], [text("helper says 42")])
    lead = e2e.script([{"type": "tool_use", "name": "helper", "input": {"message": "find it"}}], [text("It is 42.")])
    agents = Path(e2e.env["XDG_CONFIG_HOME"]) / "roost" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text(f"---\nname: helper\ndescription: Finds.\nmodel: {helper}\ntools: [bash]\nmode: full\n---\nFind.\n")
    (agents / "lead.md").write_text(f"---\nname: lead\nmodel: {lead}\ntools: [read, helper]\n---\nLead.\n")
    done = e2e.ok("dispatch", "go", "--agent", "lead", "--output-format", "stream-json")
    messages = lines(done.stdout)
    call = messages[1]["message"]["content"][0]["id"]
    nested = [m for m in messages if m.get("parent_tool_use_id") == call]
    assert [m["type"] for m in nested] == ["assistant", "user", "assistant"]
    assert nested[1]["message"]["content"][0]["content"] == "from-helper\n"
    # The call's own result comes after its sub-agent's messages, at the top level.
    top = [m for m in messages if m.get("parent_tool_use_id") is None and m["type"] in ("assistant", "user")]
    assert top[1]["message"]["content"][0] == {"type": "tool_result", "tool_use_id": call, "content": "helper says 42", "is_error": False}
    assert messages[-1]["result"] == "It is 42." and messages[-1]["usage"]["output_tokens"] > 0


def test_with_no_terminal_a_waiting_call_says_at_once_how_to_answer(e2e: E2E) -> None:
    model = e2e.script([bash("echo hi > made.txt")], [text("Made.")])
    watcher = e2e.popen([ROOST, "dispatch", "make", "--model", model, "--json"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = LineReader(watcher.stderr)
    err.until(lambda line: "no terminal here to ask at" in line)
    [row] = wait_until(lambda: e2e.json_out("pending", "--json"), what="the open request")
    session, call = row["session"], row["call_id"]
    assert err.until(lambda line: "roost approve" in line).strip() == (
        f"roost approve {session} {call} [--session-scope [--any-arguments]] · roost deny {session} {call} [--reason ...]"
    )
    assert "--yes approves such calls in advance" in err.until(lambda line: "--approval-timeout" in line)
    e2e.ok("approve", session, call)
    assert watcher.wait(timeout=10) == 0
    assert (e2e.project / "made.txt").read_text() == "hi\n"


def test_a_call_denied_by_the_approval_timeout_fails_the_dispatch(e2e: E2E) -> None:
    model = e2e.script([bash("echo hi > made.txt")], [text("Could not.")])
    done = e2e.roost("dispatch", "make", "--model", model, "--approval-timeout", "0.3")
    assert done.returncode == 11, done.stdout + done.stderr
    assert "denied by timeout" in done.stdout and "roost approve" in done.stderr
    assert not (e2e.project / "made.txt").exists()
    # Answered in time, it exits as the run ended.
    assert e2e.roost("dispatch", "make", "--model", model, "--approval-timeout", "30", "--yes").returncode == 0
    assert os.path.exists(e2e.project / "made.txt")
