"""Recovery: the runs a dead daemon left open, found and taken up when the daemon starts.

Tool process groups a dead daemon left running are killed first, so that an interrupted tool
never goes on beside the session's next run. A run that waits for a person goes on waiting,
also when it is one of its sub-agents that waits (the sub-agent goes on too), and an exec
run goes on where it was, each set up as its ``run.started`` recorded
(:meth:`Planner.recorded`); the others end ``error``.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from typing import Any, Awaitable, Callable, Mapping

from roost.loop import Event, Interrupted, Mode, SessionState, fold

from ..folder._config import ConfigError
from ..storage._store import EventStore, StoreError
from ..tools import ProcessLedger
from ._plan import Planner, Recorded, RunPlan
from ._sessions import Session, SessionTable, Track
from ._subagents import Subagents

log = logging.getLogger(__name__)

#: Starts a session's run from its plan (``Conductor.start_run``'s core).
StartRun = Callable[[Session, RunPlan], Awaitable[Any]]


async def recover(
    store: EventStore,
    sessions: SessionTable,
    planner: Planner,
    ledger: ProcessLedger | None,
    start: StartRun,
    subagents: Subagents,
) -> None:
    """Take up every run left open in the log (see the module's docstring)."""
    if ledger is not None:
        ledger.end_leftovers()
    for session_id in await store.open_runs():
        session = await sessions.get(session_id)
        run = session.state.run
        log.warning("session %s: run %s was interrupted", session_id, run and run.id)
        if run is None:
            continue
        subruns = await _waiting_subruns(store, session)
        setup = None
        if run.waiting or run.settings.mode == Mode.EXEC or subruns:
            # The dispatching terminal is gone: the daemon's own environment stands in.
            try:
                setup = await planner.load_folder(session.state.cwd, os.environ, run=True)
            except ConfigError as exc:
                log.warning("session %s: the waiting run cannot go on: %s", session_id, exc)
        plan = await planner.recorded(Recorded(session.state.cwd, run), setup)
        if plan.model is None:
            subruns = {}
        plan = replace(plan, first=Interrupted(time.time(), _children((), subruns)))
        try:
            await start(session, plan)
        except StoreError as exc:
            # A full disk must not keep the daemon from serving: the run stays open in
            # the log, and is ended when it is next loaded with room to store that.
            log.error("session %s: the interrupted run could not be ended yet: %s", session_id, exc)
            continue
        assert setup is not None or not subruns
        for path, (state, called) in sorted(subruns.items(), key=lambda item: len(item[0])):
            parent = session.track if len(path) == 1 else session.subruns.get(path[:-1])
            if parent is None or parent.live is None or parent.state.run is None or state.run is None:
                continue
            first = Interrupted(time.time(), _children(path, subruns))
            child_plan = await planner.recorded(Recorded(session.state.cwd, state.run, first.resumed), setup)
            if child_plan.fork:
                # Its history began with its caller's, up to the reply that made the call.
                state = replace(state, messages=_history_before(parent.state.messages, path[-1]) + state.messages)
            child = Track(state, path, replace(child_plan, first=first))
            # The call's time counts from its own start, before the restart (wall clock).
            started = time.monotonic() - max(0.0, time.time() - called)
            await parent.live.nursery.start(subagents.drive, session, parent, child, first, parent.state.run.id, started)


async def _waiting_subruns(store: EventStore, session: Session) -> dict[tuple[str, ...], tuple[SessionState, float]]:
    """The sub-agent runs of ``session`` left in flight that a person may still answer
    (they, or a sub-agent of theirs, wait for one), by path: their state folded from their
    own events, and when the call that runs each started (wall clock)."""
    tracks: dict[tuple[str, ...], list[Event]] = {}
    called: dict[tuple[str, ...], float] = {}
    for event in await store.events(session.id):
        path = event.data.get("path")
        if event.type == "tool.started":
            called[(*(path or ()), event.data["call_id"])] = event.ts
        if path:
            data = {k: v for k, v in event.data.items() if k != "path"}
            tracks.setdefault(tuple(path), []).append(replace(event, data=data))
    states = {path: fold(events, SessionState(session.id, cwd=session.state.cwd)) for path, events in tracks.items()}
    open_ = {path: state for path, state in states.items() if state.run is not None}
    waiting = {path for path, state in open_.items() if state.run is not None and state.run.waiting}
    # A sub-agent whose own sub-agent waits goes on too, and so on up to the session.
    for path in sorted(waiting, key=len, reverse=True):
        waiting.update(path[:n] for n in range(1, len(path)) if path[:n] in open_)
    # (A call's tool.started always comes before its sub-agent's events.)
    return {path: (open_[path], called.get(path, time.time())) for path in waiting}


def _children(path: tuple[str, ...], subruns: Mapping[tuple[str, ...], Any]) -> tuple[str, ...]:
    """The calls of the track at ``path`` whose sub-agents are resumed."""
    return tuple(p[-1] for p in subruns if len(p) == len(path) + 1 and p[: len(path)] == path)


def _history_before(messages: tuple[Mapping[str, Any], ...], call_id: str) -> tuple[Mapping[str, Any], ...]:
    """``messages`` up to the assistant reply that made the call ``call_id``."""
    for i, message in enumerate(messages):
        if message["role"] == "assistant" and any(b.get("id") == call_id for b in message["content"]):
            return messages[:i]
    return messages

