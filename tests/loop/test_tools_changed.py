"""A session that goes on with other tools says so: a tools.changed event, and a note the
model reads first in the run's first user message (the history before it unchanged)."""

from __future__ import annotations

from roost.loop import CallModel, Transition, fold

from ._driver import TOOLS, Driver, calls, text, types


def _call(t: Transition) -> CallModel:
    [call] = calls(t)
    return call


def test_the_first_run_and_a_run_with_the_same_tools_say_nothing() -> None:
    d = Driver()
    assert "tools.changed" not in types(d.submit("one"))
    d.reply(text("done"))
    t = d.submit("two")
    assert "tools.changed" not in types(t)
    assert _call(t).messages[-1]["content"] == [{"type": "text", "text": "two"}]


def test_tools_gone_and_new_are_told_to_the_clients_and_the_model() -> None:
    d = Driver()
    d.submit("one", tools=TOOLS)
    d.reply(text("done"))
    before = d.state.messages
    fewer = tuple(t for t in TOOLS if t != "time__now") + ("github__search", "agent_x")
    t = d.submit("two", tools=fewer)
    assert types(t)[:3] == ["run.started", "tools.changed", "message.user"]
    changed = t.events[1].data
    assert changed["added"] == ["agent_x", "github__search"] and changed["removed"] == ["time__now"]
    assert changed["note"] == (
        "[roost] Your tools changed since this session's last run. No longer available (calls to "
        "them fail): time__now; new: agent_x, github__search."
    )
    call = _call(t)
    # Cache-friendly: the history before stays as it was; the note leads the new message.
    assert call.messages[: len(before)] == before
    assert call.messages[-1] == {
        "role": "user",
        "content": [{"type": "text", "text": changed["note"]}, {"type": "text", "text": "two"}],
    }
    assert call.tools == fewer
    assert fold(d.log) == d.state


def test_plan_runs_offer_no_tools_and_leave_the_comparison_to_the_next_run() -> None:
    d = Driver()
    d.submit("one", tools=("read", "bash"))
    d.reply(text("done"))
    t = d.submit("plan it", mode="plan")
    assert "tools.changed" not in types(t)
    d.reply(text("1. a"))
    t = d.submit("do it", tools=("read",))
    assert [e.data["removed"] for e in t.events if e.type == "tools.changed"] == [["bash"]]
