"""The conductor's sub-agents: a run's call of an agent runs that agent's loop to its end,
inside the caller's run, and its final text is the call's result.

A sub-agent is a :class:`Track` of its session (its events carry its ``path``); its plan
comes from its caller's (:meth:`Planner.subagent`). Only the outermost sub-agents take one
of the session's slots: nested ones run inside theirs.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, AsyncContextManager, AsyncIterator, Callable, Mapping

import trio

from roost.loop import Input, Interrupted, SessionState, StartSubagent, Submit, ToolFinished

from ..storage._store import StoreError
from ._model_calls import FeedResult
from ._plan import PlanError, Planner, SubagentCall
from ._sessions import LiveRun, Session, Track

#: Keeps a track's run alive while the block lasts (``Conductor.live``).
Live = Callable[[Session, Track, "Track | None"], AsyncContextManager[LiveRun]]
#: Feeds one input to a track (``Conductor.feed``).
Feed = Callable[[Session, Input, Track], Any]


class Subagents:
    """Performs StartSubagent, and drives sub-agents resumed after a restart."""

    def __init__(self, planner: Planner, live: Live, feed: Feed, feed_result: FeedResult) -> None:
        self._planner = planner
        self._live = live
        self._feed = feed
        self._feed_result = feed_result

    async def start(self, session: Session, parent: Track, effect: StartSubagent) -> None:
        """Run a sub-agent to its end; its final text is the parent's tool result."""
        started = time.monotonic()
        path = (*parent.path, effect.call_id)
        if parent.plan is None:
            await self._fail(session, parent, effect, f"the {effect.name} agent cannot run: its caller has no plan")
            return
        try:
            plan = await self._planner.subagent(SubagentCall(parent.plan, effect))
        except PlanError as exc:
            await self._fail(session, parent, effect, str(exc))
            return
        state = SessionState(session.id, cwd=session.state.cwd, created=time.time())
        if plan.fork:
            # The caller's history up to the reply that made this call.
            state = replace(state, messages=parent.state.messages[:-1])
        child = Track(state, path, plan)
        assert isinstance(plan.first, Submit)
        await self.drive(session, parent, child, plan.first, effect.run, started)

    async def drive(
        self,
        session: Session,
        parent: Track,
        child: Track,
        first: Submit | Interrupted,
        run: str,
        started: float,
        *,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Step a sub-agent from ``first`` until its run ends, then give its caller (whose
        run is ``run``) the call's result. Started (``task_status``) once ``first`` is in."""
        path, call_id = child.path, child.path[-1]
        session.subruns[path] = child
        try:
            # Only the outermost sub-agents take a slot: nested ones run inside theirs.
            async with session.subagent_limiter if len(path) == 1 else _no_limit():
                async with self._live(session, child, parent) as live:
                    try:
                        await self._feed(session, first, child)
                    except StoreError:
                        live.nursery.cancel_scope.cancel()  # it never started (feed said why)
                        task_status.started()
                    else:
                        task_status.started()
                        # Until its run.finished cancels this scope (FinishRun).
                        await trio.sleep_forever()
        finally:
            session.subruns.pop(path, None)
        end: Mapping[str, Any] = child.finished or {"reason": "error", "error": "the sub-agent ended without finishing"}
        reason, text = end["reason"], str(end.get("text") or "")
        if reason != "done":
            text = f"the {child.agent} agent ended {reason}: {end.get('error') or text or 'no answer'}"
        meta = {"agent": child.agent, "reason": reason, "turns": end.get("turns", 0), "usage": end.get("usage", {})}
        result = ToolFinished(call_id, text, time.time(), reason != "done", time.monotonic() - started, meta)
        await self._feed_result(session, parent, run, result)

    async def _fail(self, session: Session, parent: Track, effect: StartSubagent, why: str) -> None:
        failed = ToolFinished(effect.call_id, why, time.time(), True)
        await self._feed_result(session, parent, effect.run, failed)


@asynccontextmanager
async def _no_limit() -> AsyncIterator[None]:
    yield
