"""roost fork and the session tree, with the real command, a real daemon, and a local
OpenAI-compatible server that records what the model is sent."""

from __future__ import annotations

import json

from tests.fakes.openai_server import serve_openai

from .conftest import E2E, text


def test_fork_at_a_seq_then_dispatch_on_the_fork(e2e: E2E) -> None:
    script = [
        {"content": "Looking.", "tool_calls": [{"id": "call_1", "name": "bash", "arguments": {"command": "ls"}}]},
        {"content": "Three files."},
        {"content": "Second answer."},
        {"content": "On the fork."},
    ]
    with serve_openai(script) as server:
        config = e2e.tmp / "config" / "roost" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'[providers.local]\nkind = "openai"\nbase_url = "{server.base_url}"\napi_key_env = ""\n')
        e2e.ok("dispatch", "first", "--model", "local/m", "--yes")
        [root] = e2e.json_out("sessions", "--json")
        session = root["id"]
        e2e.ok("dispatch", "second", "--session", session, "--model", "local/m")
        log = e2e.events(session)
        ends = [e["seq"] for e in log if e["type"] == "run.finished"]
        tool = next(e["seq"] for e in log if e["type"] == "tool.started")

        # Between the tool call and its result: the fork starts at the model call before.
        mid = e2e.roost("fork", session[:6], "--at", str(tool))
        assert mid.returncode == 0, mid.stderr
        assert f"seq {tool} is between a tool call and its result" in mid.stderr
        assert "it ends aborted in the fork" in mid.stderr

        forked = json.loads(e2e.ok("fork", session, "--at", str(ends[0]), "--json").stdout)
        assert (forked["parent"], forked["forked_at"]) == (session, ends[0])
        fork = forked["session"]
        e2e.ok("dispatch", "third", "--session", fork, "--model", "local/m")
        sent = [(m["role"], m.get("content")) for m in server.requests[-1].body["messages"] if m["role"] != "system"]

    assert sent == [
        ("user", "first"), ("assistant", "Looking."), ("tool", "a.txt\nb.txt\nc.py\n"),
        ("assistant", "Three files."), ("user", "third"),
    ]  # fmt: skip
    fork_log = e2e.events(fork)
    assert [e["seq"] for e in fork_log] == list(range(1, len(fork_log) + 1))
    assert fork_log[-1]["text"] == "On the fork."

    rows = {r["id"]: r for r in e2e.json_out("sessions", "--json")}
    assert (rows[fork]["parent"], rows[fork]["forked_at"]) == (session, ends[0])
    mid_fork = next(i for i, r in rows.items() if r["parent"] == session and i != fork)
    assert rows[mid_fork]["status"] == "aborted"
    # A fork of the fork is listed under it, one level deeper.
    grandchild = e2e.ok("fork", fork).stdout.strip()
    listing = e2e.ok("sessions").stdout.splitlines()
    ids = [line.lstrip(" └").split()[0] for line in listing[1:]]
    assert ids == [session, mid_fork, fork, grandchild]
    assert listing[3].startswith(f"└ {fork} @{ends[0]} ")
    assert listing[4].startswith(f"  └ {grandchild} @{len(fork_log)} ")
    assert listing[1].startswith(f"{session} ")


def test_fork_refuses_a_seq_the_session_does_not_have(e2e: E2E) -> None:
    model = e2e.script([text("hi")])
    e2e.ok("dispatch", "hello", "--model", model)
    [row] = e2e.json_out("sessions", "--json")
    done = e2e.roost("fork", row["id"], "--at", "999")
    assert done.returncode == 10
    assert f"session {row['id']} has seqs 1 to {row['events']}: there is no seq 999 to fork at [INVALID_PARAMS]" in done.stderr
    assert len(e2e.json_out("sessions", "--json")) == 1
