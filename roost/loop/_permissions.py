"""Deciding whether a tool call may run: mode presets, then ``allow`` / ``ask`` / ``deny`` rules.

A rule names a tool (a glob: ``bash``, ``everything__*``) and optionally a pattern on the
call's main argument: the command for ``bash``, the path for the file tools.

- ``bash(git status*)``: ``*`` matches anything, spaces and slashes included; ``npm test``
  matches exactly; ``npm run test:*`` (the form other agent tools write) is a prefix.
  A line is judged on a real bash parser (:func:`roost.loop.judge`): every simple command
  it runs, wrappers unwrapped (``sudo rm x`` runs ``rm x`` too; ``bash -c '...'`` strings
  are judged in turn), each with quotes and backslashes removed. Deny and ask rules look at
  every command, by its name alone too when it is a path (``/bin/rm`` is ``rm``), and match
  when the command could be what they name (``$X`` or what ``xargs`` adds could be
  anything). Allow rules must cover every command the line runs, its path as written
  (``bash(ls*)`` does not allow ``./ls``), whatever its ``$X`` turn out to be. A line the
  judge cannot take whole (a function, ``eval``, ``${X:-rm}``, ``PATH=. ls``, ...) is never
  allowed by a rule: it asks, and where nothing asks (``full``, ``exec``, ``--yes``) it is
  refused if any deny rule is about bash, as it cannot be checked against them.
  Redirections (``> f``, ``>> f``, ``&> f``) are judged as writes of their files, by the
  ``write`` rules and the outside-the-working-directory check: in agent mode a line that
  writes a file asks unless a ``write`` rule allows it, whatever allows its commands.
  ``bash(ls*)`` is the command ``ls`` with any arguments, as ``bash(ls:*)`` is (not
  ``lsattr``).
- ``web_fetch(https://docs.python.org/*)``: a glob on the URL, made canonical first (see
  :func:`roost.loop.web_address`), ``*`` matching anything; a pattern without ``://``
  names the host (``web_fetch(docs.python.org)``, ``web_fetch(*.python.org)``). A URL that
  is not one ``web_fetch`` fetches is refused at once.
- ``write(src/**)``, ``read(~/.ssh/**)``: a glob on the path. Relative patterns are relative
  to the session's working directory, ``~`` is the user's home. Paths are normalised
  (``a/../b``, ``//x``, ``/proc/self/root/x``), and the daemon resolves the paths a call
  names (symlinks followed) before the call is decided (``resolved``): deny rules match the
  path as named or as resolved, everything else (allow and ask rules, the outside check)
  the resolved path.

Deny wins over ask, ask over allow; a call no rule matches gets the mode's preset. In
``agent`` mode reads (and ``skill``, ``remember`` into the project's memory, ``todo``) are allowed and everything else asks,
``web_fetch`` included (a path outside the working directory asks even for a read); ``full`` and ``exec`` allow everything; ``plan`` runs no
tools. ``yes`` (``--yes``) and ``full`` turn every ask into an allow, never a deny into one.
A hook's approval (``approved``) turns an ask into an allow too, but not an ask rule's.

Protected paths (:attr:`Policy.protected`: what says which programs run later, outside any
sandbox, such as ``.git/config``, ``.claude/``, ``~/.bashrc``) are asked about before
``write`` or ``edit`` changes them in every mode, ``full`` and ``--yes`` included, unless a
deny rule refuses it first or an allow rule names them: its pattern starts inside the
protected path (``write(.claude/**)``, ``edit(.git/config)``; not ``write(**)``, nor what
approving a call for the session adds). A protected folder that holds the working directory
protects nothing in it: the user chose to work there.

Approving a call "for the session" adds exactly :attr:`Decision.session_rules`, which the
request shows: for bash, each command the line runs that no rule allowed, as an exact rule
(``bash(npm test)``), and each write that asked; nothing for a line the judge cannot take
whole, or one with ``$X`` in it (approve it once); for ``web_fetch``, its host. For bash
it also offers :attr:`Decision.session_rules_any`, the wider choice: each of those commands
with any arguments (``bash(npm *)``; a command run bare also as it is, ``bash(ls)``), and the
same writes.
With ``Policy.sandboxed`` (a working sandbox and ``[sandbox] auto_allow``) agent mode
allows the bash calls no rule asks about or denies.

This module decides (:class:`Policy`, :func:`decide`, the mode presets); a rule's syntax and
what it matches are ``_permission_rules``'s, paths and the user's configuration
``_permission_paths``'s.
"""

from __future__ import annotations

import fnmatch
import functools
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ._modes import NO_APPROVAL_MODES, Mode
from ._patterns import glob_matcher
from ._permission_paths import USER_CONFIGURATION, absolute, inside, normal, rule_path
from ._permission_rules import (
    ALLOW,
    ASK,
    DENY,
    PATH_TOOLS,
    SEARCH_TOOLS,
    WEB_FETCH,
    Rule,
    allows,
    narrows,
    origin,
    tool_matches,
)
from ._shell_lines import Command, Judgement, command_pattern, escape, judge
from ._shell_words import WILD
from ._urls import UrlError, web_address


@functools.lru_cache(maxsize=256)
def _judged(line: str) -> Judgement:
    """:func:`judge`, remembered: a step judges its bash lines two or three times (the
    paths the daemon resolves first, then the decision), a tree-sitter parse each."""
    return judge(line)


#: The tool a person answers instead of a program.
ASK_HUMAN = "ask_human"
#: The model's checklist, and its memory.
TODO = "todo"
REMEMBER = "remember"
#: File tools that change a file: they ask before changing a protected one.
_WRITE_TOOLS = frozenset({"write", "edit", "notebook_edit"})
#: Allowed without asking in agent mode: reading, roost's own notes (skills, memory,
#: the checklist, which lives only in the session's events), and reading or ending the
#: run's own background commands (starting one is a bash call, judged as any).
_READ_TOOLS = frozenset({"read", "notebook_read", ASK_HUMAN, "skill", REMEMBER, "recall", TODO, "bash_output", "kill_shell"}) | SEARCH_TOOLS


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
    #: Real paths (files, and folders with all they hold) that say what runs later: a
    #: repository's git config and hooks, the project's roost and Claude Code files.
    #: ``write`` and ``edit`` ask before changing them, and :data:`USER_CONFIGURATION` in
    #: :attr:`home`, in every mode, unless an allow rule names them (see :func:`decide`).
    protected: tuple[str, ...] = ()

    def to_map(self) -> dict[str, Any]:
        """The policy as stored in ``run.started``."""
        m: dict[str, Any] = {"rules": [r.to_map() for r in self.rules], "yes": self.yes, "home": self.home}
        if self.sandboxed:
            m["sandboxed"] = True
        if self.protected:
            m["protected"] = list(self.protected)
        return m

    @classmethod
    def from_map(cls, m: Mapping[str, Any] | None) -> Policy:
        """The policy of a run back from ``run.started``."""
        m = m or {}
        rules = tuple(Rule.from_map(r) for r in m.get("rules", ()))
        return cls(rules, bool(m.get("yes")), m.get("home", ""), bool(m.get("sandboxed")), tuple(m.get("protected", ())))


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer for one call."""

    action: str
    #: Why, in words a person (and, for a deny, the model) can act on.
    reason: str
    #: Rules that approving the call "for the session" adds to the session's allow list
    #: (none: it can only be approved once).
    session_rules: tuple[str, ...] = ()
    #: The wider choice for the session, when there is one: each command of the line with
    #: any arguments (none: only :attr:`session_rules` can be added).
    session_rules_any: tuple[str, ...] = ()
    #: The call touches a path outside the working directory.
    outside: bool = False


def decide(
    policy: Policy,
    mode: str,
    session_rules: tuple[Rule, ...],
    name: str,
    input: Mapping[str, Any],
    cwd: str,
    resolved: Mapping[str, str] | None = None,
    approved: bool = False,
) -> Decision:
    """Whether the call ``name(input)`` may run in a ``mode`` run of a session at ``cwd``.

    ``resolved`` maps paths to where they really lead (symlinks followed), as the daemon
    found them: the paths the call names (:func:`paths_named`, as written), the working
    directory and the home folder. A path missing from it is taken as named.
    ``approved``: a hook approved the call (a PreToolUse hook's ``allow``): a call that
    would ask is allowed, unless an ask rule or a protected path asks (or a line the judge
    cannot take whole, where deny rules about bash cannot be checked); a deny stays a deny.
    """
    if mode == Mode.PLAN:
        return Decision(DENY, "plan mode runs no tools")
    if name == ASK_HUMAN:
        return Decision(ALLOW, "asking a person is always allowed")
    judging = _Judging(policy, mode, policy.rules + session_rules, cwd, resolved or {})
    if name == "bash" and isinstance(input.get("command"), str):
        verdict = judging.bash(input["command"])
    elif name in PATH_TOOLS and isinstance(input.get(PATH_TOOLS[name], "."), str):
        verdict = judging.path(name, input.get(PATH_TOOLS[name], "."))
    elif name == WEB_FETCH and isinstance(input.get("url"), str):
        verdict = judging.web(input["url"])
    else:
        # Memory for every project is read by every later run's prompt: it asks like a write.
        verdict = judging.tool(name, read=name != REMEMBER or input.get("scope", "project") != "user")
    if verdict.action == ASK and not verdict.protected and (policy.yes or mode in NO_APPROVAL_MODES):
        return Decision(ALLOW, f"approved in advance ({'--yes' if policy.yes else mode + ' mode'})", outside=verdict.outside)
    if verdict.action == ASK and approved and not verdict.protected and not verdict.firm:
        return Decision(ALLOW, f"approved by a hook ({verdict.reason})", outside=verdict.outside)
    if verdict.action != ASK:
        return Decision(verdict.action, verdict.reason, outside=verdict.outside)
    wider = verdict.wider if set(verdict.wider) != set(verdict.offer) else ()
    return Decision(verdict.action, verdict.reason, verdict.offer, wider, verdict.outside)


def call_matches(rule: Rule, name: str, input: Mapping[str, Any], cwd: str, home: str) -> bool:
    """Whether ``rule`` is about the call ``name(input)`` as a deny rule of it would be (a
    bash line: any command it runs could be what it names; a path as named): Claude Code's
    ``if`` on a hook."""
    deny = Rule(DENY, rule.tool, rule.pattern, rule.source)
    return decide(Policy((deny,), home=home), Mode.AGENT, (), name, input, cwd).action == DENY


def paths_named(name: str, input: Mapping[str, Any]) -> tuple[str, ...]:
    """The paths a call names, as written: what the daemon resolves before it is decided
    (a file tool's path, the files a bash line's redirections write)."""
    if name == "bash":
        command = input.get("command")
        return _judged(command).writes if isinstance(command, str) else ()
    key = PATH_TOOLS.get(name)
    path = input.get(key, ".") if key is not None else None
    return (path,) if isinstance(path, str) else ()


@dataclass(frozen=True, slots=True)
class _Verdict:
    action: str
    reason: str
    #: What approving for the session would add (empty: approve once only).
    offer: tuple[str, ...] = ()
    outside: bool = False
    #: The wider offer for the session (empty: only ``offer``).
    wider: tuple[str, ...] = ()
    #: It asks about a protected path: no mode and no ``--yes`` approves it in advance.
    protected: bool = False
    #: An ask rule asks (or deny rules cannot be checked): a hook's approval does not do.
    firm: bool = False


class _Judging:
    """One call's decision: the policy, the run's mode and rules, and where paths lead."""

    def __init__(self, policy: Policy, mode: str, rules: tuple[Rule, ...], cwd: str, resolved: Mapping[str, str]) -> None:
        self.policy = policy
        self.mode = mode
        self.rules = rules
        self.cwd = posixpath.normpath(cwd)
        self.resolved = resolved
        self.root = resolved.get(cwd, self.cwd)
        self.home = policy.home
        self.real_home = resolved.get(policy.home, policy.home) if policy.home else ""
        self.auto = mode in NO_APPROVAL_MODES

    def first(self, action: str, tool: str, test: Any) -> Rule | None:
        """The first rule of ``action`` about ``tool`` for which ``test(rule)`` holds."""
        for rule in self.rules:
            if rule.action == action and tool_matches(rule, tool) and test(rule):
                return rule
        return None

    def tool(self, name: str, *, read: bool = True) -> _Verdict:
        """A call whose input no rule pattern looks at (``read``: false for a call of a
        reading tool that writes all the same)."""
        for action in (DENY, ASK, ALLOW):
            hit = self.first(action, name, lambda r: r.pattern is None)
            if hit is not None:
                return _Verdict(action, f"{name}: rule {action} {hit}{origin(hit)}", (name,) if action == ASK else (), firm=action == ASK)
        if self.auto:
            return _Verdict(ALLOW, f"{self.mode} mode allows every tool")
        if name in _READ_TOOLS and read:
            return _Verdict(ALLOW, f"{name} is allowed in {self.mode} mode")
        if name == REMEMBER:
            return _Verdict(ASK, f"{name} into the user's memory (read by every project's runs) asks in {self.mode} mode")
        return _Verdict(ASK, f"{name} asks in {self.mode} mode", (name,))

    # -- paths ------------------------------------------------------------------------------

    def path(self, tool: str, path: str, *, in_bash: bool = False) -> _Verdict:
        """A file tool's call on ``path`` (or, ``in_bash``, a redirection writing it, judged
        as a ``write`` is, except that the sandbox, not a question, holds what it does to a
        protected path)."""
        named = absolute(path, self.cwd, self.home)
        real = normal(self.resolved.get(path, named))
        shown = named if real == named else f"{named} (which is {real})"
        outside = not inside(real, self.root)

        def denies(rule: Rule) -> bool:
            return self.path_matches(rule, real, self.root, self.real_home) or (
                (named, self.cwd, self.home) != (real, self.root, self.real_home)
                and self.path_matches(rule, named, self.cwd, self.home)
            )

        hit = self.first(DENY, tool, denies)
        guarded = None if hit is not None or in_bash or tool not in _WRITE_TOOLS else self.guarding(real, named)
        if guarded is not None and self.first(ALLOW, tool, lambda r: self.names(r, real, guarded)) is None:
            why = f"{tool} {shown}: {guarded} is protected (it says what runs outside the sandbox); every mode asks"
            return _Verdict(ASK, why, (f"{tool}({escape(real)})",), outside, protected=True)
        for action in (ASK, ALLOW):
            if hit is None:
                hit = self.first(action, tool, lambda r: self.path_matches(r, real, self.root, self.real_home))
        if hit is not None:
            # An ask rule would outdo an approval for the session: once only.
            return _Verdict(hit.action, f"{tool} {shown}: rule {hit.action} {hit}{origin(hit)}", (), outside, firm=hit.action == ASK)
        # Inside the project, the tool for the session; outside, only the path asked about.
        offer = (f"{tool}({escape(real)})",) if outside else (f"{tool}({escape(self.root)}/**)",)
        if self.auto:
            return _Verdict(ALLOW, f"{self.mode} mode allows every tool", outside=outside)
        if outside:
            return _Verdict(ASK, f"{shown} is outside the working directory", offer, outside)
        if tool in _READ_TOOLS:
            return _Verdict(ALLOW, f"{tool} is allowed in {self.mode} mode")
        return _Verdict(ASK, f"{tool} asks in {self.mode} mode", offer)

    def guarding(self, real: str, named: str) -> str | None:
        """The protected path that holds ``real``, or the entry of the user's configuration
        that holds ``real`` or ``named`` (None: none does). One that holds the working
        directory itself protects nothing here: the user chose to work in it."""
        for path in self.protected:
            if (inside(real, path) or inside(named, path)) and not inside(self.root, path):
                return path
        return None

    @functools.cached_property
    def protected(self) -> tuple[str, ...]:
        homes = dict.fromkeys(h for h in (self.home, self.real_home) if h)
        return (*self.policy.protected, *(posixpath.join(h, n) for h in homes for n in USER_CONFIGURATION))

    def names(self, rule: Rule, real: str, guarded: str) -> bool:
        """Whether an allow rule is about ``real`` inside the protected ``guarded`` on
        purpose: it matches, and its pattern starts inside ``guarded`` (``write(.claude/**)``
        does; ``write(**)`` or the session's ``write(<folder>/**)`` does not)."""
        if rule.pattern is None or not self.path_matches(rule, real, self.root, self.real_home):
            return False
        pattern = rule_path(rule.pattern, self.root, self.real_home)
        head = re.split(r"[*?\[]", pattern, maxsplit=1)
        literal = head[0] if len(head) == 1 else posixpath.dirname(head[0] + "x")
        return inside(literal, guarded)

    def path_matches(self, rule: Rule, subject: str, cwd: str, home: str) -> bool:
        if rule.pattern is None:
            return True
        pattern = rule_path(rule.pattern, cwd, home)
        # ``dir/**`` covers the folder itself too (a glob or grep of ``~/.ssh``).
        return glob_matcher(pattern)(subject) or (rule.pattern.endswith("/**") and subject == pattern[:-3])

    # -- web --------------------------------------------------------------------------------

    def web(self, url: str) -> _Verdict:
        """A ``web_fetch`` call: rules on its canonical URL (or, without ``://``, its host)."""
        try:
            address = web_address(url)
        except UrlError as exc:
            return _Verdict(DENY, f"{WEB_FETCH} {url}: {exc}")
        hosts = (address.host, f"{address.host}:{address.port}")

        def matches(rule: Rule) -> bool:
            if rule.pattern is None:
                return True
            if "://" in rule.pattern:
                return fnmatch.fnmatchcase(address.url, rule.pattern)
            return any(fnmatch.fnmatchcase(h, rule.pattern.lower()) for h in hosts)

        for action in (DENY, ASK, ALLOW):
            hit = self.first(action, WEB_FETCH, matches)
            if hit is not None:
                # An ask rule would outdo an approval for the session: once only.
                return _Verdict(action, f"{WEB_FETCH} {address.url}: rule {action} {hit}{origin(hit)}", firm=action == ASK)
        if self.auto:
            return _Verdict(ALLOW, f"{self.mode} mode allows every tool")
        return _Verdict(ASK, f"{WEB_FETCH} asks in {self.mode} mode", (f"{WEB_FETCH}({escape(address.host)})",))

    # -- bash -------------------------------------------------------------------------------

    def bash(self, line: str) -> _Verdict:
        judged = _judged(line)
        for command in judged.commands:
            hit = self.first(DENY, "bash", lambda r: narrows(r, command))
            if hit is not None:
                return _Verdict(DENY, f"bash {_shown(command)}: rule deny {hit}{origin(hit)}")
        hit = self.first(DENY, "bash", lambda r: r.pattern is None)
        if hit is not None:
            return _Verdict(DENY, f"bash: rule deny {hit}{origin(hit)}")
        writes = [self.path("write", w, in_bash=True) for w in judged.writes]
        denied = next((w for w in writes if w.action == DENY), None)
        if denied is not None:
            return _Verdict(DENY, f"bash writes a file: {denied.reason}", outside=denied.outside)
        outside = any(w.outside for w in writes)
        if not judged.whole:
            hit = self.first(DENY, "bash", lambda r: True)
            if hit is not None and (self.policy.yes or self.auto):
                # Nobody will be asked, and the deny rules may not see what it runs.
                why = f"roost cannot judge this line whole ({judged.reason}), so it can't be checked against the deny rules (rule deny {hit}{origin(hit)})"
                return _Verdict(DENY, why, outside=outside)
            why = f"roost cannot judge this line whole ({judged.reason}), so no rule allows it: approve it once if it is fine"
            return _Verdict(ASK, why, outside=outside, firm=hit is not None)
        for command in judged.commands:
            hit = self.first(ASK, "bash", lambda r: r.pattern is None or narrows(r, command))
            if hit is not None:
                # An approval for the session could not outdo the ask rule: once only.
                return _Verdict(ASK, f"bash {_shown(command)}: rule ask {hit}{origin(hit)}", outside=outside, firm=True)
        asking = [w for w in writes if w.action == ASK]
        commands = [c for c in judged.commands if not c.wrapper]
        allowed = {c: self.first(ALLOW, "bash", lambda r: allows(r, c)) for c in commands}
        unmatched = [c for c, rule in allowed.items() if rule is None]
        # A line that runs nothing (``x=1``, ``> f``) needs bash itself allowed.
        idle = not commands and self.first(ALLOW, "bash", lambda r: r.pattern is None) is None
        if not (unmatched or idle or asking):
            rules = " and ".join(dict.fromkeys(str(r) for r in allowed.values() if r is not None))
            return _Verdict(ALLOW, f"bash: rule allow {rules}" if rules else "bash: no command runs", outside=outside)
        if self.auto:
            return _Verdict(ALLOW, f"{self.mode} mode allows every tool", outside=outside)
        if self.policy.sandboxed:
            # A line judged whole that no rule asks about or denies: the sandbox holds it.
            return _Verdict(ALLOW, "bash runs in the sandbox ([sandbox] auto_allow)", outside=outside)
        offer: tuple[str, ...] = ()
        wider: tuple[str, ...] = ()
        if all(c.known for c in judged.commands):
            written = tuple(o for w in asking for o in w.offer)
            offer = tuple(f"bash({command_pattern((c.program or c.words[0], *c.words[1:]))})" for c in unmatched) + written
            wider = tuple(dict.fromkeys(r for c in unmatched for r in _any_arguments(c))) + written
        if not unmatched and not idle:
            return _Verdict(ASK, f"bash writes a file: {asking[0].reason}", offer, outside)
        detail = ""
        if unmatched and len(unmatched) < len(commands):
            detail = f" (no rule allows {', '.join(_shown(c) for c in unmatched)})"
        return _Verdict(ASK, f"bash asks in {self.mode} mode{detail}", offer, outside, wider)


def _any_arguments(command: Command) -> tuple[str, ...]:
    """The rules that allow ``command`` with any arguments: ``bash(git *)``, and for a
    command run bare, that too (``bash(ls *)`` needs an argument)."""
    name = command_pattern((command.program or command.words[0],))
    bare = (f"bash({name})",) if len(command.words) == 1 else ()
    return (*bare, f"bash({name} *)")


def _shown(command: Command) -> str:
    return command.written.replace(WILD, "…")
