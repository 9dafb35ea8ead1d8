"""Guardrails: patterns that must not cross between the project and the model.

An ``input`` guardrail is checked on everything about to enter the history the model sees
(the task, steering, tool results, check output); an ``output`` guardrail on each reply
(its text and its tool calls' inputs). A match of a rule whose action is ``stop`` (the
default) is a tripwire: the content is withheld and the run ends with reason ``guardrail``.
A match of a ``warn`` rule is only reported (``guardrail.warned``): the content goes on
as it is, and so does the run.

The built-in ``secrets`` guardrail (input) keeps credentials that a tool read from the
disk or the environment from being sent to a model provider.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ._regex import linear_regex

INPUT, OUTPUT = "input", "output"
#: What a match does: end the run (the content withheld), or only say so.
STOP, WARN = "stop", "warn"
GUARDRAIL_ACTIONS = (STOP, WARN)

#: Credentials with a recognisable shape: (what it is, regular expression).
SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    ("a private key", r"-----BEGIN (?:[A-Z0-9]+ )?PRIVATE KEY-----"),
    ("an AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("a GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    ("an Anthropic API key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    ("an OpenAI API key", r"\bsk-(?:proj-)?[A-Za-z0-9_-]{32,}"),
    ("a Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("a Google API key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
)


@dataclass(frozen=True, slots=True)
class Guardrail:
    """One tripwire: a name, where it applies, a regular expression, and what a match does."""

    name: str
    on: str
    pattern: str
    #: What a match means, for the run's final text ("an AWS access key id").
    what: str = ""
    #: ``stop`` the run, or only ``warn``.
    action: str = STOP

    def to_map(self) -> dict[str, Any]:
        """As stored in ``run.started``."""
        return {"name": self.name, "on": self.on, "pattern": self.pattern, "what": self.what, "action": self.action}

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> Guardrail:
        """Back from its map (one stored before actions existed stops)."""
        return cls(m["name"], m["on"], m["pattern"], m.get("what", ""), m.get("action", STOP))

    def says(self) -> str:
        """What a match of this guardrail means, in one line."""
        what = self.what or f"the pattern {self.pattern!r}"
        return f"guardrail {self.name}: the {self.on} matched {what}"


def secrets_guardrails() -> tuple[Guardrail, ...]:
    """The built-in ``secrets`` guardrail, one tripwire per kind of credential (the same
    values for every run: a run in flight holds them, not a copy)."""
    return _SECRETS


_SECRETS = tuple(Guardrail("secrets", INPUT, pattern, what) for what, pattern in SECRET_PATTERNS)


def tripped(guardrails: Iterable[Guardrail], on: str, texts: Iterable[str]) -> str | None:
    """Why ``texts`` trip a guardrail that stops and applies ``on`` input or output (None:
    they don't)."""
    rails = [g for g in guardrails if g.on == on and g.action == STOP]
    if not rails:
        return None
    for text in texts:
        for rail in rails:
            if linear_regex(rail.pattern).search(text):
                return rail.says()
    return None


def warned(guardrails: Iterable[Guardrail], on: str, texts: Iterable[str]) -> list[Guardrail]:
    """The guardrails that only warn, apply ``on`` input or output and match ``texts``
    (each once, in their order)."""
    rails = [g for g in guardrails if g.on == on and g.action == WARN]
    texts = list(texts) if rails else []
    return [rail for rail in rails if any(linear_regex(rail.pattern).search(text) for text in texts)]


def reply_texts(content: Iterable[Mapping[str, Any]]) -> list[str]:
    """What an output guardrail reads in a reply: its text, and its tool calls' inputs."""
    texts = []
    for block in content:
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            texts.append(json.dumps(block.get("input", {}), ensure_ascii=False))
    return texts
