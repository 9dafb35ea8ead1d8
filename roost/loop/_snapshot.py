"""Snapshots: an idle session's state as plain data, so that loading a long session folds
only the events after its snapshot.

``restore(snapshot(state)) == state`` for every state with no run in flight (a run's state
is never snapshotted: the log is folded from before it). ``fold(later, restore(snap))`` is
then ``fold(log)``, the only state there is. A snapshot is plain maps, lists, strings and
numbers (it survives msgpack, tuples coming back as lists).

Every field of :class:`SessionState` must be coded here: a field added there and not here
makes :data:`SNAPSHOTS_WORK` false (snapshots are then neither written nor read, and
sessions are folded whole, as before), and a test says so. :data:`SNAPSHOT_FORMAT` names
the fields, so a snapshot written with other fields is never read as this one.
"""

from __future__ import annotations

import hashlib
from dataclasses import fields
from typing import Any, Mapping

from ._permission_rules import Rule
from ._state import SessionState

#: Fields kept as they are (strings, numbers, None).
_PLAIN = (
    "id", "cwd", "created", "last_status", "last_run", "last_agent", "last_mode", "last_model",
    "last_seq", "events", "summary", "compacted_upto", "compactions", "anchor_tokens", "anchor_at",
)  # fmt: skip
#: Fields coded on purpose: the history, the idempotency keys, the session's allow rules,
#: the last run's tools, and the run (always None in a snapshot).
_CODED = ("messages", "request_ids", "allowed", "last_tools", "run")

_FIELDS = tuple(f.name for f in fields(SessionState))

#: Whether every field of SessionState is coded here (see the module docstring).
SNAPSHOTS_WORK = sorted(_PLAIN + _CODED) == sorted(_FIELDS)

#: Which snapshots this code reads: the format's number and the state's field names.
SNAPSHOT_FORMAT = "1:" + hashlib.sha256(" ".join(_FIELDS).encode()).hexdigest()[:16]


class NotSnapshottable(ValueError):
    """The state has a run in flight, or fields this module does not code."""


def snapshot(state: SessionState) -> dict[str, Any]:
    """An idle session's state as plain data.

    Raises:
        NotSnapshottable: a run is in flight, or SessionState has fields not coded here.
    """
    if not SNAPSHOTS_WORK:
        raise NotSnapshottable(f"SessionState has fields that snapshots do not code: {sorted(set(_FIELDS) - set(_PLAIN + _CODED))}")
    if state.run is not None:
        raise NotSnapshottable(f"session {state.id} has a run in flight")
    out: dict[str, Any] = {name: getattr(state, name) for name in _PLAIN}
    out["messages"] = [_plain(m) for m in state.messages]
    out["request_ids"] = dict(state.request_ids)
    out["allowed"] = [rule.to_map() for rule in state.allowed]
    out["last_tools"] = None if state.last_tools is None else list(state.last_tools)
    return out


def restore(data: Mapping[str, Any]) -> SessionState:
    """The state a :func:`snapshot` was made of."""
    return SessionState(
        **{name: data[name] for name in _PLAIN},
        messages=tuple(data["messages"]),
        request_ids=dict(data["request_ids"]),
        allowed=tuple(Rule.from_map(r) for r in data["allowed"]),
        last_tools=None if data["last_tools"] is None else tuple(data["last_tools"]),
    )


def _plain(value: Any) -> Any:
    """Maps as dicts and sequences as lists, all the way down: what msgpack gives back."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
