"""Tool calls of one reply: those that only read run side by side; those that change files
or state run one at a time, in the order the model gave them (Claude Code's rule)."""

from __future__ import annotations

from roost.loop import Policy, RunTool, Transition, fold

from ._driver import Driver, tool_use

AGENT = Policy(home="/home/me")


def ran(t: Transition) -> list[str]:
    return [e.call_id for e in t.effects if isinstance(e, RunTool)]


def edit(call_id: str, old: str) -> dict:
    return tool_use(call_id, "edit", {"path": "a.py", "old": old, "new": old.upper()})


def test_edits_run_one_at_a_time_in_order_while_reads_run_at_once():
    d = Driver(cwd="/p")
    d.submit()
    t = d.reply(edit("e1", "a"), tool_use("r1", "read", {"path": "a.py"}), edit("e2", "b"),
                tool_use("r2", "grep", {"pattern": "x"}), edit("e3", "c"))
    assert ran(t) == ["r1", "r2", "e1"]
    assert ran(d.finish_tool("r1")) == []  # a read done: the edit in flight goes on alone
    assert ran(d.finish_tool("e1")) == ["e2"]
    assert ran(d.finish_tool("e2")) == ["e3"]
    assert ran(d.finish_tool("r2")) == []
    t = d.finish_tool("e3")
    # Every result, in the order the model asked, goes to the next call.
    results = [b["tool_use_id"] for b in d.state.messages[-1]["content"]]
    assert results == ["e1", "r1", "e2", "r2", "e3"]
    assert t.effects and type(t.effects[-1]).__name__ == "CallModel"


def test_a_change_waiting_for_approval_holds_the_changes_after_it():
    d = Driver(cwd="/p")
    d.submit(mode="agent", policy=AGENT)
    t = d.reply(tool_use("b1", "bash", {"command": "make"}), edit("e1", "a"), tool_use("r1", "read", {"path": "x"}))
    # bash asks, the edit asks too (agent mode); the read runs; nothing that changes runs.
    assert ran(t) == ["r1"]
    assert ran(d.approve("e1")) == []  # approved, but b1 comes first and still waits
    assert ran(d.approve("b1")) == ["b1"]
    assert ran(d.finish_tool("b1")) == ["e1"]


def test_a_denied_change_lets_the_next_one_run():
    d = Driver(cwd="/p")
    d.submit(mode="agent", policy=AGENT)
    d.reply(tool_use("b1", "bash", {"command": "make"}), edit("e1", "a"))
    d.approve("e1")
    assert ran(d.deny("b1")) == ["e1"]


def test_without_read_only_tools_said_every_call_waits_its_turn():
    d = Driver(cwd="/p")
    d.submit(read_only=())
    t = d.reply(tool_use("r1", "read", {"path": "a"}), tool_use("r2", "read", {"path": "b"}))
    assert ran(t) == ["r1"]
    assert ran(d.finish_tool("r1")) == ["r2"]


def test_a_restarted_run_knows_which_call_waited_its_turn():
    d = Driver(cwd="/p")
    d.submit()
    d.reply(edit("e1", "a"), edit("e2", "b"))
    # After a restart the state is the fold of the log: e2 is still cleared, waiting its turn.
    assert set(d.state.run.cleared) == {"e1", "e2"}
    assert fold(d.log).run.cleared == d.state.run.cleared
