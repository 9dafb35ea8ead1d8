"""Commands that run other commands: the wrappers (``sudo``, ``env``, ``timeout``,
``xargs``, ... with the options each takes), shells given a string (``sh -c``), and ``find
-exec``. What a wrapper runs is judged as a command of the line; the string a shell is given
is judged as a line of its own, at most :data:`MAX_DEPTH` deep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from ._shell_parts import check_variable, write
from ._shell_words import DYNAMIC, LITERAL, WILD, Word

if TYPE_CHECKING:
    from ._shell_lines import Walk

#: ``bash -c "bash -c '...'"``: deeper than this is not judged.
MAX_DEPTH = 8

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
#: The shells whose ``-c`` strings are judged as lines of their own (bash's language).
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "yash"})
#: A script file that is the shell's own input.
_STDIN = re.compile(r"/dev/(?:stdin|tty|fd/\d+)|/proc/(?:self|thread-self|\d+)/fd/\d+")
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fls", "-fprintf"})


@dataclass(frozen=True, slots=True)
class Wrapper:
    """The options of a command that runs another command."""

    #: Short options alone, short options taking an argument, short options whose argument
    #: can only be attached (``xargs -i{}``).
    flags: str = ""
    takes: str = ""
    attached: str = ""
    long_flags: frozenset[str] = frozenset()
    long_takes: frozenset[str] = frozenset()
    #: ``NAME=value`` words may come before the command (env, sudo).
    assignments: bool = False
    #: Words between the options and the command (timeout's duration).
    operands: int = 0
    #: ``nice -10``: a number as an option.
    numeric: bool = False
    #: Short options that mean nothing is run (``command -v``).
    no_command: str = ""
    #: Running through it changes nothing of what may be done (``sudo`` does).
    transparent: bool = True
    #: Options whose argument is a shell string it runs (``su -c``, ``flock -c``).
    string: str = ""
    long_string: frozenset[str] = frozenset()
    #: Options whose argument is a file it writes (``strace -o``).
    writes: str = ""
    #: It runs its command words joined by spaces through ``sh -c`` (``watch``), unless
    #: one of these options is given (``watch -x``).
    joined: bool = False
    unjoined: str = ""
    #: Without a command (or a ``-c`` string) it starts a shell that reads its input.
    shell_default: bool = False
    #: Every ``--name=value`` option changes only how it runs (valgrind's).
    long_any: bool = False
    #: A word that comes after the options and before the command (``sg GROUP``).
    separator: str = ""
    #: Its operand is a file it creates (``flock FILE``; a number is a descriptor).
    operand_writes: bool = False


WRAPPERS: Mapping[str, Wrapper] = {
    "command": Wrapper(flags="p", no_command="vV"),
    "builtin": Wrapper(),
    "exec": Wrapper(flags="cl", takes="a"),
    "env": Wrapper(
        flags="i0v", takes="uC", assignments=True,
        long_flags=frozenset({"--ignore-environment", "--null", "--debug"}),
        long_takes=frozenset({"--unset", "--chdir"}),
    ),
    "nohup": Wrapper(),
    "time": Wrapper(flags="p"),
    "nice": Wrapper(takes="n", numeric=True, long_takes=frozenset({"--adjustment"})),
    "timeout": Wrapper(
        flags="v", takes="sk", operands=1,
        long_flags=frozenset({"--preserve-status", "--foreground", "--verbose"}),
        long_takes=frozenset({"--signal", "--kill-after"}),
    ),
    "stdbuf": Wrapper(takes="ioe", long_takes=frozenset({"--input", "--output", "--error"})),
    "setsid": Wrapper(flags="cfw", long_flags=frozenset({"--ctty", "--fork", "--wait"})),
    "coproc": Wrapper(),
    "busybox": Wrapper(),
    "xargs": Wrapper(
        flags="0prtx", takes="aEdILnPs", attached="eil",
        long_flags=frozenset({"--null", "--no-run-if-empty", "--verbose", "--exit", "--interactive",
                              "--open-tty", "--replace"}),
        long_takes=frozenset({"--arg-file", "--delimiter", "--eof", "--max-lines", "--max-args",
                              "--max-procs", "--max-chars", "--process-slot-var"}),
    ),
    "sudo": Wrapper(
        flags="AbEHknPS", takes="ugCDhprtTU", assignments=True, transparent=False,
        long_flags=frozenset({"--preserve-env", "--non-interactive", "--stdin", "--askpass",
                              "--background", "--set-home"}),
        long_takes=frozenset({"--user", "--group", "--chdir", "--prompt", "--close-from", "--host",
                              "--role", "--type", "--command-timeout", "--other-user"}),
    ),
    "doas": Wrapper(flags="n", takes="u", transparent=False),
    "toybox": Wrapper(),
    "catchsegv": Wrapper(),
    "watch": Wrapper(
        flags="bcdeghtwpx", takes="nq", joined=True, unjoined="x",
        long_flags=frozenset({"--beep", "--color", "--no-color", "--differences", "--errexit", "--chgexit",
                              "--no-title", "--no-wrap", "--precise", "--exec", "--no-linewrap"}),
        long_takes=frozenset({"--interval", "--equexit"}),
    ),
    "flock": Wrapper(
        flags="sxeunoFv", takes="wE", string="c", operands=1, operand_writes=True,
        long_flags=frozenset({"--shared", "--exclusive", "--unlock", "--nonblock", "--nb", "--close", "--no-fork",
                              "--verbose"}),
        long_takes=frozenset({"--timeout", "--wait", "--conflict-exit-code"}),
        long_string=frozenset({"--command"}),
    ),
    "ionice": Wrapper(
        flags="t", takes="cn", no_command="pPu",
        long_flags=frozenset({"--ignore"}), long_takes=frozenset({"--class", "--classdata"}),
    ),
    "taskset": Wrapper(flags="ac", no_command="p", operands=1, long_flags=frozenset({"--all-tasks", "--cpu-list"})),
    "chrt": Wrapper(
        flags="abdfiorRv", takes="TPD", no_command="pm", operands=1,
        long_flags=frozenset({"--all-tasks", "--batch", "--deadline", "--fifo", "--idle", "--other", "--rr",
                              "--reset-on-fork", "--verbose"}),
        long_takes=frozenset({"--sched-runtime", "--sched-period", "--sched-deadline"}),
    ),
    "unshare": Wrapper(
        flags="muinpUCTfrcl", takes="SGRw", shell_default=True, transparent=False,
        long_flags=frozenset({"--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup", "--time",
                              "--fork", "--map-root-user", "--map-current-user", "--kill-child", "--keep-caps",
                              "--mount-proc", "--map-auto"}),
        long_takes=frozenset({"--setuid", "--setgid", "--root", "--wd", "--propagation", "--setgroups",
                              "--map-user", "--map-group", "--map-users", "--map-groups", "--monotonic",
                              "--boottime"}),
    ),
    "nsenter": Wrapper(
        flags="aFZ", takes="tSGe", attached="muinpUCTrw", shell_default=True, transparent=False,
        long_flags=frozenset({"--all", "--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup",
                              "--time", "--root", "--wd", "--no-fork", "--preserve-credentials",
                              "--follow-context"}),
        long_takes=frozenset({"--target", "--setuid", "--setgid", "--env"}),
    ),
    "setpriv": Wrapper(
        no_command="d", transparent=False,
        long_flags=frozenset({"--clear-groups", "--keep-groups", "--init-groups", "--no-new-privs", "--nnp",
                              "--reset-env"}),
        long_takes=frozenset({"--reuid", "--regid", "--ruid", "--rgid", "--euid", "--egid", "--groups",
                              "--inh-caps", "--ambient-caps", "--bounding-set", "--securebits", "--pdeathsig",
                              "--selinux-label", "--apparmor-profile", "--landlock-access", "--landlock-rule"}),
    ),
    "strace": Wrapper(flags="fFcCqtTrvxyzZwkhiVDn", takes="eoOpPsSuEaIbXU", writes="o"),
    "ltrace": Wrapper(flags="fcCiLrStTVh", takes="eoOpsuaAlnxFbDw", writes="o"),
    "valgrind": Wrapper(flags="qvh", long_any=True),
    "gdb": Wrapper(flags="q", long_flags=frozenset({"--quiet", "--batch", "--nx", "--args"})),
    "script": Wrapper(
        flags="aefqk", takes="EBIOTmo", attached="t", string="c", shell_default=True,
        long_flags=frozenset({"--append", "--return", "--flush", "--force", "--quiet", "--logging-format"}),
        long_takes=frozenset({"--echo", "--log-io", "--log-in", "--log-out", "--log-timing", "--output-limit"}),
        long_string=frozenset({"--command"}),
    ),
    "sg": Wrapper(string="c", joined=True, separator="group", transparent=False),
    "su": Wrapper(
        flags="lmpfP", takes="sgGw", string="c", shell_default=True, transparent=False,
        long_flags=frozenset({"--login", "--preserve-environment", "--pty", "--fast"}),
        long_takes=frozenset({"--shell", "--group", "--supp-group", "--whitelist-environment"}),
        long_string=frozenset({"--command", "--session-command"}),
    ),
    "runuser": Wrapper(
        flags="lmpfP", takes="sgGwu", string="c", shell_default=True, transparent=False,
        long_flags=frozenset({"--login", "--preserve-environment", "--pty", "--fast"}),
        long_takes=frozenset({"--shell", "--group", "--supp-group", "--whitelist-environment", "--user"}),
        long_string=frozenset({"--command", "--session-command"}),
    ),
    "pkexec": Wrapper(
        transparent=False, shell_default=True,
        long_flags=frozenset({"--disable-internal-agent", "--keep-cwd"}), long_takes=frozenset({"--user"}),
    ),
    "parallel": Wrapper(
        flags="0kqruvX", takes="jdanIS",
        long_flags=frozenset({"--keep-order", "--quote", "--verbose", "--ungroup", "--line-buffer", "--null",
                              "--halt-on-error", "--dry-run", "--bar", "--progress", "--eta", "--tag"}),
        long_takes=frozenset({"--jobs", "--delimiter", "--arg-file", "--max-args", "--halt", "--timeout",
                              "--joblog", "--results", "--colsep"}),
    ),
}
#: ``-`` is an option of theirs (``su -``, ``env -``), not a command.
_DASH_OPTION = frozenset({"env", "su", "runuser"})
#: Wrappers that run a command only as a ``-c`` string (runuser also with ``-u USER``).
_STRING_ONLY = frozenset({"su", "runuser", "script"})


def unwrap(walk: Walk, name: str, spec: Wrapper, words: list[Word], depth: int) -> list[Word] | None:
    """The command ``name`` runs (its words); ``[]`` when what it runs was judged here
    (a ``-c`` string, words it joins for ``sh -c``); None when it runs none."""
    i, n = 1, len(words)
    options: dict[str, str] = {}
    assigning = False
    while i < n:
        text, kind = words[i]
        if kind == DYNAMIC:
            walk.fail(f"what {name} runs is only known when the line runs")
            return None
        if spec.assignments and (m := _ASSIGNMENT.match(text)):
            check_variable(walk, m.group(1))
            assigning = True
            i += 1
            continue
        if assigning or not text.startswith("-") or text == "-" and name not in _DASH_OPTION:
            break
        if text == "--":
            i += 1
            break
        i += 1
        if text == "-":
            continue
        if text.startswith("--"):
            key, eq, value = text.partition("=")
            taking = spec.long_takes | spec.long_string
            if key in spec.long_flags or (eq and (key in taking or spec.long_any)):
                options[key] = value
            elif key in taking and i < n:
                options[key] = words[i][0]
                i += 1
            else:
                walk.fail(f"roost does not know what {name} {key} does")
                return None
            continue
        if spec.numeric and text[1:].isdigit():
            continue
        for j in range(1, len(text)):
            c = text[j]
            if c in spec.no_command:
                return None
            if c in spec.flags:
                options[c] = ""
                continue
            if c in spec.attached:
                options[c] = text[j + 1 :]
                break
            if c in spec.takes or c in spec.string or c in spec.writes:
                if j + 1 < len(text):
                    options[c] = text[j + 1 :]
                elif i < n:
                    options[c] = words[i][0]
                    i += 1
                break
            walk.fail(f"roost does not know what {name} -{c} does")
            return None
    for c in spec.writes:
        if c in options:
            write(walk, (options[c], DYNAMIC if WILD in options[c] else LITERAL))
    if spec.operand_writes and i < n and not words[i][0].isdigit():
        write(walk, words[i])
    rest = words[i + spec.operands :]
    string = next((options[o] for o in (*spec.string, *spec.long_string) if o in options), None)
    if string is None and (spec.string or spec.long_string):
        # su USER -c STRING: the string may follow the operands.
        marks = {f"-{c}" for c in spec.string} | spec.long_string
        at = next((k for k, (t, _) in enumerate(rest[:-1]) if t in marks), None)
        if at is not None:
            string = rest[at + 1][0]
            if rest[at + 1][1] != LITERAL:
                walk.fail(f"the string {name} runs is only known when the line runs")
                return []
    if string is not None:
        shell_string(walk, name, string, depth)
        return []
    if spec.separator:
        rest = rest[1:]  # sg's group
    if name in _STRING_ONLY and not (name == "runuser" and ("u" in options or "--user" in options)):
        # Without -c these run a shell that reads its input (the words are users, files).
        rest = []
    if name == "gdb" or name == "parallel":
        return program_runner(walk, name, rest, options)
    if not rest:
        if spec.shell_default:
            walk.fail(f"{name} without a command starts a shell that reads its input")
        return None
    if spec.joined and not any(c in options for c in spec.unjoined) and "--exec" not in options:
        if any(k != LITERAL for _, k in rest):
            walk.fail(f"what {name} runs through sh -c is only known when the line runs")
        else:
            shell_string(walk, name, " ".join(t for t, _ in rest), depth)
        return []
    if name == "xargs":
        return _xargs(rest, options)
    return rest


def shell_string(walk: Walk, name: str, string: str, depth: int) -> None:
    """A string ``name`` has a shell run: judged as a line of its own."""
    if depth >= MAX_DEPTH:
        walk.fail(f"{name}'s command strings nest too deep")
    else:
        walk.line(string, depth + 1)


def program_runner(walk: Walk, name: str, rest: list[Word], options: Mapping[str, str]) -> list[Word] | None:
    """gdb (its ``--args`` program) and GNU parallel (its command before ``:::``)."""
    if name == "gdb":
        # gdb runs commands of its own (-ex, scripts, its shell command): never whole.
        walk.fail("gdb runs commands of its own")
        return (rest or None) if "--args" in options else None
    end = next((k for k, (t, _) in enumerate(rest) if t in (":::", "::::", ":::+", "::::+")), len(rest))
    return _xargs(rest[:end], {"I": options.get("I") or "{}"}) if rest[:end] else None


def shell(walk: Walk, name: str, words: list[Word], depth: int) -> bool:
    """``sh -c STRING``: judge the string; whether the shell runs one."""
    i, n = 1, len(words)
    string = stdin = False
    while i < n:
        text, kind = words[i]
        if kind != LITERAL:
            break
        if text in ("--", "-"):
            i += 1
            break
        if text in ("--rcfile", "--init-file"):
            i += 2
            continue
        if text.startswith("--"):
            i += 1
            continue
        if len(text) < 2 or text[0] not in "-+":
            break
        string = string or "c" in text
        stdin = stdin or "s" in text
        i += 2 if "o" in text or "O" in text else 1
    if string:
        if i >= n:
            walk.fail(f"{name} -c has no command string")
        elif words[i][1] != LITERAL:
            walk.fail(f"the string {name} -c runs is only known when the line runs")
        elif depth >= MAX_DEPTH:
            walk.fail(f"{name} -c strings nest too deep")
        else:
            walk.line(words[i][0], depth + 1)
        return True
    if stdin or i >= n or _STDIN.fullmatch(words[i][0]):
        walk.fail(f"{name} reads the commands it runs from its input")
    return False


def find(walk: Walk, words: list[Word], depth: int) -> None:
    i, n = 1, len(words)
    while i < n:
        text = words[i][0]
        i += 1
        if text in _FIND_WRITES and i < n:
            write(walk, words[i])
        elif text in _FIND_EXEC:
            end = next((k for k in range(i, n) if words[k] in ((";", LITERAL), ("+", LITERAL))), None)
            if end is None or end == i:
                walk.fail(f"find {text} has no command ending in ; or +")
                return
            inner = [(t.replace("{}", WILD), DYNAMIC) if "{}" in t else (t, k) for t, k in words[i:end]]
            walk.inner("find", inner, depth)
            i = end + 1


def _xargs(inner: list[Word], options: Mapping[str, str]) -> list[Word]:
    """The command xargs runs: what it reads from its input is appended (or replaces the
    ``-I`` string), so those parts are WILD."""
    replace = options.get("I")
    for key in ("i", "--replace"):
        if key in options:
            replace = options[key] or "{}"
    words = inner or [("echo", LITERAL)]
    if replace:
        words = [(t.replace(replace, WILD), DYNAMIC) if replace in t else (t, k) for t, k in words]
    return [*words, (WILD, DYNAMIC)]
