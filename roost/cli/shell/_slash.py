"""The slash commands: names, arguments, help, and how their arguments complete.

Only the table and the parsing live here; what each built-in does is in :mod:`._builtins`
(``Builtins._cmd_NAME``). A command may be typed as any unique prefix of its name. Any other
``/name`` is a custom command (``.claude/commands``), which the daemon expands: a built-in
of that exact name comes first, then a custom command of that name, then the built-ins
that ``name`` begins.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Collection


#: Scopes of an approval (session_any: the commands with any arguments).
SCOPES = ("once", "session", "session_any")


@dataclass(frozen=True, slots=True)
class Command:
    """One slash command."""

    name: str
    args: str
    doc: str
    #: What its argument completes to: "agent", "mode", "model", "session", "scope" or "".
    complete: str = ""
    #: Other names it answers to in full: the ones other tools use (Claude Code's /clear).
    aliases: tuple[str, ...] = ()


COMMANDS: tuple[Command, ...] = (
    Command("help", "", "this list"),
    Command("agent", "NAME", "run the next tasks with this agent", "agent"),
    Command("mode", "MODE", "plan, agent, full or exec for the next tasks", "mode"),
    Command("model", "ID", "provider/model or an alias for the next tasks", "model"),
    Command("sessions", "", "list the daemon's sessions"),
    Command("switch", "ID", "go to another session (id or unique prefix)", "session"),
    Command("new", "", "start a new session in this directory", aliases=("clear",)),
    Command("rewind", "[N]", "go on in a fork of this session from before its last N tasks (default 1)"),
    Command("abort", "", "abort the run in flight (the session stays)"),
    Command("approve", "[once|session|session_any]", "approve the open request", "scope"),
    Command("deny", "[REASON]", "deny the open request"),
    Command("compact", "[instructions]", "compact the session's history (what the summary should keep)"),
    Command("report", "", "the last run: steps, tools, tokens, cost, latency"),
    Command("prompt", "", "the session's system prompt"),
    Command("detach", "", "leave; runs go on in the daemon", aliases=("exit", "quit")),
)


def parse(text: str) -> tuple[str, str] | None:
    """``/name rest`` as (name as typed, rest); None when ``text`` is not a command.

    ``//text`` is not a command: it is text that starts with ``/``.
    """
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, rest = text[1:].partition(" ")
    return name.strip(), rest.strip()


def find(name: str) -> list[Command]:
    """The commands ``name`` may mean: the one of that name, else those it is a prefix of."""
    exact = [c for c in COMMANDS if name == c.name or name in c.aliases]
    return exact or [c for c in COMMANDS if c.name.startswith(name)]


def closest(name: str, custom: Collection[str] = ()) -> list[str]:
    """The names (built-in, their aliases, ``custom``) closest to a mistyped ``name``."""
    known = [n for c in COMMANDS for n in (c.name, *c.aliases)] + list(custom)
    return difflib.get_close_matches(name, known, n=3, cutoff=0.6)


def builtin(name: str, custom: Collection[str]) -> list[Command] | None:
    """The built-in commands ``/name`` may mean (more than one: it is ambiguous), or None
    when it is a custom command: one of the ``custom`` names, a ``folder:name``, or any
    name no built-in begins (the daemon says whether there is such a command)."""
    if any(name == c.name or name in c.aliases for c in COMMANDS):
        return find(name)
    if name in custom or ":" in name:
        return None
    return find(name) or None
