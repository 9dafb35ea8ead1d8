"""The shell's view of a session: a fold over fixed event maps."""

from __future__ import annotations

from typing import Any

from roost.cli.shell._view import Phase, SessionView


def ev(type: str, seq: int | None = None, ts: float = 100.0, run: str | None = "r1", **fields: Any) -> dict[str, Any]:
    event = {"type": type, "session": "s1", "run": run, "ts": ts, **fields}
    if seq is not None:
        event["seq"] = seq
    return event


RUN = [
    ev("session.created", 1, run=None, cwd="/p"),
    ev("run.started", 2, task="count", model="scripted/demo", agent="default", mode="agent"),
    ev("message.user", 3, text="count", origin="task"),
    ev("step.started", 4, ts=101.0, step=1),
    ev("text.delta", text="Counting"),
    ev("message.assistant", 5, ts=102.0, content=[], latency=1.5, usage={}),
    ev("tool.started", 6, ts=102.0, call_id="t1", name="bash", input={"command": "ls"}),
]


def fold(events: list[dict[str, Any]]) -> SessionView:
    view = SessionView("s1", "/p")
    for event in events:
        view.apply(event)
    return view


def test_a_run_goes_from_thinking_to_running_a_tool_to_idle() -> None:
    view = fold(RUN[:4])
    assert (view.phase, view.step_started, view.model, view.agent, view.mode) == (
        Phase.THINKING, 101.0, "scripted/demo", "default", "agent")
    view = fold(RUN)
    assert view.phase is Phase.TOOL
    assert view.tools["t1"].name == "bash" and view.tools["t1"].started == 102.0
    view.apply(ev("tool.finished", 7, ts=103.0, call_id="t1", name="bash", result="a", is_error=False, latency=0.5))
    view.apply(ev("step.finished", 8, usage={"input_tokens": 10, "output_tokens": 5}, cost=0.01, latency=2.0))
    assert view.phase is Phase.THINKING
    view.apply(ev("run.finished", 9, reason="done", usage={"input_tokens": 10, "output_tokens": 5},
                  duration=3.0, turns=1, cost=0.01))
    assert view.phase is Phase.IDLE and view.run is None
    stats = view.last_run
    assert stats is not None
    assert (stats.run, stats.reason, stats.duration, stats.input_tokens, stats.cost) == ("r1", "done", 3.0, 10, 0.01)
    assert (view.input_tokens, view.output_tokens, view.cost, view.last_seq) == (10, 5, 0.01, 9)


def test_repeats_are_ignored_and_live_events_do_not_move_last_seq() -> None:
    view = fold(RUN)
    assert view.last_seq == 6
    assert view.apply(ev("tool.started", 6, call_id="t9", name="x", input={})) is False
    assert "t9" not in view.tools
    assert view.apply(ev("text.delta", text="more")) is True
    assert view.last_seq == 6


def test_an_aborted_step_counts_in_the_totals_through_run_finished() -> None:
    view = fold(RUN)
    view.apply(ev("run.finished", 7, reason="aborted", usage={"input_tokens": 30, "output_tokens": 6},
                  cost=0.002, duration=1.0, turns=1))
    assert (view.input_tokens, view.output_tokens, view.cost) == (30, 6, 0.002)


def test_requests_are_open_until_answered_or_until_their_run_ends() -> None:
    view = fold(RUN)
    view.apply(ev("permission.requested", 7, call_id="t1", tool="bash", input={"command": "rm x"},
                  reason="asks", session_rules=["bash(rm *)"], deadline=200.0))
    view.apply(ev("human.asked", 8, call_id="q1", question="Which?", choices=["a", "b"]))
    assert view.phase is Phase.WAITING
    first = view.first_request()
    assert first is not None and (first.kind, first.tool, first.session_rules, first.deadline) == (
        "permission", "bash", ("bash(rm *)",), 200.0)
    question = view.first_request("question")
    assert question is not None and question.choices == ("a", "b")
    view.apply(ev("permission.resolved", 9, call_id="t1", decision="approve", scope="once", client="shell#2"))
    assert list(view.pending) == ["q1"]
    view.apply(ev("run.finished", 10, reason="aborted", usage={}, duration=1.0))
    assert view.pending == {} and view.phase is Phase.IDLE


def test_sub_agent_events_add_tools_and_tokens_but_not_run_boundaries() -> None:
    view = fold(RUN)
    path = ["t1"]
    view.apply(ev("run.started", 7, path=path, task="sub", model="m2", agent="helper", mode="agent"))
    view.apply(ev("step.started", 8, ts=150.0, path=path))
    view.apply(ev("tool.started", 9, call_id="t2", name="read", input={"path": "a"}, path=path))
    view.apply(ev("step.finished", 10, usage={"input_tokens": 4, "output_tokens": 2}, path=path))
    assert view.run is not None and view.run.run == "r1" and view.model == "scripted/demo"
    assert view.step_started == 101.0
    assert view.tools["t2"].depth == 1
    assert (view.input_tokens, view.run.input_tokens) == (4, 4)
    view.apply(ev("run.finished", 11, path=path, reason="done"))
    assert view.run is not None


def test_the_checklist_is_the_last_one_the_sessions_agent_wrote() -> None:
    todos = [{"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]
    view = fold(RUN)
    view.apply(ev("tool.finished", 7, call_id="t1", name="todo", result="...", meta={"todos": todos}))
    assert view.todos == todos
    # a sub-agent's checklist, or a failed call, leaves it as it was
    view.apply(ev("tool.finished", 8, call_id="t2", name="todo", result="...", meta={"todos": []}, path=["t1"]))
    view.apply(ev("tool.finished", 9, call_id="t3", name="todo", result="bad", is_error=True))
    assert view.todos == todos
    view.apply(ev("run.finished", 10, reason="done"))
    assert view.todos == todos  # still shown once the run is over
    view.apply(ev("run.started", 11, run="r2", task="next", model="m", agent="default", mode="agent"))
    assert view.todos == []


def test_the_seq_of_each_task_is_kept_for_rewind() -> None:
    view = fold(RUN)
    view.apply(ev("run.finished", 7, reason="done", usage={}))
    # A sub-agent's run and a compaction are not tasks of the session.
    view.apply(ev("run.started", 8, run="r2", task="sub", mode="agent", path=["t9"]))
    view.apply(ev("run.started", 9, run="r3", task="", mode="compact"))
    view.apply(ev("run.finished", 10, run="r3", reason="done", usage={}))
    view.apply(ev("run.started", 11, run="r4", task="again", mode="agent"))
    assert view.task_seqs == [2, 11]


def test_background_commands_are_counted_until_they_end_or_their_run_does() -> None:
    from roost.cli.shell import _display as r

    def finished(seq: int, call_id: str, name: str, meta: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return ev("tool.finished", seq, call_id=call_id, name=name, result="", is_error=False, meta=meta, **kw)

    view = fold(RUN[:4])
    view.apply(finished(5, "t1", "bash", {"shell": "bg1", "background": True}))
    view.apply(finished(6, "t2", "bash", {"shell": "bg2", "background": True}))
    view.apply(finished(7, "s1", "bash", {"shell": "bg1", "background": True}, path=["t3"]))  # a sub-agent's
    assert len(view.background) == 3
    assert "· 3 in background" in r.plain(r.toolbar(view, 101.0, connected=True))
    view.apply(finished(8, "t4", "bash_output", {"shell": "bg2", "running": True, "bytes": 3}))
    assert len(view.background) == 3
    view.apply(finished(9, "t7", "bash_output", {"shell": "bg2", "running": False, "exit_status": 0, "bytes": 0}))
    view.apply(finished(10, "t5", "kill_shell", {"shell": "bg1", "exit_status": -9}))
    assert view.background == {(("t3",), "bg1")}
    view.apply(finished(11, "t3", "task", {}))  # the sub-agent ended: its commands with it
    assert not view.background and "background" not in r.plain(r.toolbar(view, 101.0, connected=True))
    view.apply(finished(12, "t6", "bash", {"shell": "bg3", "background": True}))
    view.apply(ev("run.finished", 13, reason="done", usage={}, duration=1.0, turns=1))
    assert not view.background
