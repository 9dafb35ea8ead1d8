"""Forks through a real daemon: what the model is sent on a fork, forks of a run in flight,
forks of forks, attach, and a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roost.daemon.folder._project import user_config_file
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient, open_client
from tests.fakes.openai_server import serve_openai

from .conftest import bash, events_until, finished, serving, stored, text, write_script


def _local_provider(base_url: str) -> None:
    config = user_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[providers.local]\nkind = "openai"\nbase_url = "{base_url}"\napi_key_env = ""\n')


def _said(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of each message an OpenAI-compatible server was sent, system left out."""
    return [(m["role"], m.get("content") or "") for m in messages if m["role"] != "system"]


async def test_a_run_on_a_fork_sends_the_model_only_the_history_up_to_the_fork(
    client: TrioClient, project: Path
) -> None:
    script = [
        {"content": "Looking.", "tool_calls": [{"id": "call_1", "name": "bash", "arguments": {"command": "ls"}}]},
        {"content": "Three files."},
        {"content": "Second answer."},
        {"content": "Third answer, on the fork."},
    ]
    with serve_openai(script) as server:
        _local_provider(server.base_url)
        first = await client.call("dispatch", yes=True, task="first", model="local/m", cwd=str(project), attach=True)
        session = first["session"]
        one = stored(await events_until(client, finished(first["run"])))
        second = await client.call("dispatch", yes=True, task="second", model="local/m", session=session, attach=True)
        await events_until(client, finished(second["run"]))
        end_of_first = one[-1]["seq"]

        fork = await client.call("sessions.fork", session=session, at=end_of_first)
        assert (fork["parent"], fork["forked_at"], fork["at"], fork["last_seq"]) == (
            session, end_of_first, end_of_first, end_of_first,
        )  # fmt: skip
        assert fork["ended_run"] is None and fork["session"] != session
        third = await client.call(
            "dispatch", yes=True, task="third", model="local/m", session=fork["session"], attach=True
        )
        events = await events_until(client, finished(third["run"]))
        bodies = [r.body for r in server.requests]

    assert _said(bodies[3]["messages"]) == [
        ("user", "first"), ("assistant", "Looking."), ("tool", "a.txt\nb.txt\nc.py\n"),
        ("assistant", "Three files."), ("user", "third"),
    ]  # fmt: skip
    assert events[-1]["text"] == "Third answer, on the fork."
    # The fork's numbering goes on after the fork point, with no gap.
    assert [e["seq"] for e in stored(events)][0] == end_of_first + 1
    fork_log = (await client.call("events", session=fork["session"]))["events"]
    parent_log = (await client.call("events", session=session))["events"]
    assert [e["seq"] for e in fork_log] == list(range(1, len(fork_log) + 1))
    assert {e["session"] for e in fork_log} == {fork["session"]}
    shared = [{k: v for k, v in e.items() if k != "session"} for e in fork_log[:end_of_first]]
    assert shared == [{k: v for k, v in e.items() if k != "session"} for e in parent_log[:end_of_first]]
    # The parent is as it was: its second run is the last thing in it.
    assert parent_log[-1]["run"] == second["run"]
    rows = {r["id"]: r for r in (await client.call("sessions.list"))["sessions"]}
    assert (rows[fork["session"]]["parent"], rows[fork["session"]]["forked_at"]) == (session, end_of_first)
    assert rows[fork["session"]]["events"] == len(fork_log)
    assert (rows[session]["parent"], rows[session]["forked_at"]) == (None, None)
    # Titles: each session's own first task.
    assert (rows[session]["title"], rows[fork["session"]]["title"]) == ("first", "third")


async def test_a_seq_between_a_call_and_its_result_forks_at_the_model_call_before(
    client: TrioClient, project: Path
) -> None:
    model = write_script(project, [text("listing"), bash("ls")], [text("done")])
    run = await client.call("dispatch", yes=True, task="go", model=model, cwd=str(project), attach=True)
    log = stored(await events_until(client, finished(run["run"])))
    kinds = [e["type"] for e in log]
    started = log[kinds.index("tool.started")]["seq"]

    fork = await client.call("sessions.fork", session=run["session"], at=started)
    reply = log[kinds.index("message.assistant")]["seq"]
    assert fork["forked_at"] == reply - 1 and fork["at"] == started
    # That was inside the run: the fork's copy of it ends there, aborted, in the fork only.
    assert fork["ended_run"] == run["run"] and fork["last_seq"] == fork["forked_at"] + 1
    events = (await client.call("events", session=fork["session"]))["events"]
    assert events[-1]["type"] == "run.finished" and events[-1]["reason"] == "aborted"
    assert f"forked from {run['session']} at seq {reply - 1}" in events[-1]["error"]
    rows = {r["id"]: r for r in (await client.call("sessions.list"))["sessions"]}
    assert rows[fork["session"]]["status"] == "aborted" and rows[run["session"]]["status"] == "done"
    # A fork with no run of its own goes by the task it was forked from.
    assert rows[fork["session"]]["title"] == rows[run["session"]]["title"] == "go"

    with pytest.raises(RpcError) as info:
        await client.call("sessions.fork", session=run["session"], at=len(log) + 1)
    assert info.value.code == ErrorCode.INVALID_PARAMS and f"seqs 1 to {len(log)}" in info.value.message


async def test_a_session_with_a_run_in_flight_forks_at_its_last_whole_point(
    client: TrioClient, project: Path
) -> None:
    # Agent mode: the bash call waits for a person, so the run stays in flight.
    model = write_script(project, [text("first look"), bash("ls")], [text("after approval")])
    run = await client.call("dispatch", task="go", model=model, cwd=str(project), attach=True)
    session = run["session"]
    asked = await events_until(client, lambda e: e.get("type") == "permission.requested")

    fork = await client.call("sessions.fork", session=session)
    reply = next(e for e in asked if e["type"] == "message.assistant")
    assert fork["forked_at"] == reply["seq"] - 1 and fork["ended_run"] == run["run"]
    # The fork is idle: a run can be dispatched on it while the parent's waits on.
    on_fork = await client.call("dispatch", yes=True, task="again", model=model, session=fork["session"], attach=True)
    events = await events_until(client, finished(on_fork["run"]))
    # Its history has no reply yet, so the script's first response answers it again.
    assert [e["result"] for e in events if e["type"] == "tool.finished"] == ["a.txt\nb.txt\nc.py\nscript.json\n"]
    assert events[-1]["text"] == "after approval"
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="busy?", model=model, session=session)
    assert info.value.code == ErrorCode.SESSION_BUSY
    call_id = next(e for e in asked if e["type"] == "permission.requested")["call_id"]
    await client.call("permission.respond", session=session, call_id=call_id, decision="approve")
    done = await events_until(client, finished(run["run"]))
    assert done[-1]["reason"] == "done" and done[-1]["text"] == "after approval"


async def test_forks_of_forks_attach_and_survive_a_restart(tmp_path: Path, project: Path) -> None:
    model = write_script(project, [text("one")], [text("two")], [text("three")], [text("four")])
    async with serving(tmp_path / "roost.db") as daemon:
        async with open_client(daemon.socket_path) as client:
            first = await client.call("dispatch", task="a", model=model, cwd=str(project), attach=True)
            root = first["session"]
            end_a = stored(await events_until(client, finished(first["run"])))[-1]["seq"]
            child = (await client.call("sessions.fork", session=root))["session"]
            run = await client.call("dispatch", task="b", model=model, session=child, attach=True)
            end_b = stored(await events_until(client, finished(run["run"])))[-1]["seq"]
            grandchild = (await client.call("sessions.fork", session=child, at=end_b))["session"]
            run = await client.call("dispatch", task="c", model=model, session=grandchild, attach=True)
            events = await events_until(client, finished(run["run"]))
            assert events[-1]["text"] == "three"
            before = (await client.call("events", session=grandchild))["events"]

        # A second client attaching to the grandchild sees its whole history, as its own.
        async with open_client(daemon.socket_path) as watcher:
            attached = await watcher.call("attach", session=grandchild)
            replay = await events_until(watcher, lambda e: e.get("seq") == attached["last_seq"])
            assert replay == before

    async with serving(tmp_path / "roost.db") as daemon:
        async with open_client(daemon.socket_path) as client:
            assert (await client.call("events", session=grandchild))["events"] == before
            rows = {r["id"]: r for r in (await client.call("sessions.list"))["sessions"]}
            assert [(rows[s]["parent"], rows[s]["forked_at"]) for s in (root, child, grandchild)] == [
                (None, None), (root, end_a), (child, end_b),
            ]  # fmt: skip
            run = await client.call("dispatch", task="d", model=model, session=grandchild, attach=True)
            events = await events_until(client, finished(run["run"]))
            assert events[-1]["text"] == "four"
            assert stored(events)[0]["seq"] == before[-1]["seq"] + 1
            tasks = [e["text"] for e in (await client.call("events", session=grandchild))["events"] if e["type"] == "message.user"]
            assert tasks == ["a", "b", "c", "d"]
            assert [e["text"] for e in (await client.call("events", session=root))["events"] if e["type"] == "message.user"] == ["a"]
