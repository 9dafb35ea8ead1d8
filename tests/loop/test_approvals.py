"""People in the loop, without IO: approvals, questions, guardrails, stuck loops, recovery."""

from __future__ import annotations

import pytest

from roost.loop import (
    CallModel,
    CancelRun,
    CheckFinished,
    Event,
    FinishRun,
    Guardrail,
    HumanWait,
    PermissionDecided,
    PermissionWait,
    Policy,
    RunTool,
    StartClock,
    TimeUp,
    ToolFinished,
    fold,
    parse_rule,
    secrets_guardrails,
)

from ._driver import Driver, calls, only, text, tool_use, types

AGENT = Policy(home="/home/me")


def bash(call_id: str, command: str) -> dict:
    return tool_use(call_id, "bash", {"command": command})


def waiting_driver(*blocks, **submit) -> Driver:
    d = Driver(cwd="/p")
    submit.setdefault("policy", AGENT)
    d.submit("task", mode="agent", **submit)
    d.reply(*blocks)
    return d


def test_an_asking_call_waits_and_runs_once_approved():
    d = Driver(cwd="/p")
    d.submit("task", mode="agent", policy=AGENT)
    t = d.reply(bash("c1", "make"), tool_use("c2", "read", {"path": "a"}))
    assert types(t) == ["message.assistant", "permission.requested", "tool.started"]
    asked = only(t, "permission.requested").data
    assert asked["call_id"] == "c1" and asked["tool"] == "bash" and asked["input"] == {"command": "make"}
    assert asked["reason"] == "bash asks in agent mode"
    assert asked["session_rules"] == ["bash(make)"]
    assert [e.call_id for e in t.effects if isinstance(e, RunTool)] == ["c2"]
    d.finish_tool("c2")
    assert d.state.run.waiting.keys() == {"c1"}
    t = d.approve("c1", client="shell#2")
    assert types(t) == ["permission.resolved", "tool.started"]
    assert only(t, "permission.resolved").data == {
        "call_id": "c1", "tool": "bash", "decision": "approve", "scope": "once", "client": "shell#2",
    }
    assert only(t, "tool.started").data == {"call_id": "c1", "name": "bash", "input": {"command": "make"}, "cleared": True}
    assert t.effects == (RunTool(d.state.run.id, "c1", "bash", {"command": "make"}),)
    t = d.finish_tool("c1")
    assert isinstance(t.effects[-1], CallModel)


def test_a_call_that_asks_starts_only_once_approved_and_a_denied_one_never():
    d = Driver(cwd="/p")
    d.submit("task", mode="agent", policy=AGENT)
    t = d.reply(tool_use("r1", "read", {"path": "a"}), bash("c1", "make"), bash("c2", "rm x"), tool_use("r2", "read", {"path": "b"}))
    # Each call in the model's order: the reads start, the others are asked about.
    assert [(e.type, e.data["call_id"]) for e in t.events[1:]] == [
        ("tool.started", "r1"), ("permission.requested", "c1"), ("permission.requested", "c2"), ("tool.started", "r2"),
    ]
    assert d.state.run.pending == ("r1", "c1", "c2", "r2")
    t = d.deny("c2")
    assert types(t) == ["permission.resolved", "tool.finished"]
    t = d.approve("c1")
    assert types(t) == ["permission.resolved", "tool.started"]
    for call_id in ("r1", "r2", "c1"):
        d.finish_tool(call_id)
    seen = [(e.type, e.data.get("call_id")) for e in d.log if e.data.get("call_id") in ("c1", "c2")]
    assert seen == [
        ("permission.requested", "c1"), ("permission.requested", "c2"),
        ("permission.resolved", "c2"), ("tool.finished", "c2"),
        ("permission.resolved", "c1"), ("tool.started", "c1"), ("tool.finished", "c1"),
    ]


def test_a_request_stored_after_its_calls_start_is_approved_without_starting_it_again():
    # Daemons before requests came first stored tool.started, then permission.requested.
    d = Driver(cwd="/p")
    d.submit("task", mode="agent", policy=AGENT)
    run = d.state.run.id
    old = [
        Event("message.assistant", "s1", run, 10.0, {"content": [bash("c1", "make")], "usage": {}, "stop_reason": "tool_use"}),
        Event("tool.started", "s1", run, 10.0, {"call_id": "c1", "name": "bash", "input": {"command": "make"}}),
        Event("permission.requested", "s1", run, 10.0, {
            "call_id": "c1", "tool": "bash", "input": {"command": "make"}, "reason": "bash asks in agent mode",
            "session_rules": ["bash(make)"], "outside": False,
        }),
    ]
    d.state = fold(old, d.state)
    assert d.state.run.pending == ("c1",) and d.state.run.waiting["c1"].started
    t = d.approve("c1")
    assert types(t) == ["permission.resolved"]
    assert t.effects == (RunTool(d.state.run.id, "c1", "bash", {"command": "make"}),)


def test_the_first_answer_wins():
    d = waiting_driver(bash("c1", "make"))
    d.deny("c1", client="a#1", reason="not now")
    d.reject(PermissionDecided("c1", True, d.tick(), client="b#2"))
    finished = [e for e in d.log if e.type == "tool.finished"][-1]
    assert finished.data["result"] == "denied by a#1: not now"
    assert finished.data["is_error"] is True


def test_a_denied_call_reaches_the_model_as_an_error_and_the_run_goes_on():
    d = waiting_driver(bash("c1", "rm -rf build"))
    t = d.deny("c1", client="cli#1")
    assert types(t) == ["permission.resolved", "tool.finished", "step.finished", "step.started"]
    [call] = [e for e in t.effects if isinstance(e, CallModel)]
    result = call.messages[-1]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": "c1", "content": "denied by cli#1", "is_error": True}


def test_a_deny_rule_answers_at_once_without_asking():
    p = Policy((parse_rule("bash(rm *)", "deny", "config.toml"),))
    d = waiting_driver(bash("c1", "ls && rm -rf /"), policy=p)
    [finished] = [e for e in d.log if e.type == "tool.finished"]
    assert finished.data["is_error"] and "permission denied" in finished.data["result"]
    assert "rule deny bash(rm *) (from config.toml)" in finished.data["result"]
    assert not any(e.type == "permission.requested" for e in d.log)


def test_approval_for_the_session_adds_exactly_the_rules_offered():
    d = waiting_driver(bash("c1", "git status && npm test"))
    offered = [e for e in d.log if e.type == "permission.requested"][-1].data["session_rules"]
    assert offered == ["bash(git status)", "bash(npm test)"]
    t = d.approve("c1", scope="session", client="cli#1")
    assert only(t, "permission.resolved").data["rules"] == offered
    assert only(t, "permission.resolved").data["scope"] == "session"
    d.finish_tool("c1")
    d.reply(text("done"))
    d.submit("again", mode="agent", policy=AGENT)
    t = d.reply(bash("c2", "npm test"), bash("c3", "git log"), bash("c4", "npm test --watch"))
    assert [e.call_id for e in t.effects if isinstance(e, RunTool)] == ["c2"]
    assert [e.data["call_id"] for e in t.events if e.type == "permission.requested"] == ["c3", "c4"]
    assert [str(r) for r in d.state.allowed] == offered


def test_approval_for_the_session_with_any_arguments_adds_the_wider_rules_offered():
    d = waiting_driver(bash("c1", "git status && ls > out.txt"))
    asked = [e for e in d.log if e.type == "permission.requested"][-1].data
    # The line's commands with any arguments (ls run bare: as it is too), and the same write.
    assert asked["session_rules"] == ["bash(git status)", "bash(ls)", "write(/p/**)"]
    assert asked["session_rules_any"] == ["bash(git *)", "bash(ls)", "bash(ls *)", "write(/p/**)"]
    t = d.approve("c1", scope="session_any", client="cli#1")
    resolved = only(t, "permission.resolved").data
    assert resolved["scope"] == "session" and resolved["rules"] == asked["session_rules_any"]
    d.finish_tool("c1")
    d.reply(text("done"))
    d.submit("again", mode="agent", policy=AGENT)
    t = d.reply(bash("c2", "git log -n 1"), bash("c3", "ls -la"), bash("c4", "rm x"), bash("c5", "gitk"))
    # (Commands run one at a time: c3 after c2.)
    assert [e.call_id for e in t.effects if isinstance(e, RunTool)] == ["c2"]
    assert [e.data["call_id"] for e in t.events if e.type == "permission.requested"] == ["c4", "c5"]


def test_the_wider_choice_is_offered_only_where_it_is_wider_and_never_for_unknown_words():
    # A write inside the project offers the folder already; a line with $X offers nothing.
    for call in (tool_use("c1", "write", {"path": "a.txt", "content": "x"}), bash("c1", "rm $X"), bash("c1", "eval make")):
        d = waiting_driver(call)
        asked = [e for e in d.log if e.type == "permission.requested"][-1].data
        assert "session_rules_any" not in asked
        assert d.state.run.waiting["c1"].to_map().get("session_rules_any") is None
    # Without a wider offer, session_any adds what session would.
    d = waiting_driver(tool_use("c1", "write", {"path": "a.txt", "content": "x"}))
    assert only(d.approve("c1", scope="session_any"), "permission.resolved").data["rules"] == ["write(/p/**)"]
    d = waiting_driver(bash("c1", "make"))
    d.reject(PermissionDecided("c1", True, d.tick(), scope="everything"))


def test_a_request_that_offers_no_rule_is_approved_once_even_for_the_session():
    d = waiting_driver(bash("c1", "eval make"))
    asked = [e for e in d.log if e.type == "permission.requested"][-1].data
    assert asked["session_rules"] == [] and "approve it once" in asked["reason"]
    t = d.approve("c1", scope="session", client="cli#1")
    resolved = only(t, "permission.resolved").data
    assert resolved["scope"] == "once" and "rules" not in resolved
    assert d.state.allowed == ()


def test_a_tool_the_agent_lacks_is_an_error_in_every_mode():
    for mode in ("agent", "full", "exec"):
        d = Driver(cwd="/p")
        d.submit("task", mode=mode, agent="reader", tools=("read",), policy=AGENT)
        t = d.reply(bash("c1", "rm -rf /"), tool_use("c2", "read", {"path": "a"}), tool_use("c3", "ask_human"))
        assert [e.call_id for e in t.effects if isinstance(e, RunTool)] == ["c2"]
        assert not any(e.type == "permission.requested" or e.type == "human.asked" for e in t.events)
        finished = {e.data["call_id"]: e.data for e in t.events if e.type == "tool.finished"}
        assert finished["c1"]["result"] == "the reader agent has no tool bash" and finished["c1"]["is_error"]
        assert finished["c3"]["result"] == "the reader agent has no tool ask_human"
    d = Driver(cwd="/p")
    d.submit("task", mode="plan", tools=("read",))
    t = d.reply(bash("c1", "ls"))
    assert only(t, "tool.finished").data["result"] == "not run: plan mode runs no tools"


def test_an_approval_timeout_starts_a_clock():
    d = Driver(cwd="/p", ts=100.0)
    d.submit("task", mode="agent", policy=AGENT, approval_timeout=30.0)
    t = d.reply(bash("c1", "make"))
    deadline = only(t, "permission.requested").data["deadline"]
    assert StartClock(d.state.run.id, deadline, "c1") in t.effects
    assert deadline == only(t, "permission.requested").ts + 30.0


def test_an_unanswered_request_is_denied_by_the_timeout_when_its_clock_runs_out():
    d = Driver(cwd="/p", ts=100.0)
    d.submit("task", mode="agent", policy=AGENT, approval_timeout=30.0)
    deadline = only(d.reply(bash("c1", "make")), "permission.requested").data["deadline"]
    t = d.feed(TimeUp(deadline, "c1"))
    assert types(t) == ["permission.resolved", "tool.finished", "step.finished", "step.started"]
    assert only(t, "permission.resolved").data == {
        "call_id": "c1", "tool": "bash", "decision": "deny", "scope": "once", "client": "timeout",
        "reason": "no answer within 30 s (the approval timeout)",
    }
    finished = only(t, "tool.finished").data
    assert finished["result"] == "denied by timeout: no answer within 30 s (the approval timeout)"
    assert finished["is_error"] and finished["meta"] == {"denied": True}
    assert d.state.run is not None and not d.state.run.waiting


def test_a_clock_that_runs_out_after_the_answer_changes_nothing():
    d = Driver(cwd="/p", ts=100.0)
    d.submit("task", mode="agent", policy=AGENT, approval_timeout=30.0)
    d.reply(bash("c1", "make"), bash("c2", "make"))
    d.approve("c1")
    before = d.state
    t = d.feed(TimeUp(d.tick(30.0), "c1"))
    assert (t.events, t.effects, t.state) == ((), (), before)
    # The other request's clock still denies it; the run goes on, not timed out.
    t = d.feed(TimeUp(d.now, "c2"))
    assert only(t, "permission.resolved").data["client"] == "timeout"
    assert d.state.run is not None and d.state.run.pending == ("c1",)


def test_after_a_restart_the_clock_keeps_the_deadline_and_the_wait_it_says():
    d = Driver(cwd="/p", ts=100.0)
    d.submit("task", mode="agent", policy=AGENT, approval_timeout=30.0)
    deadline = only(d.reply(bash("c1", "make")), "permission.requested").data["deadline"]
    d.tick(20.0)
    t = d.interrupted()
    assert StartClock(d.state.run.id, deadline, "c1") in t.effects
    t = d.feed(TimeUp(deadline + 1.0, "c1"))
    assert only(t, "permission.resolved").data["reason"] == "no answer within 30 s (the approval timeout)"


def test_a_request_without_a_timeout_has_no_clock_to_run_out():
    d = waiting_driver(bash("c1", "make"))
    d.reject(TimeUp(d.tick(), "c1"))


def test_open_requests_are_typed_waits_listed_as_pending_always_listed_them():
    d = Driver(cwd="/p", ts=100.0)
    d.submit("task", mode="agent", policy=AGENT, approval_timeout=30.0)
    d.reply(bash("c1", "make"), tool_use("q1", "ask_human", {"question": "Which db?", "choices": ["pg", "sqlite"]}))
    at = d.now
    asked, question = d.state.run.waiting["c1"], d.state.run.waiting["q1"]
    assert asked == PermissionWait(
        "bash", {"command": "make"}, at, reason="bash asks in agent mode", session_rules=("bash(make)",),
        session_rules_any=("bash(make)", "bash(make *)"), deadline=at + 30
    )
    assert question == HumanWait("Which db?", ("pg", "sqlite"), at)
    assert asked.to_map() == {
        "kind": "permission", "name": "bash", "input": {"command": "make"}, "outside": False,
        "reason": "bash asks in agent mode", "session_rules": ["bash(make)"], "ts": at, "deadline": at + 30,
        "session_rules_any": ["bash(make)", "bash(make *)"],
    }
    assert question.to_map() == {"kind": "human", "question": "Which db?", "choices": ["pg", "sqlite"], "ts": at}
    # No timeout: no deadline listed.
    d = waiting_driver(bash("c1", "make"))
    assert "deadline" not in d.state.run.waiting["c1"].to_map()


def test_ask_human_waits_for_an_answer_that_becomes_the_result():
    d = waiting_driver(tool_use("q1", "ask_human", {"question": "Which db?", "choices": ["pg", "sqlite"]}))
    asked = [e for e in d.log if e.type == "human.asked"][-1]
    assert asked.data == {"call_id": "q1", "question": "Which db?", "choices": ["pg", "sqlite"]}
    d.reject(ToolFinished("q1", "not a person", d.tick()))
    t = d.answer("q1", "sqlite", client="shell#1")
    assert types(t)[:3] == ["human.answered", "tool.finished", "step.finished"]
    assert only(t, "tool.finished").data["result"] == "sqlite"


def test_a_malformed_question_is_an_error_result():
    d = waiting_driver(tool_use("q1", "ask_human", {"choices": "x"}))
    finished = [e for e in d.log if e.type == "tool.finished"][-1]
    assert finished.data["is_error"] and "question" in finished.data["result"]


def test_abort_resolves_every_open_request_once():
    d = waiting_driver(bash("c1", "make"), tool_use("q1", "ask_human", {"question": "?"}))
    t = d.abort()
    assert types(t)[:4] == ["permission.resolved", "human.answered", "tool.finished", "tool.finished"]
    assert only(t, "permission.resolved").data["client"] == "roost"
    assert only(t, "human.answered").data["cancelled"] is True
    assert d.state.run is None


def test_a_restart_keeps_open_requests_open_and_reports_running_tools():
    d = waiting_driver(bash("c1", "make"), bash("c2", "ls"))
    d.approve("c2")  # c2 was running when the daemon died; c1 still waits
    t = d.interrupted()
    assert types(t) == ["tool.finished"]
    assert only(t, "tool.finished").data["call_id"] == "c2"
    assert d.state.run is not None and set(d.state.run.waiting) == {"c1"}
    t = d.approve("c1")
    assert [e.call_id for e in t.effects if isinstance(e, RunTool)] == ["c1"]


def test_a_restart_with_nothing_waiting_ends_the_run():
    d = waiting_driver(tool_use("c1", "read", {"path": "a"}))
    t = d.interrupted()
    assert t.effects[-1] == FinishRun(d.log[-1].run, "error")


def test_a_secret_in_a_tool_result_is_withheld_and_ends_the_run():
    d = Driver(cwd="/p")
    d.submit("task", guardrails=secrets_guardrails())
    d.reply(tool_use("c1", "read", {"path": ".env"}), tool_use("c2", "bash", {"command": "sleep 9"}))
    t = d.finish_tool("c1", "AWS_KEY=AKIAABCDEFGHIJKLMNOP\n")
    finished = [e for e in t.events if e.type == "tool.finished"]
    assert finished[0].data["result"] == "[withheld: guardrail secrets: the input matched an AWS access key id]"
    assert "AKIAABCDEFGHIJKLMNOP" not in str([e.to_map() for e in d.log])
    end = only(t, "run.finished").data
    assert (end["reason"], end["text"]) == ("guardrail", "guardrail secrets: the input matched an AWS access key id")
    assert any(isinstance(e, CancelRun) for e in t.effects)


def test_an_output_guardrail_stops_the_calls_of_the_reply():
    rail = Guardrail("no-prod", "output", r"prod\.example\.com", "the production host")
    d = Driver(cwd="/p")
    d.submit("task", guardrails=(rail,))
    t = d.reply(tool_use("c1", "bash", {"command": "ssh prod.example.com"}))
    assert not any(isinstance(e, RunTool) for e in t.effects)
    assert only(t, "run.finished").data["reason"] == "guardrail"


WARN_INPUT = Guardrail("todo", "input", r"\bTODO\b", "a TODO", action="warn")
WARN_OUTPUT = Guardrail("prod", "output", r"prod\.example\.com", "the production host", action="warn")


def test_a_warning_guardrail_reports_a_tool_result_and_the_run_goes_on():
    d = Driver(cwd="/p")
    d.submit("task", guardrails=(WARN_INPUT,))
    d.reply(tool_use("c1", "read", {"path": "a.py"}))
    t = d.finish_tool("c1", "x = 1  # TODO: y")
    assert types(t) == ["tool.finished", "guardrail.warned", "step.finished", "step.started"]
    assert only(t, "tool.finished").data["result"] == "x = 1  # TODO: y"  # not withheld
    warned = only(t, "guardrail.warned").data
    assert warned == {"name": "todo", "on": "input", "what": "a TODO", "origin": "tool", "call_id": "c1",
                      "message": "guardrail todo: the input matched a TODO"}
    assert calls(t) and d.state.run is not None


def test_a_warning_on_the_reply_lets_its_calls_run():
    d = Driver(cwd="/p")
    d.submit("task", guardrails=(WARN_OUTPUT,))
    t = d.reply(text("checking prod.example.com"), tool_use("c1", "bash", {"command": "curl prod.example.com"}))
    assert types(t)[:3] == ["message.assistant", "guardrail.warned", "tool.started"]
    assert only(t, "guardrail.warned").data["origin"] == "reply"  # one warning for the whole reply
    assert [e.call_id for e in t.effects if isinstance(e, RunTool)] == ["c1"]


def test_the_task_and_steering_are_warned_about_too_and_a_stop_rule_wins():
    d = Driver(cwd="/p")
    t = d.submit("fix the TODO", guardrails=(WARN_INPUT,))
    assert types(t) == ["run.started", "message.user", "guardrail.warned", "step.started"]
    t = d.steer("and the other TODO")
    assert types(t) == ["steer.queued", "guardrail.warned"] and only(t, "guardrail.warned").data["origin"] == "steer"
    stop = Guardrail("todo-stop", "input", r"\bTODO\b", "a TODO")
    d = Driver(cwd="/p")
    t = d.submit("fix the TODO", guardrails=(WARN_INPUT, stop))
    assert types(t) == ["run.started", "message.user", "run.finished"]
    assert only(t, "run.finished").data["reason"] == "guardrail"


def test_a_warning_on_the_check_output_and_the_next_attempt_starts():
    d = Driver(cwd="/p")
    d.submit("task", mode="exec", check="check.sh", attempts=2, guardrails=(WARN_INPUT,))
    d.reply(text("done"))
    t = d.feed(CheckFinished(1, "FAILED: TODO left", d.tick()))
    assert types(t) == ["check.finished", "guardrail.warned", "message.user", "step.started"]
    assert only(t, "guardrail.warned").data["origin"] == "check"


def test_a_guardrails_action_is_kept_in_run_started():
    d = Driver(cwd="/p")
    d.submit("task", guardrails=(WARN_INPUT,))
    assert d.state.run is not None and d.state.run.settings.guardrails == (WARN_INPUT,)
    assert Guardrail.from_map({"name": "old", "on": "input", "pattern": "x"}).action == "stop"


def test_a_task_with_a_secret_never_reaches_the_model():
    d = Driver(cwd="/p")
    t = d.submit("use key sk-ant-abcdefghijklmnopqrstuvwx", guardrails=secrets_guardrails())
    assert types(t) == ["run.started", "message.user", "run.finished"]
    assert not any(isinstance(e, CallModel) for e in t.effects)
    assert "sk-ant" not in only(t, "message.user").data["text"]


def test_the_same_calls_three_times_nudge_and_a_fourth_time_stop():
    d = Driver(cwd="/p")
    d.submit("task")
    for n in range(1, 4):
        d.reply(tool_use(f"c{n}", "read", {"path": "a"}))
        t = d.finish_tool(f"c{n}")
        nudges = [e for e in t.events if e.type == "message.user" and e.data["origin"] == "nudge"]
        assert len(nudges) == (1 if n == 3 else 0)
    t = d.reply(tool_use("c4", "read", {"path": "a"}))
    end = only(t, "run.finished").data
    assert end["reason"] == "stuck" and "4 times" in end["text"]
    assert not any(isinstance(e, RunTool) for e in t.effects)


def test_different_inputs_are_not_a_loop():
    d = Driver(cwd="/p")
    d.submit("task")
    for n in range(1, 6):
        d.reply(tool_use(f"c{n}", "read", {"path": f"file{n % 2}"}))
        d.finish_tool(f"c{n}")
    assert d.state.run is not None


@pytest.mark.parametrize("mode", ["full", "exec"])
def test_full_and_exec_never_ask(mode):
    d = Driver(cwd="/p")
    d.submit("task", mode=mode, policy=AGENT)
    t = d.reply(bash("c1", "make"))
    assert [e.call_id for e in t.effects if isinstance(e, RunTool)] == ["c1"]
