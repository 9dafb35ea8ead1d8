"""Judging a shell line for the permission rules, on a real bash parser (tree-sitter-bash).

A rule is only as good as its view of what a line runs, so :func:`judge` reads the line
with tree-sitter's bash grammar (the one Codex judges commands with), not with a lexer of
our own, and returns a :class:`Judgement`:

- ``commands``: every simple command the line runs, wherever it sits (pipelines, ``&&``
  lists, ``;``, subshells, groups, ``if`` / ``while`` / ``for`` / ``case`` bodies,
  ``$(...)``, backticks, ``<(...)``, here-documents), its words normalised: quotes and
  backslashes removed, a path reduced to its last part (``/bin/rm`` is ``rm``; the path is
  kept in ``program``). Wrappers are unwrapped: ``command``, ``builtin``, ``exec``, ``env``,
  ``nohup``, ``time``, ``nice``, ``timeout``, ``stdbuf``, ``setsid``, ``coproc``,
  ``busybox``, ``toybox``, ``xargs``, ``parallel``, ``ionice``, ``taskset``, ``chrt``,
  ``flock``, ``watch``, ``unshare``, ``nsenter``, ``setpriv``, ``strace``, ``ltrace``,
  ``valgrind``, ``gdb --args``, ``catchsegv``, ``sudo``, ``doas``, ``su``, ``runuser``,
  ``pkexec``, ``sg`` and ``script`` yield the command they run as well, ``find -exec``
  yields its command, and the strings a shell is given (``sh -c``, ``su -c``, ``flock
  -c``, ``script -c``, what ``watch`` and ``sg`` join for ``sh -c``) are judged in turn.
- ``writes``: the files that redirections write (``> f``, ``>> f``, ``&> f``, ``>| f``,
  ``>& f``) and ``find -fprint f``; ``/dev/null`` and the standard streams are no files.
- ``reason``: why the line cannot be judged whole, or ``""``. A line is whole only when
  every part of it is understood. Not understood, never guessed: a function definition,
  an expansion with an operator (``${X:-rm}``), ``$'...'``, arithmetic (``$((...))``,
  ``((...))``, ``let``), a command word only known when the line runs (``$(echo rm) x``,
  ``$CMD``, a glob or a brace expansion), ``eval``, ``source`` / ``.``, ``alias``,
  ``trap``, a shell reading commands from its input (``bash /dev/stdin``), a wrapper that
  starts a shell without a command (``su``, ``unshare``), ``gdb`` (it runs commands of its
  own), an array subscript holding a command substitution even in quotes (``[[ 1 -eq
  'a[$(cmd)]' ]]``, ``[ -v ... ]``: bash evaluates it), an assignment to a variable that
  changes what programs run (``PATH``, ``LD_*``, ``GIT_*``, ``BASH_ENV``, ...), a wrapper
  option the judge does not know, a write to a path only known when the line runs, a
  relative write after a ``cd``, and anything the grammar does not parse.

In the words, :data:`WILD` (a NUL, which no shell line can hold) stands for text only
known when the line runs: ``$X`` and ``$(...)`` in an argument, the arguments ``xargs``
adds, ``find``'s ``{}``. The commands of ``$(...)`` are judged as commands of the line.

Pure: parsing is computation; the parser is built once, at import.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Mapping

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

#: Stands for text only known when the line runs.
WILD = "\0"

_PARSER = Parser(Language(tree_sitter_bash.language()))
#: ``bash -c "bash -c '...'"``: deeper than this is not judged.
_MAX_DEPTH = 8

#: Word kinds: a literal, text with a glob or brace pattern the shell expands, text with
#: parts only known when the line runs.
_LITERAL, _PATTERN, _DYNAMIC = 0, 1, 2

#: Characters that a plain word never holds unescaped: seeing one means the grammar read
#: the line otherwise than bash would, so the line is not judged.
_FOREIGN = frozenset("$`;&|<>()\"' \t\n")
_GLOB = frozenset("*?[]{}")
_DQ_ESCAPES = frozenset('$`"\\\n')
#: In double quotes or an unquoted here-document, what only a parser bug would leave as text.
_HIDDEN = re.compile(r"(?<!\\)(?:`|\$[({A-Za-z_0-9@*#?$!-])")
#: A substitution in text that the grammar left as text (a here-document's backticks).
_SUBSTITUTION = re.compile(r"(?<!\\)(?:`|\$\()")
#: ``r\<newline>m``: bash joins the parts into one word (``rm``); the grammar reads a space.
_JOINING = re.compile(r"\S\\\n\S")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
#: Variables that change what a program runs, or which program runs.
_DANGEROUS = re.compile(
    r"PATH|LD_\w*|DYLD_\w*|BASH_ENV|ENV|BASH_FUNC_\w*|SHELLOPTS|BASHOPTS|PS4|IFS|PROMPT_COMMAND"
    r"|GIT_\w*|HOME|XDG_CONFIG_HOME|ZDOTDIR|PYTHON\w*|PERL5\w*|PERLLIB|RUBYOPT|RUBYLIB"
    r"|NODE_OPTIONS|NODE_PATH|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|EDITOR|VISUAL|PAGER|\w*_PAGER"
    r"|MANPAGER|LESSOPEN|LESSCLOSE|\w*ASKPASS|npm_config_\w*|NPM_CONFIG_\w*"
)
#: Redirection targets that are no files.
_STREAMS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_WRITING = frozenset({">", ">>", ">|", "&>", "&>>"})
#: Commands whose effect depends on text or files the judge does not see.
_OPAQUE = {
    "eval": "eval runs a string as commands",
    "source": "source runs the commands of a file",
    ".": ". runs the commands of a file",
    "alias": "an alias changes what a name runs",
    "trap": "trap runs a string as commands later",
    "enable": "enable loads builtins",
    "hash": "hash changes which program a name runs",
    "let": "let evaluates arithmetic, which can run commands",
    "fc": "fc runs commands from the history",
}
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "posh", "yash"})
#: Shells whose language is not bash's: what they are given to run is not judged.
_OTHER_SHELLS = frozenset({"fish", "csh", "tcsh", "nu", "xonsh", "elvish", "pwsh", "rc", "es"})
_CHDIR = frozenset({"cd", "pushd", "popd"})
#: An array subscript holding a command substitution.
_SUBSCRIPT = re.compile(r"\[[^\]]*(?:\$\(|`)")
#: A script file that is the shell's own input.
_STDIN = re.compile(r"/dev/(?:stdin|tty|fd/\d+)|/proc/(?:self|thread-self|\d+)/fd/\d+")
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fls", "-fprintf"})


@dataclass(frozen=True, slots=True)
class Command:
    """One simple command of a line, normalised."""

    #: The command name (a path reduced to its last part), then the arguments.
    words: tuple[str, ...]
    #: The name as written when it is a path (``./build.sh``, ``/bin/rm``), else ``""``.
    program: str = ""
    #: A wrapper as written (``nohup rm x``, ``bash -c '...'``): the command it runs is
    #: judged on its own, so only deny and ask rules look at this one.
    wrapper: bool = False

    @property
    def text(self) -> str:
        """The words joined by spaces, what rules are matched against."""
        return " ".join(self.words)

    @property
    def written(self) -> str:
        """The text with the name as written (the path kept)."""
        return " ".join((self.program or self.words[0], *self.words[1:]))

    @property
    def known(self) -> bool:
        """Whether every word is known before the line runs."""
        return not any(WILD in w for w in self.words)


@dataclass(frozen=True, slots=True)
class Judgement:
    """What a shell line runs and writes, and whether the judge understood all of it."""

    commands: tuple[Command, ...]
    #: Files that redirections write, as written (``~`` unexpanded, relative or absolute).
    writes: tuple[str, ...] = ()
    #: Why the line cannot be judged whole; ``""`` when it can.
    reason: str = ""

    @property
    def whole(self) -> bool:
        """Every part of the line was understood."""
        return not self.reason


_SURROGATE = re.compile("[\ud800-\udfff]")

def judge(line: str) -> Judgement:
    """What the shell line ``line`` runs and writes (see the module docstring)."""
    state = _Judge()
    if WILD in line:
        state.fail("the line holds a NUL character")
    elif not line.isascii() and _SURROGATE.search(line):
        # Not text bash would see as we parse it (a model's lone "\ud800", say).
        state.fail("the line holds characters that are not valid Unicode")
    else:
        if _JOINING.search(line):
            state.fail("a line continuation joins two words into one, which the grammar reads as two")
        try:
            state.line(line, 0)
        except RecursionError:
            state.fail("it nests too deep to judge")
    if state.changes_dir:
        relative = next((w for w in state.writes if not w.startswith(("/", "~"))), None)
        if relative is not None:
            state.fail(f"it changes directory before writing {relative}")
    return Judgement(tuple(state.commands), tuple(dict.fromkeys(state.writes)), state.reason)


def escape(text: str) -> str:
    """``text`` as a rule pattern that matches exactly it (``*``, ``?``, ``[`` bracketed)."""
    return re.sub(r"([*?\[])", r"[\1]", text)


@dataclass(frozen=True, slots=True)
class _Wrapper:
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


_WRAPPERS: Mapping[str, _Wrapper] = {
    "command": _Wrapper(flags="p", no_command="vV"),
    "builtin": _Wrapper(),
    "exec": _Wrapper(flags="cl", takes="a"),
    "env": _Wrapper(
        flags="i0v", takes="uC", assignments=True,
        long_flags=frozenset({"--ignore-environment", "--null", "--debug"}),
        long_takes=frozenset({"--unset", "--chdir"}),
    ),
    "nohup": _Wrapper(),
    "time": _Wrapper(flags="p"),
    "nice": _Wrapper(takes="n", numeric=True, long_takes=frozenset({"--adjustment"})),
    "timeout": _Wrapper(
        flags="v", takes="sk", operands=1,
        long_flags=frozenset({"--preserve-status", "--foreground", "--verbose"}),
        long_takes=frozenset({"--signal", "--kill-after"}),
    ),
    "stdbuf": _Wrapper(takes="ioe", long_takes=frozenset({"--input", "--output", "--error"})),
    "setsid": _Wrapper(flags="cfw", long_flags=frozenset({"--ctty", "--fork", "--wait"})),
    "coproc": _Wrapper(),
    "busybox": _Wrapper(),
    "xargs": _Wrapper(
        flags="0prtx", takes="aEdILnPs", attached="eil",
        long_flags=frozenset({"--null", "--no-run-if-empty", "--verbose", "--exit", "--interactive",
                              "--open-tty", "--replace"}),
        long_takes=frozenset({"--arg-file", "--delimiter", "--eof", "--max-lines", "--max-args",
                              "--max-procs", "--max-chars", "--process-slot-var"}),
    ),
    "sudo": _Wrapper(
        flags="AbEHknPS", takes="ugCDhprtTU", assignments=True, transparent=False,
        long_flags=frozenset({"--preserve-env", "--non-interactive", "--stdin", "--askpass",
                              "--background", "--set-home"}),
        long_takes=frozenset({"--user", "--group", "--chdir", "--prompt", "--close-from", "--host",
                              "--role", "--type", "--command-timeout", "--other-user"}),
    ),
    "doas": _Wrapper(flags="n", takes="u", transparent=False),
    "toybox": _Wrapper(),
    "catchsegv": _Wrapper(),
    "watch": _Wrapper(
        flags="bcdeghtwpx", takes="nq", joined=True, unjoined="x",
        long_flags=frozenset({"--beep", "--color", "--no-color", "--differences", "--errexit", "--chgexit",
                              "--no-title", "--no-wrap", "--precise", "--exec", "--no-linewrap"}),
        long_takes=frozenset({"--interval", "--equexit"}),
    ),
    "flock": _Wrapper(
        flags="sxeunoFv", takes="wE", string="c", operands=1, operand_writes=True,
        long_flags=frozenset({"--shared", "--exclusive", "--unlock", "--nonblock", "--nb", "--close", "--no-fork",
                              "--verbose"}),
        long_takes=frozenset({"--timeout", "--wait", "--conflict-exit-code"}),
        long_string=frozenset({"--command"}),
    ),
    "ionice": _Wrapper(
        flags="t", takes="cn", no_command="pPu",
        long_flags=frozenset({"--ignore"}), long_takes=frozenset({"--class", "--classdata"}),
    ),
    "taskset": _Wrapper(flags="ac", no_command="p", operands=1, long_flags=frozenset({"--all-tasks", "--cpu-list"})),
    "chrt": _Wrapper(
        flags="abdfiorRv", takes="TPD", no_command="pm", operands=1,
        long_flags=frozenset({"--all-tasks", "--batch", "--deadline", "--fifo", "--idle", "--other", "--rr",
                              "--reset-on-fork", "--verbose"}),
        long_takes=frozenset({"--sched-runtime", "--sched-period", "--sched-deadline"}),
    ),
    "unshare": _Wrapper(
        flags="muinpUCTfrcl", takes="SGRw", shell_default=True, transparent=False,
        long_flags=frozenset({"--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup", "--time",
                              "--fork", "--map-root-user", "--map-current-user", "--kill-child", "--keep-caps",
                              "--mount-proc", "--map-auto"}),
        long_takes=frozenset({"--setuid", "--setgid", "--root", "--wd", "--propagation", "--setgroups",
                              "--map-user", "--map-group", "--map-users", "--map-groups", "--monotonic",
                              "--boottime"}),
    ),
    "nsenter": _Wrapper(
        flags="aFZ", takes="tSGe", attached="muinpUCTrw", shell_default=True, transparent=False,
        long_flags=frozenset({"--all", "--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup",
                              "--time", "--root", "--wd", "--no-fork", "--preserve-credentials",
                              "--follow-context"}),
        long_takes=frozenset({"--target", "--setuid", "--setgid", "--env"}),
    ),
    "setpriv": _Wrapper(
        no_command="d", transparent=False,
        long_flags=frozenset({"--clear-groups", "--keep-groups", "--init-groups", "--no-new-privs", "--nnp",
                              "--reset-env"}),
        long_takes=frozenset({"--reuid", "--regid", "--ruid", "--rgid", "--euid", "--egid", "--groups",
                              "--inh-caps", "--ambient-caps", "--bounding-set", "--securebits", "--pdeathsig",
                              "--selinux-label", "--apparmor-profile", "--landlock-access", "--landlock-rule"}),
    ),
    "strace": _Wrapper(flags="fFcCqtTrvxyzZwkhiVDn", takes="eoOpPsSuEaIbXU", writes="o"),
    "ltrace": _Wrapper(flags="fcCiLrStTVh", takes="eoOpsuaAlnxFbDw", writes="o"),
    "valgrind": _Wrapper(flags="qvh", long_any=True),
    "gdb": _Wrapper(flags="q", long_flags=frozenset({"--quiet", "--batch", "--nx", "--args"})),
    "script": _Wrapper(
        flags="aefqk", takes="EBIOTmo", attached="t", string="c", shell_default=True,
        long_flags=frozenset({"--append", "--return", "--flush", "--force", "--quiet", "--logging-format"}),
        long_takes=frozenset({"--echo", "--log-io", "--log-in", "--log-out", "--log-timing", "--output-limit"}),
        long_string=frozenset({"--command"}),
    ),
    "sg": _Wrapper(string="c", joined=True, separator="group", transparent=False),
    "su": _Wrapper(
        flags="lmpfP", takes="sgGw", string="c", shell_default=True, transparent=False,
        long_flags=frozenset({"--login", "--preserve-environment", "--pty", "--fast"}),
        long_takes=frozenset({"--shell", "--group", "--supp-group", "--whitelist-environment"}),
        long_string=frozenset({"--command", "--session-command"}),
    ),
    "runuser": _Wrapper(
        flags="lmpfP", takes="sgGwu", string="c", shell_default=True, transparent=False,
        long_flags=frozenset({"--login", "--preserve-environment", "--pty", "--fast"}),
        long_takes=frozenset({"--shell", "--group", "--supp-group", "--whitelist-environment", "--user"}),
        long_string=frozenset({"--command", "--session-command"}),
    ),
    "pkexec": _Wrapper(
        transparent=False, shell_default=True,
        long_flags=frozenset({"--disable-internal-agent", "--keep-cwd"}), long_takes=frozenset({"--user"}),
    ),
    "parallel": _Wrapper(
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

_Word = tuple[str, int]


class _Judge:
    """The walk over one line's tree (and the trees of the ``sh -c`` strings in it)."""

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.writes: list[str] = []
        self.reason = ""
        self.changes_dir = False

    def fail(self, reason: str) -> None:
        # The first reason is the one shown; the walk goes on, so that deny rules still
        # see every command it can find.
        if not self.reason:
            self.reason = reason

    def line(self, line: str, depth: int) -> None:
        source = line.encode("utf-8", "surrogatepass")
        root = _PARSER.parse(source).root_node
        if root.has_error:
            self.fail("it does not parse as bash")
        self.statements(root, depth)

    # -- statements ---------------------------------------------------------------------

    def statements(self, node: Node, depth: int) -> None:
        """The statements among ``node``'s children."""
        for child in node.children:
            if child.is_named:
                self.statement(child, depth)
            elif child.type in ("((", "))"):
                self.fail("it uses arithmetic (( ))")

    def statement(self, node: Node, depth: int) -> None:
        t = node.type
        if t == "command":
            self.command(node, depth)
        elif t in _CONTAINERS:
            self.statements(node, depth)
        elif t == "redirected_statement":
            for child in node.children:
                if child.type.endswith("_redirect"):
                    self.redirect(child, depth)
                elif child.is_named:
                    self.statement(child, depth)
        elif t in ("variable_assignment", "variable_assignments"):
            self.assignments(node, depth)
        elif t == "declaration_command":
            self.declaration(node, depth)
        elif t == "for_statement":
            for i, child in enumerate(node.children):
                field = node.field_name_for_child(i)
                if field == "variable":
                    self.check_variable(_text(child))
                elif field == "value":
                    self.word(child, depth)
                elif field == "body":
                    self.statement(child, depth)
        elif t == "case_statement":
            for child in node.children:
                if child.type == "case_item":
                    for i, part in enumerate(child.children):
                        if child.field_name_for_child(i) == "value":
                            self.word(part, depth)
                        elif part.is_named:
                            self.statement(part, depth)
                elif child.is_named:
                    self.word(child, depth)
        elif t == "test_command":
            self.test(node, depth)
        elif t == "unset_command":
            for child in node.named_children:
                self.word(child, depth)
        elif t.endswith("_redirect"):
            self.redirect(node, depth)
        elif t == "comment":
            pass
        elif t == "function_definition":
            self.fail("it defines a function")
            # What it would run still meets the deny rules.
            body = node.child_by_field_name("body")
            if body is not None:
                self.statement(body, depth)
        elif t in ("c_style_for_statement", "arithmetic_expansion"):
            self.fail("it uses arithmetic")
        else:
            self.fail(f"it uses {t.replace('_', ' ')}, which roost does not judge")

    def command(self, node: Node, depth: int) -> None:
        name: Node | None = None
        args: list[Node] = []
        for i, child in enumerate(node.children):
            t = child.type
            if t == "variable_assignment":
                self.assignment(child, depth)
            elif t == "command_name":
                name = child.named_children[0] if child.named_child_count == 1 else child
            elif t.endswith("_redirect"):
                self.redirect(child, depth)
            elif node.field_name_for_child(i) == "argument":
                args.append(child)
            elif t != "comment":
                self.fail(f"it uses {t} in a command")
        words = [self.word(a, depth) for a in args]
        if name is None:
            return
        text, kind = self.word(name, depth)
        if kind == _DYNAMIC:
            self.fail(f"a command name is only known when the line runs ({_text(name)})")
        elif kind == _PATTERN:
            self.fail(f"the shell expands the command name {_text(name)}")
        else:
            self.run([(text, kind), *words], depth)

    def run(self, words: list[_Word], depth: int) -> None:
        """A simple command whose name (``words[0]``) is a literal."""
        written = words[0][0]
        program = written if "/" in written else ""
        name = posixpath.basename(written.rstrip("/")) if program else written
        if not name:
            self.fail(f"the command name {written!r} names no program")
            return
        texts = (name, *(w[0] for w in words[1:]))
        wrapper = _WRAPPERS.get(name)
        if name in _OPAQUE:
            self.fail(_OPAQUE[name])
            if name == "eval" and depth < _MAX_DEPTH and all(k == _LITERAL for _, k in words[1:]):
                # Never whole, but what it would run still meets the deny rules.
                self.line(" ".join(t for t, _ in words[1:]), depth + 1)
        elif name in _CHDIR:
            self.changes_dir = True
        elif name in _OTHER_SHELLS:
            self.fail(f"{name} runs commands in a language roost does not judge")
        if wrapper is not None:
            inner = self.unwrap(name, wrapper, words, depth)
            self.commands.append(Command(texts, program, wrapper.transparent and inner is not None))
            if inner:
                self.inner(name, inner, depth)
        elif name in _SHELLS:
            runs_string = self.shell(name, words, depth)
            self.commands.append(Command(texts, program, runs_string))
        else:
            self.commands.append(Command(texts, program))
            if name == "find":
                self.find(words, depth)

    def inner(self, wrapper: str, words: list[_Word], depth: int) -> None:
        text, kind = words[0]
        if kind != _LITERAL:
            self.fail(f"the command {wrapper} runs is only known when the line runs")
        else:
            self.run(words, depth)

    # -- wrappers -------------------------------------------------------------------------

    def unwrap(self, name: str, spec: _Wrapper, words: list[_Word], depth: int) -> list[_Word] | None:
        """The command ``name`` runs (its words); ``[]`` when what it runs was judged here
        (a ``-c`` string, words it joins for ``sh -c``); None when it runs none."""
        i, n = 1, len(words)
        options: dict[str, str] = {}
        assigning = False
        while i < n:
            text, kind = words[i]
            if kind == _DYNAMIC:
                self.fail(f"what {name} runs is only known when the line runs")
                return None
            if spec.assignments and (m := _ASSIGNMENT.match(text)):
                self.check_variable(m.group(1))
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
                    self.fail(f"roost does not know what {name} {key} does")
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
                self.fail(f"roost does not know what {name} -{c} does")
                return None
        for c in spec.writes:
            if c in options:
                self.write((options[c], _DYNAMIC if WILD in options[c] else _LITERAL))
        if spec.operand_writes and i < n and not words[i][0].isdigit():
            self.write(words[i])
        rest = words[i + spec.operands :]
        string = next((options[o] for o in (*spec.string, *spec.long_string) if o in options), None)
        if string is None and (spec.string or spec.long_string):
            # su USER -c STRING: the string may follow the operands.
            marks = {f"-{c}" for c in spec.string} | spec.long_string
            at = next((k for k, (t, _) in enumerate(rest[:-1]) if t in marks), None)
            if at is not None:
                string = rest[at + 1][0]
                if rest[at + 1][1] != _LITERAL:
                    self.fail(f"the string {name} runs is only known when the line runs")
                    return []
        if string is not None:
            self.shell_string(name, string, depth)
            return []
        if spec.separator:
            rest = rest[1:]  # sg's group
        if name in _STRING_ONLY and not (name == "runuser" and ("u" in options or "--user" in options)):
            # Without -c these run a shell that reads its input (the words are users, files).
            rest = []
        if name == "gdb" or name == "parallel":
            return self.program_runner(name, rest, options)
        if not rest:
            if spec.shell_default:
                self.fail(f"{name} without a command starts a shell that reads its input")
            return None
        if spec.joined and not any(c in options for c in spec.unjoined) and "--exec" not in options:
            if any(k != _LITERAL for _, k in rest):
                self.fail(f"what {name} runs through sh -c is only known when the line runs")
            else:
                self.shell_string(name, " ".join(t for t, _ in rest), depth)
            return []
        if name == "xargs":
            return _xargs(rest, options)
        return rest

    def shell_string(self, name: str, string: str, depth: int) -> None:
        """A string ``name`` has a shell run: judged as a line of its own."""
        if depth >= _MAX_DEPTH:
            self.fail(f"{name}'s command strings nest too deep")
        else:
            self.line(string, depth + 1)

    def program_runner(self, name: str, rest: list[_Word], options: Mapping[str, str]) -> list[_Word] | None:
        """gdb (its ``--args`` program) and GNU parallel (its command before ``:::``)."""
        if name == "gdb":
            # gdb runs commands of its own (-ex, scripts, its shell command): never whole.
            self.fail("gdb runs commands of its own")
            return (rest or None) if "--args" in options else None
        end = next((k for k, (t, _) in enumerate(rest) if t in (":::", "::::", ":::+", "::::+")), len(rest))
        return _xargs(rest[:end], {"I": options.get("I") or "{}"}) if rest[:end] else None

    def shell(self, name: str, words: list[_Word], depth: int) -> bool:
        """``sh -c STRING``: judge the string; whether the shell runs one."""
        i, n = 1, len(words)
        string = stdin = False
        while i < n:
            text, kind = words[i]
            if kind != _LITERAL:
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
                self.fail(f"{name} -c has no command string")
            elif words[i][1] != _LITERAL:
                self.fail(f"the string {name} -c runs is only known when the line runs")
            elif depth >= _MAX_DEPTH:
                self.fail(f"{name} -c strings nest too deep")
            else:
                self.line(words[i][0], depth + 1)
            return True
        if stdin or i >= n or _STDIN.fullmatch(words[i][0]):
            self.fail(f"{name} reads the commands it runs from its input")
        return False

    def find(self, words: list[_Word], depth: int) -> None:
        i, n = 1, len(words)
        while i < n:
            text = words[i][0]
            i += 1
            if text in _FIND_WRITES and i < n:
                self.write(words[i])
            elif text in _FIND_EXEC:
                end = next((k for k in range(i, n) if words[k] in ((";", _LITERAL), ("+", _LITERAL))), None)
                if end is None or end == i:
                    self.fail(f"find {text} has no command ending in ; or +")
                    return
                inner = [(t.replace("{}", WILD), _DYNAMIC) if "{}" in t else (t, k) for t, k in words[i:end]]
                self.inner("find", inner, depth)
                i = end + 1

    # -- words ----------------------------------------------------------------------------

    def word(self, node: Node, depth: int) -> _Word:
        """The text of a word node, and its kind. Substituted commands are judged."""
        word = self.bare_word(node, depth)
        self.subscript(word[0])
        return word

    def subscript(self, text: str) -> None:
        """``'a[$(cmd)]'``, even quoted: where bash takes it as an array element (``[[ 1
        -eq ... ]]``, ``[ -v ... ]``, ``printf -v``, ``read``, ``unset``, arithmetic) it
        evaluates the subscript and runs the command."""
        if _SUBSCRIPT.search(text):
            self.fail(f"{text.replace(WILD, '…')} holds a command substitution in a subscript, which bash may run")

    def bare_word(self, node: Node, depth: int) -> _Word:
        t = node.type
        if t == "word":
            return _plain(node, self)
        if t == "number":
            return _text(node), _LITERAL
        if t == "raw_string":
            return _text(node)[1:-1], _LITERAL
        if t == "string":
            return self.string(node, depth)
        if t == "concatenation":
            parts = [self.word(child, depth) for child in node.children]
            return "".join(p[0] for p in parts), max((p[1] for p in parts), default=_LITERAL)
        return WILD, self.expansion(node, depth)

    def string(self, node: Node, depth: int) -> _Word:
        out: list[str] = []
        kind = _LITERAL
        for child in node.children:
            t = child.type
            if t == '"':
                continue
            if t == "string_content":
                raw = _text(child)
                if _HIDDEN.search(raw):
                    self.fail(f"roost cannot read the string {_text(node)}")
                out.append(_unescape_dq(raw))
            elif t == "$":
                out.append("$")
            else:
                kind = max(kind, self.expansion(child, depth))
                out.append(WILD)
        return "".join(out), kind

    def expansion(self, node: Node, depth: int) -> int:
        """An expansion or a substitution: its commands are judged; its text is WILD."""
        t = node.type
        if t == "simple_expansion":
            return _DYNAMIC
        if t == "expansion":
            parts = [c.type for c in node.children]
            if parts not in (["${", "variable_name", "}"], ["${", "special_variable_name", "}"]):
                self.fail(f"it uses an expansion with an operator ({_text(node)})")
                self.substitutions(node, depth)
            return _DYNAMIC
        if t in ("command_substitution", "process_substitution"):
            if node.child_count and node.children[0].type == "`" and "\\" in _text(node):
                # In backquotes bash unescapes \`, \$ and \\ first: \`...\` nests a command.
                self.fail("it escapes characters inside backquotes")
            self.statements(node, depth)
            return _DYNAMIC
        if t == "ansi_c_string":
            self.fail(f"it uses ANSI-C quoting ({_text(node)})")
        elif t == "arithmetic_expansion":
            self.fail("it uses arithmetic ($(( )))")
        elif t == "translated_string":
            self.fail(f"it uses a translated string ({_text(node)})")
        else:
            self.fail(f"roost cannot read the word {_text(node)}")
        return _DYNAMIC

    def substitutions(self, node: Node, depth: int) -> None:
        """The commands substituted anywhere under ``node`` (for the deny rules)."""
        stack = list(node.named_children)
        while stack:
            child = stack.pop()
            if child.type in ("command_substitution", "process_substitution"):
                self.statements(child, depth)
            else:
                stack.extend(child.named_children)

    # -- assignments, tests, redirections -------------------------------------------------

    def check_variable(self, name: str) -> None:
        if _DANGEROUS.fullmatch(name):
            self.fail(f"it sets {name}, which changes what programs run")

    def assignment(self, node: Node, depth: int) -> None:
        for i, child in enumerate(node.children):
            field = node.field_name_for_child(i)
            if field == "name":
                if child.type == "subscript":
                    self.fail("it assigns to an array element (its index is arithmetic)")
                else:
                    self.check_variable(_text(child))
            elif field == "value":
                if child.type == "array":
                    for element in child.named_children:
                        self.word(element, depth)
                else:
                    self.word(child, depth)

    def assignments(self, node: Node, depth: int) -> None:
        if node.type == "variable_assignment":
            self.assignment(node, depth)
        else:
            for child in node.named_children:
                self.assignment(child, depth)

    def declaration(self, node: Node, depth: int) -> None:
        for child in node.children:
            t = child.type
            if t == "variable_assignment":
                self.assignment(child, depth)
            elif t == "variable_name":
                self.check_variable(_text(child))
            elif child.is_named:
                text, _ = self.word(child, depth)
                if text[:1] in "-+" and ("i" in text or "n" in text):
                    self.fail(f"{text} makes a declaration evaluate arithmetic or name another variable")

    def test(self, node: Node, depth: int) -> None:
        double = node.child_count > 0 and node.children[0].type == "[["
        stack = list(node.named_children)
        while stack:
            child = stack.pop()
            t = child.type
            if t in _EXPANSIONS:
                if double:
                    # [[ $x -eq 1 ]] evaluates $x as arithmetic, which can run commands.
                    self.fail("it tests expansions in [[ ]]")
                self.expansion(child, depth)
            elif t in ("ansi_c_string", "translated_string"):
                self.expansion(child, depth)
            else:
                self.subscript(_text(child))
                stack.extend(child.named_children)

    def redirect(self, node: Node, depth: int) -> None:
        t = node.type
        if t == "heredoc_redirect":
            quoted = False
            for child in node.named_children:
                ct = child.type
                if ct == "heredoc_start":
                    quoted = any(q in _text(child) for q in "'\"\\")
                elif ct == "heredoc_body":
                    if not quoted:
                        self.heredoc(child, depth)
                elif ct.endswith("_redirect"):
                    self.redirect(child, depth)
                elif ct != "heredoc_end":
                    self.statement(child, depth)
            return
        if t == "herestring_redirect":
            for child in node.named_children:
                self.word(child, depth)
            return
        operator = ""
        destination: Node | None = None
        for i, child in enumerate(node.children):
            if node.field_name_for_child(i) == "destination":
                destination = child
            elif not child.is_named:
                operator = child.type
        if destination is None:
            return
        if operator in (">&-", "<&-"):
            # These take no target: the grammar read an argument as one.
            self.fail(f"roost cannot read the redirection {_text(node)}")
        word = self.word(destination, depth)
        if operator in _WRITING or (operator == ">&" and not word[0].isdigit() and word[0] != "-"):
            self.write(word)

    def write(self, word: _Word) -> None:
        text, kind = word
        if kind != _LITERAL:
            self.fail(f"it writes to a file only known when the line runs ({text.replace(WILD, '…')})")
        elif text not in _STREAMS:
            self.writes.append(text)

    def heredoc(self, node: Node, depth: int) -> None:
        """An unquoted here-document: its substitutions run when the line does."""
        source = node.text or b""
        plain, at = [], node.start_byte
        for child in node.named_children:
            if child.type != "heredoc_content":
                plain.append(source[at - node.start_byte : child.start_byte - node.start_byte])
                at = child.end_byte
                self.expansion(child, depth)
        plain.append(source[at - node.start_byte :])
        if _SUBSTITUTION.search(b"".join(plain).decode("utf-8", "surrogatepass")):
            self.fail("roost cannot read the here-document")


_CONTAINERS = frozenset({
    "program", "list", "pipeline", "subshell", "compound_statement", "negated_command",
    "if_statement", "elif_clause", "else_clause", "while_statement", "do_group",
})
_EXPANSIONS = frozenset({
    "simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion",
})


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _plain(node: Node, judge: _Judge) -> _Word:
    """An unquoted word: backslashes removed; a glob or a brace makes it a pattern."""
    raw = _text(node)
    out: list[str] = []
    kind = _LITERAL
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if i + 1 < n and raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        if c in _FOREIGN:
            judge.fail(f"roost cannot read the word {raw}")
        elif c in _GLOB or (c == "~" and i == 0 and not raw.startswith("~/") and raw != "~"):
            kind = _PATTERN
        out.append(c)
        i += 1
    return "".join(out), kind


def _unescape_dq(raw: str) -> str:
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\" and i + 1 < n and raw[i + 1] in _DQ_ESCAPES:
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _xargs(inner: list[_Word], options: Mapping[str, str]) -> list[_Word]:
    """The command xargs runs: what it reads from its input is appended (or replaces the
    ``-I`` string), so those parts are WILD."""
    replace = options.get("I")
    for key in ("i", "--replace"):
        if key in options:
            replace = options[key] or "{}"
    words = inner or [("echo", _LITERAL)]
    if replace:
        words = [(t.replace(replace, WILD), _DYNAMIC) if replace in t else (t, k) for t, k in words]
    return [*words, (WILD, _DYNAMIC)]
