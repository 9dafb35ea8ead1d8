"""Runs through a real daemon: dispatch, tools, steering, abort, limits, errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.rpc._server import Daemon
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient, open_client
from tests._procs import alive

from .conftest import bash, events_until, finished, stored, text, write_script


async def test_demo_run_end_to_end(client: TrioClient, project: Path) -> None:
    run = await client.call("dispatch", yes=True, task="count the files", model="scripted/demo", cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    types = [e["type"] for e in stored(events)]
    assert types == [
        "session.created", "run.started", "message.user", "step.started", "message.assistant", "tool.started",
        "tool.finished", "step.finished", "step.started", "message.assistant", "tool.started",
        "tool.finished", "step.finished", "step.started", "message.assistant", "step.finished",
        "run.finished",
    ]
    results = [e["result"] for e in events if e["type"] == "tool.finished"]
    assert results[0].split() == ["a.txt", "b.txt", "c.py"]
    assert results[1].strip() == "3"
    deltas = "".join(e["text"] for e in events if e["type"] == "text.delta")
    assert "list the files" in deltas
    last = events[-1]
    assert last["reason"] == "done" and last["turns"] == 3
    assert last["usage"]["input_tokens"] > 0
    seqs = [e["seq"] for e in stored(events)]
    assert seqs == list(range(1, len(seqs) + 1))

    listed = (await client.call("sessions.list"))["sessions"]
    assert [(s["id"], s["status"], s["events"], s["cwd"]) for s in listed] == [
        (run["session"], "done", seqs[-1], str(project))
    ]


async def test_history_goes_to_the_model_in_order(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("echo one")], [bash("echo two")], [text("fin")])
    run = await client.call("dispatch", yes=True, task="go", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    assert [e["result"] for e in events if e["type"] == "tool.finished"] == ["one\n", "two\n"]
    assert events[-1]["text"] == "fin"
    # The same session goes on with its history: a new run's first call is the 4th response.
    model2 = write_script(project, [], [], [], [text("second run")], name="s2.json")
    run2 = await client.call("dispatch", yes=True, task="more", session=run["session"], model=model2, attach=True)
    events2 = await events_until(client, finished(run2["run"]))
    assert events2[-1]["reason"] == "done" and events2[-1]["text"] == "second run"


async def test_bad_tool_calls_become_error_results(client: TrioClient, project: Path) -> None:
    model = write_script(
        project,
        [
            {"type": "tool_use", "name": "nosuch", "input": {}},
            {"type": "tool_use", "name": "bash", "input": {"cmd": "ls"}},
            {"type": "tool_use", "name": "read", "input": {"path": "missing.txt"}},
            bash("exit 7"),
        ],
        [text("recovered")],
    )
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    order = [e["call_id"] for e in events if e["type"] == "tool.started"]
    by_call = {e["call_id"]: (e["is_error"], e["result"]) for e in events if e["type"] == "tool.finished"}
    results = [by_call[call_id] for call_id in order]
    assert len(results) == 4
    assert all(is_error for is_error, _ in results)
    # A tool the run was not given is refused by the loop before any lookup.
    assert results[0][1] == "the default agent has no tool nosuch"
    assert "'command' is a required property" in results[1][1]
    assert "no such file: missing.txt" in results[2][1]
    assert "[exit status 7]" in results[3][1]
    assert events[-1]["reason"] == "done"


async def test_read_tool_with_a_range(client: TrioClient, project: Path) -> None:
    (project / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    model = write_script(
        project, [{"type": "tool_use", "name": "read", "input": {"path": "long.txt", "offset": 3, "limit": 2}}], [text("ok")]
    )
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    result = next(e for e in events if e["type"] == "tool.finished")
    assert result["result"].splitlines()[:2] == ["3\tline 3", "4\tline 4"]
    assert result["result"].splitlines()[2] == "[more lines follow; read on with offset 5]"
    assert not result["is_error"]


async def test_the_checklist_runs_without_asking_and_its_result_carries_it(client: TrioClient, project: Path) -> None:
    todos = [{"content": "Look", "status": "completed"}, {"content": "Fix", "status": "in_progress", "activeForm": "Fixing"}]
    model = write_script(project, [{"type": "tool_use", "name": "todo", "input": {"todos": todos}}], [text("ok")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)  # agent mode
    events = await events_until(client, finished(run["run"]))
    assert "permission.requested" not in [e["type"] for e in events]
    result = next(e for e in events if e["type"] == "tool.finished")
    assert result["meta"]["todos"] == todos and result["result"].startswith("1 of 2 done:")


async def test_max_turns_ends_the_run(client: TrioClient, project: Path) -> None:
    model = write_script(project, *[[bash("true")] for _ in range(5)])
    run = await client.call("dispatch", yes=True, task="loop", model=model, cwd=str(project), max_turns=2, attach=True)
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "max_turns" and events[-1]["turns"] == 2


async def test_script_running_out_ends_with_a_clear_error(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("true")])
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "error"
    assert "the script has 1 responses and this is call 2" in events[-1]["error"]
    assert any(e["type"] == "error" for e in events)


async def test_max_tokens_stop_reason(client: TrioClient, project: Path) -> None:
    path = project / "mt.json"
    path.write_text('{"responses": [{"content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens"}]}')
    run = await client.call("dispatch", yes=True, task="t", model=f"scripted/{path}", cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "max_tokens"


async def test_busy_session_refuses_a_second_dispatch_and_steer_joins(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("sleep 0.5")], [text("done")])
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    await events_until(client, lambda e: e["type"] == "tool.started")
    with pytest.raises(RpcError) as busy:
        await client.call("dispatch", yes=True, task="again", session=run["session"], model=model)
    assert busy.value.code == ErrorCode.SESSION_BUSY
    await client.call("steer", session=run["session"], text="also this")
    events = await events_until(client, finished(run["run"]))
    types = [e["type"] for e in stored(events)]
    queued = types.index("steer.queued")
    steer_msg = next(i for i, e in enumerate(stored(events)) if e["type"] == "message.user")
    assert queued < steer_msg < types.index("step.started")
    assert stored(events)[steer_msg]["origin"] == "steer"
    assert events[-1]["reason"] == "done"


async def test_abort_kills_the_tool_process_group(client: TrioClient, project: Path) -> None:
    pidfile = project / "child.pid"
    model = write_script(project, [bash(f"sleep 60 & echo $! > {pidfile}; wait")])
    # Unsandboxed: the pid the command writes is then this machine's (the sandboxed kill is
    # in test_sandbox.py).
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True, sandbox="off")
    await events_until(client, lambda e: e["type"] == "tool.started")
    with trio.fail_after(5):
        while not pidfile.exists() or not pidfile.read_text().strip():
            await trio.sleep(0.01)
    child = int(pidfile.read_text())
    with trio.fail_after(2):
        assert (await client.call("abort", session=run["session"]))["run"] == run["run"]
        events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "aborted"
    aborted = next(e for e in events if e["type"] == "tool.finished")
    assert aborted["is_error"] and aborted["result"].startswith("aborted")
    with trio.fail_after(2):
        while alive(child):
            await trio.sleep(0.01)


async def test_idempotent_dispatch(client: TrioClient, project: Path) -> None:
    first = await client.call("dispatch", yes=True, task="t", model="scripted/demo", cwd=str(project), request_id="k1")
    again = await client.call("dispatch", yes=True, task="t", model="scripted/demo", cwd=str(project), request_id="k1")
    assert (again["session"], again["run"]) == (first["session"], first["run"])
    assert len((await client.call("sessions.list"))["sessions"]) == 1


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("nosuch.method", {}, ErrorCode.UNKNOWN_METHOD),
        ("dispatch", {}, ErrorCode.INVALID_PARAMS),
        ("dispatch", {"task": 3}, ErrorCode.INVALID_PARAMS),
        ("dispatch", {"task": "x", "max_turns": True}, ErrorCode.INVALID_PARAMS),
        ("dispatch", {"task": "x", "max_turns": 0, "model": "scripted/demo"}, ErrorCode.INVALID_PARAMS),
        ("dispatch", {"task": "x", "model": "nosuch/model"}, ErrorCode.MODEL_UNAVAILABLE),
        ("dispatch", {"task": "x", "model": "no-slash"}, ErrorCode.MODEL_UNAVAILABLE),
        ("dispatch", {"task": "x", "cwd": "/nonexistent/dir", "model": "scripted/demo"}, ErrorCode.INVALID_PARAMS),
        ("steer", {"session": "nope", "text": "x"}, ErrorCode.SESSION_NOT_FOUND),
        ("attach", {"session": "nope"}, ErrorCode.SESSION_NOT_FOUND),
        ("hello", {"protocol": 99}, ErrorCode.UNSUPPORTED_PROTOCOL),
    ],
)
async def test_bad_requests_get_stable_error_codes(client: TrioClient, method: str, params: dict, code: int) -> None:
    with pytest.raises(RpcError) as error:
        await client.call(method, params)
    assert error.value.code == code
    assert error.value.message
    assert "Traceback" not in error.value.message
    assert (await client.call("status"))["pid"] == os.getpid()


async def test_anthropic_without_a_key_is_refused_clearly(client: TrioClient) -> None:
    with pytest.raises(RpcError) as error:
        await client.call("dispatch", yes=True, task="x", model="anthropic/claude-sonnet-4-5")
    assert error.value.code == ErrorCode.MODEL_UNAVAILABLE
    assert "ANTHROPIC_API_KEY" in error.value.message


async def test_steer_and_abort_on_an_idle_session(client: TrioClient, project: Path) -> None:
    session = (await client.call("sessions.create", cwd=str(project)))["session"]
    for method, params in (("steer", {"text": "x"}), ("abort", {})):
        with pytest.raises(RpcError) as error:
            await client.call(method, session=session, **params)
        assert error.value.code == ErrorCode.NOT_RUNNING


async def test_hello_lists_the_api(client: TrioClient) -> None:
    info = client.info
    assert info["api_level"] >= 1 and info["protocol"] == 1 and info["pid"] == os.getpid()
    methods = {m["name"]: m for m in info["methods"]}
    assert {"hello", "status", "dispatch", "attach", "steer", "abort", "sessions.list"} <= set(methods)
    assert {"name": "task", "type": "str", "required": True}.items() <= methods["dispatch"]["params"][0].items()
    assert "run.finished" in {e["type"] for e in info["events"]}
    assert {"code": 11, "name": "SESSION_BUSY"}.items() <= next(e for e in info["errors"] if e["code"] == 11).items()


async def test_hello_without_the_catalogue_says_the_rest(client: TrioClient) -> None:
    # What every CLI command asks: the versions and the pid, not ~18 KiB of catalogue.
    info = await client.call("hello", client="roost-cli", protocol=1, catalogue=False)
    assert info["api_level"] == client.info["api_level"] and info["pid"] == os.getpid()
    assert "notices" in info and "home" in info
    assert not {"methods", "events", "errors"} & set(info)


async def test_exec_mode_retries_until_the_check_passes(client: TrioClient, project: Path) -> None:
    (project / "check.sh").write_text('test -f fixed.txt && echo all good || { echo "fixed.txt missing"; exit 3; }\n')
    model = write_script(project, [text("first try")], [bash("touch fixed.txt")], [text("fixed")])
    run = await client.call("dispatch", yes=True, task="fix", model=model, cwd=str(project), mode="exec", attach=True)
    events = await events_until(client, finished(run["run"]))
    checks = [e for e in events if e["type"] == "check.finished"]
    assert [(c["attempt"], c["exit_status"]) for c in checks] == [(1, 3), (2, 0)]
    assert "fixed.txt missing" in checks[0]["output"]
    feedback = [e for e in events if e["type"] == "message.user" and e.get("origin") == "check"]
    assert len(feedback) == 1 and "Check failed (exit status 3)" in feedback[0]["text"]
    assert events[-1]["reason"] == "check_passed"


async def test_exec_mode_out_of_attempts_and_out_of_time(client: TrioClient, project: Path) -> None:
    (project / "check.sh").write_text("echo nope; exit 1\n")
    model = write_script(project, [text("a")], [text("b")])
    run = await client.call(
        "dispatch", yes=True, task="t", model=model, cwd=str(project), mode="exec", attempts=2, attach=True
    )
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "check_failed"
    assert [e["attempt"] for e in events if e["type"] == "check.finished"] == [1, 2]

    slow = write_script(project, [bash("sleep 30")], name="slow.json")
    run = await client.call(
        "dispatch", yes=True, task="t", cwd=str(project), model=slow, mode="exec", time_box=0.5, attach=True
    )
    with trio.fail_after(5):
        events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "timeout"
    assert any(e["type"] == "tool.finished" and e["is_error"] for e in events)


async def test_exec_without_a_check_file_is_one_pass(client: TrioClient, project: Path) -> None:
    run = await client.call("dispatch", yes=True, task="t", model="scripted/demo", cwd=str(project), mode="exec", attach=True)
    events = await events_until(client, finished(run["run"]))
    assert events[-1]["reason"] == "done" and not any(e["type"] == "check.started" for e in events)
    with pytest.raises(RpcError) as error:
        await client.call("dispatch", yes=True, task="t", model="scripted/demo", cwd=str(project), mode="yolo")
    assert error.value.code == ErrorCode.INVALID_PARAMS


async def test_simultaneous_dispatches_give_one_run_and_busy_for_the_rest(daemon: Daemon, project: Path) -> None:
    # Each reply waits a while (a scripted response's delay), so the one run is still in
    # flight when the last of the racers asks: a refusal then can only be SESSION_BUSY.
    model = write_script(project, [text("the one run")], delay=1.5)
    session = None
    async with open_client(daemon.socket_path) as first:
        session = (await first.call("sessions.create", cwd=str(project)))["session"]
    for trial in range(3):
        outcomes: list[Any] = []

        async def dispatch(n: int) -> None:
            async with open_client(daemon.socket_path, client=f"racer{n}") as racer:
                try:
                    outcomes.append(await racer.call("dispatch", yes=True, task=f"go {n}", session=session, model=model))
                except RpcError as exc:
                    outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(dispatch, n)
        runs = [o for o in outcomes if isinstance(o, dict)]
        refused = [o for o in outcomes if isinstance(o, RpcError)]
        assert len(runs) == 1, (trial, outcomes)
        assert len(refused) == 7 and {e.code for e in refused} == {ErrorCode.SESSION_BUSY}
        async with open_client(daemon.socket_path) as watcher:
            await watcher.call("attach", session=session)
            events = await events_until(watcher, finished(runs[0]["run"]))
        assert events[-1]["reason"] == "done"
        # Nothing else ran, and the session is idle again for the next trial.
        assert sum(1 for e in events if e["type"] == "run.started") == trial + 1
        model = write_script(project, *[[text(f"run {i}")] for i in range(trial + 2)], name=f"s{trial}.json", delay=1.5)


async def test_several_edits_of_one_file_in_one_reply_all_land_in_order(client: TrioClient, project: Path) -> None:
    target = project / "notes.txt"
    for trial in range(3):
        target.write_text("one\ntwo\nthree\nfour\n")
        edits = [
            {"type": "tool_use", "name": "edit", "input": {"path": "notes.txt", "old": word, "new": word.upper()}}
            for word in ("one", "two", "three", "four")
        ]
        # A read between the edits runs beside them; the last edit depends on the third.
        reads = {"type": "tool_use", "name": "read", "input": {"path": "notes.txt"}}
        chain = {"type": "tool_use", "name": "edit", "input": {"path": "notes.txt", "old": "THREE", "new": "3"}}
        model = write_script(project, [*edits[:2], reads, *edits[2:], chain], [text("done")], name=f"e{trial}.json")
        run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
        events = await events_until(client, finished(run["run"]))
        assert events[-1]["reason"] == "done"
        results = [e for e in events if e["type"] == "tool.finished"]
        assert all(not r["is_error"] for r in results), results
        assert target.read_text() == "ONE\nTWO\n3\nFOUR\n"
        # The model's next call sees the results in the order it asked.
        reply = [e for e in events if e["type"] == "message.assistant"][0]
        asked = [b["id"] for b in reply["content"] if b["type"] == "tool_use"]
        state = (await client.call("events", session=run["session"]))["events"]
        assert [e["call_id"] for e in state if e["type"] == "tool.started" and e["run"] == run["run"]] == asked
