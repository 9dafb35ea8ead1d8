"""Events: what happened in a session, as plain data.

An event is a map with ``session``, ``seq``, ``run``, ``type``, ``ts`` and fields of its own;
the same map goes into the store, over the wire and out of ``--json``. Event types are
defined here, once; the daemon lists them in ``hello``. Live events (text and reasoning
deltas) are published but never stored and carry no ``seq``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ._replace import replace

SESSION_CREATED = "session.created"
RUN_STARTED = "run.started"
PROJECT_UNTRUSTED = "project.untrusted"
TOOLS_CHANGED = "tools.changed"
MESSAGE_USER = "message.user"
STEP_STARTED = "step.started"
TEXT_DELTA = "text.delta"
TOOL_PROGRESS = "tool.progress"
MEMORY_LEARNED = "memory.learned"
REASONING_DELTA = "reasoning.delta"
MESSAGE_ASSISTANT = "message.assistant"
TOOL_STARTED = "tool.started"
TOOL_FINISHED = "tool.finished"
STEER_QUEUED = "steer.queued"
STEP_FINISHED = "step.finished"
PERMISSION_REQUESTED = "permission.requested"
PERMISSION_RESOLVED = "permission.resolved"
HUMAN_ASKED = "human.asked"
HUMAN_ANSWERED = "human.answered"
PLAN = "plan"
COMPACTION_STARTED = "compaction.started"
COMPACTED = "compacted"
COMPACTION_SKIPPED = "compaction.skipped"
GUARDRAIL_WARNED = "guardrail.warned"
CHECK_STARTED = "check.started"
CHECK_FINISHED = "check.finished"
RUN_STOPPING = "run.stopping"
STOP_HOOKS_STARTED = "stop_hooks.started"
STOP_HOOKS_FINISHED = "stop_hooks.finished"
RUN_FINISHED = "run.finished"
ERROR = "error"

#: Every event type, with what it means (listed by ``hello``).
EVENT_TYPES: Mapping[str, str] = {
    SESSION_CREATED: "a session was created (cwd, created)",
    RUN_STARTED: (
        "a run started (task, agent, mode, model, max_turns, max_tokens, sandbox; command: the "
        "custom command the task was expanded from; stop_hooks: Stop hooks run before it ends; "
        "hook_failures: UserPromptSubmit hooks that failed; depth: a sub-agent's, 1 for the "
        "session run's own; instructions: a compaction's, for its summary)"
    ),
    PROJECT_UNTRUSTED: (
        "the run's folder is not trusted: what its files would widen was ignored "
        "(folder, ignored: [{kind, name, detail, source}], hint: the command that trusts it)"
    ),
    TOOLS_CHANGED: (
        "the run's tools differ from those of the session's last run (added, removed: tool "
        "names; note: what the model is told, first in the run's first user message)"
    ),
    MESSAGE_USER: (
        "a user message entered the history (text, origin: task, steer, hook, check or nudge; "
        "command: the custom command a task was expanded from, as typed)"
    ),
    STEP_STARTED: "a model call started (step)",
    TEXT_DELTA: "live: assistant text as it streams (text)",
    REASONING_DELTA: "live: model reasoning as it streams (text)",
    MESSAGE_ASSISTANT: (
        "the model's complete reply (content, usage, stop_reason, latency: seconds of the call, "
        "ttft: seconds to its first content, retries)"
    ),
    TOOL_PROGRESS: "live: progress a tool reported (call_id, progress, total, message)",
    TOOL_STARTED: "a tool call started (call_id, name, input); one asked about, once approved",
    TOOL_FINISHED: (
        "a tool call finished (call_id, name, result, is_error, latency, size, meta: what the "
        "tool adds; an edit's or write's diff, the change it made)"
    ),
    PERMISSION_REQUESTED: (
        "a tool call waits for a person's approval before it starts (call_id, tool, input, "
        "reason, session_rules, session_rules_any: the wider choice, the commands with any "
        "arguments, diff, deadline); open until its permission.resolved"
    ),
    PERMISSION_RESOLVED: (
        "the first answer to a permission request (call_id, tool, decision: approve or deny, "
        "scope: once or session, reason, client, rules added for the session: the request's "
        "session_rules or session_rules_any)"
    ),
    HUMAN_ASKED: "the model asked the people watching a question (call_id, question, choices)",
    HUMAN_ANSWERED: "the first answer to a question (call_id, answer, client)",
    COMPACTION_STARTED: "the older history is being summarized (upto, estimate, window)",
    COMPACTED: (
        "later model calls see this summary instead of the messages before `upto` "
        "(summary, upto, replaced_tokens, summary_tokens)"
    ),
    COMPACTION_SKIPPED: "a compaction was dropped: it would not have shrunk the history (reason)",
    PLAN: "plan mode: the reply as steps (steps: [{step, text, files}], text)",
    STEER_QUEUED: "a message for the run in flight, given to the next model call (text)",
    STEP_FINISHED: "a model call and its tool calls are done (step, usage, latency)",
    GUARDRAIL_WARNED: (
        "a guardrail that only warns matched; the content went on as it was, and so does the run "
        "(name, on: input or output, what, message, origin: task, steer, hook, tool, check or "
        "reply; call_id for a tool's result)"
    ),
    CHECK_STARTED: "exec mode: the check command started after an attempt (attempt, command)",
    CHECK_FINISHED: "exec mode: the check ended (attempt, exit_status, duration, output tail)",
    RUN_STOPPING: (
        "the run will end after the step in flight (reason): its reply and tool calls finish, "
        "calls waiting for a person are refused, then it ends aborted"
    ),
    STOP_HOOKS_STARTED: "the model ended its turn; the Stop hooks run before the run ends (active)",
    STOP_HOOKS_FINISHED: (
        "the Stop hooks answered (reason: why the run goes on, as the next user message; "
        "absent: it ends; failures)"
    ),
    RUN_FINISHED: "the run ended (reason, text, turns, usage, duration, error)",
    MEMORY_LEARNED: (
        "after a run whose agent learns (memory: learn): the durable facts a model call found "
        "in it, now memory entries (entries: [{id, text, scope}]); live only: the entries are "
        "the record"
    ),
    ERROR: "something went wrong in the run (message)",
}

#: Published to attached clients but never stored.
LIVE_TYPES = frozenset({TEXT_DELTA, REASONING_DELTA, TOOL_PROGRESS, MEMORY_LEARNED})

@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened in a session.

    ``seq`` is ``None`` until the store numbers the event (and stays ``None`` for live ones).
    """

    type: str
    session: str
    run: str | None
    ts: float
    data: Mapping[str, Any] = field(default_factory=dict)
    seq: int | None = None

    def to_map(self) -> dict[str, Any]:
        """The event as the map that is stored and sent."""
        out: dict[str, Any] = dict(self.data)
        out.update(session=self.session, run=self.run, type=self.type, ts=self.ts)
        if self.seq is not None:
            out["seq"] = self.seq
        return out

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> Event:
        """Rebuild an event from its map (as read from the store or the wire)."""
        data = {k: v for k, v in m.items() if k not in _ENVELOPE}
        return cls(m["type"], m["session"], m.get("run"), m["ts"], data, m.get("seq"))

    def numbered(self, seq: int) -> Event:
        """The same event with its per-session sequence number."""
        return replace(self, seq=seq)

    @property
    def live(self) -> bool:
        """Whether this event is only published, never stored."""
        return self.type in LIVE_TYPES


_ENVELOPE = frozenset({"type", "session", "run", "ts", "seq"})
_SURROGATES = re.compile("[\ud800-\udfff]")


def safe_text(value: Any) -> Any:
    """``value`` with every string made valid Unicode text: lone surrogates (a model's
    ``"\\ud800"``, a file name that is not UTF-8 as Python decodes it) become U+FFFD.

    Such strings cannot be encoded as UTF-8, so neither stored nor sent; every event's data
    passes through here when it is made. Strings already fine are returned as they are;
    maps and lists are copied (a tuple becomes a list), as the wire would.
    """
    # The leaves of a map or list are checked in place, by exact type (anything else, a str
    # subclass too, goes through here): an event holds a few dozen values, most of them
    # numbers and ASCII strings, and this runs on every event.
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATES.sub("\ufffd", value)
    if isinstance(value, dict):
        return {
            (k if type(k) is str and k.isascii() else safe_text(k)): (
                v if type(v) in _LEAVES or (type(v) is str and v.isascii()) else safe_text(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _LEAVES or (type(v) is str and v.isascii()) else safe_text(v) for v in value]
    return value


#: Values with no text in them (exact types: a subclass goes the long way).
_LEAVES = frozenset({int, float, bool, type(None), bytes})
