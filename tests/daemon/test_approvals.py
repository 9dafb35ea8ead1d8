"""People in the loop through a real daemon: approvals, questions, rules, hooks, guardrails."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.folder._project import user_config_file
from roost.daemon.rpc._server import Daemon
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient, open_client

from .conftest import bash, events_until, finished, serving, stored, text, trust, write_script


def asked(event: dict[str, Any]) -> bool:
    return event.get("type") in ("permission.requested", "human.asked")


def of_type(events: list[dict[str, Any]], type: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == type]


async def test_two_clients_race_to_approve_and_exactly_one_wins(
    daemon: Daemon, client: TrioClient, project: Path
) -> None:
    model = write_script(project, [bash("touch made.txt")], [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    request = (await events_until(client, asked))[-1]
    assert request["type"] == "permission.requested" and request["tool"] == "bash"
    assert request["reason"] == "bash asks in agent mode" and not (project / "made.txt").exists()
    listed = (await client.call("sessions.list"))["sessions"]
    assert listed[0]["status"] == "waiting"
    async with open_client(daemon.socket_path, client="other") as other:
        await other.call("attach", session=run["session"], since=request["seq"])
        outcomes: dict[str, Any] = {}

        async def answer(name: str, c: TrioClient, decision: str) -> None:
            try:
                outcomes[name] = await c.call(
                    "permission.respond", session=run["session"], call_id=request["call_id"], decision=decision
                )
            except RpcError as exc:
                outcomes[name] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer, "first", client, "approve")
            nursery.start_soon(answer, "second", other, "deny")
        errors = [o for o in outcomes.values() if isinstance(o, RpcError)]
        assert len(errors) == 1 and errors[0].code == ErrorCode.NOT_PENDING
        assert "already answered" in errors[0].message
        mine = await events_until(client, finished(run["run"]))
        theirs = await events_until(other, finished(run["run"]))
    [resolved] = of_type(mine, "permission.resolved")
    assert of_type(theirs, "permission.resolved") == [resolved]
    winner = "first" if resolved["decision"] == "approve" else "second"
    assert resolved["client"].startswith("python-trio#" if winner == "first" else "other#")
    assert (project / "made.txt").exists() == (resolved["decision"] == "approve")


async def test_a_client_attaching_later_sees_the_open_request_and_answers_it(
    daemon: Daemon, client: TrioClient, project: Path
) -> None:
    model = write_script(project, [bash("echo approved > out.txt")], [text("ok")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project))
    with trio.fail_after(10):
        while not (await client.call("pending"))["pending"]:
            await trio.sleep(0.01)
    [open_] = (await client.call("pending"))["pending"]
    assert (open_["session"], open_["kind"], open_["name"]) == (run["session"], "permission", "bash")
    assert open_["input"] == {"command": "echo approved > out.txt"}
    async with open_client(daemon.socket_path, client="late") as late:
        await late.call("attach", session=run["session"])
        replay = await events_until(late, asked)
        assert replay[-1]["call_id"] == open_["call_id"]
        await late.call("permission.respond", session=run["session"], call_id=open_["call_id"], decision="approve")
        events = await events_until(late, finished(run["run"]))
    assert events[-1]["reason"] == "done"
    assert (project / "out.txt").read_text() == "approved\n"
    assert (await client.call("pending"))["pending"] == []
    with pytest.raises(RpcError) as info:
        await client.call("permission.respond", session=run["session"], call_id=open_["call_id"], decision="deny")
    assert info.value.code == ErrorCode.NOT_PENDING and "approve by late#" in info.value.message


async def test_an_open_request_survives_a_daemon_restart(tmp_path: Path, project: Path) -> None:
    db = tmp_path / "roost.db"
    model = write_script(project, [bash("echo after > restart.txt"), bash("sleep 30")], [text("carried on")])
    async with serving(db) as d:
        async with open_client(d.socket_path) as c:
            run = await c.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
            first = (await events_until(c, asked))[-1]
            second = (await events_until(c, asked))[-1]
            # One call runs (approved), the other still waits, when the daemon stops.
            await c.call("permission.respond", session=run["session"], call_id=second["call_id"], decision="approve")
            await events_until(c, lambda e: e.get("type") == "permission.resolved")
    async with serving(db) as d:
        async with open_client(d.socket_path) as c:
            [still] = (await c.call("pending"))["pending"]
            assert still["call_id"] == first["call_id"]
            assert (await c.call("status"))["runs"] == 1
            assert (await c.call("sessions.list"))["sessions"][0]["status"] == "waiting"
            since = (await c.call("attach", session=run["session"]))["last_seq"]
            await c.call("permission.respond", session=run["session"], call_id=first["call_id"], decision="approve")
            events = await events_until(c, finished(run["run"]))
            assert (await c.call("status"))["runs"] == 0
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "carried on"
    results = {e["call_id"]: e for e in of_type(events, "tool.finished")}
    assert results[first["call_id"]]["result"] == "" and (project / "restart.txt").read_text() == "after\n"
    # The call that was running when the daemon stopped is reported, never run again.
    interrupted = [e for e in stored(events) if e["seq"] <= since and e["type"] == "tool.finished"]
    assert [e["call_id"] for e in interrupted] == [second["call_id"]]
    assert interrupted[0]["result"].startswith("interrupted")


async def test_status_counts_the_runs_in_flight_among_many_sessions(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("true")], [text("done")])
    for _ in range(5):  # idle sessions, loaded
        await client.call("sessions.create", cwd=str(project))
    runs = [await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True) for _ in range(2)]
    asks = [(await events_until(client, asked))[-1] for _ in runs]
    assert (await client.call("status"))["runs"] == 2
    for request in asks:
        await client.call("permission.respond", session=request["session"], call_id=request["call_id"], decision="approve")
        await events_until(client, finished(request["run"]))
        left = (await client.call("status"))["runs"]
        assert left == (1 if request is asks[0] else 0)


async def test_denied_calls_reach_the_model_as_errors(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("rm -rf *")], [text("understood")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    request = (await events_until(client, asked))[-1]
    await client.call(
        "permission.respond", session=run["session"], call_id=request["call_id"], decision="deny", reason="never"
    )
    events = await events_until(client, finished(run["run"]))
    [result] = of_type(events, "tool.finished")
    assert result["is_error"] and result["result"].startswith("denied by python-trio#") and result["result"].endswith(": never")
    assert sorted(p.name for p in project.iterdir()) == ["a.txt", "b.txt", "c.py", "script.json"]
    assert events[-1]["reason"] == "done"


async def test_rules_decide_compound_commands(client: TrioClient, project: Path) -> None:
    model = write_script(
        project,
        [bash("echo one && echo two | cat"), bash("echo x; touch pwned"), bash("echo $(rm -rf .)")],
        [text("done")],
    )
    run = await client.call(
        "dispatch", task="t", model=model, cwd=str(project), attach=True,
        allow=["bash(echo *)", "bash(cat)"], deny=["bash(rm *)"],
    )
    request = (await events_until(client, asked))[-1]
    assert request["input"]["command"] == "echo x; touch pwned"
    assert request["session_rules"] == ["bash(touch pwned)"]
    await client.call("permission.respond", session=run["session"], call_id=request["call_id"], decision="deny")
    events = await events_until(client, finished(run["run"]))
    results = [(e["is_error"], e["result"]) for e in of_type(events, "tool.finished")]
    assert (False, "one\ntwo\n") in results
    denied = [r for err, r in results if err and "rule deny bash(rm *)" in r]
    assert len(denied) == 1 and "(from dispatch)" in denied[0]
    assert not (project / "pwned").exists() and (project / "a.txt").exists()


async def test_approval_for_the_session_adds_exactly_what_was_shown(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("ls a.txt")], [bash("ls a.txt")], [bash("ls -l b.txt")], [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    request = (await events_until(client, asked))[-1]
    assert request["session_rules"] == ["bash(ls a.txt)"]
    await client.call(
        "permission.respond", session=run["session"], call_id=request["call_id"], decision="approve", scope="session"
    )
    seen = await events_until(client, asked)
    later = seen[-1]
    assert later["input"] == {"command": "ls -l b.txt"}
    await client.call("permission.respond", session=run["session"], call_id=later["call_id"], decision="deny")
    events = seen + await events_until(client, finished(run["run"]))
    resolved = of_type(events, "permission.resolved")
    assert (resolved[0]["scope"], resolved[0]["rules"]) == ("session", ["bash(ls a.txt)"])
    assert [e["is_error"] for e in of_type(events, "tool.finished")] == [False, False, True]


async def test_paths_outside_the_project_ask_first(client: TrioClient, project: Path, tmp_path: Path) -> None:
    model = write_script(
        project,
        [{"type": "tool_use", "name": "write", "input": {"path": "../outside.txt", "content": "x"}}],
        [{"type": "tool_use", "name": "read", "input": {"path": "../outside.txt"}}],
        [text("done")],
    )
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    request = (await events_until(client, asked))[-1]
    assert request["tool"] == "write" and request["outside"]
    assert request["reason"] == f"{tmp_path / 'outside.txt'} is outside the working directory"
    await client.call("permission.respond", session=run["session"], call_id=request["call_id"], decision="approve")
    read = (await events_until(client, asked))[-1]
    assert read["tool"] == "read" and "outside the working directory" in read["reason"]
    await client.call("permission.respond", session=run["session"], call_id=read["call_id"], decision="approve")
    events = await events_until(client, finished(run["run"]))
    assert (tmp_path / "outside.txt").read_text() == "x"
    assert of_type(events, "tool.finished")[-1]["result"] == "1\tx"


async def test_an_unanswered_request_times_out_as_a_denial(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("touch late.txt")], [text("gave up")])
    run = await client.call(
        "dispatch", task="t", model=model, cwd=str(project), attach=True, approval_timeout=0.2
    )
    events = await events_until(client, finished(run["run"]))
    [resolved] = of_type(events, "permission.resolved")
    assert (resolved["decision"], resolved["client"]) == ("deny", "timeout")
    assert "approval timeout" in resolved["reason"]
    assert not (project / "late.txt").exists() and events[-1]["reason"] == "done"


async def test_ask_human_goes_to_every_client_and_the_first_answer_is_the_result(
    daemon: Daemon, client: TrioClient, project: Path
) -> None:
    question = {"type": "tool_use", "name": "ask_human", "input": {"question": "Which port?", "choices": ["80", "8080"]}}
    model = write_script(project, [question], [text("thanks")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    async with open_client(daemon.socket_path, client="phone") as phone:
        await phone.call("attach", session=run["session"])
        seen = (await events_until(phone, asked))[-1]
        assert (seen["question"], seen["choices"]) == ("Which port?", ["80", "8080"])
        await phone.call("human.respond", session=run["session"], call_id=seen["call_id"], answer="8080")
        theirs = await events_until(phone, finished(run["run"]))
    mine = await events_until(client, finished(run["run"]))
    for events in (mine, theirs):
        [answered] = of_type(events, "human.answered")
        assert answered["answer"] == "8080" and answered["client"].startswith("phone#")
    assert of_type(mine, "tool.finished")[0]["result"] == "8080"


async def test_a_secret_read_from_the_project_never_reaches_the_model(client: TrioClient, project: Path) -> None:
    (project / ".env").write_text("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7REALKEY\n")
    model = write_script(project, [{"type": "tool_use", "name": "read", "input": {"path": ".env"}}], [text("no")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "guardrail"
    assert events[-1]["text"] == "guardrail secrets: the input matched an AWS access key id"
    assert "AKIAIOSFODNN7REALKEY" not in json.dumps(await client.call("events", session=run["session"]))
    assert len(of_type(events, "step.started")) == 1


@pytest.mark.parametrize("where", ["AGENTS.md", ".roost/MEMORY.md"])
async def test_a_secret_in_an_instruction_or_memory_file_never_reaches_the_model(
    client: TrioClient, project: Path, where: str
) -> None:
    (project / where).parent.mkdir(exist_ok=True)
    (project / where).write_text("Deploy with the key sk-ant-api03-abcdefghijklmnopqrstuvwx\n")
    model = write_script(project, [text("never")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "guardrail"
    assert events[-1]["text"] == "guardrail secrets: the input matched an Anthropic API key"
    assert not of_type(events, "step.started")  # no model call was made


async def test_the_same_calls_over_and_over_end_the_run_stuck(client: TrioClient, project: Path) -> None:
    model = write_script(project, *[[bash("cat a.txt")]] * 5)
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    nudges = [e for e in of_type(events, "message.user") if e["origin"] == "nudge"]
    assert len(nudges) == 1 and "try something else" in nudges[0]["text"]
    assert events[-1]["reason"] == "stuck" and events[-1]["turns"] == 4


def write_hook(project: Path, name: str, body: str) -> str:
    path = project / name
    path.write_text("#!/usr/bin/env python3\nimport json, sys\ncall = json.load(sys.stdin)\n" + body)
    path.chmod(0o755)
    return f"./{name}"


async def test_hooks_block_rewrite_replace_and_fail_without_ending_the_run(
    client: TrioClient, project: Path
) -> None:
    block = write_hook(
        project, "block.py", 'if "secret" in call["input"]["command"]:\n    print("no secrets", file=sys.stderr); sys.exit(2)\n'
    )
    rewrite = write_hook(
        project, "rewrite.py",
        'cmd = call["input"]["command"]\nif cmd.startswith("echo"):\n    print(json.dumps({"input": {"command": cmd + " rewritten"}}))\n',
    )
    post = write_hook(
        project, "post.py", 'if call["result"].startswith("date:"):\n    print(json.dumps({"result": "redacted"}))\n'
    )
    (project / ".roost").mkdir()
    (project / ".roost" / "config.toml").write_text(
        f"""
[[hooks.pre_tool]]
match = "bash"
command = "{block}"
[[hooks.pre_tool]]
command = "{rewrite}"
[[hooks.pre_tool]]
match = "bash"
command = "sleep 30"
timeout = 0.3
[[hooks.pre_tool]]
match = "bash"
command = "exit 7"
[[hooks.post_tool]]
command = "{post}"
"""
    )
    model = write_script(
        project, [bash("cat secret.txt")], [bash("echo hi")], [bash("echo date: today")], [text("done")]
    )
    await trust(client, project)  # the project's own hooks
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]), timeout=30)
    blocked, rewritten, replaced = of_type(events, "tool.finished")
    assert blocked["is_error"] and blocked["result"] == "blocked by a hook: no secrets"
    assert rewritten["result"] == "hi rewritten\n" and rewritten["meta"]["input_rewritten"]
    assert replaced["result"] == "redacted"
    failures = rewritten["meta"]["hook_failures"]
    assert any("timed out after 0.3 s" in f for f in failures)
    assert any("exited with status 7" in f for f in failures)
    assert events[-1]["reason"] == "done"


async def test_bad_answers_get_clear_errors(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("true")], [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    request = (await events_until(client, asked))[-1]
    for params, code in (
        ({"decision": "maybe"}, ErrorCode.INVALID_PARAMS),
        ({"decision": "approve", "scope": "forever"}, ErrorCode.INVALID_PARAMS),
        ({"decision": "approve", "call_id": "nope"}, ErrorCode.NOT_PENDING),
    ):
        with pytest.raises(RpcError) as info:
            await client.call("permission.respond", **{"session": run["session"], "call_id": request["call_id"], **params})
        assert info.value.code == code, params
    with pytest.raises(RpcError) as info:
        await client.call("human.respond", session=run["session"], call_id=request["call_id"], answer="x")
    assert info.value.code == ErrorCode.NOT_PENDING
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", model=model, cwd=str(project), allow=["bash("])
    assert info.value.code == ErrorCode.INVALID_PARAMS and "bash(" in info.value.message
    await client.call("abort", session=run["session"])
    events = await events_until(client, finished(run["run"]))
    assert of_type(events, "permission.resolved")[-1]["client"] == "roost"


async def test_an_edit_or_write_waiting_for_approval_shows_its_diff(client: TrioClient, project: Path) -> None:
    (project / "a.txt").write_text("one\ntwo\nthree\n")
    calls = [
        {"type": "tool_use", "name": "edit", "input": {"path": "a.txt", "old": "two", "new": "TWO"}},
        {"type": "tool_use", "name": "write", "input": {"path": "new.txt", "content": "fresh\n"}},
    ]
    model = write_script(project, calls, [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, sandbox="off")
    asked: list[dict[str, Any]] = []

    def both_asked(event: dict[str, Any]) -> bool:
        if event.get("type") == "permission.requested":
            asked.append(event)
        return len(asked) == 2

    await events_until(client, both_asked)
    edit, write = asked
    assert edit["diff"].splitlines() == ["--- a/a.txt", "+++ b/a.txt", "@@ -1,3 +1,3 @@", " one", "-two", "+TWO", " three"]
    assert write["diff"].splitlines()[-1] == "+fresh"
    await client.call("abort", session=run["session"])



async def test_a_guardrail_that_warns_is_stored_and_the_run_goes_on(client: TrioClient, project: Path) -> None:
    config = user_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        '[[guardrails.rules]]\nname = "staging"\non = "input"\npattern = "staging[.]example"\n'
        'what = "the staging host"\naction = "warn"\n'
    )
    model = write_script(project, [bash("echo see staging.example")], [text("noted")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, yes=True)
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "noted"
    [warned] = of_type(events, "guardrail.warned")
    result = of_type(events, "tool.finished")[0]
    assert result["result"] == "see staging.example\n" and warned["call_id"] == result["call_id"]
    assert warned["message"] == "guardrail staging: the input matched the staging host" and warned["seq"]
    started = of_type(events, "run.started")[0]
    assert {"name": "staging", "on": "input", "pattern": "staging[.]example", "what": "the staging host",
            "action": "warn"} in started["guardrails"]
