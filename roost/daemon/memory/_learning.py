"""Memory learned from runs: at the end of a run whose agent says ``memory: learn`` (or
every run's, with the user's ``[memory] learn = true``), one model call reads what the run
did and proposes the durable facts in it (how to build, test and run the project, where
things are, conventions, what the user said they prefer); each becomes an entry of kind
``learned`` with its run as its source.

What the call reads is the run's record as the feed gathered it from the stored events
(the task, the model's replies, each tool call and the start of its result), bounded. The
index keeps out what it holds already and anything with a credential in it; a fact for the
user's memory is kept only from a run in a folder the user trusted (an untrusted project's
run learns nothing into the memory every project reads).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..providers import ModelRequest, Provider, ProviderError

__all__ = ["LEARN_SYSTEM", "Learning", "RunRecord", "proposed_facts"]

log = logging.getLogger(__name__)

#: What the learning call is told.
LEARN_SYSTEM = (
    "You read the record of one finished run of a coding agent and pick out the durable facts "
    "worth remembering in later sessions: how to build, test, run or deploy the project; where "
    "things are; its conventions; preferences the user stated. Leave out what mattered only to "
    "this task, guesses, and anything secret (keys, tokens, passwords). Answer with a JSON "
    'array only: [{"fact": "one sentence", "scope": "project" or "user"}], at most 5 items, '
    '[] when nothing is worth keeping. "user" is for the user\'s own preferences, true in '
    "every project."
)
#: Characters of a run's record the call reads (the newest are kept).
RECORD_CHARS = 40_000
#: Characters of a tool result the record keeps.
_RESULT_CHARS = 400
#: Facts kept from one run.
FACTS = 5


@dataclass(frozen=True, slots=True)
class Learning:
    """How a run learns: the model that reads its record, and whether its facts may go to
    the user's memory (its folder is trusted)."""

    provider: Provider
    model: str
    user_scope: bool
    #: The run's folder (where a scripted model's script is found).
    cwd: str = "."


@dataclass
class RunRecord:
    """What a run did, as its events tell it, bounded (the oldest lines go first)."""

    learning: Learning
    lines: list[str] = field(default_factory=list)
    chars: int = 0

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.chars += len(line)
        while self.chars > RECORD_CHARS and len(self.lines) > 1:
            self.chars -= len(self.lines.pop(1))  # the task (first) stays

    def take(self, event_type: str, data: Mapping[str, Any]) -> None:
        """One stored event of the run, as a line of its record (others are left out)."""
        if event_type == "message.user":
            self.add(f"{data.get('origin', 'user')}: {data.get('text', '')}")
        elif event_type == "message.assistant":
            text = "".join(b.get("text", "") for b in data.get("content", []) if b.get("type") == "text")
            if text.strip():
                self.add(f"agent: {text}")
        elif event_type == "tool.finished":
            result = str(data.get("result", ""))[:_RESULT_CHARS]
            self.add(f"tool {data.get('name')}{' (failed)' if data.get('is_error') else ''}: {result}")


async def proposed_facts(record: RunRecord) -> list[tuple[str, str]]:
    """The facts the learning call proposes for ``record``: ``(fact, scope)`` each, scope
    ``project`` or ``user`` (none when the call fails or its answer is not the array asked
    for: said in the log)."""
    learning = record.learning
    request = ModelRequest(
        model=learning.model,
        system=LEARN_SYSTEM,
        messages=({"role": "user", "content": [{"type": "text", "text": "The run's record:\n\n" + "\n".join(record.lines)}]},),
        max_tokens=1024,
        cwd=learning.cwd,
        purpose="learn",
    )
    try:
        reply = await learning.provider.stream(request, lambda kind, text: None)
    except ProviderError as exc:
        log.warning("nothing learned from a run: %s", exc.message)
        return []
    text = "".join(b.get("text", "") for b in reply.content if b.get("type") == "text").strip()
    start, end = text.find("["), text.rfind("]")
    try:
        items = json.loads(text[start : end + 1]) if start >= 0 and end > start else None
    except ValueError:
        items = None
    if not isinstance(items, list):
        log.warning("nothing learned from a run: the answer was not a JSON array: %.200s", text)
        return []
    facts = []
    for item in items[:FACTS]:
        if isinstance(item, dict) and isinstance(item.get("fact"), str) and item["fact"].strip():
            facts.append((item["fact"].strip(), "user" if item.get("scope") == "user" else "project"))
    return facts
