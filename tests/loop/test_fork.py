"""Where a fork may cut a history: the last whole point at or before the seq asked for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.loop import Abort, CallModel, Phase, Policy, RunSettings, SessionState, Submit, fork_point, step, unanswered, whole

from ._driver import MODEL, Driver, check_history, text, tool_use
from .test_fold import log_of, sessions


def test_a_cut_inside_a_step_goes_back_to_the_model_call_before_it() -> None:
    d = Driver()
    d.submit("first")
    d.reply(text("reading"), tool_use("c1", "read"), tool_use("c2", "read"))
    d.finish_tool("c1", "one")
    d.finish_tool("c2", "two")
    d.reply(text("done"))
    log = d.stored()
    kinds = [e.type for e in log]
    reply = kinds.index("message.assistant") + 1
    first_result = kinds.index("tool.finished") + 1
    last_result = first_result + 1

    # The reply that asks for calls, and the first of their results: not whole.
    for at in (reply, reply + 1, first_result):
        seq, state = fork_point(log, at, SessionState("fork"))
        assert seq == reply - 1 and log[seq - 1].type == "step.started"
        assert state.phase is Phase.MODEL and state.messages[-1]["role"] == "user"
    # Once every call has its result, the step's end is whole: the fork has both results.
    seq, state = fork_point(log, last_result, SessionState("fork"))
    assert seq == last_result
    assert [b["tool_use_id"] for b in state.messages[-1]["content"]] == ["c1", "c2"]
    # The end of the run, and the session's first event, are whole.
    assert fork_point(log, len(log), SessionState("fork"))[0] == len(log)
    assert fork_point(log, 1, SessionState("fork"))[0] == 1


def test_a_call_waiting_for_a_person_is_not_a_point() -> None:
    d = Driver()
    d.submit("go", policy=Policy())
    d.reply(tool_use("c1", "bash", {"command": "make"}))
    assert d.state.run is not None and d.state.run.waiting
    assert not whole(d.state)
    assert unanswered(d.state.messages) == {"c1"}
    d.approve("c1")
    assert not whole(d.state)
    d.finish_tool("c1", "built")
    assert whole(d.state)


@settings(max_examples=100, deadline=None)
@given(sessions(), st.data())
def test_every_fork_point_is_a_history_a_model_accepts(session, data) -> None:
    _, steps = session
    log = [e.numbered(i) for i, e in enumerate(log_of(steps), start=1)]
    at = data.draw(st.integers(1, len(log)), label="at")
    seq, state = fork_point(log, at, SessionState("fork"))
    assert 0 < seq <= at
    assert whole(state)
    check_history(state.messages, complete=True)
    # Nothing later than the cut was folded in.
    assert state.last_seq == seq
    # The fork ends a run it was cut from, and then takes a task like any idle session.
    if state.run is not None:
        state = step(state, Abort(5.0, "forked")).state
    assert state.phase is Phase.IDLE
    started = step(state, Submit(run="rf", task="next", ts=6.0, settings=RunSettings(MODEL)))
    calls = [e for e in started.effects if isinstance(e, CallModel)]
    assert calls and calls[0].messages[-1]["role"] == "user"
    check_history(calls[0].messages, complete=True)
