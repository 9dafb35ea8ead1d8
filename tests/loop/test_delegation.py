"""Sub-agents from the loop's side: a call to an agent-tool or to ``task`` starts one
(StartSubagent), never a tool run and never a permission question; a bad call is an error
result the model sees."""

from __future__ import annotations

from roost.loop import TASK, Interrupted, Policy, RunTool, StartSubagent

from ._driver import TOOLS, Driver, only, tool_use

TEAM = ("reviewer", "tester")


def delegating(mode: str = "agent", depth: int = 0) -> Driver:
    d = Driver()
    d.submit(
        tools=TOOLS + ("helper", TASK), subagents=("helper", TASK), delegates=TEAM, mode=mode, policy=Policy(), depth=depth
    )
    return d


def test_run_started_records_the_agents_task_may_run():
    d = delegating()
    started = next(e for e in d.log if e.type == "run.started")
    assert started.data["subagents"] == ["helper", TASK] and started.data["delegates"] == list(TEAM)
    assert d.state.run is not None and d.state.run.settings.delegates == TEAM


def test_a_task_call_starts_the_agent_it_names_without_asking():
    d = delegating()
    t = d.reply(
        tool_use("c1", TASK, {"agent": "reviewer", "prompt": "review the diff", "description": "review"}),
        # Claude Code's names for the same fields
        tool_use("c2", TASK, {"subagent_type": "tester", "prompt": "run the tests", "description": "tests"}),
        tool_use("c3", "helper", {"message": "help"}),
    )
    assert [e for e in t.effects if isinstance(e, StartSubagent)] == [
        StartSubagent("r1", "c1", "reviewer", "review the diff"),
        StartSubagent("r1", "c2", "tester", "run the tests"),
        StartSubagent("r1", "c3", "helper", "help"),
    ]
    assert not [e for e in t.effects if isinstance(e, RunTool)]
    assert "permission.requested" not in [e.type for e in t.events]
    # their results come back as any call's
    d.finish_tool("c1", "looks good")
    d.finish_tool("c2", "3 passed")
    t = d.finish_tool("c3", "done")
    assert [e.type for e in t.events][-1] == "step.started"


def test_an_unknown_agent_is_an_error_that_lists_the_agents():
    d = delegating()
    t = d.reply(tool_use("c1", TASK, {"agent": "nobody", "prompt": "x"}))
    finished = only(t, "tool.finished")
    assert finished.data["is_error"]
    assert finished.data["result"] == (
        "invalid input for task: there is no agent 'nobody' to delegate to; the agents: reviewer, tester"
    )
    assert not [e for e in t.effects if isinstance(e, StartSubagent)]
    # the run goes on: the model sees the error
    assert only(t, "step.started")


def test_a_task_call_needs_an_agent_and_a_prompt():
    for bad, why in (
        ({"prompt": "x"}, "agent must name an agent; the agents: reviewer, tester"),
        ({"agent": "reviewer"}, "prompt must be a non-empty string"),
        ({"agent": "reviewer", "prompt": "  "}, "prompt must be a non-empty string"),
        ({"agent": "helper", "prompt": "x"}, "no agent 'helper' to delegate to"),
    ):
        d = delegating()
        result = only(d.reply(tool_use("c1", TASK, bad)), "tool.finished").data
        assert result["is_error"] and why in result["result"], result


def test_task_calls_never_hold_up_the_calls_that_change_things():
    d = delegating()
    t = d.reply(
        tool_use("c1", TASK, {"agent": "reviewer", "prompt": "review"}),
        tool_use("c2", "write", {"path": "a.txt", "content": "x"}),
    )
    assert [type(e).__name__ for e in t.effects] == ["StartSubagent"]
    t = d.approve("c2")
    # the write runs while the sub-agent still works
    assert [e for e in t.effects if isinstance(e, RunTool)][0].call_id == "c2"


def test_a_restarted_run_keeps_a_resumed_task_call_open():
    d = delegating()
    d.reply(tool_use("c1", TASK, {"agent": "reviewer", "prompt": "review"}))
    t = d.feed(Interrupted(d.tick(), ("c1",)))
    assert "tool.finished" not in [e.type for e in t.events]
    assert d.state.run is not None and d.state.run.pending == ("c1",)


def test_sub_agents_nest_three_deep_and_a_call_deeper_is_an_error_the_model_sees():
    for depth in (0, 2):
        t = delegating(depth=depth).reply(tool_use("c1", "helper", {"message": "help"}))
        assert [e for e in t.effects if isinstance(e, StartSubagent)] == [StartSubagent("r1", "c1", "helper", "help")]
    d = delegating(depth=3)
    t = d.reply(tool_use("c1", "helper", {"message": "help"}), tool_use("c2", TASK, {"agent": "reviewer", "prompt": "x"}))
    assert not [e for e in t.effects if isinstance(e, StartSubagent)]
    results = [e.data for e in t.events if e.type == "tool.finished"]
    assert [(r["call_id"], r["result"], r["is_error"]) for r in results] == [
        (c, "sub-agents nest at most 3 deep; do this part yourself", True) for c in ("c1", "c2")
    ]
    # The run goes on: the model sees the errors.
    assert only(t, "step.started")


def test_a_runs_depth_is_recorded_so_a_resumed_sub_agent_keeps_it():
    d = delegating(depth=3)
    started = next(e for e in d.log if e.type == "run.started")
    assert started.data["depth"] == 3
    assert "depth" not in next(e for e in delegating().log if e.type == "run.started").data
