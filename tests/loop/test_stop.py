"""The graceful stop: ``Abort(after_step=True)`` lets the step in flight finish, then ends
the run ``aborted`` (see the rules in roost/loop/_step.py)."""

from __future__ import annotations

from roost.loop import Abort, CancelRun, CheckFinished, FinishRun, Policy, RunTool, step

from ._driver import Driver, calls, only, text, tool_use, types
from .test_step import _exec_run, _reply_done


def stop(d: Driver, reason: str = "stopped by the user after the step"):
    return d.feed(Abort(d.tick(), reason, after_step=True))


def test_a_tool_in_flight_finishes_and_its_result_is_stored_then_the_run_ends():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1", "bash", {"command": "sleep 1"}), tool_use("c2", "read"))
    t = stop(d)
    assert types(t) == ["run.stopping"] and t.effects == ()
    assert d.state.run is not None and d.state.run.stopping == "stopped by the user after the step"
    d.finish_tool("c2", "contents")
    t = d.finish_tool("c1", "slept")
    assert types(t) == ["tool.finished", "step.finished", "run.finished"]
    assert only(t, "tool.finished").data["result"] == "slept"
    finished = only(t, "run.finished")
    assert (finished.data["reason"], finished.data["error"]) == ("aborted", "stopped by the user after the step")
    # Nothing was cut and no further model call was made.
    assert calls(t) == [] and t.effects == (FinishRun("r1", "aborted"),)
    assert [b["content"] for b in d.state.messages[-1]["content"]] == ["slept", "contents"]


def test_asked_while_the_model_replies_the_reply_and_its_calls_finish():
    d = Driver()
    d.submit(policy=Policy())  # agent mode: bash would ask
    stop(d)
    t = d.reply(text("on it"), tool_use("c1", "read"), tool_use("c2", "bash", {"command": "make"}),
                tool_use("c3", "ask_human", {"question": "sure?"}))
    # The read runs; the calls that would wait for a person are refused, not asked.
    assert "permission.requested" not in types(t) and "human.asked" not in types(t)
    assert t.effects == (RunTool("r1", "c1", "read", {}),)
    refused = [e.data for e in t.events if e.type == "tool.finished"]
    assert [(r["call_id"], r["result"]) for r in refused] == [
        ("c2", "not run: the run was asked to stop after this step"),
        ("c3", "not run: the run was asked to stop after this step"),
    ]
    t = d.finish_tool("c1", "text")
    assert only(t, "run.finished").data["reason"] == "aborted" and calls(t) == []


def test_a_reply_that_ends_the_turn_ends_the_run_as_it_would_have():
    d = Driver()
    d.submit()
    stop(d)
    t = d.reply(text("all done"))
    assert only(t, "run.finished").data["reason"] == "done"


def test_open_requests_are_closed_and_the_run_ends_when_nothing_else_runs():
    d = Driver()
    d.submit(policy=Policy())
    d.reply(tool_use("c1", "bash", {"command": "make"}), tool_use("c2", "ask_human", {"question": "which?"}))
    t = stop(d)
    assert types(t) == ["run.stopping", "permission.resolved", "tool.finished", "human.answered", "tool.finished",
                        "step.finished", "run.finished"]
    resolved = only(t, "permission.resolved").data
    assert (resolved["decision"], resolved["client"]) == ("deny", "roost")
    assert only(t, "run.finished").data["reason"] == "aborted"
    assert d.state.run is None


def test_asking_twice_changes_nothing_and_a_plain_abort_still_stops_at_once():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1", "bash", {"command": "sleep 99"}))
    stop(d)
    assert stop(d).events == ()
    t = d.abort()
    assert types(t) == ["tool.finished", "run.finished"] and CancelRun("r1") in t.effects


def test_queued_steering_does_not_start_another_call():
    d = Driver()
    d.submit()
    d.reply(tool_use("c1", "read"))
    stop(d)
    d.steer("and then the docs")
    t = d.finish_tool("c1")
    assert only(t, "run.finished").data["reason"] == "aborted" and calls(t) == []


def test_exec_mode_ends_without_the_check_or_the_next_attempt():
    state = _exec_run()
    state = step(state, Abort(10.5, "enough", after_step=True)).state
    t = _reply_done(state, 11.0)
    assert [e.type for e in t.events][-1] == "run.finished" and t.events[-1].data["reason"] == "aborted"
    # Asked during the check: the check finishes; a failure is not tried again.
    state = _reply_done(_exec_run(), 11.0).state
    state = step(state, Abort(11.5, "enough", after_step=True)).state
    failed = step(state, CheckFinished(1, "FAILED", 12.0))
    assert [e.type for e in failed.events] == ["check.finished", "run.finished"]
    assert failed.events[-1].data["reason"] == "aborted"
    passed = step(state, CheckFinished(0, "ok", 12.0))
    assert passed.events[-1].data["reason"] == "check_passed"
