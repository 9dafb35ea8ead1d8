"""The conductor: the one driver of the pure loop.

For every input it steps the session's state, stores the new events (durably), publishes
them, and performs the effects: model calls and tool calls run as tasks in the run's own
nursery, and what they return is fed back as the next input. The conductor decides nothing
about the run itself (that is :func:`roost.loop.step`); failures of IO come back as inputs.

Resource handling:
    Each run owns a nursery inside the daemon's nursery. CancelRun cancels it, which closes
    the model's HTTP stream and kills tool process groups at once.

Error handling:
    Events that cannot be stored (:class:`StoreError`: a full disk) were never stepped as
    far as anyone can tell: the state does not advance. The run in flight ends ``error``
    (``RunFailed``) if that can be stored; if not, it ends in memory only and the session is
    dropped until its end can be stored (``SessionTable.forget``). Either way ``feed``
    raises the error, so a request answers it and an effect's task just ends.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import secrets
import time
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from dataclasses import replace
from functools import partial
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping

import trio

from roost.loop import (
    REASONING_DELTA,
    TASK,
    TEXT_DELTA,
    TOOL_PROGRESS,
    Abort,
    CallModel,
    CancelRun,
    CheckFinished,
    Compact,
    Effect,
    Event,
    FinishRun,
    HumanAnswered,
    Input,
    Interrupted,
    InvalidInput,
    ModelFailed,
    ModelFinished,
    PermissionDecided,
    RunCheck,
    RunFailed,
    RunState,
    RunStopHooks,
    RunTool,
    SessionState,
    StartClock,
    StartSubagent,
    Steer,
    StopHooksFinished,
    Submit,
    Summarize,
    Summarized,
    TimeUp,
    ToolFinished,
    Transition,
    decide,
    fold,
    paths_named,
    safe_text,
    step,
)

from ..folder._agents import Agent
from ..folder._config import ConfigError, price_map
from ..folder._prompt import PromptCache, compose, render, sizes, summary_text
from ..folder._setup import FolderSetup, load_folder
from ..folder._trust import NO_TRUST, TrustError, TrustStore
from ..mcp import McpManager, McpServerConfig
from ..providers import (
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderRegistry,
    Resolved,
    ToolSpec,
)
from ..sandbox import Confinement, RunSandbox, Sandbox, SandboxPolicy, Unsupported
from ..storage._store import EventStore, SessionRow, StoreError
from ..tools import ProcessLedger, ToolContext, ToolRegistry, ToolResult, change_preview, real_path
from ._delegation import agent_specs, delegates
from ._fanout import Fanout
from ._hooks import HookEnv, run_post_hooks, run_pre_hooks, run_prompt_hooks, run_stop_hooks
from ._sessions import Session, SessionTable, Subrun
from ._settings import Asked, RunSettings, SettingsError, resumed, settle

log = logging.getLogger(__name__)

#: Tool calls of one step that may run at the same time.
TOOL_CONCURRENCY = 8
#: exec mode: how long one check may run, and how much of its output the model sees.
CHECK_TIMEOUT = 600.0
CHECK_OUTPUT = 4000
#: How deep sub-agents may nest (a sub-agent's sub-agent is depth 2).
SUBAGENT_DEPTH = 3
#: How long shutdown waits for aborted runs to wind down.
SHUTDOWN_GRACE = 5.0
#: Seconds between tries to store the end of a run that ended in memory only (a full disk).
SETTLE_RETRY = 5.0
#: Worker threads that find the real paths a reply's tool calls name (and the diffs a
#: person is shown), all sessions together. Their own, so that a running step never waits
#: behind other sessions' dispatches reading their folders in the daemon's shared threads;
#: few, for the reason ``_server.WORKER_THREADS`` gives. At 1,000 sessions (bench/scale.py,
#: runs taking turns) a step's overhead p99 was 108-183 ms with them, 129-508 ms without.
LOOK_THREADS = 2
#: Compaction: what the summarizing call is told, and how the summary is introduced to
#: later calls (the last layer of their system prompt).
SUMMARIZER = (
    "You condense an agent's working conversation so that the agent can go on with less "
    "context. Keep what it needs to continue: the task and the user's wishes, decisions made "
    "and why, files read and changed (paths), commands run and what they showed, errors still "
    "open, and what was about to happen next. Leave out what no longer matters. Plain text, "
    "no preamble."
)
SUMMARIZE_REQUEST = "Summarize the conversation above for yourself, to continue the task from it."


class Conductor:
    """Runs sessions: dispatch, steer, abort, recovery, shutdown."""

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
    ) -> None:
        self.store = store
        self.mcp = mcp
        #: The folders the user trusted (None: none, as in tests of other parts).
        self.trust = trust
        #: Where commands run (None: no sandbox works here; only runs in mode off run them).
        self.sandbox = sandbox if sandbox is not None else Sandbox(Unsupported("this daemon"))
        self.fanout = fanout
        self.providers = providers
        self.tools = tools
        self.ledger = ledger
        #: What composing system prompts read from files that did not change since.
        self.prompts = PromptCache()
        self.sessions = SessionTable(store, self._settle, nursery)
        self._nursery = nursery
        self._request_ids: dict[str, tuple[str, str]] = {}
        self._look_threads = trio.CapacityLimiter(LOOK_THREADS)

    async def start(self) -> None:
        """Load what a restart needs: idempotency keys, and runs a dead daemon left open.

        Tool process groups a dead daemon left running are killed first, so that an
        interrupted tool never goes on beside the session's next run. A run that waits for
        a person goes on waiting, also when it is one of its sub-agents that waits (the
        sub-agent goes on too), and an exec run goes on where it was (set up as their
        ``run.started`` recorded, the model resolved again, MCP servers from the folder's
        config); the others end ``error``.
        """
        if self.ledger is not None:
            self.ledger.end_leftovers()
        self._request_ids = await self.store.request_ids()
        for session_id in await self.store.open_runs():
            session = await self.sessions.get(session_id)
            run = session.state.run
            log.warning("session %s: run %s was interrupted", session_id, run and run.id)
            if run is not None and run.sandbox is not None:
                # As the run was told when it started: sandboxed stays sandboxed, or fails.
                session.sandbox = self.sandbox.confine(SandboxPolicy.from_map(run.sandbox))
            subruns = await self._waiting_subruns(session) if run is not None else {}
            setup = None
            if run is not None and (run.waiting or run.mode == "exec" or subruns):
                # The dispatching terminal is gone: the daemon's own environment stands in.
                try:
                    setup = await self.load_folder(session.state.cwd, os.environ)
                except ConfigError as exc:
                    log.warning("session %s: the waiting run cannot go on: %s", session_id, exc)
                else:
                    await self._resume(session, setup, run)
            if setup is None or session.settings is None:
                subruns = {}
            try:
                await self._nursery.start(self._run, session, Interrupted(time.time(), _children((), subruns)))
            except StoreError as exc:
                # A full disk must not keep the daemon from serving: the run stays open in
                # the log, and is ended when it is next loaded with room to store that.
                log.error("session %s: the interrupted run could not be ended yet: %s", session_id, exc)
                continue
            for path, state in sorted(subruns.items(), key=lambda item: len(item[0])):
                parent = session if len(path) == 1 else session.subruns.get(path[:-1])
                if parent is not None and parent.run_nursery is not None and parent.state.run is not None:
                    assert setup is not None
                    child = await self._resumed_subrun(session, setup, path, state)
                    first = Interrupted(time.time(), _children(path, subruns))
                    started = time.monotonic()
                    await parent.run_nursery.start(self._drive, session, parent, child, first, parent.state.run.id, started)

    async def _waiting_subruns(self, session: Session) -> dict[tuple[str, ...], SessionState]:
        """The sub-agent runs of ``session`` left in flight that a person may still answer
        (they, or a sub-agent of theirs, wait for one), by path: their state folded from
        their own events."""
        tracks: dict[tuple[str, ...], list[Event]] = {}
        for event in await self.store.events(session.id):
            path = event.data.get("path")
            if path:
                data = {k: v for k, v in event.data.items() if k != "path"}
                tracks.setdefault(tuple(path), []).append(replace(event, data=data))
        states = {
            path: fold(events, SessionState(session.id, cwd=session.state.cwd)) for path, events in tracks.items()
        }
        open_ = {path: state for path, state in states.items() if state.run is not None}
        waiting = {path for path, state in open_.items() if state.run is not None and state.run.waiting}
        # A sub-agent whose own sub-agent waits goes on too, and so on up to the session.
        for path in sorted(waiting, key=len, reverse=True):
            waiting.update(path[:n] for n in range(1, len(path)) if path[:n] in open_)
        return {path: open_[path] for path in waiting}

    async def _resumed_subrun(
        self, session: Session, setup: FolderSetup, path: tuple[str, ...], state: SessionState
    ) -> Subrun:
        """A sub-agent left in flight, set up again as its ``run.started`` recorded."""
        run = state.run
        assert run is not None
        child = Subrun(path, state, run.agent)
        agent = setup.agents.agents.get(run.agent)
        if agent is not None and agent.fork:
            # Its history began with its caller's, up to the reply that made the call.
            caller = session if len(path) == 1 else session.subruns[path[:-1]]
            child.state = replace(state, messages=_history_before(caller.state.messages, path[-1]) + state.messages)
        try:
            model = self.providers.resolve(run.model, setup.config, os.environ)
        except ProviderError as exc:
            log.warning("session %s: sub-agent %s cannot go on: %s", session.id, run.agent, exc)
            model = None
        settings = resumed(setup, run, model) if model is not None else None
        child.agent_specs = agent_specs(run.subagents, run.delegates, setup.agents.agents)
        child.mcp_servers = self._resume_mcp(setup, run.tools)
        if settings is not None:
            layers = await compose(settings.agent, run.mode, setup.place, tools=run.tools, cache=self.prompts)
            sandbox = self.sandbox.confine(settings.sandbox) if run.sandbox is not None else None
            self._set_up(child, settings, sandbox, render(layers))
        return child

    async def _resume(self, session: Session, setup: FolderSetup, run: RunState) -> None:
        """Set a run left in flight up again as its ``run.started`` recorded it: the same
        model, thinking, rules, limits, sandbox, sub-agent and MCP tools."""
        self._equip(session, setup, os.environ)
        try:
            model = self.providers.resolve(run.model, setup.config, os.environ)
        except ProviderError as exc:
            log.warning("session %s: the waiting run cannot go on: %s", session.id, exc)
            return
        settings = resumed(setup, run, model)
        layers = await compose(settings.agent, run.mode, setup.place, tools=run.tools, cache=self.prompts)
        session.agent_specs = agent_specs(run.subagents, run.delegates, setup.agents.agents)
        session.mcp_servers = self._resume_mcp(setup, run.tools)
        self._set_up(session, settings, session.sandbox, render(layers))

    async def load_folder(self, cwd: str, environ: Mapping[str, str]) -> FolderSetup:
        """What ``cwd``'s files say for a run, under the user's trust as it is now.

        Raises:
            ConfigError: a config file (or the trust store) cannot be used.
        """

        def load() -> FolderSetup:
            try:
                trust = self.trust.snapshot() if self.trust is not None else NO_TRUST
            except TrustError as exc:
                raise ConfigError(str(exc)) from None
            return load_folder(cwd, environ, trust, self.sandbox.hidden)

        return await trio.to_thread.run_sync(load)

    async def prune(
        self, idle_since: float, *, dry_run: bool = False, only: Iterable[str] | None = None
    ) -> tuple[list[SessionRow], list[tuple[SessionRow, str]]]:
        """Delete the sessions (of ``only``, if given) with no activity since
        ``idle_since``, never one with a run in flight, nor one with a fork that stays;
        return those deleted (with ``dry_run``: those that would be) and those kept, each
        with why. Forks go before their parents. What they referred to stays stored until
        :meth:`EventStore.collect_garbage`.
        """
        wanted = None if only is None else set(only)
        every = await self.store.sessions()
        old = [r for r in every if r.last_active < idle_since and (wanted is None or r.id in wanted)]
        # A run open in the log is in flight too (its session is loaded, or settling).
        open_ = set(await self.store.open_runs())
        kept = [(r, "a run is in flight") for r in old if r.id in open_ or self.sessions.busy(r.id)]
        going = {r.id for r in old} - {r.id for r, _ in kept}
        forks: dict[str, list[str]] = {}
        for row in every:
            if row.parent is not None:
                forks.setdefault(row.parent, []).append(row.id)
        # A parent goes only with all its forks (the store keeps a fork's history there).
        while stay := {s for s in going if any(f not in going for f in forks.get(s, ()))}:
            going -= stay
            kept += [(r, "it has forks that stay") for r in old if r.id in stay]
        depth = {r.id: _depth(r.id, {x.id: x.parent for x in every}) for r in old}
        old = sorted((r for r in old if r.id in going), key=lambda r: -depth[r.id])
        if dry_run or not old:
            return old, kept
        taken = self.sessions.take(r.id for r in old)
        try:
            gone = set(await self.store.delete_sessions(taken, idle_since))
        finally:
            self.sessions.give_back(taken)
        for row in old:
            if row.id in gone:
                log.info("session %s deleted (no activity since %s)", row.id, time.ctime(row.last_active))
        return [r for r in old if r.id in gone], kept

    def runs_in_flight(self) -> int:
        """Sessions with a run in flight."""
        return sum(1 for s in self.sessions.loaded() if s.state.run is not None)

    async def create_session(self, cwd: str) -> Session:
        """A new session; its first events are stored and published."""
        session, stored = await self.sessions.create(cwd)
        for event in stored:
            self.fanout.publish(event.to_map())
        return session

    async def fork(self, parent: Session, at: int) -> Session:
        """A fork of ``parent`` at seq ``at`` (or the last whole point before it: see
        :meth:`SessionTable.fork`); its first events are stored and published."""
        session, stored = await self.sessions.fork(parent, at)
        for event in stored:
            self.fanout.publish(event.to_map())
        return session

    async def dispatch(
        self,
        session: Session,
        settings: RunSettings,
        *,
        setup: FolderSetup,
        environ: Mapping[str, str],
        task: str,
        request_id: str | None = None,
        command: Mapping[str, Any] | None = None,
    ) -> str:
        """Start a run on ``session`` as ``settings`` say; return the run id once
        ``run.started`` is stored. Its commands run in the settings' sandbox (unsandboxed
        only in mode ``off``); where the sandbox cannot be built, the run ends ``error``
        at its first command.

        ``command`` is the custom command ``task`` was expanded from (``{"name",
        "arguments", "source", "typed"}``), recorded in ``run.started``. The
        UserPromptSubmit hooks see the task first, as it was typed: they may refuse it or
        add context.

        Raises:
            InvalidInput: a run is already in flight.
            PromptBlocked: a UserPromptSubmit hook refused the task.
        """
        agent, mode = settings.agent, settings.mode
        typed = command["typed"] if command is not None else None
        self._equip(session, setup, environ)
        confined = self.sandbox.confine(settings.sandbox)
        # The run is not started yet: a project's hooks run in a sandbox of its own.
        async with RunSandbox(confined, session.state.cwd, ledger=self.ledger) if confined else nullcontext() as box:
            prompt = await run_prompt_hooks(session.hooks, typed or task, self._hook_env(session, mode, box))
        if prompt.failures:
            log.warning("session %s: %s", session.id, "; ".join(prompt.failures))
        if prompt.blocked is not None:
            raise PromptBlocked(prompt.blocked)
        tools, session.agent_specs, session.mcp_servers, team = await self._tools_of(agent, setup)
        layers = await compose(agent, mode, setup.place, tools=tools, cache=self.prompts)
        submit = self._submit(
            settings,
            run="r" + secrets.token_hex(6),
            task=task,
            tools=tools,
            specs=session.agent_specs,
            servers=session.mcp_servers,
            layers=layers,
            delegates=team,
            request_id=request_id,
            check=_check_command(session.state.cwd) if mode == "exec" else None,
            untrusted=setup.untrusted_notice(),
            context=prompt.context,
            hook_failures=prompt.failures,
            command=command,
            stop_hooks=any(hook.kind == "stop" for hook in session.hooks),
        )
        self._set_up(session, settings, confined, render(layers))
        await self._nursery.start(self._run, session, submit)
        if request_id:
            self._request_ids[request_id] = (session.id, submit.run)
        return submit.run

    def _submit(
        self,
        settings: RunSettings,
        *,
        tools: tuple[str, ...],
        specs: Mapping[str, ToolSpec],
        servers: Mapping[str, McpServerConfig],
        layers: list[Any],
        describe_sandbox: bool = True,
        **fields: Any,
    ) -> Submit:
        """The Submit of a run: its settings, as ``run.started`` records them."""
        model = settings.model
        return Submit(
            ts=time.time(),
            model=model.model_id,
            agent=settings.agent.name,
            mode=settings.mode,
            max_turns=settings.max_turns,
            max_tokens=settings.max_tokens,
            tools=tools,
            price=price_map(model.price),
            attempts=settings.attempts,
            time_box=settings.time_box,
            policy=settings.policy,
            guardrails=settings.guardrails,
            approval_timeout=settings.approval_timeout,
            prompt=tuple(sizes(layers)),
            context_window=settings.context_window,
            compact_at=settings.compact_at,
            keep_turns=settings.keep_turns,
            subagents=tuple(specs),
            think=settings.think,
            read_only=self._read_only(tools, servers),
            sandbox=self.sandbox.describe(settings.sandbox) if describe_sandbox else None,
            # What a project's files put in the prompt meets the input guardrails (an API
            # key in AGENTS.md must not reach the model any more than one in a tool result).
            instructions=tuple(layer.text for layer in layers if layer.name in ("instructions", "memory")),
            **fields,
        )

    @staticmethod
    def _set_up(track: Session | Subrun, settings: RunSettings, sandbox: Any, system: str) -> None:
        """What the conductor keeps of a run's settings to perform its effects."""
        track.settings = settings
        track.model = settings.model
        track.think = settings.think
        track.sandbox = sandbox
        track.system = system

    async def compact(self, session: Session, model: Resolved, keep_turns: int) -> str:
        """Summarize an idle session's older history (a short run); its run id.

        Raises:
            InvalidInput: a run is in flight.
        """
        compact = Compact("r" + secrets.token_hex(6), time.time(), model.model_id, keep_turns)
        session.model = model
        await self._nursery.start(self._run, session, compact)
        return compact.run

    def _equip(self, session: Session, setup: FolderSetup, environ: Mapping[str, str]) -> None:
        """Keep what the session's runs and sub-agents take from its folder and its client."""
        session.setup = setup
        session.hooks = setup.hooks
        session.client_env = environ
        session.environ = setup.tool_environment(environ)

    async def _tools_of(
        self, agent: Agent, setup: FolderSetup
    ) -> tuple[tuple[str, ...], dict[str, ToolSpec], dict[str, McpServerConfig], tuple[str, ...]]:
        """The tools a run of ``agent`` gets (its allow list, or every built-in and ``task``),
        those of them that run agents, as the model sees them, the MCP servers the others
        are on, and the agents its ``task`` may run (see ``_delegation``)."""
        mcp_names, servers = await self._mcp_tools(agent, setup)
        names = self.tools.names() + mcp_names
        agents = setup.agents.agents
        team = delegates(agent, agents)
        if agent.tools is None:
            specs = agent_specs((TASK,), team, agents)
            return names + tuple(specs), specs, servers, team
        specs = agent_specs((n for n in agent.tools if n not in names), team, agents)
        offered = tuple(n for n in names if n in agent.tools or _mcp_selected(n, agent.tools))
        return offered + tuple(specs), specs, servers, team

    async def _mcp_tools(self, agent: Agent, setup: FolderSetup) -> tuple[tuple[str, ...], dict[str, McpServerConfig]]:
        """Names of the MCP tools a run of ``agent`` in the folder may get, and the servers
        (of the folder's config) they are on, starting those that are not running yet
        (bounded: a server that fails to start is reported by ``mcp.list`` and blocks
        nothing)."""
        if self.mcp is None:
            return (), {}
        servers = dict(setup.mcp)
        for problem in setup.mcp_config.problems:
            log.warning("MCP config: %s", problem)
        if agent.tools is not None:
            servers = _servers_of(servers, agent.tools)
        if not servers:
            return (), {}
        await self.mcp.ensure(servers)
        return tuple(t.name for t in self.mcp.tools(servers)), servers

    def _read_only(self, tools: tuple[str, ...], servers: Mapping[str, McpServerConfig]) -> tuple[str, ...]:
        """The tools among ``tools`` whose calls only read: built-ins that say so, and MCP
        tools their server marks ``readOnlyHint``."""
        mcp = {t.name for t in self.mcp.tools(servers) if t.read_only} if self.mcp is not None else set()
        return tuple(n for n in tools if n in mcp or ((tool := self.tools.get(n)) is not None and tool.read_only))

    def _resume_mcp(self, setup: FolderSetup, tools: Iterable[str]) -> dict[str, McpServerConfig]:
        """The servers of the folder's config that a resumed run's MCP tools are on, started
        in the background (the daemon does not wait for them to listen)."""
        if self.mcp is None:
            return {}
        servers = _servers_of(setup.mcp, tools)
        if servers:
            self._nursery.start_soon(self.mcp.ensure, servers)
        return servers

    def _holding(self, servers: Mapping[str, McpServerConfig]) -> AbstractContextManager[None]:
        """Keeps a run's MCP servers running while it lasts (see ``McpManager.hold``)."""
        return nullcontext() if self.mcp is None else self.mcp.hold(servers)

    def find_request(self, request_id: str) -> tuple[str, str] | None:
        """The (session, run) a dispatch with this idempotency key started, if any."""
        return self._request_ids.get(request_id)

    async def steer(self, session: Session, text: str) -> None:
        """Queue words for the run in flight, after the UserPromptSubmit hooks (the context
        they add follows the words).

        Raises:
            InvalidInput: no run in flight.
            PromptBlocked: a UserPromptSubmit hook refused the words.
        """
        run = session.state.run
        if run is None:
            raise InvalidInput(Steer(text, time.time()), session.state.phase, "no run in flight")
        prompt = await run_prompt_hooks(session.hooks, text, self._hook_env(session, run.mode, session.run_sandbox))
        if prompt.failures:
            log.warning("session %s: %s", session.id, "; ".join(prompt.failures))
        if prompt.blocked is not None:
            raise PromptBlocked(prompt.blocked)
        await self.feed(session, Steer("\n\n".join((text, *prompt.context)), time.time()))

    def _hook_env(self, session: Session, mode: str, sandbox: RunSandbox | None) -> HookEnv:
        """Where the session's hooks run (a project's in ``sandbox``), and what they are
        told of it."""
        cwd = session.state.cwd
        root = session.setup.root if session.setup is not None else cwd
        return HookEnv(session.id, cwd, root, mode, session.environ, self.ledger, sandbox)

    async def respond(self, session: Session, answer: PermissionDecided | HumanAnswered) -> None:
        """A person's answer to an open request (the session's own, or a sub-agent's).

        Raises:
            InvalidInput: no such open request.
        """
        track: Session | Subrun = session
        for sub in session.subruns.values():
            if sub.state.run is not None and answer.call_id in sub.state.run.waiting:
                track = sub
        await self.feed(session, answer, track)

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
                await self.feed(session, _abort(sub, reason), sub)
        await self.feed(session, _abort(session, reason))
        assert run is not None
        return run.id

    def pending(self, session: Session) -> list[dict[str, Any]]:
        """The open requests of the session's run and of its sub-agents."""
        out = []
        tracks: tuple[Session | Subrun, ...] = (session, *session.subruns.values())
        for track in tracks:
            run = track.state.run
            if run is None:
                continue
            for call_id, wait in run.waiting.items():
                out.append({"session": session.id, "run": run.id, "call_id": call_id, "path": list(track.path), **wait})
        return out

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
                if session.waits_for_a_person():
                    if session.run_nursery is not None:
                        session.run_nursery.cancel_scope.cancel()
                    if session.run_done is not None:
                        waits.append(session.run_done)
                    continue
                try:
                    await self.abort(session, "the daemon shut down")
                except InvalidInput:
                    continue
                except StoreError:
                    pass  # ended in memory; the next daemon finds the run open and ends it
                if session.run_done is not None:
                    waits.append(session.run_done)
            with trio.move_on_after(SHUTDOWN_GRACE):
                for done in waits:
                    await done.wait()
            with trio.move_on_after(SHUTDOWN_GRACE):
                await self.providers.aclose()
            if self.mcp is not None:
                await self.mcp.aclose()

    async def feed(self, session: Session, input: Input, track: Session | Subrun | None = None) -> Transition:
        """Step, store, publish, perform: the conductor's whole job for one input, fed to
        the session's own loop or to one of its sub-agents' (``track``).

        Raises:
            InvalidInput: the input is not allowed now; nothing was stored.
            StoreError: the events could not be stored; the run in flight was ended (see
                the module's docstring).
        """
        track = session if track is None else track
        async with _Held(session.lock):
            transition = step(track.state, input)
            # Once stepped, the events must be stored and the state advanced together.
            with trio.CancelScope(shield=True):
                try:
                    stored = await self.store.append(_on_track(track, transition.events))
                except StoreError as exc:
                    await self._unstored(session, track, exc)
                    raise
            self._advance(session, track, transition, stored)
        return transition

    def _advance(self, session: Session, track: Session | Subrun, transition: Transition, stored: list[Event]) -> None:
        """The step's events are stored: advance the state, publish them, perform the effects."""
        if isinstance(track, Subrun):
            track.state = transition.state
            # The session's own state only counts a sub-agent's events.
            session.state = fold(stored, session.state) if stored else session.state
            track.finished = next((e.data for e in stored if e.type == "run.finished"), track.finished)
        else:
            state = transition.state
            last = stored[-1].seq if stored else None
            if last is not None:  # a stored event always has its seq
                state = replace(state, last_seq=last)
            session.state = state
        for event in stored:
            self.fanout.publish(event.to_map())
        self._perform(session, track, transition.effects)

    async def _unstored(self, session: Session, track: Session | Subrun, error: StoreError) -> None:
        """A step's events could not be stored: end the track's run (else the session's, if
        that cannot be stored) with what can still be stored, or in memory only. Under the
        session's lock, shielded."""
        log.error("session %s: events not stored: %s", session.id, error)
        if track.state.run is None:
            return  # a run that was to start did not: nothing to end
        why = f"the run's events could not be stored, so it was ended: {error}"
        for ending in dict.fromkeys((track, session)):
            if ending.state.run is None:
                continue
            transition = step(ending.state, RunFailed(why, time.time()))
            try:
                stored = await self.store.append(_on_track(ending, transition.events))
            except StoreError:
                continue
            self._advance(session, ending, transition, stored)
            return
        log.error("session %s: its run ended in memory only, and in the log once there is room", session.id)
        first = session.id not in self.sessions.unsettled
        run = session.state.run.id if session.state.run is not None else None
        self.sessions.forget(session, why)
        if first:
            note = Event("error", session.id, run, time.time(), {"message": why, "stored": False})
            self.fanout.publish(note.to_map())
            self._nursery.start_soon(self._settle_later, session.id)

    async def _settle(self, session: Session, why: str) -> None:
        """Store the end of a run that ended in memory only (see :meth:`_unstored`)."""
        await self.feed(session, RunFailed(why, time.time()))

    async def _settle_later(self, session_id: str) -> None:
        """Try to store a forgotten run's end now and then, until it is (or the daemon stops)."""
        while session_id in self.sessions.unsettled:
            await trio.sleep(SETTLE_RETRY)
            try:
                await self.sessions.get(session_id)
            except StoreError:
                continue

    def _perform(self, session: Session, track: Session | Subrun, effects: tuple[Effect, ...]) -> None:
        nursery = track.run_nursery
        tasks: dict[type[Effect], Callable[[Session, Session | Subrun, Any], Awaitable[None]]] = {
            CallModel: self._call_model,
            Summarize: self._summarize,
            RunTool: self._run_tool,
            StartSubagent: self._subagent,
            RunCheck: self._run_check,
            StartClock: self._clock,
            RunStopHooks: self._stop_hooks,
        }
        for effect in effects:
            task = tasks.get(type(effect))
            if task is not None:
                assert nursery is not None
                if isinstance(effect, CallModel):
                    track.streamed = []
                nursery.start_soon(task, session, track, effect)
            elif isinstance(effect, CancelRun):
                if nursery is not None:
                    nursery.cancel_scope.cancel()
            elif isinstance(effect, FinishRun):
                # Nothing of the run is left to do: clocks still ticking must not keep its
                # nursery open.
                if nursery is not None:
                    nursery.cancel_scope.cancel()
                log.info("session %s: run %s finished: %s", session.id, effect.run, effect.reason)

    async def _run(self, session: Session, first: Submit | Compact | Interrupted, *, task_status: Any) -> None:
        session.run_done = done = trio.Event()
        session.tool_limiter = trio.CapacityLimiter(TOOL_CONCURRENCY)
        unstored: StoreError | None = None
        nursery: trio.Nursery | None = None
        try:
            with self._holding(session.mcp_servers):
                async with self._sandboxed(session, session), trio.open_nursery() as nursery:
                    session.run_nursery = nursery
                    try:
                        await self.feed(session, first)
                    except StoreError as exc:
                        unstored = exc  # the run never started, or was ended at once
                        nursery.cancel_scope.cancel()
                    else:
                        task_status.started()
                        # The run lasts until FinishRun cancels this scope, even while
                        # nothing runs in it (a call waiting for a person).
                        await trio.sleep_forever()
        finally:
            # Unless the session's next run has begun meanwhile (once this one's end was
            # stored, while its tasks and its sandbox ended).
            if session.run_nursery is nursery:
                session.run_nursery = None
            done.set()
        if unstored is not None:
            raise unstored
        self.sessions.keep_snapshot(session)

    @asynccontextmanager
    async def _sandboxed(
        self, session: Session, track: Session | Subrun, caller: Session | Subrun | None = None
    ) -> AsyncIterator[None]:
        """The sandbox of ``track``'s run, kept on it while the run lasts: its caller's, when
        that one holds it (a sub-agent with the same policy), else its own, built at its
        first command and ended with the run."""
        shared = caller.run_sandbox if caller is not None else None
        confined: Confinement | None = track.sandbox
        if confined is None or (shared is not None and shared.fits(confined)):
            track.run_sandbox = box = shared if confined is not None else None
            try:
                yield
            finally:
                if track.run_sandbox is box:
                    track.run_sandbox = None
            return
        failed = partial(self._sandbox_failed, session, track)
        async with RunSandbox(confined, session.state.cwd, ledger=self.ledger, on_failure=failed) as box:
            track.run_sandbox = box
            try:
                yield
            finally:
                # Unless the session's next run has begun meanwhile (see _run).
                if track.run_sandbox is box:
                    track.run_sandbox = None

    async def _sandbox_failed(self, session: Session, track: Session | Subrun, why: str) -> None:
        """``track``'s run cannot have its sandbox: it ends ``error``, saying why, before the
        command that needed it reports (its commands never run unsandboxed instead)."""
        run = track.state.run
        if run is not None:
            await self._feed_result(session, track, run.id, RunFailed(why, time.time()))

    async def _call_model(self, session: Session, track: Session | Subrun, effect: CallModel) -> None:
        started = time.monotonic()
        path = {"path": list(track.path)} if track.path else {}

        def on_delta(kind: str, text: str) -> None:
            if kind == "text":
                track.streamed.append(text)
            type = TEXT_DELTA if kind == "text" else REASONING_DELTA
            data = {"text": safe_text(text), **path}
            self.fanout.publish(Event(type, session.id, effect.run, time.time(), data).to_map())

        reply = await self._stream(
            session,
            track,
            effect.model,
            on_delta,
            # The summary changes within a run: it is the last layer, after the cached prefix.
            system="\n\n".join(p for p in (track.system, summary_text(effect.summary)) if p),
            messages=effect.messages,
            tools=tuple(self._tool_specs(effect.tools, track)),
            think=track.think,
            **({"max_tokens": track.settings.max_tokens} if track.settings is not None else {}),
            number=sum(1 for m in track.state.messages if m["role"] == "assistant"),
        )
        if isinstance(reply, ModelFailed):
            result: Input = reply
        else:
            latency = time.monotonic() - started
            resolved: Mapping[str, str] = {}
            diffs: Mapping[str, str] = {}
            if _names_paths(reply.content):
                # A person may be asked about a change: show them what it would change.
                run = track.state.run
                asks = run is not None and run.mode == "agent" and not run.policy.yes
                resolved, diffs = await trio.to_thread.run_sync(
                    _look, track.state.cwd, reply.content, asks, limiter=self._look_threads
                )
            result = ModelFinished(
                reply.content,
                reply.stop_reason,
                time.time(),
                reply.usage,
                latency,
                resolved,
                diffs,
                ttft=reply.first_token,
                retries=reply.retries,
            )
        await self._feed_result(session, track, effect.run, result)

    async def _summarize(self, session: Session, track: Session | Subrun, effect: Summarize) -> None:
        messages = [dict(m) for m in effect.messages]
        ask = {"type": "text", "text": SUMMARIZE_REQUEST}
        messages[-1] = {**messages[-1], "content": [*messages[-1]["content"], ask]}
        previous = f"\n\nThe summary of what came before these messages:\n{effect.previous}" if effect.previous else ""
        reply = await self._stream(
            session,
            track,
            effect.model,
            lambda kind, text: None,
            system=SUMMARIZER + previous,
            messages=tuple(messages),
            purpose="summary",
            number=track.state.compactions,
        )
        if isinstance(reply, ModelFailed):
            result: Input = reply
        else:
            text = "".join(b.get("text", "") for b in reply.content if b.get("type") == "text")
            result = Summarized(text, time.time(), reply.usage)
        await self._feed_result(session, track, effect.run, result)

    async def _stream(
        self, session: Session, track: Session | Subrun, model: str, on_delta: Any, **request: Any
    ) -> ModelReply | ModelFailed:
        """One call of the track's resolved model; every failure comes back as ModelFailed."""
        try:
            resolved = track.model
            if resolved is None or resolved.model_id != model:
                raise ProviderError(f"{model}: no provider resolved for this run")
            call = ModelRequest(model=resolved.model, cwd=track.state.cwd, **request)
            return await resolved.provider.stream(call, on_delta)
        except ProviderError as exc:
            return ModelFailed(exc.message, time.time())
        except Exception as exc:
            log.exception("session %s: model call failed", session.id)
            return ModelFailed(f"internal error in the model call: {type(exc).__name__}: {exc}", time.time())

    async def _subagent(self, session: Session, parent: Session | Subrun, effect: StartSubagent) -> None:
        """Run a sub-agent to its end; its final text is the parent's tool result."""
        started = time.monotonic()
        path = (*parent.path, effect.call_id)
        try:
            child, submit = await self._make_subrun(session, parent, effect, path)
        except _SubagentError as exc:
            failed = ToolFinished(effect.call_id, str(exc), time.time(), True)
            await self._feed_result(session, parent, effect.run, failed)
            return
        await self._drive(session, parent, child, submit, effect.run, started)

    async def _drive(
        self,
        session: Session,
        parent: Session | Subrun,
        child: Subrun,
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
                with self._holding(child.mcp_servers):
                    async with self._sandboxed(session, child, parent), trio.open_nursery() as nursery:
                        child.run_nursery = nursery
                        try:
                            await self.feed(session, first, child)
                        except StoreError:
                            nursery.cancel_scope.cancel()  # it never started (feed said why)
                            task_status.started()
                        else:
                            task_status.started()
                            # Until its run.finished cancels this scope (FinishRun).
                            await trio.sleep_forever()
        finally:
            child.run_nursery = None
            session.subruns.pop(path, None)
        end = child.finished or {"reason": "error", "error": "the sub-agent ended without finishing"}
        reason, text = end["reason"], str(end.get("text") or "")
        if reason != "done":
            text = f"the {child.agent} agent ended {reason}: {end.get('error') or text or 'no answer'}"
        meta = {"agent": child.agent, "reason": reason, "turns": end.get("turns", 0), "usage": end.get("usage", {})}
        result = ToolFinished(call_id, text, time.time(), reason != "done", time.monotonic() - started, meta)
        await self._feed_result(session, parent, run, result)

    async def _make_subrun(
        self, session: Session, parent: Session | Subrun, effect: StartSubagent, path: tuple[str, ...]
    ) -> tuple[Subrun, Submit]:
        if len(path) > SUBAGENT_DEPTH:
            raise _SubagentError(f"sub-agents nest at most {SUBAGENT_DEPTH} deep; do this part yourself")
        cwd, setup, caller = session.state.cwd, session.setup, parent.settings
        if setup is None or caller is None:
            raise _SubagentError(f"the {effect.name} agent cannot run: the session's folder was not read")
        try:
            settings = settle(
                setup,
                Asked(agent=effect.name),
                resolve=lambda model: self.providers.resolve(model or setup.config.default_model, setup.config, session.client_env),
                caller=caller,
            )
        except (SettingsError, ProviderError) as exc:
            raise _SubagentError(f"the {effect.name} agent cannot run: {exc}") from None
        agent = settings.agent
        tools, specs, servers, team = await self._tools_of(agent, setup)
        layers = await compose(agent, settings.mode, setup.place, tools=tools, cache=self.prompts)
        state = SessionState(session.id, cwd=cwd, created=time.time())
        if agent.fork:
            # The caller's history up to the reply that made this call.
            state = replace(state, messages=parent.state.messages[:-1])
        child = Subrun(path, state, agent.name, agent_specs=specs, mcp_servers=servers)
        # A sub-agent's sandbox is its caller's, or narrower if its agent says so; inside a
        # sandboxed caller it is sandboxed too, or its commands fail.
        confined = None
        if parent.state.run and parent.state.run.sandbox is not None:
            confined = self.sandbox.confine(settings.sandbox)
        if confined is None and settings.policy.sandboxed:
            settings = replace(settings, policy=replace(settings.policy, sandboxed=False))
        self._set_up(child, settings, confined, render(layers))
        submit = self._submit(
            settings,
            run="r" + secrets.token_hex(6),
            task=effect.message,
            tools=tools,
            specs=specs,
            servers=servers,
            layers=layers,
            describe_sandbox=confined is not None,
            delegates=team,
        )
        return child, submit

    async def _run_check(self, session: Session, track: Session | Subrun, effect: RunCheck) -> None:
        started = time.monotonic()
        ctx = ToolContext(
            cwd=session.state.cwd, ledger=self.ledger, timeout=CHECK_TIMEOUT, env=session.environ, sandbox=track.run_sandbox
        )
        result = await self.tools.call("bash", {"command": effect.command}, ctx)
        status = result.meta.get("exit_status")
        tail = result.text[-CHECK_OUTPUT:]
        await self._feed_result(
            session,
            track,
            effect.run,
            CheckFinished(
                status if isinstance(status, int) else 1, tail, time.time(), time.monotonic() - started
            ),
        )

    async def _stop_hooks(self, session: Session, track: Session | Subrun, effect: RunStopHooks) -> None:
        run = track.state.run
        where = self._hook_env(session, run.mode if run is not None else "agent", track.run_sandbox)
        outcome = await run_stop_hooks(session.hooks, effect.active, effect.text, where)
        if outcome.failures:
            log.warning("session %s: %s", session.id, "; ".join(outcome.failures))
        answer = StopHooksFinished(time.time(), outcome.reason, outcome.failures)
        await self._feed_result(session, track, effect.run, answer)

    async def _clock(self, session: Session, track: Session | Subrun, effect: StartClock) -> None:
        await trio.sleep(max(0.0, effect.deadline - time.time()))
        if effect.call_id is None:
            await self._feed_result(session, track, effect.run, TimeUp(time.time()))
            return
        run = track.state.run
        if run is not None and effect.call_id in run.waiting:
            waited = effect.deadline - run.waiting[effect.call_id].get("ts", effect.deadline)
            reason = f"no answer within {waited:g} s (the approval timeout)"
            answer = PermissionDecided(effect.call_id, False, time.time(), reason=reason, client="timeout")
            await self._feed_result(session, track, effect.run, answer)

    async def _run_tool(self, session: Session, track: Session | Subrun, effect: RunTool) -> None:
        assert session.tool_limiter is not None, "set when the run started"
        cwd = session.state.cwd
        call = {
            "session": session.id,
            "run": effect.run,
            "call_id": effect.call_id,
            "tool": effect.name,
            "input": dict(effect.input),
            "cwd": cwd,
            **({"path": list(track.path)} if track.path else {}),
        }
        run = track.state.run
        where = self._hook_env(session, run.mode if run is not None else "agent", track.run_sandbox)
        async with _Held(session.tool_limiter):
            started = time.monotonic()
            pre = await run_pre_hooks(session.hooks, call, where)
            if pre.blocked is not None:
                result = ToolResult(f"blocked by a hook: {pre.blocked}", True, {"blocked": True})
            else:
                input = pre.input if pre.input is not None else effect.input
                if self.tools.get(effect.name) is None and self.mcp is not None and "__" in effect.name:
                    result = await self.mcp.call(
                        effect.name,
                        input,
                        servers=track.mcp_servers,
                        on_progress=self._progress(session, track, effect),
                    )
                else:
                    ctx = ToolContext(
                        cwd=cwd,
                        ledger=self.ledger,
                        outside_ok=effect.outside,
                        env=session.environ,
                        trusted_folder=session.setup is not None and session.setup.trusted,
                        read_permission=_read_permission(track.state),
                        sandbox=track.run_sandbox,
                        private_network=session.setup is not None and session.setup.config.fetch_private,
                    )
                    result = await self.tools.call(effect.name, input, ctx)
                if pre.input is not None:
                    result = ToolResult(result.text, result.is_error, {**result.meta, "input_rewritten": True})
            post = await run_post_hooks(session.hooks, call, result, where)
            result = post.result
        meta = {k: v for k, v in result.meta.items() if k != "latency"}
        failures = pre.failures + post.failures
        if failures:
            log.warning("session %s: %s", session.id, "; ".join(failures))
            meta["hook_failures"] = list(failures)
        await self._feed_result(
            session,
            track,
            effect.run,
            ToolFinished(
                effect.call_id,
                result.text,
                time.time(),
                result.is_error,
                float(result.meta.get("latency", time.monotonic() - started)),
                meta,
            ),
        )
        stop = pre.stop or post.stop
        if stop is not None and track.state.run is not None and track.state.run.id == effect.run:
            # A hook said the run must not go on ("continue": false).
            await self._feed_result(session, track, effect.run, _abort(track, f"a hook stopped the run: {stop}"))

    async def _feed_result(self, session: Session, track: Session | Subrun, run: str, result: Input) -> None:
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
            await self.feed(session, _abort(track, "internal error in the daemon; see its log"), track)

    def _progress(self, session: Session, track: Session | Subrun, effect: RunTool) -> Any:
        path = {"path": list(track.path)} if track.path else {}

        def on_progress(progress: dict[str, Any]) -> None:
            data = {"call_id": effect.call_id, **progress, **path}
            self.fanout.publish(Event(TOOL_PROGRESS, session.id, effect.run, time.time(), safe_text(data)).to_map())

        return on_progress

    def _tool_specs(self, names: tuple[str, ...], track: Session | Subrun) -> list[ToolSpec]:
        # MCP tools are looked up at each call (a server's tool list may change), on the
        # track's own servers.
        mcp = {t.name: t for t in self.mcp.tools(track.mcp_servers, names)} if self.mcp is not None else {}
        specs = []
        for name in names:
            tool = self.tools.get(name)
            if tool is not None:
                specs.append(ToolSpec(tool.name, tool.description, tool.input_schema))
            elif name in track.agent_specs:
                specs.append(track.agent_specs[name])
            elif name in mcp:
                specs.append(ToolSpec(name, mcp[name].description, mcp[name].input_schema))
        return specs


def _depth(session: str, parents: Mapping[str, str | None]) -> int:
    """How many forks deep ``session`` is (0: not a fork)."""
    depth = 0
    while (session := parents.get(session) or "") and depth < len(parents):
        depth += 1
    return depth


def _on_track(track: Session | Subrun, events: tuple[Event, ...]) -> tuple[Event, ...]:
    """A sub-agent's events carry its path."""
    if not track.path:
        return events
    return tuple(replace(e, data={**e.data, "path": list(track.path)}) for e in events)


def _calls(content: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [
        block
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "tool_use" and isinstance(block.get("input"), Mapping)
    ]


def _names_paths(content: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a reply's calls name paths (most replies don't: no thread hop for them)."""
    return any(paths_named(str(call.get("name", "")), call["input"]) for call in _calls(content))


def _look(cwd: str, content: Iterable[Mapping[str, Any]], diffs: bool) -> tuple[dict[str, str], dict[str, str]]:
    """Where the paths that a reply's calls name really lead (with the working directory and
    the home folder), for ``step`` to decide on; and, with ``diffs``, what each edit or write
    would change. Blocking: a few lstat calls, and reads of the files edited."""
    calls = _calls(content)
    named = {path for call in calls for path in paths_named(str(call.get("name", "")), call["input"])}
    resolved = {}
    for path in (*named, cwd, os.path.expanduser("~")):
        try:
            resolved[path] = real_path(cwd, path)
        except (OSError, ValueError):
            continue  # an impossible path (a NUL in it): decided as named, refused by the tool
    changes = {}
    if diffs:
        for call in calls:
            diff = change_preview(cwd, str(call.get("name", "")), call["input"])
            if diff:
                changes[str(call.get("id"))] = diff
    return resolved, changes


def _read_permission(state: SessionState) -> Any:
    """What the run's policy says to a read of a real path, for the tools that walk folders
    (called from worker threads; the state is an immutable snapshot)."""
    run = state.run
    if run is None:
        return None
    roots: dict[str, str] = {}

    def permission(path: str) -> str:
        if not roots:
            home = os.path.expanduser("~")
            roots.update({state.cwd: os.path.realpath(state.cwd), home: os.path.realpath(home)})
        return decide(run.policy, run.mode, state.allowed, "read", {"path": path}, state.cwd, roots).action

    return permission


def _servers_of(servers: Mapping[str, McpServerConfig], tools: Iterable[str]) -> dict[str, McpServerConfig]:
    """The servers that ``tools`` (``server__tool`` names or ``server__*`` globs) are on."""
    wanted = {t.split("__", 1)[0] for t in tools if "__" in t}
    return {name: config for name, config in servers.items() if name in wanted}


def _children(path: tuple[str, ...], subruns: Mapping[tuple[str, ...], Any]) -> tuple[str, ...]:
    """The calls of the track at ``path`` whose sub-agents are resumed."""
    return tuple(p[-1] for p in subruns if len(p) == len(path) + 1 and p[: len(path)] == path)


def _history_before(messages: tuple[Mapping[str, Any], ...], call_id: str) -> tuple[Mapping[str, Any], ...]:
    """``messages`` up to the assistant reply that made the call ``call_id``."""
    for i, message in enumerate(messages):
        if message["role"] == "assistant" and any(b.get("id") == call_id for b in message["content"]):
            return messages[:i]
    return messages


def _mcp_selected(name: str, allowed: tuple[str, ...]) -> bool:
    """Whether an agent's tool list (``time__*``, ``everything__echo``) covers an MCP tool."""
    return "__" in name and any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed)


class PromptBlocked(Exception):
    """A UserPromptSubmit hook refused a task or steering; the message is its reason."""


class _SubagentError(Exception):
    """A sub-agent that cannot start; the message is the calling model's error result."""


@asynccontextmanager
async def _no_limit() -> AsyncIterator[None]:
    yield


class _Held:
    """``async with _Held(lock)``: a trio lock or capacity limiter held for the block. A
    free one is taken at once, without the scheduler pass of trio's own ``async with``: a
    step takes the session's lock twice and its tool limiter once, and under load every
    pass is a wait behind every other run's work."""

    __slots__ = ("_lock",)

    def __init__(self, lock: trio.Lock | trio.CapacityLimiter) -> None:
        self._lock = lock

    async def __aenter__(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()  # as trio's: a cancelled task stops here
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


def _abort(track: Session | Subrun, reason: str) -> Abort:
    partial = "".join(track.streamed)
    return Abort(time.time(), reason, ({"type": "text", "text": partial},) if partial else ())


def _check_command(cwd: str) -> str | None:
    """The project's check, run after each exec attempt: ``check.sh`` in the session's folder."""
    return "bash ./check.sh" if os.path.isfile(os.path.join(cwd, "check.sh")) else None
