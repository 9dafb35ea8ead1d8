"""A command's text as Claude Code expands it: arguments, ``!`command``` lines, ``@file``.

Arguments (what follows ``/name``), as Claude Code documents them for commands and skills:

- ``$ARGUMENTS``: everything after the name, as typed (nothing when nothing was).
- ``$ARGUMENTS[N]`` and its shorthand ``$N``: the N-th word, counting from 0 (``$0`` is the
  first; shell quoting groups words: ``"a b" c`` is two).
- ``$name``, for each name the front matter's ``arguments`` lists: the word in its place.

A placeholder whose word is missing stays as written, as Claude Code leaves it (since it
stopped erasing them): ``awk '{print $1}'`` in a command typed without arguments reaches
the model as written, and so does ``$5.0M``. One pass replaces them all, so an argument
that looks like a placeholder is never replaced in turn. Arguments given to a text with no
placeholder for them are added at its end as ``ARGUMENTS: ...``.

``!`command``` runs the command before the task is sent and puts its output in its place
(see ``roost.daemon.runs._command_lines`` for what may run); ``@path`` names a file whose
content goes with the task (see :func:`file_references`). This module only finds them.
"""

from __future__ import annotations

import re
import shlex
from typing import Sequence

#: ``!`command```: a command Claude Code runs before sending the text, as it finds them
#: (anywhere in the text, code spans and fences included).
SHELL_LINE = re.compile(r"!`([^`\n]+)`")
#: ``@path``: after white space or a bracket, not inside a word (``a@b.c`` is an address).
_REFERENCE = re.compile(r"(?:(?<=^)|(?<=[\s(\[]))@((?:~/|/)?[\w.][\w./~+-]*)", re.M)


def words(arguments: str) -> list[str]:
    """``arguments`` split as a shell splits words (an unclosed quote: at white space)."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()


def substitute(body: str, arguments: str, names: Sequence[str] = ()) -> str:
    """``body`` with its argument placeholders replaced (see the module docstring)."""
    arguments = arguments.strip()
    split = words(arguments)
    named = {name: i for i, name in enumerate(names)}
    # Longest names first: $file_name before $file.
    alternatives = [r"\$ARGUMENTS\[(\d+)\]", r"\$ARGUMENTS(?!\w)", r"\$(\d+)"]
    if named:
        alternatives.append(r"\$(" + "|".join(re.escape(n) for n in sorted(named, key=len, reverse=True)) + r")(?![\w-])")
    used = False

    def replace(match: re.Match[str]) -> str:
        nonlocal used
        index_text = match.group(1) or match.group(2)
        if index_text is not None:
            index = int(index_text)
        elif named and match.lastindex == 3:
            index = named[match.group(3)]
        else:
            used = True
            return arguments
        if index >= len(split):
            return match.group(0)
        used = True
        return split[index]

    text = re.sub("|".join(alternatives), replace, body)
    if arguments and not used:
        return f"{text}\n\nARGUMENTS: {arguments}"
    return text


def shell_lines(text: str) -> list[str]:
    """The commands of the ``!`command``` spans of ``text``, in order."""
    return [match.group(1) for match in SHELL_LINE.finditer(text)]


def file_references(text: str) -> list[str]:
    """The paths ``@path`` names in ``text`` (outside ``!`command``` spans), each once, in
    order, without what ends a sentence after them (``@src/a.py.`` is ``src/a.py``)."""
    found: list[str] = []
    for match in _REFERENCE.finditer(SHELL_LINE.sub("", text)):
        path = match.group(1).rstrip(".")
        if path and path not in found:
            found.append(path)
    return found


def tool_list(value: object) -> tuple[str, ...]:
    """A front matter's tool list (``allowed-tools``): a YAML list, or text with the tools
    apart by commas or spaces outside parentheses (``Bash(git add:*), Read``); anything
    else names none."""
    if isinstance(value, (list, tuple)):
        return tuple(str(item).strip() for item in value if isinstance(item, str) and item.strip())
    if not isinstance(value, str):
        return ()
    tools, current, depth = [], "", 0
    for char in value:
        if char in ", \t" and depth == 0:
            tools.append(current)
            current = ""
            continue
        depth += (char == "(") - (char == ")")
        current += char
    tools.append(current)
    return tuple(tool.strip() for tool in tools if tool.strip())


def name_list(value: object) -> tuple[str, ...]:
    """A front matter's ``arguments``: a YAML list of names, or names apart by spaces or
    commas."""
    if isinstance(value, (list, tuple)):
        items = [str(item) for item in value if isinstance(item, (str, int))]
    elif isinstance(value, str):
        items = re.split(r"[\s,]+", value.strip().strip("[]"))
    else:
        return ()
    return tuple(item.strip() for item in items if re.fullmatch(r"\w[\w-]*", item.strip()))
