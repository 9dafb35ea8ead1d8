"""Completion in the shell's input: slash commands (built-in and custom), their arguments,
and ``@path`` mentions.

Names the daemon knows (agents, models, sessions, custom commands) come from a
:class:`Names` object that the shell fills when it connects; completing never waits on the
daemon.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterable

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from roost.protocol import MODES

from ._slash import COMMANDS, SCOPES, find

#: At most this many entries of a folder are offered for an ``@path``.
MAX_PATHS = 200


@dataclass(slots=True)
class Names:
    """What the daemon said exists, for completion."""

    agents: list[str] = field(default_factory=lambda: ["default"])
    models: list[str] = field(default_factory=list)
    #: (session id, a short description) pairs.
    sessions: list[tuple[str, str]] = field(default_factory=list)
    #: Custom commands: (the name to type, its argument hint, its description).
    commands: list[tuple[str, str, str]] = field(default_factory=list)


class ShellCompleter(Completer):
    """Completes ``/commands``, their arguments, and ``@paths`` under the session's folder."""

    def __init__(self, names: Names, cwd: Callable[[], str]) -> None:
        self._names = names
        self._cwd = cwd

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and not before.startswith("//") and "\n" not in before:
            name, space, arg = before[1:].partition(" ")
            if not space:
                for command in COMMANDS:
                    if command.name.startswith(name):
                        yield Completion(command.name, -len(name), display_meta=command.doc)
                builtins = {c.name for c in COMMANDS}
                for custom, hint, doc in self._names.commands:
                    if custom.startswith(name) and custom not in builtins:
                        yield Completion(custom, -len(name), display_meta=" ".join(p for p in (hint, doc) if p))
                return
            commands = find(name)
            if len(commands) == 1 and " " not in arg:
                yield from self._arguments(commands[0].complete, arg)
            return
        word = before.split()[-1] if before and not before[-1].isspace() else ""
        if word.startswith("@"):
            yield from self._paths(word[1:])

    def _arguments(self, kind: str, arg: str) -> Iterable[Completion]:
        options: list[tuple[str, str]]
        if kind == "agent":
            options = [(a, "") for a in self._names.agents]
        elif kind == "model":
            options = [(m, "") for m in self._names.models]
        elif kind == "mode":
            options = [(m, "") for m in MODES]
        elif kind == "scope":
            options = [(s, "") for s in SCOPES]
        elif kind == "session":
            options = list(self._names.sessions)
        else:
            return
        for value, meta in options:
            if value.startswith(arg):
                yield Completion(value, -len(arg), display_meta=meta)

    def _paths(self, typed: str) -> Iterable[Completion]:
        folder, _, start = typed.rpartition("/")
        base = os.path.join(self._cwd(), os.path.expanduser(folder)) if folder else self._cwd()
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            return
        shown = 0
        for entry in entries:
            if not entry.name.startswith(start) or (entry.name.startswith(".") and not start.startswith(".")):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            name = entry.name + ("/" if is_dir else "")
            text = f"{folder}/{name}" if folder else name
            yield Completion("@" + text, -len(typed) - 1, display=name)
            shown += 1
            if shown >= MAX_PATHS:
                return
