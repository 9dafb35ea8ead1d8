"""The conductor's tool calls: a run's tools (built-in and MCP) with their hooks, exec mode's
check, the Stop hooks, and clocks.

A file tool's result carries Claude Code's path-scoped rules about the file it touched
(``folder/_claude_rules``), each once a run, as Claude Code adds them when it reads a
matching file.

Each comes back as one input for the loop. Tool calls of a session run at most
``TOOL_CONCURRENCY`` at once (its sub-agents' with them); a project's hooks and every command
run in the track's sandbox.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import nullcontext
from dataclasses import replace
from typing import Any, Awaitable, Callable, Mapping, Sequence

import trio

from roost.loop import (
    ASK_HUMAN,
    TOOL_PROGRESS,
    Abort,
    CheckFinished,
    Event,
    HookVerdict,
    Mode,
    RunCheck,
    RunStopHooks,
    RunTool,
    SessionState,
    StartClock,
    Steer,
    StopHooksFinished,
    Submit,
    TimeUp,
    ToolFinished,
    decide,
    safe_text,
)

from ..folder import _claude as claude
from ..folder._claude_rules import ClaudeRules
from ..folder._config import Hook
from ..mcp import McpManager
from ..memory import MemoryIndex
from ..sandbox import Confinement, RunSandbox
from ..tools import ProcessLedger, ToolContext, ToolRegistry, ToolResult
from ..tools._media import Media
from ._command_lines import run_lines
from ._hook_events import Subagent, event_hooks, run_event_hooks, run_prompt_hooks, run_start_hooks, run_stop_hooks
from ._hooks import HookEnv, run_detached, run_post_hooks, run_pre_hooks
from ._live import LiveRun
from ._model_calls import FeedResult
from ._plan import RunPlan
from ._sessions import Held, Session, Track
from ._transcript import Transcripts

log = logging.getLogger(__name__)

#: exec mode: how long one check may run, and how much of its output the model sees.
CHECK_TIMEOUT = 600.0
CHECK_OUTPUT = 4000


#: Stores media for a session (once by content); the parts naming them (``_media.stored_parts``).
StoreMedia = Callable[[str, Sequence[Media]], Awaitable[tuple[dict[str, Any], ...]]]


class ToolCalls:
    """Performs RunTool, RunCheck, RunStopHooks and StartClock."""

    def __init__(
        self,
        tools: ToolRegistry,
        mcp: McpManager | None,
        ledger: ProcessLedger | None,
        publish: Callable[[dict[str, Any]], None],
        feed_result: FeedResult,
        transcripts: Transcripts,
        nursery: trio.Nursery,
        store_media: StoreMedia,
        memory: MemoryIndex | None = None,
    ) -> None:
        self.tools, self._mcp, self._ledger, self._transcripts = tools, mcp, ledger, transcripts
        self._publish, self._feed_result = publish, feed_result
        #: Stores a result's media for a session; the parts that name them.
        self._store_media = store_media
        #: What ``recall`` searches (None: nothing).
        self._memory = memory
        #: Where ``async`` hooks run: the daemon's, as they may outlast their run.
        self._nursery = nursery

    def hook_env(self, session: Session, track: Track) -> HookEnv:
        """Where the session's hooks run for ``track`` (a project's in its run's sandbox),
        and what they are told of it."""
        run = track.state.run
        mode = run.settings.mode if run is not None else "agent"
        return self._where(session, track.plan, mode, track.live.sandbox if track.live is not None else None)

    def _where(self, session: Session, plan: RunPlan | None, mode: str, sandbox: RunSandbox | None) -> HookEnv:
        cwd = session.state.cwd
        root = plan.setup.root if plan is not None and plan.setup is not None else cwd
        environ = plan.tool_environ if plan is not None else None
        transcript = self._transcripts.path(session.id)
        confinement = plan.confinement if plan is not None else None

        def detach(hook: Hook, payload: Mapping[str, Any], where: HookEnv) -> None:
            self._nursery.start_soon(self._detached, session, hook, payload, where, confinement)

        return HookEnv(session.id, cwd, root, mode, environ, self._ledger, sandbox, transcript, detach)

    async def _detached(
        self, session: Session, hook: Hook, payload: Mapping[str, Any], where: HookEnv, confinement: Confinement | None
    ) -> None:
        """An ``async`` hook; what it says for the model comes on the next turn, as Claude Code
        has it: the next model call of the run in flight (as steering), else the next task's."""
        said = await run_detached(hook, payload, where, confinement)
        if said and (run := session.state.run) is not None:
            await self._feed_result(session, session.track, run.id, Steer(said, time.time()))
        elif said:
            session.later.append(said)

    async def _current(self, session: Session, hooks: tuple[Hook, ...]) -> None:
        """Before Claude Code hooks run: their transcript holds every event stored so far."""
        if any(hook.event is not None for hook in hooks):
            await self._transcripts.sync(session.id)

    async def task_hooks(self, session: Session, plan: RunPlan, first: Submit) -> Submit:
        """A dispatch's ``first`` input made ready in a sandbox of the run's: its command's
        ``!`command``` lines run and their output in its task (see ``_command_lines``), then
        the SessionStart hooks and :meth:`prompt_hooks` on the task as typed, what they add
        and which failed in it; the images it carries stored for the session, its parts.
        A project's hooks run in that sandbox.

        Raises:
            PromptBlocked: a UserPromptSubmit hook refused the task.
        """
        confined = plan.confinement
        # A sandbox shows the session's transcript only if the file is there when it is
        # built (at its first command): made now when a hook or a line may run in this one
        # or in the run's, which hooks read it in. Without hooks or lines, a dispatch does
        # not wait for every session's pending transcript lines to be written.
        shown = (await self._transcripts.sync(session.id),) if confined and (plan.lines or plan.hooks) else ()
        async with RunSandbox(confined, session.state.cwd, ledger=self._ledger, shown=shown) if confined else nullcontext() as box:
            task = first.task
            if plan.lines:
                task = await run_lines(self.tools, task, plan.lines, session.state.cwd, box, plan.tool_environ, self._ledger)
            state = session.state
            source = "startup" if state.last_run is None else "compact" if state.last_mode == "compact" else "resume"
            where = self._where(session, plan, plan.settings.mode, box)
            start = await run_start_hooks(plan.hooks, source, plan.settings.model, where)
            if start.failures:
                log.warning("session %s: %s", session.id, "; ".join(start.failures))
            typed = first.command["typed"] if first.command is not None else first.task
            context, failures = await self.prompt_hooks(session, plan, typed, box)
            # What async hooks said since the session's last run comes with its next task.
            later, session.later = tuple(session.later), []
            parts = await self._store_media(session.id, plan.media) if plan.media else ()
            return replace(first, task=task, context=start.context + later + context, hook_failures=start.failures + failures, parts=parts)

    async def prompt_hooks(
        self, session: Session, plan: RunPlan, text: str, sandbox: RunSandbox | None
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What the UserPromptSubmit hooks add to a task or steering (``text``), and which of
        them failed; a project's run in ``sandbox``.

        Raises:
            PromptBlocked: a hook refused the text.
        """
        where = self._where(session, plan, plan.settings.mode, sandbox)
        await self._current(session, plan.hooks)
        prompt = await run_prompt_hooks(plan.hooks, text, where)
        if prompt.failures:
            log.warning("session %s: %s", session.id, "; ".join(prompt.failures))
        if prompt.blocked is not None:
            raise PromptBlocked(prompt.blocked)
        return tuple(prompt.context), tuple(prompt.failures)

    async def pre_hooks(
        self, session: Session, track: Track, content: tuple[Mapping[str, Any], ...]
    ) -> tuple[dict[str, HookVerdict], str | None]:
        """The PreToolUse hooks of a reply's tool calls, before the loop decides them: what
        they said of each (by call id), and why the run must stop, if one said so
        (``continue: false``). Their transcript holds what was stored before the reply."""
        plan, live, run = track.plan, track.live, track.state.run
        if plan is None or live is None or run is None or run.settings.mode == Mode.PLAN:
            return {}, None
        settings = run.settings
        calls = [
            block for block in content
            if block.get("type") == "tool_use" and isinstance(block.get("input"), Mapping) and isinstance(block.get("id"), str)
            and block.get("name") in settings.tools and block["name"] != ASK_HUMAN and block["name"] not in settings.subagents
        ]
        if not calls or not any(hook.kind == "pre_tool" for hook in plan.hooks):
            return {}, None
        await self._current(session, plan.hooks)
        where = self.hook_env(session, track)
        verdicts: dict[str, HookVerdict] = {}
        stop = None
        for block in calls:
            call_id = str(block["id"])
            pre = await run_pre_hooks(plan.hooks, self._call(session, track, run.id, call_id, block["name"], block["input"]), where)
            if pre.failures:
                log.warning("session %s: %s", session.id, "; ".join(pre.failures))
            live.prepared[call_id] = (pre.failures, pre.input is not None)
            stop = stop or pre.stop
            if pre.blocked is not None:
                verdicts[call_id] = HookVerdict("deny", pre.blocked)
            elif pre.decision is not None or pre.input is not None:
                verdicts[call_id] = HookVerdict(pre.decision, pre.reason, pre.input)
        return verdicts, stop

    def _call(self, session: Session, track: Track, run: str, call_id: str, name: str, input: Mapping[str, Any]) -> dict[str, Any]:
        """A tool call as hooks in roost's format are given it."""
        return {
            "session": session.id,
            "run": run,
            "call_id": call_id,
            "tool": name,
            "input": dict(input),
            "cwd": session.state.cwd,
            **({"path": list(track.path)} if track.path else {}),
        }

    async def run_tool(self, session: Session, track: Track, effect: RunTool) -> None:
        """One tool call (its PreToolUse hooks ran before it was decided: see
        :meth:`pre_hooks`), then its PostToolUse hooks."""
        live, plan = track.live, track.plan
        assert live is not None and plan is not None, "a tool runs in a run"
        cwd = session.state.cwd
        call = self._call(session, track, effect.run, effect.call_id, effect.name, effect.input)
        where = self.hook_env(session, track)
        hooks = plan.hooks
        failures, rewritten = live.prepared.pop(effect.call_id, ((), False))
        async with Held(live.tool_limiter):
            started = time.monotonic()
            if self.tools.get(effect.name) is None and self._mcp is not None and "__" in effect.name:
                result = await self._mcp.call(
                    effect.name,
                    effect.input,
                    servers=plan.mcp_servers,
                    on_progress=self._progress(session, track, effect),
                )
            else:
                ctx = _tool_context(cwd, track, plan, live, self._ledger, effect.outside, self._memory)
                result = await self.tools.call(effect.name, effect.input, ctx)
            if rewritten:
                result = replace(result, meta={**result.meta, "input_rewritten": True})
            await self._current(session, hooks)
            post = await run_post_hooks(hooks, call, result, where)
            result = post.result
        if plan.setup is not None and not result.is_error:
            result = with_rules(result, effect.name, effect.input, cwd, plan.setup.rules, live.rules_given)
        meta = {k: v for k, v in result.meta.items() if k != "latency"}
        if post.failures:
            log.warning("session %s: %s", session.id, "; ".join(post.failures))
        if failures + post.failures:
            meta["hook_failures"] = list(failures + post.failures)
        if post.stop is not None:
            # A hook said the run must not go on ("continue": false): told before the
            # result, the run ends once this step's calls are answered, before any other
            # model call starts.
            ending = Abort(time.time(), f"a hook stopped the run: {post.stop}", after_step=True)
            await self._feed_result(session, track, effect.run, ending)
        parts = await self._store_media(session.id, result.parts) if result.parts else ()
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
                parts,
            ),
        )

    def notify(self, session: Session, track: Track, events: list[Event]) -> None:
        """Claude Code's Notification hooks, for the stored ``events`` that wait for a person:
        ``permission_prompt`` when a call asks, ``idle_prompt`` when the model asks a
        question. They cannot block: they run off the run's way, as ``async`` hooks do."""
        plan = track.plan
        if plan is None or not any(hook.kind == "notification" for hook in plan.hooks):
            return
        for event in events:
            if event.type == "permission.requested":
                kind, message = "permission_prompt", f"roost needs your permission to use {claude.tool_name(str(event.data.get('tool')))}"
            elif event.type == "human.asked":
                kind, message = "idle_prompt", str(event.data.get("question", ""))
            else:
                continue
            hooks = event_hooks(plan.hooks, "notification", kind)
            if hooks:
                where = self.hook_env(session, track)
                self._nursery.start_soon(self._notified, session, plan, hooks, where, kind, message)

    async def _notified(
        self, session: Session, plan: RunPlan, hooks: list[Hook], where: HookEnv, kind: str, message: str
    ) -> None:
        await self._current(session, plan.hooks)
        for hook in hooks:
            payload = where.claude_payload("Notification", message=message, notification_type=kind)
            await run_detached(hook, payload, where, plan.confinement)

    async def compact_hooks(self, session: Session, track: Track, instructions: str = "") -> None:
        """Claude Code's PreCompact hooks, before a compaction's summary: ``manual`` for
        ``roost compact`` (told its ``instructions``), ``auto`` when the context grew too
        long. A project's run in the run's sandbox; they cannot stop the compaction."""
        plan, run = track.plan, track.state.run
        if plan is None or run is None or not any(hook.kind == "pre_compact" for hook in plan.hooks):
            return
        trigger = "manual" if run.settings.mode == "compact" else "auto"
        await self._current(session, plan.hooks)
        where = self.hook_env(session, track)
        failures = await run_event_hooks(plan.hooks, "pre_compact", trigger, where, trigger=trigger, custom_instructions=instructions)
        if failures:
            log.warning("session %s: %s", session.id, "; ".join(failures))

    async def run_check(self, session: Session, track: Track, effect: RunCheck) -> None:
        """exec mode's check command, after an attempt."""
        started = time.monotonic()
        plan, live = track.plan, track.live
        ctx = ToolContext(
            cwd=session.state.cwd,
            ledger=self._ledger,
            timeout=CHECK_TIMEOUT,
            env=plan.tool_environ if plan is not None else None,
            sandbox=live.sandbox if live is not None else None,
        )
        result = await self.tools.call("bash", {"command": effect.command}, ctx)
        status = result.meta.get("exit_status")
        tail = result.text[-CHECK_OUTPUT:]
        finished = CheckFinished(status if isinstance(status, int) else 1, tail, time.time(), time.monotonic() - started)
        await self._feed_result(session, track, effect.run, finished)

    async def stop_hooks(self, session: Session, track: Track, effect: RunStopHooks) -> None:
        """The Stop hooks, once the model has ended its turn."""
        hooks = track.plan.hooks if track.plan is not None else ()
        await self._current(session, hooks)
        run = track.state.run
        subagent = None
        if track.path and run is not None:
            call = track.path[-1]
            subagent = Subagent(call, run.settings.agent, self._transcripts.path(session.id, call))
        outcome = await run_stop_hooks(hooks, effect.active, effect.text, self.hook_env(session, track), subagent)
        if outcome.failures:
            log.warning("session %s: %s", session.id, "; ".join(outcome.failures))
        answer = StopHooksFinished(time.time(), outcome.reason, outcome.failures)
        await self._feed_result(session, track, effect.run, answer)

    async def clock(self, session: Session, track: Track, effect: StartClock) -> None:
        """A deadline: exec mode's time box, or an approval's timeout."""
        await trio.sleep(max(0.0, effect.deadline - time.time()))
        await self._feed_result(session, track, effect.run, TimeUp(time.time(), effect.call_id))

    def _progress(self, session: Session, track: Track, effect: RunTool) -> Callable[[dict[str, Any]], None]:
        path = {"path": list(track.path)} if track.path else {}

        def on_progress(progress: dict[str, Any]) -> None:
            data = {"call_id": effect.call_id, **progress, **path}
            self._publish(Event(TOOL_PROGRESS, session.id, effect.run, time.time(), safe_text(data)).to_map())

        return on_progress


class PromptBlocked(Exception):
    """A UserPromptSubmit hook refused a task or steering; the message is its reason."""


#: The tools whose file brings the path-scoped rules about it (Claude Code: reading it).
RULE_TOOLS = ("read", "write", "edit", "notebook_read", "notebook_edit")


def with_rules(
    result: ToolResult, tool: str, input: Mapping[str, Any], cwd: str, rules: ClaudeRules, given: set[str]
) -> ToolResult:
    """``result`` followed by the path-scoped rules about the file a file tool touched that
    ``given`` (the rules the run was given so far, updated) does not hold yet."""
    path = input.get("path") if tool in RULE_TOOLS and rules.scoped else None
    if not isinstance(path, str):
        return result
    touched = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
    new = [rule for rule in rules.for_file(touched) if rule.source not in given]
    if not new:
        return result
    given.update(rule.source for rule in new)
    notes = "\n\n".join(
        f"<system-reminder>\nInstructions from {rule.source} (for files matching {', '.join(rule.paths)}):\n"
        f"{rule.text}\n</system-reminder>"
        for rule in new
    )
    return replace(result, text=f"{result.text}\n\n{notes}", meta={**result.meta, "rules": [r.source for r in new]})


def abort_of(track: Track, reason: str) -> Abort:
    """An Abort of the track's run that keeps what its model call in flight streamed."""
    partial = track.streamed()
    return Abort(time.time(), reason, ({"type": "text", "text": partial},) if partial else ())


def _tool_context(
    cwd: str, track: Track, plan: RunPlan, live: LiveRun, ledger: ProcessLedger | None, outside: bool,
    memory: MemoryIndex | None,
) -> ToolContext:
    """Where a built-in tool's call of the track's run runs."""
    setup = plan.setup
    return ToolContext(
        cwd=cwd,
        ledger=ledger,
        outside_ok=outside,
        env=plan.tool_environ,
        trusted_folder=setup is not None and setup.trusted,
        plugin_skills=setup.plugins.skill_folders if setup is not None else (),
        read_permission=_read_permission(track.state),
        sandbox=live.sandbox,
        private_network=setup is not None and setup.config.fetch_private,
        shells=live.shells,
        memory=memory,
    )


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
        return decide(run.settings.policy, run.settings.mode, state.allowed, "read", {"path": path}, state.cwd, roots).action

    return permission
