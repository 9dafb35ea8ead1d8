"""Run reports are a pure fold of the stored events (see roost/loop/_report.py)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given

from roost.loop import Event, ModelFinished, Policy, Summarized, ToolFinished, run_report

from ._driver import Driver, text, tool_use
from .test_fold import SETTINGS, log_of, sessions

PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


def a_timed_run() -> Driver:
    """One run of two steps: a read and a bash call, then a final reply; known latencies."""
    d = Driver(ts=1000.0)
    d.submit("count the files", price=PRICE)  # t=1001
    d.feed(ModelFinished(
        (text("looking"), tool_use("c1", "read"), tool_use("c2", "bash", {"command": "sleep 1"})),
        "tool_use", d.tick(2), {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 80},
        latency=1.5, ttft=0.4, retries=1,
    ))  # t=1003
    d.feed(ToolFinished("c1", "a b c", d.tick(), latency=0.25))  # t=1004
    d.feed(ToolFinished("c2", "", d.tick(), latency=1.0, is_error=True))  # t=1005
    d.feed(ModelFinished(
        (text("three"),), "end_turn", d.tick(), {"input_tokens": 150, "output_tokens": 8,
                                                 "cache_creation_input_tokens": 40},
        latency=0.75, ttft=0.5, retries=0,
    ))  # t=1006
    return d


def test_a_runs_report_has_each_steps_times_tokens_and_cost():
    d = a_timed_run()
    report = run_report(d.stored())
    assert report is not None
    assert (report["run"], report["reason"], report["model"], report["task"]) == ("r1", "done", d.state.last_model, "count the files")
    assert report["duration"] == 5.0 and report["started"] == 1001.0 and report["ended"] == 1006.0
    first, second = report["steps"]
    assert (first["model_time"], first["ttft"], first["retries"], first["stop_reason"]) == (1.5, 0.4, 1, "tool_use")
    assert first["duration"] == 4.0  # from the call to the last tool result
    assert [(t["name"], t["time"], t["is_error"]) for t in first["tools"]] == [("read", 0.25, False), ("bash", 1.0, True)]
    assert second["tools"] == [] and second["duration"] == 1.0
    assert report["model_time"] == 2.25 and report["tool_time"] == 1.25
    assert report["ttft"] == 0.45 and report["retries"] == 1
    assert report["tools"] == {"read": {"calls": 1, "errors": 0, "time": 0.25}, "bash": {"calls": 1, "errors": 1, "time": 1.0}}
    assert report["usage"] == {"input_tokens": 250, "output_tokens": 28, "cache_read_input_tokens": 80,
                               "cache_creation_input_tokens": 40}
    assert first["cost"] == (100 * 3.0 + 20 * 15.0 + 80 * 0.3) / 1e6
    assert report["cost"] == (250 * 3.0 + 28 * 15.0 + 80 * 0.3 + 40 * 3.75) / 1e6
    # The run's own usage and cost are what run.finished says.
    finished = d.log[-1]
    assert finished.data["usage"] == report["usage"] and finished.data["cost"] == report["cost"]
    assert report["total"] == {"usage": report["usage"], "cost": report["cost"]}
    assert report["approvals"] == report["questions"] == report["compactions"] == report["subagents"] == []


def test_what_an_older_daemon_did_not_record_is_unknown():
    d = Driver()
    d.submit()
    d.reply(text("hi"), usage={"input_tokens": 3, "output_tokens": 1}, latency=0.5)  # no ttft, no retries
    report = run_report(d.stored())
    assert report is not None
    assert report["ttft"] is None and report["retries"] is None and report["cost"] is None
    assert report["steps"][0]["ttft"] is None and report["model_time"] == 0.5


def test_the_last_run_unless_one_is_named_and_none_for_a_run_not_there():
    d = a_timed_run()
    d.submit("again")
    d.reply(text("ok"))
    assert run_report(d.stored())["run"] == "r2"
    assert run_report(d.stored(), "r1")["task"] == "count the files"
    assert run_report(d.stored(), "r9") is None
    assert run_report(Driver().stored()) is None


def test_approvals_and_questions_say_how_long_each_waited():
    d = Driver(ts=0.0)
    d.submit(policy=Policy())  # agent mode: bash asks
    d.reply(tool_use("c1", "bash", {"command": "make"}), tool_use("c2", "ask_human", {"question": "which?"}))  # t=2
    d.approve("c1", client="cli#3")  # t=3
    d.feed(ToolFinished("c1", "built", d.tick(5)))  # t=8
    d.answer("c2", "that one", client="shell#1")  # t=9
    d.reply(tool_use("c3", "bash", {"command": "make install"}))  # t=10
    report = run_report(d.stored(), now=14.0)
    assert report is not None and report["reason"] is None and report["duration"] == 13.0
    done, still = report["approvals"]
    assert (done["call_id"], done["tool"], done["decision"], done["client"], done["waited"]) == ("c1", "bash", "approve", "cli#3", 1.0)
    assert (still["call_id"], still["decision"], still["waited"]) == ("c3", None, 4.0)
    [question] = report["questions"]
    assert (question["question"], question["answered"], question["client"], question["waited"]) == ("which?", True, "shell#1", 7.0)
    # Without a clock, what is still open has no figure.
    assert run_report(d.stored())["approvals"][1]["waited"] is None


def test_a_compaction_is_reported_and_its_tokens_counted():
    d = Driver(ts=0.0)
    d.submit("long task", context_window=1000, compact_at=0.5, keep_turns=1, price=PRICE)
    for n in range(4):
        d.reply(text("x" * 1200), tool_use(f"c{n}", "read"), usage={"input_tokens": 400 * (n + 1), "output_tokens": 5})
        t = d.finish_tool(f"c{n}", "y" * 1200)
        if any(e.type == "compaction.started" for e in t.events):
            break
    d.feed(Summarized("the gist", d.tick(3), {"input_tokens": 700, "output_tokens": 20}))
    report = run_report(d.stored())
    assert report is not None
    [compaction] = report["compactions"]
    assert compaction["done"] is True and compaction["time"] == 3.0
    assert compaction["usage"] == {"input_tokens": 700, "output_tokens": 20}
    replies = sum(s["usage"].get("input_tokens", 0) for s in report["steps"])
    assert replies >= 400
    assert report["usage"]["input_tokens"] == replies + 700


def test_sub_agent_runs_are_nested_under_the_call_that_ran_them():
    lead = Driver(ts=0.0)
    lead.submit("delegate", tools=("read", "helper"), subagents=("helper",), price=PRICE)
    lead.reply(tool_use("c1", "helper", {"message": "look"}), usage={"input_tokens": 10, "output_tokens": 2})
    helper = Driver(ts=lead.now)
    helper.submit("look", run="rh", price=PRICE)
    helper.reply(tool_use("h1", "read"), usage={"input_tokens": 5, "output_tokens": 1}, latency=0.25)
    helper.finish_tool("h1", "seen", latency=0.5)
    helper.reply(text("found it"), usage={"input_tokens": 7, "output_tokens": 3})
    lead.now = helper.now
    lead.feed(ToolFinished("c1", "found it", lead.tick(), latency=4.0))
    lead.reply(text("done"), usage={"input_tokens": 20, "output_tokens": 4})
    # As the daemon stores them: the sub-agent's events (not its session.created) carry its
    # path, between its call's start and its result.
    nested = [replace(e, data={**e.data, "path": ["c1"]}) for e in helper.log[1:]]
    cut = next(i for i, e in enumerate(lead.log) if e.type == "tool.started") + 1
    log = lead.log[:cut] + nested + lead.log[cut:]
    stored = [e.numbered(i) for i, e in enumerate(log, start=1)]
    report = run_report(stored)
    assert report is not None and report["run"] == "r1"
    assert report["tools"]["helper"] == {"calls": 1, "errors": 0, "time": 4.0}
    [sub] = report["subagents"]
    assert (sub["run"], sub["call_id"], sub["path"], sub["reason"]) == ("rh", "c1", ["c1"], "done")
    assert sub["tools"] == {"read": {"calls": 1, "errors": 0, "time": 0.5}}
    assert sub["usage"] == {"input_tokens": 12, "output_tokens": 4}
    assert report["usage"] == {"input_tokens": 30, "output_tokens": 6}
    assert report["total"]["usage"] == {"input_tokens": 42, "output_tokens": 10}
    assert report["total"]["cost"] == report["cost"] + sub["cost"]
    # Asked for by its id, the sub-agent's run is reported as it is nested.
    assert run_report(stored, "rh") == sub


@SETTINGS
@given(sessions())
def test_every_finished_run_reports_what_its_run_finished_says(session):
    _, steps = session
    log = log_of(steps)
    stored = [Event.from_map(e.numbered(i).to_map()) for i, e in enumerate(log, start=1)]
    for end in (e for e in stored if e.type == "run.finished"):
        report = run_report(stored, end.run)
        assert report is not None
        assert report["reason"] == end.data["reason"] and report["duration"] == end.data["duration"]
        usage = {k: v for k, v in end.data["usage"].items() if v}
        assert {k: v for k, v in report["usage"].items() if v} == usage
        results = [e for e in stored if e.type == "tool.finished" and e.run == end.run]
        assert sum(t["calls"] for t in report["tools"].values()) == len(results)
        assert len(report["steps"]) == end.data["turns"]
