"""Permission decisions without IO: presets by mode, rules and their patterns, shell lines
judged on the bash grammar, resolved paths, and what approving for the session adds."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from roost.loop import Policy, RuleError, decide, glob_matcher, parse_rule, paths_named

CWD = "/work/proj"
HOME = "/home/me"


def policy(*rules: str, yes: bool = False) -> Policy:
    parsed = []
    for rule in rules:
        action, _, text = rule.partition(" ")
        parsed.append(parse_rule(text, action, "test"))
    return Policy(tuple(parsed), yes, HOME)


def action(p: Policy, name: str, mode: str = "agent", session=(), resolved=None, **input) -> str:
    return decide(p, mode, tuple(session), name, input, CWD, resolved).action


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


def test_a_hooks_approval_turns_an_ask_into_an_allow_but_not_an_ask_rules_nor_a_deny():
    def approved(p: Policy, name: str, **input: object) -> str:
        return decide(p, "agent", (), name, input, CWD, None, approved=True).action

    p = policy("deny bash(rm*)", "ask bash(git push*)", "ask web_fetch(example.com)", "ask write(secret/**)")
    assert approved(p, "bash", command="touch x") == "allow"
    assert approved(p, "write", path="a.txt", content="") == "allow"
    assert approved(p, "bash", command="rm -rf x") == "deny"
    assert approved(p, "bash", command="git push") == "ask"
    assert approved(p, "bash", command="ls && git push --force") == "ask"
    assert approved(p, "web_fetch", url="https://example.com/") == "ask"
    assert approved(p, "write", path="secret/k", content="") == "ask"
    # A protected path, and a line the deny rules cannot be checked against, ask still.
    assert approved(replace(p, protected=(CWD + "/.git",)), "write", path=".git/config", content="") == "ask"
    assert approved(p, "bash", command="eval \"$X\"") == "ask"
    assert approved(policy(), "bash", command="eval \"$X\"") == "allow"


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


def test_quotes_in_a_command_pattern_are_read_as_the_shell_reads_them():
    p = policy('allow bash(git commit -m "fix the build")', "deny bash(git push 'origin')", 'allow bash(echo "*")')
    # A quoted word is one word, its spaces and quotes as written in the command or not.
    assert action(p, "bash", command='git commit -m "fix the build"') == "allow"
    assert action(p, "bash", command="git commit -m 'fix the build'") == "allow"
    # (Words are matched joined by one space, as ever: `-m fix the build` reads the same.)
    assert action(p, "bash", command='git commit -m "fix  the build"') == "ask"
    assert action(p, "bash", command='git commit -m "fix the build" --amend') == "ask"
    # A deny rule written with quotes holds (it used to match nothing).
    assert action(p, "bash", command="git push origin") == "deny"
    # A quoted * is a star, not any text.
    assert action(p, "bash", command="echo '*'") == "allow"
    assert action(p, "bash", command="echo hello") == "ask"
    # A quote that does not close is read as written, as before.
    assert action(policy("allow bash(echo it's)"), "bash", command="echo its") == "ask"


def test_a_session_rule_keeps_the_quoting_of_what_it_allows():
    line = 'git commit -m "it\'s  done"'
    d = decide(policy(), "agent", (), "bash", {"command": line}, CWD)
    assert d.session_rules == ("bash(git commit -m 'it'\\''s  done')",)
    session = tuple(parse_rule(r, "allow", "session") for r in d.session_rules)
    assert action(policy(), "bash", session=session, command=line) == "allow"
    assert action(policy(), "bash", session=session, command="git commit -m \"it's done\"") == "ask"


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


def test_session_rules_are_the_exact_commands_no_rule_allowed():
    p = policy("allow bash(git status*)")
    d = decide(p, "agent", (), "bash", {"command": "git status && FOO=1 npm test"}, CWD)
    assert d.action == "ask" and d.reason == "bash asks in agent mode (no rule allows npm test)"
    assert d.session_rules == ("bash(npm test)",)
    session = tuple(parse_rule(r, "allow", "session") for r in d.session_rules)
    assert action(p, "bash", session=session, command="git status && npm test") == "allow"
    assert action(p, "bash", session=session, command="npm test --watch") == "ask"
    assert action(p, "bash", session=session, command="git log && npm test") == "ask"
    w = decide(policy(), "agent", (), "write", {"path": "a.txt"}, CWD)
    assert w.session_rules == (f"write({CWD}/**)",)
    session = tuple(parse_rule(r, "allow", "session") for r in w.session_rules)
    assert action(policy(), "write", session=session, path="b/c.txt") == "allow"
    assert action(policy(), "write", session=session, path="../outside.txt") == "ask"


def test_session_rules_are_escaped_and_cover_writes_that_asked():
    line = "ls *.py > '/tmp/out[1].txt'"
    d = decide(policy(), "agent", (), "bash", {"command": line}, CWD)
    assert d.session_rules == ("bash(ls [*].py)", "write(/tmp/out[[]1].txt)")
    session = tuple(parse_rule(r, "allow", "session") for r in d.session_rules)
    assert action(policy(), "bash", session=session, command=line) == "allow"
    assert action(policy(), "bash", session=session, command=line.replace("*", "x")) == "ask"
    assert action(policy(), "bash", session=session, command="ls *.py > /tmp/out1.txt") == "ask"


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("f(){ rm x; }; f", "defines a function"),
        ("echo $HOME", ""),
        ("eval ls", "eval runs a string"),
    ],
)
def test_lines_that_cannot_be_named_exactly_offer_no_session_rule(line, why):
    d = decide(policy(), "agent", (), "bash", {"command": line}, CWD)
    assert d.action == "ask" and d.session_rules == ()
    assert why in d.reason
    if why:
        assert d.reason.endswith("so no rule allows it: approve it once if it is fine")


def test_an_ask_rule_offers_no_session_rule_it_would_outdo():
    d = decide(policy("ask bash(git push*)"), "agent", (), "bash", {"command": "git push"}, CWD)
    assert (d.action, d.session_rules) == ("ask", ())
    d = decide(policy("ask write(*.lock)"), "agent", (), "write", {"path": "a.lock"}, CWD)
    assert (d.action, d.session_rules) == ("ask", ())


def test_resolved_paths_decide_and_deny_rules_see_both():
    p = policy("deny read(~/.ssh/**)", "allow write(src/**)")
    ssh = {"link": f"{HOME}/.ssh/id_ed25519", CWD: CWD}
    d = decide(p, "agent", (), "read", {"path": "link"}, CWD, ssh)
    assert d.action == "deny" and f"which is {HOME}/.ssh/id_ed25519" in d.reason
    assert action(p, "grep", resolved={"docs": f"{HOME}/.ssh", CWD: CWD}, pattern="x", path="docs") == "deny"
    out = {"src/x.py": "/etc/passwd", CWD: CWD}
    d = decide(p, "agent", (), "write", {"path": "src/x.py"}, CWD, out)
    assert (d.action, d.outside) == ("ask", True) and d.session_rules == ("write(/etc/passwd)",)
    # The working directory itself may be a link: inside is judged on the real one.
    moved = {"a.txt": "/real/proj/a.txt", CWD: "/real/proj"}
    assert decide(p, "agent", (), "read", {"path": "a.txt"}, CWD, moved).outside is False


@pytest.mark.parametrize("path", ["//home/me/.ssh/id", "/proc/self/root/home/me/.ssh/id", "/tmp/../home/me/./.ssh//id",
                                  "/proc/thread-self/root//home/me/.ssh/id"])
def test_odd_spellings_of_a_path_are_normalised(path):
    assert action(policy("deny read(~/.ssh/**)"), "read", path=path) == "deny"


def test_paths_named_are_what_the_daemon_resolves():
    assert paths_named("read", {"path": "a"}) == ("a",)
    assert paths_named("grep", {"pattern": "x"}) == (".",)
    assert paths_named("bash", {"command": "ls > out && cat x >> ~/log 2>&1 > /dev/null"}) == ("out", "~/log")
    assert paths_named("time__now", {}) == ()


@pytest.mark.parametrize("text", ["", "bash(", "bash()", "two words", "(x)"])
def test_bad_rules_are_refused(text):
    with pytest.raises(RuleError):
        parse_rule(text, "allow")
    with pytest.raises(RuleError):
        parse_rule("bash", "maybe")


def test_web_fetch_asks_in_agent_mode_and_rules_match_its_url_or_host():
    p = policy()
    assert action(p, "web_fetch", url="https://docs.python.org/3/") == "ask"
    assert action(p, "web_fetch", "full", url="https://docs.python.org/3/") == "allow"
    assert action(p, "web_fetch", "plan", url="https://docs.python.org/3/") == "deny"
    by_url = policy("allow web_fetch(https://docs.python.org/*)")
    assert action(by_url, "web_fetch", url="https://docs.python.org/3/library/") == "allow"
    # decided on the canonical URL: case, default port, fragment
    assert action(by_url, "web_fetch", url="HTTPS://DOCS.python.org:443/3/#x") == "allow"
    assert action(by_url, "web_fetch", url="http://docs.python.org/3/") == "ask"
    assert action(by_url, "web_fetch", url="https://docs.python.org.evil.example/") == "ask"
    by_host = policy("allow web_fetch(*.python.org)", "deny web_fetch(evil.example)")
    assert action(by_host, "web_fetch", url="https://peps.python.org/pep-0008/") == "allow"
    assert action(by_host, "web_fetch", url="https://python.org/") == "ask"
    assert action(by_host, "web_fetch", "full", url="http://EVIL.example:8080/x") == "deny"
    assert action(policy("deny web_fetch"), "web_fetch", "full", url="https://example.com/") == "deny"
    assert action(policy("allow web_fetch(localhost:8000)"), "web_fetch", url="http://localhost:8000/") == "allow"


def test_a_url_web_fetch_would_not_fetch_is_refused_before_anyone_is_asked():
    for url in ("file:///etc/passwd", "https://docs.python.org@evil.example/", "http://2130706433/"):
        decision = decide(policy(yes=True), "full", (), "web_fetch", {"url": url}, CWD)
        assert decision.action == "deny" and url in decision.reason


def test_approving_a_web_fetch_for_the_session_adds_its_host():
    decision = decide(policy(), "agent", (), "web_fetch", {"url": "https://Docs.Python.org/3/"}, CWD)
    assert decision.session_rules == ("web_fetch(docs.python.org)",)
    approved = (parse_rule("web_fetch(docs.python.org)", "allow", "session"),)
    assert action(policy(), "web_fetch", session=approved, url="https://docs.python.org/other") == "allow"
    assert action(policy(), "web_fetch", session=approved, url="https://pypi.org/") == "ask"
    # an ask rule outdoes an approval for the session: once only
    asked = decide(policy("ask web_fetch(*)"), "agent", (), "web_fetch", {"url": "https://pypi.org/"}, CWD)
    assert (asked.action, asked.session_rules) == ("ask", ())


def test_the_checklist_runs_without_asking():
    assert action(policy(), "todo", todos=[]) == "allow"
    assert action(policy("deny todo"), "todo", todos=[]) == "deny"


PROTECTED = (f"{CWD}/.git/config", f"{CWD}/.git/hooks", f"{CWD}/.claude", f"{HOME}/.bashrc", f"{HOME}/.config")


def guarded(*rules: str, yes: bool = False) -> Policy:
    return replace(policy(*rules, yes=yes), protected=PROTECTED)


@pytest.mark.parametrize("mode", ["agent", "full", "exec"])
@pytest.mark.parametrize("path", [".git/config", ".git/hooks/pre-commit", ".claude/settings.json", "~/.bashrc", "~/.config/x/y"])
def test_protected_paths_ask_before_a_write_in_every_mode_even_with_yes(mode: str, path: str) -> None:
    for tool in ("write", "edit"):
        decision = decide(guarded(yes=True), mode, (), tool, {"path": path}, CWD)
        assert decision.action == "ask" and "is protected" in decision.reason
    # Reading them is as ever, and so is everything beside them.
    assert action(guarded(yes=True), "read", mode, path=path) == "allow"
    assert action(guarded(yes=True), "write", mode, path=".git/HEAD") == "allow"


def test_a_protected_path_is_asked_about_once_for_itself_and_deny_still_wins() -> None:
    decision = decide(guarded(), "full", (), "write", {"path": ".claude/settings.json"}, CWD)
    assert decision.session_rules == (f"write({CWD}/.claude/settings.json)",)
    assert action(guarded("deny write(.claude/**)"), "write", "full", path=".claude/settings.json") == "deny"


def test_only_a_rule_that_names_a_protected_path_lets_it_through_unasked() -> None:
    for rule in ("allow write(.claude/**)", "allow write(.claude/settings.json)", f"allow write({CWD}/.claude/*)"):
        assert action(guarded(rule), "write", "full", path=".claude/settings.json") == "allow", rule
    assert action(guarded("allow edit(.git/config)"), "edit", "agent", path=".git/config") == "allow"
    # Broad rules, and what approving a write for the session adds, do not name it.
    for rule in ("allow write(**)", f"allow write({CWD}/**)", "allow write", "allow write(.git/conf*)"):
        assert action(guarded(rule), "write", "full", path=".git/config") == "ask", rule
    session = (parse_rule(f"write({CWD}/**)", "allow", "session"),)
    assert action(guarded(), "write", "full", session, path=".git/config") == "ask"


def test_a_protected_folder_that_holds_the_working_directory_protects_nothing_in_it() -> None:
    p = replace(policy(), protected=("/work",))
    assert action(p, "write", "full", path="a.txt") == "allow"
    assert action(p, "write", "full", path="../other/a.txt") == "allow"


def test_a_policy_with_protected_paths_comes_back_from_its_map() -> None:
    assert Policy.from_map(guarded().to_map()) == guarded()
    assert "protected" not in policy().to_map()


@pytest.mark.parametrize(
    ("rule", "tool", "input", "action"),
    [
        ("deny Read(./secret.txt)", "read", {"path": "secret.txt"}, "deny"),
        ("deny Read(secret.txt)", "grep", {"pattern": "x", "path": "secret.txt"}, "deny"),
        ("deny Read(//etc/passwd)", "read", {"path": "/etc/passwd"}, "deny"),
        ("deny Read(/config/*.env)", "read", {"path": "config/a.env"}, "deny"),
        ("deny Read(~/.aws/**)", "read", {"path": "~/.aws/credentials"}, "deny"),
        ("deny Edit(src/**)", "write", {"path": "src/a.py"}, "deny"),
        ("deny Edit(src/**)", "edit", {"path": "src/a.py"}, "deny"),
        ("deny Write(build/*)", "edit", {"path": "build/x"}, "deny"),
        ("allow Edit(docs/**)", "write", {"path": "docs/a.md"}, "allow"),
        ("allow Bash(git status:*)", "bash", {"command": "git status --short"}, "allow"),
        ("allow Bash(npm run test:*)", "bash", {"command": "npm run test -- -x"}, "allow"),
        ("allow Bash(npm run build)", "bash", {"command": "npm run build"}, "allow"),
        ("deny Bash(rm:*)", "bash", {"command": "rm -rf x"}, "deny"),
        ("deny Bash", "bash", {"command": "ls"}, "deny"),
        ("allow WebFetch(domain:docs.python.org)", "web_fetch", {"url": "https://docs.python.org/3/"}, "allow"),
        ("deny WebFetch", "web_fetch", {"url": "https://example.com/"}, "deny"),
        ("deny Glob", "glob", {"pattern": "*"}, "deny"),
        ("deny Grep", "grep", {"pattern": "x"}, "deny"),
        ("allow mcp__github__create_issue", "github__create_issue", {}, "allow"),
        ("deny mcp__github", "github__delete_repo", {}, "deny"),
        ("deny mcp__github__*", "github__delete_repo", {}, "deny"),
        ("allow TodoWrite", "todo", {}, "allow"),
        ("deny Task", "task", {"agent": "x", "task": "y"}, "deny"),
    ],
)
def test_claude_codes_rule_syntax_means_what_it_means_in_claude_code(rule: str, tool: str, input: dict, action: str) -> None:
    p = policy(rule)
    assert decide(p, "agent", (), tool, input, CWD).action == action
    # ... and stays so through run.started.
    assert Policy.from_map(p.to_map()) == p


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("ExitPlanMode", "no tool Claude Code calls ExitPlanMode"),
        ("WebSearch(trio)", "takes no pattern"),
        ("Foo(bar)", "no tool Claude Code calls Foo"),
        ("WebFetch(https://x.com)", "domain:HOST"),
        ("TodoWrite(x)", "takes no pattern"),
        ("mcp__", "names no MCP server"),
    ],
)
def test_a_claude_code_rule_roost_cannot_use_is_an_error_that_names_it(text: str, why: str) -> None:
    with pytest.raises(RuleError, match=re.escape(why)) as caught:
        parse_rule(text, "deny")
    assert text in str(caught.value)


def test_remembering_for_every_project_asks_in_agent_mode() -> None:
    assert action(policy(), "remember", text="x") == "allow"
    assert action(policy(), "remember", text="x", scope="project") == "allow"
    d = decide(policy(), "agent", (), "remember", {"text": "x", "scope": "user"}, CWD)
    assert d.action == "ask" and "user's memory" in d.reason and d.session_rules == ()
    assert action(policy(), "remember", "full", text="x", scope="user") == "allow"
    assert action(policy("allow remember"), "remember", text="x", scope="user") == "allow"


def test_a_path_that_is_not_utf8_is_matched_as_its_replacement_characters() -> None:
    # os.fsdecode gives a name that is not UTF-8 lone surrogates; RE2 takes UTF-8 only.
    assert glob_matcher("*.txt")("caf\udce9.txt") and not glob_matcher("*.py")("caf\udce9.txt")


def test_a_background_command_is_judged_as_any_bash_line_and_reading_or_ending_it_asks_nothing() -> None:
    p = policy("deny bash(rm *)", "allow bash(npm run dev)")
    assert action(p, "bash", command="npm run dev", run_in_background=True) == "allow"
    assert action(p, "bash", command="rm -rf build", run_in_background=True) == "deny"
    assert action(policy(), "bash", command="make serve", run_in_background=True) == "ask"
    # Only the run's own commands can be reached: no question, unless a rule says so.
    assert action(policy(), "bash_output", id="bg1") == "allow"
    assert action(policy(), "kill_shell", id="bg1") == "allow"
    assert action(policy("deny KillShell"), "kill_shell", id="bg1") == "deny"
    assert action(policy("ask BashOutput"), "bash_output", id="bg1") == "ask"


def test_notebook_tools_are_judged_as_read_and_edit_are() -> None:
    assert action(policy(), "notebook_read", path="nb.ipynb") == "allow"
    assert action(policy(), "notebook_edit", path="nb.ipynb") == "ask"
    assert action(policy(), "notebook_read", path="/elsewhere/nb.ipynb") == "ask"
    # Rules on edit and write (Claude Code's Edit among them) are about notebook edits too,
    # and rules on read about notebook reads.
    for rule in ("deny edit(secret/**)", "deny write(secret/**)", "deny Edit(secret/**)", "deny NotebookEdit(secret/**)"):
        assert action(policy(rule), "notebook_edit", "full", path="secret/nb.ipynb") == "deny", rule
    assert action(policy("deny read(secret/**)"), "notebook_read", path="secret/nb.ipynb") == "deny"
    assert action(policy("allow edit(**/*.ipynb)"), "notebook_edit", path="nb.ipynb") == "allow"
    assert action(policy("deny edit(secret/**)"), "edit", "full", path="nb.ipynb") == "allow"


@pytest.mark.parametrize("mode", ["agent", "full"])
def test_a_notebook_edit_of_a_protected_path_asks_in_every_mode(mode: str) -> None:
    decision = decide(guarded(yes=True), mode, (), "notebook_edit", {"path": ".claude/nb.ipynb"}, CWD)
    assert decision.action == "ask" and "is protected" in decision.reason
    assert action(guarded("allow edit(.claude/**)"), "notebook_edit", mode, path=".claude/nb.ipynb") == "allow"
    assert paths_named("notebook_edit", {"path": "nb.ipynb"}) == ("nb.ipynb",)
