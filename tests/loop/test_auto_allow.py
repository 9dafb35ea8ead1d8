"""``[sandbox] auto_allow``: with ``Policy.sandboxed``, agent mode runs the bash calls no rule
asks about or denies; nothing else changes."""

from __future__ import annotations

from roost.loop import Policy, RunSettings, SessionState, Submit, decide, fold, parse_rule, step

CWD = "/work/proj"


def policy(*rules: str, sandboxed: bool = True) -> Policy:
    parsed = [parse_rule(text, action, "test") for action, _, text in (r.partition(" ") for r in rules)]
    return Policy(tuple(parsed), False, "/home/me", sandboxed)


def action(p: Policy, name: str, mode: str = "agent", **input: str) -> str:
    return decide(p, mode, (), name, input, CWD).action


def test_sandboxed_bash_runs_unasked_in_agent_mode() -> None:
    assert action(policy(), "bash", command="make && ./run-tests") == "allow"
    assert "sandbox" in decide(policy(), "agent", (), "bash", {"command": "ls"}, CWD).reason
    assert action(policy(sandboxed=False), "bash", command="make") == "ask"


def test_rules_still_ask_and_deny_and_nothing_else_is_allowed() -> None:
    p = policy("ask bash(git push*)", "deny bash(rm *)")
    assert action(p, "bash", command="git push") == "ask"
    assert action(p, "bash", command="ls && rm -rf x") == "deny"
    assert action(p, "write", path="a.txt") == "ask"
    assert action(p, "time__now") == "ask"
    assert action(p, "bash", "plan", command="ls") == "deny"


def test_the_policy_is_recorded_and_read_back() -> None:
    assert Policy.from_map(policy().to_map()).sandboxed is True
    assert "sandboxed" not in policy(sandboxed=False).to_map()


def test_run_started_records_the_sandbox() -> None:
    sandbox = {"mode": "workspace", "available": True, "writable": [CWD]}
    submit = Submit(run="r1", task="t", ts=1.0, settings=RunSettings("m", policy=policy(), sandbox=sandbox))
    transition = step(SessionState("s", cwd=CWD), submit)
    started = next(e for e in transition.events if e.type == "run.started")
    assert started.data["sandbox"] == sandbox and started.data["permissions"]["sandboxed"] is True
    state = fold(transition.events, SessionState("s"))
    assert state.run is not None and state.run.settings.sandbox == sandbox and state.run.settings.policy.sandboxed
    unsaid = step(SessionState("s", cwd=CWD), Submit(run="r1", task="t", ts=1.0, settings=RunSettings("m")))
    assert "sandbox" not in next(e for e in unsaid.events if e.type == "run.started").data
