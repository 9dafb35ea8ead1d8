"""Compaction without IO: when it starts, what it keeps, and what later calls see."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.loop import CallModel, Compact, Summarize, Summarized, cut_point, visible
from roost.loop._context import RESUME

from ._driver import Driver, check_history, only, text, tool_use, types


def long_run(window: int = 1000, keep_turns: int = 1) -> Driver:
    d = Driver()
    d.submit("task", context_window=window, compact_at=0.5, keep_turns=keep_turns)
    d.reply(tool_use("c1", "read", {"path": "a"}), usage={"input_tokens": 100, "output_tokens": 10})
    d.finish_tool("c1", "x" * 400)
    d.reply(tool_use("c2", "read", {"path": "b"}), usage={"input_tokens": 450, "output_tokens": 10})
    return d


def test_a_call_that_would_fill_the_window_summarizes_first():
    d = long_run()
    t = d.finish_tool("c2", "y" * 400)
    assert types(t) == ["tool.finished", "step.finished", "compaction.started"]
    [summarize] = [e for e in t.effects if isinstance(e, Summarize)]
    started = only(t, "compaction.started").data
    # The cut keeps the last reply (and its result) whole: it falls just before it.
    assert started["upto"] == 3 and d.state.messages[3]["role"] == "assistant"
    assert [m["role"] for m in summarize.messages] == ["user", "assistant", "user"]
    t = d.feed(Summarized("They read a and b.", d.tick()))
    assert types(t) == ["compacted", "step.started"]
    [call] = [e for e in t.effects if isinstance(e, CallModel)]
    assert call.summary == "They read a and b."
    assert call.messages[0]["content"][0]["text"] == RESUME
    assert call.messages[1:] == d.state.messages[3:]
    check_history(call.messages, complete=True)
    # The stored history is whole; the next reply is measured from the summary on.
    assert len(d.state.messages) == 5 and d.state.compacted_upto == 3


def test_a_summary_that_does_not_shrink_is_dropped_and_not_tried_again():
    d = long_run()
    d.finish_tool("c2", "y" * 400)
    t = d.feed(Summarized("z" * 5000, d.tick()))
    assert types(t) == ["compaction.skipped", "step.started"]
    assert d.state.summary == "" and d.state.compacted_upto == 0
    d.reply(tool_use("c3", "read", {"path": "c"}), usage={"input_tokens": 900})
    t = d.finish_tool("c3")
    assert "compaction.started" not in types(t)


def test_a_failed_summary_does_not_fail_the_run():
    d = long_run()
    d.finish_tool("c2", "y" * 400)
    t = d.fail("overloaded")
    assert types(t) == ["compaction.skipped", "step.started"]
    assert any(isinstance(e, CallModel) for e in t.effects)


def test_nothing_happens_without_a_window_or_below_the_share():
    d = long_run(window=10_000)
    assert "compaction.started" not in types(d.finish_tool("c2"))
    d = Driver()
    d.submit("task")
    d.reply(tool_use("c1", "read"), usage={"input_tokens": 10**9})
    assert "compaction.started" not in types(d.finish_tool("c1"))


def test_compact_by_hand_is_a_short_run():
    d = long_run(window=10_000)
    d.finish_tool("c2")
    d.reply(text("done"))
    t = d.feed(Compact("rc", d.tick(), "scripted/demo", keep_turns=1))
    assert types(t) == ["run.started", "compaction.started"]
    t = d.feed(Summarized("short", d.tick()))
    assert types(t) == ["compacted", "run.finished"]
    assert only(t, "run.finished").data["reason"] == "done" and d.state.summary == "short"
    # Too little history: nothing to do, and the run says so.
    e = Driver()
    e.submit("task")
    e.reply(text("hi"))
    t = e.feed(Compact("rc", e.tick(), "scripted/demo"))
    assert types(t) == ["run.started", "run.finished"]
    assert "nothing to compact" in only(t, "run.finished").data["text"]


@st.composite
def histories(draw: st.DrawFn) -> list[dict]:
    d = Driver()
    d.submit("task", max_turns=50)
    for n in range(draw(st.integers(0, 8))):
        calls = draw(st.integers(0, 3))
        if calls == 0:
            d.reply(text(f"reply {n}"))
            d.submit("more", max_turns=50)
            continue
        d.reply(*[tool_use(f"c{n}.{i}", "read", {"path": f"p{n}"}) for i in range(calls)])
        for i in range(calls):
            d.finish_tool(f"c{n}.{i}", "r" * draw(st.integers(0, 50)))
    return list(d.state.messages)


@given(histories(), st.integers(0, 4))
def test_cuts_never_separate_a_call_from_its_result(messages, keep):
    start = 0
    for _ in range(2):  # a compaction after a compaction too
        cut = cut_point(messages, start, keep)
        if cut is None:
            return
        assert messages[cut]["role"] == "assistant" and cut > start + 1
        assert sum(1 for m in messages[cut:] if m["role"] == "assistant") == max(1, keep)
        check_history(visible(messages, cut), complete=False)
        start = cut


def test_an_exec_run_resumes_where_it_was_after_a_restart():
    from roost.loop import RunCheck, StartClock

    d = Driver(ts=1000.0)
    d.submit("fix", mode="exec", check="bash ./check.sh", attempts=3, time_box=600)
    t = d.interrupted()  # while the model was called: it is called again, same step
    [call] = [e for e in t.effects if isinstance(e, CallModel)]
    assert call.step == 1 and types(t) == []
    assert StartClock(d.state.run.id, 1601.0) in t.effects
    d.reply(tool_use("c1", "bash", {"command": "make"}))
    t = d.interrupted()  # while a tool ran: reported, never run again; the run goes on
    assert types(t) == ["tool.finished", "step.finished", "step.started"]
    assert "interrupted" in only(t, "tool.finished").data["result"]
    d.reply(text("fixed"))
    t = d.interrupted()  # while the check ran: it runs again
    assert RunCheck(d.state.run.id, 1, "bash ./check.sh") in t.effects
