"""A run's settings: one value, recorded in ``run.started`` and read back from it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from roost.loop import (
    EXEC_ATTEMPTS,
    EXEC_TIME_BOX,
    Event,
    Guardrail,
    Policy,
    RunSettings,
    SessionState,
    Submit,
    fold,
    parse_rule,
    step,
)

_names = st.sampled_from(("read", "write", "bash", "glob", "task", "reviewer", "time__now"))
_tools = st.lists(_names, unique=True).map(tuple)
_rules = st.lists(st.sampled_from(("bash(ls:*)", "write(src/**)", "read")), max_size=2)

settings_values = st.builds(
    RunSettings,
    model=st.sampled_from(("scripted/demo", "anthropic/claude-sonnet-4-5", "openai/gpt-4o")),
    agent=st.sampled_from(("default", "reviewer")),
    mode=st.sampled_from(("plan", "agent", "full", "exec")),
    max_turns=st.integers(1, 50),
    tools=_tools,
    policy=st.builds(
        lambda rules, yes, sandboxed, protected: Policy(
            tuple(parse_rule(r, "allow", "config") for r in rules), yes, "/home/u", sandboxed, protected
        ),
        _rules,
        st.booleans(),
        st.booleans(),
        st.lists(st.sampled_from(("/p/.git/config", "/p/.roost")), unique=True).map(tuple),
    ),
    guardrails=st.lists(
        st.builds(Guardrail, st.sampled_from(("keys", "rm")), st.sampled_from(("input", "output")), st.just("sk-[a-z]+")),
        max_size=2,
    ).map(tuple),
    approval_timeout=st.none() | st.floats(1, 3600),
    price=st.none() | st.just({"input": 3.0, "output": 15.0}),
    check=st.none() | st.just("./check.sh"),
    attempts=st.integers(1, 9),
    time_box=st.floats(1, 7200),
    context_window=st.none() | st.integers(1000, 400_000),
    compact_at=st.floats(0.1, 0.95),
    keep_turns=st.integers(0, 10),
    subagents=st.lists(st.sampled_from(("task", "reviewer")), unique=True).map(tuple),
    delegates=st.lists(st.sampled_from(("reviewer", "tester")), unique=True).map(tuple),
    think=st.none() | st.integers(1024, 32_000),
    max_tokens=st.none() | st.integers(1, 64_000),
    read_only=_tools,
    sandbox=st.none() | st.just({"mode": "workspace", "available": True}),
    stop_hooks=st.booleans(),
    depth=st.integers(0, 3),
)


@given(settings_values)
def test_settings_as_a_run_keeps_them_survive_their_map(settings: RunSettings) -> None:
    recorded = settings.recorded()
    assert RunSettings.from_map(recorded.to_map()) == recorded


@given(settings_values)
def test_the_run_holds_the_settings_its_run_started_recorded(settings: RunSettings) -> None:
    state = fold([Event("session.created", "s", None, 0.0, {"cwd": "/p"}).numbered(1)], SessionState("s"))
    t = step(state, Submit("r1", "task", 10.0, settings))
    started = t.events[0]
    assert started.type == "run.started"
    run = fold([started.numbered(2)], state).run
    assert run is not None and run.settings == settings.recorded()
    if settings.mode == "exec":
        assert run.deadline == started.data["deadline"] == 10.0 + settings.time_box


def test_what_a_mode_does_not_use_is_not_recorded() -> None:
    plan = RunSettings("m", mode="plan", tools=("read", "bash"), read_only=("read",), check="x", attempts=2)
    assert plan.recorded() == RunSettings("m", mode="plan")
    agent = RunSettings("m", tools=("bash",), read_only=("read", "bash"), time_box=5.0)
    assert agent.recorded() == RunSettings("m", tools=("bash",), read_only=("bash",))


def test_a_run_started_stored_before_settings_were_one_value_still_folds() -> None:
    # As a daemon of the previous API level stored them: no time_box, attempts only in exec.
    agent_run = {
        "task": "t", "model": "anthropic/m", "agent": "default", "mode": "agent", "max_turns": 12,
        "tools": ["read", "bash"], "permissions": {"rules": [], "yes": False, "home": "/home/u"},
        "read_only": ["read"], "approval_timeout": 30.0, "request_id": "q1",
    }
    exec_run = {
        "task": "t", "model": "anthropic/m", "agent": "default", "mode": "exec", "max_turns": 4,
        "tools": ["bash"], "permissions": {"rules": [], "yes": True, "home": "/home/u"},
        "check": "./check.sh", "attempts": 3, "deadline": 130.0,
    }
    created = Event("session.created", "s", None, 0.0, {"cwd": "/p"}).numbered(1)
    run = fold([created, Event("run.started", "s", "r1", 100.0, agent_run).numbered(2)]).run
    assert run is not None
    assert run.settings == RunSettings(
        "anthropic/m", tools=("read", "bash"), policy=Policy(home="/home/u"), read_only=("read",), approval_timeout=30.0
    )
    run = fold([created, Event("run.started", "s", "r1", 100.0, exec_run).numbered(2)]).run
    assert run is not None and run.deadline == 130.0
    assert (run.settings.mode, run.settings.check, run.settings.attempts, run.settings.max_turns) == (
        "exec", "./check.sh", 3, 4
    )
    assert (EXEC_ATTEMPTS, EXEC_TIME_BOX) == (RunSettings("m").attempts, RunSettings("m").time_box)


def test_a_reply_is_previewed_where_a_person_may_be_asked_about_it() -> None:
    assert RunSettings("m", mode="agent").previews()
    assert not RunSettings("m", mode="agent", policy=Policy(yes=True)).previews()
    assert not any(RunSettings("m", mode=mode).previews() for mode in ("plan", "full", "exec"))


def test_a_sub_agent_works_with_approvals_unless_its_caller_has_none() -> None:
    agent, full, exec_, plan = (RunSettings("m", mode=mode) for mode in ("agent", "full", "exec", "plan"))
    assert [caller.subagent_mode(None) for caller in (agent, full, exec_, plan)] == ["agent", "full", "full", "agent"]
    # Its own agent's mode holds, but never plan or exec.
    assert agent.subagent_mode("full") == "full" and full.subagent_mode("agent") == "agent"
    assert full.subagent_mode("plan") == "full" and agent.subagent_mode("exec") == "agent"
