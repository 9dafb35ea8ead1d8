"""Anthropic runs through the daemon, against a local server speaking the Messages SSE format."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import events_until, finished, stored


async def test_a_tool_loop_with_anthropic(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [
        {
            "content": [
                {"type": "text", "deltas": ["Listing ", "the ", "files."]},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 80},
        },
        {
            "content": [{"type": "text", "text": "There are three files."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 150, "output_tokens": 8},
        },
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-sentinel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call(
            "dispatch", yes=True, task="count", model="anthropic/claude-test", cwd=str(project), attach=True
        )
        events = await events_until(client, finished(run["run"]))
        bodies = [r.body for r in server.requests]

    deltas = [e["text"] for e in events if e["type"] == "text.delta"]
    assert deltas[:3] == ["Listing ", "the ", "files."]
    tool = next(e for e in events if e["type"] == "tool.finished")
    assert tool["call_id"] == "toolu_1" and tool["result"].split() == ["a.txt", "b.txt", "c.py"]
    last = events[-1]
    assert last["reason"] == "done" and last["text"] == "There are three files."
    assert last["usage"]["input_tokens"] == 250 and last["usage"]["cache_read_input_tokens"] == 80
    assert [e["stop_reason"] for e in stored(events) if e["type"] == "message.assistant"] == [
        "tool_use", "end_turn"
    ]
    # The second request carries the history: the tool_use and its result, paired.
    assert bodies[0]["model"] == "claude-test"
    assert {t["name"] for t in bodies[0]["tools"]} == {
        "bash", "bash_output", "kill_shell", "read", "write", "edit", "notebook_read", "notebook_edit", "glob", "grep",
        "ask_human", "skill", "remember", "recall", "todo", "web_fetch",
    }
    second = bodies[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[2]["content"][0]["type"] == "tool_result"
    assert second[2]["content"][0]["tool_use_id"] == "toolu_1"


async def test_overload_then_failure_ends_the_run_with_a_clear_error(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overloaded = {"status": 529, "headers": {"retry-after": "0.01"}}
    with serve_anthropic([overloaded] * 3) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call("dispatch", yes=True, task="t", model="anthropic/claude-test", cwd=str(project), attach=True)
        events = await events_until(client, finished(run["run"]))
        assert len(server.requests) == 3
    assert events[-1]["reason"] == "error"
    assert "529" in events[-1]["error"] and "verloaded" in events[-1]["error"]


async def test_abort_closes_the_stream_at_once(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stalling = {
        "content": [{"type": "text", "text": "a long answer that never ends"}],
        "stall_after": 4,
        "stall_seconds": 30,
    }
    with serve_anthropic([stalling]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call("dispatch", yes=True, task="t", model="anthropic/claude-test", cwd=str(project), attach=True)
        events = await events_until(client, lambda e: e["type"] == "text.delta")
        with trio.fail_after(2):
            await client.call("abort", session=run["session"])
            events += await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "aborted"
    # What had arrived is stored, marked partial, and the run's text says it.
    arrived = "".join(e["text"] for e in events if e["type"] == "text.delta")
    (partial,) = [e for e in stored(events) if e["type"] == "message.assistant"]
    assert arrived and partial["partial"] is True and partial["stop_reason"] == "aborted"
    assert partial["content"] == [{"type": "text", "text": arrived}]
    assert events[-1]["text"] == arrived


async def test_exec_mode_feeds_each_failed_check_to_the_next_request(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check fails twice (with different output), then passes.
    (project / "check.sh").write_text(
        'n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count\n'
        'if [ $n -lt 3 ]; then echo "failure number $n"; exit 1; fi; echo ok\n'
    )

    def reply(words: str) -> dict:
        return {"content": [{"type": "text", "text": words}], "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 2}}

    with serve_anthropic([reply("try 1"), reply("try 2"), reply("try 3")]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-sentinel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call(
            "dispatch", task="fix", model="anthropic/claude-test", cwd=str(project), mode="exec", attach=True
        )
        events = await events_until(client, finished(run["run"]))
        bodies = [r.body for r in server.requests]
    assert events[-1]["reason"] == "check_passed"
    checks = [e for e in events if e["type"] == "check.finished"]
    assert [(c["attempt"], c["exit_status"]) for c in checks] == [(1, 1), (2, 1), (3, 0)]
    assert len(bodies) == 3
    for n, body in ((1, bodies[1]), (2, bodies[2])):
        last = body["messages"][-1]
        said = " ".join(b.get("text", "") for b in last["content"])
        assert last["role"] == "user" and "Check failed (exit status 1)" in said and f"failure number {n}" in said
    # The whole history goes along: the third request has all three user turns.
    assert [m["role"] for m in bodies[2]["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert "Exec mode:" in bodies[0]["system"][0]["text"]


async def test_a_gateway_that_needs_no_key_is_usable_and_serves_a_run(client: TrioClient, project: Path) -> None:
    script = [{"content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 3, "output_tokens": 1}}]
    with serve_anthropic(script) as server:
        config = Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'[providers.gateway]\nkind = "anthropic"\nbase_url = "{server.base_url}"\napi_key_env = ""\n')
        listed = {p["name"]: p for p in (await client.call("providers.list", cwd=str(project)))["providers"]}
        assert listed["gateway"]["usable"] is True
        run = await client.call("dispatch", task="hi", model="gateway/claude-test", cwd=str(project), attach=True)
        events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "hello"
