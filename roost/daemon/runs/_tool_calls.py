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
from typing import Any, Callable, Mapping

import trio

from roost.loop import (
    TOOL_PROGRESS,
    Abort,
    CheckFinished,
    Event,
    RunCheck,
    RunStopHooks,
    RunTool,
    SessionState,
    StartClock,
    StopHooksFinished,
    TimeUp,
    ToolFinished,
    decide,
    safe_text,
)

from ..folder._claude_rules import ClaudeRules
from ..folder._config import Hook
from ..mcp import McpManager
from ..sandbox import RunSandbox
from ..tools import ProcessLedger, ToolContext, ToolRegistry, ToolResult
from ._hooks import (
    HookEnv,
    PostOutcome,
    Subagent,
    run_post_hooks,
    run_pre_hooks,
    run_prompt_hooks,
    run_start_hooks,
    run_stop_hooks,
)
from ._model_calls import FeedResult
from ._plan import RunPlan
from ._sessions import Held, Session, Track
from ._transcript import Transcripts

log = logging.getLogger(__name__)

#: exec mode: how long one check may run, and how much of its output the model sees.
CHECK_TIMEOUT = 600.0
CHECK_OUTPUT = 4000


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
    ) -> None:
        self.tools = tools
        self._transcripts = transcripts
        self._mcp = mcp
        self._ledger = ledger
        self._publish = publish
        self._feed_result = feed_result

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
        return HookEnv(session.id, cwd, root, mode, environ, self._ledger, sandbox, transcript)

    async def _current(self, session: Session, hooks: tuple[Hook, ...]) -> None:
        """Before Claude Code hooks run: the transcript they are given holds every event
        stored so far."""
        if any(hook.event is not None for hook in hooks):
            await self._transcripts.sync(session.id)

    async def task_hooks(self, session: Session, plan: RunPlan, text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The SessionStart hooks, then :meth:`prompt_hooks`, for the task of a run not
        started yet: what both add, and which failed; a project's hooks run in a sandbox of
        their own."""
        confined = plan.confinement
        shown = (await self._transcripts.sync(session.id),)
        async with RunSandbox(confined, session.state.cwd, ledger=self._ledger, shown=shown) if confined else nullcontext() as box:
            state = session.state
            source = "startup" if state.last_run is None else "compact" if state.last_mode == "compact" else "resume"
            where = self._where(session, plan, plan.settings.mode, box)
            start = await run_start_hooks(plan.hooks, source, plan.settings.model, where)
            if start.failures:
                log.warning("session %s: %s", session.id, "; ".join(start.failures))
            context, failures = await self.prompt_hooks(session, plan, text, box)
            return start.context + context, start.failures + failures

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

    async def run_tool(self, session: Session, track: Track, effect: RunTool) -> None:
        """One tool call, between its PreToolUse and PostToolUse hooks."""
        live, plan = track.live, track.plan
        assert live is not None and plan is not None, "a tool runs in a run"
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
        where = self.hook_env(session, track)
        hooks = plan.hooks
        async with Held(live.tool_limiter):
            started = time.monotonic()
            await self._current(session, hooks)
            pre = await run_pre_hooks(hooks, call, where)
            input = pre.input if pre.input is not None else effect.input
            if pre.blocked is not None:
                result = ToolResult(f"blocked by a hook: {pre.blocked}", True, {"blocked": True})
            else:
                if self.tools.get(effect.name) is None and self._mcp is not None and "__" in effect.name:
                    result = await self._mcp.call(
                        effect.name,
                        input,
                        servers=plan.mcp_servers,
                        on_progress=self._progress(session, track, effect),
                    )
                else:
                    setup = plan.setup
                    ctx = ToolContext(
                        cwd=cwd,
                        ledger=self._ledger,
                        outside_ok=effect.outside,
                        env=plan.tool_environ,
                        trusted_folder=setup is not None and setup.trusted,
                        read_permission=_read_permission(track.state),
                        sandbox=live.sandbox,
                        private_network=setup is not None and setup.config.fetch_private,
                    )
                    result = await self.tools.call(effect.name, input, ctx)
                if pre.input is not None:
                    result = ToolResult(result.text, result.is_error, {**result.meta, "input_rewritten": True})
            # Post hooks see calls that ran: a blocked one has no result of its own.
            post = await run_post_hooks(hooks, call, result, where) if pre.blocked is None else PostOutcome(result)
            result = post.result
        if plan.setup is not None and not result.is_error:
            result = with_rules(result, effect.name, input, cwd, plan.setup.rules, live.rules_given)
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
            await self._feed_result(session, track, effect.run, abort_of(track, f"a hook stopped the run: {stop}"))

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
RULE_TOOLS = ("read", "write", "edit")


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
    return ToolResult(f"{result.text}\n\n{notes}", result.is_error, {**result.meta, "rules": [r.source for r in new]})


def abort_of(track: Track, reason: str) -> Abort:
    """An Abort of the track's run that keeps what its model call in flight streamed."""
    partial = track.streamed()
    return Abort(time.time(), reason, ({"type": "text", "text": partial},) if partial else ())


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
