"""fold(events) is the state: however the log is split, stored, numbered or sent.

The hypothesis tests drive random legal sessions (see ``_driver.legal_input``) and check the
invariants the daemon relies on when it restarts and re-folds a session's log.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.loop import (
    CallModel,
    Event,
    FinishRun,
    Interrupted,
    Phase,
    RunTool,
    SessionState,
    Submit,
    Transition,
    apply,
    fold,
    step,
)

from ._driver import SESSION, Driver, check_history, legal_input, text, tool_use


def a_busy_session() -> Driver:
    """Two runs: one done with a tool step and steering, one stopped in its tool phase."""
    d = Driver()
    d.submit("first", request_id="req-1")
    d.reply(text("reading"), tool_use("c1", "read"), usage={"input_tokens": 5, "output_tokens": 2})
    d.steer("and the tests")
    d.finish_tool("c1", "contents")
    d.reply(text("done"), usage={"input_tokens": 9, "output_tokens": 3})
    d.submit("second", max_turns=3)
    d.reply(tool_use("c2", "bash"), tool_use("c3", "read"))
    d.finish_tool("c3", "x")
    return d


def test_fold_of_the_log_is_the_state():
    d = a_busy_session()
    assert fold(d.log) == d.state
    assert fold(d.log).phase is Phase.TOOLS
    assert d.state.events == len(d.log)


def test_fold_of_the_stored_log_also_knows_the_last_seq():
    d = a_busy_session()
    stored = d.stored()
    folded = fold(stored)
    assert folded.last_seq == len(stored)
    assert folded == replace(d.state, last_seq=len(stored))
    # Events from step are not numbered yet: last_seq stays where the store left it.
    t = step(folded, Interrupted(d.tick()))
    assert all(e.seq is None for e in t.events)
    assert t.state.last_seq == len(stored)
    assert t.state.events == len(stored) + len(t.events)


def test_last_seq_follows_the_numbers_the_store_gave():
    d = a_busy_session()
    stored = [e.numbered(100 + 2 * i) for i, e in enumerate(d.log)]
    assert fold(stored).last_seq == 100 + 2 * (len(stored) - 1)
    assert fold(stored).events == len(stored)


def test_fold_survives_the_event_map_round_trip():
    d = a_busy_session()
    maps = [e.to_map() for e in d.stored()]
    assert all(m["seq"] == i for i, m in enumerate(maps, start=1))
    assert all({"session", "run", "type", "ts", "seq"} <= m.keys() for m in maps)
    rebuilt = [Event.from_map(m) for m in maps]
    assert rebuilt == d.stored()
    assert fold(rebuilt) == fold(d.stored())
    # Unnumbered events have no seq key at all.
    assert "seq" not in d.log[0].to_map()


def test_live_events_change_nothing():
    d = a_busy_session()
    delta = Event("text.delta", SESSION, "r2", d.tick(), {"text": "hel"})
    assert delta.live
    assert apply(d.state, delta) == d.state
    assert apply(d.state, Event("reasoning.delta", SESSION, "r2", d.tick(), {"text": "hm"})) == d.state


def test_fold_needs_events_or_a_start():
    with pytest.raises(ValueError):
        fold([])
    start = SessionState("s9")
    assert fold([], start) is start


def test_a_recovered_session_goes_on_exactly_like_the_live_one():
    # A daemon that folds the log mid-run and feeds the next input decides the same.
    d = a_busy_session()
    recovered = fold(d.stored())
    live = step(d.state, Interrupted(d.tick()))
    again = step(recovered, Interrupted(d.now))
    assert again.events == live.events
    assert again.effects == live.effects


# -- properties ---------------------------------------------------------------------------------

_ts = st.floats(min_value=-1e6, max_value=1e9, allow_nan=False, allow_infinity=False)


@st.composite
def sessions(draw: st.DrawFn) -> tuple[SessionState, list[tuple[object, Transition]]]:
    """A random legal session: the start state and each (input, transition) in order.

    Times are arbitrary (not even increasing): the loop must take them as given.
    """
    state = SessionState(SESSION)
    steps: list[tuple[object, Transition]] = []
    n = draw(st.integers(1, 30))
    for serial in range(n):
        input = draw(legal_input(state, draw(_ts), serial))
        t = step(state, input)
        steps.append((input, t))
        state = t.state
    return SessionState(SESSION), steps


def log_of(steps) -> list[Event]:
    return [e for _, t in steps for e in t.events]


#: The fold property gets more examples; the others share its generator.
FOLD_SETTINGS = settings(max_examples=150, deadline=None)
SETTINGS = settings(max_examples=100, deadline=None)


@FOLD_SETTINGS
@given(sessions(), st.data())
def test_fold_of_the_events_is_the_final_state_however_split(session, data):
    start, steps = session
    log = log_of(steps)
    final = steps[-1][1].state
    assert fold(log) == final
    assert fold(log, start) == final
    # Each transition's state is its events folded onto the state before.
    state = start
    for _, t in steps:
        assert fold(t.events, state) == t.state
        state = t.state
    cut = data.draw(st.integers(0, len(log)), label="cut")
    assert fold(log[cut:], fold(log[:cut], start)) == final
    # The store's view: numbered, as maps, folded in two reads.
    stored = [Event.from_map(e.numbered(i).to_map()) for i, e in enumerate(log, start=1)]
    assert fold(stored[cut:], fold(stored[:cut], start)) == replace(final, last_seq=len(log))


@SETTINGS
@given(sessions())
def test_tool_ids_pair_up_in_the_history(session):
    _, steps = session
    for _, t in steps:
        check_history(t.state.messages, complete=t.state.phase is not Phase.TOOLS)
        for effect in t.effects:
            if isinstance(effect, CallModel):
                check_history(effect.messages, complete=True)
                assert effect.messages[-1]["role"] == "user"
    # Every call the model asked for was started or answered, and every start was answered
    # (by its tool, or by abort / interrupted / max_tokens) unless a run is still in flight.
    log = log_of(steps)
    asked = [b["id"] for e in log if e.type == "message.assistant" for b in e.data["content"] if b["type"] == "tool_use"]
    finished = [e.data["call_id"] for e in log if e.type == "tool.finished"]
    assert len(finished) == len(set(finished))
    final = steps[-1][1].state
    pending = set(final.run.pending) if final.run else set()
    assert set(finished) | pending == set(asked)
    assert not set(finished) & pending


@SETTINGS
@given(sessions())
def test_event_times_come_only_from_inputs(session):
    _, steps = session
    for input, t in steps:
        assert all(e.ts == input.ts for e in t.events)
        assert all(e.seq is None for e in t.events)
        for e in t.events:
            if e.type == "run.finished":
                started = next(
                    i.ts for i, _ in reversed(steps) if isinstance(i, Submit) and i.run == e.run
                )
                assert e.data["duration"] == max(0.0, input.ts - started)


@SETTINGS
@given(sessions())
def test_every_run_ends_once_within_its_turns(session):
    _, steps = session
    log = log_of(steps)
    effects = [x for _, t in steps for x in t.effects]
    submits = [i for i, _ in steps if isinstance(i, Submit)]
    ends = [e for e in log if e.type == "run.finished"]
    finishes = [x for x in effects if isinstance(x, FinishRun)]
    final = steps[-1][1].state
    assert len(ends) == len(submits) - (final.run is not None)
    assert [(e.run, e.data["reason"]) for e in ends] == [(f.run, f.reason) for f in finishes]
    for submit in submits:
        model_calls = [x for x in effects if isinstance(x, CallModel) and x.run == submit.run]
        assert [c.step for c in model_calls] == list(range(1, len(model_calls) + 1))
        assert len(model_calls) <= submit.settings.max_turns
    for end in ends:
        submit = next(s for s in submits if s.run == end.run)
        assert end.data["turns"] <= submit.settings.max_turns
        if end.data["reason"] == "max_turns":
            assert end.data["turns"] == submit.settings.max_turns
    # A tool runs at most once, only when its start is logged, and a call that asked runs
    # only once approved; a question is answered by a person, never run.
    runs = [x.call_id for x in effects if isinstance(x, RunTool)]
    assert len(runs) == len(set(runs))
    assert set(runs) <= {e.data["call_id"] for e in log if e.type == "tool.started"}
    asked = {e.data["call_id"] for e in log if e.type == "permission.requested"}
    approved = {
        e.data["call_id"]
        for e in log
        if e.type == "permission.resolved" and e.data["decision"] == "approve"
    }
    # An approved call that changes things waits its turn: it ran, still waits, or its run
    # ended first (aborted, interrupted).
    ran_after_asking = {c for c in runs if c in asked}
    assert ran_after_asking <= approved
    waits_its_turn = set(final.run.cleared) if final.run else set()
    finished_calls = {e.data["call_id"] for e in log if e.type == "tool.finished"}
    assert approved - ran_after_asking <= waits_its_turn | finished_calls
    assert not {c for c in runs} & {e.data["call_id"] for e in log if e.type == "human.asked"}
    # Every request is resolved exactly once, or is still open in a run in flight.
    resolved = [e.data["call_id"] for e in log if e.type in ("permission.resolved", "human.answered")]
    opened = [e.data["call_id"] for e in log if e.type in ("permission.requested", "human.asked")]
    assert len(resolved) == len(set(resolved))
    open_now = set(final.run.waiting) if final.run is not None else set()
    assert set(opened) == set(resolved) | open_now


@SETTINGS
@given(sessions())
def test_run_usage_is_the_sum_of_its_replies(session):
    _, steps = session
    log = log_of(steps)
    for end in (e for e in log if e.type == "run.finished"):
        replies = [e for e in log if e.type == "message.assistant" and e.run == end.run]
        total: dict[str, int] = {}
        for r in replies:
            for k, v in r.data["usage"].items():
                total[k] = total.get(k, 0) + v
        assert end.data["usage"] == total
        texts = ["".join(b["text"] for b in r.data["content"] if b["type"] == "text") for r in replies]
        assert end.data["text"] == (texts[-1] if texts else "")
    # step.finished reports its own reply's usage, or none when the call produced no reply.
    last_reply = None
    for e in log:
        if e.type == "step.started":
            last_reply = None
        elif e.type == "message.assistant":
            last_reply = e
        elif e.type == "step.finished":
            assert e.data["usage"] == (last_reply.data["usage"] if last_reply else {})



def test_media_parts_fold_into_the_history_as_references_and_count_as_media():
    from roost.loop._context import MEDIA_TOKENS, messages_tokens

    image = {"type": "image", "media_type": "image/png", "sha256": "ab" * 32, "bytes": 70, "width": 4, "height": 3}
    d = Driver()
    d.submit("what is in these?", parts=(image,))
    d.reply(tool_use("c1", "read"))
    t = d.finish_tool("c1", "shot.png: image 4x3", parts=(image,))
    (finished,) = [e for e in t.events if e.type == "tool.finished"]
    assert finished.data["parts"] == [image]
    task, _, results = d.state.messages
    assert task["content"] == [{"type": "text", "text": "what is in these?"}, image]
    assert results["content"][0]["content"] == [{"type": "text", "text": "shot.png: image 4x3"}, image]
    assert fold(d.log) == d.state
    # A small image counts by its pixels, a large one or one of unknown size as MEDIA_TOKENS.
    assert messages_tokens([results]) == (len("shot.png: image 4x3") // 4 + 1) + 1
    large = {**image, "width": 1568, "height": 1176}
    assert messages_tokens([{"content": [large, {"type": "document", "sha256": "ef" * 32}]}]) == 2 * MEDIA_TOKENS
    assert messages_tokens([{"content": [{**image, "width": 400, "height": 300}]}]) == 400 * 300 // 750 + 1


def test_steering_with_media_enters_the_history_with_its_parts():
    image = {"type": "image", "media_type": "image/png", "sha256": "cd" * 32, "bytes": 9, "width": 2, "height": 2}
    d = Driver()
    d.submit("go")
    d.reply(tool_use("c1", "read"))
    d.steer("look at this", parts=(image,))
    d.steer("and nothing else")
    t = d.finish_tool("c1", "x")
    steered = [e.data for e in t.events if e.type == "message.user"]
    assert steered == [{"text": "look at this", "origin": "steer", "parts": [image]},
                       {"text": "and nothing else", "origin": "steer"}]
    assert d.state.messages[-1]["content"][1:] == [
        {"type": "text", "text": "look at this"}, image, {"type": "text", "text": "and nothing else"}
    ]
    assert d.state.run.steering == () and d.state.run.steering_parts == ()
    assert fold(d.log) == d.state
