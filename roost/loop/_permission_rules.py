"""Permission rules: ``TOOL`` or ``TOOL(PATTERN)`` with an action (:class:`Rule`,
:func:`parse_rule`, Claude Code's rule syntax read as roost's), and what a rule is about: the
tools its glob names, and for ``bash`` the commands its pattern matches (deny and ask rules
whatever the unknown parts of a command turn out to be, allow rules only where a ``*``
covers them). How rules decide a call is :func:`roost.loop.decide`'s (``_permissions``).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ._regex import Regex, linear_regex
from ._shell_lines import Command
from ._shell_words import WILD

ALLOW, ASK, DENY = "allow", "ask", "deny"
ACTIONS = (ALLOW, ASK, DENY)

#: The tool that fetches a web page (decided on its URL).
WEB_FETCH = "web_fetch"
#: Tools whose main argument is a path, with the input key that holds it.
PATH_TOOLS = {
    "read": "path", "write": "path", "edit": "path", "glob": "path", "grep": "path", "notebook_read": "path",
    "notebook_edit": "path",
}
SEARCH_TOOLS = frozenset({"glob", "grep"})
#: Tools that read files as ``read`` does: its rules are about them too.
READING_TOOLS = SEARCH_TOOLS | {"notebook_read"}
#: Tools that change a file as ``edit`` does: the rules on ``edit`` and ``write`` are about
#: them too.
EDITING_TOOLS = frozenset({"notebook_edit"})

_RULE = re.compile(r"^\s*([^()\s]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


class RuleError(ValueError):
    """A rule that cannot be parsed."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One permission rule: an action, a tool glob, and a pattern on the main argument."""

    action: str
    tool: str
    pattern: str | None = None
    #: Where the rule came from (a config file, ``dispatch``, ``session``), for messages.
    source: str = ""

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"

    def to_map(self) -> dict[str, Any]:
        """The rule as stored in ``run.started``."""
        return {"action": self.action, "rule": str(self), "source": self.source}

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> Rule:
        """The rule back from its map."""
        return parse_rule(m["rule"], m["action"], m.get("source", ""))


def parse_rule(text: str, action: str, source: str = "") -> Rule:
    """``bash(git status*)`` as a Rule.

    Raises:
        RuleError: not ``TOOL`` or ``TOOL(PATTERN)``, or an unknown action.
    """
    if action not in ACTIONS:
        raise RuleError(f"unknown action {action!r} (allow, ask or deny)")
    match = _RULE.match(text) if isinstance(text, str) else None
    if match is None:
        raise RuleError(f"{text!r} is not a rule: write TOOL or TOOL(PATTERN), e.g. bash(git status*)")
    tool, pattern = match.group(1), match.group(2)
    if pattern is not None:
        pattern = pattern.strip()
        if not pattern:
            raise RuleError(f"{text!r}: the pattern in parentheses is empty")
    if tool[:1].isupper() or tool.startswith("mcp__"):
        tool, pattern = _from_claude(text, tool, pattern)
    return Rule(action, tool, pattern, source)


#: roost's tools by Claude Code's names for them (a hook is told the first).
CLAUDE_TOOL_NAMES: Mapping[str, tuple[str, ...]] = {
    "bash": ("Bash",),
    "bash_output": ("BashOutput",),
    "kill_shell": ("KillShell", "KillBash"),
    "read": ("Read",),
    "write": ("Write",),
    "edit": ("Edit", "MultiEdit"),
    "glob": ("Glob", "LS"),
    "grep": ("Grep",),
    "notebook_read": ("NotebookRead",),
    "notebook_edit": ("NotebookEdit",),
    "web_fetch": ("WebFetch",),
    "web_search": ("WebSearch",),
    "todo": ("TodoWrite",),
    "task": ("Task", "Agent"),
    "ask_human": ("AskUserQuestion",),
    "skill": ("Skill",),
}
#: Claude Code's rules on these apply to every tool that edits a file.
_CLAUDE_EDITS = frozenset({"Edit", "MultiEdit", "Write"})


def _from_claude(text: str, tool: str, pattern: str | None) -> tuple[str, str | None]:
    """A rule in Claude Code's syntax as roost's: ``Bash(npm test:*)``, ``Read(./.env)``,
    ``Edit(//abs/**)`` (``//`` starts an absolute path, a leading ``/`` is the project's
    folder), ``WebFetch(domain:host)``, ``mcp__server__tool``.

    Raises:
        RuleError: a tool roost does not have, or a pattern Claude Code would not match.
    """
    if tool.startswith("mcp__"):
        server, _, name = tool[5:].partition("__")
        if not server:
            raise RuleError(f"{text!r} names no MCP server")
        return f"{server}__{name or '*'}", pattern
    if tool in _CLAUDE_EDITS:
        roost = "write|edit"
    else:
        roost = next((r for r, names in CLAUDE_TOOL_NAMES.items() if tool in names), "")
    if not roost:
        known = ", ".join(n for names in CLAUDE_TOOL_NAMES.values() for n in names)
        raise RuleError(f"{text!r}: roost has no tool Claude Code calls {tool} (it knows {known})")
    if pattern is None or roost == "bash":
        return roost, pattern
    if roost == WEB_FETCH:
        if not pattern.startswith("domain:") or not pattern[7:]:
            raise RuleError(f"{text!r}: Claude Code's WebFetch rules name a host as domain:HOST")
        return roost, pattern[7:]
    if roost in PATH_TOOLS or roost == "write|edit":
        if pattern.startswith("//"):
            pattern = pattern[1:]
        elif pattern.startswith("/"):
            pattern = pattern[1:] or "."
        return roost, pattern
    raise RuleError(f"{text!r}: Claude Code's {tool} takes no pattern")


def tool_matches(rule: Rule, name: str) -> bool:
    """Whether ``rule`` is about the tool ``name``: its tool glob (or one of several,
    ``write|edit``) matches; a ``read`` rule covers ``glob``, ``grep`` and
    ``notebook_read`` too (they read files), and a ``write`` or ``edit`` rule covers
    ``notebook_edit`` (it changes one)."""
    return any(
        fnmatch.fnmatchcase(name, tool)
        or (tool == "read" and name in READING_TOOLS)
        or (tool in ("write", "edit") and name in EDITING_TOOLS)
        for tool in rule.tool.split("|")
    )


def origin(rule: Rule) -> str:
    return f" (from {rule.source})" if rule.source else ""


def narrows(rule: Rule, command: Command) -> bool:
    """Whether a deny or ask rule is about ``command``: it could be what the rule names,
    by its name alone or by its path as written."""
    if rule.pattern is None:
        return True
    full, could_start = _command_regexes(rule.pattern)
    for text in dict.fromkeys((command.text, command.written)):
        if WILD in text:
            if could_start.fullmatch(text[: text.index(WILD)]):
                return True
        elif full.fullmatch(text):
            return True
    return False


def allows(rule: Rule, command: Command) -> bool:
    """Whether an allow rule covers ``command`` as written, whatever its unknown parts are:
    only a ``*`` of the pattern can stand for them."""
    if rule.pattern is None:
        return True
    return _command_regexes(rule.pattern)[0].fullmatch(command.written) is not None


@functools.lru_cache(maxsize=1024)
def _command_regexes(pattern: str) -> tuple[Regex, Regex]:
    """A command pattern as a regex of whole texts, and as one of the texts that some
    continuation could make match (for a command whose end is unknown).

    The pattern is read as a shell reads words: white space between words is one space
    (the words of a command are matched joined by one space), and quotes and backslashes
    make what they hold literal, spaces and ``*`` included (``bash(git commit -m "a  b")``
    is that one command). A pattern whose quotes do not close is read as written.
    """
    chars = _pattern_chars(pattern)
    plain = "".join(c for c, _ in chars)
    if all(not quoted for _, quoted in chars) and _NAME_STAR.fullmatch(plain):
        # ``ls*`` is the command ls with any arguments, as ``ls:*`` is: not lsattr.
        chars = [*chars[:-1], (":", False), ("*", False)]
    if chars[-2:] == [(":", False), ("*", False)]:
        atoms = [re.escape(c) for c, _ in chars[:-2]] + [r"(?: .*)?"]
    else:
        atoms = _glob_atoms(chars)
    could_start = ""
    for atom in reversed(atoms):
        could_start = f"(?:{atom}{could_start})?"
    # Linear (RE2): a project's deny rule may be ``a*a*a*a*...b``.
    return linear_regex("".join(atoms), dot_all=True), linear_regex(could_start, dot_all=True)


def _pattern_chars(pattern: str) -> list[tuple[str, bool]]:
    """The pattern's characters, each marked quoted (literal) or not, its words joined by
    one (literal) space: shell quoting (``'...'``, ``"..."`` with ``\\"`` and ``\\\\``,
    ``\\x``) read, unless a quote does not close (then as written)."""
    chars: list[tuple[str, bool]] = []
    word = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c.isspace():
            word = False
            i += 1
            continue
        if not word and chars:
            chars.append((" ", True))
        word = True
        if c == "'":
            close = pattern.find("'", i + 1)
            if close == -1:
                return _as_written(pattern)
            chars += [(q, True) for q in pattern[i + 1 : close]]
            i = close + 1
        elif c == '"':
            i += 1
            while i < n and pattern[i] != '"':
                if pattern[i] == "\\" and i + 1 < n and pattern[i + 1] in '"\\$`':
                    i += 1
                chars.append((pattern[i], True))
                i += 1
            if i >= n:
                return _as_written(pattern)
            i += 1
        elif c == "\\" and i + 1 < n:
            chars.append((pattern[i + 1], True))
            i += 2
        else:
            chars.append((c, False))
            i += 1
    return chars


def _as_written(pattern: str) -> list[tuple[str, bool]]:
    """A pattern with a quote that does not close: its words as written, quotes literal."""
    return [(c, c in "'\"") for c in " ".join(pattern.split())]


def _glob_atoms(chars: list[tuple[str, bool]]) -> list[str]:
    # As fnmatch on the unquoted characters, except that WILD (text only known when the
    # line runs) is matched by * alone; a quoted character is itself.
    atoms: list[str] = []
    i, n = 0, len(chars)
    while i < n:
        c, quoted = chars[i]
        if quoted:
            atoms.append(re.escape(c))
        elif c == "*":
            if not atoms or atoms[-1] != ".*":
                atoms.append(".*")
        elif c == "?":
            atoms.append(f"[^{WILD}]")
        elif c == "[":
            text = "".join(ch if not q else "\0" for ch, q in chars)
            start = i + 2 if text[i + 1 : i + 2] == "!" else i + 1
            close = text.find("]", start + 1 if text[start : start + 1] == "]" else start)
            if close == -1 or any(q for _, q in chars[i:close]):
                atoms.append(re.escape(c))
            else:
                body = re.sub(r"([\\^\[\]&~|])", r"\\\1", text[start:close])
                # A negated class never matches WILD (RE2 has no lookahead to say so).
                atoms.append(f"[^{body}{WILD}]" if start == i + 2 else f"[{body}]")
                i = close
        else:
            atoms.append(re.escape(c))
        i += 1
    return atoms


#: A command name and a star: the command with any arguments.
_NAME_STAR = re.compile(r"[^\s*?\[\]:]+\*")
