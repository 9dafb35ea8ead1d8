"""How a person answers an approval at a terminal: the same in ``roost dispatch`` and in the
shell, and only here.

One key answers (no Enter): ``y`` approves once, ``s`` or ``a`` for the session, ``n``
denies (a reason is asked next). For the session, a request offers what the daemon would
add: exactly what it asked (``session_rules``), and for a command line also the wider
choice, its commands with any arguments (``session_rules_any``, as Claude Code's
``Bash(git *)``); when it offers both, ``1`` or ``2`` picks one. Rules are shown as the
daemon wrote them, never reflowed, with every character that could hide or reorder a part
of them written out (``visible``: they come from the model's call), in every client.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from ._safe_text import visible

#: ``permission.respond``'s decisions and scopes, and the answer that asks for the scope.
APPROVE, DENY, CHOOSE = "approve", "deny", "choose"
ONCE, SESSION, SESSION_ANY = "once", "session", "session_any"

#: The keys that answer an approval, and what each means.
KEYS: Mapping[str, str] = {"y": ONCE, "s": SESSION, "a": SESSION, "n": DENY}
#: The keys, as help names them.
KEYS_HELP = "y once · s/a for the session · n deny"


class Scope(NamedTuple):
    """One choice for the session: the key that picks it, its ``permission.respond`` scope,
    the rules it adds, and what they allow besides the call asked about. (Named tuples,
    not dataclasses: ``roost pending`` starts without importing dataclasses.)"""

    key: str
    scope: str
    label: str
    rules: tuple[str, ...]
    also: str = ""


class Answer(NamedTuple):
    """What a key means for an open approval: approve (with a scope), deny, or choose the
    session's scope next (:data:`CHOOSE`)."""

    decision: str
    scope: str = ONCE


def scopes(request: Mapping[str, Any]) -> tuple[Scope, ...]:
    """The scopes approving ``request`` for the session offers (none: once only)."""
    exact = tuple(visible(str(r)) for r in request.get("session_rules") or ())
    if not exact:
        return ()
    wide = tuple(visible(str(r)) for r in request.get("session_rules_any") or ())
    first = Scope("1", SESSION, "exactly this" if wide else "for the session", exact)
    if not wide:
        return (first,)
    return (first, Scope("2", SESSION_ANY, "with any arguments", wide, _also(wide)))


def answer(request: Mapping[str, Any], key: str) -> Answer | None:
    """What ``key`` answers to ``request`` (None: not an answer here, e.g. ``s`` for a
    request that offers nothing for the session)."""
    meaning = KEYS.get(key.lower())
    if meaning is None:
        return None
    if meaning == DENY:
        return Answer(DENY)
    if meaning == ONCE:
        return Answer(APPROVE, ONCE)
    offered = scopes(request)
    if not offered:
        return None
    return Answer(APPROVE, offered[0].scope) if len(offered) == 1 else Answer(CHOOSE)


def chosen(request: Mapping[str, Any], key: str) -> Scope | None:
    """The scope that ``key`` (``1`` or ``2``) picks once the session's scope is asked."""
    return next((s for s in scopes(request) if s.key == key), None)


def offer(request: Mapping[str, Any]) -> str:
    """What approving ``request`` for the session would add, in one line."""
    offered = scopes(request)
    if not offered:
        return "nothing can be approved for the session: approve once"
    return "for the session: " + " or ".join(f"{_rules(s.rules)}" + (f" ({s.label})" if len(offered) > 1 else "")
                                              for s in offered)


def key_parts(request: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The keys that answer ``request`` and what each does, in order: (keys, meaning). The
    session's one scope is named with its rules; two are chosen from next."""
    offered = scopes(request)
    parts = [("y", "approve once")]
    if len(offered) == 1:
        parts.append(("s/a", f"for the session: {_rules(offered[0].rules)}"))
    elif offered:
        parts.append(("s/a", "for the session (exactly this, or with any arguments)"))
    parts.append(("n", "deny" if offered else "deny (nothing can be approved for the session)"))
    return parts


def approve_flags(request: Mapping[str, Any]) -> str:
    """The flags of ``roost approve`` that pick the scopes ``request`` offers."""
    offered = scopes(request)
    return "" if not offered else " [--session-scope]" if len(offered) == 1 else " [--session-scope [--any-arguments]]"


def scope_lines(request: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The session's scopes to choose from, one a line: (key, what it adds, what else it
    allows)."""
    return [(s.key, f"{s.label}: {_rules(s.rules)}", s.also) for s in scopes(request)]


def _rules(rules: tuple[str, ...]) -> str:
    # Rules as written (a rule may hold commas and spaces): two spaces between them.
    return "  ".join(rules)


def _also(wide: tuple[str, ...]) -> str:
    """What the wider rules allow besides the calls asked about, in words."""
    names = [r[len("bash(") : -len(" *)")] for r in wide if r.startswith("bash(") and r.endswith(" *)")]
    if not names:
        return ""
    return "also allows " + ", ".join(f"{name} with any other arguments" for name in names)
