"""Deciding whether a tool call may run: mode presets, then ``allow`` / ``ask`` / ``deny`` rules.

A rule names a tool (a glob: ``bash``, ``everything__*``) and optionally a pattern on the
call's main argument: the command for ``bash``, the path for the file tools.

- ``bash(git status*)``: ``*`` matches anything, spaces and slashes included; ``npm test``
  matches exactly; ``npm run test:*`` (the form other agent tools write) is a prefix.
  A compound line (``a && b | c``, ``$(...)``) is split into its simple commands, and each
  must pass: the strictest answer of any part is the answer for the line.
- ``write(src/**)``, ``read(~/.ssh/**)``: a glob on the path. Relative patterns are relative
  to the session's working directory, ``~`` is the user's home; paths are compared after
  normalising (``a/../b``), before following symlinks (the tools check where a path really
  leads and refuse a change that a symlink takes outside the working directory).

Deny wins over ask, ask over allow; a call no rule matches gets the mode's preset. In
``agent`` mode reads (and ``skill``, ``remember``) are allowed and everything else asks (a path outside the working
directory asks even for a read); ``full`` and ``exec`` allow everything; ``plan`` runs no
tools. ``yes`` (``--yes``) and ``full`` turn every ask into an allow, never a deny into one.
With ``Policy.sandboxed`` (a working sandbox and ``[sandbox] auto_allow``) agent mode
allows the bash calls no rule asks about or denies.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ._patterns import glob_matcher
from ._shell import command_name, split_commands, strip_assignments

ALLOW, ASK, DENY = "allow", "ask", "deny"
ACTIONS = (ALLOW, ASK, DENY)

#: The tool a person answers instead of a program.
ASK_HUMAN = "ask_human"
#: Tools whose main argument is a path, with the input key that holds it.
_PATH_TOOLS = {"read": "path", "write": "path", "edit": "path", "glob": "path", "grep": "path"}
_SEARCH_TOOLS = frozenset({"glob", "grep"})
#: Allowed without asking in agent mode: reading, and roost's own notes (skills, memory).
_READ_TOOLS = frozenset({"read", ASK_HUMAN, "skill", "remember"}) | _SEARCH_TOOLS
_SEVERITY = {ALLOW: 0, ASK: 1, DENY: 2}
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
    return Rule(action, tool, pattern, source)


@dataclass(frozen=True, slots=True)
class Policy:
    """What decides a run's calls besides its mode: the rules, ``--yes``, and the sandbox."""

    rules: tuple[Rule, ...] = ()
    yes: bool = False
    #: The user's home, for ``~`` in rules and paths.
    home: str = ""
    #: bash commands run in a working sandbox and the user's config lets agent mode run
    #: them without asking (``[sandbox] auto_allow``): a bash call no rule asks about or
    #: denies is allowed.
    sandboxed: bool = False

    def to_map(self) -> dict[str, Any]:
        """The policy as stored in ``run.started``."""
        m = {"rules": [r.to_map() for r in self.rules], "yes": self.yes, "home": self.home}
        return {**m, "sandboxed": True} if self.sandboxed else m

    @classmethod
    def from_map(cls, m: Mapping[str, Any] | None) -> Policy:
        """The policy of a run back from ``run.started``."""
        m = m or {}
        rules = tuple(Rule.from_map(r) for r in m.get("rules", ()))
        return cls(rules, bool(m.get("yes")), m.get("home", ""), bool(m.get("sandboxed")))


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer for one call."""

    action: str
    #: Why, in words a person (and, for a deny, the model) can act on.
    reason: str
    #: Rules that approving the call "for the session" adds to the session's allow list.
    session_rules: tuple[str, ...] = ()
    #: The call touches a path outside the working directory.
    outside: bool = False


def decide(
    policy: Policy,
    mode: str,
    session_rules: tuple[Rule, ...],
    name: str,
    input: Mapping[str, Any],
    cwd: str,
) -> Decision:
    """Whether the call ``name(input)`` may run in a ``mode`` run of a session at ``cwd``."""
    if mode == "plan":
        return Decision(DENY, "plan mode runs no tools")
    if name == ASK_HUMAN:
        return Decision(ALLOW, "asking a person is always allowed")
    rules = policy.rules + session_rules
    subjects, outside = _subjects(policy, name, input, cwd)
    worst: tuple[str, str] | None = None
    for subject in subjects:
        action, reason = _decide_one(policy, mode, rules, name, subject, outside, cwd)
        if worst is None or _SEVERITY[action] > _SEVERITY[worst[0]]:
            worst = (action, reason)
    assert worst is not None
    action, reason = worst
    if action == ASK and (policy.yes or mode in ("full", "exec")):
        return Decision(ALLOW, f"approved in advance ({'--yes' if policy.yes else mode + ' mode'})", outside=outside)
    return Decision(action, reason, _session_rules(policy, name, subjects, outside, cwd), outside)


def rule_matches(rule: Rule, name: str, subject: str | None, cwd: str, home: str) -> bool:
    """Whether ``rule`` covers a call of ``name`` whose main argument is ``subject``.

    A ``read`` rule covers ``glob`` and ``grep`` too: they read the files they search.
    """
    if not fnmatch.fnmatchcase(name, rule.tool) and not (rule.tool == "read" and name in _SEARCH_TOOLS):
        return False
    if rule.pattern is None:
        return True
    if subject is None:
        return False
    if name in _PATH_TOOLS:
        pattern = _absolute(rule.pattern, cwd, home)
        # ``dir/**`` covers the folder itself too (a glob or grep of ``~/.ssh``).
        return glob_matcher(pattern)(subject) or (rule.pattern.endswith("/**") and subject == pattern[:-3])
    return _command_matches(rule.pattern, subject)


def _decide_one(
    policy: Policy, mode: str, rules: tuple[Rule, ...], name: str, subject: str | None, outside: bool, cwd: str
) -> tuple[str, str]:
    matched = [r for r in rules if rule_matches(r, name, subject, cwd, policy.home)]
    for action in (DENY, ASK, ALLOW):
        hit = next((r for r in matched if r.action == action), None)
        if hit is not None:
            what = f"{name} {subject}" if subject else name
            origin = f" (from {hit.source})" if hit.source else ""
            return action, f"{what}: rule {action} {hit}{origin}"
    if mode in ("full", "exec"):
        return ALLOW, f"{mode} mode allows every tool"
    if name == "bash" and policy.sandboxed:
        return ALLOW, "bash runs in the sandbox ([sandbox] auto_allow)"
    if name in _PATH_TOOLS and outside and subject is not None and not _inside(subject, cwd):
        return ASK, f"{subject} is outside the working directory"
    if name in _READ_TOOLS:
        return ALLOW, f"{name} is allowed in {mode} mode"
    return ASK, f"{name} asks in {mode} mode"


def _subjects(policy: Policy, name: str, input: Mapping[str, Any], cwd: str) -> tuple[list[str | None], bool]:
    if name == "bash":
        command = input.get("command")
        if not isinstance(command, str):
            return [None], False
        return [*split_commands(command)] or [command.strip()], False
    key = _PATH_TOOLS.get(name)
    if key is None:
        return [None], False
    path = input.get(key, ".")
    if not isinstance(path, str):
        return [None], False
    absolute = _absolute(path, cwd, policy.home)
    return [absolute], not _inside(absolute, cwd)


def _session_rules(
    policy: Policy, name: str, subjects: list[str | None], outside: bool, cwd: str
) -> tuple[str, ...]:
    if name == "bash":
        names = dict.fromkeys(command_name(strip_assignments(s)) for s in subjects if s)
        return tuple(r for n in names if n for r in (f"bash({n})", f"bash({n} *)"))
    if name in _PATH_TOOLS:
        # Inside the project, the tool for the session; outside, only the path asked about.
        if outside:
            return tuple(f"{name}({s})" for s in subjects if s)
        return (f"{name}({posixpath.normpath(cwd)}/**)",)
    return (name,)


def _command_matches(pattern: str, command: str) -> bool:
    command = strip_assignments(command)
    if pattern.endswith(":*"):
        prefix = pattern[:-2]
        return command == prefix or command.startswith(prefix + " ")
    return fnmatch.fnmatchcase(command, " ".join(pattern.split()))


def _absolute(path: str, cwd: str, home: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = (home or "/") + path[1:]
    return posixpath.normpath(posixpath.join(cwd, path))


def _inside(path: str, cwd: str) -> bool:
    root = posixpath.normpath(cwd)
    return path == root or path.startswith(root.rstrip("/") + "/")
