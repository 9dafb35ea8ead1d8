"""Sub-agents through a real daemon: nested events, answers from the caller, approvals, abort,
and the task tool that delegates to the folder's agents."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from roost.daemon.folder._agents import Agent
from roost.daemon.folder._project import user_config_file
from roost.daemon.rpc._server import Daemon
from roost.daemon.runs._delegation import LIST_BUDGET, delegates, task_spec
from roost.protocol.trio_client import TrioClient, open_client
from tests.fakes.openai_server import serve_openai

from .conftest import bash, events_until, finished, serving, text, trust, write_script


def agent_file(project: Path, name: str, front: str, body: str = "Do the task.") -> None:
    # A scripted model replays a file's tool calls: only the user's own agents may name one,
    # never a project's (it would script what runs there).
    own = "scripted/" in front
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "agents" if own else project / ".roost" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(f"---\nname: {name}\n{front}\n---\n{body}\n")


def call(name: str, message: str) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": {"message": message}}


async def test_a_sub_agent_runs_nested_and_its_answer_is_the_result(
    daemon: Daemon, client: TrioClient, project: Path
) -> None:
    helper = write_script(project, [bash("echo from-helper")], [text("helper says 42")], name="helper.json")
    lead = write_script(
        project, [call("helper", "find the answer"), call("helper", "again")], [text("The answer is 42.")], name="lead.json"
    )
    agent_file(project, "helper", f"description: Finds answers.\nmodel: {helper}\ntools: [bash]\nmode: full")
    agent_file(project, "lead", f"model: {lead}\ntools: [read, helper]")
    await trust(client, project)  # the helper runs in full mode
    async with open_client(daemon.socket_path, client="watcher") as watcher:
        run = await client.call("dispatch", task="what is it?", agent="lead", cwd=str(project), attach=True)
        await watcher.call("attach", session=run["session"])
        mine = await events_until(client, finished(run["run"]))
        theirs = await events_until(watcher, finished(run["run"]))
    stored = [e for e in mine if e.get("seq")]
    assert [e["seq"] for e in stored] == [e["seq"] for e in theirs if e.get("seq")]
    top = [e for e in stored if not e.get("path")]
    nested = [e for e in stored if e.get("path")]
    started = next(e for e in top if e["type"] == "run.started")
    assert started["tools"] == ["read", "helper"] and started["subagents"] == ["helper"]
    calls = [e["call_id"] for e in top if e["type"] == "tool.started"]
    # Both calls of the step ran, each its own sub-agent run, nested under its call id.
    assert {tuple(e["path"]) for e in nested} == {(c,) for c in calls}
    for call_id in calls:
        mine_of = [e for e in nested if e["path"] == [call_id]]
        assert [e["type"] for e in mine_of if e["type"] in ("run.started", "run.finished")] == ["run.started", "run.finished"]
        assert next(e for e in mine_of if e["type"] == "run.started")["agent"] == "helper"
        assert next(e for e in mine_of if e["type"] == "tool.finished")["result"] == "from-helper\n"
    results = [e for e in top if e["type"] == "tool.finished"]
    assert [r["result"] for r in results] == ["helper says 42", "helper says 42"]
    assert all(r["meta"]["agent"] == "helper" and r["meta"]["reason"] == "done" for r in results)
    assert mine[-1]["reason"] == "done" and mine[-1]["text"] == "The answer is 42."
    # The session's own history has only its calls and their results.
    listed = (await client.call("sessions.list"))["sessions"][0]
    assert listed["status"] == "done" and listed["events"] == stored[-1]["seq"]


async def test_approvals_inside_a_sub_agent_reach_every_client(
    daemon: Daemon, client: TrioClient, project: Path
) -> None:
    helper = write_script(project, [bash("touch made-by-helper")], [text("made it")], name="helper.json")
    lead = write_script(project, [call("helper", "make the file")], [text("done")], name="lead.json")
    agent_file(project, "helper", f"model: {helper}\ntools: [bash]")
    agent_file(project, "lead", f"model: {lead}\ntools: [helper]")
    run = await client.call("dispatch", task="t", agent="lead", cwd=str(project), attach=True)
    asked = (await events_until(client, lambda e: e.get("type") == "permission.requested"))[-1]
    assert asked["path"] and asked["tool"] == "bash"
    [pending] = (await client.call("pending"))["pending"]
    assert pending["call_id"] == asked["call_id"] and pending["path"] == asked["path"]
    assert (await client.call("sessions.list"))["sessions"][0]["status"] == "waiting"
    async with open_client(daemon.socket_path, client="phone") as phone:
        await phone.call("permission.respond", session=run["session"], call_id=asked["call_id"], decision="approve")
    events = await events_until(client, finished(run["run"]))
    assert (project / "made-by-helper").exists() and events[-1]["reason"] == "done"


async def test_aborting_the_caller_aborts_its_sub_agents(client: TrioClient, project: Path) -> None:
    helper = write_script(project, [bash("sleep 30")], name="helper.json")
    lead = write_script(project, [call("helper", "wait")], name="lead.json")
    agent_file(project, "helper", f"model: {helper}\ntools: [bash]\nmode: full")
    agent_file(project, "lead", f"model: {lead}\ntools: [helper]")
    await trust(client, project)
    run = await client.call("dispatch", task="t", agent="lead", cwd=str(project), attach=True)
    await events_until(client, lambda e: e.get("type") == "tool.started" and e.get("path"))
    with trio.fail_after(10):
        await client.call("abort", session=run["session"])
    # A client that stops at the caller's end has seen its sub-agents' ends already.
    events = await events_until(client, finished(run["run"]))
    ends = [(bool(e.get("path")), e["reason"]) for e in events if e["type"] == "run.finished"]
    assert ends == [(True, "aborted"), (False, "aborted")]


async def test_depth_is_bounded_and_bad_calls_are_errors(client: TrioClient, project: Path) -> None:
    loop = write_script(project, *[[call("looper", "deeper")]] * 5, [text("bottom")], name="loop.json")
    agent_file(project, "looper", f"model: {loop}\ntools: [looper]")
    run = await client.call("dispatch", yes=True, task="t", agent="looper", cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]), timeout=30)
    assert max(len(e.get("path") or []) for e in events) == 3
    refused = [e for e in events if e["type"] == "tool.finished" and "nest at most 3 deep" in e["result"]]
    assert refused and refused[0]["is_error"]


async def test_a_sub_agents_open_approval_survives_a_restart(tmp_path: Path, project: Path) -> None:
    helper = write_script(project, [bash("touch made-by-helper")], [text("made it")], name="helper.json")
    lead = write_script(project, [call("helper", "make the file")], [text("all done")], name="lead.json")
    agent_file(project, "helper", f"model: {helper}\ntools: [bash]")
    agent_file(project, "lead", f"model: {lead}\ntools: [helper]")
    db = tmp_path / "roost.db"
    async with serving(db) as d, open_client(d.socket_path) as c:
        run = await c.call("dispatch", task="t", agent="lead", cwd=str(project), attach=True, sandbox="off")
        asked = (await events_until(c, lambda e: e.get("type") == "permission.requested"))[-1]
    assert asked["path"]
    async with serving(db) as d, open_client(d.socket_path) as c:
        # The request is still open, in the sub-agent, and the caller still waits for it.
        [row] = (await c.call("pending"))["pending"]
        assert (row["call_id"], row["path"]) == (asked["call_id"], asked["path"])
        assert (await c.call("sessions.list"))["sessions"][0]["status"] == "waiting"
        await c.call("attach", session=run["session"], since=asked["seq"])
        await c.call("permission.respond", session=run["session"], call_id=asked["call_id"], decision="approve")
        events = await events_until(c, finished(run["run"]))
    assert (project / "made-by-helper").exists()
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "all done"
    [result] = [e for e in events if e["type"] == "tool.finished" and not e.get("path")]
    assert result["result"] == "made it" and not result["is_error"]
    assert not [e for e in events if "interrupted" in str(e.get("result", ""))]


async def test_a_resumed_sub_agents_call_takes_as_long_as_from_its_own_start(tmp_path: Path, project: Path) -> None:
    helper = write_script(project, [bash("true")], [text("made it")], name="helper.json")
    lead = write_script(project, [call("helper", "go")], [text("all done")], name="lead.json")
    agent_file(project, "helper", f"model: {helper}\ntools: [bash]")
    agent_file(project, "lead", f"model: {lead}\ntools: [helper]")
    db = tmp_path / "roost.db"
    async with serving(db) as d, open_client(d.socket_path) as c:
        run = await c.call("dispatch", task="t", agent="lead", cwd=str(project), attach=True, sandbox="off")
        seen = await events_until(c, lambda e: e.get("type") == "permission.requested")
    [called] = [e for e in seen if e["type"] == "tool.started" and not e.get("path")]
    await trio.sleep(1.0)  # the daemon is down a while
    async with serving(db) as d, open_client(d.socket_path) as c:
        await c.call("attach", session=run["session"], since=seen[-1]["seq"])
        await c.call("permission.respond", session=run["session"], call_id=seen[-1]["call_id"], decision="approve")
        events = await events_until(c, finished(run["run"]))
    [result] = [e for e in events if e["type"] == "tool.finished" and not e.get("path")]
    # Counted from the call's start, before the restart (wall clock), not from the restart.
    assert result["latency"] > 1.0
    assert abs(result["latency"] - (result["ts"] - called["ts"])) < 0.5


def task_call(agent: str, prompt: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": "task", "input": {"agent": agent, "prompt": prompt, **extra}}


async def test_the_default_agent_delegates_with_task_to_the_folders_agents(
    client: TrioClient, project: Path
) -> None:
    helper = write_script(project, [text("helper says 42")], name="helper.json")
    lead = write_script(
        project,
        [
            task_call("helper", "find the answer", description="find it"),
            {"type": "tool_use", "name": "task", "input": {"subagent_type": "helper", "prompt": "again"}},
            task_call("nobody", "x"),
        ],
        [text("The answer is 42.")],
        name="lead.json",
    )
    agent_file(project, "helper", f"description: Finds answers.\nmodel: {helper}\ntools: [read]")
    run = await client.call("dispatch", task="what is it?", model=lead, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    top = [e for e in events if e.get("seq") and not e.get("path")]
    started = next(e for e in top if e["type"] == "run.started")
    assert started["agent"] == "default" and "task" in started["tools"]
    assert started["subagents"] == ["task"] and started["delegates"] == ["helper"]
    order = [e["call_id"] for e in top if e["type"] == "tool.started"]
    results = sorted((e for e in top if e["type"] == "tool.finished"), key=lambda e: order.index(e["call_id"]))
    assert [r["result"] for r in results[:2]] == ["helper says 42", "helper says 42"]
    assert all(r["meta"]["agent"] == "helper" and not r["is_error"] for r in results[:2])
    assert results[2]["is_error"] and results[2]["result"] == (
        "invalid input for task: there is no agent 'nobody' to delegate to; the agents: helper"
    )
    nested = [e for e in events if e.get("path") and e["type"] == "run.started"]
    assert [e["agent"] for e in nested] == ["helper", "helper"]
    # the helper has its own tool list, without task: nobody else to delegate to
    assert all(e["tools"] == ["read"] and "delegates" not in e for e in nested)
    assert events[-1]["reason"] == "done"


async def test_task_is_offered_only_with_an_agent_to_run_and_where_the_tools_name_it(
    client: TrioClient, project: Path
) -> None:
    done = write_script(project, [text("ok")], [text("ok")], [text("ok")], name="done.json")

    async def tools_of(**params: Any) -> dict[str, Any]:
        run = await client.call("dispatch", task="t", model=done, cwd=str(project), attach=True, **params)
        events = await events_until(client, finished(run["run"]))
        return next(e for e in events if e["type"] == "run.started")

    alone = await tools_of()
    assert "task" not in alone["tools"] and "delegates" not in alone  # no agent to delegate to
    agent_file(project, "reviewer", "description: Reviews.\ntools: [read, task]")
    agent_file(project, "tester", "description: Tests.\ntools: [bash]")
    default = await tools_of(session=alone["session"])
    assert default["delegates"] == ["reviewer", "tester"]
    reviewer = await tools_of(session=alone["session"], agent="reviewer")
    assert reviewer["tools"] == ["read", "task"] and reviewer["delegates"] == ["tester"]
    assert "task" not in (await tools_of(session=alone["session"], agent="tester"))["tools"]


async def test_a_task_sub_agents_open_approval_survives_a_restart(tmp_path: Path, project: Path) -> None:
    helper = write_script(project, [bash("touch made-by-helper")], [text("made it")], name="helper.json")
    lead = write_script(project, [task_call("helper", "make the file")], [text("all done")], name="lead.json")
    agent_file(project, "helper", f"model: {helper}\ntools: [bash]")
    db = tmp_path / "roost.db"
    async with serving(db) as d, open_client(d.socket_path) as c:
        run = await c.call("dispatch", task="t", model=lead, cwd=str(project), attach=True, sandbox="off")
        asked = (await events_until(c, lambda e: e.get("type") == "permission.requested"))[-1]
    async with serving(db) as d, open_client(d.socket_path) as c:
        await c.call("attach", session=run["session"], since=asked["seq"])
        await c.call("permission.respond", session=run["session"], call_id=asked["call_id"], decision="approve")
        events = await events_until(c, finished(run["run"]))
    [result] = [e for e in events if e["type"] == "tool.finished" and not e.get("path")]
    assert result["result"] == "made it" and events[-1]["text"] == "all done"


def test_the_task_tool_lists_the_agents_it_may_run() -> None:
    agents = {
        "default": Agent("default"),
        "lead": Agent("lead", "Leads.", tools=("read", "task")),
        "reviewer": Agent("reviewer", "Reviews a change\n  and reports problems."),
        "quiet": Agent("quiet"),
        "narrow": Agent("narrow", tools=("read",)),
    }
    assert delegates(agents["default"], agents) == ("lead", "narrow", "quiet", "reviewer")
    assert delegates(agents["lead"], agents) == ("narrow", "quiet", "reviewer")
    assert delegates(agents["narrow"], agents) == ()
    spec = task_spec(("quiet", "reviewer"), agents)
    assert spec.name == "task"
    assert spec.description.endswith("Agents:\n- quiet\n- reviewer: Reviews a change and reports problems.")
    assert spec.input_schema["properties"]["agent"]["enum"] == ["quiet", "reviewer"]
    assert spec.input_schema["required"] == ["agent", "prompt"]
    long = task_spec(("x",), {"x": Agent("x", "y" * 1000)}).description
    assert long.endswith("- x: " + "y" * 399 + "…")


async def test_a_resumed_sub_agent_whose_model_is_gone_keeps_its_sandbox(tmp_path: Path, project: Path) -> None:
    # Attack: the sub-agent's model resolved at dispatch with the client's key; after a
    # restart the daemon has no such key. Approving its open request must not run the
    # command outside the sandbox the run recorded.
    escaped = tmp_path / "escaped"
    reply = {"content": "", "tool_calls": [{"id": "call_1", "name": "bash", "arguments": {"command": f"touch {escaped}"}}]}
    lead = write_script(project, [call("helper", "touch it")], [text("all done")], name="lead.json")
    agent_file(project, "lead", f"model: {lead}\ntools: [helper]")
    with serve_openai([reply]) as server:
        config = user_config_file()
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            f'[providers.keyed]\nkind = "openai"\nbase_url = "{server.base_url}"\napi_key_env = "HELPER_KEY"\n'
            'models = { small = "m" }\n'
        )
        # The user's own agent: its model is theirs to name.
        folder = Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "agents"
        (folder / "helper.md").write_text("---\nname: helper\nmodel: keyed/small\ntools: [bash]\n---\nDo it.\n")
        assert "HELPER_KEY" not in os.environ
        environ = {**os.environ, "HELPER_KEY": "k"}
        db = tmp_path / "roost.db"
        async with serving(db) as d, open_client(d.socket_path) as c:
            run = await c.call(
                "dispatch", task="t", agent="lead", cwd=str(project), attach=True, ask=["bash"], env=environ
            )
            asked = (await events_until(c, lambda e: e.get("type") == "permission.requested"))[-1]
        assert asked["path"] and asked["input"]["command"] == f"touch {escaped}"
        async with serving(db) as d, open_client(d.socket_path) as c:
            await c.call("attach", session=run["session"], since=asked["seq"])
            await c.call("permission.respond", session=run["session"], call_id=asked["call_id"], decision="approve")
            events = await events_until(c, finished(run["run"]))
    # It ran, in the sandbox (a private /tmp), not in the daemon's world.
    assert [e for e in events if e["type"] == "tool.finished" and e.get("call_id") == asked["call_id"]]
    assert not escaped.exists()


def test_the_task_tools_list_keeps_to_its_budget_with_the_users_and_the_projects_agents() -> None:
    # Hundreds of agents installed for the user, a few in the project: every call carries
    # the list, so it keeps to a budget and the project's are not crowded out.
    about = "Reviews code for one language and one framework in depth. " * 6
    agents = {f"user-{n:03}": Agent(f"user-{n:03}", about) for n in range(413)}
    agents |= {f"proj-{n}": replace(Agent(f"proj-{n}", "A project agent."), from_project=True) for n in range(3)}
    team = tuple(sorted(agents))
    spec = task_spec(team, agents)
    listing = spec.description.split("Agents:\n", 1)[1].splitlines()
    assert len(spec.description) <= LIST_BUDGET + 1000
    assert all(f"- proj-{n}: A project agent." in listing for n in range(3))
    listed = [line for line in listing if line.startswith("- ")]
    assert listing[-1] == f"… and {len(team) - len(listed)} more (`roost agents` lists them all): name one as the agent."
    assert "enum" not in spec.input_schema["properties"]["agent"]
    # A list that fits is whole, and the model may only name its agents.
    small = task_spec(team[:5], agents)
    assert "more" not in small.description and small.input_schema["properties"]["agent"]["enum"] == list(team[:5])


async def test_run_started_records_what_the_offered_tools_take_of_every_call(client: TrioClient, project: Path) -> None:
    run = await client.call("dispatch", task="t", model="scripted/demo", cwd=str(project), attach=True, yes=True)
    events = await events_until(client, finished(run["run"]))
    started = next(e for e in events if e["type"] == "run.started")
    [tools] = [layer for layer in started["prompt"] if layer["name"] == "tools"]
    # Every built-in's description and schema: several thousand characters.
    assert tools["chars"] > 2000
