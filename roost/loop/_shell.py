"""Splitting a shell command line into the simple commands it runs, for permission rules.

``git status && rm -rf build | tee log; echo $(whoami)`` runs four commands: ``git status``,
``rm -rf build``, ``tee log`` and ``echo $(whoami)``, and the substitution runs ``whoami``.
A rule allows the line only if it allows every one of them. This is a lexer, not a shell:
it knows quotes, escapes, the separators ``&& || ; | &`` and newlines, subshells and
groups, ``$(...)``, backticks and ``<(...)``; anything it cannot follow (an unclosed quote)
is kept whole, so that a rule sees more text rather than less.
"""

from __future__ import annotations

import re

_SEPARATORS = ("&&", "||", ";;", ";", "|&", "|", "&", "\n")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_GROUP_WORDS = frozenset({"{", "}", "(", ")", "!", "then", "do", "else", "elif", "if", "while", "until"})


def split_commands(line: str) -> list[str]:
    """The simple commands ``line`` runs, in order, each with spaces collapsed.

    Substituted commands (``$(...)``, backticks, ``<(...)``) follow the command that holds
    them, which keeps their text too.
    """
    commands: list[str] = []
    _split(line, commands, depth=0)
    return commands


def command_name(command: str) -> str:
    """The program a simple command runs: its first word after ``VAR=value`` assignments."""
    for word in command.split():
        if not _ASSIGNMENT.match(word):
            return word
    return ""


def strip_assignments(command: str) -> str:
    """``command`` without leading ``VAR=value`` words (``FOO=1 rm x`` is matched as ``rm x``)."""
    words = command.split(" ")
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)
    return " ".join(words)


def _split(line: str, out: list[str], depth: int) -> None:
    if depth > 16:
        out.append(_clean(line))
        return
    current: list[str] = []
    nested: list[str] = []
    i, n = 0, len(line)

    def flush() -> None:
        text = _clean("".join(current))
        if text:
            out.append(text)
        for inner in nested:
            _split(inner, out, depth + 1)
        current.clear()
        nested.clear()

    while i < n:
        c = line[i]
        if c == "\\" and i + 1 < n:
            current.append(line[i : i + 2])
            i += 2
        elif c == "'":
            end = line.find("'", i + 1)
            end = n - 1 if end == -1 else end
            current.append(line[i : end + 1])
            i = end + 1
        elif c == '"':
            end = _double_quoted_end(line, i + 1, nested)
            current.append(line[i : end + 1])
            i = end + 1
        elif c == "`":
            end = line.find("`", i + 1)
            end = n - 1 if end == -1 else end
            nested.append(line[i + 1 : end])
            current.append(line[i : end + 1])
            i = end + 1
        elif line.startswith(("$(", "<(", ">("), i) and not line.startswith("$((", i):
            end = _closing_paren(line, i + 2)
            nested.append(line[i + 2 : end])
            current.append(line[i : end + 1])
            i = end + 1
        elif c == "#" and (i == 0 or line[i - 1] in " \t\n;&|("):
            end = line.find("\n", i)
            i = n if end == -1 else end
        else:
            sep = next((s for s in _SEPARATORS if line.startswith(s, i)), None)
            if sep is None:
                current.append(c)
                i += 1
            elif sep == "&" and (line.startswith(">", i + 1) or (i > 0 and line[i - 1] in "<>")):
                # ``2>&1`` and ``&>file`` are redirections, not a background separator.
                current.append(c)
                i += 1
            else:
                flush()
                i += len(sep)
    flush()


def _double_quoted_end(line: str, i: int, nested: list[str]) -> int:
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i
        if line.startswith("$(", i) and not line.startswith("$((", i):
            end = _closing_paren(line, i + 2)
            nested.append(line[i + 2 : end])
            i = end + 1
            continue
        if c == "`":
            end = line.find("`", i + 1)
            end = n - 1 if end == -1 else end
            nested.append(line[i + 1 : end])
            i = end + 1
            continue
        i += 1
    return n - 1


def _closing_paren(line: str, i: int) -> int:
    depth, n = 1, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = line.find("'", i + 1)
            i = n if end == -1 else end + 1
            continue
        if c == '"':
            i = _double_quoted_end(line, i + 1, []) + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n - 1


def _clean(text: str) -> str:
    words = text.split()
    # Grouping words belong to the shell, not to the command a rule is about.
    while words and words[0] in _GROUP_WORDS:
        words.pop(0)
    while words and words[-1] in ("}", ")"):
        words.pop()
    if words and words[0].startswith("(") and not words[0].startswith("(("):
        words[0] = words[0][1:]
    # The ")" closing a subshell opened in an earlier part of the line.
    while words and words[-1].endswith(")") and " ".join(words).count("(") < " ".join(words).count(")"):
        words[-1] = words[-1][:-1]
    if words and words[0] in ("fi", "done", "esac"):
        return ""
    return " ".join(w for w in words if w)
