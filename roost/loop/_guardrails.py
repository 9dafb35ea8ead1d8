"""Guardrails: patterns that must not cross between the project and the model.

An ``input`` guardrail is checked on everything about to enter the history the model sees
(the task, steering, tool results, check output); an ``output`` guardrail on each reply
(its text and its tool calls' inputs). A match is a tripwire: the content is withheld and
the run ends with reason ``guardrail``.

The built-in ``secrets`` guardrail (input) keeps credentials that a tool read from the
disk or the environment from being sent to a model provider.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

INPUT, OUTPUT = "input", "output"

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
    """One tripwire: a name, where it applies, and a regular expression."""

    name: str
    on: str
    pattern: str
    #: What a match means, for the run's final text ("an AWS access key id").
    what: str = ""

    def to_map(self) -> dict[str, Any]:
        """As stored in ``run.started``."""
        return {"name": self.name, "on": self.on, "pattern": self.pattern, "what": self.what}

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> Guardrail:
        """Back from its map."""
        return cls(m["name"], m["on"], m["pattern"], m.get("what", ""))


def secrets_guardrails() -> tuple[Guardrail, ...]:
    """The built-in ``secrets`` guardrail, one tripwire per kind of credential."""
    return tuple(Guardrail("secrets", INPUT, pattern, what) for what, pattern in SECRET_PATTERNS)


def tripped(guardrails: Iterable[Guardrail], on: str, texts: Iterable[str]) -> str | None:
    """Why ``texts`` trip a guardrail that applies ``on`` input or output (None: they don't)."""
    rails = [g for g in guardrails if g.on == on]
    if not rails:
        return None
    for text in texts:
        for rail in rails:
            if re.search(rail.pattern, text):
                what = rail.what or f"the pattern {rail.pattern!r}"
                return f"guardrail {rail.name}: the {on} matched {what}"
    return None


def reply_texts(content: Iterable[Mapping[str, Any]]) -> list[str]:
    """What an output guardrail reads in a reply: its text, and its tool calls' inputs."""
    texts = []
    for block in content:
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            texts.append(json.dumps(block.get("input", {}), ensure_ascii=False))
    return texts
