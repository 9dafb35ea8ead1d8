"""The conductor: the one driver of the pure loop.

For every input it steps the track's state, stores the new events (durably), publishes them,
and performs the effects: model calls (``_model_calls``), tool calls, checks, hooks and
clocks (``_tool_calls``) and sub-agents (``_subagents``) run as tasks in the run's own
nursery, and what they return is fed back as the next input. The conductor decides nothing
about the run itself (that is :func:`roost.loop.step`); failures of IO come back as inputs.
What a run starts with comes from its :class:`RunPlan` (``_plan``); a run left open by a
dead daemon is taken up by ``_recovery``.

Resource handling:
    Each run owns a nursery inside the daemon's nursery (its :class:`LiveRun`). CancelRun
    cancels it, which closes the model's HTTP stream and kills tool process groups at once.

Error handling:
    Events that cannot be stored (:class:`StoreError`: a full disk) were never stepped as
    far as anyone can tell: the state does not advance. The run in flight ends ``error``
    (``RunFailed``) if that can be stored; if not, it ends in memory only and the session is
    dropped until its end can be stored (``SessionTable.forget``). Either way ``feed``
    raises the error, so a request answers it and an effect's task just ends.
"""

from __future__ import annotations

import logging
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from functools import partial
from typing import Any, Awaitable, Callable, Sequence

import trio

from roost.loop import (
    Abort,
    CancelRun,
    Effect,
    Event,
    FinishRun,
    HumanAnswered,
    Input,
    InvalidInput,
    PermissionDecided,
    RunCheck,
    RunFailed,
    RunStopHooks,
    RunTool,
    StartClock,
    StartSubagent,
    Steer,
    Submit,
    Summarize,
    Transition,
    fold,
    step,
)

from ..folder._trust import TrustStore
from ..mcp import McpManager
from ..memory import MemoryIndex
from ..memory._feed import MemoryFeed
from ..providers import ProviderRegistry
from ..sandbox import Sandbox, Unsupported
from ..storage._store import EventStore, StoreError
from ._media import MediaFill, stored_parts
from ..tools import ProcessLedger, ToolRegistry
from ..tools._media import Media
from ._fanout import Fanout
from ._model_calls import CallAhead, ModelCalls, tool_specs
from ._plan import Planner, RunPlan
from ._recovery import recover
from ._live import LiveRun, live_run
from ._session_end import SessionEnds
from ._sessions import Held, Session, SessionTable, Track
from ._subagents import Subagents
from ._tool_calls import ToolCalls, abort_of
from ._transcript import Transcripts

log = logging.getLogger(__name__)

#: How long shutdown waits for aborted runs to wind down.
SHUTDOWN_GRACE = 5.0


class Conductor:
    """Runs sessions: start a planned run, steer, answer, abort, recovery, shutdown."""

    def __init__(
        self,
        store: EventStore,
        fanout: Fanout,
        providers: ProviderRegistry,
        tools: ToolRegistry,
        nursery: trio.Nursery,
        ledger: ProcessLedger | None = None,
        mcp: McpManager | None = None,
        trust: TrustStore | None = None,
        sandbox: Sandbox | None = None,
        memory: MemoryIndex | None = None,
    ) -> None:
        self.store, self.mcp, self.fanout, self.ledger = store, mcp, fanout, ledger
        # Where commands run: without a backend that works here, only runs in mode off do.
        confines = sandbox if sandbox is not None else Sandbox(Unsupported("this daemon"))
        self.planner = Planner(providers, tools, confines, nursery, mcp, trust, memory)
        # Each session's transcript in Claude Code's format, for hooks (see _transcript).
        self.transcripts = Transcripts(store.events)
        self.session_ends = ends = SessionEnds(self.planner, self.transcripts, ledger, nursery)
        publish = fanout.publish
        self.memory = MemoryFeed(memory, publish)  # what runs leave to recall (see memory._feed)
        self.sessions = SessionTable(store, self._settle, nursery, publish, self.transcripts.deleted, ends.pruned, self.transcripts.created)
        self._nursery = nursery
        self._request_ids: dict[str, tuple[str, str]] = {}
        nursery.start_soon(self.transcripts.run)
        nursery.start_soon(self.memory.run)
        self.tool_calls = calls = ToolCalls(tools, mcp, ledger, publish, self.feed_result, self.transcripts, nursery, partial(stored_parts, store), memory)
        specs, fill = partial(tool_specs, tools, mcp), MediaFill(store)
        self.model_calls = ModelCalls(publish, self.feed_result, specs, calls.pre_hooks, calls.compact_hooks, fill)
        self.subagents = Subagents(self.planner, self.live, self.feed, self.feed_result)
        # A model call is started by ModelCalls.start_ahead, while its step's events are stored.
        self._tasks: dict[type[Effect], Callable[[Session, Track, Any], Awaitable[None]]] = {
            Summarize: self.model_calls.summarize,
            RunTool: self.tool_calls.run_tool,
            StartSubagent: self.subagents.start,
            RunCheck: self.tool_calls.run_check,
            StartClock: self.tool_calls.clock,
            RunStopHooks: self.tool_calls.stop_hooks,
        }

    async def start(self) -> None:
        """Load what a restart needs: idempotency keys, and runs a dead daemon left open
        (see ``_recovery``)."""
        self._request_ids = await self.store.request_ids()
        await recover(self.store, self.sessions, self.planner, self.ledger, self._start, self.subagents)

    async def start_run(self, session: Session, plan: RunPlan) -> str:
        """Start the run ``plan`` prepared on ``session``; return its id once its first
        events are stored. A dispatch's command's ``!`command``` lines run first (see
        ``_command_lines``); its UserPromptSubmit hooks see its task as it was typed: they
        may refuse it or add context. Its commands run in the plan's sandbox
        (unsandboxed only in mode ``off``); where the sandbox cannot be built, the run ends
        ``error`` at its first command.

        Raises:
            InvalidInput: a run is already in flight.
            PromptBlocked: a UserPromptSubmit hook refused the task.
        """
        first = plan.first
        if isinstance(first, Submit):
            plan = replace(plan, first=await self.tool_calls.task_hooks(session, plan, first))
        else:
            # The transcript exists before the run's sandbox is built, which shows it.
            await self.transcripts.sync(session.id)
        await self._start(session, plan)
        if isinstance(first, Submit) and first.request_id:
            self._request_ids[first.request_id] = (session.id, first.run)
        return plan.run

    async def _start(self, session: Session, plan: RunPlan) -> None:
        session.track.plan = plan
        await self._nursery.start(self._run, session, plan)

    def find_request(self, request_id: str) -> tuple[str, str] | None:
        """The (session, run) a dispatch with this idempotency key started, if any."""
        return self._request_ids.get(request_id)

    async def steer(self, session: Session, text: str, media: Sequence[Media] = ()) -> None:
        """Queue words (and images) for the run in flight, after the UserPromptSubmit hooks
        (the context they add follows the words).

        Raises:
            InvalidInput: no run in flight.
            PromptBlocked: a UserPromptSubmit hook refused the words.
        """
        run, plan = session.state.run, session.track.plan
        if run is None or plan is None:
            raise InvalidInput(Steer(text, time.time()), session.state.phase, "no run in flight")
        live, parts = session.track.live, await stored_parts(self.store, session.id, media) if media else ()
        context, _ = await self.tool_calls.prompt_hooks(session, plan, text, live.sandbox if live is not None else None)
        await self.feed(session, Steer("\n\n".join((text, *context)), time.time(), parts))

    async def respond(self, session: Session, answer: PermissionDecided | HumanAnswered) -> None:
        """A person's answer to an open request (the session's own, or a sub-agent's).

        Raises:
            InvalidInput: no such open request.
        """
        await self.feed(session, answer, session.asking(answer.call_id))

    async def abort(self, session: Session, reason: str = "aborted by the user", *, after_step: bool = False) -> str:
        """Abort the run in flight (and its sub-agents) and return its id; ``after_step``:
        let each finish the step in flight first (its reply and tool calls), then end.

        Raises:
            InvalidInput: no run in flight.
        """
        run = session.state.run
        children = sorted(session.subruns.values(), key=lambda sub: len(sub.path), reverse=True)
        if after_step:
            # Nothing is cancelled: the sub-agents' steps end first, then their callers'.
            await self.feed(session, Abort(time.time(), reason, after_step=True))
            for sub in children:
                if sub.state.run is not None:
                    await self.feed(session, Abort(time.time(), reason, after_step=True), sub)
            assert run is not None
            return run.id
        # The deepest sub-agents end first, then their callers, the run last: a client that
        # stops reading at the run's end has seen every end inside it.
        for sub in children:
            if sub.state.run is not None:
                await self.feed(session, abort_of(sub, reason), sub)
        await self.feed(session, abort_of(session.track, reason))
        assert run is not None
        return run.id

    async def shutdown(self) -> None:
        """Abort every run (their events are stored) and wait, bounded, for them to end.

        A run that waits for a person is left open instead (its tools in flight are
        stopped): the next daemon finds the request still open, and the run goes on once
        it is answered.
        """
        with trio.CancelScope(shield=True):
            waits = []
            for session in self.sessions.loaded():
                if session.state.run is None:
                    continue
                live = session.track.live
                if session.waits_for_a_person():
                    if live is not None:
                        live.nursery.cancel_scope.cancel()
                        waits.append(live.done)
                    continue
                try:
                    await self.abort(session, "the daemon shut down")
                except InvalidInput:
                    continue
                except StoreError:
                    pass  # ended in memory; the next daemon finds the run open and ends it
                if live is not None:
                    waits.append(live.done)
            with trio.move_on_after(SHUTDOWN_GRACE):
                for done in waits:
                    await done.wait()
            with trio.move_on_after(SHUTDOWN_GRACE):
                await self.planner.providers.aclose()
            if self.mcp is not None:
                await self.mcp.aclose()

    async def feed(self, session: Session, input: Input, track: Track | None = None) -> Transition:
        """Step, store, publish, perform: the conductor's whole job for one input, fed to
        the session's own loop or to one of its sub-agents' (``track``).

        Raises:
            InvalidInput: the input is not allowed now; nothing was stored.
            StoreError: the events could not be stored; the run in flight was ended (see
                the module's docstring).
        """
        track = session.track if track is None else track
        async with Held(session.lock):
            transition = step(track.state, input)
            ahead = self.model_calls.start_ahead(session, track, transition)
            # Once stepped, the events must be stored and the state advanced together.
            with trio.CancelScope(shield=True):
                try:
                    stored = await self.store.append(_on_track(track, transition.events))
                except StoreError as exc:
                    if ahead is not None:
                        ahead.scope.cancel()
                    await self._unstored(session, track, exc)
                    raise
            self._advance(session, track, transition, stored, ahead)
        return transition

    async def feed_result(self, session: Session, track: Track, run: str, result: Input) -> None:
        """Feed what an effect of ``track``'s run ``run`` brought back, unless the run has
        moved on; a failure here costs the run, never the daemon."""
        if track.state.run is None or track.state.run.id != run:
            return
        try:
            await self.feed(session, result, track)
        except InvalidInput as exc:
            # The run moved on (aborted while this effect finished): the result is stale.
            log.debug("session %s: stale result dropped: %s", session.id, exc)
        except StoreError:
            pass  # not stored: feed ended the run and logged why
        except Exception:
            # A bug must cost this run, not the daemon and every other session.
            log.exception("session %s: internal error handling %s", session.id, type(result).__name__)
            await self.feed(session, abort_of(track, "internal error in the daemon; see its log"), track)

    def _advance(self, session: Session, track: Track, transition: Transition, stored: list[Event], ahead: CallAhead | None) -> None:
        """The step's events are stored: advance the state, publish them, perform the effects."""
        if track is not session.track:
            track.state = transition.state
            # The session's own state only counts a sub-agent's events.
            session.state = fold(stored, session.state) if stored else session.state
            track.finished = next((e.data for e in stored if e.type == "run.finished"), track.finished)
        else:
            last = stored[-1].seq if stored else None  # a stored event always has its seq
            session.state = transition.state.stored_up_to(last) if last is not None else transition.state
            self.sessions.noted(session)
        for event in stored:
            self.fanout.publish(event.to_map())
        if ahead is not None:
            ahead.release(self.fanout.publish)
        self.transcripts.add(session.id, session.state.cwd, stored)
        self.memory.add(session.id, session.state.cwd, stored, track.plan.learning if track is session.track and track.plan else None)
        self.tool_calls.notify(session, track, stored)
        self._perform(session, track, transition.effects)

    async def _unstored(self, session: Session, track: Track, error: StoreError) -> None:
        """A step's events could not be stored: end the track's run (else the session's, if
        that cannot be stored) with what can still be stored, or in memory only. Under the
        session's lock, shielded."""
        log.error("session %s: events not stored: %s", session.id, error)
        if track.state.run is None:
            return  # a run that was to start did not: nothing to end
        why = f"the run's events could not be stored, so it was ended: {error}"
        for ending in dict.fromkeys((track, session.track)):
            if ending.state.run is None:
                continue
            transition = step(ending.state, RunFailed(why, time.time()))
            try:
                stored = await self.store.append(_on_track(ending, transition.events))
            except StoreError:
                continue
            self._advance(session, ending, transition, stored, None)
            return
        log.error("session %s: its run ended in memory only, and in the log once there is room", session.id)
        first = session.id not in self.sessions.unsettled
        run = session.state.run.id if session.state.run is not None else None
        self.sessions.forget(session, why)
        if first:
            note = Event("error", session.id, run, time.time(), {"message": why, "stored": False})
            self.fanout.publish(note.to_map())
            self._nursery.start_soon(self.sessions.settle_later, session.id)

    async def _settle(self, session: Session, why: str) -> None:
        """Store the end of a run that ended in memory only (see :meth:`_unstored`)."""
        await self.feed(session, RunFailed(why, time.time()))

    def _perform(self, session: Session, track: Track, effects: tuple[Effect, ...]) -> None:
        live = track.live
        for effect in effects:
            task = self._tasks.get(type(effect))
            if task is not None:
                assert live is not None
                live.nursery.start_soon(task, session, track, effect)
            elif isinstance(effect, (CancelRun, FinishRun)):
                # Nothing of the run is left to do (FinishRun): clocks still ticking must
                # not keep its nursery open.
                if live is not None:
                    live.nursery.cancel_scope.cancel()
                if isinstance(effect, FinishRun):
                    log.info("session %s: run %s finished: %s", session.id, effect.run, effect.reason)

    async def _run(self, session: Session, plan: RunPlan, *, task_status: Any) -> None:
        """The session's run, from its plan's first input until it ends."""
        unstored: StoreError | None = None
        async with self.live(session, session.track) as live:
            try:
                await self.feed(session, plan.first)
            except StoreError as exc:
                unstored = exc  # the run never started, or was ended at once
                live.nursery.cancel_scope.cancel()
            else:
                task_status.started()
                # The run lasts until FinishRun cancels this scope, even while nothing
                # runs in it (a call waiting for a person).
                await trio.sleep_forever()
        if session.track.plan is plan:  # not the next run's: it may have started meanwhile
            session.track.plan = None  # what it read (config, prompt, tools) is not kept idle
        if unstored is not None:
            raise unstored
        self.sessions.keep_snapshot(session)

    def live(self, session: Session, track: Track, caller: Track | None = None) -> AbstractAsyncContextManager[LiveRun]:
        """``track``'s run while the block lasts (see :func:`live_run`); a sandbox that
        cannot be built ends the run ``error``, saying why, before the command that needed
        it reports (its commands never run unsandboxed instead)."""

        async def failed(why: str) -> None:
            if track.state.run is not None:
                await self.feed_result(session, track, track.state.run.id, RunFailed(why, time.time()))

        return live_run(session.state.cwd, track, caller, mcp=self.mcp, ledger=self.ledger, on_failure=failed,
                        shown=self.transcripts.shown(session.id), background=self.sessions.background)


def _on_track(track: Track, events: tuple[Event, ...]) -> tuple[Event, ...]:
    """A sub-agent's events carry its path."""
    if not track.path:
        return events
    return tuple(replace(e, data={**e.data, "path": list(track.path)}) for e in events)
