"""A table of shell lines and what the permission rules make of them, in two runs:

- ``FULL``: mode ``full`` (no approvals) with ``deny bash(rm *)``;
- ``AGENT``: mode ``agent`` with the same deny rule and ``allow bash(ls*)``,
  ``bash(echo *)``, ``bash(git status*)``.

Each line's outcome is ``ran``, ``denied`` (refused, never run) or ``asked`` (a person is
asked first). ``{f}`` in a line is a file of its own in the project, so that a test with
real bash can tell whether the line deleted it. tests/loop/test_shell_lines.py judges the
table without IO, tests/daemon/test_shell_rules.py through a real daemon and real bash,
and bench/judge_lines.py times the judge on it.
"""

from __future__ import annotations

from dataclasses import dataclass

RAN, DENIED, ASKED = "ran", "denied", "asked"
DENY = ("bash(rm *)",)
ALLOW = ("bash(ls*)", "bash(echo *)", "bash(git status*)")


@dataclass(frozen=True)
class Line:
    """A line (``{f}``: its own file), and its outcome in the FULL and the AGENT run."""

    template: str
    full: str
    agent: str

    def line(self, f: str) -> str:
        return self.template.replace("{f}", f)


LINES = (
    # rm, spelled and wrapped every way: the deny rule sees through all of them.
    Line("rm -f {f}", DENIED, DENIED),
    Line('"rm" -f {f}', DENIED, DENIED),
    Line("r\\m -f {f}", DENIED, DENIED),
    Line("'rm' -f {f}", DENIED, DENIED),
    Line('r""m -f {f}', DENIED, DENIED),
    Line("\\rm -f {f}", DENIED, DENIED),
    Line("command rm -f {f}", DENIED, DENIED),
    Line("command -p rm -f {f}", DENIED, DENIED),
    Line("builtin command rm -f {f}", DENIED, DENIED),
    Line("/bin/rm -f {f}", DENIED, DENIED),
    Line("/usr/bin/../bin/rm -f {f}", DENIED, DENIED),
    Line("env rm -f {f}", DENIED, DENIED),
    Line("env -i rm -f {f}", DENIED, DENIED),
    Line("env -u HOME A=1 rm -f {f}", DENIED, DENIED),
    Line("nohup rm -f {f}", DENIED, DENIED),
    Line("timeout 5 rm -f {f}", DENIED, DENIED),
    Line("timeout -s KILL 5 rm -f {f}", DENIED, DENIED),
    Line("nice -n 5 rm -f {f}", DENIED, DENIED),
    Line("time rm -f {f}", DENIED, DENIED),
    Line("exec rm -f {f}", DENIED, DENIED),
    Line("echo {f} | xargs rm -f", DENIED, DENIED),
    Line("echo {f} | xargs -n1 rm", DENIED, DENIED),
    Line("xargs -I{} rm -f {} <<< {f}", DENIED, DENIED),
    Line("sudo rm -f {f}", DENIED, DENIED),
    Line("find . -name {f} -exec rm {} \\;", DENIED, DENIED),
    Line("find . -name {f} -execdir rm {} +", DENIED, DENIED),
    Line("bash -c 'rm -f {f}'", DENIED, DENIED),
    Line('sh -c "rm -f {f}"', DENIED, DENIED),
    Line("nohup sh -c 'rm -f {f}'", DENIED, DENIED),
    Line("bash -c \"bash -c 'rm -f {f}'\"", DENIED, DENIED),
    Line("f(){ rm -f {f}; }; f", DENIED, DENIED),
    Line("true && eval 'rm -f {f}'", DENIED, DENIED),
    # ... and in every place a command can sit.
    Line("ls; rm -f {f}", DENIED, DENIED),
    Line("ls && rm -f {f}", DENIED, DENIED),
    Line("false || rm -f {f}", DENIED, DENIED),
    Line("ls | rm -f {f}", DENIED, DENIED),
    Line("(rm -f {f})", DENIED, DENIED),
    Line("{ rm -f {f}; }", DENIED, DENIED),
    Line("rm -f {f} &", DENIED, DENIED),
    Line("ls\nrm -f {f}", DENIED, DENIED),
    Line("if true; then rm -f {f}; fi", DENIED, DENIED),
    Line("for i in 1; do rm -f {f}; done", DENIED, DENIED),
    Line("case a in a) rm -f {f};; esac", DENIED, DENIED),
    Line("echo $(rm -f {f})", DENIED, DENIED),
    Line("echo `rm -f {f}`", DENIED, DENIED),
    Line('echo "$(rm -f {f})"', DENIED, DENIED),
    Line("cat <(rm -f {f})", DENIED, DENIED),
    Line("ls $(rm -f {f})", DENIED, DENIED),
    Line("X=$(rm -f {f}) ls", DENIED, DENIED),
    Line("cat <<EOF\n$(rm -f {f})\nEOF", DENIED, DENIED),
    # What cannot be judged whole: refused under a deny rule when nobody is asked.
    Line("X=rm; $X -f {f}", DENIED, ASKED),
    Line("${X:-rm} -f {f}", DENIED, ASKED),
    Line("$'\\x72m' -f {f}", DENIED, ASKED),
    Line("$(echo rm) -f {f}", DENIED, ASKED),
    Line("source ./{f}", DENIED, ASKED),
    Line(". ./{f}", DENIED, ASKED),
    Line("echo rm -f {f} | bash", DENIED, ASKED),
    Line('bash -c "$X"', DENIED, ASKED),
    Line("alias ls=rm; ls {f}", DENIED, ASKED),
    Line("GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='rm -f {f}' git status", DENIED, ASKED),
    Line("LD_PRELOAD=/nonexistent.so ls", DENIED, ASKED),
    Line("BASH_ENV=./{f} bash -c ls", DENIED, ASKED),
    Line("PATH=. ls", DENIED, ASKED),
    Line("ls; f(){ echo; }", DENIED, ASKED),
    Line("ls ${X:-.}", DENIED, ASKED),
    Line("ls $'\\x2e'", DENIED, ASKED),
    Line("ls $((1+1))", DENIED, ASKED),
    Line("ls && cd .. && ls > {f}.out", DENIED, ASKED),
    Line('echo "unclosed', DENIED, ASKED),
    Line("r\\\nm -f {f}", DENIED, ASKED),
    Line("fish -c 'rm -f {f}'", DENIED, ASKED),
    Line("echo `echo \\`rm -f {f}\\``", DENIED, ASKED),
    Line("echo ${X:-$(rm -f {f})}", DENIED, DENIED),
    # Wrappers that run what they are given: the deny rule sees through each.
    Line("watch -n 1 rm -f {f}", DENIED, DENIED),
    Line("watch -x rm -f {f}", DENIED, DENIED),
    Line("watch 'ls; rm -f {f}'", DENIED, DENIED),
    Line("flock /tmp/lock rm -f {f}", DENIED, DENIED),
    Line("flock -n /tmp/lock -c 'rm -f {f}'", DENIED, DENIED),
    Line("ionice -c 3 rm -f {f}", DENIED, DENIED),
    Line("taskset 0x1 rm -f {f}", DENIED, DENIED),
    Line("taskset -c 0 rm -f {f}", DENIED, DENIED),
    Line("chrt -o 0 rm -f {f}", DENIED, DENIED),
    Line("nice rm -f {f}", DENIED, DENIED),
    Line("setsid -f rm -f {f}", DENIED, DENIED),
    Line("unshare -r rm -f {f}", DENIED, DENIED),
    Line("unshare --map-root-user --mount rm -f {f}", DENIED, DENIED),
    Line("nsenter -t 1 -m rm -f {f}", DENIED, DENIED),
    Line("setpriv --reuid=0 rm -f {f}", DENIED, DENIED),
    Line("strace -f -o /dev/null rm -f {f}", DENIED, DENIED),
    Line("ltrace rm -f {f}", DENIED, DENIED),
    Line("gdb --args rm -f {f}", DENIED, DENIED),
    Line("valgrind --tool=none rm -f {f}", DENIED, DENIED),
    Line("catchsegv rm -f {f}", DENIED, DENIED),
    Line("script -qc 'rm -f {f}' /dev/null", DENIED, DENIED),
    Line("sg root -c 'rm -f {f}'", DENIED, DENIED),
    Line("sg root rm -f {f}", DENIED, DENIED),
    Line("su -c 'rm -f {f}'", DENIED, DENIED),
    Line("su - root -c 'rm -f {f}'", DENIED, DENIED),
    Line("runuser -u root -- rm -f {f}", DENIED, DENIED),
    Line("runuser root -c 'rm -f {f}'", DENIED, DENIED),
    Line("pkexec rm -f {f}", DENIED, DENIED),
    Line("parallel rm -f ::: {f}", DENIED, DENIED),
    Line("busybox rm -f {f}", DENIED, DENIED),
    Line("toybox rm -f {f}", DENIED, DENIED),
    Line("nohup timeout 5 nice -n 1 ionice -c 3 rm -f {f}", DENIED, DENIED),
    # A shell that reads its commands from its input, and what it cannot judge.
    Line("bash /dev/stdin <<< 'rm -f {f}'", DENIED, ASKED),
    Line("sh /dev/fd/0 <<< 'rm -f {f}'", DENIED, ASKED),
    Line("su", DENIED, ASKED),
    Line("unshare -r", DENIED, ASKED),
    Line("gdb -batch -ex 'shell rm -f {f}'", DENIED, ASKED),
    Line("watch \"$X\"", DENIED, ASKED),
    # A subscript's command substitution runs even quoted, in tests and arithmetic.
    Line("[[ 1 -eq 'a[$(rm -f {f})]' ]]", DENIED, ASKED),
    Line("[[ 1 -eq a[$(rm -f {f})] ]]", DENIED, DENIED),
    Line("[ -v 'a[$(rm -f {f})]' ]", DENIED, ASKED),
    Line("test -v 'a[`rm -f {f}`]'", DENIED, ASKED),
    Line("printf -v 'a[$(rm -f {f})]' x", DENIED, ASKED),
    Line("unset 'a[$(rm -f {f})]'", DENIED, ASKED),
    # Lines that begin with ls (or echo) but write a file, or run more: a write asks in
    # agent mode whatever allows the command, and bash(ls*) is ls, not lsattr.
    Line("ls > {f}.out", RAN, ASKED),
    Line("echo ok > '{f}.out'", RAN, ASKED),
    Line("lsattr -d .", RAN, ASKED),
    Line("lsof -v", RAN, ASKED),
    Line("flock {f}.lock ls", RAN, ASKED),
    Line("sudo ls", RAN, ASKED),
    Line("unshare -r ls", RAN, ASKED),
    Line("ls >> ~/.bashrc", RAN, ASKED),
    Line("ls > ../outside-{f}", RAN, ASKED),
    Line("echo hi | cat", RAN, ASKED),
    Line("echo $(whoami)", RAN, ASKED),
    Line("./ls", RAN, ASKED),
    Line("ls ; :", RAN, ASKED),
    Line("find . -name {f} -delete", RAN, ASKED),
    # Lines the rules allow.
    Line("ls -la", RAN, RAN),
    Line("ls # ; rm -f {f}", RAN, RAN),
    Line("ls 2>&1", RAN, RAN),
    Line("ls > /dev/null", RAN, RAN),
    Line("echo hi && ls", RAN, RAN),
    Line("ls & ls", RAN, RAN),
    Line("ls <<< hi", RAN, RAN),
    Line('echo "$HOME"', RAN, RAN),
    Line('ls "$(echo -a)"', RAN, RAN),
    Line("A=1 ls", RAN, RAN),
    Line("\\ls {f}", RAN, RAN),
    Line("git status", RAN, RAN),
    Line("nice -n 5 ls", RAN, RAN),
    Line("ionice -c 3 ls", RAN, RAN),
    Line("taskset -c 0 ls", RAN, RAN),
    Line("timeout 5 nice ls -la", RAN, RAN),
    Line("[ -f {f} ] && ls", RAN, RAN),
    Line("ls -la /", RAN, RAN),
    Line("(ls) && { echo a; echo b; }", RAN, RAN),
    Line("if ls; then echo yes; else echo no; fi", RAN, RAN),
)
