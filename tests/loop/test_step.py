"""The rules of roost.loop.step, one by one (see the docstring of roost/loop/_step.py)."""

from __future__ import annotations

import pytest

from roost.loop import (
    Abort,
    CallModel,
    CancelRun,
    CheckFinished,
    CreateSession,
    FinishRun,
    Interrupted,
    InvalidInput,
    ModelFailed,
    ModelFinished,
    Phase,
    RunCheck,
    RunFailed,
    RunSettings,
    RunTool,
    SessionState,
    StartClock,
    Steer,
    Submit,
    TimeUp,
    ToolFinished,
    Transition,
    fold,
    step,
)

from ._driver import MODEL, SESSION, TOOLS, Driver, calls, check_history, only, text, tool_use, types


def user(*blocks):
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def result(call_id, content, is_error=False):
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}


# -- sessions and runs starting -----------------------------------------------------------------


def test_create_session_records_cwd_and_time():
    d = Driver(cwd="/home/me/proj", ts=50.0)
    [event] = d.log
    assert (event.type, event.session, event.run, event.ts) == ("session.created", SESSION, None, 50.0)
    assert event.data == {"cwd": "/home/me/proj"}
    assert (d.state.cwd, d.state.created, d.state.phase, d.state.events) == ("/home/me/proj", 50.0, Phase.IDLE, 1)


def test_submit_starts_a_run_and_the_first_model_call():
    d = Driver()
    t = d.submit("fix the test", run="run-1", tools=("read", "bash"), agent="coder", mode="full")
    assert types(t) == ["run.started", "message.user", "step.started"]
    started, message, step_started = t.events
    assert started.run == message.run == step_started.run == "run-1"
    assert started.data == {
        "task": "fix the test",
        "model": MODEL,
        "agent": "coder",
        "mode": "full",
        "max_turns": 12,
        "tools": ["read", "bash"],
        "permissions": {"rules": [], "yes": True, "home": ""},
        "read_only": ["read"],
    }
    assert message.data == {"text": "fix the test", "origin": "task"}
    assert step_started.data == {"step": 1}
    history = (user(text("fix the test")),)
    assert t.effects == (CallModel("run-1", 1, MODEL, history, ("read", "bash")),)
    assert t.state.messages == history
    run = t.state.run
    assert (run.id, run.phase, run.turns, run.settings.max_turns, run.settings.agent, run.settings.mode) == (
        "run-1", Phase.MODEL, 1, 12, "coder", "full",
    )
    assert t.state.phase is Phase.MODEL


def test_reply_with_tool_use_starts_each_tool():
    d = Driver()
    d.submit()
    t = d.reply(
        text("let me look"),
        tool_use("c1", "read", {"path": "a.py"}),
        tool_use("c2", "bash", {"command": "ls"}),
    )
    assert types(t) == ["message.assistant", "tool.started", "tool.started"]
    assert [e.data for e in t.events[1:]] == [
        {"call_id": "c1", "name": "read", "input": {"path": "a.py"}, "cleared": True},
        {"call_id": "c2", "name": "bash", "input": {"command": "ls"}, "cleared": True},
    ]
    assert t.effects == (
        RunTool("r1", "c1", "read", {"path": "a.py"}),
        RunTool("r1", "c2", "bash", {"command": "ls"}),
    )
    assert t.state.phase is Phase.TOOLS
    assert t.state.run.pending == ("c1", "c2")
    assert t.events[0].data["stop_reason"] == "tool_use"
    assert t.state.messages[-1] == assistant(
        text("let me look"),
        tool_use("c1", "read", {"path": "a.py"}),
        tool_use("c2", "bash", {"command": "ls"}),
    )


def test_tool_results_then_the_next_model_call():
    d = Driver()
    d.submit("task")
    d.reply(tool_use("c1", "read"), tool_use("c2", "bash"))
    # Results may come back in any order; the step waits for all of them.
    first = d.finish_tool("c2", "two", latency=0.3, meta={"exit": 0})
    assert types(first) == ["tool.finished"]
    assert first.events[0].data == {
        "call_id": "c2", "name": "bash", "result": "two", "is_error": False,
        "latency": 0.3, "size": 3, "meta": {"exit": 0},
    }
    assert first.effects == ()
    assert first.state.phase is Phase.TOOLS
    assert first.state.run.pending == ("c1",)

    last = d.finish_tool("c1", "one", is_error=True)
    assert types(last) == ["tool.finished", "step.finished", "step.started"]
    assert last.events[0].data["is_error"] is True
    assert only(last, "step.finished").data["step"] == 1
    assert only(last, "step.started").data == {"step": 2}
    [call] = last.effects
    assert call == CallModel(
        "r1",
        2,
        MODEL,
        (
            user(text("task")),
            assistant(tool_use("c1", "read"), tool_use("c2", "bash")),
            # In the order the reply made the calls, whatever order they finished in.
            user(result("c1", "one", is_error=True), result("c2", "two")),
        ),
        TOOLS,
    )
    assert last.state.phase is Phase.MODEL
    assert last.state.run.turns == 2


def test_reply_without_tools_ends_the_run_done():
    d = Driver()
    d.submit(run="r9")
    t = d.reply(text("all done"))
    assert types(t) == ["message.assistant", "step.finished", "run.finished"]
    assert t.effects == (FinishRun("r9", "done"),)
    finished = only(t, "run.finished")
    assert finished.run == "r9"
    assert (finished.data["reason"], finished.data["text"], finished.data["turns"]) == ("done", "all done", 1)
    assert "error" not in finished.data
    assert t.state.phase is Phase.IDLE
    assert t.state.run is None
    assert (t.state.last_status, t.state.last_run) == ("done", "r9")


def test_a_second_run_sees_the_first_runs_history():
    d = Driver()
    d.submit("first")
    d.reply(text("one"))
    t = d.submit("second")
    assert t.effects[0].messages == (user(text("first")), assistant(text("one")), user(text("second")))
    assert t.state.run.id == "r2"
    assert t.state.run.turns == 1


# -- max_turns ----------------------------------------------------------------------------------


def run_tool_turns(d: Driver, n: int) -> list:
    """Answer ``n`` model calls with one tool call each; return every transition."""
    out = []
    for _ in range(n):
        out.append(d.use_tools("read"))
        out.append(d.finish_all_tools())
    return out


def test_max_turns_defaults_to_12():
    d = Driver()
    first = d.submit()
    assert d.state.run.settings.max_turns == 12
    steps = [first] + run_tool_turns(d, 12)
    model_calls = [c for t in steps for c in calls(t)]
    assert [c.step for c in model_calls] == list(range(1, 13))
    last = steps[-1]
    assert types(last) == ["tool.finished", "step.finished", "run.finished"]
    assert last.effects == (FinishRun("r1", "max_turns"),)
    assert only(last, "run.finished").data["turns"] == 12
    assert d.state.last_status == "max_turns"


@pytest.mark.parametrize("max_turns", [1, 3])
def test_custom_max_turns(max_turns):
    d = Driver()
    first = d.submit(max_turns=max_turns)
    assert only(first, "run.started").data["max_turns"] == max_turns
    steps = run_tool_turns(d, max_turns)
    # One model call per turn: the first from the submit, the rest after each tool step.
    assert sum(len(calls(t)) for t in steps) == max_turns - 1
    assert steps[-1].effects == (FinishRun("r1", "max_turns"),)
    assert only(steps[-1], "run.finished").data["turns"] == max_turns


def test_a_final_reply_on_the_last_turn_is_done_not_max_turns():
    d = Driver()
    d.submit(max_turns=2)
    run_tool_turns(d, 1)
    t = d.reply(text("finished in time"))
    assert t.effects == (FinishRun("r1", "done"),)


def test_queued_steering_on_the_last_turn_ends_max_turns():
    d = Driver()
    d.submit(max_turns=1)
    d.steer("one more thing")
    t = d.reply(text("done"))
    assert t.effects == (FinishRun("r1", "max_turns"),)
    assert calls(t) == []


# -- max_tokens ---------------------------------------------------------------------------------


def test_max_tokens_answers_cut_off_tool_calls_with_errors_and_ends_the_run():
    d = Driver()
    d.submit("task")
    t = d.reply(text("I will"), tool_use("c1", "read"), tool_use("c2", "bash"), stop_reason="max_tokens")
    assert types(t) == [
        "message.assistant", "tool.started", "tool.started", "tool.finished", "tool.finished",
        "step.finished", "run.finished",
    ]
    assert not any(isinstance(e, RunTool) for e in t.effects)
    assert t.effects == (FinishRun("r1", "max_tokens"),)
    for event, call_id, name in zip(t.events[3:5], ["c1", "c2"], ["read", "bash"]):
        assert (event.data["call_id"], event.data["name"], event.data["is_error"]) == (call_id, name, True)
        assert "max_tokens" in event.data["result"]
    # The history stays paired, so the next run can send it to the model as is.
    check_history(t.state.messages, complete=True)
    assert [b["tool_use_id"] for b in t.state.messages[-1]["content"]] == ["c1", "c2"]
    assert only(t, "run.finished").data["reason"] == "max_tokens"
    nxt = d.submit("go on")
    assert nxt.effects[0].messages[-1]["content"][-1] == text("go on")


def test_max_tokens_without_tool_calls_ends_the_run():
    d = Driver()
    d.submit()
    t = d.reply(text("and then"), stop_reason="max_tokens")
    assert types(t) == ["message.assistant", "step.finished", "run.finished"]
    assert t.effects == (FinishRun("r1", "max_tokens"),)
    assert only(t, "run.finished").data["text"] == "and then"


# -- model failure ------------------------------------------------------------------------------


def test_model_failed_emits_error_and_ends_the_run_error():
    d = Driver()
    d.submit()
    t = d.fail("529 overloaded")
    assert types(t) == ["error", "step.finished", "run.finished"]
    assert t.events[0].data == {"message": "529 overloaded"}
    finished = only(t, "run.finished")
    assert (finished.data["reason"], finished.data["error"]) == ("error", "529 overloaded")
    assert t.effects == (FinishRun("r1", "error"),)
    assert d.state.last_status == "error"
    assert d.state.phase is Phase.IDLE


def test_a_failed_model_call_reports_no_usage_for_its_step():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1"), usage={"input_tokens": 100, "output_tokens": 7})
    d.finish_all_tools()
    t = d.fail()
    # Step 2 produced no reply: its usage is empty, not step 1's again.
    assert only(t, "step.finished").data["step"] == 2
    assert only(t, "step.finished").data["usage"] == {}
    assert only(t, "run.finished").data["usage"] == {"input_tokens": 100, "output_tokens": 7}


# -- steering -----------------------------------------------------------------------------------


def test_steer_while_the_model_runs_goes_into_the_next_model_call():
    d = Driver()
    d.submit("task")
    s = d.steer("use pytest, not unittest")
    assert types(s) == ["steer.queued"]
    assert s.events[0].data == {"text": "use pytest, not unittest"}
    assert s.effects == ()
    assert s.state.run.steering == ("use pytest, not unittest",)
    assert s.state.messages == (user(text("task")),)  # not in the history yet

    d.reply(tool_use("c1"))
    t = d.finish_tool("c1", "out")
    assert types(t) == ["tool.finished", "step.finished", "message.user", "step.started"]
    assert only(t, "message.user").data == {"text": "use pytest, not unittest", "origin": "steer"}
    # The steering shares the user message with the tool results, after them.
    assert t.effects[0].messages[-1] == user(result("c1", "out"), text("use pytest, not unittest"))
    assert t.state.run.steering == ()


def test_steer_during_tools_waits_for_the_last_result():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1"), tool_use("c2"))
    d.finish_tool("c1")
    d.steer("first")
    d.steer("second")
    t = d.finish_tool("c2")
    assert [e.data["text"] for e in t.events if e.type == "message.user"] == ["first", "second"]
    assert [b.get("text") for b in t.effects[0].messages[-1]["content"]] == [None, None, "first", "second"]


def test_a_reply_without_tools_but_with_queued_steering_continues():
    d = Driver()
    d.submit("task")
    d.steer("also update the docs")
    t = d.reply(text("tests fixed"))
    assert types(t) == ["message.assistant", "step.finished", "message.user", "step.started"]
    [call] = t.effects
    assert call.step == 2
    assert call.messages == (
        user(text("task")),
        assistant(text("tests fixed")),
        user(text("also update the docs")),
    )
    assert d.state.phase is Phase.MODEL
    done = d.reply(text("docs updated"))
    assert done.effects == (FinishRun("r1", "done"),)


# -- abort --------------------------------------------------------------------------------------


def test_abort_answers_pending_tools_and_cancels_the_run():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1", "read"), tool_use("c2", "bash"), tool_use("c3", "bash"))
    d.finish_tool("c2", "fine")
    t = d.abort(reason="user pressed Ctrl-C")
    assert types(t) == ["tool.finished", "tool.finished", "run.finished"]
    assert [(e.data["call_id"], e.data["name"], e.data["is_error"]) for e in t.events[:2]] == [
        ("c1", "read", True),
        ("c3", "bash", True),
    ]
    assert all(e.data["result"] == "aborted: user pressed Ctrl-C" for e in t.events[:2])
    assert t.effects == (CancelRun("r1"), FinishRun("r1", "aborted"))
    finished = only(t, "run.finished")
    assert (finished.data["reason"], finished.data["error"]) == ("aborted", "user pressed Ctrl-C")
    assert d.state.phase is Phase.IDLE
    check_history(d.state.messages, complete=True)


def test_an_aborted_call_takes_the_time_it_ran():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1", "read"))
    started = next(e.ts for e in d.log if e.type == "tool.started" and e.data["call_id"] == "c1")
    d.tick(4.5)
    t = d.abort(reason="Ctrl-C")
    assert only(t, "tool.finished").data["latency"] == only(t, "tool.finished").ts - started > 4.5


def test_abort_while_the_model_runs():
    d = Driver()
    d.submit()
    t = d.abort()
    assert types(t) == ["run.finished"]
    assert t.effects == (CancelRun("r1"), FinishRun("r1", "aborted"))
    assert d.state.last_status == "aborted"
    # The model's late answer is no longer wanted.
    d.reject(ModelFinished((text("late"),), "end_turn", d.tick()))


def test_run_failed_ends_the_run_error_in_any_phase():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1", "read"), tool_use("c2", "bash"))
    d.finish_tool("c1", "fine")
    t = d.feed(RunFailed("the events could not be stored", d.tick()))
    assert types(t) == ["error", "tool.finished", "run.finished"]
    assert only(t, "tool.finished").data["result"] == "not finished: the events could not be stored"
    assert t.effects == (CancelRun("r1"), FinishRun("r1", "error"))
    finished = only(t, "run.finished")
    assert (finished.data["reason"], finished.data["error"]) == ("error", "the events could not be stored")
    assert d.state.phase is Phase.IDLE
    check_history(d.state.messages, complete=True)
    waiting = Driver()
    waiting.submit()
    waiting.reply(tool_use("c1", "ask_human", {"question": "which?"}))
    t = waiting.feed(RunFailed("full", waiting.tick()))
    assert types(t) == ["error", "human.answered", "tool.finished", "run.finished"]
    assert waiting.state.phase is Phase.IDLE and not waiting.state.run


# -- interrupted (daemon restart) ---------------------------------------------------------------


def test_interrupted_answers_unfinished_tools_and_never_reruns_them():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1", "bash", {"command": "make"}), tool_use("c2", "read"))
    d.finish_tool("c2", "read ok")
    # The daemon died here. A new one folds the stored log and tells the loop.
    recovered = fold(d.stored())
    assert recovered.phase is Phase.TOOLS
    assert recovered.run.pending == ("c1",)
    t = step(recovered, Interrupted(d.tick()))
    assert types(t) == ["tool.finished", "run.finished"]
    assert t.events[0].data["call_id"] == "c1"
    assert t.events[0].data["name"] == "bash"
    assert t.events[0].data["is_error"] is True
    assert t.events[0].data["result"].startswith("interrupted")
    assert t.effects == (FinishRun("r1", "error"),)
    finished = only(t, "run.finished")
    assert finished.data["reason"] == "error"
    assert "interrupted" in finished.data["error"]
    assert t.state.phase is Phase.IDLE
    check_history(t.state.messages, complete=True)
    assert t.state.messages[-1] == user(result("c1", t.events[0].data["result"], True), result("c2", "read ok"))


def test_interrupted_while_the_model_ran():
    d = Driver()
    d.submit()
    t = d.interrupted()
    assert types(t) == ["run.finished"]
    assert t.effects == (FinishRun("r1", "error"),)


# -- run.finished totals, request ids -----------------------------------------------------------


def test_run_finished_carries_reason_text_turns_usage_and_duration():
    d = Driver(ts=0.0)
    d.feed(Submit("r1", "task", ts=100.0, settings=RunSettings(MODEL, tools=("read",))))
    d.feed(ModelFinished((text("looking"), tool_use("c1")), "tool_use", 103.0, {"input_tokens": 10, "output_tokens": 4}))
    d.feed(ToolFinished("c1", "ok", 104.5))
    t = d.feed(
        ModelFinished(
            (text("the answer"),),
            "end_turn",
            110.25,
            # Non-integer usage fields are kept in the message but not summed.
            {"input_tokens": 20, "output_tokens": 6, "cache_read_input_tokens": 3, "service_tier": "std"},
        )
    )
    finished = only(t, "run.finished")
    assert finished.ts == 110.25
    assert finished.data == {
        "reason": "done",
        "text": "the answer",
        "turns": 2,
        "usage": {"input_tokens": 30, "output_tokens": 10, "cache_read_input_tokens": 3},
        "duration": 10.25,
    }
    step_finished = only(t, "step.finished")
    assert step_finished.data == {
        "step": 2,
        "usage": {"input_tokens": 20, "output_tokens": 6, "cache_read_input_tokens": 3},
        "latency": 110.25 - 104.5,
    }


def test_request_id_is_remembered():
    d = Driver()
    d.submit(request_id="req-a")
    assert d.state.request_ids == {"req-a": "r1"}
    assert d.log[-3].data["request_id"] == "req-a"
    d.reply(text("ok"))
    d.submit()  # no request id: nothing recorded
    assert "request_id" not in d.log[-3].data
    d.abort()
    d.submit(request_id="req-c")
    assert d.state.request_ids == {"req-a": "r1", "req-c": "r3"}
    assert fold(d.stored()).request_ids == {"req-a": "r1", "req-c": "r3"}


# -- illegal inputs -----------------------------------------------------------------------------


def idle():
    return Driver()


def in_model():
    d = Driver()
    d.submit()
    return d


def in_tools():
    d = in_model()
    d.reply(tool_use("c1"), tool_use("c2"))
    d.finish_tool("c1")
    return d


def after_a_run():
    d = in_model()
    d.reply(text("done"))
    return d


ILLEGAL = [
    ("submit while the model runs", in_model, lambda d: Submit("r2", "again", d.tick(), RunSettings(MODEL))),
    ("submit while tools run", in_tools, lambda d: Submit("r2", "again", d.tick(), RunSettings(MODEL))),
    ("tool result for an unknown call", in_tools, lambda d: ToolFinished("nope", "x", d.tick())),
    ("tool result twice", in_tools, lambda d: ToolFinished("c1", "x", d.tick())),
    ("tool result while the model runs", in_model, lambda d: ToolFinished("c1", "x", d.tick())),
    ("tool result while idle", idle, lambda d: ToolFinished("c1", "x", d.tick())),
    ("model reply while idle", idle, lambda d: ModelFinished((text("hi"),), "end_turn", d.tick())),
    ("model reply after the run", after_a_run, lambda d: ModelFinished((text("hi"),), "end_turn", d.tick())),
    ("model reply while tools run", in_tools, lambda d: ModelFinished((text("hi"),), "end_turn", d.tick())),
    ("model failure while idle", idle, lambda d: ModelFailed("boom", d.tick())),
    ("model failure while tools run", in_tools, lambda d: ModelFailed("boom", d.tick())),
    ("steer while idle", idle, lambda d: Steer("hello", d.tick())),
    ("steer after the run", after_a_run, lambda d: Steer("hello", d.tick())),
    ("empty steer", in_model, lambda d: Steer("", d.tick())),
    ("blank steer", in_tools, lambda d: Steer(" \n\t", d.tick())),
    ("abort while idle", idle, lambda d: Abort(d.tick())),
    ("abort after the run", after_a_run, lambda d: Abort(d.tick())),
    ("interrupted while idle", idle, lambda d: Interrupted(d.tick())),
    ("run failed while idle", idle, lambda d: RunFailed("full", d.tick())),
    ("max_turns 0", idle, lambda d: Submit("r1", "task", d.tick(), RunSettings(MODEL, max_turns=0))),
    ("max_turns negative", after_a_run, lambda d: Submit("r2", "task", d.tick(), RunSettings(MODEL, max_turns=-3))),
    ("create an existing session", after_a_run, lambda d: CreateSession(SESSION, "/elsewhere", d.tick())),
]


@pytest.mark.parametrize("setup, make", [(s, m) for _, s, m in ILLEGAL], ids=[name for name, _, _ in ILLEGAL])
def test_illegal_input_raises_and_changes_nothing(setup, make):
    d = setup()
    log = list(d.log)
    error = d.reject(make(d))
    assert d.log == log
    # The message names the input and the phase.
    assert type(error.input).__name__ in str(error)
    assert d.state.phase.value in str(error)


def test_the_session_goes_on_after_an_illegal_input():
    d = in_tools()
    d.reject(ToolFinished("nope", "x", d.tick()))
    d.reject(Submit("r2", "again", d.tick(), RunSettings(MODEL)))
    t = d.finish_tool("c2")
    assert calls(t) and calls(t)[0].step == 2


def test_submit_works_on_a_session_without_session_created():
    # A state built by hand (or a log whose first event was lost) still runs.
    t = step(SessionState("bare"), Submit("r1", "task", 5.0, RunSettings(MODEL)))
    assert t.state.phase is Phase.MODEL
    assert all(e.session == "bare" for e in t.events)


def test_state_is_not_shared_with_the_input():
    # The conductor may reuse its objects; the history must not change with them.
    d = in_model()
    block = tool_use("c1", "read", {"path": "a"})
    d.feed(ModelFinished((block,), "tool_use", d.tick()))
    block["id"] = "changed"
    assert d.state.messages[-1]["content"][0]["id"] == "c1"
    assert d.log[-2].data["content"][0]["id"] == "c1"
    assert d.state == fold(d.log)


@pytest.mark.parametrize(
    "content",
    [
        ({"type": "tool_use", "name": "bash", "input": {}},),
        ({"type": "tool_use", "id": "c1", "input": {}},),
        ({"type": "tool_use", "id": "c1", "name": "bash"}, {"type": "tool_use", "id": "c1", "name": "read"}),
        ({"type": "tool_use", "id": "c1", "name": "bash", "input": "ls"},),
        ({"text": "no type"},),
    ],
)
def test_a_malformed_reply_ends_the_run_with_an_error_and_is_not_stored(content: tuple) -> None:
    state = step(SessionState("s"), CreateSession("s", "/p", 0.0)).state
    state = step(state, Submit("r", "task", 1.0, RunSettings("scripted/x"))).state
    t = step(state, ModelFinished(content, "tool_use", 2.0))
    types = [e.type for e in t.events]
    assert types == ["error", "step.finished", "run.finished"]
    assert "malformed" in t.events[0].data["message"]
    assert t.events[-1].data["reason"] == "error"
    assert t.state.phase is Phase.IDLE
    assert all(m["role"] != "assistant" for m in t.state.messages)


def test_costs_come_from_the_price_given_at_submit() -> None:
    price = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    state = step(SessionState("s"), CreateSession("s", "/p", 0.0)).state
    started = step(state, Submit("r", "task", 1.0, RunSettings("anthropic/m", price=price)))
    assert started.events[0].data["price"] == price
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 10_000}
    t = step(started.state, ModelFinished(({"type": "text", "text": "hi"},), "end_turn", 2.0, usage))
    step_cost = (1000 * 3.0 + 100 * 15.0 + 10_000 * 0.3) / 1_000_000
    assert t.events[-2].type == "step.finished" and t.events[-2].data["cost"] == pytest.approx(step_cost)
    assert t.events[-1].data["cost"] == pytest.approx(step_cost)
    assert fold(list(started.events) + list(t.events), state) == t.state


def test_no_cost_without_a_price() -> None:
    state = step(SessionState("s"), CreateSession("s", "/p", 0.0)).state
    state = step(state, Submit("r", "task", 1.0, RunSettings("scripted/x"))).state
    t = step(state, ModelFinished(({"type": "text", "text": "hi"},), "end_turn", 2.0, {"input_tokens": 5}))
    assert all("cost" not in e.data for e in t.events)


def test_abort_during_a_reply_keeps_what_had_arrived() -> None:
    state = step(SessionState("s"), CreateSession("s", "/p", 0.0)).state
    state = step(state, Submit("r", "task", 1.0, RunSettings("scripted/x"))).state
    t = step(state, Abort(2.0, "stop", ({"type": "text", "text": "half an ans"},)))
    assert [e.type for e in t.events] == ["message.assistant", "run.finished"]
    assert t.events[0].data["partial"] is True and t.events[0].data["stop_reason"] == "aborted"
    assert t.state.messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "half an ans"}]}
    assert t.events[-1].data["text"] == "half an ans"
    # Nothing had arrived: nothing is stored for the reply.
    bare = step(state, Abort(2.0, "stop"))
    assert [e.type for e in bare.events] == ["run.finished"]


def test_a_refusal_ends_the_run_with_an_error_that_says_so() -> None:
    state = step(SessionState("s"), CreateSession("s", "/p", 0.0)).state
    state = step(state, Submit("r", "task", 1.0, RunSettings("anthropic/m"))).state
    t = step(state, ModelFinished(({"type": "text", "text": "I can't help with that."},), "refusal", 2.0))
    assert [e.type for e in t.events] == ["message.assistant", "step.finished", "run.finished"]
    assert t.events[-1].data["reason"] == "error" and "refusal" in t.events[-1].data["error"]
    assert t.events[-1].data["text"] == "I can't help with that."
    # stop_sequence is an ordinary end of turn.
    done = step(state, ModelFinished(({"type": "text", "text": "x"},), "stop_sequence", 2.0))
    assert done.events[-1].data["reason"] == "done"


def _exec_run(attempts: int = 2, max_turns: int = 12) -> SessionState:
    state = step(SessionState("s"), CreateSession("s", "/p", 0.0)).state
    t = step(state, Submit("r", "fix it", 10.0, RunSettings("scripted/x", mode="exec", max_turns=max_turns, check="check.sh", attempts=attempts, time_box=60.0, tools=("bash",))))
    assert t.effects[0] == StartClock("r", 70.0)
    assert t.events[0].data["deadline"] == 70.0
    return t.state


def _reply_done(state: SessionState, ts: float) -> Transition:
    return step(state, ModelFinished(({"type": "text", "text": "done"},), "end_turn", ts))


def test_exec_runs_the_check_after_each_attempt_and_passes() -> None:
    t = _reply_done(_exec_run(), 11.0)
    assert [e.type for e in t.events][-1] == "check.started"
    assert t.effects == (RunCheck("r", 1, "check.sh"),) and t.state.phase is Phase.CHECK
    failed = step(t.state, CheckFinished(1, "FAILED test_x", 12.0, 0.5))
    assert [e.type for e in failed.events] == ["check.finished", "message.user", "step.started"]
    assert failed.events[0].data == {"attempt": 1, "exit_status": 1, "duration": 0.5, "output": "FAILED test_x"}
    assert "Check failed (exit status 1)" in failed.events[1].data["text"]
    assert failed.events[1].data["origin"] == "check"
    again = _reply_done(failed.state, 13.0)
    assert again.effects == (RunCheck("r", 2, "check.sh"),)
    passed = step(again.state, CheckFinished(0, "ok", 14.0))
    assert passed.events[-1].data["reason"] == "check_passed"
    assert passed.effects[-1] == FinishRun("r", "check_passed")


def test_exec_out_of_attempts_is_check_failed_and_turns_count_per_attempt() -> None:
    state = _exec_run(attempts=2, max_turns=1)
    call = {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "x"}}
    t = step(state, ModelFinished((call,), "tool_use", 11.0))
    t = step(t.state, ToolFinished("c1", "", 12.0))
    # The attempt's one turn is used: the check runs.
    assert t.effects == (RunCheck("r", 1, "check.sh"),)
    t = step(t.state, CheckFinished(2, "no", 13.0))
    assert t.effects[-1] == CallModel("r", 2, "scripted/x", t.state.messages, ("bash",))
    t = _reply_done(t.state, 14.0)
    t = step(t.state, CheckFinished(2, "still no", 15.0))
    assert t.events[-1].data["reason"] == "check_failed"


def test_exec_time_up_ends_the_run_and_cancels_its_work() -> None:
    state = _exec_run()
    call = {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "sleep 99"}}
    t = step(state, ModelFinished((call,), "tool_use", 11.0))
    up = step(t.state, TimeUp(70.0))
    assert [e.type for e in up.events] == ["tool.finished", "run.finished"]
    assert up.events[-1].data["reason"] == "timeout"
    assert CancelRun("r") in up.effects
    with pytest.raises(InvalidInput):
        step(up.state, TimeUp(71.0))


def test_exec_without_a_check_is_one_pass() -> None:
    state = step(SessionState("s"), CreateSession("s", "/p", 0.0)).state
    state = step(state, Submit("r", "t", 1.0, RunSettings("scripted/x", mode="exec"))).state
    assert _reply_done(state, 2.0).events[-1].data["reason"] == "done"
