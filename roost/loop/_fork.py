"""Where a session's history may be cut: the points a fork can start from.

A history is *whole* when a model would accept it as it is: every tool call of the last
reply has its result, and no call runs or waits for a person. Between the reply that asks
for calls and the last of their results (and inside a sub-agent, which is one such call) it
is not. A fork asked for at such a seq starts from the last whole point before it instead:
the end of the step (its last tool result), or the model call or task before.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ._events import Event
from ._state import SessionState, apply


def whole(state: SessionState) -> bool:
    """Whether ``state``'s history can be handed to a model as it is: no tool call of the
    last reply is unanswered, none runs, none waits for a person."""
    run = state.run
    if run is not None and (run.pending or run.waiting):
        return False
    return not unanswered(state.messages)


def unanswered(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """The ids of the last reply's tool calls that have no result after it."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") != "assistant":
            continue
        calls = {b.get("id") for b in messages[i].get("content", ()) if b.get("type") == "tool_use"}
        answered = {
            b.get("tool_use_id")
            for m in messages[i + 1 :]
            for b in m.get("content", ())
            if b.get("type") == "tool_result"
        }
        return {c for c in calls - answered if isinstance(c, str)}
    return set()


def fork_point(events: Iterable[Event], at: int, state: SessionState) -> tuple[int, SessionState]:
    """The last seq at or before ``at`` where the history is :func:`whole`, and the state
    there (``events`` folded onto ``state``, the fork's empty state).

    ``events`` are a session's stored events from its first, in seq order; the first
    (``session.created``) is always a whole point. Returns ``(0, state)`` for no events.
    """
    best = (0, state)
    for event in events:
        if event.seq is None or event.seq > at:
            break
        state = apply(state, event)
        if whole(state):
            best = (event.seq, state)
    return best
