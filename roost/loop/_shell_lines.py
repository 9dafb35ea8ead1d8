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

This module parses the line and walks its statements (:class:`Walk`); the rules live in
the modules of what they judge: ``_shell_words`` (words, expansions, substitutions),
``_shell_parts`` (assignments, tests, redirections, here-documents) and
``_shell_wrappers`` (wrappers, shells given a string, ``find -exec``).

Pure: parsing is computation; the parser is built once, at import.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Sequence

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from ._shell_parts import assignment, assignments, check_variable, declaration, redirect, test_command
from ._shell_words import DYNAMIC, LITERAL, PATTERN, WILD, Word, node_text, read_word
from ._shell_wrappers import MAX_DEPTH, SHELLS, WRAPPERS, find, shell, unwrap

_PARSER = Parser(Language(tree_sitter_bash.language()))

#: ``r\<newline>m``: bash joins the parts into one word (``rm``); the grammar reads a space.
_JOINING = re.compile(r"\S\\\n\S")
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
#: Shells whose language is not bash's: what they are given to run is not judged.
_OTHER_SHELLS = frozenset({"fish", "csh", "tcsh", "nu", "xonsh", "elvish", "pwsh", "rc", "es"})
_CHDIR = frozenset({"cd", "pushd", "popd"})
_CONTAINERS = frozenset({
    "program", "list", "pipeline", "subshell", "compound_statement", "negated_command",
    "if_statement", "elif_clause", "else_clause", "while_statement", "do_group",
})


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
    state = Walk()
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


def command_pattern(words: Sequence[str]) -> str:
    """A bash rule's pattern that matches exactly the command of ``words``, written as a
    person would write it: a word with spaces, quotes or a backslash in single quotes
    (``echo 'a  b'``), ``*``, ``?`` and ``[`` of the others bracketed."""
    return " ".join(_pattern_word(word) for word in words)


def _pattern_word(word: str) -> str:
    if word and not any(c.isspace() or c in "'\"\\" for c in word):
        return escape(word)
    return "'" + word.replace("'", "'\\''") + "'"


class Walk:
    """The walk over one line's tree (and the trees of the ``sh -c`` strings in it): the
    statements and their commands; the words, the parts around the commands and the
    wrappers are judged by the modules named for them."""

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
                    redirect(self, child, depth)
                elif child.is_named:
                    self.statement(child, depth)
        elif t in ("variable_assignment", "variable_assignments"):
            assignments(self, node, depth)
        elif t == "declaration_command":
            declaration(self, node, depth)
        elif t == "for_statement":
            for i, child in enumerate(node.children):
                field = node.field_name_for_child(i)
                if field == "variable":
                    check_variable(self, node_text(child))
                elif field == "value":
                    read_word(self, child, depth)
                elif field == "body":
                    self.statement(child, depth)
        elif t == "case_statement":
            for child in node.children:
                if child.type == "case_item":
                    for i, part in enumerate(child.children):
                        if child.field_name_for_child(i) == "value":
                            read_word(self, part, depth)
                        elif part.is_named:
                            self.statement(part, depth)
                elif child.is_named:
                    read_word(self, child, depth)
        elif t == "test_command":
            test_command(self, node, depth)
        elif t == "unset_command":
            for child in node.named_children:
                read_word(self, child, depth)
        elif t.endswith("_redirect"):
            redirect(self, node, depth)
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
                assignment(self, child, depth)
            elif t == "command_name":
                name = child.named_children[0] if child.named_child_count == 1 else child
            elif t.endswith("_redirect"):
                redirect(self, child, depth)
            elif node.field_name_for_child(i) == "argument":
                args.append(child)
            elif t != "comment":
                self.fail(f"it uses {t} in a command")
        words = [read_word(self, a, depth) for a in args]
        if name is None:
            return
        text, kind = read_word(self, name, depth)
        if kind == DYNAMIC:
            self.fail(f"a command name is only known when the line runs ({node_text(name)})")
        elif kind == PATTERN:
            self.fail(f"the shell expands the command name {node_text(name)}")
        else:
            self.run([(text, kind), *words], depth)

    def run(self, words: list[Word], depth: int) -> None:
        """A simple command whose name (``words[0]``) is a literal."""
        written = words[0][0]
        program = written if "/" in written else ""
        name = posixpath.basename(written.rstrip("/")) if program else written
        if not name:
            self.fail(f"the command name {written!r} names no program")
            return
        texts = (name, *(w[0] for w in words[1:]))
        wrapper = WRAPPERS.get(name)
        if name in _OPAQUE:
            self.fail(_OPAQUE[name])
            if name == "eval" and depth < MAX_DEPTH and all(k == LITERAL for _, k in words[1:]):
                # Never whole, but what it would run still meets the deny rules.
                self.line(" ".join(t for t, _ in words[1:]), depth + 1)
        elif name in _CHDIR:
            self.changes_dir = True
        elif name in _OTHER_SHELLS:
            self.fail(f"{name} runs commands in a language roost does not judge")
        if wrapper is not None:
            inner = unwrap(self, name, wrapper, words, depth)
            self.commands.append(Command(texts, program, wrapper.transparent and inner is not None))
            if inner:
                self.inner(name, inner, depth)
        elif name in SHELLS:
            runs_string = shell(self, name, words, depth)
            self.commands.append(Command(texts, program, runs_string))
        else:
            self.commands.append(Command(texts, program))
            if name == "find":
                find(self, words, depth)

    def inner(self, wrapper: str, words: list[Word], depth: int) -> None:
        text, kind = words[0]
        if kind != LITERAL:
            self.fail(f"the command {wrapper} runs is only known when the line runs")
        else:
            self.run(words, depth)
