"""Calls waiting for a person (``RunState.waiting``): for an approval, or for an answer.

Each is folded from the event that opened it (``permission.requested``, ``human.asked``)
and gone with the one that closes it. :meth:`to_map` is how ``pending`` lists it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union


@dataclass(frozen=True, slots=True)
class PermissionWait:
    """A tool call waiting for approval: what it would run, and why it asks."""

    #: The tool and the call's input.
    name: str
    input: Mapping[str, Any]
    #: When it was asked (wall clock).
    ts: float
    #: It reaches outside the working directory (approved, it may).
    outside: bool = False
    #: Why the policy asks.
    reason: str = ""
    #: The allow rules that approving for the session adds (none: only once).
    session_rules: tuple[str, ...] = ()
    #: The wider choice for the session: the commands with any arguments (none: only
    #: ``session_rules``).
    session_rules_any: tuple[str, ...] = ()
    #: When an unanswered request counts as denied (None: never).
    deadline: float | None = None
    #: The call's ``tool.started`` came before the request (as daemons stored it before
    #: a call started only once approved): approved, it is not started again.
    started: bool = False

    def to_map(self) -> dict[str, Any]:
        """As ``pending`` lists it."""
        out = {
            "kind": "permission",
            "name": self.name,
            "input": dict(self.input),
            "outside": self.outside,
            "reason": self.reason,
            "session_rules": list(self.session_rules),
            "ts": self.ts,
        }
        if self.session_rules_any:
            out["session_rules_any"] = list(self.session_rules_any)
        if self.deadline is not None:
            out["deadline"] = self.deadline
        return out


@dataclass(frozen=True, slots=True)
class HumanWait:
    """An ``ask_human`` call waiting for its answer."""

    question: str
    #: Answers offered (any answer is taken).
    choices: tuple[str, ...]
    #: When it was asked (wall clock).
    ts: float

    def to_map(self) -> dict[str, Any]:
        """As ``pending`` lists it."""
        return {"kind": "human", "question": self.question, "choices": list(self.choices), "ts": self.ts}


Wait = Union[PermissionWait, HumanWait]
