"""The state of a session: a fold over its events, and nothing else.

:func:`apply` records one event; :func:`fold` records many. Neither decides anything (that
is :func:`roost.loop.step`'s job); they only remember, so that a daemon that restarts gets
the same state by folding the stored log.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from . import _events as ev
from ._events import Event
from ._modes import COMPACT_MODE, NO_TOOLS_MODES
from ._permission_rules import ALLOW, Rule, parse_rule
from ._replace import replace
from ._settings import RunSettings
from ._waits import HumanWait, PermissionWait, Wait


class Phase(enum.Enum):
    """Where a run is."""

    #: No run in flight: a task may be submitted.
    IDLE = "idle"
    #: Waiting for the model's reply.
    MODEL = "model"
    #: Waiting for the tool calls of the last reply.
    TOOLS = "tools"
    #: exec mode: waiting for the check command.
    CHECK = "check"
    #: Waiting for the model's summary of the older history.
    COMPACT = "compact"
    #: The model ended its turn: waiting for the Stop hooks before the run ends.
    STOP = "stop"


@dataclass(frozen=True, slots=True)
class RunState:
    """The run in flight."""

    id: str
    #: What the run was set up with, as its ``run.started`` recorded it.
    settings: RunSettings
    started: float
    phase: Phase = Phase.MODEL
    turns: int = 0
    #: The step's tool calls not finished yet (started, or waiting for approval), in the
    #: model's order.
    pending: tuple[str, ...] = ()
    #: Steering texts queued and not yet given to the model, and the media parts of each
    #: (in the same order).
    steering: tuple[str, ...] = ()
    steering_parts: tuple[tuple[Mapping[str, Any], ...], ...] = ()
    #: Token usage summed over the run, and of the last reply alone.
    usage: Mapping[str, int] = field(default_factory=dict)
    step_usage: Mapping[str, int] = field(default_factory=dict)
    #: When the current model call started.
    step_started: float = 0.0
    #: Text of the last assistant message.
    text: str = ""
    #: Names of the pending tool calls, by call id.
    tool_names: Mapping[str, str] = field(default_factory=dict)
    #: When each call that started began (its ``tool.started``), by call id: an aborted
    #: call's time is counted from there.
    tool_started: Mapping[str, float] = field(default_factory=dict)
    #: exec mode: the attempt in progress (1-based), and the turn count when it began
    #: (max_turns holds per attempt).
    attempt: int = 1
    attempt_turns: int = 0
    #: exec mode: when the time box runs out (wall clock), else None.
    deadline: float | None = None
    #: Calls waiting for a person (an approval, an answer), by call id.
    waiting: Mapping[str, Wait] = field(default_factory=dict)
    #: The last reply's tool calls in a canonical form, and how many replies running made
    #: exactly those calls (stuck-loop detection).
    last_calls: str = ""
    repeats: int = 0
    #: Compaction: the cut of the compaction in flight, and whether one was dropped in
    #: this run.
    compact_upto: int = 0
    compact_skipped: bool = False
    #: Why the run ends after the step in flight (``run.stopping``); None: it goes on.
    stopping: str | None = None
    #: Pending calls cleared to run (allowed, or approved), by call id:
    #: ``{"name", "input", "outside"}``; one that changes things may wait behind another.
    cleared: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: How many times the run's Stop hooks made it go on.
    stop_blocks: int = 0


@dataclass(frozen=True, slots=True)
class SessionState:
    """Everything the loop knows about one session."""

    id: str
    cwd: str = ""
    created: float = 0.0
    #: The conversation: ``{"role": "user" | "assistant", "content": [blocks]}``, roles
    #: alternating, tool results in the user message after the reply that asked for them.
    messages: tuple[Mapping[str, Any], ...] = ()
    run: RunState | None = None
    #: Reason the last run ended (``None`` before the first run).
    last_status: str | None = None
    last_run: str | None = None
    #: Agent, mode and model of the last run (what a new prompt or run defaults to).
    last_agent: str | None = None
    last_mode: str | None = None
    last_model: str | None = None
    #: Highest stored ``seq`` folded so far, and how many stored events that is.
    last_seq: int = 0
    events: int = 0
    #: ``dispatch`` idempotency keys seen, with the run each started.
    request_ids: Mapping[str, str] = field(default_factory=dict)
    #: Allow rules added by approvals "for the session"; they outlive the run.
    allowed: tuple[Rule, ...] = ()
    #: After a compaction: the summary, and the first message the model still sees.
    summary: str = ""
    compacted_upto: int = 0
    compactions: int = 0
    #: Tokens the provider counted for the last reply, and the message count then.
    anchor_tokens: int = 0
    anchor_at: int = 0
    #: The tools of the session's last run that had tools (not plan or compact; None: no
    #: such run yet): a run with others says what changed (``tools.changed``).
    last_tools: tuple[str, ...] | None = None

    @property
    def phase(self) -> Phase:
        """The run's phase, or IDLE when no run is in flight."""
        return self.run.phase if self.run is not None else Phase.IDLE

    def stored_up_to(self, seq: int) -> SessionState:
        """This state with its events stored up to ``seq`` (the store numbers the events a
        step made after the step)."""
        return replace(self, last_seq=seq)


def fold(events: Iterable[Event], state: SessionState | None = None) -> SessionState:
    """The state after ``events`` (starting from ``state``, or from nothing)."""
    for event in events:
        state = apply(state if state is not None else SessionState(event.session), event)
    if state is None:
        raise ValueError("fold() of no events needs a starting state")
    return state


def apply(state: SessionState, event: Event) -> SessionState:
    """Record one event. Live events change nothing; a sub-agent's (those with a ``path``)
    belong to its own state, and only count here."""
    if event.live:
        return state
    handler = None if event.data.get("path") else _APPLY.get(event.type)
    new = handler(state, event) if handler is not None else state
    return replace(
        new,
        events=state.events + 1,
        last_seq=event.seq if event.seq is not None else state.last_seq,
    )


def _session_created(state: SessionState, event: Event) -> SessionState:
    return replace(state, cwd=event.data["cwd"], created=event.ts)


def _run_started(state: SessionState, event: Event) -> SessionState:
    d = event.data
    run = RunState(id=event.run or "", settings=RunSettings.from_map(d), started=event.ts, deadline=d.get("deadline"))
    request_ids = state.request_ids
    if d.get("request_id"):
        request_ids = {**request_ids, d["request_id"]: run.id}
    last_tools = run.settings.tools if run.settings.mode not in NO_TOOLS_MODES else state.last_tools
    return replace(state, run=run, request_ids=request_ids, last_tools=last_tools)


def _tools_changed(state: SessionState, event: Event) -> SessionState:
    # The model is told where it happened: first in the run's first user message, so the
    # history before it (a provider's cached prefix) stays as it was.
    block = {"type": "text", "text": event.data["note"]}
    return replace(state, messages=_append_user(state.messages, block))


def _message_user(state: SessionState, event: Event) -> SessionState:
    messages = _append_user(state.messages, {"type": "text", "text": event.data["text"]})
    for part in event.data.get("parts", ()):
        messages = _append_user(messages, dict(part))
    state = replace(state, messages=messages)
    if state.run is not None and event.data.get("origin") == "steer":
        run = state.run
        state = replace(state, run=replace(run, steering=run.steering[1:], steering_parts=run.steering_parts[1:]))
    return state


def _step_started(state: SessionState, event: Event) -> SessionState:
    run = _run(state)
    return replace(
        state,
        # A new step has used no tokens yet (a failed call must not report the last reply's).
        run=replace(
            run, phase=Phase.MODEL, turns=run.turns + 1, step_started=event.ts, step_usage={}
        ),
    )


def _message_assistant(state: SessionState, event: Event) -> SessionState:
    content = [dict(block) for block in event.data["content"]]
    run = _run(state)
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    step_usage = {
        k: v for k, v in (event.data.get("usage") or {}).items() if isinstance(v, int)
    }
    usage = dict(run.usage)
    for key, value in step_usage.items():
        usage[key] = usage.get(key, 0) + value
    calls = _calls_signature(content)
    repeats = run.repeats + 1 if calls and calls == run.last_calls else int(bool(calls))
    messages = state.messages
    if messages and messages[-1]["role"] == "assistant":
        # The provider paused this turn (pause_turn) and the reply carries it on: one turn,
        # as the provider reads it, so roles still alternate.
        content = [*messages[-1]["content"], *content]
        text = run.text + text
        messages = messages[:-1]
    messages += ({"role": "assistant", "content": content},)
    counted = sum(step_usage.get(k, 0) for k in _COUNTED)
    if counted:
        state = replace(state, anchor_tokens=counted, anchor_at=len(messages))
    return replace(
        state,
        messages=messages,
        run=replace(
            run, text=text, usage=usage, step_usage=step_usage, last_calls=calls, repeats=repeats
        ),
    )


#: Usage that together is what the provider counted for a reply: everything it was sent,
#: and what it wrote.
_COUNTED = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")


def _compaction_started(state: SessionState, event: Event) -> SessionState:
    return replace(state, run=replace(_run(state), phase=Phase.COMPACT, compact_upto=event.data["upto"]))


def _compacted(state: SessionState, event: Event) -> SessionState:
    upto = event.data["upto"]
    return replace(
        state,
        summary=event.data["summary"],
        compacted_upto=upto,
        compactions=state.compactions + 1,
        anchor_tokens=0,
        anchor_at=upto,
    )


def _compaction_skipped(state: SessionState, event: Event) -> SessionState:
    return replace(state, run=replace(_run(state), compact_skipped=True))


def _calls_signature(content: list[dict[str, Any]]) -> str:
    calls = sorted(
        json.dumps([b.get("name"), b.get("input", {})], sort_keys=True, default=str)
        for b in content
        if b.get("type") == "tool_use"
    )
    return "\n".join(calls)


def _tool_started(state: SessionState, event: Event) -> SessionState:
    run = _run(state)
    d = event.data
    call_id = d["call_id"]
    # A call approved after it waited is pending already, where the model put it.
    pending = run.pending if call_id in run.pending else run.pending + (call_id,)
    cleared = run.cleared
    if d.get("cleared"):
        cleared = {**cleared, call_id: {"name": d["name"], "input": d.get("input", {}), "outside": bool(d.get("outside"))}}
    return replace(
        state,
        run=replace(
            run,
            phase=Phase.TOOLS,
            pending=pending,
            tool_names={**run.tool_names, call_id: d["name"]},
            tool_started={**run.tool_started, call_id: event.ts},
            cleared=cleared,
        ),
    )


def _tool_finished(state: SessionState, event: Event) -> SessionState:
    d = event.data
    parts = d.get("parts")
    block = {
        "type": "tool_result",
        "tool_use_id": d["call_id"],
        # With media: the text, then each part (references the daemon resolves to bytes
        # when it sends them).
        "content": [{"type": "text", "text": d["result"]}, *map(dict, parts)] if parts else d["result"],
        "is_error": bool(d.get("is_error")),
    }
    state = replace(state, messages=_append_result(state.messages, block))
    if state.run is not None:
        pending = tuple(c for c in state.run.pending if c != d["call_id"])
        waiting = {k: v for k, v in state.run.waiting.items() if k != d["call_id"]}
        cleared = {k: v for k, v in state.run.cleared.items() if k != d["call_id"]}
        state = replace(state, run=replace(state.run, pending=pending, waiting=waiting, cleared=cleared))
    return state


def _permission_requested(state: SessionState, event: Event) -> SessionState:
    d = event.data
    run = _run(state)
    call_id = d["call_id"]
    # The call is the step's, pending from here (in the model's order), though it has not
    # started; a log stored before that started it first.
    started = call_id in run.pending
    entry = PermissionWait(
        name=d["tool"],
        input=d.get("input", {}),
        ts=event.ts,
        outside=bool(d.get("outside")),
        reason=d.get("reason", ""),
        session_rules=tuple(d.get("session_rules", ())),
        session_rules_any=tuple(d.get("session_rules_any", ())),
        deadline=d.get("deadline"),
        started=started,
    )
    return replace(
        state,
        run=replace(
            run,
            phase=Phase.TOOLS,
            pending=run.pending if started else run.pending + (call_id,),
            tool_names={**run.tool_names, call_id: d["tool"]},
            waiting={**run.waiting, call_id: entry},
        ),
    )


def _permission_resolved(state: SessionState, event: Event) -> SessionState:
    d = event.data
    run = _run(state)
    waiting = {k: v for k, v in run.waiting.items() if k != d["call_id"]}
    cleared = run.cleared
    wait = run.waiting.get(d["call_id"])
    if d.get("decision") == "approve" and isinstance(wait, PermissionWait):
        call = {"name": wait.name, "input": wait.input, "outside": wait.outside}
        cleared = {**cleared, d["call_id"]: call}
    allowed = state.allowed + tuple(parse_rule(r, ALLOW, "session") for r in d.get("rules", ()))
    return replace(state, run=replace(run, waiting=waiting, cleared=cleared), allowed=allowed)


def _human_asked(state: SessionState, event: Event) -> SessionState:
    run = _run(state)
    d = event.data
    entry = HumanWait(d["question"], tuple(d.get("choices", ())), event.ts)
    return replace(state, run=replace(run, waiting={**run.waiting, d["call_id"]: entry}))


def _human_answered(state: SessionState, event: Event) -> SessionState:
    run = _run(state)
    waiting = {k: v for k, v in run.waiting.items() if k != event.data["call_id"]}
    return replace(state, run=replace(run, waiting=waiting))


def _steer_queued(state: SessionState, event: Event) -> SessionState:
    run = _run(state)
    parts = tuple(map(dict, event.data.get("parts", ())))
    return replace(
        state, run=replace(run, steering=run.steering + (event.data["text"],), steering_parts=run.steering_parts + (parts,))
    )


def _run_stopping(state: SessionState, event: Event) -> SessionState:
    return replace(state, run=replace(_run(state), stopping=event.data.get("reason", "")))


def _check_started(state: SessionState, event: Event) -> SessionState:
    return replace(state, run=replace(_run(state), phase=Phase.CHECK))


def _check_finished(state: SessionState, event: Event) -> SessionState:
    run = _run(state)
    return replace(state, run=replace(run, attempt=run.attempt + 1, attempt_turns=run.turns))


def _stop_hooks_started(state: SessionState, event: Event) -> SessionState:
    return replace(state, run=replace(_run(state), phase=Phase.STOP))


def _stop_hooks_finished(state: SessionState, event: Event) -> SessionState:
    run = _run(state)
    return replace(state, run=replace(run, stop_blocks=run.stop_blocks + bool(event.data.get("reason"))))


def _run_finished(state: SessionState, event: Event) -> SessionState:
    run = state.run
    return replace(
        state,
        run=None,
        last_status=event.data["reason"],
        last_run=event.run,
        last_agent=run.settings.agent if run and run.settings.mode != COMPACT_MODE else state.last_agent,
        last_mode=run.settings.mode if run and run.settings.mode != COMPACT_MODE else state.last_mode,
        last_model=run.settings.model if run else state.last_model,
    )


def cost(usage: Mapping[str, int], price: Mapping[str, float] | None) -> float | None:
    """USD for ``usage`` at ``price`` (per million tokens); None when the price is unknown."""
    if price is None:
        return None
    return (
        usage.get("input_tokens", 0) * price.get("input", 0.0)
        + usage.get("output_tokens", 0) * price.get("output", 0.0)
        + usage.get("cache_read_input_tokens", 0) * price.get("cache_read", 0.0)
        + usage.get("cache_creation_input_tokens", 0) * price.get("cache_write", 0.0)
    ) / 1_000_000


def _run(state: SessionState) -> RunState:
    if state.run is None:
        raise ValueError(f"session {state.id}: event needs a run in flight")
    return state.run


def _append_result(
    messages: tuple[Mapping[str, Any], ...], block: Mapping[str, Any]
) -> tuple[Mapping[str, Any], ...]:
    """A tool result, placed among the results before it in the order the reply made the
    calls (they may finish in any order; the model reads them as it asked)."""
    messages = _append_user(messages, block)
    if len(messages) < 2 or messages[-2]["role"] != "assistant":
        return messages
    order = {b.get("id"): i for i, b in enumerate(messages[-2]["content"]) if b.get("type") == "tool_use"}
    content = list(messages[-1]["content"])
    results = [b for b in content if b.get("type") == "tool_result"]
    if len(results) == len(content):
        content.sort(key=lambda b: order.get(b.get("tool_use_id"), len(order)))
    return messages[:-1] + ({"role": "user", "content": content},)


def _append_user(
    messages: tuple[Mapping[str, Any], ...], block: Mapping[str, Any]
) -> tuple[Mapping[str, Any], ...]:
    # Consecutive user content (tool results, then steering) shares one message so that
    # roles alternate, as the providers require.
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        return messages[:-1] + ({"role": "user", "content": [*last["content"], block]},)
    return messages + ({"role": "user", "content": [block]},)


_APPLY = {
    ev.SESSION_CREATED: _session_created,
    ev.RUN_STARTED: _run_started,
    ev.TOOLS_CHANGED: _tools_changed,
    ev.MESSAGE_USER: _message_user,
    ev.STEP_STARTED: _step_started,
    ev.MESSAGE_ASSISTANT: _message_assistant,
    ev.TOOL_STARTED: _tool_started,
    ev.TOOL_FINISHED: _tool_finished,
    ev.STEER_QUEUED: _steer_queued,
    ev.PERMISSION_REQUESTED: _permission_requested,
    ev.PERMISSION_RESOLVED: _permission_resolved,
    ev.HUMAN_ASKED: _human_asked,
    ev.HUMAN_ANSWERED: _human_answered,
    ev.COMPACTION_STARTED: _compaction_started,
    ev.COMPACTED: _compacted,
    ev.COMPACTION_SKIPPED: _compaction_skipped,
    ev.RUN_STOPPING: _run_stopping,
    ev.CHECK_STARTED: _check_started,
    ev.CHECK_FINISHED: _check_finished,
    ev.STOP_HOOKS_STARTED: _stop_hooks_started,
    ev.STOP_HOOKS_FINISHED: _stop_hooks_finished,
    ev.RUN_FINISHED: _run_finished,
}
